//! The kubeadm control plane provider's kinds between v1beta1 and v1beta2
//! (`KubeadmControlPlane`, `KubeadmControlPlaneTemplate`), after upstream's conversion:
//! - the machine template's flat fields (`infrastructureRef`, `readinessGates`, `taints`,
//!   node timeouts as Go durations) are grouped under `machineTemplate.spec`, the reference
//!   as a contract reference and the timeouts as `deletion.*Seconds`;
//! - `rolloutBefore`, `rolloutAfter` and `rolloutStrategy` are `rollout.{before,after,strategy}`;
//!   `remediationStrategy` (durations) is `remediation` (seconds); `machineNamingStrategy` is
//!   `machineNaming`;
//! - the status' `initialized` is `initialization.controlPlaneInitialized`, `ready` is derived
//!   from the v1beta1 ready count, and the counters of v1beta1's meaning live under
//!   `deprecated.v1beta1` in v1beta2, v1beta2's under `status.v1beta2` in v1beta1.

use super::duration::{from_seconds, to_seconds};
use super::healthcheck;
use super::kubeadm::{config_spec_from_hub, config_spec_to_hub};
use super::{
    at, bool_intent, carry, child, conditions_from_hub, conditions_to_hub, defined,
    insert_nonempty, namespace_of, object_at, take_object, to_contract_ref, to_object_ref, Object,
    Restored, Versions,
};
use infrasim_kube_api::values::At;
use serde_json::{json, Value};

/// The counters whose v1beta1 meaning v1beta2 keeps under `deprecated.v1beta1`.
const OLD_COUNTERS: [&str; 3] = ["updatedReplicas", "readyReplicas", "unavailableReplicas"];
/// All it keeps there (beside the conditions).
const OLD_FIELDS: [&str; 5] = [
    "failureReason",
    "failureMessage",
    "updatedReplicas",
    "readyReplicas",
    "unavailableReplicas",
];
/// The counters v1beta1 keeps under `status.v1beta2`.
const NEW_COUNTERS: [&str; 3] = ["readyReplicas", "availableReplicas", "upToDateReplicas"];

/// `KubeadmControlPlane` to v1beta2.
pub(super) fn control_plane_to_hub(o: &mut Object, restored: Restored) -> Result<(), String> {
    if let Some(spec) = object_at(o, &["spec"]) {
        if let Some(template) = object_at(spec, &["machineTemplate"]) {
            machine_template_to_hub(template, true);
        }
        spec_to_hub(spec, restored.and_then(|r| r.get("spec")));
    }
    if let Some(status) = object_at(o, &["status"]) {
        status_to_hub(status, restored);
    }
    Ok(())
}

/// `KubeadmControlPlane` to v1beta1.
pub(super) fn control_plane_from_hub(o: &mut Object, versions: &Versions) -> Result<(), String> {
    let namespace = namespace_of(o);
    if let Some(spec) = object_at(o, &["spec"]) {
        if let Some(template) = object_at(spec, &["machineTemplate"]) {
            machine_template_from_hub(template, Some((&namespace, versions)));
        }
        spec_from_hub(spec);
    }
    status_from_hub(child(o, "status"));
    Ok(())
}

/// `KubeadmControlPlaneTemplate` to v1beta2.
pub(super) fn template_to_hub(o: &mut Object, restored: Restored) -> Result<(), String> {
    let path = ["spec", "template", "spec"];
    if let Some(spec) = object_at(o, &path) {
        if let Some(template) = object_at(spec, &["machineTemplate"]) {
            machine_template_to_hub(template, false);
        }
        if let Some(strategy) = object_at(spec, &["rolloutStrategy"]) {
            // A template's strategy without a type is a rolling update, as upstream reads it.
            strategy.entry("type").or_insert(json!("RollingUpdate"));
        }
        spec_to_hub(spec, restored.and_then(|r| at(r, &path)));
    }
    Ok(())
}

