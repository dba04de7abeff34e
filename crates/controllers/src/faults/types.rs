//! `Fault` (`sim.infrasim.dev/v1alpha1`, namespaced): a misbehaviour put on simulated
//! workload clusters on demand, for tests and chaos runs. It names its clusters by the name
//! of a Cluster in its namespace or by a selector over the Clusters' labels; deleting it
//! clears the fault, and `duration` ends it by itself.
//!
//! The types a Fault can be are those implemented; each says in its documentation where a
//! client sees it. The schema refuses the others, so `kubectl explain fault.spec.type` is the
//! list of what works.

// Printer columns repeat `type_ = "string"` and the like inside one `#[kube(...)]`.
#![allow(clippy::duplicated_attributes)]

use infrasim_controller_runtime::conditions::Condition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub const GROUP: &str = "sim.infrasim.dev";

/// A fault on the workload clusters it selects.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "sim.infrasim.dev",
    version = "v1alpha1",
    kind = "Fault",
    namespaced,
    status = "FaultStatus",
    category = "infrasim",
    printcolumn(name = "Type", type_ = "string", json_path = ".spec.type"),
    printcolumn(name = "Cluster", type_ = "string", json_path = ".spec.clusterName"),
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(
        name = "Clusters",
        type_ = "integer",
        json_path = ".status.clusterCount"
    ),
    printcolumn(name = "Ends", type_ = "date", json_path = ".status.endTime"),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "has(self.clusterName) != has(self.clusterSelector)",
     "message": "exactly one of clusterName and clusterSelector must be set"},
    {"rule": "self.type != 'APILatency' || (has(self.params) && has(self.params.latency))",
     "message": "an APILatency fault needs params.latency"},
    {"rule": "self.type != 'NodeNotReady' || (has(self.params) && has(self.params.node))",
     "message": "a NodeNotReady fault needs params.node"},
    {"rule": "self.type != 'NodeDeleted' || (has(self.params) && has(self.params.node))",
     "message": "a NodeDeleted fault needs params.node"},
    {"rule": "self.type != 'EtcdMemberDown' || (has(self.params) && has(self.params.member))",
     "message": "an EtcdMemberDown fault needs params.member"},
    {"rule": "self.type != 'EtcdAlarm' || (has(self.params) && has(self.params.alarm))",
     "message": "an EtcdAlarm fault needs params.alarm"},
    {"rule": "self.type != 'MachineBootsLate' || (has(self.params) && has(self.params.delay))",
     "message": "a MachineBootsLate fault needs params.delay"},
    {"rule": "self.type != 'CertificateExpiring' || (has(self.params) && has(self.params.expiresIn))",
     "message": "a CertificateExpiring fault needs params.expiresIn"}
]))]
pub struct FaultSpec {
    /// The Cluster (in the Fault's namespace) whose workload cluster gets the fault.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_name: Option<String>,
    /// The Clusters (in the Fault's namespace) whose labels it matches; clusters that come
    /// to match later get the fault too, and those that stop matching lose it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_selector: Option<LabelSelector>,
    /// What goes wrong. `APILatency`: every request to the cluster's API server waits
    /// `params.latency` before it is served. `APIErrors`: a fraction (`params.fraction`) of
    /// its requests is refused with `params.code` (429 with a Retry-After of
    /// `params.retryAfterSeconds`, 500, 503 or 504), as an overloaded kube-apiserver
    /// refuses them. `NodeNotReady`: the kubelet of node `params.node` stops (no Lease
    /// renewal, no status, no pod started); 40 s later (kube-controller-manager's
    /// node-monitor-grace-period) the node is Ready `Unknown` and tainted
    /// `node.kubernetes.io/unreachable`, and when the fault ends it is Ready again.
    /// `NodeDeleted`: node `params.node`'s Node object (and Lease) is deleted and its kubelet
    /// falls silent, as when a cloud controller manager deletes the Node of a vanished
    /// machine; its pods are collected; when the fault ends the kubelet registers it again.
    /// `EtcdAlarm`: etcd alarm `params.alarm` raised on member `params.member` (every member
    /// when not given), as `etcdctl alarm list` shows it; under NOSPACE etcd refuses writes
    /// ("mvcc: database space exceeded"), under CORRUPT every request. `APIDown`: the
    /// cluster's endpoint refuses connections, as when all its API servers are down.
    /// `EtcdMemberDown`: the etcd of member `params.member` stops: it answers nothing (a
    /// port-forward to its pod is refused), leadership moves off it while a majority of the
    /// members is up; two Faults that bring a majority down leave etcd without a leader
    /// ("etcdserver: no leader") and the API server's writes time out.
    /// `MachineNeverBoots`: the machines whose boot starts while the fault is in force get
    /// their VM (a provider ID) but never a Node, so they stay `Provisioned` until
    /// something (a MachineHealthCheck's `nodeStartupTimeout`) replaces them; they never
    /// boot, even after the fault ends. `MachineBootsLate`: their Node registers
    /// `params.delay` later than it would. Both mark the infrastructure machine with the
    /// annotation `sim.infrasim.dev/boot` (`never`, or the time it boots at).
    /// `CertificateExpiring`: the serving certificate of the API server on control-plane node
    /// `params.node` (every control-plane node's when not given) is re-issued to expire
    /// `params.expiresIn` after the fault starts: a client port-forwarding to
    /// `kube-apiserver-<node>:6443` is shown it, KubeadmControlPlane reads it into the
    /// Machine's `status.certificatesExpiryDate`, and rolls the machine out when that is
    /// within its `rollout.before.certificatesExpiryDays`. The certificate the cluster was
    /// made with comes back when the fault ends.
    #[serde(rename = "type")]
    #[schemars(extend("enum" = ["APILatency", "APIErrors", "APIDown", "NodeNotReady", "NodeDeleted",
                                "EtcdAlarm", "EtcdMemberDown", "MachineNeverBoots",
                                "MachineBootsLate", "CertificateExpiring"]))]
    pub type_: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params: Option<FaultParams>,
    /// How long the fault lasts from when it was first applied (a Go duration: `90s`,
    /// `10m`); it lasts until the Fault is deleted when not given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("pattern" = r"^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$"))]
    pub duration: Option<String>,
}

