//! vCenter's system roles, the privilege each changing method needs, and the users a
//! simulator lets log in besides its own administrator: plain data, below the configuration
//! and the sessions that hold them (checking calls and answering the AuthorizationManager is
//! `authorization`'s).

use serde::{Deserialize, Serialize};

/// One of vCenter's system roles, by the name and id vCenter gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum SystemRole {
    #[default]
    Admin,
    ReadOnly,
    View,
    Anonymous,
    NoAccess,
}

impl SystemRole {
    /// Every system role, in vCenter's id order (-1 down to -5).
    pub const ALL: [SystemRole; 5] = [
        SystemRole::Admin,
        SystemRole::ReadOnly,
        SystemRole::View,
        SystemRole::Anonymous,
        SystemRole::NoAccess,
    ];

    /// vCenter's role id.
    pub fn id(self) -> i32 {
        match self {
            SystemRole::Admin => -1,
            SystemRole::ReadOnly => -2,
            SystemRole::View => -3,
            SystemRole::Anonymous => -4,
            SystemRole::NoAccess => -5,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            SystemRole::Admin => "Admin",
            SystemRole::ReadOnly => "ReadOnly",
            SystemRole::View => "View",
            SystemRole::Anonymous => "Anonymous",
            SystemRole::NoAccess => "NoAccess",
        }
    }

    pub(crate) fn label(self) -> (&'static str, &'static str) {
        match self {
            SystemRole::Admin => ("Administrator", "Full access rights"),
            SystemRole::ReadOnly => ("Read-only", "See details of objects, but not make changes"),
            SystemRole::View => ("View", "Visibility access (cannot be granted)"),
            SystemRole::Anonymous => ("Anonymous", "Not logged-in user (cannot be granted)"),
            SystemRole::NoAccess => ("No access", "Used for restricting granted access"),
        }
    }

    /// The privileges the role holds (Admin: every privilege the simulator knows).
    pub fn privileges(self) -> Vec<&'static str> {
        let base: &[&str] = match self {
            SystemRole::Admin => return all_privileges(),
            SystemRole::ReadOnly => &["System.Anonymous", "System.View", "System.Read"],
            SystemRole::View => &["System.Anonymous", "System.View"],
            SystemRole::Anonymous => &["System.Anonymous"],
            SystemRole::NoAccess => &[],
        };
        base.to_vec()
    }

    pub fn holds(self, privilege: &str) -> bool {
        self == SystemRole::Admin || self.privileges().contains(&privilege)
    }
}

impl std::str::FromStr for SystemRole {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        SystemRole::ALL
            .into_iter()
            .find(|r| r.name() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = SystemRole::ALL.iter().map(|r| r.name()).collect();
                format!("unknown role {s:?} (one of {})", names.join(", "))
            })
    }
}

/// A user a simulator lets log in besides its own administrator (`infrasim vcsim --users`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SimUser {
    pub name: String,
    pub password: String,
    #[serde(default)]
    pub role: SystemRole,
}

