//! CAPV's supervisor-mode kinds (`vmware.infrastructure.cluster.x-k8s.io`) between v1beta1
//! and v1beta2, after CAPV's conversion, which keeps no conversion data:
//!
//! - conditions, `status.ready` and a cluster's failure domains as for the govmomi kinds
//!   (see `capv.rs`), with a machine's `failureReason` and `failureMessage`;
//! - a machine's `status.vmID` against `biosUUID` and its `vmstatus` (`poweredon`) against
//!   `phase` (`PoweredOn`); `namingStrategy` against `naming`; each network interface's
//!   `network` against `networkRef` (in a VSphereMachineTemplate's `spec.template.spec` too);
//! - what one version has and the other has not is dropped on the way, as upstream drops it:
//!   v1beta1's `spec.failureDomain`, `status.vmIp` and a cluster's
//!   `status.resourcePolicyName`; v1beta2's machine `status.failureDomain` and a template's
//!   `status.nodeInfo`.

use super::capv::{naming_from_hub, naming_to_hub, ready_from_hub};
use super::{conditions_from_hub, conditions_to_hub, object_at, Object, Restored, Versions};
use serde_json::{json, Value};

const FAILURES: &[&str] = &["failureReason", "failureMessage"];

/// v1beta1's `vmstatus` values and v1beta2's `phase` values, in pairs.
const PHASES: &[(&str, &str)] = &[
    ("notfound", "NotFound"),
    ("created", "Created"),
    ("poweredon", "PoweredOn"),
    ("pending", "Pending"),
    ("ready", "Ready"),
    ("deleting", "Deleting"),
    ("error", "Error"),
];

/// `VSphereCluster` to v1beta2: as the govmomi kind, v1beta1's `resourcePolicyName` dropped.
pub(super) fn cluster_to_hub(o: &mut Object, restored: Restored) -> Result<(), String> {
    if let Some(status) = object_at(o, &["status"]) {
        status.remove("resourcePolicyName");
    }
    super::capv::cluster_to_hub(o, restored)
}

/// `VSphereCluster` to v1beta1: as the govmomi kind.
pub(super) use super::capv::cluster_from_hub;

/// `VSphereMachine` to v1beta2.
pub(super) fn machine_to_hub(o: &mut Object, _: Restored) -> Result<(), String> {
    if let Some(spec) = object_at(o, &["spec"]) {
        spec_to_hub(spec);
    }
    if let Some(status) = object_at(o, &["status"]) {
        status.remove("ready");
        status.remove("vmIp");
        if let Some(id) = status.remove("vmID").filter(|id| id != "") {
            status.insert("biosUUID".into(), id);
        }
        rename_value(status, "vmstatus", "phase", |(old, _)| old, |(_, new)| new);
        conditions_to_hub(status, FAILURES, &[]);
    }
    Ok(())
}

/// `VSphereMachine` to v1beta1.
pub(super) fn machine_from_hub(o: &mut Object, _: &Versions) -> Result<(), String> {
    if let Some(spec) = object_at(o, &["spec"]) {
        spec_from_hub(spec);
    }
    if let Some(status) = object_at(o, &["status"]) {
        ready_from_hub(status);
        status.remove("failureDomain");
        // Upstream always points `vmID` at the BIOS UUID, empty or not.
        let id = status.remove("biosUUID").unwrap_or_else(|| json!(""));
        status.insert("vmID".into(), id);
        rename_value(status, "phase", "vmstatus", |(_, new)| new, |(old, _)| old);
        conditions_from_hub(status, FAILURES, &[]);
    }
    Ok(())
}

/// `VSphereMachineTemplate` to v1beta2.
pub(super) fn machine_template_to_hub(o: &mut Object, _: Restored) -> Result<(), String> {
    if let Some(spec) = object_at(o, &["spec", "template", "spec"]) {
        spec_to_hub(spec);
    }
    Ok(())
}

/// `VSphereMachineTemplate` to v1beta1.
pub(super) fn machine_template_from_hub(o: &mut Object, _: &Versions) -> Result<(), String> {
    if let Some(spec) = object_at(o, &["spec", "template", "spec"]) {
        spec_from_hub(spec);
    }
    if let Some(status) = object_at(o, &["status"]) {
        status.remove("nodeInfo");
    }
    Ok(())
}

fn spec_to_hub(spec: &mut Object) {
    spec.remove("failureDomain");
    naming_to_hub(spec);
    rename_interface_networks(spec, "network", "networkRef");
}

fn spec_from_hub(spec: &mut Object) {
    naming_from_hub(spec);
    rename_interface_networks(spec, "networkRef", "network");
}

