//! VirtualMachineSnapshot: create, revert (to current or to a given snapshot), remove one or
//! all; the VM's `snapshot` and `rootSnapshot` properties follow the tree.
//!
//! Each VM's snapshot tree and current snapshot (`state::snapshots`) are driven from here; the
//! inventory holds the snapshot objects and the properties rendered from the tree.

use crate::call::Call;
use crate::fault::Fault;
use crate::objects::ManagedObject;
use crate::soap::Element;
use crate::state::snapshots::SnapNode;
use crate::state::timeline::{Operation, SnapOp};
use crate::state::State;
use crate::task;
use crate::value::{mor_array, Data, Moref, Val};

/// Removes every snapshot of a VM, from the tree and the inventory (RemoveAllSnapshots, and
/// a destroyed VM's). The VM's own properties are left to the caller.
pub(crate) fn forget_vm(state: &mut State, vm: &Moref) {
    for n in state.snapshots.remove_vm(&vm.value) {
        state.inventory.remove(&n.moref);
    }
}

pub(crate) fn dispatch_vm(
    state: &mut State,
    call: &mut Call<'_>,
    vm: &Moref,
    method: &str,
    args: &Element,
) -> Option<Result<String, Fault>> {
    let op = match method {
        "CreateSnapshot_Task" | "CreateSnapshotEx_Task" => SnapOp::Create {
            vm: vm.clone(),
            name: args.text_of("name").unwrap_or("").to_string(),
            description: args.text_of("description").unwrap_or("").to_string(),
        },
        "RevertToCurrentSnapshot_Task" => SnapOp::RevertToCurrent { vm: vm.clone() },
        "RemoveAllSnapshots_Task" => SnapOp::RemoveAll { vm: vm.clone() },
        _ => return None,
    };
    Some(Ok(task::start(
        state,
        call,
        vm,
        method,
        args,
        Operation::Snapshot(op),
    )))
}

pub(crate) fn dispatch_snapshot(
    state: &mut State,
    call: &mut Call<'_>,
    snapshot: &Moref,
    method: &str,
    args: &Element,
) -> Option<Result<String, Fault>> {
    let vm = state
        .inventory
        .get(snapshot)
        .and_then(|s| s.props.get("vm"))
        .and_then(Val::as_mor)
        .cloned()?;
    let op = match method {
        "RevertToSnapshot_Task" => SnapOp::RevertTo {
            snapshot: snapshot.clone(),
        },
        "RemoveSnapshot_Task" => SnapOp::Remove {
            snapshot: snapshot.clone(),
            remove_children: args.flag("removeChildren").unwrap_or(false),
        },
        "RenameSnapshot" => {
            if let Some(name) = args.text_of("name") {
                if let Some(n) = state.snapshots.node_mut(&vm.value, snapshot) {
                    n.name = name.to_string();
                }
            }
            render(state, &vm);
            return Some(Ok(String::new()));
        }
        _ => return None,
    };
    Some(Ok(task::start(
        state,
        call,
        snapshot,
        method,
        args,
        Operation::Snapshot(op),
    )))
}

pub(crate) fn run(state: &mut State, call: &Call<'_>, op: SnapOp) -> Result<Option<Val>, Fault> {
    match op {
        SnapOp::Create {
            vm,
            name,
            description,
        } => {
            let o = state
                .inventory
                .get(&vm)
                .ok_or_else(|| Fault::not_found(&vm))?;
            let config = o.props.get("config").cloned();
            let power = crate::virtual_machine::power_state(state, &vm);
            let value = state.inventory.next_value("snapshot");
            let moref = Moref::new("VirtualMachineSnapshot", &value);
            let parent = state.snapshots.current(&vm.value).cloned();
            let nodes = state.snapshots.tree_mut(&vm.value);
            let id = nodes.iter().map(|n| n.id).max().unwrap_or(0) + 1;
            nodes.push(SnapNode {
                moref: moref.clone(),
                name: name.clone(),
                description,
                id,
                created: call.now,
                power,
                parent,
                config: config.clone(),
            });
            let mut snap = ManagedObject::new("VirtualMachineSnapshot", &value);
            snap.set("vm", vm.clone());
            if let Some(c) = config {
                snap.set("config", c);
            }
            state.inventory.insert(snap);
            state.snapshots.set_current(&vm.value, Some(moref.clone()));
            render(state, &vm);
            crate::event_manager::emit(
                state,
                call,
                "VmBeingCreatedEvent",
                Some(&vm),
                format!("Task: Create virtual machine snapshot {name}"),
            );
            Ok(Some(Val::Mor(moref)))
        }
        SnapOp::RevertToCurrent { vm } => {
            let current = state.snapshots.current(&vm.value).cloned().ok_or_else(|| {
                let mut f = Fault::new_pub(
                    "NotFound",
                    "The object or item referred to could not be found.",
                );
                f.fields = Data::new("NotFound");
                f
            })?;
            revert(state, call, &vm, &current)
        }
        SnapOp::RevertTo { snapshot } => {
            let vm = vm_of(state, &snapshot)?;
            revert(state, call, &vm, &snapshot)
        }
        SnapOp::Remove {
            snapshot,
            remove_children,
        } => remove(state, &snapshot, remove_children),
        SnapOp::RemoveAll { vm } => {
            forget_vm(state, &vm);
            render(state, &vm);
            Ok(None)
        }
    }
}

