//! CAPV's govmomi kinds (`infrastructure.cluster.x-k8s.io` VSphere*) between v1beta1 and
//! v1beta2, after CAPV's conversion, which keeps no conversion data:
//!
//! - every kind's conditions as for Cluster API's kinds (v1beta1's at the top and v1beta2's
//!   under `status.v1beta2`; the hub's at the top and v1beta1's under
//!   `status.deprecated.v1beta1`), with a machine's and a VM's `failureReason` and
//!   `failureMessage` beside v1beta1's;
//! - a cluster's and a machine's `status.ready` from the hub's `initialization.provisioned`
//!   (the way in drops it: CAPV's hub has no `ready`), and a cluster's failure domains as a
//!   map (v1beta1) or a list sorted by name (v1beta2);
//! - a machine's and a VM's `guestSoftPowerOffTimeout` (a Go duration) against
//!   `guestSoftPowerOffTimeoutSeconds`, and a machine's `namingStrategy` against `naming`
//!   (in a VSphereMachineTemplate's `spec.template.spec` too).

use super::duration::{from_seconds, to_seconds};
use super::{
    child, conditions_from_hub, conditions_to_hub, failure_domains_from_hub,
    failure_domains_to_hub, object_at, take_object, Object, Restored, Versions,
};
use serde_json::{json, Value};

/// What v1beta1 keeps beside its conditions, and v1beta2 under `deprecated.v1beta1`.
const FAILURES: &[&str] = &["failureReason", "failureMessage"];

/// `VSphereCluster` to v1beta2.
pub(super) fn cluster_to_hub(o: &mut Object, _: Restored) -> Result<(), String> {
    if let Some(status) = object_at(o, &["status"]) {
        status.remove("ready");
        failure_domains_to_hub(status);
        conditions_to_hub(status, &[], &[]);
    }
    Ok(())
}

/// `VSphereCluster` to v1beta1.
pub(super) fn cluster_from_hub(o: &mut Object, _: &Versions) -> Result<(), String> {
    if let Some(status) = object_at(o, &["status"]) {
        ready_from_hub(status);
        failure_domains_from_hub(status);
        conditions_from_hub(status, &[], &[]);
    }
    Ok(())
}

/// `VSphereMachine` to v1beta2.
pub(super) fn machine_to_hub(o: &mut Object, _: Restored) -> Result<(), String> {
    if let Some(spec) = object_at(o, &["spec"]) {
        machine_spec_to_hub(spec)?;
    }
    if let Some(status) = object_at(o, &["status"]) {
        status.remove("ready");
        conditions_to_hub(status, FAILURES, &[]);
    }
    Ok(())
}

/// `VSphereMachine` to v1beta1.
pub(super) fn machine_from_hub(o: &mut Object, _: &Versions) -> Result<(), String> {
    if let Some(spec) = object_at(o, &["spec"]) {
        machine_spec_from_hub(spec);
    }
    if let Some(status) = object_at(o, &["status"]) {
        ready_from_hub(status);
        conditions_from_hub(status, FAILURES, &[]);
    }
    Ok(())
}

/// `VSphereMachineTemplate` to v1beta2.
pub(super) fn machine_template_to_hub(o: &mut Object, _: Restored) -> Result<(), String> {
    match object_at(o, &["spec", "template", "spec"]) {
        Some(spec) => machine_spec_to_hub(spec),
        None => Ok(()),
    }
}

/// `VSphereMachineTemplate` to v1beta1.
pub(super) fn machine_template_from_hub(o: &mut Object, _: &Versions) -> Result<(), String> {
    if let Some(spec) = object_at(o, &["spec", "template", "spec"]) {
        machine_spec_from_hub(spec);
    }
    Ok(())
}

/// `VSphereVM` to v1beta2.
pub(super) fn vm_to_hub(o: &mut Object, _: Restored) -> Result<(), String> {
    if let Some(spec) = object_at(o, &["spec"]) {
        timeout_to_hub(spec)?;
    }
    if let Some(status) = object_at(o, &["status"]) {
        conditions_to_hub(status, FAILURES, &[]);
    }
    Ok(())
}

/// `VSphereVM` to v1beta1.
pub(super) fn vm_from_hub(o: &mut Object, _: &Versions) -> Result<(), String> {
    if let Some(spec) = object_at(o, &["spec"]) {
        timeout_from_hub(spec);
    }
    if let Some(status) = object_at(o, &["status"]) {
        conditions_from_hub(status, FAILURES, &[]);
    }
    Ok(())
}

/// `VSphereClusterIdentity` and `VSphereDeploymentZone` to v1beta2: their conditions.
pub(super) fn conditions_only_to_hub(o: &mut Object, _: Restored) -> Result<(), String> {
    if let Some(status) = object_at(o, &["status"]) {
        conditions_to_hub(status, &[], &[]);
    }
    Ok(())
}

/// The way back.
pub(super) fn conditions_only_from_hub(o: &mut Object, _: &Versions) -> Result<(), String> {
    if let Some(status) = object_at(o, &["status"]) {
        conditions_from_hub(status, &[], &[]);
    }
    Ok(())
}

