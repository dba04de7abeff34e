//! The registry: which module answers the methods of each managed-object type, and which
//! module runs each operation the timeline has due.
//!
//! Adding a managed-object type is adding its file (with a `dispatch` of the [`Handler`]
//! shape) and a row to [`HANDLERS`]. Only the request loop (`simulator`) and the engine
//! (`engine`, for the timeline) call into here, and no managed-object module imports it,
//! so the modules below never loop back to the dispatcher.

use crate::call::Call;
use crate::fault::Fault;
use crate::soap::Element;
use crate::state::timeline::{Operation, Scheduled};
use crate::state::State;
use crate::value::Moref;
use crate::{
    authorization, cluster_compute_resource, custom_fields, datastore_browser, event_manager,
    folder, host, managed_entity, property_collector, search_index, service_instance,
    session_manager, snapshot, task, view_manager, virtual_machine,
};

/// One module's methods of a type: the answer, or `None` when the method is not among them
/// (the next handler of the type's row is asked, then the call faults with
/// `MethodNotFound`).
pub(crate) type Handler =
    fn(&mut State, &mut Call<'_>, &Moref, &str, &Element) -> Option<Result<String, Fault>>;

/// The ManagedEntity methods (Rename_Task, Destroy_Task) every inventory type shares.
const ENTITY: &[Handler] = &[managed_entity::dispatch];

/// Folders and resource pools create their children (CreateFolder, MoveIntoFolder_Task,
/// CreateResourcePool, CreateVM_Task), then are entities like the rest.
const CONTAINER: &[Handler] = &[folder::dispatch, managed_entity::dispatch];

/// Each managed-object type and its handlers, asked in order. PropertyCollector's waiting
/// methods and `Fetch` (which any object answers) come before this table: see
/// `simulator::dispatch`.
pub(crate) const HANDLERS: &[(&str, &[Handler])] = &[
    ("ServiceInstance", &[service_instance::dispatch]),
    ("SessionManager", &[session_manager::dispatch]),
    ("AuthorizationManager", &[authorization::dispatch]),
    ("PropertyCollector", &[property_collector::dispatch]),
    ("PropertyFilter", &[property_collector::dispatch_filter]),
    ("ViewManager", &[view_manager::dispatch]),
    ("ContainerView", &[view_manager::dispatch_view]),
    ("ListView", &[view_manager::dispatch_view]),
    ("SearchIndex", &[search_index::dispatch]),
    ("HostStorageSystem", &[host::dispatch_storage_system]),
    ("HostDatastoreBrowser", &[datastore_browser::dispatch]),
    // A VM's own methods, then its snapshot methods, then the entity ones.
    (
        "VirtualMachine",
        &[
            virtual_machine::dispatch,
            snapshot::dispatch_vm,
            managed_entity::dispatch,
        ],
    ),
    ("VirtualMachineSnapshot", &[snapshot::dispatch_snapshot]),
    ("CustomFieldsManager", &[custom_fields::dispatch]),
    ("EventManager", &[event_manager::dispatch]),
    ("Folder", CONTAINER),
    ("ResourcePool", CONTAINER),
    ("Datacenter", ENTITY),
    (
        "ClusterComputeResource",
        &[cluster_compute_resource::dispatch, managed_entity::dispatch],
    ),
    ("ComputeResource", ENTITY),
    ("HostSystem", ENTITY),
    ("Datastore", ENTITY),
];

/// The handlers of a type, in the order they are asked (none for a type the simulator does
/// not implement).
pub(crate) fn handlers_of(ty: &str) -> &'static [Handler] {
    HANDLERS
        .iter()
        .find(|(t, _)| *t == ty)
        .map_or(&[], |(_, handlers)| *handlers)
}

/// Answers `method` on `this` with the first of its type's handlers that knows it.
pub(crate) fn dispatch(
    state: &mut State,
    call: &mut Call<'_>,
    this: &Moref,
    method: &str,
    args: &Element,
) -> Result<String, Fault> {
    handlers_of(&this.ty)
        .iter()
        .find_map(|handler| handler(state, call, this, method, args))
        .unwrap_or_else(|| Err(Fault::method_not_found(this, method)))
}

/// Runs everything due by now, in order (running may schedule more), routing each entry
/// to the module that does its work. Calls reach it through `Call::run_due`.
pub(crate) fn run_due(state: &mut State, call: &Call<'_>) {
    while let Some(what) = state.timeline.take_due(call.now) {
        match what {
            Scheduled::Start { task } => task::mark_running(state, &task, call.now),
            Scheduled::Run { task, op } => {
                let outcome = run_operation(state, call, *op);
                task::complete(state, &task, outcome, call.now);
            }
            Scheduled::GuestReady { vm, boot } => virtual_machine::guest_ready(state, &vm, boot),
        }
    }
}

/// Runs one task's operation in the module that implements it.
fn run_operation(
    state: &mut State,
    call: &Call<'_>,
    op: Operation,
) -> Result<Option<crate::value::Val>, Fault> {
    match op {
        Operation::Vm(op) => virtual_machine::run(state, call, op),
        Operation::Rename { entity, name } => managed_entity::rename(state, &entity, &name),
        Operation::Destroy { entity } => managed_entity::destroy(state, call, &entity),
        Operation::Snapshot(op) => snapshot::run(state, call, op),
        Operation::MoveInto { folder, list } => folder::move_into(state, &folder, &list),
        Operation::CreateVm {
            folder,
            config,
            pool,
            host,
        } => folder::create_vm(state, call, &folder, &config, &pool, host.as_ref()),
        Operation::ReconfigureCluster {
            cluster,
            spec,
            modify,
        } => cluster_compute_resource::reconfigure(state, call, &cluster, &spec, modify),
        Operation::Fail(fault) => Err(fault),
        Operation::Done(result) => Ok(result),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_type_has_one_row() {
        let mut types: Vec<&str> = HANDLERS.iter().map(|(t, _)| *t).collect();
        types.sort_unstable();
        let before = types.len();
        types.dedup();
        assert_eq!(
            types.len(),
            before,
            "a type with two rows: only the first is read"
        );
    }

    #[test]
    fn a_vm_asks_its_own_methods_then_snapshots_then_the_entity_ones() {
        let vm = handlers_of("VirtualMachine");
        assert_eq!(vm.len(), 3);
        assert_eq!(vm[2] as usize, managed_entity::dispatch as Handler as usize);
        assert!(handlers_of("NoSuchType").is_empty());
    }
}
