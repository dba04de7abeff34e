//! `ClusterClass` (cluster.x-k8s.io/v1beta1): templates named by full object references
//! (`ref`), a worker class's templates under `template`, naming strategies, node timeouts as
//! Go durations, health checks as flat `machineHealthCheck`s, and a MachineDeployment class's
//! `strategy`. Patches and variables are kept as written, as the v1beta2 type keeps them.

use super::kubeadm::NamingStrategy;
use super::machine::ConditionsOnly;
use super::{Condition, ObjectReference};
use crate::capi::core::ObjectMetaTemplate;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "cluster.x-k8s.io",
    version = "v1beta1",
    kind = "ClusterClass",
    namespaced,
    status = "ClusterClassStatus",
    shortname = "cc",
    category = "cluster-api",
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
pub struct ClusterClassSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub infrastructure: Option<LocalObjectTemplate>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub infrastructure_naming_strategy: Option<NamingStrategy>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_plane: Option<ControlPlaneClass>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workers: Option<WorkersClass>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "infrasim_controller_runtime::schema::preserve_unknown_list")]
    pub variables: Option<Vec<Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "infrasim_controller_runtime::schema::preserve_unknown_list")]
    pub patches: Option<Vec<Value>>,
    /// availabilityGates, kubernetesVersions, upgrade (kept as written).
    #[serde(flatten)]
    #[schemars(skip)]
    pub rest: BTreeMap<String, Value>,
}

/// `{ref}`: a template named by a full object reference.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct LocalObjectTemplate {
    #[serde(default, rename = "ref", skip_serializing_if = "Option::is_none")]
    pub reference: Option<ObjectReference>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
pub struct ControlPlaneClass {
    #[serde(default, rename = "ref", skip_serializing_if = "Option::is_none")]
    pub reference: Option<ObjectReference>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<ObjectMetaTemplate>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine_infrastructure: Option<LocalObjectTemplate>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "infrasim_controller_runtime::schema::preserve_unknown")]
    pub machine_health_check: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub naming_strategy: Option<NamingStrategy>,
    /// node timeouts, readinessGates (kept as written).
    #[serde(flatten)]
    #[schemars(skip)]
    pub rest: BTreeMap<String, Value>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
pub struct WorkersClass {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine_deployments: Option<Vec<WorkerClass>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine_pools: Option<Vec<WorkerClass>>,
}

/// A MachineDeployment or MachinePool class: its templates under `template`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
pub struct WorkerClass {
    pub class: String,
    pub template: WorkerTemplates,
    /// machineHealthCheck, strategy, namingStrategy, node timeouts, … (kept as written).
    #[serde(flatten)]
    #[schemars(skip)]
    pub rest: BTreeMap<String, Value>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct WorkerTemplates {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<ObjectMetaTemplate>,
    pub bootstrap: LocalObjectTemplate,
    pub infrastructure: LocalObjectTemplate,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterClassStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "infrasim_controller_runtime::schema::preserve_unknown_list")]
    pub variables: Option<Vec<Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "super::conditions")]
    pub conditions: Option<Vec<Condition>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub v1beta2: Option<ConditionsOnly>,
}