/// RemoveSnapshot: one snapshot (its children move up to its parent) or, with
/// `remove_children`, its whole subtree; the current snapshot falls back to the parent.
fn remove(
    state: &mut State,
    snapshot: &Moref,
    remove_children: bool,
) -> Result<Option<Val>, Fault> {
    let vm = vm_of(state, snapshot)?;
    let nodes = state.snapshots.tree_mut(&vm.value);
    let Some(node) = nodes.iter().find(|n| &n.moref == snapshot).cloned() else {
        return Err(Fault::not_found(snapshot));
    };
    let mut doomed = vec![snapshot.clone()];
    if remove_children {
        let mut i = 0;
        while i < doomed.len() {
            let p = doomed[i].clone();
            doomed.extend(
                nodes
                    .iter()
                    .filter(|n| n.parent.as_ref() == Some(&p))
                    .map(|n| n.moref.clone()),
            );
            i += 1;
        }
    } else {
        for n in nodes
            .iter_mut()
            .filter(|n| n.parent.as_ref() == Some(snapshot))
        {
            n.parent = node.parent.clone();
        }
    }
    nodes.retain(|n| !doomed.contains(&n.moref));
    for d in &doomed {
        state.inventory.remove(d);
    }
    if state
        .snapshots
        .current(&vm.value)
        .is_some_and(|c| doomed.contains(c))
    {
        state.snapshots.set_current(&vm.value, node.parent);
    }
    render(state, &vm);
    Ok(None)
}

fn vm_of(state: &State, snapshot: &Moref) -> Result<Moref, Fault> {
    state
        .inventory
        .get(snapshot)
        .and_then(|s| s.props.get("vm"))
        .and_then(Val::as_mor)
        .cloned()
        .ok_or_else(|| Fault::not_found(snapshot))
}

fn revert(
    state: &mut State,
    call: &Call<'_>,
    vm: &Moref,
    snapshot: &Moref,
) -> Result<Option<Val>, Fault> {
    let node = state
        .snapshots
        .tree(&vm.value)
        .iter()
        .find(|n| &n.moref == snapshot)
        .cloned()
        .ok_or_else(|| Fault::not_found(snapshot))?;
    if let (Some(config), Some(o)) = (node.config.clone(), state.inventory.get_mut(vm)) {
        // The VM's identity (name, UUIDs) stays; its configuration goes back.
        let keep = |c: &Val, f: &str| c.path(f).cloned();
        let current = o.props.get("config").cloned();
        let mut restored = config;
        if let (Some(r), Some(cur)) = (restored.data_mut(), current) {
            for f in ["name", "uuid", "instanceUuid"] {
                if let Some(v) = keep(&cur, f) {
                    r.set(f, v);
                }
            }
        }
        o.set("config", restored);
    }
    crate::virtual_machine::set_power(state, vm, &node.power, call.now);
    state
        .snapshots
        .set_current(&vm.value, Some(snapshot.clone()));
    render(state, vm);
    Ok(None)
}

/// Rewrites the VM's `snapshot` / `rootSnapshot` and each snapshot's `childSnapshot`.
fn render(state: &mut State, vm: &Moref) {
    let nodes = state.snapshots.tree(&vm.value).to_vec();
    fn tree(nodes: &[SnapNode], parent: Option<&Moref>, vm: &Moref) -> Vec<Val> {
        nodes
            .iter()
            .filter(|n| n.parent.as_ref() == parent)
            .map(|n| {
                Val::from(
                    Data::new("VirtualMachineSnapshotTree")
                        .with("snapshot", n.moref.clone())
                        .with("vm", vm.clone())
                        .with("name", n.name.as_str())
                        .with("description", n.description.as_str())
                        .with("id", n.id)
                        .with("createTime", n.created)
                        .with(
                            "state",
                            Val::Enum("VirtualMachinePowerState", n.power.clone().into()),
                        )
                        .with("quiesced", false)
                        .with(
                            "childSnapshotList",
                            Val::Array(
                                "VirtualMachineSnapshotTree",
                                tree(nodes, Some(&n.moref), vm),
                            ),
                        ),
                )
            })
            .collect()
    }
    for n in &nodes {
        let children: Vec<Moref> = nodes
            .iter()
            .filter(|c| c.parent.as_ref() == Some(&n.moref))
            .map(|c| c.moref.clone())
            .collect();
        if let Some(s) = state.inventory.get_mut(&n.moref) {
            s.set("childSnapshot", mor_array(children));
        }
    }
    let current = state.snapshots.current(&vm.value).cloned();
    let Some(o) = state.inventory.get_mut(vm) else {
        return;
    };
    if nodes.is_empty() {
        o.props.remove("snapshot");
        o.props.remove("rootSnapshot");
        return;
    }
    let mut info = Data::new("VirtualMachineSnapshotInfo");
    if let Some(c) = current {
        info.set("currentSnapshot", c);
    }
    info.set(
        "rootSnapshotList",
        Val::Array("VirtualMachineSnapshotTree", tree(&nodes, None, vm)),
    );
    o.set("snapshot", info);
    o.set(
        "rootSnapshot",
        mor_array(
            nodes
                .iter()
                .filter(|n| n.parent.is_none())
                .map(|n| n.moref.clone()),
        ),
    );
}
