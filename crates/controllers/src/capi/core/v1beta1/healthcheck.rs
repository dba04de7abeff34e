//! `MachineHealthCheck` (cluster.x-k8s.io/v1beta1): checks and remediation as flat fields
//! with Go durations, where v1beta2 groups them under `checks` and `remediation`.

// Printer columns repeat `type_ = "string"` inside one `#[kube(...)]`.
#![allow(clippy::duplicated_attributes)]

use super::{Condition, ObjectReference};
use crate::capi::core::v1beta1::machine::ConditionsOnly;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "cluster.x-k8s.io",
    version = "v1beta1",
    kind = "MachineHealthCheck",
    namespaced,
    status = "MachineHealthCheckStatus",
    shortname = "mhc",
    shortname = "mhcs",
    category = "cluster-api",
    printcolumn(name = "Cluster", type_ = "string", json_path = ".spec.clusterName"),
    printcolumn(
        name = "ExpectedMachines",
        type_ = "integer",
        json_path = ".status.expectedMachines"
    ),
    printcolumn(
        name = "MaxUnhealthy",
        type_ = "string",
        json_path = ".spec.maxUnhealthy"
    ),
    printcolumn(
        name = "CurrentHealthy",
        type_ = "integer",
        json_path = ".status.currentHealthy"
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
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "infrasim_controller_runtime::schema::preserve_unknown_list")]
    pub unhealthy_conditions: Option<Vec<Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "infrasim_controller_runtime::schema::preserve_unknown_list")]
    pub unhealthy_machine_conditions: Option<Vec<Value>>,
    /// An absolute number or a percentage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_unhealthy: Option<k8s_openapi::apimachinery::pkg::util::intstr::IntOrString>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unhealthy_range: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_startup_timeout: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remediation_template: Option<ObjectReference>,
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
    pub observed_generation: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub targets: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "super::conditions")]
    pub conditions: Option<Vec<Condition>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub v1beta2: Option<ConditionsOnly>,
}
