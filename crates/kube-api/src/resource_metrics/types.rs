//! The kinds of `metrics.k8s.io/v1beta1` (k8s.io/metrics' NodeMetrics and PodMetrics), which
//! k8s-openapi does not carry because kube-apiserver does not serve them itself: metrics-server
//! does, behind an APIService. Here they give the registry its discovery entries and the
//! OpenAPI schema `kubectl explain` reads; the objects themselves are written as JSON.

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::{ClusterResourceScope, NamespaceResourceScope, Resource};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The group version both kinds are served in.
pub const API_VERSION: &str = "metrics.k8s.io/v1beta1";

/// A node's resource usage: what its kubelet reported over `window`, ending at `timestamp`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeMetrics {
    #[serde(default)]
    pub metadata: ObjectMeta,
    pub timestamp: Option<Time>,
    /// A Go duration (`15s`).
    pub window: Option<String>,
    #[serde(default)]
    pub usage: BTreeMap<String, Quantity>,
}

/// One container's usage within a [`PodMetrics`].
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ContainerMetrics {
    pub name: String,
    #[serde(default)]
    pub usage: BTreeMap<String, Quantity>,
}

/// A pod's resource usage, per container.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodMetrics {
    #[serde(default)]
    pub metadata: ObjectMeta,
    pub timestamp: Option<Time>,
    pub window: Option<String>,
    #[serde(default)]
    pub containers: Vec<ContainerMetrics>,
}

impl Resource for NodeMetrics {
    const API_VERSION: &'static str = API_VERSION;
    const GROUP: &'static str = "metrics.k8s.io";
    const KIND: &'static str = "NodeMetrics";
    const VERSION: &'static str = "v1beta1";
    const URL_PATH_SEGMENT: &'static str = "nodes";
    type Scope = ClusterResourceScope;
}

impl Resource for PodMetrics {
    const API_VERSION: &'static str = API_VERSION;
    const GROUP: &'static str = "metrics.k8s.io";
    const KIND: &'static str = "PodMetrics";
    const VERSION: &'static str = "v1beta1";
    const URL_PATH_SEGMENT: &'static str = "pods";
    type Scope = NamespaceResourceScope;
}
