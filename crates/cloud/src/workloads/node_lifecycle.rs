//! kube-controller-manager's node lifecycle controller, for the nodes whose kubelet stopped
//! (a `NodeNotReady` fault: see [`KubeletSwitch`]): once a node's Lease is older than the
//! grace period (`--node-monitor-grace-period`, 40 s), its kubelet conditions turn `Unknown`
//! ("Kubelet stopped posting node status.") and it is tainted
//! `node.kubernetes.io/unreachable` (`NoSchedule`, and `NoExecute` with its time). When the
//! kubelet is back it posts a Ready status and renews its Lease, and the taints are lifted.
//!
//! The node's pods go with it, as kube-controller-manager treats them: each is marked not
//! Ready once the node is Unknown (its `Ready` condition `False`), and the taint manager
//! deletes those that do not tolerate the `NoExecute` taint, at once, or once their
//! `tolerationSeconds` (300 s by default, which the API server's admission adds) have passed
//! since the taint's `timeAdded`. A DaemonSet's pods tolerate it for good and stay. Their
//! controllers then make new pods on the nodes left.
//!
//! One step per pass: each write's own event brings the next pass, as the controllers here
//! are level-triggered. Only stopped nodes are looked at closely, so an idle cluster whose
//! kubelets run costs one set lookup per node.

use super::kubelet::KUBELET_CONDITIONS;
use super::{condition, pod_ready, with_ready, Cluster, Obj};
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
                _ => {
                    let pods = pods_on(c, node.name());
                    mark_pods_not_ready(c, &pods);
                    evict_untolerating(c, node, &pods, now);
                }
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

/// The pods bound to `node`.
fn pods_on(c: &Cluster, node: &str) -> Vec<Obj> {
    (c.list("pods").iter())
        .filter(|p| p.str("/spec/nodeName") == node && !p.deleting())
        .cloned()
        .collect()
}

/// Each of the node's `pods` whose `Ready` condition is true gets it false, the rest of it
/// kept, as the node lifecycle controller's `MarkPodsNotReady` writes it.
fn mark_pods_not_ready(c: &Cluster, pods: &[Obj]) {
    let now = infrasim_store::format_time(c.now());
    for pod in pods.iter().filter(|p| pod_ready(p)) {
        let mut next = with_ready(pod, false, &now);
        let status = next["status"].take();
        c.set_status_as("node-controller", "pods", pod, status);
    }
}

/// The taint manager: deletes the node's pods that do not tolerate its unreachable
/// `NoExecute` taint, or whose toleration has run out; wakes at the next one to run out.
fn evict_untolerating(c: &Cluster, node: &Obj, pods: &[Obj], now: chrono::DateTime<chrono::Utc>) {
    let Some(added) = (node.value.at("/spec/taints").and_then(Value::as_array))
        .into_iter()
        .flatten()
        .find(|t| {
            t.get("key").and_then(Value::as_str) == Some(UNREACHABLE)
                && t.get("effect").and_then(Value::as_str) == Some("NoExecute")
        })
        .and_then(|t| t.get("timeAdded"))
        .and_then(Value::as_str)
        .and_then(|t| t.parse::<chrono::DateTime<chrono::Utc>>().ok())
    else {
        return;
    };
    for pod in pods {
        match tolerated_for(pod) {
            Tolerated::Forever => {}
            Tolerated::For(seconds) if now < added + seconds => c.wake_at(added + seconds),
            _ => {
                tracing::debug!(
                    pod = pod.name(),
                    node = node.name(),
                    "evicted: node unreachable"
                );
                c.delete("pods", pod.namespace(), pod.name());
            }
        }
    }
}

/// How long a pod tolerates the unreachable `NoExecute` taint.
#[derive(Debug, PartialEq)]
enum Tolerated {
    Not,
    For(chrono::Duration),
    Forever,
}

/// The longest of the pod's tolerations of the unreachable `NoExecute` taint (a toleration
/// matches by its key, or by `Exists` without one, with the effect `NoExecute` or none).
fn tolerated_for(pod: &Obj) -> Tolerated {
    let mut best = Tolerated::Not;
    for t in (pod.value.at("/spec/tolerations").and_then(Value::as_array))
        .into_iter()
        .flatten()
    {
        let key = t.get("key").and_then(Value::as_str).unwrap_or("");
        let exists = t.get("operator").and_then(Value::as_str) == Some("Exists");
        let effect = t.get("effect").and_then(Value::as_str).unwrap_or("");
        if !(key == UNREACHABLE || (key.is_empty() && exists)) {
            continue;
        }
        if !(effect.is_empty() || effect == "NoExecute") {
            continue;
        }
        match t.get("tolerationSeconds").and_then(Value::as_i64) {
            None => return Tolerated::Forever,
            Some(secs) => {
                let d = chrono::Duration::seconds(secs.max(0));
                if !matches!(best, Tolerated::For(b) if b >= d) {
                    best = Tolerated::For(d);
                }
            }
        }
    }
    best
}
