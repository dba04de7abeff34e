//! `Manager`: a BMC per system (sushy-tools' layout: the manager is named as its system),
//! with virtual media devices (a CD and a floppy) that take an image by URL.

use super::{chassis_path, collection, link, manager_path, ok_status, system_path};
use crate::machines::Hardware;
use chrono::{DateTime, Utc};
use serde_json::{json, Value};

/// A virtual media device: its `Id`, name and media types.
pub struct Device {
    pub id: &'static str,
    pub name: &'static str,
    pub types: &'static [&'static str],
}

/// Every manager's virtual media devices.
pub const DEVICES: [Device; 2] = [
    Device {
        id: "Cd",
        name: "Virtual CD",
        types: &["CD", "DVD"],
    },
    Device {
        id: "Floppy",
        name: "Virtual Removable Media",
        types: &["Floppy", "USBStick"],
    },
];

/// The device `id`, if a manager has it.
pub fn device(id: &str) -> Option<&'static Device> {
    DEVICES.iter().find(|d| d.id == id)
}

pub fn managers(all: &[Hardware]) -> Value {
    let members: Vec<String> = all.iter().map(|h| manager_path(&h.uuid)).collect();
    collection(
        "ManagerCollection",
        "Manager Collection",
        &format!("{}/Managers", crate::ROOT),
        &members,
    )
}

pub fn manager(h: &Hardware, now: DateTime<Utc>) -> Value {
    let path = manager_path(&h.uuid);
    json!({
        "@odata.type": "#Manager.v1_17_0.Manager",
        "@odata.id": path,
        "Id": h.uuid,
        "Name": format!("Manager of {}", h.name),
        "ManagerType": "BMC",
        "UUID": h.uuid,
        "Model": "infrasim BMC",
        "FirmwareVersion": env!("CARGO_PKG_VERSION"),
        "PowerState": "On",
        "DateTime": now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        "DateTimeLocalOffset": "+00:00",
        "Status": ok_status(),
        "VirtualMedia": link(&format!("{path}/VirtualMedia")),
        "Links": {
            "ManagerForServers": [link(&system_path(&h.uuid))],
            "ManagerForChassis": [link(&chassis_path(&h.uuid))],
        },
        "Actions": {
            "#Manager.Reset": {
                "target": format!("{path}/Actions/Manager.Reset"),
                "ResetType@Redfish.AllowableValues": ["GracefulRestart", "ForceRestart"],
            },
        },
    })
}

pub fn medias(h: &Hardware) -> Value {
    let path = format!("{}/VirtualMedia", manager_path(&h.uuid));
    let members: Vec<String> = DEVICES.iter().map(|d| format!("{path}/{}", d.id)).collect();
    collection(
        "VirtualMediaCollection",
        "Virtual Media Services",
        &path,
        &members,
    )
}

pub fn media(h: &Hardware, id: &str) -> Option<Value> {
    let d = device(id)?;
    let path = format!("{}/VirtualMedia/{id}", manager_path(&h.uuid));
    let m = h.record.media.get(id).filter(|m| !m.image.is_empty());
    let image = m.map(|m| m.image.as_str());
    let image_name = image.map(|i| {
        i.rsplit('/')
            .next()
            .unwrap_or(i)
            .split(['?', '#'])
            .next()
            .unwrap_or(i)
    });
    Some(json!({
        "@odata.type": "#VirtualMedia.v1_6_0.VirtualMedia",
        "@odata.id": path,
        "Id": id,
        "Name": d.name,
        "MediaTypes": d.types,
        "Image": image,
        "ImageName": image_name,
        "Inserted": m.is_some_and(|m| m.inserted),
        "WriteProtected": m.is_none_or(|m| m.write_protected),
        "ConnectedVia": if m.is_some() { "URI" } else { "NotConnected" },
        "TransferMethod": "Stream",
        "TransferProtocolType": m.and_then(|m| m.transfer_protocol.clone()),
        "UserName": m.and_then(|m| m.user_name.clone()),
        "Actions": {
            "#VirtualMedia.InsertMedia": {"target": format!("{path}/Actions/VirtualMedia.InsertMedia")},
            "#VirtualMedia.EjectMedia": {"target": format!("{path}/Actions/VirtualMedia.EjectMedia")},
        },
    }))
}
