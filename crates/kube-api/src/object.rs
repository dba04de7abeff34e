//! Small readers of an object's JSON, and the facts the store keeps beside it; shared by
//! every layer that stores objects (the verbs, namespace and CRD lifecycles, RBAC bootstrap).

use crate::selectors;
use crate::values::At;
use infrasim_store::Derived;
use serde_json::Value;
use std::sync::Arc;

/// The facts the store keeps beside an object of this built-in kind: its selectable fields,
/// and whether a namespace's finalizers hold it.
pub(crate) fn derive(kind: &str, value: &Value) -> Arc<Derived> {
    derive_for(kind, value, true)
}

/// As [`derive`], for a kind that is built in (`typed`) or a custom resource.
pub(crate) fn derive_for(kind: &str, value: &Value, typed: bool) -> Arc<Derived> {
    let held = kind == "Namespace"
        && value
            .at("/spec/finalizers")
            .and_then(Value::as_array)
            .is_some_and(|f| !f.is_empty());
    Arc::new(Derived {
        fields: selectors::extract_fields(kind, value),
        held,
        typed,
        no_generation: typed && !TRACKS_GENERATION.contains(&kind),
    })
}

/// The built-in kinds whose registry strategy sets `metadata.generation` at creation and
/// advances it on every spec change (custom resources always have it).
const TRACKS_GENERATION: &[&str] = &[
    "Deployment",
    "ReplicaSet",
    "StatefulSet",
    "DaemonSet",
    "ReplicationController",
    "Job",
    "CronJob",
    "HorizontalPodAutoscaler",
    "PodDisruptionBudget",
    "NetworkPolicy",
    "Ingress",
    "EndpointSlice",
    "CustomResourceDefinition",
    "ValidatingWebhookConfiguration",
    "MutatingWebhookConfiguration",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
    "MutatingAdmissionPolicy",
    "MutatingAdmissionPolicyBinding",
    "FlowSchema",
    "PriorityLevelConfiguration",
    "DeviceClass",
];

/// `metadata.name`, or empty.
pub(crate) fn name_of(value: &Value) -> String {
    value
        .at("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string()
}
