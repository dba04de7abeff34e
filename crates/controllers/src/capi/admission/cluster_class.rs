//! ClusterClass's validating webhook (`validation.clusterclass.cluster.x-k8s.io`; v1.11 has no
//! defaulting one): template references, unique classes, variable definitions
//! ([`super::class_variables`]), patches ([`super::patches`]), and what may not change while
//! Clusters use the class; a class in use may not be deleted. The Clusters using the class
//! are found by the caller.

use super::field::FieldError;
use super::review::{Operation, Review, Verdict};
use super::rules::text;
use crate::capi::CORE_GROUP;
use serde_json::{json, Value};
use std::collections::HashSet;

/// The template references a class holds: (field path of the holder, JSON pointer).
fn template_refs(class: &Value) -> Vec<(String, String)> {
    let mut refs = vec![
        (
            "spec.infrastructure".to_string(),
            "/spec/infrastructure/templateRef".to_string(),
        ),
        (
            "spec.controlPlane".to_string(),
            "/spec/controlPlane/templateRef".to_string(),
        ),
    ];
    if class
        .pointer("/spec/controlPlane/machineInfrastructure")
        .is_some()
    {
        refs.push((
            "spec.controlPlane.machineInfrastructure".into(),
            "/spec/controlPlane/machineInfrastructure/templateRef".into(),
        ));
    }
    for (i, _) in workers(class).iter().enumerate() {
        for part in ["bootstrap", "infrastructure"] {
            refs.push((
                format!("spec.workers.machineDeployments[{i}].template.{part}"),
                format!("/spec/workers/machineDeployments/{i}/{part}/templateRef"),
            ));
        }
    }
    refs
}

