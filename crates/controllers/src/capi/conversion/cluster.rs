//! `Cluster` between v1beta1 and v1beta2, after upstream's conversion: references, the
//! topology's class and health checks, readiness flags against `initialization`, failure
//! domains as a map or a list, and which conditions sit where.

use super::{
    bool_intent, carry, child, defined, failure_domains_from_hub, failure_domains_to_hub,
    insert_nonempty, namespace_of, take_object, to_contract_ref, to_object_ref, Object, Restored,
    Versions,
};
use super::{healthcheck, machine};
use infrasim_kube_api::values::At;
use serde_json::{json, Value};

const REFS: [&str; 2] = ["infrastructureRef", "controlPlaneRef"];

pub(super) fn to_hub(o: &mut Object, restored: Restored) -> Result<(), String> {
    if let Some(spec) = o.get_mut("spec").and_then(Value::as_object_mut) {
        bool_intent(spec, "paused", restored.and_then(|r| r.get("spec")));
        for key in REFS {
            if let Some(reference) = spec.get(key) {
                let converted = to_contract_ref(reference);
                spec.insert(key.into(), converted);
            }
        }
        if let Some(topology) = spec.get_mut("topology").and_then(Value::as_object_mut) {
            topology_to_hub(topology);
        }
    }
    if let Some(status) = o.get_mut("status").and_then(Value::as_object_mut) {
        status_to_hub(status, restored);
    }
    Ok(())
}

pub(super) fn from_hub(o: &mut Object, versions: &Versions) -> Result<(), String> {
    let namespace = namespace_of(o);
    if let Some(spec) = o.get_mut("spec").and_then(Value::as_object_mut) {
        for key in REFS {
            match spec.remove(key) {
                Some(r) if defined(&r) => {
                    spec.insert(key.into(), to_object_ref(&r, &namespace, versions));
                }
                _ => {}
            }
        }
        if spec.get("paused") == Some(&json!(false)) {
            spec.remove("paused");
        }
        if let Some(network) = take_object(spec, "clusterNetwork") {
            insert_nonempty(spec, "clusterNetwork", network_from_hub(network));
        }
        if let Some(topology) = spec.get_mut("topology").and_then(Value::as_object_mut) {
            topology_from_hub(topology, &namespace);
        }
    }
    // v1beta1's readiness flags are never left out, so neither is its status.
    status_from_hub(super::child(o, "status"));
    Ok(())
}

fn topology_to_hub(t: &mut Object) {
    let mut class_ref = Object::new();
    carry(t, "class", &mut class_ref, "name");
    carry(t, "classNamespace", &mut class_ref, "namespace");
    t.insert("classRef".into(), Value::Object(class_ref));
    t.remove("rolloutAfter");
    if let Some(cp) = t.get_mut("controlPlane").and_then(Value::as_object_mut) {
        if let Some(mhc) = take_object(cp, "machineHealthCheck") {
            cp.insert(
                "healthCheck".into(),
                Value::Object(healthcheck::to_hub(mhc)),
            );
        }
        healthcheck::timeouts_to_hub(cp);
        variables_to_hub(cp);
    }
    for md in machine_deployments(t) {
        machine_deployment_to_hub(md);
    }
    drop_definition_from(t.get_mut("variables"));
}

fn topology_from_hub(t: &mut Object, namespace: &str) {
    if let Some(mut class_ref) = take_object(t, "classRef") {
        carry(&mut class_ref, "name", t, "class");
        if class_ref
            .get("namespace")
            .and_then(Value::as_str)
            .is_some_and(|n| !n.is_empty())
        {
            carry(&mut class_ref, "namespace", t, "classNamespace");
        }
    }
    if let Some(cp) = t.get_mut("controlPlane").and_then(Value::as_object_mut) {
        if let Some(hc) = take_object(cp, "healthCheck") {
            insert_nonempty(
                cp,
                "machineHealthCheck",
                healthcheck::from_hub(hc, namespace),
            );
        }
        healthcheck::timeouts_from_hub(cp);
    }
    for md in machine_deployments(t) {
        machine_deployment_from_hub(md, namespace);
    }
}

/// The MachineDeployments of a topology's workers.
fn machine_deployments(t: &mut Object) -> impl Iterator<Item = &mut Object> {
    t.get_mut("workers")
        .and_then(|w| w.get_mut("machineDeployments"))
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
        .filter_map(Value::as_object_mut)
}