/// Moves `status[from]` to `status[to]`, its value mapped through [`PHASES`] (`key` picks
/// the side it is read on, `value` the side written); a value not in the table is dropped,
/// as upstream's switch drops it.
fn rename_value(
    status: &mut Object,
    from: &str,
    to: &str,
    key: fn(&(&'static str, &'static str)) -> &'static str,
    value: fn(&(&'static str, &'static str)) -> &'static str,
) {
    let Some(old) = status.remove(from) else {
        return;
    };
    if let Some(pair) = PHASES.iter().find(|p| old == key(p)) {
        status.insert(to.into(), json!(value(pair)));
    }
}

/// Renames the network reference of the primary and each secondary interface
/// (`spec.network.interfaces`).
fn rename_interface_networks(spec: &mut Object, from: &str, to: &str) {
    let Some(interfaces) = object_at(spec, &["network", "interfaces"]) else {
        return;
    };
    let rename = |interface: &mut Value| {
        if let Some(i) = interface.as_object_mut() {
            if let Some(reference) = i.remove(from) {
                i.insert(to.into(), reference);
            }
        }
    };
    if let Some(primary) = interfaces.get_mut("primary") {
        rename(primary);
    }
    if let Some(Value::Array(secondary)) = interfaces.get_mut("secondary") {
        secondary.iter_mut().for_each(rename);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(v: Value) -> Object {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn a_machines_status_reads_in_v1beta1_as_capv_converts_it() {
        let mut o = object(json!({"status": {
            "initialization": {"provisioned": true}, "biosUUID": "4221-ab", "phase": "PoweredOn",
            "failureDomain": "zone-a",
            "conditions": [{"type": "Ready", "status": "True"}],
            "deprecated": {"v1beta1": {"failureMessage": "m", "conditions": [{"type": "Ready", "status": "True"}]}},
        }}));
        machine_from_hub(&mut o, &Versions::default()).unwrap();
        let status = &o["status"];
        assert_eq!(status["ready"], true);
        assert_eq!(
            (&status["vmID"], &status["vmstatus"]),
            (&json!("4221-ab"), &json!("poweredon"))
        );
        assert_eq!(status["failureMessage"], "m");
        assert_eq!(status["v1beta2"]["conditions"][0]["type"], "Ready");
        for gone in [
            "biosUUID",
            "phase",
            "failureDomain",
            "initialization",
            "deprecated",
        ] {
            assert!(status.get(gone).is_none(), "{gone} is still there");
        }
        machine_to_hub(&mut o, None).unwrap();
        let status = &o["status"];
        assert_eq!(
            (&status["biosUUID"], &status["phase"]),
            (&json!("4221-ab"), &json!("PoweredOn"))
        );
        assert!(status.get("ready").is_none() && status.get("vmID").is_none());
    }

    #[test]
    fn an_empty_bios_uuid_is_an_empty_vm_id_and_back_nothing() {
        let mut o = object(json!({"status": {}}));
        machine_from_hub(&mut o, &Versions::default()).unwrap();
        assert_eq!(o["status"]["vmID"], "");
        machine_to_hub(&mut o, None).unwrap();
        assert!(o["status"].get("biosUUID").is_none());
    }

    #[test]
    fn interfaces_name_their_network_as_each_version_does() {
        let net =
            json!({"apiVersion": "crd.nsx.vmware.com/v1alpha1", "kind": "SubnetSet", "name": "s"});
        let mut o = object(json!({"spec": {"template": {"spec": {
            "className": "best-effort-small", "namingStrategy": {"template": "{{ .machine.name }}"},
            "network": {"interfaces": {"primary": {"network": net},
                                        "secondary": [{"name": "eth1", "network": net}]}},
        }}}}));
        machine_template_to_hub(&mut o, None).unwrap();
        let spec = &o["spec"]["template"]["spec"];
        assert_eq!(spec["network"]["interfaces"]["primary"]["networkRef"], net);
        assert_eq!(
            spec["network"]["interfaces"]["secondary"][0]["networkRef"],
            net
        );
        assert_eq!(spec["naming"]["template"], "{{ .machine.name }}");
        machine_template_from_hub(&mut o, &Versions::default()).unwrap();
        let spec = &o["spec"]["template"]["spec"];
        assert_eq!(
            spec["network"]["interfaces"]["secondary"][0]["network"],
            net
        );
        assert!(spec["network"]["interfaces"]["primary"]
            .get("networkRef")
            .is_none());
        assert_eq!(spec["namingStrategy"]["template"], "{{ .machine.name }}");
    }
}
