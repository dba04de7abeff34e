//! MachineSet's webhooks (`default.machineset.cluster.x-k8s.io`,
//! `validation.machineset.cluster.x-k8s.io`), as Cluster API v1.11 runs them.

use super::machine_deployment::{template_checks, version_and_naming, Unselected};
use super::review::{Review, Verdict};
use super::rules::{self, object_at};
use crate::capi::{CORE_GROUP, SET_NAME_LABEL};
use base64::Engine;
use serde_json::{json, Value};

/// The cluster label, replicas, the selector and template labels, the version's `v`.
pub fn default(review: &Review, object: &mut Value) -> Result<(), Verdict> {
    rules::label_cluster_name(object);
    rules::default_replicas(object, review.old.as_ref(), "MachineSet").map_err(Verdict::denied)?;
    if rules::selector_is_empty(object.pointer("/spec/selector")) {
        let name = label_safe_name(&review.object_name());
        for labels in [
            &["spec", "selector", "matchLabels"][..],
            &["spec", "template", "metadata", "labels"][..],
        ] {
            object_at(object, labels).insert(SET_NAME_LABEL.into(), json!(name));
        }
    }
    rules::default_version(object, "/spec/template/spec/version", false);
    Ok(())
}

/// The validating webhook's checks, on create and update.
pub fn validate(review: &Review) -> Verdict {
    let mut errors = Vec::new();
    template_checks(review, Unselected::Invalid, &mut errors);
    version_and_naming(&review.object, &mut errors);
    Verdict::of(CORE_GROUP, "MachineSet", errors)
}

/// A name as a label value: itself when it is one, else `hash_<FNV-1a of it>_z` (a name
/// can be longer than a label value may be), as Cluster API formats it.
pub fn label_safe_name(name: &str) -> String {
    if rules::label_value_errors(name).is_empty() {
        return name.to_string();
    }
    // FNV-1a, 32 bits: the hash Cluster API's `format.MustFormatValue` uses.
    let mut hash: u32 = 0x811c_9dc5;
    for b in name.bytes() {
        hash ^= u32::from(b);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    let encoded = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(hash.to_be_bytes());
    format!("hash_{encoded}_z")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn review(object: Value, name: &str) -> Review {
        Review::of(name, object, None)
    }

    #[test]
    fn an_empty_selector_becomes_the_set_name_and_the_template_follows() {
        let mut object = json!({"metadata": {"name": "ms-0"},
            "spec": {"clusterName": "c1", "template": {"spec": {"clusterName": "c1",
                     "bootstrap": {"dataSecretName": "s"}}}}});
        default(&review(object.clone(), "ms-0"), &mut object).unwrap();
        assert_eq!(
            object["spec"]["selector"]["matchLabels"],
            json!({SET_NAME_LABEL: "ms-0"})
        );
        assert_eq!(
            object["spec"]["template"]["metadata"]["labels"][SET_NAME_LABEL],
            "ms-0"
        );
        assert_eq!(validate(&review(object, "ms-0")), Verdict::allowed());
    }

    #[test]
    fn a_long_name_is_hashed_into_a_label_value() {
        let long = "m".repeat(70);
        let formatted = label_safe_name(&long);
        assert!(
            formatted.starts_with("hash_") && formatted.ends_with("_z"),
            "{formatted}"
        );
        assert!(rules::label_value_errors(&formatted).is_empty());
        assert_eq!(label_safe_name("ms-0"), "ms-0");
    }

    #[test]
    fn a_template_the_selector_misses_is_named_with_its_labels() {
        let object = json!({"metadata": {"name": "ms-0"},
            "spec": {"clusterName": "c1", "selector": {"matchLabels": {"a": "1"}},
                     "template": {"metadata": {"labels": {"a": "2"}},
                                  "spec": {"clusterName": "c1", "bootstrap": {"dataSecretName": "s"}}}}});
        let Verdict::Invalid { errors, .. } = validate(&review(object, "ms-0")) else {
            panic!("refused")
        };
        assert_eq!(
            errors[0].to_string(),
            "spec.template.metadata.labels: Invalid value: map[string]string{\"a\":\"2\"}: must match spec.selector \"a=1\""
        );
    }
}
