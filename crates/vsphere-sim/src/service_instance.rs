//! ServiceInstance: the entry point (`RetrieveServiceContent`, `CurrentTime`) and the
//! manager objects its content names.

use crate::call::Call;
use crate::config::Flavor;
use crate::objects::{refs, Inventory, ManagedObject};
use crate::value::{write_element, Data, Moref, Val};

/// Adds the singleton managers to a generated inventory (an ESXi host has no custom
/// fields).
pub fn install_managers(inv: &mut Inventory) {
    let esx = inv.esx();
    for m in [
        refs::service_instance(),
        refs::property_collector(esx),
        refs::view_manager(),
        refs::session_manager(esx),
        refs::search_index(esx),
    ] {
        inv.insert(ManagedObject::new(&m.ty, &m.value));
    }
    crate::authorization::install(inv);
    crate::task::install(inv);
    crate::event_manager::install(inv);
    if !esx {
        crate::custom_fields::install(inv);
    }
}

/// `about`: what the simulator claims to be.
pub fn about(call: &Call<'_>) -> Data {
    let esx = call.config.flavor == Flavor::Esx8;
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
    let about = Data::new("AboutInfo")
        .with("name", name)
        .with("fullName", full)
        .with("vendor", "VMware, Inc.")
        .with("version", version)
        .with("build", build)
        .with("localeVersion", "INTL")
        .with("localeBuild", "000")
        .with("osType", if esx { "vmnix-x86" } else { "linux-x64" })
        .with("productLineId", product_line)
        .with("apiType", api_type)
        .with("apiVersion", api)
        .with("licenseProductName", license_name)
        .with(
            "licenseProductVersion",
            if call.config.flavor == Flavor::VCenter7 {
                "7.0"
            } else {
                "8.0"
            },
        );
    // A host leaves its instance UUID out (it is vCenter's).
    if esx {
        about
    } else {
        about.with("instanceUuid", call.config.instance_uuid.as_str())
    }
}

/// The ServiceContent data object.
pub fn service_content(call: &Call<'_>) -> Data {
    let mor = |m: Moref| Val::Mor(m);
    let esx = call.config.flavor == Flavor::Esx8;
    let content = Data::new("ServiceContent")
        .with("rootFolder", mor(refs::root_folder(esx)))
        .with("propertyCollector", mor(refs::property_collector(esx)))
        .with("viewManager", mor(refs::view_manager()))
        .with("about", about(call))
        .with("sessionManager", mor(refs::session_manager(esx)))
        .with(
            "authorizationManager",
            mor(crate::authorization::manager(esx)),
        )
        .with("searchIndex", mor(refs::search_index(esx)))
        .with("taskManager", mor(refs::task_manager(esx)))
        .with("eventManager", mor(refs::event_manager(esx)));
    if esx {
        content
    } else {
        content.with("customFieldsManager", mor(refs::custom_fields_manager()))
    }
}

/// The ServiceInstance's methods besides Fetch (which every object answers).
pub(crate) fn dispatch(
    _state: &mut crate::state::State,
    call: &mut Call<'_>,
    _this: &crate::value::Moref,
    method: &str,
    _args: &crate::soap::Element,
) -> Option<Result<String, crate::fault::Fault>> {
    match method {
        "RetrieveServiceContent" => Some(Ok(retrieve_service_content(call))),
        "CurrentTime" => Some(Ok(current_time(call))),
        _ => None,
    }
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
