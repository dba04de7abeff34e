//! The client against a simulator in this process: trust, listing, a clone through its task,
//! custom fields, power and destroy, and logging in again after the session is gone.

use infrasim_clock::SystemClock;
use infrasim_vim_client::{ops, Client, CloneSpec, Credentials, Moref, Trust};
use infrasim_vsphere_sim::{Instance, SimConfig};
use std::time::Duration;

async fn simulator() -> Instance {
    let config = SimConfig {
        username: "user".into(),
        password: "pass<&>".into(),
        guest_delay: Duration::from_millis(10),
        ..SimConfig::default()
    };
    Instance::start(config, ([127, 0, 0, 1], 0).into(), SystemClock::shared())
        .await
        .unwrap()
}

fn credentials(sim: &Instance, trust: Trust) -> Credentials {
    Credentials {
        server: sim.addr().to_string(),
        username: "user".into(),
        password: "pass<&>".into(),
        trust,
    }
}

#[tokio::test]
async fn a_pinned_thumbprint_is_trusted_and_another_is_refused() {
    let sim = simulator().await;
    let sha1 = Trust::Thumbprint(sim.cert().thumbprint_sha1.clone());
    assert!(Client::connect(credentials(&sim, sha1)).await.is_ok());
    let ca = Trust::CaBundle(sim.cert_pem().to_string());
    // The simulator's self-signed certificate is its own CA, for "localhost" and its IP.
    let by_ca = Client::connect(credentials(&sim, ca)).await;
    assert!(by_ca.is_ok(), "{:?}", by_ca.err());
    let wrong = Trust::Thumbprint("AB".repeat(32));
    let err = Client::connect(credentials(&sim, wrong))
        .await
        .err()
        .unwrap();
    assert!(err.to_string().contains("thumbprint"), "{err}");
    let mut bad = credentials(
        &sim,
        Trust::Thumbprint(sim.cert().thumbprint_sha256.clone()),
    );
    bad.password = "wrong".into();
    let err = Client::connect(bad).await.err().unwrap();
    assert_eq!(err.fault_kind(), Some("InvalidLogin"), "{err}");
}

#[tokio::test]
async fn a_vm_is_cloned_marked_powered_and_destroyed() {
    let sim = simulator().await;
    let trust = Trust::Thumbprint(sim.cert().thumbprint_sha256.clone());
    let client = Client::connect(credentials(&sim, trust)).await.unwrap();
    let vms = client
        .list("VirtualMachine", &["name", "parent", "resourcePool"])
        .await
        .unwrap();
    assert_eq!(vms.len(), 4, "the default model's VMs");
    let source = vms
        .iter()
        .find(|v| v.text("name") == "DC0_C0_RP0_VM0")
        .unwrap();
    let folder = source
        .prop("parent")
        .and_then(|p| p.moref())
        .unwrap()
        .clone();
    let pool = source
        .prop("resourcePool")
        .and_then(|p| p.moref())
        .unwrap()
        .clone();
    let spec = CloneSpec {
        name: "copy".into(),
        folder,
        pool,
        datastore: None,
        cpus: Some(3),
        memory_mb: Some(1536),
        power_on: true,
        device_change: String::new(),
        extra_config: Vec::new(),
    };
    let task = client.clone_vm(&source.obj, &spec).await.unwrap();
    let vm = client
        .wait(&task, Duration::from_secs(10))
        .await
        .unwrap()
        .unwrap();
    let again = client.clone_vm(&source.obj, &spec).await.unwrap();
    let err = client
        .wait(&again, Duration::from_secs(10))
        .await
        .err()
        .unwrap();
    assert!(
        err.to_string().contains("copy"),
        "a second VM of the name fails: {err}"
    );

    let key = client.custom_field("owner").await.unwrap();
    assert_eq!(
        client.custom_field("owner").await.unwrap(),
        key,
        "defined once"
    );
    client.set_custom_field(&vm, key, "ns/group").await.unwrap();
    let paths = [
        "customValue",
        "config.hardware.numCPU",
        "config.hardware.memoryMB",
        "runtime.powerState",
    ];
    let read = client.properties(&vm, &paths).await.unwrap();
    assert_eq!(ops::custom_value(&read, key), Some("ns/group"));
    assert_eq!(read.text("config.hardware.numCPU"), "3");
    assert_eq!(read.text("config.hardware.memoryMB"), "1536");
    assert_eq!(read.text("runtime.powerState"), "poweredOn");

    // Fewer CPUs while it runs needs CPU hot remove: the task's fault comes back by its type.
    let task = client.reconfigure(&vm, Some(2), None).await.unwrap();
    let err = client
        .wait(&task, Duration::from_secs(10))
        .await
        .err()
        .unwrap();
    assert_eq!(err.fault_kind(), Some("InvalidPowerState"), "{err}");
    let off = client.start("PowerOffVM_Task", &vm).await.unwrap();
    client.wait(&off, Duration::from_secs(10)).await.unwrap();
    let task = client.reconfigure(&vm, Some(2), None).await.unwrap();
    client.wait(&task, Duration::from_secs(10)).await.unwrap();
    let read = client
        .properties(&vm, &["config.hardware.numCPU"])
        .await
        .unwrap();
    assert_eq!(read.text("config.hardware.numCPU"), "2");

    let gone = client.start("Destroy_Task", &vm).await.unwrap();
    client.wait(&gone, Duration::from_secs(10)).await.unwrap();
    let err = client.properties(&vm, &["name"]).await.err().unwrap();
    assert_eq!(err.fault_kind(), Some("ManagedObjectNotFound"), "{err}");
}

