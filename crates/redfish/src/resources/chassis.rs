//! `Chassis`: the enclosure of each system, named as it is, with its drives (a disk each).

use super::{chassis_path, collection, link, manager_path, ok_status, system_path};
use crate::machines::Hardware;
use serde_json::{json, Value};

pub fn all_chassis(all: &[Hardware]) -> Value {
    let members: Vec<String> = all.iter().map(|h| chassis_path(&h.uuid)).collect();
    collection(
        "ChassisCollection",
        "Chassis Collection",
        &format!("{}/Chassis", crate::ROOT),
        &members,
    )
}

pub fn chassis(h: &Hardware) -> Value {
    json!({
        "@odata.type": "#Chassis.v1_23_0.Chassis",
        "@odata.id": chassis_path(&h.uuid),
        "Id": h.uuid,
        "Name": format!("Chassis of {}", h.name),
        "ChassisType": "RackMount",
        "Manufacturer": "infrasim",
        "Model": "Simulated chassis",
        "SerialNumber": h.uuid,
        "PowerState": h.power.as_str(),
        "Status": ok_status(),
        "Drives": link(&format!("{}/Drives", chassis_path(&h.uuid))),
        "Links": {
            "ComputerSystems": [link(&system_path(&h.uuid))],
            "ManagedBy": [link(&manager_path(&h.uuid))],
        },
    })
}

/// Where drive `i` of the chassis of system `id` lives.
pub fn drive_path(id: &str, i: usize) -> String {
    format!("{}/Drives/Disk{i}", chassis_path(id))
}

pub fn drives(h: &Hardware) -> Value {
    let members: Vec<String> = (0..h.disks.len()).map(|i| drive_path(&h.uuid, i)).collect();
    collection(
        "DriveCollection",
        "Drive Collection",
        &format!("{}/Drives", chassis_path(&h.uuid)),
        &members,
    )
}

pub fn drive(h: &Hardware, id: &str) -> Option<Value> {
    let i: usize = id.strip_prefix("Disk")?.parse().ok()?;
    let disk = h.disks.get(i).filter(|_| id == format!("Disk{i}"))?;
    Some(json!({
        "@odata.type": "#Drive.v1_17_0.Drive",
        "@odata.id": drive_path(&h.uuid, i),
        "Id": id,
        "Name": disk.label,
        "CapacityBytes": disk.capacity_bytes,
        "MediaType": "SSD",
        "Protocol": "SATA",
        "Status": ok_status(),
    }))
}
