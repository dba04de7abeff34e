//! A simulator that survives a restart: its inventory, what it keeps beside each object (a
//! VM's guest addresses, snapshots and storage policies, a cluster's DRS configuration) and
//! its REST services' state (tags, categories, cluster modules, content libraries) and the
//! accounts of its VMs' BMCs written to a group of the durable store, and read back when the
//! simulator starts on that group again.
//!
//! Each changed managed object is one record (`managedobjects`, named by its reference
//! value), written when the call that changed it lets go of the simulator's lock, so records
//! are written in the order the changes were made and a call is answered only once its
//! records are durable (the server awaits the store's tickets, as the API server does).
//! Session objects (views, filters, a session's own collectors) die with their sessions and
//! are not kept; neither are sessions (vCenter's die with it too).
//!
//! What one record costs is one object's properties, its long lists (a folder's ten thousand
//! VMs) kept in pieces of their own (`pieces`), so a change writes what it touched and costs
//! about the same in a vCenter of ten VMs as in one of ten thousand.

pub mod codec;
mod keeper;
mod pieces;

pub(crate) use keeper::restore;
pub use keeper::Keeper;

/// The simulator's identity a restart must keep: its instance UUID (in `about`, in every
/// UUID derived from it, and the BMC service's). Taken from the keeper when it holds one,
/// else kept as `config` has it.
pub(crate) fn keep_identity(config: &mut crate::config::SimConfig, keeper: &Keeper) {
    match keeper.record::<String>(INSTANCE_UUID) {
        Some(uuid) => config.instance_uuid = uuid,
        None => keeper.put_record(INSTANCE_UUID, &config.instance_uuid),
    }
}

/// In the simulator's records: its instance UUID.
const INSTANCE_UUID: &str = "instanceuuid";
/// In the simulator's records: the REST services' state.
pub(crate) const TAGGING: &str = "tagging";
pub(crate) const CLUSTER_MODULES: &str = "clustermodules";
pub(crate) const CONTENT_LIBRARY: &str = "contentlibrary";
/// In the simulator's records: the accounts of its VMs' BMCs (the Redfish service).
pub(crate) const BMC_ACCOUNTS: &str = "bmcaccounts";

/// Whether an object of type `ty` with reference value `value` outlives its session.
pub fn kept(ty: &str, value: &str) -> bool {
    match ty {
        "ContainerView"
        | "ListView"
        | "InventoryView"
        | "PropertyFilter"
        | "EventHistoryCollector"
        | "TaskHistoryCollector" => false,
        "PropertyCollector" => !value.starts_with("session["),
        _ => true,
    }
}
