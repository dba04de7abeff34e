//! kube-apiserver's apiextensions controllers, in-process: a stored CRD's resources served
//! and its status written (NamesAccepted, Established, storedVersions), and a deleted CRD's
//! objects removed before its finalizer goes. They write through the API as kube-apiserver.

use crate::crd::{resources, CLEANUP_FINALIZER, STORE_KEY};
use crate::state::State;
use crate::system_writer::SystemWriter;
use crate::values::At;
use infrasim_store::{ObjectKey, Read, ReadAt};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

/// Serves a stored CRD's resources and marks it Established.
pub(crate) fn register(state: &Arc<State>, name: &str) {
    let Some(stored) = state.group.get(STORE_KEY, &ObjectKey::new("", name)) else {
        return;
    };
    let Ok(crd) = stored.to_value() else { return };
    if crd.at("/metadata/deletionTimestamp").is_none() {
        state.registry.set_custom(name, resources(&crd));
        super::apiservice::register_custom(state);
    }
    // Status: names accepted, established, the storage version recorded, written as
    // kube-apiserver's naming and establishing controllers write it, through `status`.
    let controllers = SystemWriter::api_server(state);
    for _ in 0..16 {
        let Some(current) = state.group.get(STORE_KEY, &ObjectKey::new("", name)) else {
            return;
        };
        let Ok(old) = current.to_value() else {
            return;
        };
        let mut value = old.clone();
        let now = infrasim_store::format_time(state.clock.now());
        let storage: Vec<Value> = value
            .at("/spec/versions")
            .and_then(Value::as_array)
            .map(|vs| {
                vs.iter()
                    .filter(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
                    .filter_map(|v| v.get("name").cloned())
                    .collect()
            })
            .unwrap_or_default();
        let condition = |ty: &str, reason: &str, message: &str| json!({"type": ty, "status": "True", "lastTransitionTime": now, "reason": reason, "message": message});
        let mut stored_versions = value
            .at("/status/storedVersions")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        for v in storage {
            if !stored_versions.contains(&v) {
                stored_versions.push(v);
            }
        }
        let status = json!({
            "conditions": [
                condition("NamesAccepted", "NoConflicts", "no conflicts found"),
                condition("Established", "InitialNamesAccepted", "the initial names have been accepted"),
            ],
            "acceptedNames": value.at("/spec/names").cloned().unwrap_or(json!({})),
            "storedVersions": stored_versions,
        });
        // Keep condition times stable across re-registration when nothing changed.
        let same = value.get("status").is_some_and(|old| {
            old.get("acceptedNames") == status.get("acceptedNames")
                && old.get("storedVersions") == status.get("storedVersions")
        });
        if same {
            return;
        }
        value["status"] = status;
        let read = Read {
            object: &current,
            value: &old,
        };
        match controllers.update_status(STORE_KEY, value, read) {
            Err(e) if e.code == 409 => continue,
            Err(e) => {
                tracing::warn!(crd = name, error = %e.message, "registering a CRD");
                return;
            }
            Ok(_) => return,
        }
    }
}

/// Registers every stored CRD (at start-up).
pub(crate) fn register_all(state: &Arc<State>) {
    if let Ok(snapshot) = state.group.snapshot(STORE_KEY, ReadAt::Latest) {
        for crd in snapshot.objects.values() {
            register(state, &crd.meta.name);
            if crd.meta.deletion_timestamp.is_some() {
                spawn_cleanup(state.clone(), crd.meta.name.to_string());
            }
        }
    }
}

/// Deletes a terminating CRD's objects, then releases it and stops serving its resources,
/// as kube-apiserver's CRD finalizer does through the API.
pub(crate) fn spawn_cleanup(state: Arc<State>, name: String) {
    tokio::spawn(async move {
        let store_key = name.clone();
        let finalizer = SystemWriter::api_server(&state);
        loop {
            let Ok(mut changes) = state.group.watch(None) else {
                return;
            };
            let Ok(snapshot) = state.group.snapshot(&store_key, ReadAt::Latest) else {
                return;
            };
            for (key, object) in snapshot.objects.iter() {
                if object.meta.deletion_timestamp.is_none() {
                    let _ = finalizer.delete(&store_key, &key.namespace, &key.name);
                }
            }
            if snapshot.objects.is_empty() {
                break;
            }
            tokio::select! {
                _ = changes.next() => {}
                _ = tokio::time::sleep(Duration::from_secs(2)) => {}
            }
        }
        state.registry.remove_custom(&name);
        super::apiservice::sync_custom(&state);
        for _ in 0..16 {
            let Some(current) = state.group.get(STORE_KEY, &ObjectKey::new("", &name)) else {
                return;
            };
            let Ok(old) = current.to_value() else {
                return;
            };
            let mut value = old.clone();
            if let Some(list) = value
                .pointer_mut("/metadata/finalizers")
                .and_then(Value::as_array_mut)
            {
                list.retain(|f| f.as_str() != Some(CLEANUP_FINALIZER));
            }
            let read = Read {
                object: &current,
                value: &old,
            };
            match finalizer.update(STORE_KEY, value, read) {
                Err(e) if e.code == 409 => continue,
                _ => return,
            }
        }
    });
}
