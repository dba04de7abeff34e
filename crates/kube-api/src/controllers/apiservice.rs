//! kube-apiserver's autoregistration controller, in-process: a local APIService for every
//! built-in group version at start, one for every group version a CRD serves that no
//! built-in group has, and none left for a group version no CRD serves any longer. It
//! writes through the API as kube-apiserver; the APIService's strategy sets the status.

use crate::apiservices::{local, AUTOMANAGED, PRIORITIES, STORE_KEY};
use crate::state::State;
use crate::system_writer::SystemWriter;
use crate::values::At;
use infrasim_store::{ObjectKey, ReadAt};
use serde_json::Value;
use std::collections::BTreeSet;
use std::sync::Arc;

/// Creates `object` unless it exists (every CRD's registration asks for all custom group
/// versions again: a lookup answers most), as kube-apiserver's autoregistration controller
/// does through its loopback client; the APIService's strategy sets its status.
fn ensure(state: &Arc<State>, object: Value) {
    let name = object
        .at("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    if state
        .group
        .get(STORE_KEY, &ObjectKey::new("", &name))
        .is_some()
    {
        return;
    }
    if let Err(e) = SystemWriter::api_server(state).ensure(STORE_KEY, object) {
        tracing::warn!(apiservice = %name, error = %e.message, "registering APIService");
    }
}

/// The local APIServices of the built-in group versions (at start).
pub(crate) fn bootstrap(state: &Arc<State>) {
    let served: Vec<(String, Vec<String>)> = state.registry.groups();
    for (group, version, minimum, priority) in PRIORITIES {
        let is_served = served
            .iter()
            .any(|(g, vs)| g == group && vs.iter().any(|v| v == version));
        if is_served {
            ensure(state, local(group, version, (minimum, priority), "onstart"));
        }
    }
}

/// The group versions custom resources serve that no built-in group has.
fn custom_group_versions(state: &State) -> BTreeSet<(String, String)> {
    let builtin: BTreeSet<(String, String)> = PRIORITIES
        .iter()
        .map(|(g, v, _, _)| (g.to_string(), v.to_string()))
        .collect();
    state
        .registry
        .all()
        .iter()
        .filter(|r| r.custom)
        .map(|r| (r.group.clone(), r.version.clone()))
        .filter(|gv| !builtin.contains(gv))
        .collect()
}

/// The local APIServices of the custom resources served (after a CRD is registered).
pub(crate) fn register_custom(state: &Arc<State>) {
    for (group, version) in &custom_group_versions(state) {
        ensure(state, local(group, version, (1000, 100), "true"));
    }
}

/// The local APIServices of custom resources, at start and after a CRD went: one per group
/// version some CRD serves that no built-in group has, and none left for a group version no
/// CRD serves any longer.
pub(crate) fn sync_custom(state: &Arc<State>) {
    register_custom(state);
    let wanted = custom_group_versions(state);
    let Ok(snapshot) = state.group.snapshot(STORE_KEY, ReadAt::Latest) else {
        return;
    };
    for (key, object) in snapshot.objects.iter() {
        if object.meta.labels.get(AUTOMANAGED) != Some("true") {
            continue;
        }
        let Ok(value) = object.to_value() else {
            continue;
        };
        let gv = (
            value
                .at("/spec/group")
                .and_then(Value::as_str)
                .unwrap_or(""),
            value
                .at("/spec/version")
                .and_then(Value::as_str)
                .unwrap_or(""),
        );
        if !wanted.contains(&(gv.0.to_string(), gv.1.to_string())) {
            let _ = SystemWriter::api_server(state).delete(STORE_KEY, "", &key.name);
        }
    }
}
