//! MachineDeployment's webhooks (`default.machinedeployment.cluster.x-k8s.io`,
//! `validation.machinedeployment.cluster.x-k8s.io`), as Cluster API v1.11 runs them on the
//! v1beta2 object.

use super::field::{go_quote, go_string_map, FieldError};
use super::review::{Review, Verdict};
use super::rules::{self, object_at, text};
use crate::capi::{CLUSTER_NAME_LABEL, CORE_GROUP, DEPLOYMENT_NAME_LABEL};
use serde_json::{json, Value};

/// Fills what the defaulting webhook fills: the cluster label, replicas, the rollout
/// strategy, the selector and template labels, the version's `v`.
pub fn default(review: &Review, object: &mut Value) -> Result<(), Verdict> {
    rules::label_cluster_name(object);
    rules::default_replicas(object, review.old.as_ref(), "MachineDeployment")
        .map_err(Verdict::denied)?;
    let strategy = object_at(object, &["spec", "rollout", "strategy"]);
    if strategy
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("")
        .is_empty()
    {
        strategy.insert("type".into(), json!("RollingUpdate"));
    }
    if strategy.get("type").and_then(Value::as_str) == Some("RollingUpdate") {
        let rolling = strategy.entry("rollingUpdate").or_insert_with(|| json!({}));
        if let Some(r) = rolling.as_object_mut() {
            r.entry("maxSurge").or_insert(json!(1));
            r.entry("maxUnavailable").or_insert(json!(0));
        }
    }
    let name = review.object_name();
    let cluster = text(object, "/spec/clusterName").to_string();
    let empty = rules::selector_is_empty(object.pointer("/spec/selector"));
    for labels in [
        &["spec", "selector", "matchLabels"][..],
        &["spec", "template", "metadata", "labels"][..],
    ] {
        let labels = object_at(object, labels);
        if empty {
            labels.insert(DEPLOYMENT_NAME_LABEL.into(), json!(name));
        }
        labels.insert(CLUSTER_NAME_LABEL.into(), json!(cluster));
    }
    rules::default_version(object, "/spec/template/spec/version", false);
    Ok(())
}

/// The validating webhook's checks, on create and update.
pub fn validate(review: &Review) -> Verdict {
    let object = &review.object;
    let mut errors = Vec::new();
    for why in rules::label_value_errors(&review.object_name()) {
        errors.push(FieldError::invalid(
            "metadata.name",
            json!(review.object_name()),
            format!("must be a valid label value: {why}"),
        ));
    }
    template_checks(review, Unselected::Forbidden, &mut errors);
    rollout(
        object,
        "/spec/rollout/strategy/rollingUpdate",
        "spec.rollout.strategy.rollingUpdate",
        &mut errors,
    );
    rules::int_or_percent(
        object,
        "/spec/remediation/maxInFlight",
        "spec.remediation.maxInFlight",
        &mut errors,
    );
    version_and_naming(object, &mut errors);
    Verdict::of(CORE_GROUP, "MachineDeployment", errors)
}

/// How a webhook reports a template whose labels its selector does not select: Cluster API's
/// MachineDeployment webhook as forbidden, its MachineSet webhook as invalid (with the labels).
pub enum Unselected {
    Forbidden,
    Invalid,
}

/// The checks a MachineDeployment and a MachineSet share, in the order both make them before
/// their own: the template's bootstrap, the selector selecting the template's labels, the
/// preflight checks skipped, the cluster name unchanged and the same in the template.
pub fn template_checks(review: &Review, unselected: Unselected, errors: &mut Vec<FieldError>) {
    let object = &review.object;
    template_bootstrap(object, "spec.template.spec.bootstrap", errors);
    let selector = object
        .pointer("/spec/selector")
        .cloned()
        .unwrap_or(Value::Null);
    let labels = object
        .pointer("/spec/template/metadata/labels")
        .and_then(Value::as_object);
    if !rules::selects(&selector, labels) {
        let path = "spec.template.metadata.labels";
        let why = format!(
            "must match spec.selector {}",
            go_quote(&rules::selector_string(&selector))
        );
        errors.push(match unselected {
            Unselected::Forbidden => FieldError::forbidden(path, why),
            Unselected::Invalid => FieldError::invalid_shown(path, go_string_map(labels), why),
        });
    }
    rules::skip_preflight(object, errors);
    rules::cluster_name_immutable(object, review.old.as_ref(), errors);
    same_cluster_in_template(object, errors);
}

/// The template's version and the machines' naming template, the last checks of a
/// MachineDeployment and a MachineSet.
pub fn version_and_naming(object: &Value, errors: &mut Vec<FieldError>) {
    version(
        object,
        "/spec/template/spec/version",
        "spec.template.spec.version",
        errors,
    );
    rules::naming_template(
        object,
        "/spec/machineNaming/template",
        "spec.machineNaming.template",
        errors,
    );
}

/// A template must say where its Machines' bootstrap data comes from.
pub fn template_bootstrap(object: &Value, path: &str, errors: &mut Vec<FieldError>) {
    let pointer = format!("/{}", path.replace('.', "/"));
    let bootstrap = object.pointer(&pointer);
    let defined = |k: &str| {
        bootstrap.and_then(|b| b.get(k)).is_some_and(|v| match v {
            Value::Object(m) => m
                .values()
                .any(|x| x.as_str().is_some_and(|s| !s.is_empty())),
            Value::String(_) => true,
            _ => false,
        })
    };
    if !defined("configRef") && !defined("dataSecretName") {
        errors.push(FieldError::required(
            path,
            format!("expected either {path}.dataSecretName or {path}.configRef to be populated"),
        ));
    }
}

