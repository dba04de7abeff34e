//! `MachineHealthCheck` (cluster.x-k8s.io/v1beta2): which Machines a cluster's health checks
//! watch, and how many of them are healthy.

// Printer columns repeat `type_ = "string"` and the like inside one `#[kube(...)]`.
#![allow(clippy::duplicated_attributes)]

use infrasim_controller_runtime::conditions::Condition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "cluster.x-k8s.io",
    version = "v1beta2",
    kind = "MachineHealthCheck",
    namespaced,
    status = "MachineHealthCheckStatus",
    shortname = "mhc",
    shortname = "mhcs",
    category = "cluster-api",
    printcolumn(name = "Cluster", type_ = "string", json_path = ".spec.clusterName"),
    printcolumn(
        name = "Replicas",
        type_ = "integer",
        json_path = ".status.expectedMachines"
    ),
    printcolumn(
        name = "Healthy",
        type_ = "integer",
        json_path = ".status.currentHealthy"
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
pub struct MachineHealthCheckSpec {
    pub cluster_name: String,
    pub selector: LabelSelector,
    /// nodeStartupTimeoutSeconds, unhealthyNodeConditions, unhealthyMachineConditions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "infrasim_controller_runtime::schema::preserve_unknown")]
    pub checks: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "infrasim_controller_runtime::schema::preserve_unknown")]
    pub remediation: Option<Value>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineHealthCheckStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_machines: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_healthy: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remediations_allowed: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub targets: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "infrasim_controller_runtime::schema::conditions")]
    pub conditions: Option<Vec<Condition>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// The v1beta1 conditions, as upstream keeps them while it serves v1beta1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "infrasim_controller_runtime::schema::preserve_unknown")]
    pub deprecated: Option<Value>,
}
