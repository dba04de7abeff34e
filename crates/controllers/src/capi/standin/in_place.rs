//! In-place propagation, as Cluster API's MachineDeployment, MachineSet and
//! KubeadmControlPlane controllers do it: a change to a template's labels, annotations,
//! readiness gates, deletion timeouts or `minReadySeconds` reaches the objects made from it
//! without a rollout (a new Machine is made only when the rollout key changes: version,
//! bootstrap, infrastructure, failure domain).
//!
//! Ownership is server-side apply's, so that what a template drops is dropped too: an owner
//! makes its Machines (and MachineSets) with an apply under its field manager and applies
//! the whole desired object again when it changed; labels and annotations of infrastructure
//! machines and bootstrap configs are applied under a manager of their own
//! (`<manager>-metadata`), as upstream's `capi-machineset-metadata`. An apply is sent only
//! when the object differs from what the owner wants, judged with the apply's managed
//! fields: a label the manager applied before and wants no more is a difference.

use super::Error;
use crate::capi::core::ContractRef;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};

/// The keys of `metadata.<field>` (`labels` or `annotations`) that `manager` owns by apply.
fn applied_keys(
    entries: Option<&[ManagedFieldsEntry]>,
    manager: &str,
    field: &str,
) -> BTreeSet<String> {
    let owned = entries
        .unwrap_or_default()
        .iter()
        .filter(|e| {
            e.manager.as_deref() == Some(manager) && e.operation.as_deref() == Some("Apply")
        })
        .filter_map(|e| e.fields_v1.as_ref())
        .filter_map(|f| f.0.pointer(&format!("/f:metadata/f:{field}")))
        .filter_map(Value::as_object);
    owned
        .flat_map(|m| m.keys())
        .filter_map(|k| k.strip_prefix("f:"))
        .map(str::to_string)
        .collect()
}

/// Whether a map of labels or annotations is what `manager` wants: every wanted entry there,
/// and nothing it applied before and wants no more.
fn map_current(
    have: &BTreeMap<String, String>,
    want: &BTreeMap<String, String>,
    applied: &BTreeSet<String>,
) -> bool {
    want.iter().all(|(k, v)| have.get(k) == Some(v)) && applied.iter().all(|k| want.contains_key(k))
}

/// Whether `meta`'s labels and annotations are what `manager` wants.
pub(super) fn metadata_current(
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    manager: &str,
    labels: &BTreeMap<String, String>,
    annotations: &BTreeMap<String, String>,
) -> bool {
    let entries = meta.managed_fields.as_deref();
    let empty = BTreeMap::new();
    map_current(
        meta.labels.as_ref().unwrap_or(&empty),
        labels,
        &applied_keys(entries, manager, "labels"),
    ) && map_current(
        meta.annotations.as_ref().unwrap_or(&empty),
        annotations,
        &applied_keys(entries, manager, "annotations"),
    )
}

/// Whether an optional field is as wanted: absent, `null` and empty are all "not set".
fn same_field(have: Option<&Value>, want: Option<&Value>) -> bool {
    let unset = |v: Option<&Value>| match v {
        None | Some(Value::Null) => true,
        Some(Value::Array(a)) => a.is_empty(),
        Some(Value::Object(o)) => o.is_empty(),
        _ => false,
    };
    (unset(have) && unset(want)) || have == want
}

/// A Machine's `spec.deletion` as the Machine defaulting webhook leaves it: the node deletion
/// timeout 10 s unless set. Compared and applied so, the desired Machine is what the server
/// stores, and an unchanged template sends no apply.
pub(super) fn defaulted_deletion(deletion: Option<Value>) -> Value {
    let mut deletion = match deletion {
        Some(Value::Object(o)) => o,
        _ => serde_json::Map::new(),
    };
    deletion
        .entry("nodeDeletionTimeoutSeconds")
        .or_insert(json!(10));
    Value::Object(deletion)
}

/// Applies `object` (a whole desired object, `apiVersion` and `kind` included) under
/// `manager`, taking over any field another manager set differently, as upstream's
/// `ssa.Patch` does.
pub(super) async fn apply<K>(
    api: &Api<K>,
    name: &str,
    manager: &str,
    object: &Value,
) -> Result<(), Error>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.patch(
        name,
        &PatchParams::apply(manager).force(),
        &Patch::Apply(object),
    )
    .await?;
    Ok(())
}

/// Applies the labels and annotations an infrastructure machine or bootstrap config made
/// for a Machine should carry, under `manager` (the owner's metadata manager), when they are
/// not there yet or it carries some the manager applied and no longer wants.
async fn sync_metadata(
    core: &super::Core,
    ns: &str,
    target: &ContractRef,
    manager: &str,
    labels: &BTreeMap<String, String>,
    annotations: &BTreeMap<String, String>,
) -> Result<(), Error> {
    let client = core.ctx.client.clone();
    let resource = core
        .resolver
        .resolve(&client, &target.api_group, &target.kind)
        .await?;
    let api: Api<DynamicObject> = Api::namespaced_with(client, ns, &resource);
    let Some(object) = api.get_opt(&target.name).await? else {
        return Ok(());
    };
    if metadata_current(&object.metadata, manager, labels, annotations) {
        return Ok(());
    }
    let body = json!({
        "apiVersion": resource.api_version, "kind": resource.kind,
        "metadata": {"name": target.name, "labels": labels, "annotations": annotations},
    });
    apply(&api, &target.name, manager, &body).await
}

