//! Folder and ResourcePool creation and moves: CreateFolder, MoveIntoFolder_Task,
//! CreateResourcePool.

use crate::call::Call;
use crate::fault::duplicate_name;
use crate::fault::Fault;
use crate::objects::{is_a, ManagedObject};
use crate::soap::Element;
use crate::state::timeline::Operation;
use crate::state::State;
use crate::task;
use crate::value::{mor_array, write_element, Moref, Val};

fn name_taken(state: &State, parent: &Moref, name: &str) -> bool {
    state.inventory.child_named(parent, name).is_some()
}

pub(crate) fn dispatch(
    state: &mut State,
    call: &mut Call<'_>,
    this: &Moref,
    method: &str,
    args: &Element,
) -> Option<Result<String, Fault>> {
    Some(match (&*this.ty, method) {
        ("Folder", "CreateFolder") => {
            create_folder(state, this, args.text_of("name").unwrap_or("").trim())
        }
        ("Folder", "MoveIntoFolder_Task") => {
            let list: Vec<Moref> = args
                .children_named("list")
                .filter_map(Element::moref)
                .collect();
            Ok(task::start(
                state,
                call,
                this,
                method,
                args,
                Operation::MoveInto {
                    folder: this.clone(),
                    list,
                },
            ))
        }
        ("ResourcePool", "CreateResourcePool") => {
            create_pool(state, this, args.text_of("name").unwrap_or("").trim())
        }
        ("Folder", "CreateVM_Task") => {
            let Some(config) = args.child("config").cloned() else {
                return Some(Err(Fault::invalid_argument("config")));
            };
            let pool = match crate::call::arg_moref(args, "pool") {
                Ok(p) => p,
                Err(f) => return Some(Err(f)),
            };
            let host = args.child("host").and_then(Element::moref);
            Ok(task::start(
                state,
                call,
                this,
                method,
                args,
                Operation::CreateVm {
                    folder: this.clone(),
                    config,
                    pool,
                    host,
                },
            ))
        }
        _ => return None,
    })
}

/// The folder `name` in `parent`, made if there is none (a provisioning helper's, as
/// vm-operator keeps a namespace's VMs in a folder of its own).
pub(crate) fn ensure_folder(state: &mut State, parent: &Moref, name: &str) -> Result<Moref, Fault> {
    match state.inventory.child_named(parent, name) {
        Some(m) if m.ty == "Folder" => Ok(m),
        _ => new_folder(state, parent, name),
    }
}

fn create_folder(state: &mut State, parent: &Moref, name: &str) -> Result<String, Fault> {
    let m = new_folder(state, parent, name)?;
    let mut out = String::new();
    write_element(&mut out, "returnval", &Val::Mor(m), false);
    Ok(out)
}

fn new_folder(state: &mut State, parent: &Moref, name: &str) -> Result<Moref, Fault> {
    if name.is_empty() {
        return Err(Fault::invalid_argument("name"));
    }
    if name_taken(state, parent, name) {
        return Err(duplicate_name(name, parent));
    }
    let child_type = state
        .inventory
        .get(parent)
        .and_then(|p| p.props.get("childType"))
        .cloned();
    let prefix = match parent.value.chars().nth(6) {
        Some(c @ ('v' | 'h' | 's' | 'n' | 'd')) if parent.value.starts_with("group-") => {
            format!("group-{c}")
        }
        _ => "group-v".to_string(),
    };
    let value = state.inventory.next_value(&prefix);
    let mut f = ManagedObject::new("Folder", &value);
    f.set("name", name);
    f.set("parent", parent.clone());
    f.set("childEntity", mor_array([]));
    if let Some(ct) = child_type {
        f.set("childType", ct);
    }
    f.set(
        "overallStatus",
        Val::Enum("ManagedEntityStatus", "green".into()),
    );
    let m = f.moref.clone();
    state.inventory.insert(f);
    if let Some(p) = state.inventory.get_mut(parent) {
        p.push_mor("childEntity", m.clone());
    }
    Ok(m)
}

fn create_pool(state: &mut State, parent: &Moref, name: &str) -> Result<String, Fault> {
    if name.is_empty() {
        return Err(Fault::invalid_argument("name"));
    }
    if name_taken(state, parent, name) {
        return Err(duplicate_name(name, parent));
    }
    let owner = state
        .inventory
        .get(parent)
        .and_then(|p| p.props.get("owner"))
        .cloned();
    let value = state.inventory.next_value("resgroup");
    let mut p = ManagedObject::new("ResourcePool", &value);
    p.set("name", name);
    p.set("parent", parent.clone());
    if let Some(o) = owner {
        p.set("owner", o);
    }
    p.set("resourcePool", mor_array([]));
    p.set("vm", mor_array([]));
    p.set(
        "overallStatus",
        Val::Enum("ManagedEntityStatus", "green".into()),
    );
    let m = p.moref.clone();
    state.inventory.insert(p);
    if let Some(parent) = state.inventory.get_mut(parent) {
        parent.push_mor("resourcePool", m.clone());
    }
    let mut out = String::new();
    write_element(&mut out, "returnval", &Val::Mor(m), false);
    Ok(out)
}

