//! `Machine`, `MachineSet` and `MachineDeployment` between v1beta1 and v1beta2, after
//! upstream's conversion: references, node timeouts, readiness flags against
//! `initialization`, a deployment's strategy against `rollout` / `deletion` /
//! `remediation`, and the replica counters: v1beta1's (old meaning) live under
//! `status.deprecated.v1beta1` in v1beta2, v1beta2's under `status.v1beta2` in v1beta1.

use super::healthcheck;
use super::{
    bool_intent, carry, child, conditions_from_hub, conditions_to_hub, defined, insert_nonempty,
    namespace_of, take_object, to_contract_ref, to_object_ref, Object, Restored, Versions,
};
use infrasim_kube_api::values::At;
use serde_json::{json, Value};

pub(super) fn machine_to_hub(o: &mut Object, restored: Restored) -> Result<(), String> {
    if let Some(spec) = spec_of(o) {
        spec_to_hub(spec);
        // Only v1beta2 has it on a Machine: it comes back from the conversion data.
        if let Some(min_ready) = restored.and_then(|r| r.at("/spec/minReadySeconds")) {
            spec.insert("minReadySeconds".into(), min_ready.clone());
        }
    }
    if let Some(status) = o.get_mut("status").and_then(Value::as_object_mut) {
        if let Some(node) = take_object(status, "nodeRef") {
            let name = node.get("name").cloned().unwrap_or(json!(""));
            status.insert("nodeRef".into(), json!({"name": name}));
        }
        flags_to_hub(
            status,
            restored.and_then(|r| r.at("/status/initialization")),
        );
        conditions_to_hub(status, &["failureReason", "failureMessage"], &NEW_COUNTERS);
        // The phase (v1beta1 has no Updating) and failure domain the hub had, as upstream
        // restores them.
        if let Some(before) = restored.and_then(|r| r.get("status")) {
            for key in ["phase", "failureDomain"] {
                match before.get(key) {
                    Some(v) => status.insert(key.into(), v.clone()),
                    None => status.remove(key),
                };
            }
        }
    }
    Ok(())
}

pub(super) fn machine_from_hub(o: &mut Object, versions: &Versions) -> Result<(), String> {
    let namespace = namespace_of(o);
    if let Some(spec) = spec_of(o) {
        spec_from_hub(spec, &namespace, versions);
        spec.remove("minReadySeconds");
    }
    let status = child(o, "status");
    if status.get("phase") == Some(&json!("Updating")) {
        // v1beta1 has no Updating phase.
        status.insert("phase".into(), json!("Running"));
    }
    match take_object(status, "nodeRef") {
        Some(node)
            if node
                .get("name")
                .and_then(Value::as_str)
                .is_some_and(|n| !n.is_empty()) =>
        {
            let reference = json!({"apiVersion": "v1", "kind": "Node", "name": node["name"]});
            status.insert("nodeRef".into(), reference);
        }
        _ => {}
    }
    status.remove("failureDomain");
    conditions_from_hub(status, &["failureReason", "failureMessage"], &[]);
    flags_from_hub(status);
    Ok(())
}

pub(super) fn machine_set_to_hub(o: &mut Object, _: Restored) -> Result<(), String> {
    if let Some(spec) = spec_of(o) {
        template_to_hub(spec);
        if let Some(policy) = spec.remove("deletePolicy") {
            child(spec, "deletion").insert("order".into(), policy);
        }
        carry_naming(spec, "machineNamingStrategy", "machineNaming");
    }
    if let Some(status) = o.get_mut("status").and_then(Value::as_object_mut) {
        conditions_to_hub(status, &SET_COUNTERS, &NEW_COUNTERS);
    }
    Ok(())
}

pub(super) fn machine_set_from_hub(o: &mut Object, versions: &Versions) -> Result<(), String> {
    let namespace = namespace_of(o);
    if let Some(spec) = spec_of(o) {
        template_from_hub(spec, &namespace, versions);
        let order = take_object(spec, "deletion").and_then(|mut d| d.remove("order"));
        if let Some(order) = order {
            spec.insert("deletePolicy".into(), order);
        }
        carry_naming(spec, "machineNaming", "machineNamingStrategy");
    }
    let status = child(o, "status");
    conditions_from_hub(status, &SET_COUNTERS, &NEW_COUNTERS);
    for counter in [
        "replicas",
        "fullyLabeledReplicas",
        "readyReplicas",
        "availableReplicas",
    ] {
        status.entry(counter).or_insert(json!(0));
    }
    Ok(())
}

