//! The service-wide resources: the session service and its sessions, the account service with
//! its accounts and roles, the update service (the BMC's own firmware, which takes no
//! updates), and the task service (every action here completes before it answers, so no
//! task is ever listed).

use super::{collection, link, ok_status};
use crate::accounts::{privileges, Account, ROLES};
use crate::sessions::Session;
use chrono::{DateTime, Utc};
use serde_json::{json, Value};

fn path(tail: &str) -> String {
    format!("{}/{tail}", crate::ROOT)
}

pub fn session_service(timeout: u64) -> Value {
    json!({
        "@odata.type": "#SessionService.v1_1_9.SessionService",
        "@odata.id": path("SessionService"),
        "Id": "SessionService",
        "Name": "Session Service",
        "ServiceEnabled": true,
        "SessionTimeout": timeout,
        "Sessions": link(&path("SessionService/Sessions")),
        "Status": ok_status(),
    })
}

pub fn sessions(all: &[Session]) -> Value {
    let members: Vec<String> = all.iter().map(|s| session_path(&s.id)).collect();
    collection(
        "SessionCollection",
        "Session Collection",
        &path("SessionService/Sessions"),
        &members,
    )
}

pub fn session_path(id: &str) -> String {
    path(&format!("SessionService/Sessions/{id}"))
}

pub fn session(s: &Session) -> Value {
    json!({
        "@odata.type": "#Session.v1_7_0.Session",
        "@odata.id": session_path(&s.id),
        "Id": s.id,
        "Name": "User Session",
        "UserName": s.user,
        "Password": null,
        "CreatedTime": s.created.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        "SessionType": "Redfish",
    })
}

pub fn account_service() -> Value {
    json!({
        "@odata.type": "#AccountService.v1_15_0.AccountService",
        "@odata.id": path("AccountService"),
        "Id": "AccountService",
        "Name": "Account Service",
        "ServiceEnabled": true,
        "MinPasswordLength": 1,
        "MaxPasswordLength": crate::accounts::MAX_PASSWORD,
        "AccountLockoutThreshold": 0,
        "AuthFailureLoggingThreshold": 3,
        "LocalAccountAuth": "Enabled",
        "Accounts": link(&path("AccountService/Accounts")),
        "Roles": link(&path("AccountService/Roles")),
        "Status": ok_status(),
    })
}

pub fn account_path(id: &str) -> String {
    path(&format!("AccountService/Accounts/{id}"))
}

pub fn accounts(all: &[Account]) -> Value {
    let members: Vec<String> = all.iter().map(|a| account_path(&a.id)).collect();
    collection(
        "ManagerAccountCollection",
        "Accounts Collection",
        &path("AccountService/Accounts"),
        &members,
    )
}

pub fn account(a: &Account) -> Value {
    json!({
        "@odata.type": "#ManagerAccount.v1_12_0.ManagerAccount",
        "@odata.id": account_path(&a.id),
        "Id": a.id,
        "Name": "User Account",
        "UserName": a.user,
        "Password": null,
        "RoleId": a.role,
        "Enabled": a.enabled,
        "Locked": false,
        "AccountTypes": ["Redfish"],
        "Links": {"Role": link(&path(&format!("AccountService/Roles/{}", a.role)))},
    })
}

pub fn roles() -> Value {
    let members: Vec<String> = ROLES
        .iter()
        .map(|r| path(&format!("AccountService/Roles/{r}")))
        .collect();
    collection(
        "RoleCollection",
        "Roles Collection",
        &path("AccountService/Roles"),
        &members,
    )
}

pub fn role(id: &str) -> Option<Value> {
    let p = privileges(id)?;
    Some(json!({
        "@odata.type": "#Role.v1_3_2.Role",
        "@odata.id": path(&format!("AccountService/Roles/{id}")),
        "Id": id,
        "Name": format!("{id} Role"),
        "RoleId": id,
        "IsPredefined": true,
        "AssignedPrivileges": p,
    }))
}

pub fn update_service() -> Value {
    json!({
        "@odata.type": "#UpdateService.v1_11_0.UpdateService",
        "@odata.id": path("UpdateService"),
        "Id": "UpdateService",
        "Name": "Update Service",
        "ServiceEnabled": false,
        "FirmwareInventory": link(&path("UpdateService/FirmwareInventory")),
        "Status": ok_status(),
    })
}

pub fn firmwares() -> Value {
    collection(
        "SoftwareInventoryCollection",
        "Firmware Inventory Collection",
        &path("UpdateService/FirmwareInventory"),
        &[path("UpdateService/FirmwareInventory/BMC")],
    )
}

pub fn firmware(id: &str) -> Option<Value> {
    (id == "BMC").then(|| {
        json!({
            "@odata.type": "#SoftwareInventory.v1_10_0.SoftwareInventory",
            "@odata.id": path("UpdateService/FirmwareInventory/BMC"),
            "Id": "BMC",
            "Name": "BMC Firmware",
            "Version": env!("CARGO_PKG_VERSION"),
            "Updateable": false,
            "Status": ok_status(),
        })
    })
}

pub fn task_service(now: DateTime<Utc>) -> Value {
    json!({
        "@odata.type": "#TaskService.v1_2_0.TaskService",
        "@odata.id": path("TaskService"),
        "Id": "TaskService",
        "Name": "Task Service",
        "ServiceEnabled": true,
        "CompletedTaskOverWritePolicy": "Oldest",
        "LifeCycleEventOnTaskStateChange": false,
        "DateTime": now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        "Tasks": link(&path("TaskService/Tasks")),
        "Status": ok_status(),
    })
}

pub fn tasks() -> Value {
    collection(
        "TaskCollection",
        "Task Collection",
        &path("TaskService/Tasks"),
        &[],
    )
}
