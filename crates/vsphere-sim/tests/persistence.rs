//! A kept simulator (`persist`) comes back from its store as it was: every managed object
//! with the same reference and properties (UUIDs, power state, a clone made before the
//! restart), the instance UUID, the tags and what is kept beside the VMs; a task the
//! restart interrupted ends in error rather than running for ever; and an empty store gets
//! a fresh simulator, written whole.

use infrasim_clock::FakeClock;
use infrasim_durable::DurableBackend;
use infrasim_store::{Store, StoreConfig};
use infrasim_vsphere_sim::persist::{codec, Keeper};
use infrasim_vsphere_sim::value::Moref;
use infrasim_vsphere_sim::{SimConfig, Simulator, TagSpec};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

fn envelope(body: &str) -> String {
    format!(
        r#"<?xml version="1.0" encoding="UTF-8"?><soapenv:Envelope xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/"><soapenv:Body>{body}</soapenv:Body></soapenv:Envelope>"#
    )
}

fn clock() -> FakeClock {
    FakeClock::new("2030-01-01T00:00:00Z".parse().unwrap())
}

/// The durable store in `dir` and its group `vcenter`, where the tests keep their simulator.
fn open_group(dir: &Path, clock: &FakeClock) -> (Arc<infrasim_store::Group>, Arc<DurableBackend>) {
    let backend = Arc::new(DurableBackend::open(dir, 100).expect("the directory opens"));
    let config = StoreConfig {
        watch_window: 100,
        watcher_buffer: 100,
        packed: false,
        fresh: None,
    };
    let store =
        Store::open(config, Arc::new(clock.clone()), backend.clone()).expect("the store opens");
    (store.group_or_create("vcenter"), backend)
}

fn open(dir: &Path, clock: &FakeClock, config: SimConfig) -> (Simulator, Arc<DurableBackend>) {
    let (group, backend) = open_group(dir, clock);
    let sim = Simulator::kept(config, Arc::new(clock.clone()), Keeper::new(group))
        .expect("the simulator comes back");
    (sim, backend)
}

/// Every object's reference and properties, as the store's codec writes them.
fn everything(sim: &Simulator) -> BTreeMap<String, String> {
    sim.with_inventory(|inv| {
        inv.iter()
            .filter(|o| infrasim_vsphere_sim::persist::kept(&o.moref.ty, &o.moref.value))
            .map(|o| {
                let props = codec::encode_data(o.props.as_data()).to_string();
                (format!("{}:{}", o.moref.ty, o.moref.value), props)
            })
            .collect()
    })
}

async fn call(s: &Simulator, body: &str, cookie: Option<&str>) -> (u16, String, Option<String>) {
    let r = s.handle(&envelope(body), cookie, "test").await;
    (r.status, r.body, r.set_cookie)
}

