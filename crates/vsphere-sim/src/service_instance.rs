//! ServiceInstance: the entry point (`RetrieveServiceContent`, `CurrentTime`) and the
//! manager objects its content names.

use crate::inventory::{refs, Inventory, ManagedObject};
use crate::simulator::{Call, Flavor};
use crate::value::{write_element, Data, Moref, Val};

/// Adds the singleton managers to a generated inventory.
pub fn install_managers(inv: &mut Inventory) {
    for m in [
        refs::service_instance(),
        refs::property_collector(),
        refs::view_manager(),
        refs::session_manager(),
        refs::search_index(),
    ] {
        inv.insert(ManagedObject::new(&m.ty, &m.value));
    }
    crate::task::install(inv);
    crate::event_manager::install(inv);
    crate::custom_fields::install(inv);
}

/// `about`: what the simulator claims to be.
pub fn about(call: &Call<'_>) -> Data {
    let (name, full, version, build, api, api_type, product_line, license_name) =
        match call.config.flavor {
            Flavor::VCenter8 => (
                "VMware vCenter Server",
                "VMware vCenter Server 8.0.3 build-24022515",
                "8.0.3",
                "24022515",
                "8.0.3.0",
                "VirtualCenter",
                "vpx",
                "VMware VirtualCenter Server",
            ),
            Flavor::VCenter7 => (
                "VMware vCenter Server",
                "VMware vCenter Server 7.0.3 build-21477706",
                "7.0.3",
                "21477706",
                "7.0.3.0",
                "VirtualCenter",
                "vpx",
                "VMware VirtualCenter Server",
            ),
            Flavor::Esx8 => (
                "VMware ESXi",
                "VMware ESXi 8.0.3 build-24022510",
                "8.0.3",
                "24022510",
                "8.0.3.0",
                "HostAgent",
                "embeddedEsx",
                "VMware ESX Server",
            ),
        };
    Data::new("AboutInfo")
        .with("name", name)
        .with("fullName", full)
        .with("vendor", "VMware, Inc.")
        .with("version", version)
        .with("build", build)
        .with("localeVersion", "INTL")
        .with("localeBuild", "000")
        .with("osType", "linux-x64")
        .with("productLineId", product_line)
        .with("apiType", api_type)
        .with("apiVersion", api)
        .with("instanceUuid", call.config.instance_uuid.as_str())
        .with("licenseProductName", license_name)
        .with(
            "licenseProductVersion",
            if call.config.flavor == Flavor::VCenter7 {
                "7.0"
            } else {
                "8.0"
            },
        )
}

/// The ServiceContent data object.
pub fn service_content(call: &Call<'_>) -> Data {
    let mor = |m: Moref| Val::Mor(m);
    Data::new("ServiceContent")
        .with("rootFolder", mor(refs::root_folder()))
        .with("propertyCollector", mor(refs::property_collector()))
        .with("viewManager", mor(refs::view_manager()))
        .with("about", about(call))
        .with("sessionManager", mor(refs::session_manager()))
        .with("searchIndex", mor(refs::search_index()))
        .with("taskManager", mor(refs::task_manager()))
        .with("eventManager", mor(refs::event_manager()))
        .with("customFieldsManager", mor(refs::custom_fields_manager()))
}

pub fn retrieve_service_content(call: &Call<'_>) -> String {
    let mut out = String::new();
    write_element(
        &mut out,
        "returnval",
        &Val::from(service_content(call)),
        false,
    );
    out
}

pub fn current_time(call: &Call<'_>) -> String {
    let mut out = String::new();
    write_element(&mut out, "returnval", &Val::Time(call.now), false);
    out
}
