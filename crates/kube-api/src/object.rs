//! Small readers of an object's JSON, and the facts the store keeps beside it; shared by
//! every layer that stores objects (the verbs, namespace and CRD lifecycles, RBAC bootstrap).

use crate::selectors;
use crate::values::At;
use infrasim_store::Derived;
use serde_json::Value;
use std::sync::Arc;

/// The facts the store keeps beside an object of this kind: its selectable fields, and
/// whether a namespace's finalizers hold it.
pub(crate) fn derive(kind: &str, value: &Value) -> Arc<Derived> {
    let held = kind == "Namespace"
        && value
            .at("/spec/finalizers")
            .and_then(Value::as_array)
            .is_some_and(|f| !f.is_empty());
    Arc::new(Derived {
        fields: selectors::extract_fields(kind, value),
        held,
    })
}

/// `metadata.name`, or empty.
pub(crate) fn name_of(value: &Value) -> String {
    value
        .at("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string()
}
