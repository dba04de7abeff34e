//! KubeadmControlPlane's webhooks (`default.kubeadmcontrolplane.controlplane.cluster.x-k8s.io`,
//! `validation.kubeadmcontrolplane…` and the scale subresource's `validation-scale…`), as
//! Cluster API v1.11 runs them. Upstream names the group of its errors `cluster.x-k8s.io`.

use super::field::FieldError;
use super::kubeadm_config::validate_spec;
use super::review::{Review, Verdict};
use super::rules::{self, object_at, text};
use crate::capi::CORE_GROUP;
use serde_json::{json, Map, Value};

/// Replicas (1), the version's `v` (even when empty), the rolling update strategy.
pub fn default(_review: &Review, object: &mut Value) -> Result<(), Verdict> {
    let spec = object_at(object, &["spec"]);
    if spec.get("replicas").is_none_or(Value::is_null) {
        spec.insert("replicas".into(), json!(1));
    }
    rules::default_version(object, "/spec/version", true);
    let strategy = object_at(object, &["spec", "rollout", "strategy"]);
    strategy.insert("type".into(), json!("RollingUpdate"));
    let rolling = object_at(object, &["spec", "rollout", "strategy", "rollingUpdate"]);
    rolling.entry("maxSurge").or_insert(json!(1));
    Ok(())
}

/// The validating webhook's checks: the spec's on create and update, the update's own.
pub fn validate(review: &Review) -> Verdict {
    let object = &review.object;
    let mut errors = Vec::new();
    replicas(object, &mut errors);
    let infra = object.pointer("/spec/machineTemplate/spec/infrastructureRef");
    for field in ["apiGroup", "kind", "name"] {
        let value = infra
            .and_then(|r| r.get(field))
            .and_then(Value::as_str)
            .unwrap_or("");
        if value.is_empty() {
            errors.push(FieldError::invalid(
                format!("spec.machineTemplate.infrastructure.{field}"),
                json!(value),
                "cannot be empty",
            ));
        }
    }
    super::machine_deployment::version(object, "/spec/version", "spec.version", &mut errors);
    strategy(object, &mut errors);
    rules::naming_template(
        object,
        "/spec/machineNaming/template",
        "spec.machineNaming.template",
        &mut errors,
    );
    let etcd = object.pointer("/spec/kubeadmConfigSpec/clusterConfiguration/etcd");
    if etcd.is_some_and(|e| has(e, "local") && has(e, "external")) {
        errors.push(FieldError::forbidden(
            "spec.kubeadmConfigSpec.clusterConfiguration.etcd.local",
            "cannot have both external and local etcd",
        ));
    }
    validate_spec(
        object.pointer("/spec/kubeadmConfigSpec"),
        "spec.kubeadmConfigSpec",
        &mut errors,
    );
    if let Some(old) = &review.old {
        update(old, object, &mut errors);
    }
    Verdict::of(CORE_GROUP, "KubeadmControlPlane", errors)
}

fn has(v: &Value, key: &str) -> bool {
    v.get(key).is_some_and(|x| !x.is_null())
}

fn stacked_etcd(object: &Value) -> bool {
    !object
        .pointer("/spec/kubeadmConfigSpec/clusterConfiguration/etcd")
        .is_some_and(|e| has(e, "external"))
}

fn replicas(object: &Value, errors: &mut Vec<FieldError>) {
    match object.pointer("/spec/replicas").and_then(Value::as_i64) {
        None => errors.push(FieldError::required("spec.replicas", "is required")),
        Some(r) if r <= 0 => errors.push(FieldError::forbidden(
            "spec.replicas",
            "cannot be less than or equal to 0",
        )),
        Some(r) if r % 2 == 0 && stacked_etcd(object) => errors.push(FieldError::forbidden(
            "spec.replicas",
            "cannot be an even number when etcd is stacked",
        )),
        Some(_) => {}
    }
}

