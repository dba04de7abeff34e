//! EventManager: the events the simulator's methods emit, and QueryEvents over them.
//!
//! The event log (`state::events`) is driven from here; other modules add to it through `emit`.

use crate::call::Call;
use crate::fault::Fault;
use crate::objects::ManagedObject;
use crate::soap::Element;
use crate::state::State;
use crate::value::{write_element, Data, Moref, Val};

/// Installs the EventManager.
pub(crate) fn install(inv: &mut crate::objects::Inventory) {
    let m = crate::objects::refs::event_manager(inv.esx());
    inv.insert(ManagedObject::new(&m.ty, &m.value));
}

/// Records an event of `ty` about `vm` (or any entity), with vCenter's message.
pub(crate) fn emit(
    state: &mut State,
    call: &Call<'_>,
    ty: &'static str,
    entity: Option<&Moref>,
    message: String,
) {
    let key = state.events.next_key();
    let mut event = Data::new(ty)
        .with("key", key)
        .with("chainId", key)
        .with("createdTime", call.now)
        .with("userName", call.config.username.as_str());
    if let Some(e) = entity {
        if let Some(dc) = state.inventory.datacenter_of(e) {
            event.set(
                "datacenter",
                Data::new("DatacenterEventArgument")
                    .with("name", dc.name())
                    .with("datacenter", dc.moref.clone()),
            );
        }
        if let Some(o) = state.inventory.get(e) {
            if o.moref.ty == "VirtualMachine" {
                if let Some(host) = o.path("runtime.host").and_then(Val::as_mor).cloned() {
                    let host_name = state
                        .inventory
                        .get(&host)
                        .map(|h| h.name().to_string())
                        .unwrap_or_default();
                    event.set(
                        "host",
                        Data::new("HostEventArgument")
                            .with("name", host_name.as_str())
                            .with("host", host),
                    );
                }
                event.set(
                    "vm",
                    Data::new("VmEventArgument")
                        .with("name", o.name())
                        .with("vm", o.moref.clone()),
                );
            }
        }
    }
    event.set("fullFormattedMessage", message.as_str());
    if ty.starts_with("Vm") {
        event.set("template", false);
    }
    state.events.push(entity.cloned(), event);
}

pub(crate) fn dispatch(
    state: &mut State,
    _call: &mut Call<'_>,
    _this: &Moref,
    method: &str,
    args: &Element,
) -> Option<Result<String, Fault>> {
    Some(match method {
        "QueryEvents" => Ok(query(state, args.child("filter"))),
        _ => return None,
    })
}

/// Whether `entity` is `target` or (with recursion) below it.
fn within(state: &State, entity: &Moref, target: &Moref, recursion: &str) -> bool {
    if entity == target {
        return recursion != "children";
    }
    if recursion == "self" {
        return false;
    }
    let mut cur = state
        .inventory
        .get(entity)
        .and_then(|o| o.props.get("parent"))
        .and_then(Val::as_mor)
        .cloned();
    let mut depth = 0;
    while let Some(p) = cur {
        depth += 1;
        if &p == target {
            return recursion == "all" || depth == 1;
        }
        cur = state
            .inventory
            .get(&p)
            .and_then(|o| o.props.get("parent"))
            .and_then(Val::as_mor)
            .cloned();
    }
    false
}

fn query(state: &State, filter: Option<&Element>) -> String {
    let types: Vec<String> = filter
        .map(|f| {
            f.children_named("type")
                .chain(f.children_named("eventTypeId"))
                .map(|t| t.text.trim().to_string())
                .collect()
        })
        .unwrap_or_default();
    let entity = filter.and_then(|f| f.child("entity"));
    let target = entity
        .and_then(|e| e.child("entity"))
        .and_then(Element::moref);
    let recursion = entity
        .and_then(|e| e.text_of("recursion"))
        .unwrap_or("all")
        .to_string();
    let max = filter
        .and_then(|f| f.text_of("maxCount"))
        .and_then(|m| m.trim().parse::<usize>().ok())
        .unwrap_or(usize::MAX);
    let mut out = String::new();
    // Newest first, as vCenter pages events.
    for (subject, event) in state.events.newest_first() {
        if !types.is_empty() && !types.iter().any(|t| t == &event.ty) {
            continue;
        }
        if let Some(t) = &target {
            match subject {
                Some(s) if within(state, s, t, &recursion) => {}
                _ => continue,
            }
        }
        write_element(&mut out, "returnval", &Val::from(event.clone()), true);
        if out.matches("<returnval").count() >= max {
            break;
        }
    }
    out
}
