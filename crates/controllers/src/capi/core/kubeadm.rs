//! Cluster API's kubeadm providers (v1beta2): `KubeadmControlPlane` and its template
//! (controlplane.cluster.x-k8s.io), `KubeadmConfig` and its template
//! (bootstrap.cluster.x-k8s.io). A `kubeadmConfigSpec` is carried as written: nothing runs
//! kubeadm, the workload cluster is simulated.

// Printer columns repeat `type_ = "string"` and the like inside one `#[kube(...)]`.
#![allow(clippy::duplicated_attributes)]

use super::machineset::Rollout;
use super::shared::{ContractRef, ObjectMetaTemplate};
use infrasim_controller_runtime::conditions::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "controlplane.cluster.x-k8s.io",
    version = "v1beta2",
    kind = "KubeadmControlPlane",
    namespaced,
    status = "KubeadmControlPlaneStatus",
    shortname = "kcp",
    category = "cluster-api",
    label("cluster.x-k8s.io/v1beta2", "v1beta2"),
    scale(
        spec_replicas_path = ".spec.replicas",
        status_replicas_path = ".status.replicas",
        label_selector_path = ".status.selector"
    ),
    printcolumn(
        name = "Cluster",
        type_ = "string",
        json_path = ".metadata.labels['cluster\\.x-k8s\\.io/cluster-name']"
    ),
    printcolumn(
        name = "Available",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Available\")].status"
    ),
    printcolumn(name = "Desired", type_ = "integer", json_path = ".spec.replicas"),
    printcolumn(name = "Current", type_ = "integer", json_path = ".status.replicas"),
    printcolumn(name = "Ready", type_ = "integer", json_path = ".status.readyReplicas"),
    printcolumn(
        name = "Available",
        type_ = "integer",
        json_path = ".status.availableReplicas"
    ),
    printcolumn(
        name = "Up-to-date",
        type_ = "integer",
        json_path = ".status.upToDateReplicas"
    ),
    printcolumn(
        name = "Paused",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Paused\")].status",
        priority = "10"
    ),
    printcolumn(
        name = "Initialized",
        type_ = "boolean",
        json_path = ".status.initialization.controlPlaneInitialized"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    printcolumn(name = "Version", type_ = "string", json_path = ".spec.version")
)]
#[serde(rename_all = "camelCase")]
pub struct KubeadmControlPlaneSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    pub version: String,
    pub machine_template: ControlPlaneMachineTemplate,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "infrasim_controller_runtime::schema::preserve_unknown")]
    pub kubeadm_config_spec: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollout: Option<Rollout>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "infrasim_controller_runtime::schema::preserve_unknown")]
    pub remediation: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "infrasim_controller_runtime::schema::preserve_unknown")]
    pub machine_naming: Option<Value>,
}

/// The control plane's Machines: their metadata, and the infrastructure template they are
/// made from.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct ControlPlaneMachineTemplate {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<ObjectMetaTemplate>,
    pub spec: ControlPlaneMachineSpec,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
pub struct ControlPlaneMachineSpec {
    pub infrastructure_ref: ContractRef,
    /// deletion, readinessGates, taints (kept as written).
    #[serde(flatten)]
    #[schemars(skip)]
    pub rest: BTreeMap<String, Value>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KubeadmControlPlaneStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_replicas: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub available_replicas: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub up_to_date_replicas: Option<i32>,
    /// `cluster.x-k8s.io/cluster-name=<cluster>,cluster.x-k8s.io/control-plane`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<String>,
    /// The lowest version a machine runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub versions: Option<Vec<VersionCount>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initialization: Option<ControlPlaneInitialization>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "infrasim_controller_runtime::schema::conditions")]
    pub conditions: Option<Vec<Condition>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "infrasim_controller_runtime::schema::preserve_unknown")]
    pub deprecated: Option<Value>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct VersionCount {
    pub version: String,
    pub replicas: i32,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ControlPlaneInitialization {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_plane_initialized: Option<bool>,
}

#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "controlplane.cluster.x-k8s.io",
    version = "v1beta2",
    kind = "KubeadmControlPlaneTemplate",
    namespaced,
    category = "cluster-api",
    label("cluster.x-k8s.io/v1beta2", "v1beta2"),
    printcolumn(
        name = "ClusterClass",
        type_ = "string",
        json_path = ".metadata.ownerReferences[?(@.kind==\"ClusterClass\")].name"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
pub struct KubeadmControlPlaneTemplateSpec {
    pub template: KubeadmControlPlaneTemplateResource,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct KubeadmControlPlaneTemplateResource {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<ObjectMetaTemplate>,
    /// kubeadmConfigSpec, machineTemplate, rollout, … (the topology adds replicas, version
    /// and the machines' infrastructure).
    #[serde(default)]
    #[schemars(schema_with = "infrasim_controller_runtime::schema::preserve_unknown")]
    pub spec: Value,
}

#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "bootstrap.cluster.x-k8s.io",
    version = "v1beta2",
    kind = "KubeadmConfig",
    namespaced,
    status = "KubeadmConfigStatus",
    category = "cluster-api",
    label("cluster.x-k8s.io/v1beta2", "v1beta2"),
    printcolumn(
        name = "Cluster",
        type_ = "string",
        json_path = ".metadata.labels['cluster\\.x-k8s\\.io/cluster-name']"
    ),
    printcolumn(
        name = "Paused",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Paused\")].status",
        priority = "10"
    ),
    printcolumn(
        name = "Data secret created",
        type_ = "string",
        json_path = ".status.initialization.dataSecretCreated"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
pub struct KubeadmConfigSpec {
    /// clusterConfiguration, initConfiguration, joinConfiguration, files, … (as written).
    #[serde(flatten)]
    #[schemars(skip)]
    pub fields: BTreeMap<String, Value>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KubeadmConfigStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_secret_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initialization: Option<BootstrapInitialization>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "infrasim_controller_runtime::schema::conditions")]
    pub conditions: Option<Vec<Condition>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "infrasim_controller_runtime::schema::preserve_unknown")]
    pub deprecated: Option<Value>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BootstrapInitialization {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_secret_created: Option<bool>,
}

#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "bootstrap.cluster.x-k8s.io",
    version = "v1beta2",
    kind = "KubeadmConfigTemplate",
    namespaced,
    category = "cluster-api",
    label("cluster.x-k8s.io/v1beta2", "v1beta2"),
    printcolumn(
        name = "ClusterClass",
        type_ = "string",
        json_path = ".metadata.ownerReferences[?(@.kind==\"ClusterClass\")].name"
    ),
    printcolumn(
        name = "Cluster",
        type_ = "string",
        json_path = ".metadata.ownerReferences[?(@.kind==\"Cluster\")].name"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
pub struct KubeadmConfigTemplateSpec {
    pub template: KubeadmConfigTemplateResource,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct KubeadmConfigTemplateResource {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<ObjectMetaTemplate>,
    #[serde(default)]
    #[schemars(schema_with = "infrasim_controller_runtime::schema::preserve_unknown")]
    pub spec: Value,
}
