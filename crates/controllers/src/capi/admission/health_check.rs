//! MachineHealthCheck's webhooks (`default.machinehealthcheck.cluster.x-k8s.io`,
//! `validation.machinehealthcheck.cluster.x-k8s.io`), as Cluster API v1.11 runs them.

use super::field::FieldError;
use super::review::{Review, Verdict};
use super::rules::{self, object_at, text};
use crate::capi::{CLUSTER_NAME_LABEL, CORE_GROUP};
use serde_json::{json, Value};

/// The shortest node startup timeout the manager allows (its flag's default), but 0 (off).
const MIN_NODE_STARTUP_SECONDS: i64 = 30;

/// The cluster label, and a node startup timeout of ten minutes.
pub fn default(_review: &Review, object: &mut Value) -> Result<(), Verdict> {
    rules::label_cluster_name(object);
    object_at(object, &["spec", "checks"])
        .entry("nodeStartupTimeoutSeconds")
        .or_insert(json!(600));
    Ok(())
}

/// The validating webhook's checks, on create and update.
pub fn validate(review: &Review) -> Verdict {
    let object = &review.object;
    let mut errors = Vec::new();
    let selector = object.pointer("/spec/selector");
    if rules::selector_is_empty(selector) {
        errors.push(FieldError::required(
            "spec.selector",
            "selector must not be empty",
        ));
    }
    let cluster = text(object, "/spec/clusterName");
    let selected_cluster = selector
        .and_then(|s| s.pointer("/matchLabels"))
        .and_then(|m| m.get(CLUSTER_NAME_LABEL))
        .and_then(Value::as_str);
    if selected_cluster.is_some_and(|c| c != cluster) {
        errors.push(FieldError::invalid_shown(
            "spec.selector",
            format!("{}", selector.cloned().unwrap_or(Value::Null)),
            "cannot specify a cluster selector other than the one specified by ClusterName",
        ));
    }
    rules::cluster_name_immutable(object, review.old.as_ref(), &mut errors);
    let startup = object
        .pointer("/spec/checks/nodeStartupTimeoutSeconds")
        .and_then(Value::as_i64);
    if let Some(s) = startup.filter(|s| *s != 0 && *s < MIN_NODE_STARTUP_SECONDS) {
        errors.push(FieldError::invalid(
            "spec.checks.nodeStartupTimeoutSeconds",
            json!(s),
            format!("must be at least {MIN_NODE_STARTUP_SECONDS}s"),
        ));
    }
    rules::int_or_percent(
        object,
        "/spec/remediation/triggerIf/unhealthyLessThanOrEqualTo",
        "spec.remediation.triggerIf.unhealthyLessThanOrEqualTo",
        &mut errors,
    );
    Verdict::of(CORE_GROUP, "MachineHealthCheck", errors)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn review(object: Value) -> Review {
        Review::of("mhc", object, None)
    }

    #[test]
    fn defaults_and_the_checks_of_selectors_and_timeouts() {
        let mut object = json!({"metadata": {"name": "mhc"},
            "spec": {"clusterName": "c1", "selector": {"matchLabels": {"a": "b"}}}});
        default(&review(object.clone()), &mut object).unwrap();
        assert_eq!(object["spec"]["checks"]["nodeStartupTimeoutSeconds"], 600);
        assert_eq!(object["metadata"]["labels"][CLUSTER_NAME_LABEL], "c1");
        assert_eq!(validate(&review(object.clone())), Verdict::allowed());
        object["spec"]["selector"] = json!({"matchLabels": {CLUSTER_NAME_LABEL: "other"}});
        object["spec"]["checks"]["nodeStartupTimeoutSeconds"] = json!(10);
        let Verdict::Invalid { errors, .. } = validate(&review(object.clone())) else {
            panic!("refused")
        };
        let texts: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
        assert!(
            texts[0].ends_with(
                "cannot specify a cluster selector other than the one specified by ClusterName"
            ),
            "{texts:?}"
        );
        assert_eq!(
            texts[1],
            "spec.checks.nodeStartupTimeoutSeconds: Invalid value: 10: must be at least 30s"
        );
        object["spec"]["selector"] = json!({});
        let Verdict::Invalid { errors, .. } = validate(&review(object)) else {
            panic!("refused")
        };
        assert_eq!(
            errors[0].to_string(),
            "spec.selector: Required value: selector must not be empty"
        );
    }
}