/// (managed-object type, method, privilege): what each changing method needs, as vCenter's
/// privilege reference names it. A method not listed (reads, sessions, the property
/// collector) needs no privilege here.
const REQUIRED: &[(&str, &str, &str)] = &[
    (
        "VirtualMachine",
        "CloneVM_Task",
        "VirtualMachine.Provisioning.Clone",
    ),
    (
        "VirtualMachine",
        "PowerOnVM_Task",
        "VirtualMachine.Interact.PowerOn",
    ),
    (
        "VirtualMachine",
        "PowerOffVM_Task",
        "VirtualMachine.Interact.PowerOff",
    ),
    (
        "VirtualMachine",
        "ShutdownGuest",
        "VirtualMachine.Interact.PowerOff",
    ),
    (
        "VirtualMachine",
        "ResetVM_Task",
        "VirtualMachine.Interact.Reset",
    ),
    (
        "VirtualMachine",
        "RebootGuest",
        "VirtualMachine.Interact.Reset",
    ),
    (
        "VirtualMachine",
        "SuspendVM_Task",
        "VirtualMachine.Interact.Suspend",
    ),
    (
        "VirtualMachine",
        "ReconfigVM_Task",
        "VirtualMachine.Config.Settings",
    ),
    (
        "VirtualMachine",
        "CustomizeVM_Task",
        "VirtualMachine.Provisioning.Customize",
    ),
    (
        "VirtualMachine",
        "MarkAsTemplate",
        "VirtualMachine.Provisioning.MarkAsTemplate",
    ),
    (
        "VirtualMachine",
        "MarkAsVirtualMachine",
        "VirtualMachine.Provisioning.MarkAsVM",
    ),
    (
        "VirtualMachine",
        "CreateSnapshot_Task",
        "VirtualMachine.State.CreateSnapshot",
    ),
    (
        "VirtualMachine",
        "RemoveAllSnapshots_Task",
        "VirtualMachine.State.RemoveSnapshot",
    ),
    (
        "VirtualMachine",
        "RevertToCurrentSnapshot_Task",
        "VirtualMachine.State.RevertToSnapshot",
    ),
    ("VirtualMachine", "RelocateVM_Task", "Resource.ColdMigrate"),
    ("VirtualMachine", "MigrateVM_Task", "Resource.HotMigrate"),
    (
        "VirtualMachine",
        "UnregisterVM",
        "VirtualMachine.Inventory.Unregister",
    ),
    (
        "VirtualMachine",
        "Destroy_Task",
        "VirtualMachine.Inventory.Delete",
    ),
    (
        "VirtualMachine",
        "Rename_Task",
        "VirtualMachine.Config.Rename",
    ),
    (
        "VirtualMachineSnapshot",
        "RemoveSnapshot_Task",
        "VirtualMachine.State.RemoveSnapshot",
    ),
    (
        "VirtualMachineSnapshot",
        "RevertToSnapshot_Task",
        "VirtualMachine.State.RevertToSnapshot",
    ),
    (
        "VirtualMachineSnapshot",
        "RenameSnapshot",
        "VirtualMachine.State.RenameSnapshot",
    ),
    ("Folder", "CreateFolder", "Folder.Create"),
    (
        "Folder",
        "MoveIntoFolder_Task",
        "VirtualMachine.Inventory.Move",
    ),
    ("Folder", "CreateVM_Task", "VirtualMachine.Inventory.Create"),
    (
        "Folder",
        "RegisterVM_Task",
        "VirtualMachine.Inventory.Register",
    ),
    ("Folder", "Destroy_Task", "Folder.Delete"),
    ("Folder", "Rename_Task", "Folder.Rename"),
    ("ResourcePool", "CreateResourcePool", "Resource.CreatePool"),
    (
        "ResourcePool",
        "CreateVM_Task",
        "VirtualMachine.Inventory.Create",
    ),
    ("ResourcePool", "Destroy_Task", "Resource.DeletePool"),
    ("ResourcePool", "Rename_Task", "Resource.RenamePool"),
    (
        "ClusterComputeResource",
        "ReconfigureComputeResource_Task",
        "Host.Inventory.EditCluster",
    ),
    (
        "ClusterComputeResource",
        "Destroy_Task",
        "Host.Inventory.DeleteCluster",
    ),
    (
        "ClusterComputeResource",
        "Rename_Task",
        "Host.Inventory.RenameCluster",
    ),
    ("Datacenter", "Destroy_Task", "Datacenter.Delete"),
    ("Datacenter", "Rename_Task", "Datacenter.Rename"),
    ("Datastore", "Destroy_Task", "Datastore.Delete"),
    ("Datastore", "Rename_Task", "Datastore.Rename"),
    (
        "HostDatastoreBrowser",
        "SearchDatastore_Task",
        "Datastore.Browse",
    ),
    (
        "HostDatastoreBrowser",
        "SearchDatastoreSubFolders_Task",
        "Datastore.Browse",
    ),
    (
        "CustomFieldsManager",
        "AddCustomFieldDef",
        "Global.ManageCustomFields",
    ),
    (
        "CustomFieldsManager",
        "RemoveCustomFieldDef",
        "Global.ManageCustomFields",
    ),
    (
        "CustomFieldsManager",
        "RenameCustomFieldDef",
        "Global.ManageCustomFields",
    ),
    ("CustomFieldsManager", "SetField", "Global.SetCustomField"),
    (
        "SessionManager",
        "TerminateSession",
        "Sessions.TerminateSession",
    ),
];

/// The privilege a method of `ty` needs, if any.
pub(crate) fn required(ty: &str, method: &str) -> Option<&'static str> {
    if method == "setCustomValue" {
        return Some("Global.SetCustomField");
    }
    REQUIRED
        .iter()
        .find(|(t, m, _)| *t == ty && *m == method)
        .map(|(_, _, p)| *p)
}

/// Every privilege the simulator knows: the system ones and those methods need.
pub(crate) fn all_privileges() -> Vec<&'static str> {
    let mut all = vec!["System.Anonymous", "System.View", "System.Read"];
    for (_, _, p) in REQUIRED {
        if !all.contains(p) {
            all.push(p);
        }
    }
    all
}