#[tokio::test]
async fn a_forgotten_session_is_replaced_by_a_new_login() {
    let sim = simulator().await;
    let trust = Trust::Thumbprint(sim.cert().thumbprint_sha256.clone());
    let client = Client::connect(credentials(&sim, trust)).await.unwrap();
    assert_eq!(client.logins(), 1);
    let manager = client.content().session_manager.clone();
    client
        .call(&format!(
            r#"<Logout xmlns="urn:vim25">{}</Logout>"#,
            manager.element("_this")
        ))
        .await
        .unwrap();
    let root = client.content().root_folder.clone();
    let read = client.properties(&root, &["name"]).await.unwrap();
    assert_eq!(read.text("name"), "Datacenters");
    assert_eq!(client.logins(), 2);
    assert_eq!(Moref::new("Folder", "x").to_string(), "Folder:x");
}

#[tokio::test]
async fn a_watch_reports_every_vm_then_their_changes_and_departures() {
    use infrasim_vim_client::ObjectUpdate;
    let sim = simulator().await;
    let trust = Trust::Thumbprint(sim.cert().thumbprint_sha256.clone());
    let client = Client::connect(credentials(&sim, trust)).await.unwrap();
    client
        .watch(
            "VirtualMachine",
            &["name", "runtime.powerState", "customValue"],
        )
        .await
        .unwrap();
    let first = client.wait_for_updates("", 5).await.unwrap().unwrap();
    let entered: Vec<_> = first
        .objects
        .iter()
        .filter_map(|u| match u {
            ObjectUpdate::Enter(vm) => Some(vm.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(entered.len(), 4);
    let vm = entered
        .iter()
        .find(|v| v.text("name") == "DC0_H0_VM0")
        .unwrap()
        .obj
        .clone();
    assert!(
        client
            .wait_for_updates(&first.version, 0)
            .await
            .unwrap()
            .is_none(),
        "nothing new"
    );

    let key = client.custom_field("owner").await.unwrap();
    client.set_custom_field(&vm, key, "mine").await.unwrap();
    let next = client
        .wait_for_updates(&first.version, 5)
        .await
        .unwrap()
        .unwrap();
    let ObjectUpdate::Modify(changed, changes) = &next.objects[0] else {
        panic!("{:?}", next.objects);
    };
    assert_eq!(changed, &vm);
    assert_eq!(changes[0].0, "customValue");

    let off = client.start("PowerOffVM_Task", &vm).await.unwrap();
    client.wait(&off, Duration::from_secs(10)).await.unwrap();
    let gone = client.start("Destroy_Task", &vm).await.unwrap();
    client.wait(&gone, Duration::from_secs(10)).await.unwrap();
    let mut version = next.version;
    let mut left = false;
    while !left {
        let set = client.wait_for_updates(&version, 5).await.unwrap().unwrap();
        left = set.objects.contains(&ObjectUpdate::Leave(vm.clone()));
        version = set.version;
    }
}

#[tokio::test]
async fn inventory_paths_are_found_and_missing_ones_are_none() {
    let sim = simulator().await;
    let trust = Trust::Thumbprint(sim.cert().thumbprint_sha256.clone());
    let client = Client::connect(credentials(&sim, trust)).await.unwrap();
    let cluster = client
        .find_by_inventory_path("DC0/host/DC0_C0")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(cluster.ty, "ClusterComputeResource");
    let pool = client
        .find_by_inventory_path("DC0/host/DC0_C0/Resources")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(pool.ty, "ResourcePool");
    assert_eq!(
        client
            .find_by_inventory_path("DC0/vm/nothing")
            .await
            .unwrap(),
        None
    );
}

#[tokio::test]
async fn a_clone_moves_to_a_distributed_portgroup() {
    use infrasim_vim_client::{ops, NetworkBacking};
    let sim = simulator().await;
    let trust = Trust::Thumbprint(sim.cert().thumbprint_sha256.clone());
    let client = Client::connect(credentials(&sim, trust)).await.unwrap();
    let source = client
        .find_by_inventory_path("DC0/vm/DC0_H0_VM0")
        .await
        .unwrap()
        .unwrap();
    let pg = client
        .find_by_inventory_path("DC0/network/DC0_DVPG0")
        .await
        .unwrap()
        .unwrap();
    let pg_props = client
        .properties(&pg, &["key", "config.distributedVirtualSwitch"])
        .await
        .unwrap();
    let switch = pg_props
        .prop("config.distributedVirtualSwitch")
        .and_then(|v| v.moref())
        .unwrap()
        .clone();
    let uuid = client
        .properties(&switch, &["uuid"])
        .await
        .unwrap()
        .text("uuid")
        .to_string();
    let read = client
        .properties(
            &source,
            &["config.hardware.device", "parent", "resourcePool"],
        )
        .await
        .unwrap();
    let backing = NetworkBacking::Portgroup {
        switch_uuid: uuid,
        portgroup_key: pg_props.text("key").to_string(),
    };
    let spec = CloneSpec {
        name: "on-dvpg".into(),
        folder: read.prop("parent").and_then(|p| p.moref()).unwrap().clone(),
        pool: read
            .prop("resourcePool")
            .and_then(|p| p.moref())
            .unwrap()
            .clone(),
        datastore: None,
        cpus: None,
        memory_mb: None,
        power_on: false,
        device_change: ops::replace_nics(read.prop("config.hardware.device").unwrap(), &backing),
        extra_config: Vec::new(),
    };
    let task = client.clone_vm(&source, &spec).await.unwrap();
    let vm = client
        .wait(&task, Duration::from_secs(10))
        .await
        .unwrap()
        .unwrap();
    let networks = client.properties(&vm, &["network"]).await.unwrap();
    let networks: Vec<_> = networks
        .prop("network")
        .unwrap()
        .items()
        .into_iter()
        .filter_map(|n| n.moref().cloned())
        .collect();
    assert_eq!(networks, vec![pg]);
}

#[tokio::test]
async fn cluster_modules_keep_their_vms_over_the_rest_session() {
    let sim = simulator().await;
    let trust = Trust::Thumbprint(sim.cert().thumbprint_sha256.clone());
    let client = Client::connect(credentials(&sim, trust)).await.unwrap();
    let clusters = client
        .list("ClusterComputeResource", &["name"])
        .await
        .unwrap();
    let cluster = clusters[0].obj.clone();
    let module = client.create_cluster_module(&cluster).await.unwrap();
    assert_eq!(
        client.cluster_module_members(&module).await.unwrap(),
        Some(vec![])
    );
    let vms = client.list("VirtualMachine", &["name"]).await.unwrap();
    let vm = vms[0].obj.clone();
    client
        .change_cluster_module(&module, "add", &vm)
        .await
        .unwrap();
    assert_eq!(
        client.cluster_module_members(&module).await.unwrap(),
        Some(vec![vm.value.clone()])
    );
    client
        .change_cluster_module(&module, "remove", &vm)
        .await
        .unwrap();
    assert_eq!(
        client.cluster_module_members(&module).await.unwrap(),
        Some(vec![])
    );
    // A module in a cluster that does not exist is refused with the vAPI error's kind.
    let err = client
        .create_cluster_module(&Moref::new("ClusterComputeResource", "domain-c999"))
        .await
        .unwrap_err();
    assert_eq!(err.fault_kind(), Some("not_found"), "{err}");
    client.delete_cluster_module(&module).await.unwrap();
    assert_eq!(client.cluster_module_members(&module).await.unwrap(), None);
    // Deleting it again is no error.
    client.delete_cluster_module(&module).await.unwrap();
}

#[tokio::test]
async fn tags_are_attached_to_a_vm_and_an_unknown_one_is_refused() {
    let sim = simulator().await;
    let trust = Trust::Thumbprint(sim.cert().thumbprint_sha256.clone());
    let client = Client::connect(credentials(&sim, trust)).await.unwrap();
    let category = client
        .rest(
            http::Method::POST,
            "/com/vmware/cis/tagging/category",
            Some(
                serde_json::json!({"create_spec": {"name": "k8s-zone", "description": "",
                "cardinality": "MULTIPLE", "associable_types": []}}),
            ),
        )
        .await
        .unwrap();
    let tag = client
        .rest(
            http::Method::POST,
            "/com/vmware/cis/tagging/tag",
            Some(
                serde_json::json!({"create_spec": {"name": "zone-a", "description": "",
                "category_id": category}}),
            ),
        )
        .await
        .unwrap();
    let tag = tag.as_str().unwrap().to_string();
    let vm = client.list("VirtualMachine", &["name"]).await.unwrap()[0]
        .obj
        .clone();
    assert!(client.attached_tags(&vm).await.unwrap().is_empty());
    client
        .attach_tags(std::slice::from_ref(&tag), &vm)
        .await
        .unwrap();
    // Attaching again changes nothing.
    client
        .attach_tags(std::slice::from_ref(&tag), &vm)
        .await
        .unwrap();
    assert_eq!(client.attached_tags(&vm).await.unwrap(), vec![tag]);
    let err = client
        .attach_tags(
            &["urn:vmomi:InventoryServiceTag:nope:GLOBAL".to_string()],
            &vm,
        )
        .await
        .unwrap_err();
    assert_eq!(err.fault_kind(), Some("tagging"), "{err}");
}

#[tokio::test]
async fn storage_policies_are_found_by_name_and_place_on_compliant_datastores() {
    let sim = simulator().await;
    let trust = Trust::Thumbprint(sim.cert().thumbprint_sha256.clone());
    let client = Client::connect(credentials(&sim, trust)).await.unwrap();
    let id = client
        .storage_policy_id("vSAN Default Storage Policy")
        .await
        .unwrap();
    assert_eq!(id.as_deref(), Some("aa6d5a82-1c88-45da-85d3-3d74b91a5bad"));
    assert_eq!(client.storage_policy_id("Gold").await.unwrap(), None);
    let datastores: Vec<Moref> = client
        .list("Datastore", &["name"])
        .await
        .unwrap()
        .into_iter()
        .map(|d| d.obj)
        .collect();
    assert!(!datastores.is_empty());
    let compatible = client
        .compatible_datastores(id.as_deref().unwrap(), &datastores)
        .await
        .unwrap();
    assert_eq!(compatible, datastores);
    // PBM shares the vim session: one the vCenter forgot is replaced for it too.
    let manager = client.content().session_manager.clone();
    client
        .call(&format!(
            r#"<Logout xmlns="urn:vim25">{}</Logout>"#,
            manager.element("_this")
        ))
        .await
        .unwrap();
    assert!(client.storage_policy_id("Gold").await.unwrap().is_none());
    assert_eq!(client.logins(), 2);
}
