//! kube-scheduler in miniature: binds each pending pod to a node that fits it (Ready and
//! schedulable, taints tolerated, `nodeSelector` and required node affinity matched, room for
//! one more pod and for its CPU and memory requests), preferring the least loaded node, and
//! tells why in the `PodScheduled` condition when none fits, in kube-scheduler's words.

use super::events;
use super::{condition, string_map, Cluster, Obj};
use infrasim_kube_api::quantity;
use infrasim_kube_api::selectors::{LabelRequirement, LabelSelector};
use infrasim_kube_api::values::At;
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap};

/// What is already placed on a node.
#[derive(Debug, Default, Clone, Copy)]
struct Usage {
    pods: i64,
    cpu_milli: f64,
    memory: f64,
}

impl Usage {
    /// Counts one more pod with these (cpu, memory) requests.
    fn add(&mut self, (cpu, memory): (f64, f64)) {
        self.pods += 1;
        self.cpu_milli += cpu;
        self.memory += memory;
    }
}

/// A pod's demands: its containers' requests (limits stand in for missing requests, as the
/// API server defaults them).
fn requests(pod: &Value) -> (f64, f64) {
    let mut cpu = 0.0;
    let mut memory = 0.0;
    for c in pod
        .at("/spec/containers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let res = c.get("resources");
        let get = |name: &str| {
            res.and_then(|r| r.at(&format!("/requests/{name}")))
                .or_else(|| res.and_then(|r| r.at(&format!("/limits/{name}"))))
        };
        cpu += get("cpu").map(quantity::value).unwrap_or(0.0) * 1000.0;
        memory += get("memory").map(quantity::value).unwrap_or(0.0);
    }
    (cpu, memory)
}

/// Whether `toleration` tolerates `taint`.
pub(crate) fn tolerates(toleration: &Value, taint: &Value) -> bool {
    let get = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    let effect = get(toleration, "effect");
    if !effect.is_empty() && effect != get(taint, "effect") {
        return false;
    }
    let key = get(toleration, "key");
    match get(toleration, "operator").as_str() {
        "Exists" => key.is_empty() || key == get(taint, "key"),
        _ => key == get(taint, "key") && get(toleration, "value") == get(taint, "value"),
    }
}

/// The first scheduling-relevant taint (NoSchedule or NoExecute) `pod_spec` does not tolerate.
pub(crate) fn untolerated_taint<'a>(pod_spec: &Value, node: &'a Value) -> Option<&'a Value> {
    let tolerations = pod_spec
        .get("tolerations")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    node.at("/spec/taints")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|t| {
            matches!(
                t.get("effect").and_then(Value::as_str),
                Some("NoSchedule" | "NoExecute")
            )
        })
        .find(|t| !tolerations.iter().any(|tol| tolerates(tol, t)))
}

