//! Cluster API's add-on kinds (`addons.cluster.x-k8s.io/v1beta2`): a `ClusterResourceSet`
//! names ConfigMaps and Secrets whose manifests go into every workload cluster its label
//! selector matches, and a `ClusterResourceSetBinding` (one per Cluster, named after it)
//! records which of them were applied there, with the hash of each.
//!
//! Upstream's webhooks refuse an empty selector and changes to the selector or strategy, and
//! default the strategy to `ApplyOnce`; here the CRD's schema says the same (a default and
//! CEL rules), so every client meets them without a webhook.

// Printer columns repeat `type_ = "string"` and the like inside one `#[kube(...)]`.
#![allow(clippy::duplicated_attributes)]

use infrasim_controller_runtime::conditions::Condition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

/// The type a Secret must have for a ClusterResourceSet to apply it.
pub const RESOURCE_SET_SECRET_TYPE: &str = "addons.cluster.x-k8s.io/resource-set";

/// ConfigMaps and Secrets applied to the workload clusters a selector matches.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "addons.cluster.x-k8s.io",
    version = "v1beta2",
    kind = "ClusterResourceSet",
    namespaced,
    status = "ClusterResourceSetStatus",
    category = "cluster-api",
    printcolumn(
        name = "Applied",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"ResourcesApplied\")].status"
    ),
    printcolumn(
        name = "Paused",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Paused\")].status",
        priority = "10"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct ClusterResourceSetSpec {
    /// The Clusters (in the set's namespace) whose workload clusters get the resources; an
    /// empty selector would match nothing, so it is refused.
    #[schemars(extend("x-kubernetes-validations" = [
        {"rule": "self == oldSelf", "message": "spec.clusterSelector is immutable"},
        {"rule": "(has(self.matchLabels) && size(self.matchLabels) > 0) || (has(self.matchExpressions) && size(self.matchExpressions) > 0)",
         "message": "selector must not be empty"}
    ]))]
    pub cluster_selector: LabelSelector,
    /// The ConfigMaps and Secrets, applied in this order.
    #[schemars(length(min = 1, max = 100))]
    pub resources: Vec<ResourceRef>,
    /// `ApplyOnce` (each resource created once) or `Reconcile` (applied again whenever its
    /// contents change).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend(
        "default" = "ApplyOnce",
        "enum" = ["ApplyOnce", "Reconcile"],
        "x-kubernetes-validations" = [{"rule": "self == oldSelf", "message": "spec.strategy is immutable"}]
    ))]
    pub strategy: Option<String>,
}

/// A ConfigMap or Secret in the set's namespace.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
pub struct ResourceRef {
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    #[schemars(extend("enum" = ["Secret", "ConfigMap"]))]
    pub kind: String,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterResourceSetStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "infrasim_controller_runtime::schema::conditions")]
    pub conditions: Option<Vec<Condition>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `deprecated.v1beta1.conditions`, as upstream keeps them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "infrasim_controller_runtime::schema::preserve_unknown")]
    pub deprecated: Option<Value>,
}

/// Which sets were applied to one Cluster's workload cluster: named after the Cluster, owned
/// by every set it lists.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "addons.cluster.x-k8s.io",
    version = "v1beta2",
    kind = "ClusterResourceSetBinding",
    namespaced,
    category = "cluster-api",
    printcolumn(name = "Cluster", type_ = "string", json_path = ".spec.clusterName"),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct ClusterResourceSetBindingSpec {
    #[schemars(extend("x-kubernetes-validations" = [
        {"rule": "self == oldSelf", "message": "spec.clusterName is immutable"}
    ]))]
    pub cluster_name: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bindings: Vec<ResourceSetBinding>,
}

/// One set's resources in a Cluster's binding.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceSetBinding {
    pub cluster_resource_set_name: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<ResourceBinding>,
}

/// Whether one resource was applied, when, and the hash of what was applied.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceBinding {
    pub name: String,
    pub kind: String,
    pub applied: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hash: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_applied_time: Option<String>,
    /// Anything else a newer Cluster API writes.
    #[serde(flatten)]
    #[schemars(skip)]
    pub rest: BTreeMap<String, Value>,
}

impl ClusterResourceSet {
    /// Whether resources are applied again when they change (`Reconcile`).
    pub fn reconciles(&self) -> bool {
        self.spec.strategy.as_deref() == Some("Reconcile")
    }
}
