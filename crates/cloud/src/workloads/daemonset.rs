//! The DaemonSet controller: one pod per node that the template's tolerations, node selector
//! and node affinity allow, pinned to it with a `metadata.name` node-affinity term (the
//! scheduler then binds it there), replaced node by node within `maxUnavailable` when the
//! template changes, and counted into the status `kubectl rollout status ds` reads.

use super::events;
use super::scheduler::{selects_node, untolerated_taint};
use super::{controller_ref, pod_from_template, pod_ready, template_hash, Cluster, Obj};
use infrasim_kube_api::values::{int_or_percent, At};
use serde_json::{json, Value};
use std::collections::HashMap;

const RESOURCE: &str = "daemonsets.apps";

/// The tolerations the DaemonSet controller adds to every pod it creates, so daemons keep
/// running on nodes under pressure or not ready.
fn with_daemon_tolerations(spec: &mut Value) {
    let mut added = vec![
        json!({"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"}),
        json!({"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"}),
        json!({"key": "node.kubernetes.io/disk-pressure", "operator": "Exists", "effect": "NoSchedule"}),
        json!({"key": "node.kubernetes.io/memory-pressure", "operator": "Exists", "effect": "NoSchedule"}),
        json!({"key": "node.kubernetes.io/pid-pressure", "operator": "Exists", "effect": "NoSchedule"}),
        json!({"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}),
    ];
    if spec.get("hostNetwork") == Some(&json!(true)) {
        added.push(json!({"key": "node.kubernetes.io/network-unavailable", "operator": "Exists", "effect": "NoSchedule"}));
    }
    if !spec["tolerations"].is_array() {
        spec["tolerations"] = json!([]);
    }
    if let Some(list) = spec["tolerations"].as_array_mut() {
        for t in added {
            if !list.contains(&t) {
                list.push(t);
            }
        }
    }
}

/// The template's pod spec with the daemon tolerations: what decides where it runs.
fn daemon_spec(ds: &Obj) -> Value {
    let mut spec = ds
        .value
        .at("/spec/template/spec")
        .cloned()
        .unwrap_or_else(|| json!({}));
    with_daemon_tolerations(&mut spec);
    spec
}

fn should_run(spec: &Value, node: &Obj) -> bool {
    untolerated_taint(spec, &node.value).is_none() && selects_node(spec, &node.value)
}

/// The node a daemon pod is for: where it is bound, or where its affinity pins it.
fn target_node(pod: &Obj) -> String {
    let bound = pod.str("/spec/nodeName");
    if !bound.is_empty() {
        return bound.to_string();
    }
    pod.value
        .at("/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms/0/matchFields/0/values/0")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string()
}

fn owned_by_node<'a>(ds: &Obj, pods: &'a [Obj]) -> HashMap<String, Vec<&'a Obj>> {
    let mut by_node: HashMap<String, Vec<&Obj>> = HashMap::new();
    for p in pods.iter().filter(|p| {
        p.namespace() == ds.namespace() && p.controller_uid() == Some(ds.uid()) && !p.deleting()
    }) {
        by_node.entry(target_node(p)).or_default().push(p);
    }
    for list in by_node.values_mut() {
        list.sort_by(|a, b| {
            a.str("/metadata/creationTimestamp")
                .cmp(b.str("/metadata/creationTimestamp"))
        });
    }
    by_node
}

fn revision_hash(ds: &Obj) -> String {
    ds.value
        .at("/spec/template")
        .map(template_hash)
        .unwrap_or_default()
}