/// Only rolling updates, surging by 1 or 0; scaling in needs three replicas.
fn strategy(object: &Value, errors: &mut Vec<FieldError>) {
    let Some(strategy) = object
        .pointer("/spec/rollout/strategy")
        .filter(|s| s.as_object().is_some_and(|m| !m.is_empty()))
    else {
        return;
    };
    if strategy["type"].as_str() != Some("RollingUpdate") {
        errors.push(FieldError::required(
            "spec.rollout.strategy.type",
            "only RollingUpdate is supported",
        ));
    }
    let surge = strategy.pointer("/rollingUpdate/maxSurge");
    let replicas = object
        .pointer("/spec/replicas")
        .and_then(Value::as_i64)
        .unwrap_or(1);
    match surge.and_then(Value::as_i64) {
        Some(0) if replicas < 3 => errors.push(FieldError::required(
            "spec.rollout.strategy.rollingUpdate",
            "when KubeadmControlPlane is configured to scale-in, replica count needs to be at least 3",
        )),
        Some(0) | Some(1) | None => {}
        Some(_) => errors.push(FieldError::required(
            "spec.rollout.strategy.rollingUpdate.maxSurge",
            "value must be 1 or 0",
        )),
    }
}

/// What an update may not do: change fields outside the allowed ones, skip a minor version,
/// switch between local and external etcd.
fn update(old: &Value, new: &Value, errors: &mut Vec<FieldError>) {
    let mut changed = Vec::new();
    leaf_changes(old.get("spec"), new.get("spec"), "spec", &mut changed);
    for path in changed {
        if !allowed(&path) {
            errors.push(FieldError::forbidden(path, "cannot be modified"));
        }
    }
    let (from, to) = (text(old, "/spec/version"), text(new, "/spec/version"));
    if let (Some(a), Some(b)) = (rules::minor_of(from), rules::minor_of(to)) {
        if b.0 > a.0 || (b.0 == a.0 && b.1 >= a.1 + 2) {
            errors.push(FieldError::forbidden(
                "spec.version",
                format!("cannot update Kubernetes version from {from} to {to}"),
            ));
        }
    }
    if stacked_etcd(old) != stacked_etcd(new) {
        errors.push(FieldError::forbidden(
            "spec.kubeadmConfigSpec.clusterConfiguration.etcd.external",
            "cannot change between external and local etcd",
        ));
    }
}

/// The paths under `spec` a KubeadmControlPlane's update may change (v1.11's allow-list:
/// a path is allowed if it is, or lies under, one of these).
const MUTABLE: &[&str] = &[
    "spec.replicas",
    "spec.version",
    "spec.remediation",
    "spec.machineNaming",
    "spec.rollout",
    "spec.machineTemplate.metadata",
    "spec.machineTemplate.spec",
    "spec.kubeadmConfigSpec.clusterConfiguration.etcd",
    "spec.kubeadmConfigSpec.clusterConfiguration.dns",
    "spec.kubeadmConfigSpec.clusterConfiguration.imageRepository",
    "spec.kubeadmConfigSpec.clusterConfiguration.featureGates",
    "spec.kubeadmConfigSpec.clusterConfiguration.apiServer",
    "spec.kubeadmConfigSpec.clusterConfiguration.controllerManager",
    "spec.kubeadmConfigSpec.clusterConfiguration.scheduler",
    "spec.kubeadmConfigSpec.clusterConfiguration.certificateValidityPeriodDays",
    "spec.kubeadmConfigSpec.initConfiguration.nodeRegistration",
    "spec.kubeadmConfigSpec.initConfiguration.patches",
    "spec.kubeadmConfigSpec.initConfiguration.skipPhases",
    "spec.kubeadmConfigSpec.initConfiguration.bootstrapTokens",
    "spec.kubeadmConfigSpec.initConfiguration.localAPIEndpoint",
    "spec.kubeadmConfigSpec.initConfiguration.timeouts",
    "spec.kubeadmConfigSpec.joinConfiguration.nodeRegistration",
    "spec.kubeadmConfigSpec.joinConfiguration.patches",
    "spec.kubeadmConfigSpec.joinConfiguration.skipPhases",
    "spec.kubeadmConfigSpec.joinConfiguration.caCertPath",
    "spec.kubeadmConfigSpec.joinConfiguration.controlPlane",
    "spec.kubeadmConfigSpec.joinConfiguration.discovery",
    "spec.kubeadmConfigSpec.joinConfiguration.timeouts",
    "spec.kubeadmConfigSpec.bootCommands",
    "spec.kubeadmConfigSpec.preKubeadmCommands",
    "spec.kubeadmConfigSpec.postKubeadmCommands",
    "spec.kubeadmConfigSpec.files",
    "spec.kubeadmConfigSpec.verbosity",
    "spec.kubeadmConfigSpec.users",
    "spec.kubeadmConfigSpec.ntp",
    "spec.kubeadmConfigSpec.ignition",
    "spec.kubeadmConfigSpec.diskSetup",
    "spec.kubeadmConfigSpec.format",
    "spec.kubeadmConfigSpec.mounts",
];

