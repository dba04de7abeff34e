//! Health checks and deletion timeouts, which v1beta1 spells the same way in a Cluster's
//! topology, a ClusterClass and a MachineHealthCheck: flat fields with Go durations there,
//! `checks` / `remediation` groups and whole seconds in v1beta2.

use super::duration::{from_seconds, to_seconds};
use super::{carry, child, insert_nonempty, int_intent, take_object, Object, Restored, Versions};
use serde_json::{json, Value};

/// A v1beta1 `machineHealthCheck` (of a topology) as v1beta2's `healthCheck`.
pub(super) fn to_hub(mut v1: Object) -> Object {
    let mut hub = Object::new();
    carry(&mut v1, "enable", &mut hub, "enabled");
    let mut checks = Object::new();
    for (from, to) in [
        ("unhealthyConditions", "unhealthyNodeConditions"),
        ("unhealthyMachineConditions", "unhealthyMachineConditions"),
    ] {
        if let Some(Value::Array(items)) = v1.remove(from) {
            let items: Vec<Value> = items.into_iter().map(condition_to_hub).collect();
            checks.insert(to.into(), Value::Array(items));
        }
    }
    seconds_to_hub(&mut v1, "nodeStartupTimeout", &mut checks);
    insert_nonempty(&mut hub, "checks", checks);
    let mut remediation = Object::new();
    let mut trigger = Object::new();
    carry(
        &mut v1,
        "maxUnhealthy",
        &mut trigger,
        "unhealthyLessThanOrEqualTo",
    );
    carry(&mut v1, "unhealthyRange", &mut trigger, "unhealthyInRange");
    insert_nonempty(&mut remediation, "triggerIf", trigger);
    if let Some(template) = take_object(&mut v1, "remediationTemplate") {
        remediation.insert("templateRef".into(), template_ref(&template));
    }
    insert_nonempty(&mut hub, "remediation", remediation);
    hub
}

/// v1beta2's `healthCheck` as a v1beta1 `machineHealthCheck`; a remediation template
/// reference gets the namespace of the object converted.
pub(super) fn from_hub(mut hub: Object, namespace: &str) -> Object {
    let mut v1 = Object::new();
    carry(&mut hub, "enabled", &mut v1, "enable");
    if let Some(mut checks) = take_object(&mut hub, "checks") {
        for (from, to) in [
            ("unhealthyNodeConditions", "unhealthyConditions"),
            ("unhealthyMachineConditions", "unhealthyMachineConditions"),
        ] {
            if let Some(Value::Array(items)) = checks.remove(from) {
                let items: Vec<Value> = items.into_iter().map(condition_from_hub).collect();
                v1.insert(to.into(), Value::Array(items));
            }
        }
        seconds_from_hub(&mut checks, "nodeStartupTimeout", &mut v1);
    }
    if let Some(mut remediation) = take_object(&mut hub, "remediation") {
        if let Some(mut trigger) = take_object(&mut remediation, "triggerIf") {
            carry(
                &mut trigger,
                "unhealthyLessThanOrEqualTo",
                &mut v1,
                "maxUnhealthy",
            );
            if trigger
                .get("unhealthyInRange")
                .and_then(Value::as_str)
                .is_some_and(|r| !r.is_empty())
            {
                carry(&mut trigger, "unhealthyInRange", &mut v1, "unhealthyRange");
            }
        }
        if let Some(template) = take_object(&mut remediation, "templateRef").filter(|t| {
            t.get("name")
                .and_then(Value::as_str)
                .is_some_and(|n| !n.is_empty())
        }) {
            let mut reference = template_ref(&template);
            reference["namespace"] = json!(namespace);
            v1.insert("remediationTemplate".into(), reference);
        }
    }
    v1
}

/// `{apiVersion, kind, name}` of a template reference.
fn template_ref(reference: &Object) -> Value {
    json!({
        "apiVersion": reference.get("apiVersion").cloned().unwrap_or(json!("")),
        "kind": reference.get("kind").cloned().unwrap_or(json!("")),
        "name": reference.get("name").cloned().unwrap_or(json!("")),
    })
}

