//! WaitForUpdatesEx as vCenter answers it: everything on the empty version, then only what
//! changed (per object, per property), `enter`/`leave` as objects join and leave a view,
//! `maxObjectUpdates` cutting an answer short with `truncated`, and versions the collector
//! never returned refused.

use infrasim_clock::FakeClock;
use infrasim_vsphere_sim::{SimConfig, Simulator};
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

fn envelope(body: &str) -> String {
    format!(
        r#"<?xml version="1.0" encoding="UTF-8"?><soapenv:Envelope xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"><soapenv:Body>{body}</soapenv:Body></soapenv:Envelope>"#
    )
}

/// A logged-in simulator of the default model.
struct Client {
    sim: Simulator,
    cookie: String,
}

impl Client {
    async fn new() -> Client {
        let clock = FakeClock::new("2030-01-01T00:00:00Z".parse().unwrap());
        let config = SimConfig {
            password: "pw".into(),
            session_idle: Duration::from_secs(600),
            ..SimConfig::default()
        };
        let sim = Simulator::new(config, Arc::new(clock));
        let r = sim
            .handle(
                &envelope(r#"<Login xmlns="urn:vim25"><_this type="SessionManager">SessionManager</_this><userName>administrator@vsphere.local</userName><password>pw</password></Login>"#),
                None,
                "test",
            )
            .await;
        assert_eq!(r.status, 200, "{}", r.body);
        let cookie = r.set_cookie.expect("a session cookie");
        Client { sim, cookie }
    }

    /// One call; its answer's body (a fault fails the test unless `fault_ok`).
    async fn call_as(&self, body: &str, fault_ok: bool) -> String {
        let r = self
            .sim
            .handle(&envelope(body), Some(&self.cookie), "test")
            .await;
        assert!(fault_ok || r.status == 200, "{body}: {}", r.body);
        r.body
    }

    async fn call(&self, body: &str) -> String {
        self.call_as(body, false).await
    }

    /// A filter over a container view of every VM, asking name and power state.
    async fn filter_on_every_vm(&self) -> String {
        let view = self.call(r#"<CreateContainerView xmlns="urn:vim25"><_this type="ViewManager">ViewManager</_this><container type="Folder">group-d1</container><type>VirtualMachine</type><recursive>true</recursive></CreateContainerView>"#).await;
        let view = texts(&view, "returnval").remove(0);
        let filter = self.call(&format!(r#"<CreateFilter xmlns="urn:vim25"><_this type="PropertyCollector">propertyCollector</_this><spec><propSet><type>VirtualMachine</type><pathSet>name</pathSet><pathSet>runtime.powerState</pathSet></propSet><objectSet><obj type="ContainerView">{view}</obj><skip>true</skip><selectSet xsi:type="TraversalSpec"><name>view</name><type>ContainerView</type><path>view</path><skip>false</skip></selectSet></objectSet></spec><partialUpdates>false</partialUpdates></CreateFilter>"#)).await;
        texts(&filter, "returnval").remove(0)
    }

    async fn wait(&self, version: &str, max_updates: Option<usize>) -> String {
        self.wait_on("propertyCollector", version, max_updates)
            .await
    }

    async fn wait_on(&self, collector: &str, version: &str, max_updates: Option<usize>) -> String {
        let max = max_updates
            .map(|n| format!("<maxObjectUpdates>{n}</maxObjectUpdates>"))
            .unwrap_or_default();
        self.call_as(&format!(r#"<WaitForUpdatesEx xmlns="urn:vim25"><_this type="PropertyCollector">{collector}</_this><version>{version}</version><options><maxWaitSeconds>0</maxWaitSeconds>{max}</options></WaitForUpdatesEx>"#), true).await
    }

    async fn vms(&self) -> Vec<String> {
        self.sim.with_inventory(|inv| {
            inv.iter()
                .filter(|o| o.moref.ty == "VirtualMachine")
                .map(|o| o.moref.value.clone())
                .collect()
        })
    }
}

/// The texts of every element named `tag`.
fn texts(xml: &str, tag: &str) -> Vec<String> {
    let mut out = Vec::new();
    let open = format!("<{tag}");
    let mut rest = xml;
    while let Some(i) = rest.find(&open) {
        rest = &rest[i + open.len()..];
        if !rest.starts_with('>') && !rest.starts_with(' ') {
            continue;
        }
        let start = rest.find('>').unwrap() + 1;
        let end = rest[start..].find('<').unwrap();
        out.push(rest[start..start + end].to_string());
        rest = &rest[start + end..];
    }
    out
}

/// The object updates of an answer: (kind, object, names of the changed properties).
fn object_updates(xml: &str) -> Vec<(String, String, Vec<String>)> {
    xml.split("<objectSet>")
        .skip(1)
        .map(|o| {
            let o = o.split("</objectSet>").next().unwrap();
            (
                texts(o, "kind").remove(0),
                texts(o, "obj").remove(0),
                texts(o, "name"),
            )
        })
        .collect()
}

#[tokio::test]
async fn a_view_filter_reports_every_vm_then_only_what_changed() {
    let c = Client::new().await;
    let filter = c.filter_on_every_vm().await;
    // A second collector's filter on one VM only: it hears nothing of the others.
    let vms = c.vms().await;
    assert!(vms.len() > 2, "the default model has VMs");
    let other = c.call(r#"<CreatePropertyCollector xmlns="urn:vim25"><_this type="PropertyCollector">propertyCollector</_this></CreatePropertyCollector>"#).await;
    let other = texts(&other, "returnval").remove(0);
    c.call(&format!(r#"<CreateFilter xmlns="urn:vim25"><_this type="PropertyCollector">{other}</_this><spec><propSet><type>VirtualMachine</type><pathSet>runtime.powerState</pathSet></propSet><objectSet><obj type="VirtualMachine">{}</obj></objectSet></spec><partialUpdates>false</partialUpdates></CreateFilter>"#, vms[1])).await;
    let alone = c.wait_on(&other, "", None).await;
    assert_eq!(object_updates(&alone).len(), 1, "{alone}");
    let other_version = texts(&alone, "version").remove(0);
    let first = c.wait("", None).await;
    let entered = object_updates(&first);
    assert_eq!(entered.len(), vms.len(), "{first}");
    assert!(entered
        .iter()
        .all(|(kind, _, props)| kind == "enter" && props.len() == 2));
    assert!(first.contains(&filter));
    let version = texts(&first, "version").remove(0);

    let vm = &vms[0];
    c.call(&format!(r#"<PowerOffVM_Task xmlns="urn:vim25"><_this type="VirtualMachine">{vm}</_this></PowerOffVM_Task>"#)).await;
    let next = c.wait(&version, None).await;
    assert_eq!(
        object_updates(&next),
        vec![(
            "modify".to_string(),
            vm.clone(),
            vec!["runtime.powerState".to_string()]
        )],
        "{next}"
    );
    let version = texts(&next, "version").remove(0);
    assert!(
        !c.wait(&version, None).await.contains("<returnval>"),
        "nothing changed since"
    );
    let unmoved = c.wait_on(&other, &other_version, None).await;
    assert!(!unmoved.contains("<returnval>"), "{unmoved}");

    // A clone enters the view; destroyed, it leaves.
    let parent = c.call(&format!(r#"<Fetch xmlns="urn:vim25"><_this type="VirtualMachine">{vm}</_this><prop>parent</prop></Fetch>"#)).await;
    let folder = texts(&parent, "returnval").remove(0);
    c.call(&format!(r#"<CloneVM_Task xmlns="urn:vim25"><_this type="VirtualMachine">{vm}</_this><folder type="Folder">{folder}</folder><name>updates-clone</name><spec><location/><template>false</template><powerOn>false</powerOn></spec></CloneVM_Task>"#)).await;
    let cloned = c.wait(&version, None).await;
    let updates = object_updates(&cloned);
    assert_eq!(updates.len(), 1, "{cloned}");
    let (kind, clone, props) = &updates[0];
    assert_eq!(kind, "enter");
    assert_eq!(props.len(), 2);
    assert!(cloned.contains("updates-clone"));
    let version = texts(&cloned, "version").remove(0);
    c.call(&format!(r#"<Destroy_Task xmlns="urn:vim25"><_this type="VirtualMachine">{clone}</_this></Destroy_Task>"#)).await;
    let left = c.wait(&version, None).await;
    assert_eq!(
        object_updates(&left),
        vec![("leave".to_string(), clone.clone(), vec![])],
        "{left}"
    );
}

#[tokio::test]
async fn max_object_updates_cuts_an_answer_short_and_the_rest_follows() {
    let c = Client::new().await;
    c.filter_on_every_vm().await;
    let vms: HashSet<String> = c.vms().await.into_iter().collect();
    let mut version = String::new();
    let mut seen = Vec::new();
    let mut truncated_answers = 0;
    loop {
        let answer = c.wait(&version, Some(2)).await;
        let updates = object_updates(&answer);
        assert!(updates.len() <= 2, "{answer}");
        seen.extend(updates.into_iter().map(|(kind, obj, _)| {
            assert_eq!(kind, "enter");
            obj
        }));
        version = texts(&answer, "version").remove(0);
        if !answer.contains("<truncated>true</truncated>") {
            break;
        }
        truncated_answers += 1;
    }
    assert!(truncated_answers >= vms.len() / 2 - 1);
    assert_eq!(seen.len(), vms.len(), "each VM entered once: {seen:?}");
    assert_eq!(seen.into_iter().collect::<HashSet<_>>(), vms);
    assert!(!c.wait(&version, None).await.contains("<returnval>"));
}

#[tokio::test]
async fn the_empty_version_asks_for_everything_and_unknown_versions_are_refused() {
    let c = Client::new().await;
    c.filter_on_every_vm().await;
    let vms = c.vms().await.len();
    let first = c.wait("", None).await;
    assert_eq!(object_updates(&first).len(), vms);
    let again = c.wait("", None).await;
    assert_eq!(object_updates(&again).len(), vms, "{again}");
    assert_ne!(texts(&first, "version"), texts(&again, "version"));
    for bad in ["999", "not-a-version"] {
        let refused = c.wait(bad, None).await;
        assert!(refused.contains("InvalidCollectorVersion"), "{refused}");
    }
}