/// Whether the node matches the pod's `nodeSelector` and required node affinity.
pub(crate) fn selects_node(pod_spec: &Value, node: &Value) -> bool {
    let labels = string_map(node.at("/metadata/labels"));
    let selector = string_map(pod_spec.get("nodeSelector"));
    if selector.iter().any(|(k, v)| labels.get(k) != Some(v)) {
        return false;
    }
    let Some(terms) = pod_spec
        .at("/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms")
        .and_then(Value::as_array)
    else {
        return true;
    };
    let name = node
        .at("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    let fields = BTreeMap::from([("metadata.name".to_string(), name.to_string())]);
    // Terms are ORed; within a term every expression must hold; an empty term matches nothing.
    terms.iter().any(|term| {
        let exprs = term.get("matchExpressions").and_then(Value::as_array);
        let field_exprs = term.get("matchFields").and_then(Value::as_array);
        if exprs.is_none_or(|e| e.is_empty()) && field_exprs.is_none_or(|e| e.is_empty()) {
            return false;
        }
        exprs.into_iter().flatten().all(|e| {
            LabelRequirement::from_expression(e)
                .is_some_and(|r| LabelSelector(vec![r]).matches(&labels))
        }) && field_exprs.into_iter().flatten().all(|e| {
            LabelRequirement::from_expression(e)
                .is_some_and(|r| LabelSelector(vec![r]).matches(&fields))
        })
    })
}

/// Why `node` cannot take `pod`, in kube-scheduler's phrasing, or `None` if it can.
fn misfit(pod: &Value, demand: (f64, f64), node: &Obj, used: Usage) -> Option<String> {
    let spec = pod.get("spec").unwrap_or(&Value::Null);
    if node.value.at("/spec/unschedulable") == Some(&json!(true)) {
        return Some("node(s) were unschedulable".into());
    }
    // The node lifecycle controller taints a node that is not Ready; daemons tolerate it.
    let not_ready = json!({"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"});
    if !super::condition_true(&node.value, "Ready")
        && !spec
            .get("tolerations")
            .and_then(Value::as_array)
            .is_some_and(|ts| ts.iter().any(|t| tolerates(t, &not_ready)))
    {
        return Some("node(s) had untolerated taint {node.kubernetes.io/not-ready: }".into());
    }
    if let Some(taint) = untolerated_taint(spec, &node.value) {
        return Some(format!(
            "node(s) had untolerated taint {{{}: {}}}",
            taint.get("key").and_then(Value::as_str).unwrap_or(""),
            taint.get("value").and_then(Value::as_str).unwrap_or("")
        ));
    }
    if !selects_node(spec, &node.value) {
        return Some("node(s) didn't match Pod's node affinity/selector".into());
    }
    let allocatable = |name: &str| {
        node.value
            .at(&format!("/status/allocatable/{name}"))
            .map(quantity::value)
    };
    if allocatable("pods").is_some_and(|max| (used.pods + 1) as f64 > max) {
        return Some("Too many pods".into());
    }
    if allocatable("cpu").is_some_and(|max| used.cpu_milli + demand.0 > max * 1000.0 + 1e-6) {
        return Some("Insufficient cpu".into());
    }
    if allocatable("memory").is_some_and(|max| used.memory + demand.1 > max) {
        return Some("Insufficient memory".into());
    }
    None
}

/// Binds every pending pod it can.
pub(super) fn schedule(c: &Cluster) {
    let pods = c.list("pods");
    let pending = pending_pods(&pods);
    if pending.is_empty() {
        return;
    }
    let nodes = c.list("nodes");
    let mut usage = node_usage(&pods);
    let now = infrasim_store::format_time(c.now());
    for pod in pending {
        let demand = requests(&pod.value);
        match best_node(pod, demand, &nodes, &usage) {
            Ok(node) => {
                if bind_and_report(c, pod, node) {
                    usage
                        .entry(node.name().to_string())
                        .or_default()
                        .add(demand);
                }
            }
            Err(reasons) => report_unschedulable(c, pod, &reasons, nodes.len(), &now),
        }
    }
}

/// The pods waiting for this scheduler, oldest first (by name among equals) so they are
/// placed in the order they came.
fn pending_pods(pods: &[Obj]) -> Vec<&Obj> {
    let mut pending: Vec<&Obj> = pods
        .iter()
        .filter(|p| {
            p.str("/spec/nodeName").is_empty()
                && !p.deleting()
                && matches!(p.str("/spec/schedulerName"), "" | "default-scheduler")
                && !matches!(p.str("/status/phase"), "Succeeded" | "Failed")
        })
        .collect();
    pending.sort_by(|a, b| {
        (a.str("/metadata/creationTimestamp"), a.name())
            .cmp(&(b.str("/metadata/creationTimestamp"), b.name()))
    });
    pending
}

/// What the pods already bound (and not finished) take on each node, by node name.
fn node_usage(pods: &[Obj]) -> HashMap<String, Usage> {
    let mut usage: HashMap<String, Usage> = HashMap::new();
    for p in pods.iter() {
        let node = p.str("/spec/nodeName");
        if node.is_empty() || matches!(p.str("/status/phase"), "Succeeded" | "Failed") {
            continue;
        }
        usage
            .entry(node.to_string())
            .or_default()
            .add(requests(&p.value));
    }
    usage
}

/// The least loaded node that fits the pod (the first among equals), or, when none does,
/// each reason a node did not with how many nodes it ruled out.
fn best_node<'a>(
    pod: &Obj,
    demand: (f64, f64),
    nodes: &'a [Obj],
    usage: &HashMap<String, Usage>,
) -> Result<&'a Obj, BTreeMap<String, usize>> {
    let mut reasons: BTreeMap<String, usize> = BTreeMap::new();
    let mut best: Option<(&Obj, i64)> = None;
    for node in nodes.iter() {
        let used = usage.get(node.name()).copied().unwrap_or_default();
        match misfit(&pod.value, demand, node, used) {
            Some(reason) => *reasons.entry(reason).or_default() += 1,
            None => {
                if best.is_none_or(|(_, pods)| used.pods < pods) {
                    best = Some((node, used.pods));
                }
            }
        }
    }
    best.map(|(node, _)| node).ok_or(reasons)
}

