//! Each resource rendered as the JSON a GET answers, a file per area. Nothing here changes
//! anything; `@odata.etag` is added by the service, from the rendered body.

pub mod chassis;
pub mod managers;
pub mod root;
pub mod services;
pub mod systems;

use serde_json::{json, Value};

/// A reference to the resource at `path`.
pub fn link(path: &str) -> Value {
    json!({"@odata.id": path})
}

/// A resource collection of `ty` (`ComputerSystemCollection`) with its members' paths.
pub fn collection(ty: &str, name: &str, path: &str, members: &[String]) -> Value {
    json!({
        "@odata.type": format!("#{ty}.{ty}"),
        "@odata.id": path,
        "Name": name,
        "Members@odata.count": members.len(),
        "Members": members.iter().map(|m| link(m)).collect::<Vec<_>>(),
    })
}

/// A healthy, enabled resource's `Status`.
pub fn ok_status() -> Value {
    json!({"State": "Enabled", "Health": "OK"})
}

/// Where system `id` lives.
pub fn system_path(id: &str) -> String {
    format!("{}/Systems/{id}", crate::ROOT)
}

/// Where the manager (the BMC) of system `id` lives: a manager per system, named as it is.
pub fn manager_path(id: &str) -> String {
    format!("{}/Managers/{id}", crate::ROOT)
}

/// Where the chassis of system `id` lives.
pub fn chassis_path(id: &str) -> String {
    format!("{}/Chassis/{id}", crate::ROOT)
}
