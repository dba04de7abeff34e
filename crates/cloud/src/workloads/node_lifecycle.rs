//! kube-controller-manager's node lifecycle controller, for the nodes whose kubelet stopped
//! (a `NodeNotReady` fault: see [`KubeletSwitch`]): once a node's Lease is older than the
//! grace period (`--node-monitor-grace-period`, 40 s), its kubelet conditions turn `Unknown`
//! ("Kubelet stopped posting node status.") and it is tainted
//! `node.kubernetes.io/unreachable` (`NoSchedule`, and `NoExecute` with its time). When the
//! kubelet is back it posts a Ready status and renews its Lease, and the taints are lifted.
//!
//! One step per pass: each write's own event brings the next pass, as the controllers here
//! are level-triggered. Only stopped nodes are looked at closely, so an idle cluster whose
//! kubelets run costs one set lookup per node.

use super::kubelet::KUBELET_CONDITIONS;
use super::{condition, Cluster, Obj};
use infrasim_kube_api::values::At;
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

/// How long a node's Lease may go unrenewed before the node is Unknown.
pub const GRACE: chrono::Duration = chrono::Duration::seconds(40);

const UNREACHABLE: &str = "node.kubernetes.io/unreachable";

/// Which nodes' kubelets are stopped, shared between the cloud (which a fault sets) and the
/// cluster's controllers (woken when it changes). Clones share it.
#[derive(Debug, Clone, Default)]
pub struct KubeletSwitch {
    stopped: Arc<Mutex<BTreeSet<String>>>,
    changed: Arc<tokio::sync::Notify>,
}

impl KubeletSwitch {
    /// Stops exactly the kubelets of `nodes` (the others run), and wakes the controllers.
    pub fn set(&self, nodes: BTreeSet<String>) {
        *self.stopped.lock().unwrap_or_else(|p| p.into_inner()) = nodes;
        self.changed.notify_one();
    }

    /// Whether `node`'s kubelet is stopped.
    pub fn stopped(&self, node: &str) -> bool {
        self.stopped
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(node)
    }

    /// Waits for the next change.
    pub(super) async fn changed(&self) {
        self.changed.notified().await;
    }
}

/// One step for every node whose state calls for one.
pub(super) fn reconcile(c: &Cluster) {
    let now = c.now();
    for node in c.list("nodes").iter() {
        let ready = node_condition(node, "Ready");
        let tainted = has_unreachable_taint(node);
        if c.kubelet_stopped(node.name()) {
            let due = last_renewal(c, node).map(|t| t + GRACE);
            match due {
                Some(due) if now < due => c.wake_at(due),
                _ if ready != "Unknown" => mark_unknown(c, node),
                _ if !tainted => taint(c, node, now),
                _ => {}
            }
        } else if ready == "Unknown" {
            super::kubelet::resume(c, node);
        } else if tainted && ready == "True" {
            untaint(c, node);
        }
    }
}

fn node_condition<'a>(node: &'a Obj, ty: &str) -> &'a str {
    node.value
        .at("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(ty))
        .and_then(|c| c.get("status"))
        .and_then(Value::as_str)
        .unwrap_or("")
}

fn has_unreachable_taint(node: &Obj) -> bool {
    node.value
        .at("/spec/taints")
        .and_then(Value::as_array)
        .is_some_and(|t| {
            t.iter()
                .any(|t| t.get("key").and_then(Value::as_str) == Some(UNREACHABLE))
        })
}

/// When the node's kubelet last renewed its Lease (or, without one, last posted Ready).
fn last_renewal(c: &Cluster, node: &Obj) -> Option<chrono::DateTime<chrono::Utc>> {
    let lease = c.get("leases.coordination.k8s.io", "kube-node-lease", node.name());
    let renewed = lease
        .as_ref()
        .map(|l| l.str("/spec/renewTime").to_string())
        .filter(|t| !t.is_empty());
    let heartbeat = || {
        node.value
            .at("/status/conditions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .find(|c| c.get("type").and_then(Value::as_str) == Some("Ready"))
            .and_then(|c| c.get("lastHeartbeatTime"))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    renewed.or_else(heartbeat)?.parse().ok()
}

/// The kubelet's conditions turned `Unknown`, their heartbeats kept, as the node lifecycle
/// controller writes them.
fn mark_unknown(c: &Cluster, node: &Obj) {
    let now = infrasim_store::format_time(c.now());
    let previous = node.value.at("/status/conditions");
    let mut status = node
        .value
        .get("status")
        .cloned()
        .unwrap_or_else(|| json!({}));
    let others: Vec<Value> = previous
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|c| {
            !KUBELET_CONDITIONS
                .iter()
                .any(|k| c.get("type").and_then(Value::as_str) == Some(k.0))
        })
        .cloned()
        .collect();
    let mut conditions: Vec<Value> = KUBELET_CONDITIONS
        .iter()
        .map(|(ty, ..)| {
            let mut unknown = condition(
                previous,
                ty,
                "Unknown",
                "NodeStatusUnknown",
                "Kubelet stopped posting node status.",
                &now,
                false,
            );
            let heartbeat = previous
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .find(|c| c.get("type").and_then(Value::as_str) == Some(ty))
                .and_then(|c| c.get("lastHeartbeatTime"))
                .cloned();
            unknown["lastHeartbeatTime"] = heartbeat.unwrap_or_else(|| json!(now));
            unknown
        })
        .collect();
    conditions.extend(others);
    status["conditions"] = json!(conditions);
    c.set_status_as("node-controller", "nodes", node, status);
}

fn taint(c: &Cluster, node: &Obj, now: chrono::DateTime<chrono::Utc>) {
    let mut next = Value::clone(&node.value);
    let mut taints = next
        .at("/spec/taints")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    taints.push(json!({"key": UNREACHABLE, "effect": "NoSchedule"}));
    taints.push(json!({"key": UNREACHABLE, "effect": "NoExecute", "timeAdded": infrasim_store::format_time(now)}));
    next["spec"]["taints"] = json!(taints);
    c.update("nodes", next, node);
}

fn untaint(c: &Cluster, node: &Obj) {
    let mut next = Value::clone(&node.value);
    let taints: Vec<Value> = next
        .at("/spec/taints")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|t| t.get("key").and_then(Value::as_str) != Some(UNREACHABLE))
        .cloned()
        .collect();
    match taints.is_empty() {
        true => {
            if let Some(spec) = next.get_mut("spec").and_then(Value::as_object_mut) {
                spec.remove("taints");
            }
        }
        false => next["spec"]["taints"] = json!(taints),
    }
    c.update("nodes", next, node);
}
