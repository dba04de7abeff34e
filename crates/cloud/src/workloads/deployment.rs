//! The Deployment controller: one ReplicaSet per distinct pod template (named by its
//! `pod-template-hash`), rolled over by the Recreate or RollingUpdate strategy within
//! `maxSurge` / `maxUnavailable`, old ReplicaSets kept up to `revisionHistoryLimit`, and the
//! status (`updatedReplicas`, `availableReplicas`, the Available and Progressing conditions)
//! that `kubectl rollout status` and multi-cluster health checks read.

use super::events;
use super::{condition, template_hash, Cluster, Obj};
use infrasim_kube_api::values::{int_or_percent, At};
use serde_json::{json, Value};

const RESOURCE: &str = "deployments.apps";
const REPLICASETS: &str = "replicasets.apps";
const REVISION: &str = "deployment.kubernetes.io/revision";

fn revision(rs: &Obj) -> i64 {
    rs.value
        .at("/metadata/annotations")
        .and_then(|a| a.get(REVISION))
        .and_then(Value::as_str)
        .and_then(|r| r.parse().ok())
        .unwrap_or(0)
}

/// The ReplicaSets `d` controls, oldest revision first.
fn owned<'a>(d: &Obj, all: &'a [Obj]) -> Vec<&'a Obj> {
    let mut rss: Vec<&Obj> = all
        .iter()
        .filter(|rs| {
            rs.namespace() == d.namespace()
                && rs.controller_uid() == Some(d.uid())
                && !rs.deleting()
        })
        .collect();
    rss.sort_by_key(|rs| revision(rs));
    rss
}

/// `(maxSurge, maxUnavailable)` for `desired` replicas; both zero would deadlock a rollout, so
/// kube-controller-manager then allows one unavailable pod, and so do we.
fn rolling_limits(d: &Obj, desired: i64) -> (i64, i64) {
    if d.str("/spec/strategy/type") == "Recreate" {
        return (0, 0);
    }
    let ru = d.value.at("/spec/strategy/rollingUpdate");
    let surge = int_or_percent(
        ru.and_then(|r| r.get("maxSurge")).or(Some(&json!("25%"))),
        desired,
        true,
    )
    .unwrap_or(0);
    let unavailable = int_or_percent(
        ru.and_then(|r| r.get("maxUnavailable"))
            .or(Some(&json!("25%"))),
        desired,
        false,
    )
    .unwrap_or(0);
    if surge == 0 && unavailable == 0 {
        (0, 1)
    } else {
        (surge, unavailable)
    }
}

fn spec_replicas(rs: &Obj) -> i64 {
    rs.int("/spec/replicas").unwrap_or(0)
}

fn available(rs: &Obj) -> i64 {
    rs.int("/status/availableReplicas").unwrap_or(0)
}

/// Sets a ReplicaSet's replicas (and the annotations recording the Deployment's size and
/// revision) if they differ.
fn scale(c: &Cluster, d: &Obj, rs: &Obj, replicas: i64, desired: i64, max: i64, rev: Option<i64>) {
    let mut next = Value::clone(&rs.value);
    next["spec"]["replicas"] = json!(replicas);
    let annotations = &mut next["metadata"]["annotations"];
    if !annotations.is_object() {
        *annotations = json!({});
    }
    annotations["deployment.kubernetes.io/desired-replicas"] = json!(desired.to_string());
    annotations["deployment.kubernetes.io/max-replicas"] = json!(max.to_string());
    if let Some(r) = rev {
        annotations[REVISION] = json!(r.to_string());
    }
    if next != *rs.value && c.update(REPLICASETS, next, rs) {
        let from = spec_replicas(rs);
        if from != replicas {
            let direction = if replicas > from { "up" } else { "down" };
            c.event(
                d,
                events::DEPLOYMENTS,
                false,
                "ScalingReplicaSet",
                &format!(
                    "Scaled {direction} replica set {} from {from} to {replicas}",
                    rs.name()
                ),
            );
        }
    }
}

/// Rolls every Deployment one step towards its template and size.
pub(super) fn reconcile(c: &Cluster) {
    let all = c.list(REPLICASETS);
    for d in c.list(RESOURCE).iter() {
        if !d.deleting() {
            roll(c, d, &all);
        }
    }
}