fn condition_to_hub(condition: Value) -> Value {
    let Value::Object(mut c) = condition else {
        return condition;
    };
    let mut seconds = Object::new();
    seconds_to_hub(&mut c, "timeout", &mut seconds);
    c.extend(seconds);
    Value::Object(c)
}

fn condition_from_hub(condition: Value) -> Value {
    let Value::Object(mut c) = condition else {
        return condition;
    };
    let seconds = c
        .remove("timeoutSeconds")
        .and_then(|s| s.as_i64())
        .unwrap_or(0);
    c.insert("timeout".into(), json!(from_seconds(seconds)));
    Value::Object(c)
}

/// Moves the Go duration `<name>` of `src` to `<name>Seconds` of `dst`.
fn seconds_to_hub(src: &mut Object, name: &str, dst: &mut Object) {
    if let Some(seconds) = src
        .remove(name)
        .and_then(|d| d.as_str().and_then(to_seconds))
    {
        dst.insert(format!("{name}Seconds"), json!(seconds));
    }
}

/// Moves `<name>Seconds` of `src` to the Go duration `<name>` of `dst`.
fn seconds_from_hub(src: &mut Object, name: &str, dst: &mut Object) {
    if let Some(seconds) = src
        .remove(&format!("{name}Seconds"))
        .and_then(|s| s.as_i64())
    {
        dst.insert(name.into(), json!(from_seconds(seconds)));
    }
}

/// The node deletion timeouts (`nodeDrainTimeout` …) of a v1beta1 object, moved in place to
/// v1beta2's `deletion` group.
pub(super) fn timeouts_to_hub(o: &mut Object) {
    let mut deletion = Object::new();
    for name in TIMEOUTS {
        seconds_to_hub(o, name, &mut deletion);
    }
    if !deletion.is_empty() {
        child(o, "deletion").extend(deletion);
    }
}

/// v1beta2's deletion timeouts of `o`, moved in place to v1beta1's flat durations; what else
/// the `deletion` group held is returned (it has no v1beta1 place of its own).
pub(super) fn timeouts_from_hub(o: &mut Object) -> Object {
    let Some(mut deletion) = take_object(o, "deletion") else {
        return Object::new();
    };
    for name in TIMEOUTS {
        seconds_from_hub(&mut deletion, name, o);
    }
    deletion
}

const TIMEOUTS: [&str; 3] = [
    "nodeDrainTimeout",
    "nodeVolumeDetachTimeout",
    "nodeDeletionTimeout",
];

/// A `MachineHealthCheck` to v1beta2: its spec's flat checks and remediation grouped, its
/// v1beta1 conditions under `deprecated`, the v1beta2 ones at the top.
pub(super) fn machine_health_check_to_hub(
    o: &mut Object,
    restored: Restored,
) -> Result<(), String> {
    if let Some(spec) = o.get_mut("spec").and_then(Value::as_object_mut) {
        let mut kept = Object::new();
        for key in ["clusterName", "selector"] {
            carry(spec, key, &mut kept, key);
        }
        let grouped = to_hub(std::mem::take(spec));
        *spec = kept;
        spec.extend(grouped);
    }
    if let Some(status) = o.get_mut("status").and_then(Value::as_object_mut) {
        super::conditions_to_hub(status, &[], &[]);
        let before = restored.and_then(|r| r.get("status"));
        for counter in ["expectedMachines", "currentHealthy", "remediationsAllowed"] {
            int_intent(status, counter, before);
        }
    }
    Ok(())
}

pub(super) fn machine_health_check_from_hub(o: &mut Object, _: &Versions) -> Result<(), String> {
    let namespace = super::namespace_of(o);
    if let Some(spec) = o.get_mut("spec").and_then(Value::as_object_mut) {
        let mut grouped = Object::new();
        for key in ["checks", "remediation"] {
            carry(spec, key, &mut grouped, key);
        }
        spec.extend(from_hub(grouped, &namespace));
    }
    if let Some(status) = o.get_mut("status").and_then(Value::as_object_mut) {
        super::conditions_from_hub(status, &[], &[]);
    }
    Ok(())
}
