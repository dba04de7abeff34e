//! APIServices (`apiregistration.k8s.io/v1`): the aggregation layer's record of which server
//! serves each group version, as kube-apiserver keeps it.
//!
//! Every group version this server serves has a *local* APIService (no `spec.service`):
//! those of the built-in groups are made at start (labelled
//! `kube-aggregator.kubernetes.io/automanaged: onstart`, with kube-apiserver's priorities),
//! those of custom resources as their CRDs come and go (`automanaged: "true"`, priorities 1000
//! and 100), as kube-apiserver's auto-registration and CRD registration controllers keep
//! them. A local APIService is always Available.
//!
//! An APIService naming a Service would have its requests proxied to that Service by
//! kube-apiserver. This server does not proxy aggregated APIs; its status says so in the
//! availability controller's words: the Service missing (`ServiceNotFound`), or the
//! discovery check failing (`FailedDiscoveryCheck`). The status is computed when the
//! APIService is written (kube-apiserver's controller also rechecks as Services change).

use crate::state::State;
use crate::values::At;
use infrasim_store::ObjectKey;
use serde_json::{json, Value};

pub(crate) const STORE_KEY: &str = "apiservices.apiregistration.k8s.io";
pub(crate) const AUTOMANAGED: &str = "kube-aggregator.kubernetes.io/automanaged";

/// kube-apiserver's priorities of the built-in group versions this server serves (group
/// priority minimum, version priority), from its aggregator's table; a group version it has
/// none for gets no APIService, as kube-apiserver skips it.
pub(crate) const PRIORITIES: [(&str, &str, i32, i32); 21] = [
    ("", "v1", 18000, 1),
    ("apps", "v1", 17800, 15),
    ("events.k8s.io", "v1", 17750, 15),
    ("authentication.k8s.io", "v1", 17700, 15),
    ("authorization.k8s.io", "v1", 17600, 15),
    ("autoscaling", "v2", 17500, 30),
    ("autoscaling", "v1", 17500, 15),
    ("batch", "v1", 17400, 15),
    ("certificates.k8s.io", "v1", 17300, 15),
    ("networking.k8s.io", "v1", 17200, 15),
    ("policy", "v1", 17100, 15),
    ("rbac.authorization.k8s.io", "v1", 17000, 15),
    ("storage.k8s.io", "v1", 16800, 15),
    ("apiextensions.k8s.io", "v1", 16700, 15),
    ("admissionregistration.k8s.io", "v1", 16700, 15),
    ("scheduling.k8s.io", "v1", 16600, 15),
    ("coordination.k8s.io", "v1", 16500, 15),
    ("node.k8s.io", "v1", 16300, 15),
    ("discovery.k8s.io", "v1", 16200, 15),
    ("flowcontrol.apiserver.k8s.io", "v1", 16100, 21),
    // metrics-server's own APIService asks for these; served here by the API server itself
    // (see `resource_metrics`), so it is local rather than naming metrics-server's Service.
    ("metrics.k8s.io", "v1beta1", 100, 100),
];

/// The name of the APIService of a group version (`v1.` for the core group).
pub(crate) fn name(group: &str, version: &str) -> String {
    format!("{version}.{group}")
}

/// A local APIService.
pub(crate) fn local(group: &str, version: &str, priorities: (i32, i32), managed: &str) -> Value {
    json!({
        "apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
        "metadata": {"name": name(group, version), "labels": {AUTOMANAGED: managed}},
        "spec": {"group": group, "version": version,
                 "groupPriorityMinimum": priorities.0, "versionPriority": priorities.1},
    })
}

/// Sets `object`'s `Available` condition, keeping its transition time while its status
/// holds.
pub(crate) fn set_status(state: &State, object: &mut Value) {
    let (available, reason, message) = availability(state, object);
    let status = if available { "True" } else { "False" };
    let previous = object
        .at("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|c| c.iter().find(|c| c["type"] == "Available"))
        .cloned();
    let since = match previous {
        Some(p) if p["status"] == status => p["lastTransitionTime"].clone(),
        _ => json!(infrasim_store::format_time(state.clock.now())),
    };
    object["status"] = json!({"conditions": [{
        "type": "Available", "status": status, "lastTransitionTime": since,
        "reason": reason, "message": message,
    }]});
}

/// Whether the APIService is available, why, and the availability controller's words.
fn availability(state: &State, object: &Value) -> (bool, &'static str, String) {
    let Some(service) = object.at("/spec/service").filter(|s| s.is_object()) else {
        return (
            true,
            "Local",
            "Local APIServices are always available".into(),
        );
    };
    let namespace = service["namespace"].as_str().unwrap_or("");
    let name = service["name"].as_str().unwrap_or("");
    let key = ObjectKey::new(namespace, name);
    let Some(found) = state.group.get("services", &key) else {
        return (
            false,
            "ServiceNotFound",
            format!("service/{name} in {namespace:?} is not present"),
        );
    };
    let ip = found
        .to_value()
        .ok()
        .and_then(|s| {
            s.at("/spec/clusterIP")
                .and_then(Value::as_str)
                .map(str::to_string)
        })
        .unwrap_or_default();
    let port = service["port"].as_i64().unwrap_or(443);
    let group = object
        .at("/spec/group")
        .and_then(Value::as_str)
        .unwrap_or("");
    let version = object
        .at("/spec/version")
        .and_then(Value::as_str)
        .unwrap_or("");
    (
        false,
        "FailedDiscoveryCheck",
        format!(
            "failing or missing response from https://{ip}:{port}/apis/{group}/{version}: infrasim does not proxy aggregated APIs"
        ),
    )
}

/// `ValidateAPIService`'s checks of the name and priorities, as `(field, message)`.
pub(crate) fn validate(object: &Value) -> Vec<(String, String)> {
    let mut errors = Vec::new();
    let text = |p: &str| object.at(p).and_then(Value::as_str).unwrap_or("");
    let (name, group, version) = (
        text("/metadata/name"),
        text("/spec/group"),
        text("/spec/version"),
    );
    let wanted = format!("{version}.{group}");
    if name != wanted {
        errors.push((
            "metadata.name".into(),
            format!("Invalid value: {name:?}: must be `spec.version+\".\"+spec.group`: {wanted:?}"),
        ));
    }
    if version.is_empty() {
        errors.push(("spec.version".into(), "Required value".into()));
    }
    let number = |p: &str| object.at(p).and_then(Value::as_i64).unwrap_or(0);
    for (field, value, limit) in [
        (
            "spec.groupPriorityMinimum",
            number("/spec/groupPriorityMinimum"),
            20000,
        ),
        (
            "spec.versionPriority",
            number("/spec/versionPriority"),
            1000,
        ),
    ] {
        if value <= 0 || value > limit {
            let message = format!("Invalid value: {value}: must be positive and less than {limit}");
            errors.push((field.into(), message));
        }
    }
    errors
}