/// One Deployment's step: its ReplicaSet for the current template made or scaled, the old
/// ones scaled down as its strategy allows, the oldest empty ones pruned.
fn roll(c: &Cluster, d: &Obj, all: &[Obj]) {
    let desired = d.int("/spec/replicas").unwrap_or(1).max(0);
    let template = d
        .value
        .at("/spec/template")
        .cloned()
        .unwrap_or_else(|| json!({}));
    let hash = template_hash(&template);
    let rss = owned(d, all);
    let max_revision = rss.iter().map(|rs| revision(rs)).max().unwrap_or(0);
    let new = rss
        .iter()
        .find(|rs| rs.labels().get("pod-template-hash") == Some(&hash))
        .copied();
    let olds: Vec<&Obj> = rss
        .iter()
        .filter(|rs| new.is_none_or(|n| n.uid() != rs.uid()))
        .copied()
        .collect();
    let old_total: i64 = olds.iter().map(|rs| spec_replicas(rs)).sum();
    let (surge, unavailable) = rolling_limits(d, desired);
    if d.value.at("/spec/paused") == Some(&json!(true)) {
        return;
    }
    let Some(new) = new else {
        let recreate = d.str("/spec/strategy/type") == "Recreate";
        let initial = if old_total == 0 && !recreate {
            desired
        } else if recreate {
            0
        } else {
            (desired + surge - old_total).clamp(0, desired)
        };
        let revision = max_revision + 1;
        create_replicaset(c, d, &template, &hash, initial, revision, desired + surge);
        return;
    };
    // A rollback makes an old template current again: its ReplicaSet takes the newest
    // revision number.
    let rev = (revision(new) == 0 || revision(new) < max_revision).then_some(max_revision + 1);
    note_revision(c, d, rev.unwrap_or_else(|| revision(new)));
    if d.str("/spec/strategy/type") == "Recreate" {
        recreate(c, d, new, &olds, desired, rev);
        return;
    }
    let sizes = Sizes {
        desired,
        surge,
        unavailable,
        old_total,
    };
    rolling_update(c, d, new, &olds, sizes, rev);
    prune_history(c, d, &olds);
}

/// The Deployment carries its current revision too (`kubectl rollout undo` reads and patches
/// it).
fn note_revision(c: &Cluster, d: &Obj, revision: i64) {
    let current = revision.to_string();
    if d.value
        .at("/metadata/annotations")
        .and_then(|a| a.get(REVISION))
        .and_then(Value::as_str)
        == Some(&current)
    {
        return;
    }
    let mut next = Value::clone(&d.value);
    if !next["metadata"]["annotations"].is_object() {
        next["metadata"]["annotations"] = json!({});
    }
    next["metadata"]["annotations"][REVISION] = json!(current);
    // On a conflict the next pass retries; nothing else depends on this write.
    c.update(RESOURCE, next, d);
}

/// Recreate: every old ReplicaSet down to nothing, and the new one up only once their pods
/// are gone.
fn recreate(c: &Cluster, d: &Obj, new: &Obj, olds: &[&Obj], desired: i64, rev: Option<i64>) {
    if olds.iter().any(|rs| spec_replicas(rs) > 0) {
        for rs in olds {
            scale(c, d, rs, 0, desired, desired, None);
        }
        return;
    }
    if olds
        .iter()
        .any(|rs| rs.int("/status/replicas").unwrap_or(0) > 0)
    {
        return;
    }
    scale(c, d, new, desired, desired, desired, rev);
}

/// The sizes a rolling update works within.
#[derive(Clone, Copy)]
struct Sizes {
    desired: i64,
    /// maxSurge, as a count.
    surge: i64,
    /// maxUnavailable, as a count.
    unavailable: i64,
    /// The old ReplicaSets' replicas together.
    old_total: i64,
}

/// RollingUpdate: the new ReplicaSet up within maxSurge (or straight down to size), the old
/// ones down while at least `desired - maxUnavailable` pods stay available.
fn rolling_update(c: &Cluster, d: &Obj, new: &Obj, olds: &[&Obj], n: Sizes, rev: Option<i64>) {
    let current_new = spec_replicas(new);
    let target_new = if current_new >= n.desired {
        n.desired
    } else {
        let room = n.desired + n.surge - (n.old_total + current_new);
        current_new + room.clamp(0, n.desired - current_new)
    };
    let ceiling = n.desired + n.surge;
    scale(c, d, new, target_new, n.desired, ceiling, rev);
    let all_pods = n.old_total + current_new;
    let new_unavailable = (current_new - available(new)).max(0);
    let mut budget = all_pods - (n.desired - n.unavailable) - new_unavailable;
    for rs in olds {
        if budget <= 0 {
            break;
        }
        let down = spec_replicas(rs).min(budget);
        if down > 0 {
            scale(c, d, rs, spec_replicas(rs) - down, n.desired, ceiling, None);
            budget -= down;
        }
    }
}

/// Keeps `revisionHistoryLimit` old, empty ReplicaSets; deletes older ones.
fn prune_history(c: &Cluster, d: &Obj, olds: &[&Obj]) {
    let limit = d.int("/spec/revisionHistoryLimit").unwrap_or(10).max(0) as usize;
    let empty: Vec<&&Obj> = olds
        .iter()
        .filter(|rs| spec_replicas(rs) == 0 && rs.int("/status/replicas").unwrap_or(0) == 0)
        .collect();
    for rs in empty.iter().take(empty.len().saturating_sub(limit)) {
        c.delete(REPLICASETS, rs.namespace(), rs.name());
    }
}

