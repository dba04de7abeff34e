//! The disruption controller: keeps each PodDisruptionBudget's status (expected, healthy and
//! desired pods, disruptions allowed) as kube-controller-manager does, for `kubectl get pdb`
//! and for tools that read budgets before they drain.

use super::{condition, Cluster};
use infrasim_kube_api::eviction::budget;
use infrasim_kube_api::values::At;
use serde_json::{json, Value};

const RESOURCE: &str = "poddisruptionbudgets.policy";

pub(super) fn update_status(c: &Cluster) {
    let pdbs = c.list(RESOURCE);
    if pdbs.is_empty() {
        return;
    }
    let pods: Vec<Value> = c
        .list("pods")
        .iter()
        .map(|p| Value::clone(&p.value))
        .collect();
    let now = infrasim_store::format_time(c.now());
    for pdb in pdbs.iter() {
        let in_namespace: Vec<Value> = pods
            .iter()
            .filter(|p| {
                p.at("/metadata/namespace").and_then(Value::as_str) == Some(pdb.namespace())
            })
            .cloned()
            .collect();
        let b = budget(&pdb.value, &in_namespace);
        let generation = pdb.int("/metadata/generation").unwrap_or(1);
        let previous = pdb.value.at("/status/conditions");
        let mut allowed = if b.allowed() > 0 {
            condition(
                previous,
                "DisruptionAllowed",
                "True",
                "SufficientPods",
                "",
                &now,
                false,
            )
        } else {
            condition(
                previous,
                "DisruptionAllowed",
                "False",
                "InsufficientPods",
                "",
                &now,
                false,
            )
        };
        allowed["observedGeneration"] = json!(generation);
        let status = json!({
            "observedGeneration": generation,
            "disruptionsAllowed": b.allowed(),
            "currentHealthy": b.healthy,
            "desiredHealthy": b.desired,
            "expectedPods": b.expected,
            "conditions": [allowed],
        });
        c.set_status(RESOURCE, pdb, status);
    }
}
