//! The in-memory provider's kinds, in both spellings: the seed's `InMemory*` at `v1alpha1`
//! and today's upstream `Dev*` at `v1beta2` with `spec.backend.inMemory`. Both carry what
//! v1beta2 and v1beta1 readers of the infrastructure contract look for (see the status
//! types); the CRDs carry the contract labels naming the served version.

// Printer columns repeat `type_ = "string"` and the like inside one `#[kube(...)]`.
#![allow(clippy::duplicated_attributes)]

use crate::capi::core::{ApiEndpoint, FailureDomain, MachineAddress, ObjectMetaTemplate};
use infrasim_controller_runtime::conditions::{Condition, V1Beta1Condition};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// How long one provisioning step of a machine takes: `startupDuration` (a Go duration such
/// as `10s` or `1m30s`) plus up to `startupJitter` (a fraction, as a string) of it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Provisioning {
    pub startup_duration: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub startup_jitter: Option<String>,
}

/// One step's timing (`vm`, `node`, `apiServer`, `etcd`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct StepBehaviour {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provisioning: Option<Provisioning>,
}

/// The timing of a machine's provisioning steps.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineBehaviour {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vm: Option<StepBehaviour>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<StepBehaviour>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_server: Option<StepBehaviour>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub etcd: Option<StepBehaviour>,
}

/// `status.initialization` of the v1beta2 contract.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct Initialization {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provisioned: Option<bool>,
}

/// The seed's `status.v1beta2`: v1beta2 conditions beside the v1beta1 ones.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct V1Beta2Status {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "infrasim_controller_runtime::schema::conditions")]
    pub conditions: Option<Vec<Condition>>,
}

/// The Dev kinds' `status.deprecated`: the v1beta1 conditions.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct DeprecatedStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub v1beta1: Option<V1Beta1Status>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct V1Beta1Status {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<V1Beta1Condition>>,
}

// ---------------------------------------------------------------------------------------
// The seed's spelling: InMemory* at v1alpha1.

/// The seed's infrastructure cluster.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1alpha1",
    kind = "InMemoryCluster",
    namespaced,
    status = "InMemoryClusterStatus",
    category = "cluster-api",
    label("cluster.x-k8s.io/v1beta1", "v1alpha1"),
    label("cluster.x-k8s.io/v1beta2", "v1alpha1"),
    label("cluster.x-k8s.io/provider", "infrastructure-in-memory"),
    printcolumn(
        name = "Cluster",
        type_ = "string",
        json_path = ".metadata.labels['cluster\\.x-k8s\\.io/cluster-name']",
        description = "Cluster"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "Time duration since creation of InMemoryCluster"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct InMemoryClusterSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_plane_endpoint: Option<ApiEndpoint>,
    /// Failure domains the cluster offers (beyond upstream, which offers none): reported in
    /// `status.failureDomains` for the control plane to spread machines over.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_domains: Option<Vec<FailureDomain>>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InMemoryClusterStatus {
    /// The v1beta1 contract's readiness.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready: Option<bool>,
    /// The v1beta2 contract's readiness.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initialization: Option<Initialization>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_domains: Option<Vec<FailureDomain>>,
    /// v1beta1 conditions, as the seed's API has them here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<V1Beta1Condition>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub v1beta2: Option<V1Beta2Status>,
}

