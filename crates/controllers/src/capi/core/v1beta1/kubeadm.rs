//! The kubeadm providers' kinds as `v1beta1` shaped them: `KubeadmControlPlane` (a flat
//! machine template with a full infrastructure reference and Go-duration timeouts,
//! `rolloutStrategy` / `remediationStrategy`, the old counters and `initialized` / `ready`),
//! its template, and `KubeadmConfig` (`ready` for `initialization.dataSecretCreated`) and its
//! template. A `kubeadmConfigSpec` is kept as written, as the v1beta2 types keep it.

// Printer columns repeat `type_ = "string"` and the like inside one `#[kube(...)]`.
#![allow(clippy::duplicated_attributes)]

use super::{Condition, ObjectReference};
use crate::capi::core::ObjectMetaTemplate;
use infrasim_controller_runtime::conditions::Condition as V1Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "controlplane.cluster.x-k8s.io",
    version = "v1beta1",
    kind = "KubeadmControlPlane",
    namespaced,
    status = "KubeadmControlPlaneStatus",
    shortname = "kcp",
    category = "cluster-api",
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
        name = "Initialized",
        type_ = "boolean",
        json_path = ".status.initialized"
    ),
    printcolumn(
        name = "API Server Available",
        type_ = "boolean",
        json_path = ".status.ready"
    ),
    printcolumn(
        name = "Desired",
        type_ = "integer",
        json_path = ".spec.replicas",
        priority = "10"
    ),
    printcolumn(name = "Replicas", type_ = "integer", json_path = ".status.replicas"),
    printcolumn(name = "Ready", type_ = "integer", json_path = ".status.readyReplicas"),
    printcolumn(
        name = "Updated",
        type_ = "integer",
        json_path = ".status.updatedReplicas"
    ),
    printcolumn(
        name = "Unavailable",
        type_ = "integer",
        json_path = ".status.unavailableReplicas"
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
    pub machine_template: MachineTemplate,
    #[serde(default)]
    #[schemars(schema_with = "infrasim_controller_runtime::schema::preserve_unknown")]
    pub kubeadm_config_spec: Value,
    #[serde(flatten)]
    pub rollout: Rollout,
}

/// What a control plane and its template's resource spec share beyond the kubeadm spec.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Rollout {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollout_before: Option<RolloutBefore>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollout_after: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "infrasim_controller_runtime::schema::preserve_unknown")]
    pub rollout_strategy: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remediation_strategy: Option<RemediationStrategy>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine_naming_strategy: Option<NamingStrategy>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RolloutBefore {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub certificates_expiry_days: Option<i32>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RemediationStrategy {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_retry: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_period: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_healthy_period: Option<String>,
}

/// `{template}` naming the objects made.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct NamingStrategy {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<String>,
}

/// The control plane's Machines: metadata, their infrastructure, readiness gates, taints
/// and node timeouts, side by side.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineTemplate {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<ObjectMetaTemplate>,
    pub infrastructure_ref: ObjectReference,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "infrasim_controller_runtime::schema::preserve_unknown_list")]
    pub readiness_gates: Option<Vec<Value>>,
    #[serde(flatten)]
    pub node: NodeTimeouts,
}

/// Node timeouts and taints, as a control plane's template and its Machines give them.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeTimeouts {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_drain_timeout: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_volume_detach_timeout: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_deletion_timeout: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "infrasim_controller_runtime::schema::preserve_unknown_list")]
    pub taints: Option<Vec<Value>>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KubeadmControlPlaneStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<String>,
    #[serde(default)]
    pub replicas: i32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    #[serde(default)]
    pub updated_replicas: i32,
    #[serde(default)]
    pub ready_replicas: i32,
    #[serde(default)]
    pub unavailable_replicas: i32,
    #[serde(default)]
    pub initialized: bool,
    #[serde(default)]
    pub ready: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "super::conditions")]
    pub conditions: Option<Vec<Condition>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "infrasim_controller_runtime::schema::preserve_unknown")]
    pub last_remediation: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "infrasim_controller_runtime::schema::preserve_unknown_list")]
    pub versions: Option<Vec<Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub v1beta2: Option<ControlPlaneV1Beta2Status>,
}

/// `status.v1beta2` of a control plane: the conditions and counters of v1beta2.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ControlPlaneV1Beta2Status {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "infrasim_controller_runtime::schema::conditions")]
    pub conditions: Option<Vec<V1Condition>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_replicas: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub available_replicas: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub up_to_date_replicas: Option<i32>,
}

#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "controlplane.cluster.x-k8s.io",
    version = "v1beta1",
    kind = "KubeadmControlPlaneTemplate",
    namespaced,
    category = "cluster-api",
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
pub struct KubeadmControlPlaneTemplateSpec {
    pub template: ControlPlaneTemplateResource,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct ControlPlaneTemplateResource {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<ObjectMetaTemplate>,
    pub spec: ControlPlaneTemplateResourceSpec,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ControlPlaneTemplateResourceSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine_template: Option<TemplateMachineTemplate>,
    #[serde(default)]
    #[schemars(schema_with = "infrasim_controller_runtime::schema::preserve_unknown")]
    pub kubeadm_config_spec: Value,
    #[serde(flatten)]
    pub rollout: Rollout,
}

/// A control plane template's Machines: metadata, taints and node timeouts.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct TemplateMachineTemplate {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<ObjectMetaTemplate>,
    #[serde(flatten)]
    pub node: NodeTimeouts,
}

#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "bootstrap.cluster.x-k8s.io",
    version = "v1beta1",
    kind = "KubeadmConfig",
    namespaced,
    status = "KubeadmConfigStatus",
    category = "cluster-api",
    printcolumn(
        name = "Cluster",
        type_ = "string",
        json_path = ".metadata.labels['cluster\\.x-k8s\\.io/cluster-name']"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
pub struct KubeadmConfigSpec {
    /// clusterConfiguration, initConfiguration, joinConfiguration, files, … (as written).
    #[serde(flatten)]
    #[schemars(skip)]
    pub fields: std::collections::BTreeMap<String, Value>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KubeadmConfigStatus {
    #[serde(default)]
    pub ready: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_secret_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "super::conditions")]
    pub conditions: Option<Vec<Condition>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub v1beta2: Option<super::machine::ConditionsOnly>,
}

#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "bootstrap.cluster.x-k8s.io",
    version = "v1beta1",
    kind = "KubeadmConfigTemplate",
    namespaced,
    category = "cluster-api",
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