fn machine_deployment_to_hub(md: &mut Object) {
    let mut health = take_object(md, "machineHealthCheck")
        .map(healthcheck::to_hub)
        .unwrap_or_default();
    if let Some(in_flight) = machine::strategy_to_hub(md) {
        child(&mut health, "remediation").insert("maxInFlight".into(), in_flight);
    }
    insert_nonempty(md, "healthCheck", health);
    healthcheck::timeouts_to_hub(md);
    variables_to_hub(md);
}

fn machine_deployment_from_hub(md: &mut Object, namespace: &str) {
    let mut health = take_object(md, "healthCheck");
    let in_flight = health
        .as_mut()
        .and_then(|h| h.get_mut("remediation"))
        .and_then(Value::as_object_mut)
        .and_then(|r| r.remove("maxInFlight"));
    machine::strategy_from_hub(md, in_flight);
    if let Some(health) = health {
        insert_nonempty(
            md,
            "machineHealthCheck",
            healthcheck::from_hub(health, namespace),
        );
    }
    if md.get("failureDomain") == Some(&json!("")) {
        md.remove("failureDomain");
    }
}

/// v1beta2 variables have no `definitionFrom`; a control plane's or a MachineDeployment's
/// `variables.overrides` are the same list.
fn variables_to_hub(o: &mut Object) {
    drop_definition_from(o.get_mut("variables").and_then(|v| v.get_mut("overrides")));
}

fn drop_definition_from(variables: Option<&mut Value>) {
    for variable in variables
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
        .filter_map(Value::as_object_mut)
    {
        variable.remove("definitionFrom");
    }
}

/// A v1beta2 cluster network as v1beta1 writes it: no zero port, no empty ranges.
fn network_from_hub(mut network: Object) -> Object {
    if network.get("apiServerPort") == Some(&json!(0)) {
        network.remove("apiServerPort");
    }
    for ranges in ["services", "pods"] {
        let empty = network
            .get(ranges)
            .and_then(|r| r.get("cidrBlocks"))
            .and_then(Value::as_array)
            .is_none_or(|b| b.is_empty());
        if network.contains_key(ranges) && empty {
            network.remove(ranges);
        }
    }
    if network.get("serviceDomain") == Some(&json!("")) {
        network.remove("serviceDomain");
    }
    network
}

fn status_to_hub(status: &mut Object, restored: Restored) {
    let mut v1beta1 = Object::new();
    carry(status, "conditions", &mut v1beta1, "conditions");
    carry(status, "failureReason", &mut v1beta1, "failureReason");
    carry(status, "failureMessage", &mut v1beta1, "failureMessage");
    if let Some(mut v1beta2) = take_object(status, "v1beta2") {
        for key in ["conditions", "controlPlane", "workers"] {
            carry(&mut v1beta2, key, status, key);
        }
    }
    let mut initialization = Object::new();
    let before = restored.and_then(|r| r.at("/status/initialization"));
    for (flag, field) in [
        ("infrastructureReady", "infrastructureProvisioned"),
        ("controlPlaneReady", "controlPlaneInitialized"),
    ] {
        if let Some(ready) = status.remove(flag) {
            initialization.insert(field.into(), ready);
        }
        bool_intent(&mut initialization, field, before);
    }
    insert_nonempty(status, "initialization", initialization);
    failure_domains_to_hub(status);
    if !v1beta1.is_empty() {
        child(status, "deprecated").insert("v1beta1".into(), Value::Object(v1beta1));
    }
}

fn status_from_hub(status: &mut Object) {
    let mut v1beta2 = Object::new();
    for key in ["conditions", "controlPlane", "workers"] {
        carry(status, key, &mut v1beta2, key);
    }
    if let Some(mut deprecated) = take_object(status, "deprecated") {
        if let Some(mut v1beta1) = take_object(&mut deprecated, "v1beta1") {
            for key in ["conditions", "failureReason", "failureMessage"] {
                carry(&mut v1beta1, key, status, key);
            }
        }
    }
    let initialization = take_object(status, "initialization").unwrap_or_default();
    for (field, flag) in [
        ("infrastructureProvisioned", "infrastructureReady"),
        ("controlPlaneInitialized", "controlPlaneReady"),
    ] {
        let ready = initialization.get(field).and_then(Value::as_bool) == Some(true);
        status.insert(flag.into(), json!(ready));
    }
    failure_domains_from_hub(status);
    insert_nonempty(status, "v1beta2", v1beta2);
}
