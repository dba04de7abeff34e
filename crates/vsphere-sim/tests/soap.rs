//! The simulator through its SOAP entry point: sessions that expire on an injected clock,
//! WaitForUpdatesEx timing out and waking, and faults for bad requests.

use infrasim_clock::FakeClock;
use infrasim_vsphere_sim::{SimConfig, Simulator};
use std::sync::Arc;
use std::time::Duration;

fn envelope(body: &str) -> String {
    format!(
        r#"<?xml version="1.0" encoding="UTF-8"?><soapenv:Envelope xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xmlns:xsd="http://www.w3.org/2001/XMLSchema"><soapenv:Body>{body}</soapenv:Body></soapenv:Envelope>"#
    )
}

fn sim(clock: &FakeClock) -> Simulator {
    let config = SimConfig {
        password: "pw".into(),
        session_idle: Duration::from_secs(600),
        ..SimConfig::default()
    };
    Simulator::new(config, Arc::new(clock.clone()))
}

async fn login(s: &Simulator) -> String {
    let r = s
        .handle(
            &envelope(r#"<Login xmlns="urn:vim25"><_this type="SessionManager">SessionManager</_this><userName>administrator@vsphere.local</userName><password>pw</password></Login>"#),
            None,
            "test",
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    r.set_cookie.expect("login sets the session cookie")
}

fn fetch_root_children() -> String {
    envelope(
        r#"<Fetch xmlns="urn:vim25"><_this type="Folder">group-d1</_this><prop>childEntity</prop></Fetch>"#,
    )
}

#[tokio::test]
async fn idle_sessions_expire_on_the_simulators_clock() {
    let clock = FakeClock::new("2030-01-01T00:00:00Z".parse().unwrap());
    let s = sim(&clock);
    let cookie = login(&s).await;
    let ok = s
        .handle(&fetch_root_children(), Some(&cookie), "test")
        .await;
    assert_eq!(ok.status, 200);
    assert!(ok.body.contains(r#"type="Datacenter""#), "{}", ok.body);
    // Activity keeps it alive; idleness past the limit ends it.
    clock.advance(Duration::from_secs(500));
    assert_eq!(
        s.handle(&fetch_root_children(), Some(&cookie), "test")
            .await
            .status,
        200
    );
    clock.advance(Duration::from_secs(601));
    let expired = s
        .handle(&fetch_root_children(), Some(&cookie), "test")
        .await;
    assert_eq!(expired.status, 500);
    assert!(
        expired.body.contains(r#"xsi:type="NotAuthenticated""#),
        "{}",
        expired.body
    );
}

#[tokio::test]
async fn wrong_credentials_and_missing_sessions_fault() {
    let clock = FakeClock::new("2030-01-01T00:00:00Z".parse().unwrap());
    let s = sim(&clock);
    let bad = s
        .handle(
            &envelope(r#"<Login xmlns="urn:vim25"><_this type="SessionManager">SessionManager</_this><userName>administrator@vsphere.local</userName><password>nope</password></Login>"#),
            None,
            "test",
        )
        .await;
    assert!(bad.body.contains(r#"xsi:type="InvalidLogin""#));
    assert!(bad.set_cookie.is_none());
    let anonymous = s.handle(&fetch_root_children(), None, "test").await;
    assert!(anonymous.body.contains(r#"xsi:type="NotAuthenticated""#));
    let forged = s
        .handle(
            &fetch_root_children(),
            Some("vmware_soap_session=\"forged\""),
            "test",
        )
        .await;
    assert!(forged.body.contains(r#"xsi:type="NotAuthenticated""#));
}

#[tokio::test]
async fn unknown_methods_objects_and_bodies_fault_cleanly() {
    let clock = FakeClock::new("2030-01-01T00:00:00Z".parse().unwrap());
    let s = sim(&clock);
    let cookie = login(&s).await;
    let missing = s
        .handle(
            &envelope(r#"<Fetch xmlns="urn:vim25"><_this type="VirtualMachine">vm-424242</_this><prop>name</prop></Fetch>"#),
            Some(&cookie),
            "t",
        )
        .await;
    assert!(missing.body.contains(r#"xsi:type="ManagedObjectNotFound""#));
    assert!(missing
        .body
        .contains(r#"<obj type="VirtualMachine">vm-424242</obj>"#));
    let unknown = s
        .handle(&envelope(r#"<Frobnicate xmlns="urn:vim25"><_this type="Folder">group-d1</_this></Frobnicate>"#), Some(&cookie), "t")
        .await;
    assert!(unknown.body.contains(r#"xsi:type="MethodNotFound""#));
    for junk in ["", "<", "<soapenv:Envelope>", &"<a>".repeat(10_000)] {
        let r = s.handle(junk, Some(&cookie), "t").await;
        assert_eq!(r.status, 500);
        assert!(r.body.contains("ClientFaultCode"), "{junk:.20}: {}", r.body);
    }
}

#[tokio::test]
async fn wait_for_updates_ex_times_out_then_wakes_on_a_change() {
    let clock = FakeClock::new("2030-01-01T00:00:00Z".parse().unwrap());
    let s = sim(&clock);
    let cookie = login(&s).await;
    let filter = s
        .handle(
            &envelope(r#"<CreateFilter xmlns="urn:vim25"><_this type="PropertyCollector">propertyCollector</_this><spec><propSet><type>VirtualMachine</type><pathSet>runtime.powerState</pathSet></propSet><objectSet><obj type="VirtualMachine">vm-13</obj></objectSet></spec><partialUpdates>false</partialUpdates></CreateFilter>"#),
            Some(&cookie),
            "t",
        )
        .await;
    assert_eq!(filter.status, 200, "{}", filter.body);
    let wait = |version: &str, max: u32| {
        envelope(&format!(
            r#"<WaitForUpdatesEx xmlns="urn:vim25"><_this type="PropertyCollector">propertyCollector</_this><version>{version}</version><options><maxWaitSeconds>{max}</maxWaitSeconds></options></WaitForUpdatesEx>"#
        ))
    };
    let first = s.handle(&wait("", 0), Some(&cookie), "t").await;
    assert!(first.body.contains("<kind>enter</kind>"), "{}", first.body);
    assert!(first.body.contains("poweredOn"));
    // Nothing changed: with maxWaitSeconds 0 the answer is empty at once.
    let none = s.handle(&wait("1", 0), Some(&cookie), "t").await;
    assert!(!none.body.contains("<returnval>"), "{}", none.body);
    // A waiting call wakes when another session's write changes the property.
    let waiter = {
        let s = s.clone();
        let cookie = cookie.clone();
        let body = wait("1", 600);
        tokio::spawn(async move { s.handle(&body, Some(&cookie), "t").await })
    };
    tokio::task::yield_now().await;
    let off = s
        .handle(
            &envelope(r#"<PowerOffVM_Task xmlns="urn:vim25"><_this type="VirtualMachine">vm-13</_this></PowerOffVM_Task>"#),
            Some(&cookie),
            "t",
        )
        .await;
    assert!(off.body.contains(r#"type="Task""#), "{}", off.body);
    let woke = tokio::time::timeout(Duration::from_secs(10), waiter)
        .await
        .unwrap()
        .unwrap();
    assert!(woke.body.contains("<kind>modify</kind>"), "{}", woke.body);
    assert!(woke.body.contains("poweredOff"));
}

/// A REST request through the simulator's REST entry point; status and JSON body.
fn rest(
    s: &Simulator,
    method: http::Method,
    path: &str,
    headers: &[(&str, &str)],
) -> (u16, serde_json::Value) {
    let mut map = http::HeaderMap::new();
    for (k, v) in headers {
        map.insert(
            http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
            v.parse().unwrap(),
        );
    }
    let (path, query) = path
        .split_once('?')
        .map_or((path, None), |(p, q)| (p, Some(q)));
    let a = s
        .handle_rest(&method, path, query, &map, b"")
        .expect("a REST path");
    (a.status, serde_json::from_str(&a.body).unwrap_or_default())
}

#[tokio::test]
async fn rest_sessions_open_from_soap_expire_when_idle_and_are_no_soap_cookie() {
    let clock = FakeClock::new("2030-01-01T00:00:00Z".parse().unwrap());
    let s = sim(&clock);
    let cookie = login(&s).await;
    let cookie = cookie.split(';').next().unwrap().to_string();
    // A live SOAP session opens a REST one.
    let (status, body) = rest(
        &s,
        http::Method::POST,
        "/rest/com/vmware/cis/session",
        &[("cookie", &cookie)],
    );
    assert_eq!(status, 200, "{body}");
    let token = body["value"].as_str().unwrap().to_string();
    let get = "/rest/com/vmware/cis/session?~action=get";
    let with_token = [("vmware-api-session-id", token.as_str())];
    assert_eq!(rest(&s, http::Method::POST, get, &with_token).0, 200);
    // The REST token is not a SOAP session.
    let as_cookie = format!("vmware_soap_session=\"{token}\"");
    let r = s
        .handle(&fetch_root_children(), Some(&as_cookie), "test")
        .await;
    assert_eq!(r.status, 500, "{}", r.body);
    // Idle past the timeout, it ends; a request within it keeps it alive.
    clock.advance(Duration::from_secs(599));
    assert_eq!(rest(&s, http::Method::POST, get, &with_token).0, 200);
    clock.advance(Duration::from_secs(601));
    assert_eq!(rest(&s, http::Method::POST, get, &with_token).0, 401);
    // Without credentials or a session, no login.
    assert_eq!(rest(&s, http::Method::POST, "/api/session", &[]).0, 401);
}

#[tokio::test]
async fn injected_delays_run_on_the_simulators_clock_and_faults_come_back_as_soap_faults() {
    use infrasim_vsphere_sim::fault_injection::{Injection, Target};
    let clock = FakeClock::new("2030-01-01T00:00:00Z".parse().unwrap());
    let s = sim(&clock);
    let cookie = login(&s).await;
    let cookie = cookie.split(';').next().unwrap().to_string();
    s.inject(Injection::delay(
        "Fetch",
        Target::Type("Folder".into()),
        Duration::from_secs(5),
    ));
    let call = {
        let (s, cookie) = (s.clone(), cookie.clone());
        tokio::spawn(async move {
            s.handle(&fetch_root_children(), Some(&cookie), "test")
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(!call.is_finished(), "the call waits for the injected delay");
    clock.advance(Duration::from_secs(5));
    assert_eq!(call.await.unwrap().status, 200);

    s.set_injections(vec![Injection::fail(
        "Fetch",
        Target::Any,
        "HostCommunication",
    )
    .unwrap()]);
    let r = s
        .handle(&fetch_root_children(), Some(&cookie), "test")
        .await;
    assert_eq!(r.status, 500);
    assert!(r.body.contains("HostCommunication"), "{}", r.body);
    s.set_injections(Vec::new());
    assert_eq!(
        s.handle(&fetch_root_children(), Some(&cookie), "test")
            .await
            .status,
        200
    );
}

#[tokio::test]
async fn a_destroyed_vm_loses_its_tags_and_cluster_module_memberships() {
    let clock = FakeClock::new("2030-01-01T00:00:00Z".parse().unwrap());
    let s = sim(&clock);
    let cookie = login(&s).await;
    let cookie = cookie.split(';').next().unwrap().to_string();
    let call = |method: http::Method, path: &str, token: Option<&str>, body: serde_json::Value| {
        let mut headers = http::HeaderMap::new();
        headers.insert("cookie", cookie.parse().unwrap());
        if let Some(t) = token {
            headers.insert("vmware-api-session-id", t.parse().unwrap());
        }
        let (path, query) = path
            .split_once('?')
            .map_or((path, None), |(p, q)| (p, Some(q)));
        let a = s
            .handle_rest(&method, path, query, &headers, body.to_string().as_bytes())
            .unwrap();
        serde_json::from_str::<serde_json::Value>(&a.body).unwrap_or_default()
    };
    let token = call(
        http::Method::POST,
        "/api/session",
        None,
        serde_json::json!({}),
    );
    let token = token.as_str().unwrap().to_string();
    let t = Some(token.as_str());
    let (vm, cluster) = s.with_inventory(|inv| {
        let first = |ty: &str| {
            inv.iter()
                .find(|o| o.moref.ty == ty)
                .unwrap()
                .moref
                .value
                .clone()
        };
        (first("VirtualMachine"), first("ClusterComputeResource"))
    });
    let category = call(
        http::Method::POST,
        "/api/cis/tagging/category",
        t,
        serde_json::json!({"name": "c", "cardinality": "MULTIPLE", "associable_types": []}),
    );
    let tag = call(
        http::Method::POST,
        "/api/cis/tagging/tag",
        t,
        serde_json::json!({"name": "t", "category_id": category}),
    );
    let tag = tag.as_str().unwrap();
    let object = serde_json::json!({"object_id": {"type": "VirtualMachine", "id": vm}});
    call(
        http::Method::POST,
        &format!("/api/cis/tagging/tag-association/{tag}?action=attach"),
        t,
        object.clone(),
    );
    let module = call(
        http::Method::POST,
        "/api/vcenter/cluster/modules",
        t,
        serde_json::json!({"cluster": cluster}),
    );
    let module = module.as_str().unwrap();
    let members = format!("/api/vcenter/cluster/modules/vm/{module}/members");
    call(
        http::Method::POST,
        &format!("{members}?action=add"),
        t,
        serde_json::json!({"vms": [vm]}),
    );
    assert_eq!(
        call(http::Method::GET, &members, t, serde_json::json!({}))["vms"],
        serde_json::json!([vm])
    );

    for method in ["PowerOffVM_Task", "Destroy_Task"] {
        let body = envelope(&format!(
            r#"<{method} xmlns="urn:vim25"><_this type="VirtualMachine">{vm}</_this></{method}>"#
        ));
        let r = s.handle(&body, Some(&cookie), "test").await;
        assert_eq!(r.status, 200, "{}", r.body);
    }
    assert!(
        s.with_inventory(|inv| inv.by_value(&vm).is_none()),
        "the VM is gone"
    );
    let listed = call(
        http::Method::POST,
        "/api/cis/tagging/tag-association?action=list-attached-objects-on-tags",
        t,
        serde_json::json!({"tag_ids": [tag]}),
    );
    assert_eq!(listed[0]["object_ids"], serde_json::json!([]));
    assert_eq!(
        call(http::Method::GET, &members, t, serde_json::json!({}))["vms"],
        serde_json::json!([])
    );
}

/// PbmQueryAssociatedProfile for a VM, through the PBM entry point; the profile IDs answered.
fn associated_profiles(s: &Simulator, cookie: &str, vm: &str) -> Vec<String> {
    associated_profiles_of(s, cookie, vm, "virtualMachine")
}

/// The policies PBM associates with an entity (`virtualMachine` `vm-N`, `virtualDiskId`
/// `vm-N:<disk key>`).
fn associated_profiles_of(s: &Simulator, cookie: &str, key: &str, ty: &str) -> Vec<String> {
    let r = s.handle_pbm(
        &envelope(&format!(
            r#"<PbmQueryAssociatedProfile xmlns="urn:pbm"><_this type="PbmProfileProfileManager">profileManager</_this><entity><key>{key}</key><objectType>{ty}</objectType><serverUuid>x</serverUuid></entity></PbmQueryAssociatedProfile>"#
        )),
        Some(cookie),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    r.body
        .split("<uniqueId>")
        .skip(1)
        .filter_map(|s| s.split("</uniqueId>").next())
        .map(str::to_string)
        .collect()
}

const FETCH_ROOT: &str = r#"<Fetch xmlns="urn:vim25"><_this type="Folder">group-d1</_this><prop>childEntity</prop></Fetch>"#;

#[tokio::test]
async fn storage_policies_follow_clone_and_reconfigure_specs() {
    const VSAN_DEFAULT: &str = "aa6d5a82-1c88-45da-85d3-3d74b91a5bad";
    const ENCRYPTION: &str = "4d5f673c-536f-11e6-beb8-9e71128cae77";
    let clock = FakeClock::new("2030-01-01T00:00:00Z".parse().unwrap());
    let s = sim(&clock);
    let cookie = login(&s).await;
    let cookie = cookie.split(';').next().unwrap().to_string();
    let (template, folder) = s.with_inventory(|inv| {
        let vm = inv.iter().find(|o| o.moref.ty == "VirtualMachine").unwrap();
        let folder = vm.props["parent"].as_mor().unwrap().value.clone();
        (vm.moref.value.clone(), folder)
    });
    assert!(associated_profiles(&s, &cookie, &template).is_empty());
    let call = |body: String| {
        let (s, cookie) = (&s, &cookie);
        async move {
            let r = s.handle(&envelope(&body), Some(cookie), "test").await;
            assert_eq!(r.status, 200, "{}", r.body);
        }
    };
    call(format!(
        r#"<CloneVM_Task xmlns="urn:vim25"><_this type="VirtualMachine">{template}</_this><folder type="Folder">{folder}</folder><name>with-policy</name><spec><location><profile xsi:type="VirtualMachineDefinedProfileSpec"><profileId>{VSAN_DEFAULT}</profileId></profile><disk><diskId>2000</diskId><datastore type="Datastore">datastore-1</datastore><profile xsi:type="VirtualMachineDefinedProfileSpec"><profileId>{ENCRYPTION}</profileId></profile></disk></location><powerOn>false</powerOn><template>false</template></spec></CloneVM_Task>"#
    ))
    .await;
    // The clone runs at the next request, as a client waiting for its task makes one.
    call(FETCH_ROOT.to_string()).await;
    let clone = s.with_inventory(|inv| {
        let o = inv.iter().find(|o| o.name() == "with-policy").unwrap();
        o.moref.value.clone()
    });
    assert_eq!(associated_profiles(&s, &cookie, &clone), [VSAN_DEFAULT]);
    assert!(associated_profiles(&s, &cookie, &template).is_empty());
    // The disk's own policy, from its locator, as PBM's virtualDiskId (`vm:disk key`).
    let disk = format!("{clone}:2000");
    assert_eq!(
        associated_profiles_of(&s, &cookie, &disk, "virtualDiskId"),
        [ENCRYPTION]
    );
    assert!(
        associated_profiles_of(&s, &cookie, &format!("{template}:2000"), "virtualDiskId")
            .is_empty()
    );

    call(format!(
        r#"<ReconfigVM_Task xmlns="urn:vim25"><_this type="VirtualMachine">{clone}</_this><spec><vmProfile xsi:type="VirtualMachineEmptyProfileSpec"></vmProfile></spec></ReconfigVM_Task>"#
    ))
    .await;
    call(FETCH_ROOT.to_string()).await;
    assert!(associated_profiles(&s, &cookie, &clone).is_empty());
}

#[tokio::test]
async fn reconfigured_nics_move_their_vm_between_networks_with_ports_and_address_types() {
    let clock = FakeClock::new("2030-01-01T00:00:00Z".parse().unwrap());
    let s = sim(&clock);
    let cookie = login(&s).await;
    let (vm, net, pg, switch) = s.with_inventory(|inv| {
        let of = |ty: &str| {
            inv.iter()
                .find(|o| o.moref.ty == ty)
                .map(|o| o.moref.value.clone())
                .unwrap()
        };
        let pg = of("DistributedVirtualPortgroup");
        let dvs = inv
            .iter()
            .find(|o| o.moref.ty == "VmwareDistributedVirtualSwitch")
            .unwrap();
        let uuid = dvs
            .props
            .get("uuid")
            .and_then(|u| u.as_str())
            .unwrap()
            .to_string();
        (of("VirtualMachine"), of("Network"), pg, uuid)
    });
    let vms_of = |network: &str, ty: &str| {
        s.with_inventory(|inv| {
            let m = infrasim_vsphere_sim::value::Moref::new(ty, network);
            inv.get(&m)
                .and_then(|o| o.props.get("vm"))
                .map(|l| l.morefs().into_iter().map(|m| m.value).collect::<Vec<_>>())
                .unwrap_or_default()
        })
    };
    assert!(vms_of(&net, "Network").contains(&vm));
    assert!(!vms_of(&pg, "DistributedVirtualPortgroup").contains(&vm));
    let reconfigure = |change: String| {
        envelope(&format!(
            r#"<ReconfigVM_Task xmlns="urn:vim25" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"><_this type="VirtualMachine">{vm}</_this><spec>{change}</spec></ReconfigVM_Task>"#
        ))
    };
    // A NIC on the port group with a MAC of the client's, and the old NIC removed.
    let add = format!(
        r#"<deviceChange><operation>add</operation><device xsi:type="VirtualVmxnet3"><key>-1</key><backing xsi:type="VirtualEthernetCardDistributedVirtualPortBackingInfo"><port><switchUuid>{switch}</switchUuid><portgroupKey>{pg}</portgroupKey></port></backing><macAddress>00:50:56:aa:bb:cc</macAddress></device></deviceChange><deviceChange><operation>remove</operation><device xsi:type="VirtualVmxnet3"><key>4000</key></device></deviceChange>"#
    );
    let r = s.handle(&reconfigure(add), Some(&cookie), "t").await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(
        !vms_of(&net, "Network").contains(&vm),
        "the VM left VM Network"
    );
    assert!(vms_of(&pg, "DistributedVirtualPortgroup").contains(&vm));
    let nic = s.with_inventory(|inv| {
        let o = inv
            .get(&infrasim_vsphere_sim::value::Moref::new(
                "VirtualMachine",
                &vm,
            ))
            .unwrap();
        match o.path("config.hardware.device") {
            Some(infrasim_vsphere_sim::value::Val::Array(_, d)) => d
                .iter()
                .find(|d| d.path("backing.port.portgroupKey").is_some())
                .cloned()
                .unwrap(),
            _ => panic!("no devices"),
        }
    });
    use infrasim_vsphere_sim::value::Val;
    assert_eq!(nic.path("addressType"), Some(&Val::Str("manual".into())));
    assert_eq!(
        nic.path("backing.port.portKey"),
        Some(&Val::Str("0".into()))
    );
    assert!(matches!(
        nic.path("backing.port.connectionCookie"),
        Some(Val::Int(c)) if *c >= 0
    ));
}