fn create_replicaset(
    c: &Cluster,
    d: &Obj,
    template: &Value,
    hash: &str,
    replicas: i64,
    revision: i64,
    max: i64,
) {
    let mut template = template.clone();
    if !template["metadata"].is_object() {
        template["metadata"] = json!({});
    }
    if !template["metadata"]["labels"].is_object() {
        template["metadata"]["labels"] = json!({});
    }
    template["metadata"]["labels"]["pod-template-hash"] = json!(hash);
    let mut selector = d
        .value
        .at("/spec/selector")
        .cloned()
        .unwrap_or_else(|| json!({}));
    if !selector["matchLabels"].is_object() {
        selector["matchLabels"] = json!({});
    }
    selector["matchLabels"]["pod-template-hash"] = json!(hash);
    let mut spec = json!({
        "replicas": replicas,
        "selector": selector,
        "template": template,
    });
    if let Some(m) = d.int("/spec/minReadySeconds") {
        spec["minReadySeconds"] = json!(m);
    }
    let rs = json!({
        "apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {
            "name": format!("{}-{hash}", d.name()),
            "namespace": d.namespace(),
            "labels": template["metadata"]["labels"],
            "annotations": {
                "deployment.kubernetes.io/desired-replicas": d.int("/spec/replicas").unwrap_or(1).to_string(),
                "deployment.kubernetes.io/max-replicas": max.to_string(),
                REVISION: revision.to_string(),
            },
            "ownerReferences": [super::controller_ref(d, "apps/v1", "Deployment")],
        },
        "spec": spec,
    });
    if let Some(created) = c.create(REPLICASETS, rs) {
        if replicas > 0 {
            c.event(
                d,
                events::DEPLOYMENTS,
                false,
                "ScalingReplicaSet",
                &format!(
                    "Scaled up replica set {} from 0 to {replicas}",
                    created.name()
                ),
            );
        }
    }
}

/// Sums the ReplicaSets into each Deployment's status and conditions.
pub(super) fn update_status(c: &Cluster) {
    let all = c.list(REPLICASETS);
    let now = infrasim_store::format_time(c.now());
    for d in c.list(RESOURCE).iter() {
        let desired = d.int("/spec/replicas").unwrap_or(1).max(0);
        let hash = d
            .value
            .at("/spec/template")
            .map(template_hash)
            .unwrap_or_default();
        let rss = owned(d, &all);
        let new = rss
            .iter()
            .find(|rs| rs.labels().get("pod-template-hash") == Some(&hash));
        let sum = |p: &str| -> i64 { rss.iter().map(|rs| rs.int(p).unwrap_or(0)).sum() };
        let replicas = sum("/status/replicas");
        let ready = sum("/status/readyReplicas");
        let available = sum("/status/availableReplicas");
        let updated = new.and_then(|rs| rs.int("/status/replicas")).unwrap_or(0);
        let (_, max_unavailable) = rolling_limits(d, desired);
        let generation = d.int("/metadata/generation").unwrap_or(1);
        let previous = d.value.at("/status/conditions");
        let available_condition = if available >= desired - max_unavailable {
            condition(
                previous,
                "Available",
                "True",
                "MinimumReplicasAvailable",
                "Deployment has minimum availability.",
                &now,
                true,
            )
        } else {
            condition(
                previous,
                "Available",
                "False",
                "MinimumReplicasUnavailable",
                "Deployment does not have minimum availability.",
                &now,
                true,
            )
        };
        let complete = updated == desired && replicas == desired && available == desired;
        let progressing = match new {
            _ if d.value.at("/spec/paused") == Some(&json!(true)) => condition(
                previous,
                "Progressing",
                "Unknown",
                "DeploymentPaused",
                "Deployment is paused",
                &now,
                true,
            ),
            Some(rs) if complete => condition(
                previous,
                "Progressing",
                "True",
                "NewReplicaSetAvailable",
                &format!("ReplicaSet \"{}\" has successfully progressed.", rs.name()),
                &now,
                true,
            ),
            Some(rs) => condition(
                previous,
                "Progressing",
                "True",
                "ReplicaSetUpdated",
                &format!("ReplicaSet \"{}\" is progressing.", rs.name()),
                &now,
                true,
            ),
            None => condition(
                previous,
                "Progressing",
                "True",
                "NewReplicaSetCreated",
                "Created new replica set.",
                &now,
                true,
            ),
        };
        let mut status = json!({
            "observedGeneration": generation,
            "replicas": replicas,
            "updatedReplicas": updated,
            "readyReplicas": ready,
            "availableReplicas": available,
            "unavailableReplicas": (desired - available).max(0),
            "conditions": [available_condition, progressing],
        });
        // Zero counts are omitted, as kube-controller-manager's omitempty leaves them.
        if let Some(s) = status.as_object_mut() {
            s.retain(|_, v| v.as_i64() != Some(0));
        }
        c.set_status(RESOURCE, d, status);
    }
}