async fn login(s: &Simulator) -> String {
    let (status, body, cookie) = call(s, r#"<Login xmlns="urn:vim25"><_this type="SessionManager">SessionManager</_this><userName>administrator@vsphere.local</userName><password>pw</password></Login>"#, None).await;
    assert_eq!(status, 200, "{body}");
    cookie.expect("a session cookie")
}

/// Every VM's reference, in order.
fn vms(s: &Simulator) -> Vec<Moref> {
    s.with_inventory(|inv| {
        let mut vms: Vec<Moref> = inv
            .iter()
            .filter(|o| o.moref.ty == "VirtualMachine")
            .map(|o| o.moref.clone())
            .collect();
        vms.sort();
        vms
    })
}

fn first_vm(s: &Simulator) -> Moref {
    vms(s).remove(0)
}

fn config(task_delay: Duration) -> SimConfig {
    SimConfig {
        password: "pw".into(),
        task_delay,
        ..SimConfig::default()
    }
}

#[tokio::test]
async fn a_kept_simulator_comes_back_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let clock = clock();
    let (sim, backend) = open(dir.path(), &clock, config(Duration::ZERO));
    let uuid = sim.config().instance_uuid.clone();
    let cookie = login(&sim).await;
    let vm = first_vm(&sim);
    let folder = sim.with_inventory(|inv| {
        let parent = inv.get(&vm).and_then(|o| o.props.get("parent").cloned());
        match parent {
            Some(infrasim_vsphere_sim::value::Val::Mor(m)) => m.value,
            other => panic!("no parent folder: {other:?}"),
        }
    });
    let clone = format!(
        r#"<CloneVM_Task xmlns="urn:vim25"><_this type="VirtualMachine">{}</_this><folder type="Folder">{folder}</folder><name>kept-clone</name><spec><location/><template>false</template><powerOn>true</powerOn></spec></CloneVM_Task>"#,
        vm.value
    );
    let (status, body, _) = call(&sim, &clone, Some(&cookie)).await;
    assert_eq!(status, 200, "{body}");
    let power_off = format!(
        r#"<PowerOffVM_Task xmlns="urn:vim25"><_this type="VirtualMachine">{}</_this></PowerOffVM_Task>"#,
        vm.value
    );
    let (status, body, _) = call(&sim, &power_off, Some(&cookie)).await;
    assert_eq!(status, 200, "{body}");
    let tag = TagSpec {
        category: "k8s-zone".into(),
        associable_types: vec![],
        tag: "zone-a".into(),
    };
    sim.attach_tag(&tag, &vm).expect("tagged");
    let before = everything(&sim);
    assert!(before.keys().any(|k| k.starts_with("VirtualMachine:")));
    let clone_ref = sim
        .find_named("VirtualMachine", "kept-clone", None)
        .expect("the clone");
    drop(sim);
    backend.close();
    drop(backend);

    // Another model in the configuration: what the store holds wins.
    let mut other = config(Duration::ZERO);
    other.model.vms = 7;
    let (sim, _backend) = open(dir.path(), &clock, other);
    assert_eq!(sim.config().instance_uuid, uuid);
    assert_eq!(everything(&sim), before);
    assert_eq!(
        sim.find_named("VirtualMachine", "kept-clone", None),
        Some(clone_ref.clone())
    );
    let state = sim.vm(&vm).expect("the VM");
    assert!(!state.powered_on, "{state:?}");
    assert!(sim.vm(&clone_ref).expect("the clone").powered_on);
    // The tag is still there: attaching it again finds it attached.
    sim.attach_tag(&tag, &vm).expect("still tagged");
    // New references do not reuse old ones.
    let cookie = login(&sim).await;
    let clone2 = clone.replace("kept-clone", "second-clone");
    let (status, body, _) = call(&sim, &clone2, Some(&cookie)).await;
    assert_eq!(status, 200, "{body}");
    let second = sim
        .find_named("VirtualMachine", "second-clone", None)
        .expect("made");
    assert!(!before.contains_key(&format!("VirtualMachine:{}", second.value)));
}

#[tokio::test]
async fn a_task_a_restart_interrupted_ends_in_error() {
    let dir = tempfile::tempdir().unwrap();
    let clock = clock();
    let (sim, backend) = open(dir.path(), &clock, config(Duration::from_secs(10)));
    let cookie = login(&sim).await;
    let vm = first_vm(&sim);
    let power_off = format!(
        r#"<PowerOffVM_Task xmlns="urn:vim25"><_this type="VirtualMachine">{}</_this></PowerOffVM_Task>"#,
        vm.value
    );
    let (status, body, _) = call(&sim, &power_off, Some(&cookie)).await;
    assert_eq!(status, 200, "{body}");
    let task = body.split("<returnval type=\"Task\">").nth(1).unwrap();
    let task = Moref::new("Task", task.split('<').next().unwrap());
    drop(sim);
    backend.close();
    drop(backend);

    let (sim, _backend) = open(dir.path(), &clock, config(Duration::from_secs(10)));
    let (state, fault) = sim.with_inventory(|inv| {
        let o = inv.get(&task).expect("the task is kept");
        let text = |p: &str| o.path(p).and_then(|v| v.as_str()).map(str::to_string);
        (text("info.state"), text("info.error.localizedMessage"))
    });
    assert_eq!(state.as_deref(), Some("error"));
    assert!(fault.unwrap_or_default().contains("restarted"));
    assert!(
        sim.vm(&vm).expect("the VM").powered_on,
        "the power-off never ran"
    );
}

/// Records of each kind the simulator's group holds.
fn counts(dir: &Path, clock: &FakeClock) -> BTreeMap<String, usize> {
    let (group, backend) = open_group(dir, clock);
    let out = group
        .object_counts()
        .into_iter()
        .map(|(r, n)| (r.to_string(), n))
        .collect();
    backend.close();
    out
}

/// The stored record of the object `value`, as text.
fn record_text(dir: &Path, clock: &FakeClock, value: &str) -> String {
    let (group, backend) = open_group(dir, clock);
    let key = infrasim_store::ObjectKey::new("", value);
    let text = group
        .get("managedobjects", &key)
        .and_then(|o| o.to_value().ok())
        .map(|v| v.to_string())
        .expect("the record");
    backend.close();
    text
}