/// v1beta1's `ready` from the hub's `initialization.provisioned` (false when unset).
pub(super) fn ready_from_hub(status: &mut Object) {
    let provisioned = take_object(status, "initialization")
        .and_then(|i| i.get("provisioned").and_then(Value::as_bool))
        .unwrap_or(false);
    status.insert("ready".into(), json!(provisioned));
}

fn machine_spec_to_hub(spec: &mut Object) -> Result<(), String> {
    naming_to_hub(spec);
    timeout_to_hub(spec)
}

fn machine_spec_from_hub(spec: &mut Object) {
    naming_from_hub(spec);
    timeout_from_hub(spec);
}

/// A machine spec's `namingStrategy` to the hub's `naming`.
pub(super) fn naming_to_hub(spec: &mut Object) {
    if let Some(strategy) = take_object(spec, "namingStrategy") {
        if let Some(template) = strategy.get("template").filter(|t| !t.is_null()) {
            child(spec, "naming").insert("template".into(), template.clone());
        }
    }
}

/// The way back (only a naming with a template comes back).
pub(super) fn naming_from_hub(spec: &mut Object) {
    if let Some(naming) = take_object(spec, "naming") {
        if let Some(template) = naming.get("template").filter(|t| !t.is_null()) {
            child(spec, "namingStrategy").insert("template".into(), template.clone());
        }
    }
}

/// `guestSoftPowerOffTimeout` (`"5m0s"`) to whole seconds; an unreadable duration is an
/// error, as the API server refuses it.
fn timeout_to_hub(spec: &mut Object) -> Result<(), String> {
    let Some(timeout) = spec.remove("guestSoftPowerOffTimeout") else {
        return Ok(());
    };
    if let Some(text) = timeout.as_str() {
        let seconds = to_seconds(text)
            .ok_or_else(|| format!("spec.guestSoftPowerOffTimeout: {text:?} is not a duration"))?;
        spec.insert("guestSoftPowerOffTimeoutSeconds".into(), json!(seconds));
    }
    Ok(())
}

/// Whole seconds back to a duration, when not zero (as CAPV converts them).
fn timeout_from_hub(spec: &mut Object) {
    let Some(seconds) = spec.remove("guestSoftPowerOffTimeoutSeconds") else {
        return;
    };
    if let Some(s) = seconds.as_i64().filter(|s| *s != 0) {
        spec.insert("guestSoftPowerOffTimeout".into(), json!(from_seconds(s)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(v: Value) -> Object {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn a_clusters_status_reads_in_v1beta1_as_capv_converts_it() {
        let mut o = object(json!({"status": {
            "initialization": {"provisioned": true},
            "failureDomains": [{"name": "z1", "controlPlane": true}, {"name": "z2", "controlPlane": false}],
            "conditions": [{"type": "Ready", "status": "True"}],
            "deprecated": {"v1beta1": {"conditions": [{"type": "Ready", "status": "True", "severity": ""}]}},
        }}));
        cluster_from_hub(&mut o, &Versions::default()).unwrap();
        let status = &o["status"];
        assert_eq!(status["ready"], true);
        assert_eq!(
            status["failureDomains"],
            json!({"z1": {"controlPlane": true}, "z2": {}})
        );
        assert_eq!(status["conditions"][0]["severity"], "");
        assert_eq!(status["v1beta2"]["conditions"][0]["type"], "Ready");
        assert!(status.get("initialization").is_none() && status.get("deprecated").is_none());
        // And back: the hub has no `ready`, and a list of domains.
        cluster_to_hub(&mut o, None).unwrap();
        assert!(o["status"].get("ready").is_none());
        assert_eq!(o["status"]["failureDomains"][0]["name"], "z1");
        assert_eq!(o["status"]["conditions"][0]["type"], "Ready");
    }

    #[test]
    fn a_machines_timeout_and_naming_change_shape() {
        let mut o = object(json!({"spec": {"template": {"spec": {
            "guestSoftPowerOffTimeout": "5m0s",
            "namingStrategy": {"template": "{{ .machine.name }}"},
        }}}}));
        machine_template_to_hub(&mut o, None).unwrap();
        let spec = &o["spec"]["template"]["spec"];
        assert_eq!(spec["guestSoftPowerOffTimeoutSeconds"], 300);
        assert_eq!(spec["naming"]["template"], "{{ .machine.name }}");
        machine_template_from_hub(&mut o, &Versions::default()).unwrap();
        let spec = &o["spec"]["template"]["spec"];
        assert_eq!(spec["guestSoftPowerOffTimeout"], "5m0s");
        assert!(spec.get("naming").is_none());
        let mut bad = object(json!({"spec": {"guestSoftPowerOffTimeout": "soon"}}));
        assert!(vm_to_hub(&mut bad, None).is_err());
    }

    #[test]
    fn a_machines_failures_sit_beside_v1beta1_conditions() {
        let mut o = object(
            json!({"status": {"ready": true, "failureReason": "CreateError",
            "conditions": [{"type": "Ready", "status": "False"}]}}),
        );
        machine_to_hub(&mut o, None).unwrap();
        let old = &o["status"]["deprecated"]["v1beta1"];
        assert_eq!(old["failureReason"], "CreateError");
        assert_eq!(old["conditions"][0]["status"], "False");
        assert!(o["status"].get("ready").is_none());
    }
}
