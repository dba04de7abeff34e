//! ViewManager: ContainerView (recursive or not, filtered by type), ListView, DestroyView.
//! A view's `view` property is computed when read, so it follows inventory changes.

use crate::call::arg_moref;
use crate::call::Call;
use crate::fault::Fault;
use crate::objects::{is_a, ManagedObject};
use crate::soap::Element;
use crate::state::State;
use crate::value::{mor_array, string_array, write_element, Moref, Val};
use std::collections::HashSet;

pub(crate) fn dispatch(
    state: &mut State,
    call: &mut Call<'_>,
    _this: &Moref,
    method: &str,
    args: &Element,
) -> Option<Result<String, Fault>> {
    Some(match method {
        "CreateContainerView" => create_container_view(state, call, args),
        "CreateListView" => create_list_view(state, call, args),
        _ => return None,
    })
}

fn session_value(state: &mut State, call: &Call<'_>) -> String {
    let session = call.session.clone().unwrap_or_default();
    let n = state.inventory.next_value("view");
    format!("session[{session}]{n}")
}

fn create_container_view(
    state: &mut State,
    call: &Call<'_>,
    args: &Element,
) -> Result<String, Fault> {
    let container = arg_moref(args, "container")?;
    let target = state
        .inventory
        .by_value(&container.value)
        .map(|o| o.moref.clone())
        .ok_or_else(|| Fault::not_found(&container))?;
    if !matches!(
        &*target.ty,
        "Folder"
            | "Datacenter"
            | "ComputeResource"
            | "ClusterComputeResource"
            | "ResourcePool"
            | "HostSystem"
            | "VirtualApp"
    ) {
        return Err(Fault::invalid_argument("container"));
    }
    let types: Vec<String> = args
        .children_named("type")
        .map(|t| t.text.trim().to_string())
        .collect();
    let recursive = args.flag("recursive").unwrap_or(false);
    let value = session_value(state, call);
    let mut view = ManagedObject::new("ContainerView", &value);
    view.set("container", target);
    view.set("type", string_array(types));
    view.set("recursive", recursive);
    let m = view.moref.clone();
    state.inventory.insert(view);
    let mut out = String::new();
    write_element(&mut out, "returnval", &Val::Mor(m), false);
    Ok(out)
}

fn create_list_view(state: &mut State, call: &Call<'_>, args: &Element) -> Result<String, Fault> {
    let objs: Vec<Moref> = args
        .children_named("obj")
        .filter_map(Element::moref)
        .collect();
    let value = session_value(state, call);
    let mut view = ManagedObject::new("ListView", &value);
    view.set("view", mor_array(objs));
    let m = view.moref.clone();
    state.inventory.insert(view);
    let mut out = String::new();
    write_element(&mut out, "returnval", &Val::Mor(m), false);
    Ok(out)
}

/// A ContainerView's or ListView's own method: DestroyView.
pub(crate) fn dispatch_view(
    state: &mut State,
    _call: &mut Call<'_>,
    this: &Moref,
    method: &str,
    _args: &Element,
) -> Option<Result<String, Fault>> {
    match method {
        "DestroyView" => Some(destroy(state, this)),
        _ => None,
    }
}

pub(crate) fn destroy(state: &mut State, this: &Moref) -> Result<String, Fault> {
    state.inventory.remove(this);
    Ok(String::new())
}

/// The objects a container view shows now.
pub(crate) fn view_contents(state: &State, view: &ManagedObject) -> Vec<Moref> {
    view_contents_noting(state, view, None)
}

/// As [`view_contents`], noting in `nodes` the view and every object whose children it read
/// (a change to any of them may change what the view shows).
pub(crate) fn view_contents_noting(
    state: &State,
    view: &ManagedObject,
    mut nodes: Option<&mut HashSet<String>>,
) -> Vec<Moref> {
    if let Some(n) = nodes.as_deref_mut() {
        n.insert(view.moref.value.clone());
    }
    let Some(container) = view.props.get("container").and_then(Val::as_mor) else {
        return Vec::new();
    };
    let types: Vec<String> = view
        .props
        .get("type")
        .map(|t| match t {
            Val::Array(_, items) => items
                .iter()
                .filter_map(|i| i.as_str().map(str::to_string))
                .collect(),
            _ => Vec::new(),
        })
        .unwrap_or_default();
    let recursive = matches!(view.props.get("recursive"), Some(Val::Bool(true)));
    // Borrowed from the inventory until the end: a view over ten thousand VMs is walked
    // for every listing, and a copy of each reference per step was most of its cost.
    let mut out = Vec::new();
    let mut seen: HashSet<&str> = HashSet::new();
    let mut queue = vec![container];
    while let Some(next) = queue.pop() {
        if let Some(n) = nodes.as_deref_mut() {
            if has_children(&next.ty) {
                n.insert(next.value.clone());
            }
        }
        let mut children = state.inventory.child_refs(next);
        children.reverse();
        for child in children {
            if !seen.insert(child.value.as_str()) {
                continue;
            }
            if types.is_empty() || types.iter().any(|t| is_a(&child.ty, t)) {
                out.push(child.clone());
            }
            if recursive {
                queue.push(child);
            }
        }
    }
    out
}

/// Whether objects of type `ty` can have children in a container view's walk (a VM, host
/// or datastore cannot: noting each of them would make every VM's change a reselection).
fn has_children(ty: &str) -> bool {
    matches!(
        ty,
        "Folder"
            | "StoragePod"
            | "Datacenter"
            | "ComputeResource"
            | "ClusterComputeResource"
            | "ResourcePool"
            | "VirtualApp"
    )
}