/// `spec.clusterName` and the template's must agree.
pub fn same_cluster_in_template(object: &Value, errors: &mut Vec<FieldError>) {
    let cluster = text(object, "/spec/clusterName");
    if cluster != text(object, "/spec/template/spec/clusterName") {
        errors.push(FieldError::invalid(
            "spec.clusterName",
            json!(cluster),
            "spec.clusterName and spec.template.spec.clusterName must be set to the same value",
        ));
    }
}

/// The rolling update's surge and unavailability (a MachineDeployment's, or a topology's).
pub fn rollout(object: &Value, pointer: &str, path: &str, errors: &mut Vec<FieldError>) {
    rules::int_or_percent(
        object,
        &format!("{pointer}/maxUnavailable"),
        &format!("{path}.maxUnavailable"),
        errors,
    );
    rules::int_or_percent(
        object,
        &format!("{pointer}/maxSurge"),
        &format!("{path}.maxSurge"),
        errors,
    );
    let surge = object.pointer(&format!("{pointer}/maxSurge"));
    let unavailable = object.pointer(&format!("{pointer}/maxUnavailable"));
    if surge.and_then(Value::as_i64) == Some(0) && unavailable.and_then(Value::as_i64) == Some(0) {
        errors.push(FieldError::invalid(
            path,
            json!(0),
            "maxUnavailable and maxSurge cannot both be 0",
        ));
    }
}

/// A version, when set, must be a Kubernetes semantic version.
pub fn version(object: &Value, pointer: &str, path: &str, errors: &mut Vec<FieldError>) {
    let v = text(object, pointer);
    if !v.is_empty() && !rules::is_kube_semver(v) {
        errors.push(FieldError::invalid(
            path,
            json!(v),
            "must be a valid semantic version",
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capi::admission::review::Operation;

    fn review(object: Value) -> Review {
        Review::of("md-0", object, None)
    }

    fn written_by_a_user() -> Value {
        json!({"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineDeployment",
               "metadata": {"name": "md-0", "namespace": "default"},
               "spec": {"clusterName": "c1", "template": {"spec": {
                   "clusterName": "c1", "version": "1.31.0",
                   "bootstrap": {"configRef": {"apiGroup": "bootstrap.cluster.x-k8s.io",
                                               "kind": "KubeadmConfigTemplate", "name": "t"}},
                   "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io",
                                         "kind": "DevMachineTemplate", "name": "t"}}}}})
    }

    #[test]
    fn a_deployment_without_a_selector_gets_one_that_selects_its_template() {
        let mut object = written_by_a_user();
        let r = review(object.clone());
        default(&r, &mut object).unwrap();
        let selector = &object["spec"]["selector"]["matchLabels"];
        assert_eq!(selector[DEPLOYMENT_NAME_LABEL], "md-0");
        assert_eq!(selector[CLUSTER_NAME_LABEL], "c1");
        assert_eq!(&object["spec"]["template"]["metadata"]["labels"], selector);
        assert_eq!(object["metadata"]["labels"][CLUSTER_NAME_LABEL], "c1");
        assert_eq!(object["spec"]["replicas"], 1);
        assert_eq!(
            object["spec"]["rollout"]["strategy"],
            json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}})
        );
        assert_eq!(object["spec"]["template"]["spec"]["version"], "v1.31.0");
        assert_eq!(validate(&review(object)), Verdict::allowed());
    }

    #[test]
    fn a_template_its_selector_does_not_select_is_forbidden() {
        let mut object = written_by_a_user();
        object["spec"]["selector"] = json!({"matchLabels": {"app": "x"}});
        default(&review(object.clone()), &mut object).unwrap();
        object["spec"]["template"]["metadata"]["labels"]
            .as_object_mut()
            .unwrap()
            .remove("app");
        let Verdict::Invalid { errors, .. } = validate(&review(object)) else {
            panic!("refused")
        };
        assert_eq!(
            errors[0].to_string(),
            "spec.template.metadata.labels: Forbidden: must match spec.selector \"app=x,cluster.x-k8s.io/cluster-name=c1\""
        );
    }

    #[test]
    fn the_cluster_may_not_change_and_versions_and_rollouts_are_checked() {
        let mut old = written_by_a_user();
        default(&review(old.clone()), &mut old).unwrap();
        let mut new = old.clone();
        new["spec"]["clusterName"] = json!("c2");
        new["spec"]["template"]["spec"]["version"] = json!("v1.31");
        new["spec"]["rollout"]["strategy"]["rollingUpdate"] =
            json!({"maxSurge": 0, "maxUnavailable": 0});
        let mut r = review(new);
        r.operation = Operation::Update;
        r.old = Some(old);
        let Verdict::Invalid { errors, .. } = validate(&r) else {
            panic!("refused")
        };
        let texts: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
        assert!(
            texts.contains(&"spec.clusterName: Forbidden: field is immutable".to_string()),
            "{texts:?}"
        );
        assert!(texts.iter().any(|t| t.starts_with("spec.clusterName: Invalid value: \"c2\": spec.clusterName and spec.template.spec.clusterName")));
        assert!(texts.contains(&"spec.rollout.strategy.rollingUpdate: Invalid value: 0: maxUnavailable and maxSurge cannot both be 0".to_string()));
        assert!(texts.contains(&"spec.template.spec.version: Invalid value: \"v1.31\": must be a valid semantic version".to_string()));
    }
}
