//! `Flavor::Esx8`: a standalone ESXi host's references and names, as hostd reports them.

use infrasim_clock::FakeClock;
use infrasim_vsphere_sim::simulator::Flavor;
use infrasim_vsphere_sim::value::Moref;
use infrasim_vsphere_sim::{SimConfig, Simulator};
use std::sync::Arc;

fn envelope(body: &str) -> String {
    format!(
        r#"<?xml version="1.0" encoding="UTF-8"?><soapenv:Envelope xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/"><soapenv:Body>{body}</soapenv:Body></soapenv:Envelope>"#
    )
}

fn sim(flavor: Flavor) -> Simulator {
    let clock = FakeClock::new("2030-01-01T00:00:00Z".parse().unwrap());
    let config = SimConfig {
        password: "pw".into(),
        flavor,
        ..SimConfig::default()
    };
    Simulator::new(config, Arc::new(clock))
}

async fn call(s: &Simulator, body: &str, cookie: Option<&str>) -> String {
    let r = s.handle(&envelope(body), cookie, "test").await;
    assert_eq!(r.status, 200, "{}", r.body);
    r.body
}

#[tokio::test]
async fn service_content_names_hostds_managers_and_no_custom_fields() {
    let s = sim(Flavor::Esx8);
    let content = call(&s, r#"<RetrieveServiceContent xmlns="urn:vim25"><_this type="ServiceInstance">ServiceInstance</_this></RetrieveServiceContent>"#, None).await;
    for (field, ty, value) in [
        ("rootFolder", "Folder", "ha-folder-root"),
        (
            "propertyCollector",
            "PropertyCollector",
            "ha-property-collector",
        ),
        ("viewManager", "ViewManager", "ViewManager"),
        ("sessionManager", "SessionManager", "ha-sessionmgr"),
        ("searchIndex", "SearchIndex", "ha-searchindex"),
        ("taskManager", "TaskManager", "ha-taskmgr"),
        ("eventManager", "EventManager", "ha-eventmgr"),
    ] {
        let want = format!(r#"<{field} type="{ty}">{value}</{field}>"#);
        assert!(content.contains(&want), "{want} in {content}");
    }
    assert!(!content.contains("customFieldsManager"), "{content}");
    assert!(content.contains("<osType>vmnix-x86</osType>"), "{content}");
    assert!(!content.contains("instanceUuid"), "{content}");
    // vCenter's stay as they were.
    let vc = sim(Flavor::VCenter8);
    let content = call(&vc, r#"<RetrieveServiceContent xmlns="urn:vim25"><_this type="ServiceInstance">ServiceInstance</_this></RetrieveServiceContent>"#, None).await;
    assert!(content.contains(r#"<rootFolder type="Folder">group-d1</rootFolder>"#));
    assert!(content.contains(r#"<customFieldsManager type="CustomFieldsManager">CustomFieldsManager</customFieldsManager>"#));
    assert!(content.contains("<osType>linux-x64</osType>"));
}

#[tokio::test]
async fn inventory_has_hostds_references_and_names() {
    let s = sim(Flavor::Esx8);
    let named = |ty: &str, value: &str| {
        s.with_inventory(|inv| {
            inv.get(&Moref::new(ty, value))
                .map(|o| o.name().to_string())
        })
    };
    assert_eq!(
        named("Folder", "ha-folder-root").as_deref(),
        Some("ha-folder-root")
    );
    assert_eq!(
        named("Datacenter", "ha-datacenter").as_deref(),
        Some("ha-datacenter")
    );
    for (value, name) in [
        ("ha-folder-vm", "vm"),
        ("ha-folder-host", "host"),
        ("ha-folder-datastore", "datastore"),
        ("ha-folder-network", "network"),
    ] {
        assert_eq!(named("Folder", value).as_deref(), Some(name));
    }
    assert_eq!(
        named("ComputeResource", "ha-compute-res").as_deref(),
        Some("localhost.localdomain")
    );
    assert_eq!(
        named("HostSystem", "ha-host").as_deref(),
        Some("localhost.localdomain")
    );
    assert_eq!(
        named("ResourcePool", "ha-root-pool").as_deref(),
        Some("Resources")
    );
    assert_eq!(
        named("Network", "HaNetwork-VM Network").as_deref(),
        Some("VM Network")
    );
    let ds = s.with_inventory(|inv| {
        inv.iter()
            .find(|o| o.moref.ty == "Datastore")
            .map(|o| (o.moref.value.clone(), o.name().to_string()))
    });
    let (value, name) = ds.expect("a datastore");
    assert_eq!(name, "datastore1");
    let parts: Vec<usize> = value.split('-').map(str::len).collect();
    assert_eq!(parts, [8, 8, 4, 12], "{value}");
    assert!(
        value.chars().all(|c| c == '-' || c.is_ascii_hexdigit()),
        "{value}"
    );
    assert_eq!(named("CustomFieldsManager", "CustomFieldsManager"), None);
}

#[tokio::test]
async fn the_hosts_storage_system_finds_no_unresolved_vmfs_volumes() {
    let s = sim(Flavor::Esx8);
    let login = s.handle(&envelope(r#"<Login xmlns="urn:vim25"><_this type="SessionManager">ha-sessionmgr</_this><userName>administrator@vsphere.local</userName><password>pw</password></Login>"#), None, "test").await;
    let cookie = login.set_cookie.expect("a session");
    let cookie = Some(cookie.as_str());
    let config = call(&s, r#"<Fetch xmlns="urn:vim25"><_this type="HostSystem">ha-host</_this><prop>configManager</prop></Fetch>"#, cookie).await;
    assert!(
        config.contains(r#"<storageSystem type="HostStorageSystem">storageSystem</storageSystem>"#),
        "{config}"
    );
    let answer = call(&s, r#"<QueryUnresolvedVmfsVolume xmlns="urn:vim25"><_this type="HostStorageSystem">storageSystem</_this></QueryUnresolvedVmfsVolume>"#, cookie).await;
    assert!(
        answer.contains("QueryUnresolvedVmfsVolumeResponse"),
        "{answer}"
    );
    assert!(!answer.contains("returnval"), "{answer}");
}
