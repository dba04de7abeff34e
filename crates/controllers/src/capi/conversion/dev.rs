//! The development provider's kinds (`DevCluster`, `DevMachine` and their templates) between
//! v1beta1 and v1beta2, after upstream's conversion: readiness (`status.ready`) against
//! `initialization.provisioned`, failure domains as a map or a list (in the status and in the
//! docker backend's spec), conditions as for the core kinds, and a machine's failure domain,
//! which only v1beta2 has, kept in the conversion data.
//!
//! The in-memory provider writes `status.ready` in v1beta2 too, for v1beta1-contract readers
//! of the stored version; a v1beta1 object's `ready` becomes `initialization.provisioned`
//! only, as upstream's hub has no `ready` (the provider writes it again on its next status).

use super::{
    bool_intent, child, conditions_from_hub, conditions_to_hub, failure_domains_from_hub,
    failure_domains_to_hub, object_at, take_object, Object, Restored, Versions,
};
use infrasim_kube_api::values::At;
use serde_json::json;

/// `DevCluster` to v1beta2.
pub(super) fn cluster_to_hub(o: &mut Object, restored: Restored) -> Result<(), String> {
    if let Some(docker) = object_at(o, &["spec", "backend", "docker"]) {
        failure_domains_to_hub(docker);
    }
    if let Some(status) = object_at(o, &["status"]) {
        failure_domains_to_hub(status);
        status_to_hub(status, restored);
    }
    Ok(())
}

/// `DevCluster` to v1beta1.
pub(super) fn cluster_from_hub(o: &mut Object, _: &Versions) -> Result<(), String> {
    if let Some(docker) = object_at(o, &["spec", "backend", "docker"]) {
        failure_domains_from_hub(docker);
    }
    let status = child(o, "status");
    failure_domains_from_hub(status);
    status_from_hub(status);
    Ok(())
}

/// `DevMachine` to v1beta2; the failure domain v1beta1 has no place for comes back from the
/// conversion data.
pub(super) fn machine_to_hub(o: &mut Object, restored: Restored) -> Result<(), String> {
    if let Some(status) = object_at(o, &["status"]) {
        status_to_hub(status, restored);
        if let Some(domain) = restored.and_then(|r| r.at("/status/failureDomain")) {
            status.insert("failureDomain".into(), domain.clone());
        }
    }
    Ok(())
}

/// `DevMachine` to v1beta1.
pub(super) fn machine_from_hub(o: &mut Object, _: &Versions) -> Result<(), String> {
    drop_empty_provider_id(o, &["spec"]);
    let status = child(o, "status");
    status.remove("failureDomain");
    status_from_hub(status);
    Ok(())
}

/// `DevClusterTemplate` to v1beta2.
pub(super) fn cluster_template_to_hub(o: &mut Object, _: Restored) -> Result<(), String> {
    if let Some(docker) = object_at(o, &["spec", "template", "spec", "backend", "docker"]) {
        failure_domains_to_hub(docker);
    }
    Ok(())
}

/// `DevClusterTemplate` to v1beta1.
pub(super) fn cluster_template_from_hub(o: &mut Object, _: &Versions) -> Result<(), String> {
    if let Some(docker) = object_at(o, &["spec", "template", "spec", "backend", "docker"]) {
        failure_domains_from_hub(docker);
    }
    Ok(())
}

/// `DevMachineTemplate` to v1beta2; its status (capacity, v1beta2 only) comes back from the
/// conversion data.
pub(super) fn machine_template_to_hub(o: &mut Object, restored: Restored) -> Result<(), String> {
    if let Some(status) = restored.and_then(|r| r.get("status")) {
        o.insert("status".into(), status.clone());
    }
    Ok(())
}

/// `DevMachineTemplate` to v1beta1.
pub(super) fn machine_template_from_hub(o: &mut Object, _: &Versions) -> Result<(), String> {
    o.remove("status");
    drop_empty_provider_id(o, &["spec", "template", "spec"]);
    Ok(())
}

fn drop_empty_provider_id(o: &mut Object, spec: &[&str]) {
    if let Some(spec) = object_at(o, spec) {
        if spec.get("providerID") == Some(&json!("")) {
            spec.remove("providerID");
        }
    }
}

fn status_to_hub(status: &mut Object, restored: Restored) {
    conditions_to_hub(status, &[], &[]);
    let ready = status.remove("ready") == Some(json!(true));
    let initialization = child(status, "initialization");
    initialization.insert("provisioned".into(), json!(ready));
    let before = restored.and_then(|r| r.at("/status/initialization"));
    bool_intent(initialization, "provisioned", before);
    if initialization.is_empty() {
        status.remove("initialization");
    }
}

fn status_from_hub(status: &mut Object) {
    conditions_from_hub(status, &[], &[]);
    let provisioned = take_object(status, "initialization")
        .and_then(|mut i| i.remove("provisioned"))
        .and_then(|p| p.as_bool())
        .unwrap_or(false);
    status.insert("ready".into(), json!(provisioned));
}
