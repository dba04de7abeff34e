//! A generated host (HostSystem): its hardware, runtime and summary, and what an ESXi host
//! has besides.

use super::build::{enum_val, link, value_for, Placement};
use crate::objects::{uuid_for, Inventory, ManagedObject};
use crate::value::{mor_array, Data, Moref};

/// A connected, powered-on host named `name` in compute resource `parent`, attached to
/// the datacenter's datastores and VM Network.
pub(super) fn host(inv: &mut Inventory, name: &str, parent: &Moref, place: &Placement) -> Moref {
    let value = value_for(inv, "host");
    let mut h = ManagedObject::new("HostSystem", &value);
    let m = h.moref.clone();
    h.set("name", name);
    h.set("parent", parent.clone());
    h.set("overallStatus", enum_val("ManagedEntityStatus", "green"));
    let runtime = Data::new("HostRuntimeInfo")
        .with(
            "connectionState",
            enum_val("HostSystemConnectionState", "connected"),
        )
        .with("powerState", enum_val("HostSystemPowerState", "poweredOn"))
        .with("inMaintenanceMode", false);
    let hardware = Data::new("HostHardwareSummary")
        .with("vendor", "VMware, Inc. (infrasim)")
        .with("model", "VMware Virtual Platform")
        .with("uuid", uuid_for(name, "host"))
        .with("memorySize", 4i64 * 1024 * 1024 * 1024)
        .with("cpuModel", "Intel(R) Xeon(R) CPU (simulated)")
        .with("cpuMhz", 2294)
        .with("numCpuPkgs", 2i32)
        .with("numCpuCores", 2i32)
        .with("numCpuThreads", 2i32)
        .with("numNics", 1i32)
        .with("numHBAs", 1i32);
    let summary = Data::new("HostListSummary")
        .with("host", m.clone())
        .with("hardware", hardware)
        .with("runtime", runtime.clone())
        .with(
            "config",
            Data::new("HostConfigSummary")
                .with("name", name)
                .with("port", 443i32)
                .with("vmotionEnabled", false)
                .with("faultToleranceEnabled", false),
        )
        .with("quickStats", Data::new("HostListSummaryQuickStats"))
        .with("overallStatus", enum_val("ManagedEntityStatus", "green"))
        .with("rebootRequired", false)
        .with("managementServerIp", "127.0.0.1");
    h.set("summary", summary);
    h.set("runtime", runtime);
    h.set("vm", mor_array([]));
    h.set("datastore", mor_array(place.datastores.iter().cloned()));
    h.set("network", mor_array([place.network.clone()]));
    inv.insert(h);
    link(inv, &place.network, "host", &m);
    m
}

/// What an ESXi host has that a host under vCenter here does not: its own datastore
/// browser, and a configuration manager whose storage system answers
/// QueryUnresolvedVmfsVolume.
pub(super) fn esx_host_extras(inv: &mut Inventory, host: &Moref) {
    let browser = Moref::new("HostDatastoreBrowser", "ha-host-datastorebrowser");
    let storage = Moref::new("HostStorageSystem", "storageSystem");
    inv.insert(ManagedObject::new(&browser.ty, &browser.value));
    inv.insert(ManagedObject::new(&storage.ty, &storage.value));
    if let Some(h) = inv.get_mut(host) {
        h.set("datastoreBrowser", browser);
        h.set(
            "configManager",
            Data::new("HostConfigManager").with("storageSystem", storage),
        );
    }
}