/// What an owner (a MachineSet, a KubeadmControlPlane) propagates to each of its Machines:
/// under which field manager, the labels the Machines and their external objects carry, the
/// annotations the external objects carry, and which spec fields it sets in place.
pub(super) struct Propagation<'a> {
    pub manager: &'a str,
    pub labels: &'a BTreeMap<String, String>,
    pub external_annotations: &'a BTreeMap<String, String>,
    pub spec_fields: &'a [&'a str],
}

impl Propagation<'_> {
    /// Brings Machine `m` to `desired` (the whole Machine its owner wants, with
    /// `annotations`): nothing when it is there already; else its infrastructure machine's
    /// and bootstrap config's labels and annotations, then the Machine itself.
    pub async fn sync(
        &self,
        core: &super::Core,
        api: &Api<crate::capi::core::Machine>,
        m: &crate::capi::core::Machine,
        desired: &Value,
        annotations: &BTreeMap<String, String>,
    ) -> Result<(), Error> {
        let current = metadata_current(&m.metadata, self.manager, self.labels, annotations)
            && self
                .spec_fields
                .iter()
                .all(|f| same_field(spec_field(&m.spec, f).as_ref(), desired["spec"].get(*f)));
        if current {
            return Ok(());
        }
        let ns = m.metadata.namespace.clone().unwrap_or_default();
        let metadata = metadata_manager(self.manager);
        let targets =
            std::iter::once(&m.spec.infrastructure_ref).chain(m.spec.bootstrap.config_ref.as_ref());
        for target in targets {
            let labels = self.labels;
            sync_metadata(
                core,
                &ns,
                target,
                &metadata,
                labels,
                self.external_annotations,
            )
            .await?;
        }
        let name = m.metadata.name.clone().unwrap_or_default();
        apply(api, &name, self.manager, desired).await
    }
}

/// One of the spec fields propagated in place, as JSON (without serializing the whole spec:
/// this runs for every Machine of every owner's reconcile).
fn spec_field(spec: &crate::capi::core::MachineSpec, field: &str) -> Option<Value> {
    let value = match field {
        "readinessGates" => serde_json::to_value(&spec.readiness_gates),
        "deletion" => serde_json::to_value(&spec.deletion),
        "minReadySeconds" => serde_json::to_value(spec.min_ready_seconds),
        _ => return None,
    };
    value.ok().filter(|v| !v.is_null())
}

/// The metadata manager of the controller whose field manager is `manager`.
fn metadata_manager(manager: &str) -> String {
    format!("{manager}-metadata")
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{FieldsV1, ObjectMeta};

    fn meta(labels: &[(&str, &str)], applied: &[&str]) -> ObjectMeta {
        let fields: serde_json::Map<String, Value> = applied
            .iter()
            .map(|k| (format!("f:{k}"), json!({})))
            .collect();
        ObjectMeta {
            labels: Some(
                labels
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            ),
            managed_fields: Some(vec![
                ManagedFieldsEntry {
                    manager: Some("m".into()),
                    operation: Some("Apply".into()),
                    fields_v1: Some(FieldsV1(json!({"f:metadata": {"f:labels": fields}}))),
                    ..Default::default()
                },
                ManagedFieldsEntry {
                    manager: Some("someone".into()),
                    operation: Some("Update".into()),
                    fields_v1: Some(FieldsV1(
                        json!({"f:metadata": {"f:labels": {"f:theirs": {}}}}),
                    )),
                    ..Default::default()
                },
            ]),
            ..Default::default()
        }
    }

    fn map(entries: &[(&str, &str)]) -> BTreeMap<String, String> {
        entries
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn a_label_applied_and_no_longer_wanted_is_a_difference() {
        let none = BTreeMap::new();
        let m = meta(&[("a", "1"), ("b", "2"), ("theirs", "x")], &["a", "b"]);
        assert!(metadata_current(
            &m,
            "m",
            &map(&[("a", "1"), ("b", "2")]),
            &none
        ));
        assert!(
            !metadata_current(&m, "m", &map(&[("a", "1")]), &none),
            "b dropped"
        );
        assert!(
            !metadata_current(&m, "m", &map(&[("a", "2"), ("b", "2")]), &none),
            "a changed"
        );
        assert!(
            !metadata_current(&m, "m", &map(&[("a", "1"), ("b", "2"), ("c", "3")]), &none),
            "c added"
        );
        // Another manager's label is theirs to keep; another manager's apply is not ours.
        assert!(metadata_current(
            &m,
            "m",
            &map(&[("a", "1"), ("b", "2")]),
            &none
        ));
        assert!(metadata_current(&m, "other", &map(&[("a", "1")]), &none));
    }

    #[test]
    fn the_deletion_timeouts_default_as_the_webhook_does() {
        assert_eq!(
            defaulted_deletion(None),
            json!({"nodeDeletionTimeoutSeconds": 10})
        );
        assert_eq!(
            defaulted_deletion(Some(json!({"nodeDrainTimeoutSeconds": 300}))),
            json!({"nodeDrainTimeoutSeconds": 300, "nodeDeletionTimeoutSeconds": 10})
        );
        assert_eq!(
            defaulted_deletion(Some(json!({"nodeDeletionTimeoutSeconds": 3}))),
            json!({"nodeDeletionTimeoutSeconds": 3})
        );
    }

    #[test]
    fn unset_fields_compare_equal_however_they_are_spelled() {
        assert!(same_field(None, Some(&json!([]))));
        assert!(same_field(Some(&Value::Null), Some(&json!({}))));
        assert!(same_field(Some(&json!(5)), Some(&json!(5))));
        assert!(!same_field(
            None,
            Some(&json!({"nodeDrainTimeoutSeconds": 300}))
        ));
        assert!(!same_field(Some(&json!(5)), None));
    }
}