#[tokio::test]
async fn long_lists_are_kept_in_pieces_and_come_back_whole() {
    let dir = tempfile::tempdir().unwrap();
    let clock = clock();
    let mut big = config(Duration::ZERO);
    big.model.vms = 400;
    let (sim, backend) = open(dir.path(), &clock, big.clone());
    let cookie = login(&sim).await;
    let vm = first_vm(&sim);
    let (folder, pool) = sim.with_inventory(|inv| {
        let o = inv.get(&vm).unwrap();
        let mor = |p: &str| match o.props.get(p) {
            Some(infrasim_vsphere_sim::value::Val::Mor(m)) => m.clone(),
            other => panic!("{p}: {other:?}"),
        };
        (mor("parent"), mor("resourcePool"))
    });
    let members = |sim: &Simulator| {
        sim.with_inventory(
            |inv| match inv.get(&folder).unwrap().props.get("childEntity") {
                Some(infrasim_vsphere_sim::value::Val::Array(_, items)) => items.len(),
                other => panic!("{other:?}"),
            },
        )
    };
    assert!(
        members(&sim) > 256,
        "the folder's list is long: {}",
        members(&sim)
    );
    let clone = format!(
        r#"<CloneVM_Task xmlns="urn:vim25"><_this type="VirtualMachine">{}</_this><folder type="Folder">{}</folder><name>piece-clone</name><spec><location><pool type="ResourcePool">{}</pool></location><template>false</template><powerOn>false</powerOn></spec></CloneVM_Task>"#,
        vm.value, folder.value, pool.value
    );
    let (status, body, _) = call(&sim, &clone, Some(&cookie)).await;
    assert_eq!(status, 200, "{body}");
    // A VM from the middle of the lists goes.
    let all = vms(&sim);
    let middle = all[all.len() / 2].clone();
    let destroy = format!(
        r#"<Destroy_Task xmlns="urn:vim25"><_this type="VirtualMachine">{}</_this></Destroy_Task>"#,
        middle.value
    );
    let (status, body, _) = call(&sim, &destroy, Some(&cookie)).await;
    assert_eq!(status, 200, "{body}");
    let before = everything(&sim);
    drop(sim);
    backend.close();
    drop(backend);

    let kept = counts(dir.path(), &clock);
    let pieces = kept.get("listpieces").copied().unwrap_or_default();
    assert!(pieces > 5, "the long lists are in pieces: {kept:?}");
    // The folder's own record names its pieces rather than holding its hundreds of VMs.
    let folder_record = record_text(dir.path(), &clock, &folder.value);
    assert!(
        folder_record.len() < 4000,
        "{} bytes: {folder_record}",
        folder_record.len()
    );
    let (sim, backend) = open(dir.path(), &clock, big.clone());
    assert_eq!(everything(&sim), before);
    assert!(sim
        .find_named("VirtualMachine", "piece-clone", None)
        .is_some());
    // A second clone writes a piece or two per long list, not every piece again.
    let cookie = login(&sim).await;
    let (status, body, _) = call(
        &sim,
        &clone.replace("piece-clone", "piece-clone-2"),
        Some(&cookie),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let before = everything(&sim);
    drop(sim);
    backend.close();
    drop(backend);
    let (sim, _backend) = open(dir.path(), &clock, big);
    assert_eq!(everything(&sim), before);
}

#[tokio::test]
async fn a_guest_booting_when_the_process_died_comes_up_after_the_restart() {
    let dir = tempfile::tempdir().unwrap();
    let clock = clock();
    let (sim, backend) = open(dir.path(), &clock, config(Duration::ZERO));
    let cookie = login(&sim).await;
    let vm = first_vm(&sim);
    let power = |method: &str| {
        format!(
            r#"<{method} xmlns="urn:vim25"><_this type="VirtualMachine">{}</_this></{method}>"#,
            vm.value
        )
    };
    if sim.vm(&vm).unwrap().powered_on {
        let (status, body, _) = call(&sim, &power("PowerOffVM_Task"), Some(&cookie)).await;
        assert_eq!(status, 200, "{body}");
    }
    let (status, body, _) = call(&sim, &power("PowerOnVM_Task"), Some(&cookie)).await;
    assert_eq!(status, 200, "{body}");
    let state = sim.vm(&vm).unwrap();
    assert!(state.powered_on && state.ip.is_none(), "booting: {state:?}");
    drop(sim);
    backend.close();
    drop(backend);

    let (sim, _backend) = open(dir.path(), &clock, config(Duration::ZERO));
    assert_eq!(
        sim.vm(&vm).unwrap().ip,
        None,
        "not up before its boot delay"
    );
    clock.advance(Duration::from_secs(1));
    let state = sim.vm(&vm).unwrap();
    assert!(
        state.powered_on && state.ip.is_some(),
        "up after it: {state:?}"
    );
}
