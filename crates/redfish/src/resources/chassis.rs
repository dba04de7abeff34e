//! `Chassis`: the enclosure of each system, named as it is.

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
        "Links": {
            "ComputerSystems": [link(&system_path(&h.uuid))],
            "ManagedBy": [link(&manager_path(&h.uuid))],
        },
    })
}