/// Binds the pod to `node` through `pods/binding`, and says so in an event; whether the
/// binding went through.
fn bind_and_report(c: &Cluster, pod: &Obj, node: &Obj) -> bool {
    if !c.bind(pod, node.name()) {
        return false;
    }
    c.event(
        pod,
        events::SCHEDULER,
        false,
        "Scheduled",
        &format!(
            "Successfully assigned {}/{} to {}",
            pod.namespace(),
            pod.name(),
            node.name()
        ),
    );
    true
}

/// Marks the pod unschedulable with kube-scheduler's summary of why no node fits, and says
/// so in an event when that changed the pod.
fn report_unschedulable(
    c: &Cluster,
    pod: &Obj,
    reasons: &BTreeMap<String, usize>,
    node_count: usize,
    now: &str,
) {
    let previous = pod.value.at("/status/conditions");
    let detail: Vec<String> = reasons
        .iter()
        .map(|(reason, n)| format!("{n} {reason}"))
        .collect();
    let message = format!(
        "0/{} nodes are available: {}. preemption: 0/{} nodes are available: {} Preemption is not helpful for scheduling.",
        node_count,
        if detail.is_empty() { "no nodes registered".to_string() } else { detail.join(", ") },
        node_count,
        node_count,
    );
    let mut next = Value::clone(&pod.value);
    set_condition(
        &mut next,
        condition(
            previous,
            "PodScheduled",
            "False",
            "Unschedulable",
            &message,
            now,
            false,
        ),
    );
    if next != *pod.value && c.scheduler_status(next, pod) {
        c.event(pod, events::SCHEDULER, true, "FailedScheduling", &message);
    }
}

/// Replaces (or adds) the condition of the same type in `object`'s status, dropping the empty
/// reason and message kube-scheduler leaves out (and no `lastProbeTime`: the API stores none
/// for a null one, and a condition compared with the stored one must be as stored).
pub(crate) fn set_condition(object: &mut Value, mut cond: Value) {
    if let Some(c) = cond.as_object_mut() {
        c.retain(|_, v| v.as_str() != Some(""));
    }
    if !object["status"].is_object() {
        object["status"] = json!({});
    }
    let ty = cond.get("type").cloned();
    let conditions = &mut object["status"]["conditions"];
    if !conditions.is_array() {
        *conditions = json!([]);
    }
    if let Some(list) = conditions.as_array_mut() {
        match list.iter_mut().find(|c| c.get("type") == ty.as_ref()) {
            Some(existing) => *existing = cond,
            None => list.push(cond),
        }
    }
}
