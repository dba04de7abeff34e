//! Cluster API's core and kubeadm providers' kinds as `v1beta1` shaped them, served beside `v1beta2` so that Cluster
//! API YAML and clients of either version work. The controllers never read these types: they
//! give each kind's CRD its `v1beta1` schema and printer columns, and objects are converted
//! between the versions on the way in and out (see `capi::conversion`).

mod addons;
mod cluster;
mod clusterclass;
mod healthcheck;
mod ipam;
mod kubeadm;
mod machine;

pub use addons::{ClusterResourceSet, ClusterResourceSetBinding};
pub use cluster::Cluster;
pub use clusterclass::ClusterClass;
pub use healthcheck::MachineHealthCheck;
pub use ipam::{IPAddress, IPAddressClaim};
pub use kubeadm::{
    KubeadmConfig, KubeadmConfigTemplate, KubeadmControlPlane, KubeadmControlPlaneTemplate,
};
pub use machine::{ConditionsOnly, Machine, MachineDeployment, MachineSet};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A full object reference (`corev1.ObjectReference`), as v1beta1 refers to providers' objects.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ObjectReference {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field_path: Option<String>,
}

/// A v1beta1 condition: `metav1.Condition` without `observedGeneration`, with a `severity`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    #[serde(rename = "type")]
    pub type_: String,
    pub status: String,
    /// `Error`, `Warning` or `Info`, for a condition that is not True.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub severity: Option<String>,
    pub last_transition_time: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// Replica counters a v1beta1 object keeps under `status.v1beta2`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReplicaCounters {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub desired_replicas: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub up_to_date_replicas: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_replicas: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub available_replicas: Option<i32>,
}

/// A list of v1beta1 conditions, merged by `type`.
pub(crate) fn conditions(gen: &mut schemars::SchemaGenerator) -> schemars::Schema {
    let item = gen.subschema_for::<Condition>();
    schemars::json_schema!({"type": "array", "items": item})
}
