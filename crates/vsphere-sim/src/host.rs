//! HostSystem: the generated hosts (with their standalone ComputeResource when they have no
//! cluster), what a standalone ESXi host has besides (its datastore browser and storage
//! system), and the storage system's one method.
//!
//! A host's own methods (Rename_Task, Destroy_Task) are the shared ManagedEntity ones.

use crate::call::Call;
use crate::fault::Fault;
use crate::soap::Element;
use crate::state::State;
use crate::value::Moref;

/// HostStorageSystem's methods: QueryUnresolvedVmfsVolume, which finds no unresolved
/// (snapshot or replica) VMFS volumes, ever.
pub(crate) fn dispatch_storage_system(
    _state: &mut State,
    _call: &mut Call<'_>,
    _this: &Moref,
    method: &str,
    _args: &Element,
) -> Option<Result<String, Fault>> {
    match method {
        "QueryUnresolvedVmfsVolume" => Some(Ok(String::new())),
        _ => None,
    }
}
