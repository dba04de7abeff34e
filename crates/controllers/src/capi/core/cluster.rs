//! `Cluster` (cluster.x-k8s.io/v1beta2): the fields the in-memory provider and the core
//! stand-in read and write; the rest of an upstream Cluster is kept as it is.

// Printer columns repeat `type_ = "string"` and the like inside one `#[kube(...)]`.
#![allow(clippy::duplicated_attributes)]

use super::shared::{ApiEndpoint, ContractRef, FailureDomain};
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
    kind = "Cluster",
    namespaced,
    status = "ClusterStatus",
    shortname = "cl",
    category = "cluster-api",
    printcolumn(
        name = "ClusterClass",
        type_ = "string",
        json_path = ".spec.topology.classRef.name"
    ),
    printcolumn(
        name = "Available",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Available\")].status"
    ),
    printcolumn(
        name = "CP Desired",
        type_ = "integer",
        json_path = ".status.controlPlane.desiredReplicas"
    ),
    printcolumn(
        name = "CP Current",
        type_ = "integer",
        json_path = ".status.controlPlane.replicas",
        priority = "10"
    ),
    printcolumn(
        name = "CP Ready",
        type_ = "integer",
        json_path = ".status.controlPlane.readyReplicas",
        priority = "10"
    ),
    printcolumn(
        name = "CP Available",
        type_ = "integer",
        json_path = ".status.controlPlane.availableReplicas"
    ),
    printcolumn(
        name = "CP Up-to-date",
        type_ = "integer",
        json_path = ".status.controlPlane.upToDateReplicas"
    ),
    printcolumn(
        name = "W Desired",
        type_ = "integer",
        json_path = ".status.workers.desiredReplicas"
    ),
    printcolumn(
        name = "W Current",
        type_ = "integer",
        json_path = ".status.workers.replicas",
        priority = "10"
    ),
    printcolumn(
        name = "W Ready",
        type_ = "integer",
        json_path = ".status.workers.readyReplicas",
        priority = "10"
    ),
    printcolumn(
        name = "W Available",
        type_ = "integer",
        json_path = ".status.workers.availableReplicas"
    ),
    printcolumn(
        name = "W Up-to-date",
        type_ = "integer",
        json_path = ".status.workers.upToDateReplicas"
    ),
    printcolumn(
        name = "Paused",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Paused\")].status",
        priority = "10"
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
    pub control_plane_endpoint: Option<ApiEndpoint>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_plane_ref: Option<ContractRef>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub infrastructure_ref: Option<ContractRef>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "infrasim_controller_runtime::schema::preserve_unknown")]
    pub cluster_network: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology: Option<Topology>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "infrasim_controller_runtime::schema::preserve_unknown_list")]
    pub availability_gates: Option<Vec<Value>>,
}

/// A cluster built from a ClusterClass.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Topology {
    pub class_ref: ClassRef,
    pub version: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_plane: Option<ControlPlaneTopology>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workers: Option<WorkersTopology>,
    /// Values for the class's variables, which its patches read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "infrasim_controller_runtime::schema::preserve_unknown_list")]
    pub variables: Option<Vec<Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "infrasim_controller_runtime::schema::preserve_unknown")]
    pub rollout: Option<Value>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct ClassRef {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

/// The control plane of a topology; fields beyond `replicas` and `metadata` are kept.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
pub struct ControlPlaneTopology {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<super::shared::ObjectMetaTemplate>,
    #[serde(flatten)]
    #[schemars(skip)]
    pub rest: BTreeMap<String, Value>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
pub struct WorkersTopology {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub machine_deployments: Vec<MachineDeploymentTopology>,
    #[serde(flatten)]
    #[schemars(skip)]
    pub rest: BTreeMap<String, Value>,
}

/// One MachineDeployment of a topology.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
pub struct MachineDeploymentTopology {
    pub class: String,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_domain: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<super::shared::ObjectMetaTemplate>,
    #[serde(flatten)]
    #[schemars(skip)]
    pub rest: BTreeMap<String, Value>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterStatus {
    /// `Pending`, `Provisioning`, `Provisioned`, `Deleting`, `Failed` or `Unknown`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initialization: Option<ClusterInitialization>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_plane: Option<ReplicaCounts>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workers: Option<ReplicaCounts>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_domains: Option<Vec<FailureDomain>>,
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
pub struct ClusterInitialization {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub infrastructure_provisioned: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_plane_initialized: Option<bool>,
}

/// Replica counts of the control plane or the workers.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReplicaCounts {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub desired_replicas: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_replicas: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub available_replicas: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub up_to_date_replicas: Option<i32>,
}

impl Cluster {
    /// Whether the cluster's infrastructure is provisioned, as either contract says it.
    pub fn infrastructure_provisioned(&self) -> bool {
        self.status
            .as_ref()
            .and_then(|s| s.initialization.as_ref())
            .and_then(|i| i.infrastructure_provisioned)
            .unwrap_or(false)
    }

    /// Whether the control plane is initialized (the flag, or the condition).
    pub fn control_plane_initialized(&self) -> bool {
        let status = self.status.as_ref();
        status
            .and_then(|s| s.initialization.as_ref())
            .and_then(|i| i.control_plane_initialized)
            .unwrap_or(false)
            || status
                .and_then(|s| s.conditions.as_deref())
                .is_some_and(|c| {
                    infrasim_controller_runtime::conditions::is_true(c, "ControlPlaneInitialized")
                })
    }

    pub fn paused(&self) -> bool {
        self.spec.paused.unwrap_or(false)
    }
}
