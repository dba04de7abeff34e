//! `ClusterResourceSet` and `ClusterResourceSetBinding` (addons.cluster.x-k8s.io/v1beta1):
//! the same spec as v1beta2; a set's status keeps v1beta1 conditions at the top and the
//! v1beta2 ones under `status.v1beta2`. Bindings have no status.

use super::machine::ConditionsOnly;
use super::Condition;
use crate::capi::core::{ClusterResourceSetBindingSpec, ClusterResourceSetSpec as HubSpec};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "addons.cluster.x-k8s.io",
    version = "v1beta1",
    kind = "ClusterResourceSet",
    namespaced,
    status = "ClusterResourceSetStatus",
    category = "cluster-api",
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
pub struct ClusterResourceSetSpec {
    #[serde(flatten)]
    pub spec: HubSpec,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterResourceSetStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "super::conditions")]
    pub conditions: Option<Vec<Condition>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub v1beta2: Option<ConditionsOnly>,
}

#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "addons.cluster.x-k8s.io",
    version = "v1beta1",
    kind = "ClusterResourceSetBinding",
    namespaced,
    category = "cluster-api",
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
pub struct ClusterResourceSetBindingSpecV1Beta1 {
    #[serde(flatten)]
    pub spec: ClusterResourceSetBindingSpec,
}
