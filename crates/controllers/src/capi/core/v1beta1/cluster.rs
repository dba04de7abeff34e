//! `Cluster` (cluster.x-k8s.io/v1beta1): references carry a full apiVersion, the topology
//! names its class by `class`/`classNamespace`, readiness is two booleans, failure domains a
//! map, conditions the v1beta1 kind, and the v1beta2 conditions and counters sit under
//! `status.v1beta2`.

// Printer columns repeat `type_ = "string"` inside one `#[kube(...)]`.
#![allow(clippy::duplicated_attributes)]

use super::{ObjectReference, ReplicaCounters};
use crate::capi::core::ApiEndpoint;
use infrasim_controller_runtime::conditions::Condition as V1Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "cluster.x-k8s.io",
    version = "v1beta1",
    kind = "Cluster",
    namespaced,
    status = "ClusterStatus",
    shortname = "cl",
    category = "cluster-api",
    printcolumn(
        name = "ClusterClass",
        type_ = "string",
        json_path = ".spec.topology.class"
    ),
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    printcolumn(
        name = "Version",
        type_ = "string",
        json_path = ".spec.topology.version"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct ClusterSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_network: Option<ClusterNetwork>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_plane_endpoint: Option<ApiEndpoint>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_plane_ref: Option<ObjectReference>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub infrastructure_ref: Option<ObjectReference>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology: Option<Topology>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "infrasim_controller_runtime::schema::preserve_unknown_list")]
    pub availability_gates: Option<Vec<Value>>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterNetwork {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_server_port: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub services: Option<NetworkRanges>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pods: Option<NetworkRanges>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_domain: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NetworkRanges {
    pub cidr_blocks: Vec<String>,
}

/// A cluster built from a ClusterClass; its control plane and workers are kept as written.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Topology {
    pub class: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class_namespace: Option<String>,
    pub version: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollout_after: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "infrasim_controller_runtime::schema::preserve_unknown")]
    pub control_plane: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "infrasim_controller_runtime::schema::preserve_unknown")]
    pub workers: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "infrasim_controller_runtime::schema::preserve_unknown_list")]
    pub variables: Option<Vec<Value>>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_domains: Option<BTreeMap<String, FailureDomainSpec>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    #[serde(default)]
    pub infrastructure_ready: bool,
    #[serde(default)]
    pub control_plane_ready: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "super::conditions")]
    pub conditions: Option<Vec<super::Condition>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub v1beta2: Option<V1Beta2Status>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FailureDomainSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_plane: Option<bool>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub attributes: BTreeMap<String, String>,
}

/// What v1beta2 reports, as a v1beta1 object carries it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct V1Beta2Status {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "infrasim_controller_runtime::schema::conditions")]
    pub conditions: Option<Vec<V1Condition>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_plane: Option<ReplicaCounters>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workers: Option<ReplicaCounters>,
}