/// What a fault's type reads.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FaultParams {
    /// `APILatency`: the wait added to each request (a Go duration: `250ms`, `2s`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("pattern" = r"^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$"))]
    pub latency: Option<String>,
    /// `APIErrors`: the share of requests refused, from `"0"` to `"1"` (default `"1"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("pattern" = r"^(0(\.[0-9]+)?|1(\.0+)?)$"))]
    pub fraction: Option<String>,
    /// `APIErrors`: the code they are refused with (default 500).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = [429, 500, 503, 504]))]
    pub code: Option<u16>,
    /// `APIErrors` with code 429: the seconds the answer tells a client to wait (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 3600))]
    pub retry_after_seconds: Option<u64>,
    /// `NodeNotReady`: the node (in the workload cluster) whose kubelet stops; `NodeDeleted`:
    /// the node deleted; `CertificateExpiring`: the control-plane node whose certificate
    /// expires (every one's when not given).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// `EtcdAlarm`: the alarm raised.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["NOSPACE", "CORRUPT"]))]
    pub alarm: Option<String>,
    /// `EtcdAlarm`: the member (a control-plane machine's name) it is raised on; every
    /// member when not given. `EtcdMemberDown`: the member down.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub member: Option<String>,
    /// `MachineBootsLate`: how much later the machines' Nodes register (a Go duration).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("pattern" = r"^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$"))]
    pub delay: Option<String>,
    /// `CertificateExpiring`: how long after the fault starts the certificate expires (a Go
    /// duration: `480h` for 20 days).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("pattern" = r"^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$"))]
    pub expires_in: Option<String>,
}

/// Where a fault stands.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FaultStatus {
    /// `Active` (in force on `clusters`), `Expired` (its duration is over; it stays so until
    /// deleted) or `Invalid` (the spec cannot be applied: see the `Active` condition).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// The workload clusters it is in force on, by Cluster name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub clusters: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_count: Option<i64>,
    /// When it was first applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<String>,
    /// When it ends by itself (`duration` after `startTime`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_time: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "infrasim_controller_runtime::schema::conditions")]
    pub conditions: Vec<Condition>,
}
