//! The stand-in's cluster cache for Nodes, as Cluster API's controllers have one: a Node of a
//! workload cluster this process hosts is read from that cluster's store, and a change of a
//! Node's conditions (or a Node coming or going) wakes whoever follows the cluster.
//!
//! Why not a watch through the cluster's endpoint, as upstream's cache holds: both ends of
//! that connection live in this process, so ten thousand clusters would hold twenty thousand
//! more file descriptors and a TLS session each, which is what stopped earlier 10,000-cluster
//! runs. What the cache reads is what the endpoint serves (the same store). A cluster hosted
//! elsewhere is read through its kubeconfig instead (see [`NodeCache::reader`]).

use super::workload::{WorkloadClients, WorkloadError};
use infrasim_cloud::Cloud;
use infrasim_kube_api::values::At;
use infrasim_store::{Event, EventType, Group, ObjectKey, ReadAt, WatchError};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, ListParams};
use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use tokio::sync::mpsc;

/// A Node of a followed cluster changed in a way health checks care about.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeChange {
    /// The Cluster API Cluster's namespace and name.
    pub namespace: String,
    pub cluster: String,
    /// The Node's name; empty when changes may have been missed (every Node may have changed).
    pub node: String,
    /// The Node's `spec.providerID` (empty without one): a Machine waiting for its Node has
    /// no `nodeRef` yet and is found by this, as upstream finds it.
    pub provider_id: String,
}

/// Followed clusters and who hears of their Nodes' changes. Cheap to share behind an `Arc`.
pub struct NodeCache {
    cloud: Arc<Cloud>,
    followed: Arc<Mutex<HashSet<(String, String)>>>,
    subscribers: Arc<Mutex<Vec<mpsc::UnboundedSender<NodeChange>>>>,
}

impl NodeCache {
    pub fn new(cloud: Arc<Cloud>) -> Self {
        NodeCache {
            cloud,
            followed: Default::default(),
            subscribers: Default::default(),
        }
    }

    /// The changes of every followed cluster's Nodes, from now on.
    pub fn subscribe(&self) -> mpsc::UnboundedReceiver<NodeChange> {
        let (tx, rx) = mpsc::unbounded_channel();
        lock(&self.subscribers).push(tx);
        rx
    }

    /// A reader of Cluster `namespace/cluster`'s Nodes: its store when this process hosts it,
    /// its endpoint (through the kubeconfig secret) otherwise.
    pub async fn reader(
        &self,
        workloads: &WorkloadClients,
        mgmt: &kube::Client,
        namespace: &str,
        cluster: &str,
    ) -> Result<NodeReader, WorkloadError> {
        if let Some(group) = self
            .cloud
            .group(&crate::capi::infra::cloud_key(cluster, namespace))
        {
            return Ok(NodeReader::Hosted(group));
        }
        let client = workloads.get(mgmt, namespace, cluster).await?;
        Ok(NodeReader::Remote(Box::new(Api::all(client))))
    }

    /// Starts following Cluster `namespace/cluster`'s Nodes, if this process hosts it and
    /// nobody follows it yet. Following ends when the cluster goes.
    pub fn follow(&self, namespace: &str, cluster: &str) {
        let id = (namespace.to_string(), cluster.to_string());
        if lock(&self.followed).contains(&id) {
            return;
        }
        let Some(group) = self
            .cloud
            .group(&crate::capi::infra::cloud_key(cluster, namespace))
        else {
            return;
        };
        let Ok(watch) = group.watch_resource("nodes", None) else {
            return;
        };
        // The task holds the watch, never the group: the cluster's deletion drops the group,
        // which closes the watch and ends the task.
        drop(group);
        lock(&self.followed).insert(id.clone());
        let followed = self.followed.clone();
        let subscribers = self.subscribers.clone();
        tokio::spawn(async move {
            let mut watch = watch;
            loop {
                let (node, provider_id) = match watch.next().await {
                    Ok(e) if matches_health(&e) => (e.key.name.to_string(), provider_id(&e)),
                    Ok(_) => continue,
                    Err(WatchError::Lagged) => (String::new(), String::new()),
                    Err(_) => break,
                };
                let change = NodeChange {
                    namespace: id.0.clone(),
                    cluster: id.1.clone(),
                    node,
                    provider_id,
                };
                lock(&subscribers).retain(|s| s.send(change.clone()).is_ok());
            }
            lock(&followed).remove(&id);
        });
    }
}

/// Reads one workload cluster's Nodes (see [`NodeCache::reader`]).
pub enum NodeReader {
    Hosted(Arc<Group>),
    Remote(Box<Api<Node>>),
}

impl NodeReader {
    /// Whether Nodes are read through the cluster's endpoint (no changes reach the cache).
    pub fn is_remote(&self) -> bool {
        matches!(self, NodeReader::Remote(_))
    }

    pub async fn get(&self, name: &str) -> Result<Option<Node>, kube::Error> {
        match self {
            NodeReader::Hosted(group) => Ok(group
                .get("nodes", &ObjectKey::new("", name))
                .and_then(|o| decode(&o))),
            NodeReader::Remote(api) => api.get_opt(name).await,
        }
    }

    /// A pod of the cluster's `kube-system` namespace (a static pod's mirror), by name.
    pub async fn system_pod(&self, name: &str) -> Result<Option<Pod>, kube::Error> {
        match self {
            NodeReader::Hosted(group) => Ok(group
                .get("pods", &ObjectKey::new("kube-system", name))
                .and_then(|o| serde_json::from_slice(&o.bytes()).ok())),
            NodeReader::Remote(api) => {
                let client = api.as_ref().clone().into_client();
                Api::<Pod>::namespaced(client, "kube-system")
                    .get_opt(name)
                    .await
            }
        }
    }

    pub async fn list(&self) -> Result<Vec<Node>, kube::Error> {
        match self {
            NodeReader::Hosted(group) => Ok(group
                .snapshot("nodes", ReadAt::Latest)
                .map(|s| s.objects.values().filter_map(|o| decode(o)).collect())
                .unwrap_or_default()),
            NodeReader::Remote(api) => Ok(api.list(&ListParams::default()).await?.items),
        }
    }
}

fn decode(o: &infrasim_store::StoredObject) -> Option<Node> {
    serde_json::from_slice(&o.bytes()).ok()
}

/// The `spec.providerID` of an event's Node.
fn provider_id(e: &Event) -> String {
    e.object
        .to_value()
        .ok()
        .as_ref()
        .and_then(|n| n.at("/spec/providerID"))
        .and_then(|p| p.as_str())
        .unwrap_or("")
        .to_string()
}

/// Whether an event is a Node coming, going, or changing a condition's status.
fn matches_health(e: &Event) -> bool {
    if &*e.resource != "nodes" {
        return false;
    }
    match (e.event_type, &e.previous) {
        (EventType::Modified, Some(previous)) => {
            condition_statuses(previous.to_value().ok())
                != condition_statuses(e.object.to_value().ok())
        }
        _ => true,
    }
}

fn condition_statuses(node: Option<serde_json::Value>) -> Vec<(String, String)> {
    node.as_ref()
        .and_then(|n| n.at("/status/conditions"))
        .and_then(|c| c.as_array())
        .into_iter()
        .flatten()
        .map(|c| {
            let text = |k: &str| c.get(k).and_then(|v| v.as_str()).unwrap_or("").to_string();
            (text("type"), text("status"))
        })
        .collect()
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
