//! The StatefulSet controller: pods with stable names `<set>-<ordinal>`, created in order and
//! one at a time under `OrderedReady` (all at once under `Parallel`), removed from the highest
//! ordinal down, and replaced from the highest ordinal down to the partition when the template
//! changes; the status carries the current and update revisions `kubectl rollout status`
//! compares.

use super::events;
use super::{controller_ref, pod_from_template, pod_ready, template_hash, Cluster, Obj};
use infrasim_kube_api::values::At;
use serde_json::json;
use std::collections::BTreeMap;

const RESOURCE: &str = "statefulsets.apps";

fn update_revision(sts: &Obj) -> String {
    let hash = sts
        .value
        .at("/spec/template")
        .map(template_hash)
        .unwrap_or_default();
    format!("{}-{hash}", sts.name())
}

/// The set's pods by ordinal.
fn owned<'a>(sts: &Obj, pods: &'a [Obj]) -> BTreeMap<i64, &'a Obj> {
    let prefix = format!("{}-", sts.name());
    pods.iter()
        .filter(|p| {
            p.namespace() == sts.namespace()
                && p.controller_uid() == Some(sts.uid())
                && !p.deleting()
        })
        .filter_map(|p| {
            let ordinal = p.name().strip_prefix(&prefix)?.parse::<i64>().ok()?;
            Some((ordinal, p))
        })
        .collect()
}

fn revision_of(pod: &Obj) -> String {
    pod.labels()
        .get("controller-revision-hash")
        .cloned()
        .unwrap_or_default()
}

pub(super) fn reconcile(c: &Cluster) {
    let pods = c.list("pods");
    for sts in c.list(RESOURCE).iter() {
        if sts.deleting() {
            continue;
        }
        let replicas = sts.int("/spec/replicas").unwrap_or(1).max(0);
        let ordered = sts.str("/spec/podManagementPolicy") != "Parallel";
        let revision = update_revision(sts);
        if let Some(hash) = revision.strip_prefix(&format!("{}-", sts.name())) {
            super::record_revision(c, sts, "StatefulSet", hash);
        }
        let pods_by_ordinal = owned(sts, &pods);
        create_missing(c, sts, &pods_by_ordinal, replicas, ordered, &revision);
        // Scale down from the highest ordinal, one at a time when ordered.
        let surplus: Vec<&&Obj> = pods_by_ordinal
            .range(replicas..)
            .rev()
            .map(|(_, p)| p)
            .collect();
        for p in surplus.iter().take(if ordered { 1 } else { usize::MAX }) {
            c.delete("pods", p.namespace(), p.name());
            c.event(
                sts,
                events::STATEFULSETS,
                false,
                "SuccessfulDelete",
                &format!(
                    "delete Pod {} in StatefulSet {} successful",
                    p.name(),
                    sts.name()
                ),
            );
        }
        if !surplus.is_empty() {
            continue;
        }
        // Rolling update from the highest ordinal down to the partition, once all are Ready.
        if sts.str("/spec/updateStrategy/type") == "OnDelete" {
            continue;
        }
        let partition = sts
            .int("/spec/updateStrategy/rollingUpdate/partition")
            .unwrap_or(0);
        let all_ready = pods_by_ordinal.len() as i64 == replicas
            && pods_by_ordinal.values().all(|p| pod_ready(p));
        if all_ready {
            if let Some((_, p)) = pods_by_ordinal
                .range(partition..)
                .rev()
                .find(|(_, p)| revision_of(p) != revision)
            {
                c.delete("pods", p.namespace(), p.name());
            }
        }
    }
}

/// Creates the missing ordinals, in order; OrderedReady waits for each to be Ready.
fn create_missing(
    c: &Cluster,
    sts: &Obj,
    pods_by_ordinal: &BTreeMap<i64, &Obj>,
    replicas: i64,
    ordered: bool,
    revision: &str,
) {
    let template = sts
        .value
        .at("/spec/template")
        .cloned()
        .unwrap_or_else(|| json!({}));
    for ordinal in 0..replicas {
        match pods_by_ordinal.get(&ordinal) {
            Some(p) if ordered && !pod_ready(p) => break,
            Some(_) => continue,
            None => {
                let name = format!("{}-{ordinal}", sts.name());
                let mut pod = pod_from_template(
                    &template,
                    sts.namespace(),
                    &format!("{}-", sts.name()),
                    controller_ref(sts, "apps/v1", "StatefulSet"),
                    &[
                        ("controller-revision-hash", revision.to_string()),
                        ("statefulset.kubernetes.io/pod-name", name.clone()),
                        ("apps.kubernetes.io/pod-index", ordinal.to_string()),
                    ],
                );
                pod["metadata"]["name"] = json!(name);
                if let Some(m) = pod["metadata"].as_object_mut() {
                    m.remove("generateName");
                }
                pod["spec"]["hostname"] = json!(name);
                if !sts.str("/spec/serviceName").is_empty() {
                    pod["spec"]["subdomain"] = json!(sts.str("/spec/serviceName"));
                }
                if c.create("pods", pod).is_some() {
                    c.event(
                        sts,
                        events::STATEFULSETS,
                        false,
                        "SuccessfulCreate",
                        &format!("create Pod {name} in StatefulSet {} successful", sts.name()),
                    );
                }
                if ordered {
                    break;
                }
            }
        }
    }
}

pub(super) fn update_status(c: &Cluster) {
    let pods = c.list("pods");
    for sts in c.list(RESOURCE).iter() {
        let revision = update_revision(sts);
        let pods_by_ordinal = owned(sts, &pods);
        let count = pods_by_ordinal.len() as i64;
        let ready = pods_by_ordinal.values().filter(|p| pod_ready(p)).count() as i64;
        let updated = pods_by_ordinal
            .values()
            .filter(|p| revision_of(p) == revision)
            .count() as i64;
        let replicas = sts.int("/spec/replicas").unwrap_or(1).max(0);
        // The current revision moves to the update revision once every pod runs it.
        let previous_current = sts.str("/status/currentRevision").to_string();
        let current = if updated == count && count == replicas || previous_current.is_empty() {
            revision.clone()
        } else {
            previous_current
        };
        let current_count = pods_by_ordinal
            .values()
            .filter(|p| revision_of(p) == current)
            .count() as i64;
        let mut status = json!({
            "observedGeneration": sts.int("/metadata/generation").unwrap_or(1),
            "replicas": count,
            "readyReplicas": ready,
            "currentReplicas": current_count,
            "updatedReplicas": updated,
            "availableReplicas": ready,
            "currentRevision": current,
            "updateRevision": revision,
            "collisionCount": 0,
        });
        if let Some(s) = status.as_object_mut() {
            s.retain(|k, v| {
                matches!(
                    k.as_str(),
                    "replicas" | "availableReplicas" | "collisionCount"
                ) || v.as_i64() != Some(0)
            });
        }
        c.set_status(RESOURCE, sts, status);
    }
}
