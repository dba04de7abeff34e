//! Namespace lifecycle as kube-apiserver's registry enforces it: the initial and undeletable
//! namespaces, no new content in a namespace that is missing or terminating
//! (NamespaceLifecycle), and the Terminating phase a namespace's deletion sets. What the
//! namespace controllers do (default objects, deleting content) is `controllers::namespace`.

use crate::object::derive;
use crate::state::State;
use crate::status::ApiError;
use infrasim_store::{ObjectKey, StoreError, StoredObject};
use serde_json::{json, Value};
use std::sync::Arc;

/// Namespaces every cluster starts with.
pub const INITIAL: [&str; 4] = ["default", "kube-system", "kube-public", "kube-node-lease"];
/// Namespaces kube-apiserver refuses to delete.
const UNDELETABLE: [&str; 3] = ["default", "kube-system", "kube-public"];

/// Refuses writes into a namespace that does not exist or is being deleted.
pub(crate) fn ensure_writable(
    state: &State,
    namespace: &str,
    plural: &str,
    name: &str,
) -> Result<(), ApiError> {
    let ns = state
        .group
        .get("namespaces", &ObjectKey::new("", namespace))
        .ok_or_else(|| ApiError::object_not_found("", "namespaces", namespace))?;
    if ns.meta.deletion_timestamp.is_some() {
        return Err(ApiError::forbidden(format!(
            "{plural} \"{name}\" is forbidden: unable to create new content in namespace {namespace} because it is being terminated"
        ))
        .with_details(json!({"name": name, "kind": plural, "causes": [{
            "reason": "NamespaceTerminating",
            "message": format!("namespace {namespace} is being terminated"),
            "field": "metadata.namespace"
        }]})));
    }
    Ok(())
}

/// Refuses the deletion of the namespaces the system needs.
pub(crate) fn check_deletable(name: &str) -> Result<(), ApiError> {
    if UNDELETABLE.contains(&name) {
        return Err(ApiError::forbidden(format!(
            "namespaces \"{name}\" is forbidden: this namespace may not be deleted"
        )));
    }
    Ok(())
}

/// Marks a namespace Terminating (status.phase), as kube-apiserver's namespace storage does
/// when its deletion starts; the namespace controller then deletes its content.
pub(crate) fn mark_terminating(state: &State, name: &str) -> Option<Arc<StoredObject>> {
    edit_namespace(state, name, |ns| {
        ns["status"]["phase"] = json!("Terminating");
    })
}

/// Rewrites a namespace through the store, retrying on conflicts with concurrent writers.
fn edit_namespace(
    state: &State,
    name: &str,
    edit: impl Fn(&mut Value),
) -> Option<Arc<StoredObject>> {
    for _ in 0..16 {
        let current = state.group.get("namespaces", &ObjectKey::new("", name))?;
        let mut value = current.to_value().ok()?;
        edit(&mut value);
        let derived = derive("Namespace", &value);
        match state.group.update(
            "namespaces",
            value,
            derived,
            Some(current.meta.resource_version),
        ) {
            Ok(updated) => return Some(updated),
            Err(StoreError::Conflict { .. }) => continue,
            Err(_) => return None,
        }
    }
    None
}