fn workers(class: &Value) -> Vec<Value> {
    class
        .pointer("/spec/workers/machineDeployments")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

/// The webhook's verdict; `users` are the Clusters (`namespace/name`, their topology's
/// MachineDeployment classes) that use the class.
pub fn validate(review: &Review, users: &[(String, Vec<String>)]) -> Verdict {
    let name = review.object_name();
    if review.operation == Operation::Delete {
        return deletion(&name, users);
    }
    let object = &review.object;
    let mut errors = Vec::new();
    for (path, pointer) in template_refs(object) {
        let r = object.pointer(&pointer);
        let field = |k: &str| {
            r.and_then(|r| r.get(k))
                .and_then(Value::as_str)
                .unwrap_or("")
        };
        if field("name").is_empty() {
            errors.push(FieldError::required(
                format!("{path}.ref.name"),
                "template name must be defined",
            ));
        }
        if !field("kind").ends_with("Template") || field("kind") == "Template" {
            errors.push(FieldError::invalid(
                format!("{path}.ref.kind"),
                json!(field("kind")),
                "template kind must be of form \"<name>Template\"",
            ));
        }
        if field("apiVersion").is_empty() {
            errors.push(FieldError::required(
                format!("{path}.ref.apiVersion"),
                "template apiVersion must be defined",
            ));
        }
    }
    let mut seen = HashSet::new();
    for (i, md) in workers(object).iter().enumerate() {
        let class = md["class"].as_str().unwrap_or("");
        if !seen.insert(class.to_string()) {
            errors.push(FieldError::invalid(
                format!("spec.workers.machineDeployments[{i}].class"),
                json!(class),
                format!("MachineDeployment class must be unique. MachineDeployment with class {class:?} is defined more than once"),
            ));
        }
    }
    errors.extend(super::class_variables::check(object));
    errors.extend(super::patches::check(object));
    if let Some(old) = &review.old {
        compatibility(old, object, &mut errors);
        removed_classes(old, object, users, &mut errors);
    }
    Verdict::of(CORE_GROUP, "ClusterClass", errors)
}

/// A template's group and kind may not change under the Clusters made from it.
fn compatibility(old: &Value, new: &Value, errors: &mut Vec<FieldError>) {
    let group = |v: &str| v.rsplit_once('/').map_or("", |(g, _)| g).to_string();
    let old_refs = template_refs(old);
    for (path, pointer) in template_refs(new) {
        if path.contains(".template.bootstrap") || !old_refs.iter().any(|(p, _)| *p == path) {
            continue;
        }
        let (a, b) = (old.pointer(&pointer), new.pointer(&pointer));
        let field = |r: Option<&Value>, k: &str| {
            r.and_then(|r| r.get(k))
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        let (ga, gb) = (
            group(&field(a, "apiVersion")),
            group(&field(b, "apiVersion")),
        );
        if ga != gb {
            errors.push(FieldError::forbidden(
                format!("{path}.templateRef.apiVersion"),
                format!("group of apiVersion cannot be changed from {ga:?} to {gb:?} to prevent incompatible changes in the Clusters"),
            ));
        }
        let (ka, kb) = (field(a, "kind"), field(b, "kind"));
        if ka != kb {
            errors.push(FieldError::forbidden(
                format!("{path}.templateRef.kind"),
                format!("kind cannot be changed from {ka:?} to {kb:?} to prevent incompatible changes in the Clusters"),
            ));
        }
    }
}

/// A MachineDeployment class a Cluster uses may not be removed.
fn removed_classes(
    old: &Value,
    new: &Value,
    users: &[(String, Vec<String>)],
    errors: &mut Vec<FieldError>,
) {
    let kept: HashSet<String> = workers(new)
        .iter()
        .filter_map(|m| m["class"].as_str().map(str::to_string))
        .collect();
    for md in workers(old) {
        let class = md["class"].as_str().unwrap_or("");
        if kept.contains(class) {
            continue;
        }
        if let Some((cluster, _)) = users
            .iter()
            .find(|(_, used)| used.iter().any(|u| u == class))
        {
            let name = cluster
                .rsplit_once('/')
                .map_or(cluster.as_str(), |(_, n)| n);
            errors.push(FieldError::forbidden(
                "spec.workers.machineDeployments",
                format!("MachineDeploymentClass {class:?} cannot be deleted because it is used by Cluster {name:?}"),
            ));
        }
    }
}

/// A class Clusters use may not be deleted: at most three are named.
fn deletion(name: &str, users: &[(String, Vec<String>)]) -> Verdict {
    if users.is_empty() {
        return Verdict::allowed();
    }
    let listed: Vec<&str> = users.iter().take(3).map(|(c, _)| c.as_str()).collect();
    let more = users.len().saturating_sub(3);
    let mut text_list = listed.join(", ");
    if more > 0 {
        text_list.push_str(&format!(", ... ({more} more)"));
    }
    Verdict::denied(format!(
        "ClusterClass.cluster.x-k8s.io {name:?} is forbidden: ClusterClass cannot be deleted because it is used by Cluster(s): {text_list}"
    ))
}

/// The MachineDeployment classes a Cluster's topology uses, if it uses the class `class`
/// (`namespace/name`).
pub fn classes_used(cluster: &Value, namespace: &str, class: &str) -> Option<Vec<String>> {
    let ns = cluster
        .pointer("/spec/topology/classRef/namespace")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .unwrap_or(text(cluster, "/metadata/namespace"));
    if ns != namespace || text(cluster, "/spec/topology/classRef/name") != class {
        return None;
    }
    Some(
        cluster
            .pointer("/spec/topology/workers/machineDeployments")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|m| m["class"].as_str().map(str::to_string))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class() -> Value {
        let r = |kind: &str| json!({"templateRef": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": kind, "name": "t"}});
        json!({"metadata": {"name": "quick-start", "namespace": "default"},
               "spec": {"infrastructure": r("DevClusterTemplate"),
                        "controlPlane": {"templateRef": {"apiVersion": "controlplane.cluster.x-k8s.io/v1beta2",
                                                         "kind": "KubeadmControlPlaneTemplate", "name": "cp"}},
                        "workers": {"machineDeployments": [
                            {"class": "default-worker", "bootstrap": r("KubeadmConfigTemplate"), "infrastructure": r("DevMachineTemplate")}]}}})
    }

    fn review(op: Operation, object: Value, old: Option<Value>) -> Review {
        Review {
            operation: op,
            ..Review::of("quick-start", object, old)
        }
    }

    #[test]
    fn a_sound_class_passes_and_a_bad_reference_is_named() {
        assert_eq!(
            validate(&review(Operation::Create, class(), None), &[]),
            Verdict::allowed()
        );
        let mut bad = class();
        bad["spec"]["infrastructure"]["templateRef"]["kind"] = json!("DevCluster");
        let Verdict::Invalid { errors, .. } = validate(&review(Operation::Create, bad, None), &[])
        else {
            panic!("refused")
        };
        assert_eq!(errors[0].to_string(), "spec.infrastructure.ref.kind: Invalid value: \"DevCluster\": template kind must be of form \"<name>Template\"");
    }

    #[test]
    fn a_class_in_use_keeps_its_classes_and_is_not_deleted() {
        let users = vec![("default/c1".to_string(), vec!["default-worker".to_string()])];
        let mut emptied = class();
        emptied["spec"]["workers"]["machineDeployments"] = json!([]);
        let Verdict::Invalid { errors, .. } =
            validate(&review(Operation::Update, emptied, Some(class())), &users)
        else {
            panic!("refused")
        };
        assert_eq!(errors[0].to_string(), "spec.workers.machineDeployments: Forbidden: MachineDeploymentClass \"default-worker\" cannot be deleted because it is used by Cluster \"c1\"");
        let verdict = validate(&review(Operation::Delete, class(), Some(class())), &users);
        assert_eq!(verdict, Verdict::denied("ClusterClass.cluster.x-k8s.io \"quick-start\" is forbidden: ClusterClass cannot be deleted because it is used by Cluster(s): default/c1"));
        assert_eq!(
            validate(&review(Operation::Delete, class(), Some(class())), &[]),
            Verdict::allowed()
        );
    }
}