/// Creates the missing daemon pods, removes misplaced and surplus ones, rolls updates.
pub(super) fn reconcile(c: &Cluster) {
    let pods = c.list("pods");
    let nodes = c.list("nodes");
    for ds in c.list(RESOURCE).iter() {
        if ds.deleting() {
            continue;
        }
        let spec = daemon_spec(ds);
        let hash = revision_hash(ds);
        super::record_revision(c, ds, "DaemonSet", &hash);
        let mut by_node = owned_by_node(ds, &pods);
        let template = ds
            .value
            .at("/spec/template")
            .cloned()
            .unwrap_or_else(|| json!({}));
        let generation = ds.int("/metadata/generation").unwrap_or(1);
        let mut unavailable = 0;
        let mut outdated: Vec<&Obj> = Vec::new();
        for node in nodes.iter() {
            let here = by_node.remove(node.name()).unwrap_or_default();
            if !should_run(&spec, node) {
                for p in here {
                    c.delete("pods", p.namespace(), p.name());
                }
                continue;
            }
            match here.split_first() {
                None => {
                    let mut pod = pod_from_template(
                        &template,
                        ds.namespace(),
                        &format!("{}-", ds.name()),
                        controller_ref(ds, "apps/v1", "DaemonSet"),
                        &[
                            ("controller-revision-hash", hash.clone()),
                            ("pod-template-generation", generation.to_string()),
                        ],
                    );
                    pod["spec"]["tolerations"] = spec["tolerations"].clone();
                    pod["spec"]["affinity"]["nodeAffinity"]
                        ["requiredDuringSchedulingIgnoredDuringExecution"] = json!({
                        "nodeSelectorTerms": [{"matchFields": [
                            {"key": "metadata.name", "operator": "In", "values": [node.name()]}
                        ]}]
                    });
                    if let Some(created) = c.create("pods", pod) {
                        c.event(
                            ds,
                            events::DAEMONSETS,
                            false,
                            "SuccessfulCreate",
                            &format!("Created pod: {}", created.name()),
                        );
                    }
                    unavailable += 1;
                }
                Some((keep, surplus)) => {
                    for p in surplus {
                        c.delete("pods", p.namespace(), p.name());
                    }
                    if !pod_ready(keep) {
                        unavailable += 1;
                    }
                    if keep.labels().get("controller-revision-hash") != Some(&hash) {
                        outdated.push(keep);
                    }
                }
            }
        }
        // Pods for nodes that are gone.
        for p in by_node.into_values().flatten() {
            c.delete("pods", p.namespace(), p.name());
        }
        roll_outdated(c, ds, outdated, unavailable, nodes.len() as i64);
    }
}

/// RollingUpdate: replaces outdated pods while at most maxUnavailable of the `nodes` are
/// unavailable (`unavailable` are already); not-ready outdated pods go first, as they cost no
/// availability.
fn roll_outdated(c: &Cluster, ds: &Obj, mut outdated: Vec<&Obj>, unavailable: i64, nodes: i64) {
    if ds.str("/spec/updateStrategy/type") == "OnDelete" {
        return;
    }
    let limit = ds
        .value
        .at("/spec/updateStrategy/rollingUpdate/maxUnavailable");
    // A percentage rounds down but never to zero; absent means one.
    let max_unavailable = match int_or_percent(limit, nodes, false) {
        Some(n) if limit.is_some_and(Value::is_string) => n.max(1),
        Some(n) => n,
        None => 1,
    };
    outdated.sort_by_key(|p| pod_ready(p));
    let mut budget = max_unavailable - unavailable;
    for p in outdated {
        let ready = pod_ready(p);
        if ready && budget <= 0 {
            break;
        }
        c.delete("pods", p.namespace(), p.name());
        if ready {
            budget -= 1;
        }
    }
}

/// Counts each DaemonSet's pods into its status.
pub(super) fn update_status(c: &Cluster) {
    let pods = c.list("pods");
    let nodes = c.list("nodes");
    for ds in c.list(RESOURCE).iter() {
        let spec = daemon_spec(ds);
        let hash = revision_hash(ds);
        let by_node = owned_by_node(ds, &pods);
        let (mut desired, mut current, mut misscheduled, mut ready, mut updated) = (0, 0, 0, 0, 0);
        for node in nodes.iter() {
            let here = by_node.get(node.name()).map(Vec::as_slice).unwrap_or(&[]);
            let scheduled = here.iter().any(|p| !p.str("/spec/nodeName").is_empty());
            if should_run(&spec, node) {
                desired += 1;
                if scheduled {
                    current += 1;
                }
                if here.iter().any(|p| pod_ready(p)) {
                    ready += 1;
                }
                if here.iter().any(|p| {
                    !p.str("/spec/nodeName").is_empty()
                        && p.labels().get("controller-revision-hash") == Some(&hash)
                }) {
                    updated += 1;
                }
            } else if scheduled {
                misscheduled += 1;
            }
        }
        let mut status = json!({
            "currentNumberScheduled": current,
            "desiredNumberScheduled": desired,
            "numberMisscheduled": misscheduled,
            "numberReady": ready,
            "numberAvailable": ready,
            "numberUnavailable": desired - ready,
            "updatedNumberScheduled": updated,
            "observedGeneration": ds.int("/metadata/generation").unwrap_or(1),
        });
        // The optional counts are omitted at zero, as kube-controller-manager leaves them.
        if let Some(s) = status.as_object_mut() {
            for key in [
                "numberAvailable",
                "numberUnavailable",
                "updatedNumberScheduled",
            ] {
                if s.get(key).and_then(Value::as_i64) == Some(0) {
                    s.remove(key);
                }
            }
        }
        c.set_status(RESOURCE, ds, status);
    }
}