/// The seed's infrastructure machine.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1alpha1",
    kind = "InMemoryMachine",
    namespaced,
    status = "InMemoryMachineStatus",
    category = "cluster-api",
    label("cluster.x-k8s.io/v1beta1", "v1alpha1"),
    label("cluster.x-k8s.io/v1beta2", "v1alpha1"),
    label("cluster.x-k8s.io/provider", "infrastructure-in-memory"),
    printcolumn(
        name = "Cluster",
        type_ = "string",
        json_path = ".metadata.labels['cluster\\.x-k8s\\.io/cluster-name']",
        description = "Cluster"
    ),
    printcolumn(
        name = "Machine",
        type_ = "string",
        json_path = ".metadata.ownerReferences[?(@.kind==\"Machine\")].name",
        description = "Machine object which owns with this InMemoryMachine"
    ),
    printcolumn(
        name = "ProviderID",
        type_ = "string",
        json_path = ".spec.providerID",
        description = "Provider ID"
    ),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.ready",
        description = "Machine ready status"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "Time duration since creation of InMemoryMachine"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct InMemoryMachineSpec {
    #[serde(
        default,
        rename = "providerID",
        skip_serializing_if = "Option::is_none"
    )]
    pub provider_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub behaviour: Option<MachineBehaviour>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InMemoryMachineStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initialization: Option<Initialization>,
    /// The node's addresses (upstream never sets them; Machines copy them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub addresses: Option<Vec<MachineAddress>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_domain: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<V1Beta1Condition>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub v1beta2: Option<V1Beta2Status>,
}

/// A template of the seed's infrastructure cluster (for ClusterClasses).
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1alpha1",
    kind = "InMemoryClusterTemplate",
    namespaced,
    category = "cluster-api",
    label("cluster.x-k8s.io/v1beta1", "v1alpha1"),
    label("cluster.x-k8s.io/v1beta2", "v1alpha1"),
    label("cluster.x-k8s.io/provider", "infrastructure-in-memory"),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "Time duration since creation of InMemoryClusterTemplate"
    )
)]
pub struct InMemoryClusterTemplateSpec {
    pub template: InMemoryClusterTemplateResource,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct InMemoryClusterTemplateResource {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<ObjectMetaTemplate>,
    #[serde(default)]
    pub spec: InMemoryClusterSpec,
}

/// A template of the seed's infrastructure machine (for MachineSets and control planes).
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1alpha1",
    kind = "InMemoryMachineTemplate",
    namespaced,
    category = "cluster-api",
    label("cluster.x-k8s.io/v1beta1", "v1alpha1"),
    label("cluster.x-k8s.io/v1beta2", "v1alpha1"),
    label("cluster.x-k8s.io/provider", "infrastructure-in-memory"),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "Time duration since creation of InMemoryMachineTemplate"
    )
)]
pub struct InMemoryMachineTemplateSpec {
    pub template: InMemoryMachineTemplateResource,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct InMemoryMachineTemplateResource {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<ObjectMetaTemplate>,
    #[serde(default)]
    pub spec: InMemoryMachineSpec,
}

// ---------------------------------------------------------------------------------------
// Today's upstream spelling: Dev* at v1beta2, with the in-memory backend.

/// Which backend a Dev object uses: only `inMemory` is simulated; `docker` is kept as
/// written so the controller can refuse it with a clear message.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DevClusterBackend {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_memory: Option<InMemoryClusterBackend>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "infrasim_controller_runtime::schema::preserve_unknown")]
    pub docker: Option<Value>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InMemoryClusterBackend {
    /// Failure domains the cluster offers (beyond upstream, whose in-memory backend has
    /// none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_domains: Option<Vec<FailureDomain>>,
}

/// Upstream's infrastructure cluster for development (in-memory backend).
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1beta2",
    kind = "DevCluster",
    namespaced,
    status = "DevClusterStatus",
    category = "cluster-api",
    label("cluster.x-k8s.io/v1beta1", "v1beta2"),
    label("cluster.x-k8s.io/v1beta2", "v1beta2"),
    label("cluster.x-k8s.io/provider", "infrastructure-in-memory"),
    printcolumn(
        name = "Cluster",
        type_ = "string",
        json_path = ".metadata.labels['cluster\\.x-k8s\\.io/cluster-name']",
        description = "Cluster"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "Time duration since creation of the DevCluster"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct DevClusterSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_plane_endpoint: Option<ApiEndpoint>,
    pub backend: DevClusterBackend,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DevClusterStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "infrasim_controller_runtime::schema::conditions")]
    pub conditions: Option<Vec<Condition>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initialization: Option<Initialization>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_domains: Option<Vec<FailureDomain>>,
    /// The v1beta1 contract's readiness (beyond upstream's v1beta2 API, for v1beta1 readers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deprecated: Option<DeprecatedStatus>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DevMachineBackend {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_memory: Option<MachineBehaviour>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "infrasim_controller_runtime::schema::preserve_unknown")]
    pub docker: Option<Value>,
}