fn allowed(path: &str) -> bool {
    MUTABLE.iter().any(|m| {
        path == *m
            || path
                .strip_prefix(m)
                .is_some_and(|rest| rest.starts_with('.') || rest.starts_with('['))
    })
}

/// The paths of the leaves that differ between `old` and `new` (a list counts as a leaf,
/// as a merge patch replaces lists whole).
fn leaf_changes(old: Option<&Value>, new: Option<&Value>, path: &str, out: &mut Vec<String>) {
    let empty = Map::new();
    match (old, new) {
        (Some(Value::Object(a)), Some(Value::Object(b))) => {
            let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            for k in keys {
                leaf_changes(a.get(k), b.get(k), &format!("{path}.{k}"), out);
            }
        }
        (Some(Value::Object(a)), None) | (None, Some(Value::Object(a))) => leaf_changes(
            Some(&Value::Object(a.clone())),
            Some(&Value::Object(empty)),
            path,
            out,
        ),
        (a, b) if a.unwrap_or(&Value::Null) != b.unwrap_or(&Value::Null) => {
            out.push(path.to_string())
        }
        _ => {}
    }
}

/// The scale subresource's webhook: the Scale asks for `replicas` of the control plane.
pub fn validate_scale(replicas: i64, kcp: &Value) -> Verdict {
    if replicas == 0 {
        return Verdict::denied("replicas cannot be 0");
    }
    if replicas % 2 == 0 && stacked_etcd(kcp) {
        return Verdict::denied("replicas cannot be an even number when etcd is stacked");
    }
    Verdict::allowed()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capi::admission::review::Operation;

    fn kcp() -> Value {
        json!({"metadata": {"name": "cp"}, "spec": {"version": "1.31.0",
            "machineTemplate": {"spec": {"infrastructureRef": {
                "apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "DevMachineTemplate", "name": "t"}}},
            "kubeadmConfigSpec": {"clusterConfiguration": {"networking": {"podSubnet": "10.0.0.0/16"}}}}})
    }

    fn review(object: Value, old: Option<Value>) -> Review {
        Review {
            operation: if old.is_some() {
                Operation::Update
            } else {
                Operation::Create
            },
            object,
            old,
            namespace: "default".into(),
            name: "cp".into(),
            dry_run: false,
            sub_resource: None,
        }
    }

    #[test]
    fn defaults_then_the_replicas_and_update_rules() {
        let mut object = kcp();
        default(&review(object.clone(), None), &mut object).unwrap();
        assert_eq!(object["spec"]["replicas"], 1);
        assert_eq!(object["spec"]["version"], "v1.31.0");
        assert_eq!(
            object["spec"]["rollout"]["strategy"],
            json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}})
        );
        assert_eq!(validate(&review(object.clone(), None)), Verdict::allowed());

        let mut even = object.clone();
        even["spec"]["replicas"] = json!(2);
        let Verdict::Invalid { group, errors, .. } = validate(&review(even, None)) else {
            panic!("refused")
        };
        assert_eq!(group, "cluster.x-k8s.io");
        assert_eq!(
            errors[0].to_string(),
            "spec.replicas: Forbidden: cannot be an even number when etcd is stacked"
        );

        let mut changed = object.clone();
        changed["spec"]["kubeadmConfigSpec"]["clusterConfiguration"]["networking"]["podSubnet"] =
            json!("10.1.0.0/16");
        changed["spec"]["version"] = json!("v1.33.0");
        changed["spec"]["replicas"] = json!(3);
        let Verdict::Invalid { errors, .. } = validate(&review(changed, Some(object))) else {
            panic!("refused")
        };
        let texts: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
        assert_eq!(texts, [
            "spec.kubeadmConfigSpec.clusterConfiguration.networking.podSubnet: Forbidden: cannot be modified",
            "spec.version: Forbidden: cannot update Kubernetes version from v1.31.0 to v1.33.0",
        ]);
    }

    #[test]
    fn the_scale_webhook_refuses_zero_and_even_stacked_counts() {
        assert_eq!(
            validate_scale(0, &kcp()),
            Verdict::denied("replicas cannot be 0")
        );
        assert!(matches!(
            validate_scale(2, &kcp()),
            Verdict::Denied { code: 403, .. }
        ));
        assert_eq!(validate_scale(3, &kcp()), Verdict::allowed());
    }
}
