//! `ClusterClass` (cluster.x-k8s.io/v1beta2): the templates a topology Cluster is built from.
//! The stand-in applies its inline patches with its variables (see the core stand-in's
//! `blueprint`); external patches need Runtime Extensions and are refused.

// Printer columns repeat `type_ = "string"` and the like inside one `#[kube(...)]`.
#![allow(clippy::duplicated_attributes)]

use super::shared::{ObjectMetaTemplate, TemplateRef};
use infrasim_controller_runtime::conditions::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "cluster.x-k8s.io",
    version = "v1beta2",
    kind = "ClusterClass",
    namespaced,
    status = "ClusterClassStatus",
    shortname = "cc",
    category = "cluster-api",
    printcolumn(
        name = "Paused",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Paused\")].status",
        priority = "10"
    ),
    printcolumn(
        name = "Variables Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"VariablesReady\")].status"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
pub struct ClusterClassSpec {
    pub infrastructure: InfrastructureClass,
    pub control_plane: ControlPlaneClass,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workers: Option<WorkersClass>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "infrasim_controller_runtime::schema::preserve_unknown_list")]
    pub variables: Option<Vec<Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "infrasim_controller_runtime::schema::preserve_unknown_list")]
    pub patches: Option<Vec<Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubernetes_versions: Option<Vec<String>>,
    /// availabilityGates, upgrade, … (kept as written).
    #[serde(flatten)]
    #[schemars(skip)]
    pub rest: BTreeMap<String, Value>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
pub struct InfrastructureClass {
    pub template_ref: TemplateRef,
    #[serde(flatten)]
    #[schemars(skip)]
    pub rest: BTreeMap<String, Value>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
pub struct ControlPlaneClass {
    pub template_ref: TemplateRef,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine_infrastructure: Option<TemplateRefHolder>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<ObjectMetaTemplate>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "infrasim_controller_runtime::schema::preserve_unknown")]
    pub health_check: Option<Value>,
    /// naming, deletion, readinessGates, taints (kept as written).
    #[serde(flatten)]
    #[schemars(skip)]
    pub rest: BTreeMap<String, Value>,
}

/// `{templateRef}`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TemplateRefHolder {
    pub template_ref: TemplateRef,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
pub struct WorkersClass {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub machine_deployments: Vec<MachineDeploymentClass>,
    #[serde(flatten)]
    #[schemars(skip)]
    pub rest: BTreeMap<String, Value>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
pub struct MachineDeploymentClass {
    pub class: String,
    pub bootstrap: TemplateRefHolder,
    pub infrastructure: TemplateRefHolder,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<ObjectMetaTemplate>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "infrasim_controller_runtime::schema::preserve_unknown")]
    pub health_check: Option<Value>,
    #[serde(flatten)]
    #[schemars(skip)]
    pub rest: BTreeMap<String, Value>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterClassStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "infrasim_controller_runtime::schema::conditions")]
    pub conditions: Option<Vec<Condition>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "infrasim_controller_runtime::schema::preserve_unknown_list")]
    pub variables: Option<Vec<Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `v1beta1.conditions`: the conditions as Cluster API's v1beta1 names them
    /// (`VariablesReconciled`), which a v1beta1 reader sees as its `conditions`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "infrasim_controller_runtime::schema::preserve_unknown")]
    pub deprecated: Option<Value>,
}