/// `KubeadmControlPlaneTemplate` to v1beta1.
pub(super) fn template_from_hub(o: &mut Object, _: &Versions) -> Result<(), String> {
    if let Some(spec) = object_at(o, &["spec", "template", "spec"]) {
        if let Some(template) = object_at(spec, &["machineTemplate"]) {
            machine_template_from_hub(template, None);
        }
        if spec.get("machineTemplate").is_some_and(|t| t == &json!({})) {
            spec.remove("machineTemplate");
        }
        spec_from_hub(spec);
    }
    Ok(())
}

/// The machine template's flat v1beta1 fields grouped under `spec`; a control plane's (not a
/// template's) carries the infrastructure reference.
fn machine_template_to_hub(template: &mut Object, with_reference: bool) {
    let mut spec = Object::new();
    if with_reference {
        if let Some(reference) = template.remove("infrastructureRef") {
            spec.insert("infrastructureRef".into(), to_contract_ref(&reference));
        }
    }
    for key in ["readinessGates", "taints"] {
        carry(template, key, &mut spec, key);
    }
    healthcheck::timeouts_to_hub(template);
    carry(template, "deletion", &mut spec, "deletion");
    insert_nonempty(template, "spec", spec);
}

/// The way back; `reference` is the namespace and versions a control plane's reference is
/// resolved with (a template has none).
fn machine_template_from_hub(template: &mut Object, reference: Option<(&str, &Versions)>) {
    let Some(mut spec) = take_object(template, "spec") else {
        return;
    };
    if let Some((namespace, versions)) = reference {
        match spec.remove("infrastructureRef") {
            Some(r) if defined(&r) => {
                let converted = to_object_ref(&r, namespace, versions);
                template.insert("infrastructureRef".into(), converted);
            }
            // v1beta1's reference is not optional: Go writes the empty one.
            _ => {
                template.insert("infrastructureRef".into(), json!({}));
            }
        }
    }
    for key in ["readinessGates", "taints"] {
        carry(&mut spec, key, template, key);
    }
    carry(&mut spec, "deletion", template, "deletion");
    healthcheck::timeouts_from_hub(template);
}

/// What a control plane and its template's resource spec share.
fn spec_to_hub(spec: &mut Object, restored: Option<&Value>) {
    if let Some(kubeadm) = object_at(spec, &["kubeadmConfigSpec"]) {
        config_spec_to_hub(kubeadm, restored.and_then(|r| r.get("kubeadmConfigSpec")));
    }
    let mut rollout = Object::new();
    if let Some(days) = spec
        .remove("rolloutBefore")
        .and_then(|b| b.get("certificatesExpiryDays").cloned())
    {
        rollout.insert("before".into(), json!({"certificatesExpiryDays": days}));
    }
    carry(spec, "rolloutAfter", &mut rollout, "after");
    if let Some(mut strategy) = take_object(spec, "rolloutStrategy") {
        let mut hub = Object::new();
        carry(&mut strategy, "type", &mut hub, "type");
        if let Some(surge) = strategy
            .get("rollingUpdate")
            .and_then(|r| r.get("maxSurge"))
        {
            hub.insert("rollingUpdate".into(), json!({"maxSurge": surge}));
        }
        insert_nonempty(&mut rollout, "strategy", hub);
    }
    insert_nonempty(spec, "rollout", rollout);
    if let Some(mut strategy) = take_object(spec, "remediationStrategy") {
        let mut remediation = Object::new();
        carry(&mut strategy, "maxRetry", &mut remediation, "maxRetry");
        for (from, to) in [
            ("minHealthyPeriod", "minHealthyPeriodSeconds"),
            ("retryPeriod", "retryPeriodSeconds"),
        ] {
            if let Some(seconds) = strategy
                .remove(from)
                .and_then(|d| d.as_str().and_then(to_seconds))
            {
                remediation.insert(to.into(), json!(seconds));
            }
        }
        // v1beta1's retry period is not optional: a zero one is the hub's only if it said so.
        if remediation.get("retryPeriodSeconds") == Some(&json!(0)) {
            remediation.remove("retryPeriodSeconds");
            let before = restored.and_then(|r| r.get("remediation"));
            if before.and_then(|b| b.get("retryPeriodSeconds")) == Some(&json!(0)) {
                remediation.insert("retryPeriodSeconds".into(), json!(0));
            }
        }
        insert_nonempty(spec, "remediation", remediation);
    }
    if let Some(naming) = take_object(spec, "machineNamingStrategy") {
        insert_nonempty(spec, "machineNaming", naming);
    }
}

