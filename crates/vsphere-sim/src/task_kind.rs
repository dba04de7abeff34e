//! What vCenter writes in a TaskInfo for each task-returning method: `name` (the WSDL
//! method name), `descriptionId` (`<vmodl type>.<vmodl method>`, a key of TaskManager's
//! methodInfo), `entity`/`entityName` (always a ManagedEntity, or left out), and the type
//! the task's `result` has.
//!
//! The real calls and injected failures (`simulator::inject`) both describe their tasks
//! here, so a task on a datastore browser or a snapshot names the same entity either way.

use crate::objects::is_a;
use crate::soap::Element;
use crate::state::State;
use crate::value::{Moref, Val};

/// Whose method it is in `descriptionId`.
#[derive(Debug, Clone, Copy)]
enum Owner {
    /// A method every ManagedEntity (or ComputeResource) has: vCenter names the concrete
    /// type of the object it was called on (`VirtualMachine.destroy`, `Folder.rename`).
    Concrete,
    /// The vmodl type without `vim.` (`VirtualMachine`, `host.DatastoreBrowser`).
    Type(&'static str),
}

/// The declared result type of a task (pyvmomi's type info, from the WSDL).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Returns {
    Void,
    /// A managed object reference of this type (or a subtype).
    Mor(&'static str),
    /// A data object of this WSDL type.
    Data(&'static str),
    /// An array of data objects of this WSDL type.
    Array(&'static str),
    String,
}

/// One task-returning method.
#[derive(Debug)]
pub(crate) struct Kind {
    /// The WSDL method name, sent as `TaskInfo.name`.
    pub wsdl: &'static str,
    owner: Owner,
    /// The vmodl method name (lower camel case).
    vmodl: &'static str,
    pub returns: Returns,
}

const fn k(wsdl: &'static str, owner: Owner, vmodl: &'static str, returns: Returns) -> Kind {
    Kind {
        wsdl,
        owner,
        vmodl,
        returns,
    }
}

use Owner::{Concrete, Type};
use Returns::{Array, Data, Mor, Void};

const VM: Owner = Type("VirtualMachine");
const FOLDER: Owner = Type("Folder");
const SNAPSHOT: Owner = Type("vm.Snapshot");
const BROWSER: Owner = Type("host.DatastoreBrowser");
const CLUSTER: Owner = Type("ClusterComputeResource");
const FILES: Owner = Type("FileManager");
const DISKS: Owner = Type("VirtualDiskManager");

/// The task-returning methods the simulator implements.
pub(crate) const IMPLEMENTED: &[Kind] = &[
    k("PowerOnVM_Task", VM, "powerOn", Void),
    k("PowerOffVM_Task", VM, "powerOff", Void),
    k("ResetVM_Task", VM, "reset", Void),
    k("SuspendVM_Task", VM, "suspend", Void),
    k("ReconfigVM_Task", VM, "reconfigure", Void),
    k("UpgradeVM_Task", VM, "upgradeVirtualHardware", Void),
    k("CustomizeVM_Task", VM, "customize", Void),
    k("CloneVM_Task", VM, "clone", Mor("VirtualMachine")),
    k("CreateVM_Task", FOLDER, "createVm", Mor("VirtualMachine")),
    k(
        "CreateSnapshot_Task",
        VM,
        "createSnapshot",
        Mor("VirtualMachineSnapshot"),
    ),
    k(
        "CreateSnapshotEx_Task",
        VM,
        "createSnapshotEx",
        Mor("VirtualMachineSnapshot"),
    ),
    k(
        "RevertToCurrentSnapshot_Task",
        VM,
        "revertToCurrentSnapshot",
        Void,
    ),
    k("RemoveAllSnapshots_Task", VM, "removeAllSnapshots", Void),
    k("RevertToSnapshot_Task", SNAPSHOT, "revert", Void),
    k("RemoveSnapshot_Task", SNAPSHOT, "remove", Void),
    k("Rename_Task", Concrete, "rename", Void),
    k("Destroy_Task", Concrete, "destroy", Void),
    k("MoveIntoFolder_Task", FOLDER, "moveInto", Void),
    k(
        "SearchDatastore_Task",
        BROWSER,
        "search",
        Data("HostDatastoreBrowserSearchResults"),
    ),
    k(
        "SearchDatastoreSubFolders_Task",
        BROWSER,
        "searchSubFolders",
        Array("HostDatastoreBrowserSearchResults"),
    ),
];

/// Task-returning methods the simulator does not implement, which a fault rule may still
/// make fail (the call then returns a Task that ends in the fault).
const INJECTABLE: &[Kind] = &[
    k("RelocateVM_Task", VM, "relocate", Void),
    k("MigrateVM_Task", VM, "migrate", Void),
    k(
        "InstantClone_Task",
        VM,
        "instantClone",
        Mor("VirtualMachine"),
    ),
    k(
        "RegisterVM_Task",
        FOLDER,
        "registerVm",
        Mor("VirtualMachine"),
    ),
    k(
        "CreateChildVM_Task",
        Type("ResourcePool"),
        "createVm",
        Mor("VirtualMachine"),
    ),
    k(
        "AddStandaloneHost_Task",
        FOLDER,
        "addStandaloneHost",
        Mor("ComputeResource"),
    ),
    k("AddHost_Task", CLUSTER, "addHost", Mor("HostSystem")),
    k(
        "ReconfigureComputeResource_Task",
        Concrete,
        "reconfigureEx",
        Void,
    ),
    k("ReconfigureCluster_Task", CLUSTER, "reconfigure", Void),
    k("MoveInto_Task", CLUSTER, "moveInto", Void),
    k(
        "EnterMaintenanceMode_Task",
        Type("HostSystem"),
        "enterMaintenanceMode",
        Void,
    ),
    k(
        "ExitMaintenanceMode_Task",
        Type("HostSystem"),
        "exitMaintenanceMode",
        Void,
    ),
    k(
        "PowerOnMultiVM_Task",
        Type("Datacenter"),
        "powerOnVm",
        Data("ClusterPowerOnVmResult"),
    ),
    k(
        "CreateDVS_Task",
        FOLDER,
        "createDistributedVirtualSwitch",
        Mor("DistributedVirtualSwitch"),
    ),
    k(
        "AddDVPortgroup_Task",
        Type("DistributedVirtualSwitch"),
        "addPortgroups",
        Void,
    ),
    k("DeleteDatastoreFile_Task", FILES, "deleteFile", Void),
    k("CopyDatastoreFile_Task", FILES, "copyFile", Void),
    k("MoveDatastoreFile_Task", FILES, "moveFile", Void),
    k(
        "CreateVirtualDisk_Task",
        DISKS,
        "createVirtualDisk",
        Returns::String,
    ),
    k(
        "CopyVirtualDisk_Task",
        DISKS,
        "copyVirtualDisk",
        Returns::String,
    ),
    k(
        "MoveVirtualDisk_Task",
        DISKS,
        "moveVirtualDisk",
        Returns::String,
    ),
    k("DeleteVirtualDisk_Task", DISKS, "deleteVirtualDisk", Void),
    k("ExtendVirtualDisk_Task", DISKS, "extendVirtualDisk", Void),
];

/// The table's entry for a WSDL method name.
pub(crate) fn kind(method: &str) -> Option<&'static Kind> {
    IMPLEMENTED
        .iter()
        .chain(INJECTABLE)
        .find(|k| k.wsdl == method)
}

/// Whether a task's result has the type its method declares.
pub(crate) fn conforms(returns: Returns, result: Option<&Val>) -> bool {
    match (returns, result) {
        (Returns::Void, None) => true,
        (Returns::Mor(ty), Some(Val::Mor(m))) => is_a(&m.ty, ty),
        (Returns::Data(ty), Some(Val::Data(d))) => d.ty == ty,
        (Returns::Array(ty), Some(Val::Array(item, items))) => {
            *item == ty
                && items
                    .iter()
                    .all(|i| matches!(i, Val::Data(d) if d.ty == ty))
        }
        (Returns::String, Some(Val::Str(_))) => true,
        _ => false,
    }
}

/// `descriptionId` of `method` called on an object of type `this_ty`. A method missing
/// from the table (only an injected failure reaches here with one) gets its WSDL name
/// without `_Task`, first letter lowered, on the object's type.
pub(crate) fn description_id(this_ty: &str, method: &str) -> String {
    match kind(method) {
        Some(Kind {
            owner: Type(t),
            vmodl,
            ..
        }) => format!("{t}.{vmodl}"),
        Some(Kind {
            owner: Concrete,
            vmodl,
            ..
        }) => format!("{this_ty}.{vmodl}"),
        None => {
            let base = method.trim_end_matches("_Task");
            let mut chars = base.chars();
            let lowered: String = chars
                .next()
                .map(|c| c.to_ascii_lowercase())
                .into_iter()
                .chain(chars)
                .collect();
            format!("{this_ty}.{lowered}")
        }
    }
}

/// The ManagedEntity a task on `this` applies to, as vCenter reports it: a snapshot's VM,
/// the datastore a browser searches, a file or disk manager's `datacenter` argument, the
/// object itself when it is an entity; nothing otherwise (the field is optional, and
/// pyvmomi refuses an answer whose `entity` is not a ManagedEntity).
pub(crate) fn entity(state: &State, this: &Moref, args: &Element) -> Option<Moref> {
    let found = match &*this.ty {
        "VirtualMachineSnapshot" => state
            .inventory
            .get(this)
            .and_then(|s| s.props.get("vm"))
            .and_then(Val::as_mor)
            .cloned(),
        "HostDatastoreBrowser" => {
            let path = args.text_of("datastorePath").unwrap_or("");
            crate::datastore::datastore_for(state, this, path).map(|(ds, _)| ds)
        }
        "FileManager" | "VirtualDiskManager" => args.child("datacenter").and_then(Element::moref),
        _ => Some(this.clone()),
    }?;
    let live = state
        .inventory
        .by_value(&found.value)
        .map(|o| o.moref.clone())?;
    is_a(&live.ty, "ManagedEntity").then_some(live)
}

#[cfg(test)]
mod tests;
