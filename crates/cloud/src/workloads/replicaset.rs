//! The ReplicaSet controller: keeps `spec.replicas` pods from the template, deleting the least
//! useful first when there are too many, and reports how many exist, are ready and available.

use super::events;
use super::{controller_ref, pod_from_template, pod_ready, string_map, Cluster, Obj};
use infrasim_kube_api::values::At;
use serde_json::json;

const RESOURCE: &str = "replicasets.apps";

/// At most this many pods are created per ReplicaSet per pass (kube-controller-manager grows
/// its batches up to 500 in the same spirit): a huge scale-up never holds the task long.
const BURST: i64 = 500;

/// The pods `rs` controls and that are not being deleted.
fn owned_pods<'a>(rs: &Obj, pods: &'a [Obj]) -> Vec<&'a Obj> {
    pods.iter()
        .filter(|p| {
            p.namespace() == rs.namespace() && p.controller_uid() == Some(rs.uid()) && !p.deleting()
        })
        .collect()
}

/// Creates missing pods and deletes surplus ones.
pub(super) fn reconcile(c: &Cluster) {
    let pods = c.list("pods");
    for rs in c.list(RESOURCE).iter() {
        if rs.deleting() {
            continue;
        }
        let want = rs.int("/spec/replicas").unwrap_or(1).max(0);
        let mut owned = owned_pods(rs, &pods);
        let have = owned.len() as i64;
        if have < want {
            let template = rs
                .value
                .at("/spec/template")
                .cloned()
                .unwrap_or_else(|| json!({}));
            let owner = controller_ref(rs, "apps/v1", "ReplicaSet");
            for _ in 0..(want - have).min(BURST) {
                let pod = pod_from_template(
                    &template,
                    rs.namespace(),
                    &format!("{}-", rs.name()),
                    owner.clone(),
                    &[],
                );
                if let Some(created) = c.create("pods", pod) {
                    c.event(
                        rs,
                        events::REPLICASETS,
                        false,
                        "SuccessfulCreate",
                        &format!("Created pod: {}", created.name()),
                    );
                }
            }
        } else if have > want {
            // Delete the pods that matter least first: unscheduled, then not running, then
            // not ready, then the youngest (kube-controller-manager's ranking, simplified).
            owned.sort_by_key(|p| {
                (
                    !p.str("/spec/nodeName").is_empty(),
                    p.str("/status/phase") == "Running",
                    pod_ready(p),
                    std::cmp::Reverse(p.str("/metadata/creationTimestamp").to_string()),
                )
            });
            for p in owned.iter().take((have - want) as usize) {
                c.delete("pods", p.namespace(), p.name());
                c.event(
                    rs,
                    events::REPLICASETS,
                    false,
                    "SuccessfulDelete",
                    &format!("Deleted pod: {}", p.name()),
                );
            }
        }
    }
}

/// Counts what each ReplicaSet's pods are doing into its status.
pub(super) fn update_status(c: &Cluster) {
    let pods = c.list("pods");
    for rs in c.list(RESOURCE).iter() {
        let owned = owned_pods(rs, &pods);
        let template_labels = string_map(rs.value.at("/spec/template/metadata/labels"));
        let ready = owned.iter().filter(|p| pod_ready(p)).count();
        let fully_labeled = owned
            .iter()
            .filter(|p| {
                let labels = p.labels();
                template_labels
                    .iter()
                    .all(|(k, v)| labels.get(k) == Some(v))
            })
            .count();
        let mut status = json!({
            "replicas": owned.len(),
            "fullyLabeledReplicas": fully_labeled,
            "readyReplicas": ready,
            "availableReplicas": ready,
            "observedGeneration": rs.int("/metadata/generation").unwrap_or(1),
        });
        // kube-controller-manager omits zero counts (omitempty), and kubectl shows them so.
        if let Some(s) = status.as_object_mut() {
            s.retain(|k, v| k == "replicas" || v.as_i64() != Some(0));
        }
        c.set_status(RESOURCE, rs, status);
    }
}
