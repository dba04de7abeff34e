//! ManagedEntity methods every inventory object shares: Rename_Task and Destroy_Task.

use crate::call::Call;
use crate::fault::{duplicate_name, Fault};
use crate::soap::Element;
use crate::state::timeline::Operation;
use crate::state::State;
use crate::task;
use crate::value::{Moref, Val};

pub(crate) fn dispatch(
    state: &mut State,
    call: &mut Call<'_>,
    this: &Moref,
    method: &str,
    args: &Element,
) -> Option<Result<String, Fault>> {
    Some(match method {
        "Rename_Task" => {
            let name = args.text_of("newName").unwrap_or("").trim().to_string();
            if name.is_empty() {
                return Some(Err(Fault::invalid_argument("newName")));
            }
            Ok(task::start(
                state,
                call,
                this,
                method,
                args,
                Operation::Rename {
                    entity: this.clone(),
                    name,
                },
            ))
        }
        "Destroy_Task" => Ok(task::start(
            state,
            call,
            this,
            method,
            args,
            Operation::Destroy {
                entity: this.clone(),
            },
        )),
        _ => return None,
    })
}

pub(crate) fn rename(state: &mut State, entity: &Moref, name: &str) -> Result<Option<Val>, Fault> {
    let parent = state
        .inventory
        .get(entity)
        .ok_or_else(|| Fault::not_found(entity))?
        .props
        .get("parent")
        .and_then(Val::as_mor)
        .cloned();
    if let Some(parent) = &parent {
        let taken = state.inventory.child_named(parent, name);
        if taken.is_some_and(|c| c != *entity) {
            return Err(duplicate_name(name, parent));
        }
    }
    state.inventory.rename(entity, name);
    let Some(o) = state.inventory.get_mut(entity) else {
        return Err(Fault::not_found(entity));
    };
    if let Some(config) = o.props.get_mut("config") {
        if config.path("name").is_some() {
            if let Some(c) = config.data_mut() {
                c.set("name", name);
            }
        }
    }
    if let Some(c) = o
        .props
        .get_mut("summary")
        .and_then(Val::data_mut)
        .and_then(|s| s.data_mut("config"))
    {
        c.set("name", name);
    }
    Ok(None)
}

pub(crate) fn destroy(
    state: &mut State,
    call: &Call<'_>,
    entity: &Moref,
) -> Result<Option<Val>, Fault> {
    let obj = state
        .inventory
        .get(entity)
        .cloned()
        .ok_or_else(|| Fault::not_found(entity))?;
    match &*entity.ty {
        "VirtualMachine" => {
            let ps = crate::virtual_machine::power_state(state, entity);
            if ps == "poweredOn" {
                return Err(crate::virtual_machine::invalid_power_state(
                    &ps,
                    "poweredOff",
                ));
            }
        }
        "Folder" | "ResourcePool" => {
            if !state.inventory.children(entity).is_empty() && entity.ty == "Folder" {
                return Err(Fault::new_pub("ResourceInUse", "The folder is not empty."));
            }
        }
        _ => {
            return Err(Fault::not_supported(&format!(
                "destroying a {} is not supported",
                entity.ty
            )))
        }
    }
    // Unlink from everything that lists it.
    let mut holders: Vec<Moref> = Vec::new();
    for prop in ["parent", "resourcePool"] {
        if let Some(m) = obj.props.get(prop).and_then(Val::as_mor) {
            holders.push(m.clone());
        }
    }
    if let Some(h) = obj.path("runtime.host").and_then(Val::as_mor) {
        holders.push(h.clone());
    }
    for prop in ["datastore", "network"] {
        if let Some(v) = obj.props.get(prop) {
            holders.extend(v.morefs());
        }
    }
    for holder in holders {
        if let Some(h) = state.inventory.get_mut(&holder) {
            for list in ["childEntity", "vm", "resourcePool"] {
                if let Some(Val::Array(_, items)) = h.props.get_mut(list) {
                    items.retain(|v| v.as_mor() != Some(entity));
                }
            }
        }
    }
    if entity.ty == "VirtualMachine" {
        let message = format!("Removed {} on {}", obj.name(), host_name(state, &obj));
        crate::event_manager::emit(state, call, "VmRemovedEvent", Some(entity), message);
        crate::snapshot::forget_vm(state, entity);
        crate::cluster_compute_resource::forget_vm(state, entity);
        state.profiles.forget(&entity.value);
    }
    state.inventory.remove(entity);
    Ok(None)
}

fn host_name(state: &State, obj: &crate::objects::ManagedObject) -> String {
    obj.path("runtime.host")
        .and_then(Val::as_mor)
        .and_then(|h| state.inventory.get(h))
        .map(|h| h.name().to_string())
        .unwrap_or_default()
}
