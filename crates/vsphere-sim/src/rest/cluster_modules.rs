//! Cluster modules (`/rest/vcenter/cluster/modules`, `/api/vcenter/cluster/modules`): named
//! groups of a cluster's VMs that vSphere keeps apart (anti-affinity). CAPV creates one per
//! control plane and per machine deployment and adds each machine's VM to it.

use super::sim::Sim;
use super::wire::{Answer, Form, Request};
use crate::value::Moref;
use http::Method;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};

/// One module: its cluster and member VMs.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct Module {
    cluster: String,
    vms: BTreeSet<String>,
}

/// A simulator's cluster modules, by ID.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
pub(crate) struct ClusterModules {
    modules: BTreeMap<String, Module>,
}

/// The module path after the spelling's prefix, if it is one.
pub(super) fn route(path: &str) -> Option<&str> {
    path.strip_prefix("/vcenter/cluster/modules")
}

pub(super) fn handle(
    sim: &Sim<'_, ClusterModules>,
    form: Form,
    req: &Request<'_>,
    rest: &str,
) -> Answer {
    let body: Value = serde_json::from_slice(req.body).unwrap_or(json!({}));
    forget_deleted(sim);
    let ok = || Answer::empty(if form == Form::Api { 204 } else { 200 });
    match (req.method, rest.trim_start_matches('/')) {
        (&Method::POST, "") => create(sim, form, body.get("spec").unwrap_or(&body)),
        (&Method::GET, "") => {
            let modules = sim.own_state();
            let summaries: Vec<Value> = modules
                .modules
                .iter()
                .map(|(id, m)| json!({"cluster": m.cluster, "module": id}))
                .collect();
            Answer::value(form, 200, json!({ "summaries": summaries }))
        }
        (&Method::DELETE, id) if !id.contains('/') => match sim.own_state().modules.remove(id) {
            Some(_) => ok(),
            None => not_found(form, id),
        },
        (method, members) => match members
            .strip_prefix("vm/")
            .and_then(|m| m.strip_suffix("/members"))
        {
            Some(id) if method == Method::GET => match sim.own_state().modules.get(id) {
                Some(m) => Answer::value(form, 200, json!({"vms": m.vms})),
                None => not_found(form, id),
            },
            Some(id) if method == Method::POST => change_members(sim, form, id, req.action, &body),
            _ => Answer::not_found(form, req.path),
        },
    }
}

/// Destroyed VMs leave their modules, and a deleted cluster's modules go, as vCenter drops
/// them (checked when modules are next read or changed). Lock order: the modules, then the
/// inventory.
fn forget_deleted(sim: &Sim<'_, ClusterModules>) {
    let mut modules = sim.own_state();
    sim.with_inventory(|inv| {
        let alive = |ty: &str, value: &str| inv.get(&Moref::new(ty, value)).is_some();
        modules
            .modules
            .retain(|_, m| alive("ClusterComputeResource", &m.cluster));
        for m in modules.modules.values_mut() {
            m.vms.retain(|vm| alive("VirtualMachine", vm));
        }
    });
}

fn not_found(form: Form, id: &str) -> Answer {
    Answer::error(
        form,
        404,
        "not_found",
        "com.vmware.vapi.std.errors.not_found",
        &format!("Cluster module {id} does not exist."),
    )
}

/// The not_found answer for inventory object `ty`/`value` (called `what`), if it is absent.
fn absent(
    sim: &Sim<'_, ClusterModules>,
    form: Form,
    ty: &str,
    value: &str,
    what: &str,
) -> Option<Answer> {
    let moref = Moref::new(ty, value);
    if sim.with_inventory(|inv| inv.get(&moref).is_some()) {
        return None;
    }
    Some(Answer::error(
        form,
        404,
        "not_found",
        "com.vmware.vapi.std.errors.not_found",
        &format!("{what} {value:?} does not exist."),
    ))
}

/// A new module for the cluster the spec names, which must exist.
fn create(sim: &Sim<'_, ClusterModules>, form: Form, spec: &Value) -> Answer {
    let cluster = spec.get("cluster").and_then(Value::as_str).unwrap_or("");
    if let Some(missing) = absent(sim, form, "ClusterComputeResource", cluster, "Cluster") {
        return missing;
    }
    let id = uuid::Uuid::new_v4().to_string();
    sim.own_state().modules.insert(
        id.clone(),
        Module {
            cluster: cluster.to_string(),
            vms: BTreeSet::new(),
        },
    );
    Answer::value(form, if form == Form::Api { 201 } else { 200 }, json!(id))
}

/// `action=add` or `action=remove` of VMs: `success` is false when any VM was already a
/// member (add) or was not one (remove); the others are still changed, as vCenter does.
fn change_members(
    sim: &Sim<'_, ClusterModules>,
    form: Form,
    id: &str,
    action: Option<&str>,
    body: &Value,
) -> Answer {
    let vms = super::wire::strings(body, "vms");
    for vm in &vms {
        if let Some(missing) = absent(sim, form, "VirtualMachine", vm, "Virtual machine") {
            return missing;
        }
    }
    let mut modules = sim.own_state();
    let Some(module) = modules.modules.get_mut(id) else {
        return not_found(form, id);
    };
    // Every VM is changed (no short circuit); success says whether each one was.
    let changed = match action {
        Some("add") => vms
            .iter()
            .filter(|vm| module.vms.insert((*vm).clone()))
            .count(),
        Some("remove") => vms.iter().filter(|vm| module.vms.remove(*vm)).count(),
        _ => {
            return Answer::error(
                form,
                400,
                "invalid_argument",
                "com.vmware.vapi.std.errors.invalid_argument",
                "action must be add or remove.",
            )
        }
    };
    let success = changed == vms.len();
    Answer::value(form, 200, json!({ "success": success }))
}