/// Upstream's infrastructure machine for development (in-memory backend).
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1beta2",
    kind = "DevMachine",
    namespaced,
    status = "DevMachineStatus",
    category = "cluster-api",
    label("cluster.x-k8s.io/v1beta1", "v1beta2"),
    label("cluster.x-k8s.io/v1beta2", "v1beta2"),
    label("cluster.x-k8s.io/provider", "infrastructure-in-memory"),
    printcolumn(
        name = "Cluster",
        type_ = "string",
        json_path = ".metadata.labels['cluster\\.x-k8s\\.io/cluster-name']",
        description = "Cluster"
    ),
    printcolumn(
        name = "Provider ID",
        type_ = "string",
        json_path = ".spec.providerID",
        description = "Provider ID",
        priority = "10"
    ),
    printcolumn(
        name = "Failure domain",
        type_ = "string",
        json_path = ".status.failureDomain",
        description = "The failure domain where the DevMachine has been scheduled"
    ),
    printcolumn(
        name = "IP",
        type_ = "string",
        json_path = ".status.addresses[?(@.type==\"InternalIP\")].address",
        description = "IP of the Machine",
        priority = "10"
    ),
    printcolumn(
        name = "Paused",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Paused\")].status",
        description = "Reconciliation paused",
        priority = "10"
    ),
    printcolumn(
        name = "Provisioned",
        type_ = "string",
        json_path = ".status.initialization.provisioned",
        description = "DevMachine is provisioned"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "Time duration since creation of the DevMachine"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct DevMachineSpec {
    #[serde(
        default,
        rename = "providerID",
        skip_serializing_if = "Option::is_none"
    )]
    pub provider_id: Option<String>,
    pub backend: DevMachineBackend,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DevMachineStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "infrasim_controller_runtime::schema::conditions")]
    pub conditions: Option<Vec<Condition>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initialization: Option<Initialization>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub addresses: Option<Vec<MachineAddress>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_domain: Option<String>,
    /// The v1beta1 contract's readiness (beyond upstream's v1beta2 API).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deprecated: Option<DeprecatedStatus>,
}

/// A template of the Dev infrastructure cluster.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1beta2",
    kind = "DevClusterTemplate",
    namespaced,
    category = "cluster-api",
    label("cluster.x-k8s.io/v1beta1", "v1beta2"),
    label("cluster.x-k8s.io/v1beta2", "v1beta2"),
    label("cluster.x-k8s.io/provider", "infrastructure-in-memory"),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "Time duration since creation of the DevClusterTemplate"
    )
)]
pub struct DevClusterTemplateSpec {
    pub template: DevClusterTemplateResource,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct DevClusterTemplateResource {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<ObjectMetaTemplate>,
    pub spec: DevClusterSpec,
}

/// A template of the Dev infrastructure machine.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1beta2",
    kind = "DevMachineTemplate",
    namespaced,
    category = "cluster-api",
    label("cluster.x-k8s.io/v1beta1", "v1beta2"),
    label("cluster.x-k8s.io/v1beta2", "v1beta2"),
    label("cluster.x-k8s.io/provider", "infrastructure-in-memory"),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "Time duration since creation of the DevMachineTemplate"
    )
)]
pub struct DevMachineTemplateSpec {
    pub template: DevMachineTemplateResource,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct DevMachineTemplateResource {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<ObjectMetaTemplate>,
    pub spec: DevMachineSpec,
}
