//! Machine's webhooks (`default.machine.cluster.x-k8s.io`,
//! `validation.machine.cluster.x-k8s.io`), as Cluster API v1.11 runs them.

use super::machine_deployment::{template_bootstrap, version};
use super::review::{Review, Verdict};
use super::rules::{self, object_at};
use crate::capi::CORE_GROUP;
use serde_json::{json, Value};

/// The label of Machines a MachinePool owns (their bootstrap data is the pool's).
const POOL_NAME_LABEL: &str = "cluster.x-k8s.io/pool-name";

/// The cluster label, the version's `v`, the node deletion timeout (10 s).
pub fn default(_review: &Review, object: &mut Value) -> Result<(), Verdict> {
    rules::label_cluster_name(object);
    rules::default_version(object, "/spec/version", false);
    object_at(object, &["spec", "deletion"])
        .entry("nodeDeletionTimeoutSeconds")
        .or_insert(json!(10));
    Ok(())
}

/// The validating webhook's checks, on create and update.
pub fn validate(review: &Review) -> Verdict {
    let object = &review.object;
    let mut errors = Vec::new();
    if !owned_by_a_pool(object) {
        template_bootstrap(object, "spec.bootstrap", &mut errors);
    }
    rules::cluster_name_immutable(object, review.old.as_ref(), &mut errors);
    version(object, "/spec/version", "spec.version", &mut errors);
    Verdict::of(CORE_GROUP, "Machine", errors)
}

fn owned_by_a_pool(object: &Value) -> bool {
    let labelled = object
        .pointer("/metadata/labels")
        .and_then(|l| l.get(POOL_NAME_LABEL))
        .is_some();
    let owned = object
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .is_some_and(|o| o.iter().any(|r| r["kind"] == "MachinePool"));
    labelled || owned
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capi::admission::review::Operation;

    #[test]
    fn a_machine_without_bootstrap_data_is_refused_unless_a_pool_owns_it() {
        let mut object =
            json!({"metadata": {"name": "m"}, "spec": {"clusterName": "c1", "version": "1.31.0"}});
        let mut r = Review {
            operation: Operation::Create,
            object: object.clone(),
            old: None,
            namespace: "default".into(),
            name: "m".into(),
            dry_run: false,
            sub_resource: None,
        };
        default(&r, &mut object).unwrap();
        assert_eq!(object["spec"]["version"], "v1.31.0");
        assert_eq!(object["spec"]["deletion"]["nodeDeletionTimeoutSeconds"], 10);
        r.object = object.clone();
        let Verdict::Invalid { errors, .. } = validate(&r) else {
            panic!("refused")
        };
        assert_eq!(
            errors[0].to_string(),
            "spec.bootstrap: Required value: expected either spec.bootstrap.dataSecretName or spec.bootstrap.configRef to be populated"
        );
        r.object["metadata"]["labels"][POOL_NAME_LABEL] = json!("pool");
        assert_eq!(validate(&r), Verdict::allowed());
    }
}