pub(super) fn machine_deployment_to_hub(o: &mut Object, restored: Restored) -> Result<(), String> {
    if let Some(spec) = spec_of(o) {
        bool_intent(spec, "paused", restored.and_then(|r| r.get("spec")));
        template_to_hub(spec);
        if let Some(in_flight) = strategy_to_hub(spec) {
            child(spec, "remediation").insert("maxInFlight".into(), in_flight);
        }
        if let Some(after) = spec.remove("rolloutAfter") {
            child(spec, "rollout").insert("after".into(), after);
        }
        carry_naming(spec, "machineNamingStrategy", "machineNaming");
        // Never used upstream, and gone from v1beta2.
        spec.remove("progressDeadlineSeconds");
        spec.remove("revisionHistoryLimit");
    }
    if let Some(status) = o.get_mut("status").and_then(Value::as_object_mut) {
        conditions_to_hub(status, &DEPLOYMENT_COUNTERS, &NEW_COUNTERS);
    }
    Ok(())
}

pub(super) fn machine_deployment_from_hub(
    o: &mut Object,
    versions: &Versions,
) -> Result<(), String> {
    let namespace = namespace_of(o);
    if let Some(spec) = spec_of(o) {
        template_from_hub(spec, &namespace, versions);
        let after = spec
            .get_mut("rollout")
            .and_then(Value::as_object_mut)
            .and_then(|r| r.remove("after"));
        let in_flight = take_object(spec, "remediation").and_then(|mut r| r.remove("maxInFlight"));
        strategy_from_hub(spec, in_flight);
        if let Some(after) = after {
            spec.insert("rolloutAfter".into(), after);
        }
        carry_naming(spec, "machineNaming", "machineNamingStrategy");
        if spec.get("paused") == Some(&json!(false)) {
            spec.remove("paused");
        }
    }
    let status = child(o, "status");
    conditions_from_hub(status, &DEPLOYMENT_COUNTERS, &NEW_COUNTERS);
    for counter in DEPLOYMENT_COUNTERS.iter().chain(&["replicas"]) {
        status.entry(*counter).or_insert(json!(0));
    }
    Ok(())
}

/// The counters of v1beta1 a MachineSet keeps (their meaning differs from v1beta2's).
const SET_COUNTERS: [&str; 5] = [
    "readyReplicas",
    "availableReplicas",
    "fullyLabeledReplicas",
    "failureReason",
    "failureMessage",
];
const DEPLOYMENT_COUNTERS: [&str; 4] = [
    "readyReplicas",
    "availableReplicas",
    "updatedReplicas",
    "unavailableReplicas",
];
/// The counters v1beta2 gave a new meaning, kept under `status.v1beta2` in v1beta1.
const NEW_COUNTERS: [&str; 3] = ["readyReplicas", "availableReplicas", "upToDateReplicas"];

fn spec_of(o: &mut Object) -> Option<&mut Object> {
    o.get_mut("spec").and_then(Value::as_object_mut)
}

/// A Machine's spec (or a template's) to v1beta2: contract references, deletion timeouts.
fn spec_to_hub(spec: &mut Object) {
    if let Some(reference) = spec.get("infrastructureRef") {
        let converted = to_contract_ref(reference);
        spec.insert("infrastructureRef".into(), converted);
    }
    if let Some(bootstrap) = spec.get_mut("bootstrap").and_then(Value::as_object_mut) {
        if let Some(reference) = bootstrap.get("configRef") {
            let converted = to_contract_ref(reference);
            bootstrap.insert("configRef".into(), converted);
        }
    }
    healthcheck::timeouts_to_hub(spec);
}

fn spec_from_hub(spec: &mut Object, namespace: &str, versions: &Versions) {
    let infrastructure = match spec.remove("infrastructureRef") {
        Some(r) if defined(&r) => to_object_ref(&r, namespace, versions),
        _ => json!({}),
    };
    spec.insert("infrastructureRef".into(), infrastructure);
    if let Some(bootstrap) = spec.get_mut("bootstrap").and_then(Value::as_object_mut) {
        match bootstrap.remove("configRef") {
            Some(r) if defined(&r) => {
                bootstrap.insert("configRef".into(), to_object_ref(&r, namespace, versions));
            }
            _ => {}
        }
    }
    for key in ["version", "providerID", "failureDomain"] {
        if spec.get(key) == Some(&json!("")) {
            spec.remove(key);
        }
    }
    healthcheck::timeouts_from_hub(spec);
}

