//! What inspection reports: a system's Redfish resources (the system, its processors,
//! memory, drives and Ethernet interfaces) as metal3's `status.hardware`, the way Ironic's
//! inspection fills it from what its agent finds.

use crate::sip::types::{Bios, Cpu, Firmware, HardwareDetails, HardwareSystemVendor, Nic, Storage};
use serde_json::Value;

/// What was read of one system.
#[derive(Debug, Default)]
pub struct Inventory {
    pub system: Value,
    pub processors: Vec<Value>,
    pub memory: Vec<Value>,
    pub drives: Vec<Value>,
    pub nics: Vec<Value>,
}

fn text(v: &Value) -> String {
    v.as_str().unwrap_or_default().to_string()
}

/// The hardware details of `inv`; `boot_mac` marks the NIC the host boots from.
pub fn details(inv: &Inventory, boot_mac: Option<&str>) -> HardwareDetails {
    let s = &inv.system;
    let threads: i64 = inv
        .processors
        .iter()
        .map(|p| p["TotalThreads"].as_i64().unwrap_or(0))
        .sum();
    let first = inv.processors.first().cloned().unwrap_or_default();
    let ram: i64 = inv
        .memory
        .iter()
        .map(|m| m["CapacityMiB"].as_i64().unwrap_or(0))
        .sum();
    let ram = if ram > 0 {
        ram
    } else {
        (s["MemorySummary"]["TotalSystemMemoryGiB"]
            .as_f64()
            .unwrap_or(0.0)
            * 1024.0) as i64
    };
    HardwareDetails {
        system_vendor: HardwareSystemVendor {
            manufacturer: text(&s["Manufacturer"]),
            product_name: text(&s["Model"]),
            serial_number: text(&s["SerialNumber"]),
        },
        firmware: Firmware {
            bios: Bios {
                date: String::new(),
                vendor: text(&s["Manufacturer"]),
                version: text(&s["BiosVersion"]),
            },
        },
        ram_mebibytes: ram,
        nics: nics(&inv.nics, boot_mac),
        storage: storage(&inv.drives),
        cpu: Cpu {
            arch: arch(&first["InstructionSet"]),
            model: text(&first["Model"]),
            clock_megahertz: first["MaxSpeedMHz"].as_f64().unwrap_or(0.0),
            flags: Vec::new(),
            count: if threads > 0 {
                threads
            } else {
                s["ProcessorSummary"]["LogicalProcessorCount"]
                    .as_i64()
                    .unwrap_or(0)
            },
        },
        hostname: text(&s["HostName"]),
    }
}

/// The architecture as the agent names it (`x86_64`, `aarch64`).
fn arch(instruction_set: &Value) -> String {
    match instruction_set.as_str() {
        Some("x86-64") => "x86_64".into(),
        Some("ARM-A64") => "aarch64".into(),
        Some(other) => other.to_string(),
        None => String::new(),
    }
}

/// NICs named as the kernel of the agent names them (`eth0`, ...), in the BMC's order.
fn nics(found: &[Value], boot_mac: Option<&str>) -> Vec<Nic> {
    found
        .iter()
        .enumerate()
        .map(|(i, n)| {
            let mac = text(&n["MACAddress"]).to_lowercase();
            Nic {
                name: format!("eth{i}"),
                model: String::new(),
                pxe: boot_mac.is_some_and(|b| b.eq_ignore_ascii_case(&mac)),
                speed_gbps: n["SpeedMbps"].as_i64().unwrap_or(0) / 1000,
                ip: String::new(),
                mac,
            }
        })
        .collect()
}

/// Drives as block devices (`/dev/sda`, ...), in the BMC's order.
fn storage(found: &[Value]) -> Vec<Storage> {
    found
        .iter()
        .enumerate()
        .map(|(i, d)| {
            let media = text(&d["MediaType"]);
            Storage {
                name: format!("/dev/sd{}", (b'a' + (i % 26) as u8) as char),
                rotational: media == "HDD",
                type_: if media.is_empty() {
                    "HDD".into()
                } else {
                    media
                },
                size_bytes: d["CapacityBytes"].as_i64().unwrap_or(0),
                vendor: text(&d["Manufacturer"]),
                model: text(&d["Model"]),
                serial_number: text(&d["SerialNumber"]),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_systems_resources_become_metal3_hardware_details() {
        let inv = Inventory {
            system: json!({"Manufacturer": "infrasim", "Model": "VM", "SerialNumber": "s1",
                           "BiosVersion": "1.0", "HostName": "h"}),
            processors: vec![
                json!({"TotalThreads": 2, "Model": "vCPU", "InstructionSet": "x86-64"}),
                json!({"TotalThreads": 2}),
            ],
            memory: vec![json!({"CapacityMiB": 4096})],
            drives: vec![json!({"CapacityBytes": 10, "MediaType": "SSD"})],
            nics: vec![
                json!({"MACAddress": "52:54:00:AA:00:01", "SpeedMbps": 10000}),
                json!({"MACAddress": "52:54:00:aa:00:02"}),
            ],
        };
        let d = details(&inv, Some("52:54:00:aa:00:01"));
        assert_eq!((d.cpu.count, d.cpu.arch.as_str()), (4, "x86_64"));
        assert_eq!(d.ram_mebibytes, 4096);
        assert_eq!(d.storage[0].name, "/dev/sda");
        assert!(!d.storage[0].rotational);
        assert_eq!(d.nics[0].mac, "52:54:00:aa:00:01");
        assert!(d.nics[0].pxe && !d.nics[1].pxe);
        assert_eq!(d.nics[0].speed_gbps, 10);
        assert_eq!(d.system_vendor.serial_number, "s1");
    }
}
