//! `ComputerSystem` and what hangs under it: processors (a socket each, whose `TotalThreads`
//! add up to the machine's CPUs, as sushy sums them), memory, storage with a drive per disk,
//! Ethernet interfaces with the machine's MACs, BIOS with its pending settings, and UEFI
//! secure boot.

use super::{chassis_path, collection, link, manager_path, ok_status, system_path};
use crate::machines::{Hardware, Record};
use serde_json::{json, Map, Value};

/// The boot sources a system may be told to boot from once or always.
pub const BOOT_TARGETS: [&str; 7] = [
    "None",
    "Pxe",
    "Cd",
    "Hdd",
    "Floppy",
    "UefiHttp",
    "BiosSetup",
];
/// `BootSourceOverrideEnabled`'s values.
pub const BOOT_ENABLED: [&str; 3] = ["Disabled", "Once", "Continuous"];
/// `BootSourceOverrideMode`'s values.
pub const BOOT_MODES: [&str; 2] = ["UEFI", "Legacy"];
/// The resets `ComputerSystem.Reset` takes.
pub const RESET_TYPES: [&str; 7] = [
    "On",
    "ForceOff",
    "GracefulShutdown",
    "GracefulRestart",
    "ForceRestart",
    "Nmi",
    "PushPowerButton",
];

/// The systems.
pub fn systems(all: &[Hardware]) -> Value {
    let members: Vec<String> = all.iter().map(|h| system_path(&h.uuid)).collect();
    collection(
        "ComputerSystemCollection",
        "Computer System Collection",
        &format!("{}/Systems", crate::ROOT),
        &members,
    )
}

/// A system.
pub fn system(h: &Hardware) -> Value {
    let path = system_path(&h.uuid);
    let boot = &h.record.boot;
    let mut body = json!({
        "@odata.type": "#ComputerSystem.v1_20_0.ComputerSystem",
        "@odata.id": path,
        "Id": h.uuid,
        "Name": h.name,
        "UUID": h.uuid,
        "SystemType": "Virtual",
        "Manufacturer": "infrasim",
        "Model": "Simulated virtual machine",
        "SerialNumber": h.uuid,
        "BiosVersion": BIOS_VERSION,
        "HostName": h.host_name.clone().unwrap_or_default(),
        "PowerState": h.power.as_str(),
        "Status": ok_status(),
        "Boot": {
            "BootSourceOverrideEnabled": boot.enabled,
            "BootSourceOverrideTarget": boot.target,
            "BootSourceOverrideTarget@Redfish.AllowableValues": BOOT_TARGETS,
            "BootSourceOverrideMode": boot.mode,
            "HttpBootUri": boot.http_boot_uri,
        },
        "ProcessorSummary": {
            "Count": h.sockets(),
            "CoreCount": h.cpus,
            "LogicalProcessorCount": h.cpus,
            "Model": CPU_MODEL,
        },
        "MemorySummary": {
            "TotalSystemMemoryGiB": h.memory_mib as f64 / 1024.0,
        },
        "Processors": link(&format!("{path}/Processors")),
        "Memory": link(&format!("{path}/Memory")),
        "Storage": link(&format!("{path}/Storage")),
        "EthernetInterfaces": link(&format!("{path}/EthernetInterfaces")),
        "Bios": link(&format!("{path}/Bios")),
        "SecureBoot": link(&format!("{path}/SecureBoot")),
        "Links": {
            "Chassis": [link(&chassis_path(&h.uuid))],
            "ManagedBy": [link(&manager_path(&h.uuid))],
        },
        "Actions": {
            "#ComputerSystem.Reset": {
                "target": format!("{path}/Actions/ComputerSystem.Reset"),
                "ResetType@Redfish.AllowableValues": RESET_TYPES,
            },
        },
    });
    if let Some(last) = &h.record.last_boot {
        body["Oem"] = json!({"Infrasim": {
            "@odata.type": "#InfrasimComputerSystem.v1_0_0.InfrasimComputerSystem",
            "LastBoot": {"Source": last.source, "Image": last.image, "Time": last.at},
        }});
    }
    body
}

const BIOS_VERSION: &str = "infrasim-1.0";
const CPU_MODEL: &str = "infrasim virtual CPU";

/// The processors: a socket each.
pub fn processors(h: &Hardware) -> Value {
    let path = format!("{}/Processors", system_path(&h.uuid));
    let members: Vec<String> = (0..h.sockets()).map(|i| format!("{path}/CPU{i}")).collect();
    collection(
        "ProcessorCollection",
        "Processors Collection",
        &path,
        &members,
    )
}

/// Processor `id` (`CPU0`, ...).
pub fn processor(h: &Hardware, id: &str) -> Option<Value> {
    let i: u32 = id.strip_prefix("CPU")?.parse().ok()?;
    if i >= h.sockets() || id != format!("CPU{i}") {
        return None;
    }
    let cores = h.cores_of(i);
    Some(json!({
        "@odata.type": "#Processor.v1_18_0.Processor",
        "@odata.id": format!("{}/Processors/{id}", system_path(&h.uuid)),
        "Id": id,
        "Name": format!("Processor {i}"),
        "Socket": format!("CPU {i}"),
        "ProcessorType": "CPU",
        "ProcessorArchitecture": "x86",
        "InstructionSet": "x86-64",
        "Manufacturer": "infrasim",
        "Model": CPU_MODEL,
        "TotalCores": cores,
        "TotalThreads": cores,
        "Status": ok_status(),
    }))
}

/// The memory: one module holding all of it.
pub fn memories(h: &Hardware) -> Value {
    let path = format!("{}/Memory", system_path(&h.uuid));
    collection(
        "MemoryCollection",
        "Memory Module Collection",
        &path,
        &[format!("{path}/DIMM0")],
    )
}