/// A set's template to v1beta2; its `minReadySeconds` moves into the Machine spec.
fn template_to_hub(spec: &mut Object) {
    let min_ready = spec.remove("minReadySeconds").filter(|m| m != &json!(0));
    let template = child(spec, "template");
    let machine = child(template, "spec");
    spec_to_hub(machine);
    if let Some(min_ready) = min_ready {
        machine.insert("minReadySeconds".into(), min_ready);
    }
}

fn template_from_hub(spec: &mut Object, namespace: &str, versions: &Versions) {
    let machine = child(child(spec, "template"), "spec");
    spec_from_hub(machine, namespace, versions);
    if let Some(min_ready) = machine.remove("minReadySeconds") {
        spec.insert("minReadySeconds".into(), min_ready);
    }
}

/// `{template}` of a naming strategy, under the other version's name.
fn carry_naming(spec: &mut Object, from: &str, to: &str) {
    if let Some(naming) = take_object(spec, from) {
        if naming
            .get("template")
            .and_then(Value::as_str)
            .is_some_and(|t| !t.is_empty())
        {
            spec.insert(to.into(), Value::Object(naming));
        }
    }
}

/// v1beta1's `strategy` of `o`, moved in place: its type and rolling update to
/// `rollout.strategy`, the delete policy to `deletion.order`. Its remediation's `maxInFlight`
/// is returned: where it goes in v1beta2 depends on the object.
pub(super) fn strategy_to_hub(o: &mut Object) -> Option<Value> {
    let mut strategy = take_object(o, "strategy")?;
    let mut rollout_strategy = Object::new();
    carry(&mut strategy, "type", &mut rollout_strategy, "type");
    if let Some(mut rolling) = take_object(&mut strategy, "rollingUpdate") {
        if let Some(policy) = rolling.remove("deletePolicy") {
            child(o, "deletion").insert("order".into(), policy);
        }
        insert_nonempty(&mut rollout_strategy, "rollingUpdate", rolling);
    }
    if !rollout_strategy.is_empty() {
        child(o, "rollout").insert("strategy".into(), Value::Object(rollout_strategy));
    }
    take_object(&mut strategy, "remediation").and_then(|mut r| r.remove("maxInFlight"))
}

/// v1beta2's `rollout.strategy`, `deletion.order` and `max_in_flight`, moved in place to
/// v1beta1's `strategy`; the node timeouts of `deletion` go to their flat fields.
pub(super) fn strategy_from_hub(o: &mut Object, max_in_flight: Option<Value>) {
    let mut strategy = Object::new();
    if let Some(mut rollout) = take_object(o, "rollout") {
        if let Some(mut rollout_strategy) = take_object(&mut rollout, "strategy") {
            carry(&mut rollout_strategy, "type", &mut strategy, "type");
            if let Some(rolling) = take_object(&mut rollout_strategy, "rollingUpdate") {
                insert_nonempty(&mut strategy, "rollingUpdate", rolling);
            }
        }
        insert_nonempty(o, "rollout", rollout);
    }
    let mut deletion = healthcheck::timeouts_from_hub(o);
    if let Some(order) = deletion.remove("order") {
        child(&mut strategy, "rollingUpdate").insert("deletePolicy".into(), order);
    }
    if let Some(in_flight) = max_in_flight {
        child(&mut strategy, "remediation").insert("maxInFlight".into(), in_flight);
    }
    insert_nonempty(o, "strategy", strategy);
}

/// A Machine's v1beta1 readiness flags as v1beta2's `initialization`: what is true, and the
/// false the hub had said (`before`, its restored `initialization`).
fn flags_to_hub(status: &mut Object, before: Option<&Value>) {
    let mut initialization = Object::new();
    for (flag, field) in FLAGS {
        if let Some(ready) = status.remove(flag) {
            initialization.insert(field.into(), ready);
        }
        bool_intent(&mut initialization, field, before);
    }
    insert_nonempty(status, "initialization", initialization);
}

fn flags_from_hub(status: &mut Object) {
    let initialization = take_object(status, "initialization").unwrap_or_default();
    for (flag, field) in FLAGS {
        let ready = initialization.get(field).and_then(Value::as_bool) == Some(true);
        status.insert(flag.into(), json!(ready));
    }
}

const FLAGS: [(&str, &str); 2] = [
    ("bootstrapReady", "bootstrapDataSecretCreated"),
    ("infrastructureReady", "infrastructureProvisioned"),
];