/// Moves entities into a folder (the MoveIntoFolder_Task operation).
pub(crate) fn move_into(
    state: &mut State,
    folder: &Moref,
    list: &[Moref],
) -> Result<Option<Val>, Fault> {
    for m in list {
        let obj = state
            .inventory
            .get(m)
            .cloned()
            .ok_or_else(|| Fault::not_found(m))?;
        if !(is_a(&m.ty, "VirtualMachine") || m.ty == "Folder") {
            return Err(Fault::invalid_argument("list"));
        }
        if name_taken(state, folder, obj.name()) {
            return Err(duplicate_name(obj.name(), folder));
        }
        if let Some(old) = obj.props.get("parent").and_then(Val::as_mor).cloned() {
            if let Some(o) = state.inventory.get_mut(&old) {
                if let Some(Val::Array(_, items)) = o.props.get_mut("childEntity") {
                    items.retain(|v| v.as_mor() != Some(m));
                }
            }
        }
        state.inventory.reparent(m, folder);
        if let Some(f) = state.inventory.get_mut(folder) {
            f.push_mor("childEntity", m.clone());
        }
    }
    Ok(None)
}

/// Creates a VM from a VirtualMachineConfigSpec (the CreateVM_Task operation).
pub(crate) fn create_vm(
    state: &mut State,
    call: &Call<'_>,
    folder: &Moref,
    config: &Element,
    pool: &Moref,
    host: Option<&Moref>,
) -> Result<Option<Val>, Fault> {
    let name = config.text_of("name").unwrap_or("").trim().to_string();
    if name.is_empty() {
        return Err(Fault::invalid_argument("config.name"));
    }
    if name_taken(state, folder, &name) {
        return Err(duplicate_name(&name, folder));
    }
    if !state
        .inventory
        .by_value(&pool.value)
        .is_some_and(|p| is_a(&p.moref.ty, "ResourcePool"))
    {
        return Err(Fault::not_found(pool));
    }
    let owner = state
        .inventory
        .get(pool)
        .and_then(|p| p.props.get("owner"))
        .and_then(Val::as_mor)
        .cloned();
    let owner_obj = owner
        .as_ref()
        .and_then(|o| state.inventory.by_value(&o.value))
        .cloned();
    let host = match host {
        Some(h) => h.clone(),
        None => owner_obj
            .as_ref()
            .and_then(|o| o.props.get("host"))
            .map(Val::morefs)
            .and_then(|h| h.first().cloned())
            .ok_or_else(|| Fault::invalid_argument("host"))?,
    };
    // The datastore named in `files.vmPathName` ("[LocalDS_0] …"), else the cluster's first.
    let wanted_ds = config
        .child("files")
        .and_then(|f| f.text_of("vmPathName"))
        .and_then(|p| p.trim().strip_prefix('['))
        .and_then(|p| p.split(']').next())
        .map(str::to_string);
    let datastores = owner_obj
        .as_ref()
        .and_then(|o| o.props.get("datastore"))
        .map(Val::morefs)
        .unwrap_or_default();
    let datastore = datastores
        .iter()
        .find(|d| {
            wanted_ds
                .as_deref()
                .is_none_or(|w| state.inventory.get(d).is_some_and(|o| o.name() == w))
        })
        .cloned()
        .ok_or_else(|| Fault::invalid_argument("config.files.vmPathName"))?;
    let network = owner_obj
        .as_ref()
        .and_then(|o| o.props.get("network"))
        .map(Val::morefs)
        .and_then(|n| n.first().cloned())
        .ok_or_else(|| Fault::invalid_argument("network"))?;
    let at = crate::inventory::vm::VmPlacement {
        host,
        pool: pool.clone(),
        folder: folder.clone(),
        datastore,
        network,
    };
    let vm = crate::inventory::vm::create_vm(&mut state.inventory, &name, &at, call.now);
    crate::virtual_machine::set_power(state, &vm, "poweredOff", call.now);
    crate::virtual_machine::reconfigure(state, &vm, config)?;
    crate::event_manager::emit(
        state,
        call,
        "VmCreatedEvent",
        Some(&vm),
        format!("Created virtual machine {name}"),
    );
    Ok(Some(Val::Mor(vm)))
}