pub fn memory(h: &Hardware, id: &str) -> Option<Value> {
    (id == "DIMM0").then(|| {
        json!({
            "@odata.type": "#Memory.v1_17_0.Memory",
            "@odata.id": format!("{}/Memory/DIMM0", system_path(&h.uuid)),
            "Id": "DIMM0",
            "Name": "DIMM 0",
            "MemoryType": "DRAM",
            "MemoryDeviceType": "DDR4",
            "CapacityMiB": h.memory_mib,
            "OperatingSpeedMhz": 3200,
            "Status": ok_status(),
        })
    })
}

/// The storage: one controller with a drive per disk.
pub fn storages(h: &Hardware) -> Value {
    let path = format!("{}/Storage", system_path(&h.uuid));
    collection(
        "StorageCollection",
        "Storage Collection",
        &path,
        &[format!("{path}/1")],
    )
}

pub fn storage(h: &Hardware, id: &str) -> Option<Value> {
    if id != "1" {
        return None;
    }
    let path = format!("{}/Storage/1", system_path(&h.uuid));
    let drives: Vec<Value> = (0..h.disks.len())
        .map(|i| link(&super::chassis::drive_path(&h.uuid, i)))
        .collect();
    Some(json!({
        "@odata.type": "#Storage.v1_15_0.Storage",
        "@odata.id": path,
        "Id": "1",
        "Name": "Local Storage Controller",
        "Drives@odata.count": drives.len(),
        "Drives": drives,
        "Status": ok_status(),
    }))
}

/// The Ethernet interfaces: a NIC each, named by position (`NIC1`, ...).
pub fn nics(h: &Hardware) -> Value {
    let path = format!("{}/EthernetInterfaces", system_path(&h.uuid));
    let members: Vec<String> = (1..=h.nics.len())
        .map(|i| format!("{path}/NIC{i}"))
        .collect();
    collection(
        "EthernetInterfaceCollection",
        "Ethernet Interface Collection",
        &path,
        &members,
    )
}

pub fn nic(h: &Hardware, id: &str) -> Option<Value> {
    let i: usize = id.strip_prefix("NIC")?.parse().ok()?;
    let n = h.nics.get(i.checked_sub(1)?)?;
    Some(json!({
        "@odata.type": "#EthernetInterface.v1_11_0.EthernetInterface",
        "@odata.id": format!("{}/EthernetInterfaces/{id}", system_path(&h.uuid)),
        "Id": id,
        "Name": n.label,
        "MACAddress": n.mac,
        "PermanentMACAddress": n.mac,
        "InterfaceEnabled": true,
        "LinkStatus": if n.connected { "LinkUp" } else { "LinkDown" },
        "SpeedMbps": 10000,
        "Status": ok_status(),
    }))
}

/// The BIOS attributes a fresh machine has: what a typical server BIOS exposes, with the
/// boot mode matching the boot override's default.
pub fn bios_defaults() -> Map<String, Value> {
    let pairs: [(&str, Value); 9] = [
        ("BootMode", json!("Uefi")),
        ("EmbeddedSata", json!("Raid")),
        ("NicBoot1", json!("NetworkBoot")),
        ("NicBoot2", json!("Disabled")),
        ("PowerProfile", json!("MaxPerf")),
        ("ProcCoreDisable", json!(0)),
        ("ProcHyperthreading", json!("Enabled")),
        ("ProcTurboMode", json!("Enabled")),
        ("UsbControl", json!("UsbEnabled")),
    ];
    pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}

/// The attributes in force: the defaults with the record's changes.
pub fn bios_attributes(r: &Record) -> Map<String, Value> {
    let mut a = bios_defaults();
    a.extend(r.bios.iter().map(|(k, v)| (k.clone(), v.clone())));
    a
}

pub fn bios(h: &Hardware) -> Value {
    let path = format!("{}/Bios", system_path(&h.uuid));
    json!({
        "@odata.type": "#Bios.v1_2_1.Bios",
        "@odata.id": path,
        "Id": "BIOS",
        "Name": "BIOS Configuration",
        "AttributeRegistry": "BiosAttributeRegistry.v1_0_0",
        "Attributes": bios_attributes(&h.record),
        "@Redfish.Settings": {
            "@odata.type": "#Settings.v1_3_5.Settings",
            "SettingsObject": link(&format!("{path}/Settings")),
            "SupportedApplyTimes": ["OnReset"],
        },
        "Actions": {
            "#Bios.ResetBios": {"target": format!("{path}/Actions/Bios.ResetBios")},
        },
    })
}

/// The settings to apply at the next boot.
pub fn bios_settings(h: &Hardware) -> Value {
    json!({
        "@odata.type": "#Bios.v1_2_1.Bios",
        "@odata.id": format!("{}/Bios/Settings", system_path(&h.uuid)),
        "Id": "Settings",
        "Name": "BIOS Pending Settings",
        "Attributes": h.record.bios_pending,
    })
}

pub fn secure_boot(h: &Hardware) -> Value {
    let r = &h.record;
    json!({
        "@odata.type": "#SecureBoot.v1_1_0.SecureBoot",
        "@odata.id": format!("{}/SecureBoot", system_path(&h.uuid)),
        "Id": "SecureBoot",
        "Name": "UEFI Secure Boot",
        "SecureBootEnable": r.secure_boot_enable,
        "SecureBootCurrentBoot": if r.secure_boot_current { "Enabled" } else { "Disabled" },
        "SecureBootMode": "DeployedMode",
    })
}