fn spec_from_hub(spec: &mut Object) {
    if let Some(kubeadm) = object_at(spec, &["kubeadmConfigSpec"]) {
        config_spec_from_hub(kubeadm);
    }
    if let Some(mut rollout) = take_object(spec, "rollout") {
        if let Some(before) = take_object(&mut rollout, "before") {
            insert_nonempty(spec, "rolloutBefore", before);
        }
        carry(&mut rollout, "after", spec, "rolloutAfter");
        if let Some(strategy) = take_object(&mut rollout, "strategy") {
            insert_nonempty(spec, "rolloutStrategy", strategy);
        }
    }
    if let Some(mut remediation) = take_object(spec, "remediation") {
        let mut strategy = Object::new();
        carry(&mut remediation, "maxRetry", &mut strategy, "maxRetry");
        if let Some(s) = remediation
            .remove("minHealthyPeriodSeconds")
            .and_then(|s| s.as_i64())
        {
            strategy.insert("minHealthyPeriod".into(), json!(from_seconds(s)));
        }
        // Not optional in v1beta1: Go writes the zero duration.
        let retry = remediation
            .remove("retryPeriodSeconds")
            .and_then(|s| s.as_i64())
            .unwrap_or(0);
        strategy.insert("retryPeriod".into(), json!(from_seconds(retry)));
        spec.insert("remediationStrategy".into(), Value::Object(strategy));
    }
    if let Some(naming) = take_object(spec, "machineNaming").filter(|n| {
        n.get("template")
            .and_then(Value::as_str)
            .is_some_and(|t| !t.is_empty())
    }) {
        spec.insert("machineNamingStrategy".into(), Value::Object(naming));
    }
}

fn status_to_hub(status: &mut Object, restored: Restored) {
    conditions_to_hub(status, &OLD_FIELDS, &NEW_COUNTERS);
    status.remove("ready");
    let initialized = status.remove("initialized") == Some(json!(true));
    let mut initialization = Object::new();
    initialization.insert("controlPlaneInitialized".into(), json!(initialized));
    let before = restored.and_then(|r| r.at("/status/initialization"));
    bool_intent(&mut initialization, "controlPlaneInitialized", before);
    insert_nonempty(status, "initialization", initialization);
    if let Some(last) = object_at(status, &["lastRemediation"]) {
        if let Some(time) = last.remove("timestamp") {
            last.insert("time".into(), time);
        }
    }
}

fn status_from_hub(status: &mut Object) {
    conditions_from_hub(status, &OLD_FIELDS, &NEW_COUNTERS);
    // v1beta1's counters and flags are never left out.
    for counter in std::iter::once(&"replicas").chain(&OLD_COUNTERS) {
        status.entry(*counter).or_insert(json!(0));
    }
    let initialization = take_object(status, "initialization").unwrap_or_default();
    let initialized = initialization.get("controlPlaneInitialized") == Some(&json!(true));
    status.insert("initialized".into(), json!(initialized));
    let ready = status["readyReplicas"].as_i64().unwrap_or(0) > 0;
    status.insert("ready".into(), json!(ready));
    if let Some(last) = object_at(status, &["lastRemediation"]) {
        if let Some(time) = last.remove("time") {
            last.insert("timestamp".into(), time);
        }
    }
    if status.get("version") == Some(&json!("")) {
        status.remove("version");
    }
}
