//! What the stand-in still writes for v1beta1 readers, as upstream's controllers do while
//! Cluster API serves v1beta1: each kind's v1beta1 conditions under
//! `status.deprecated.v1beta1` (what a v1beta1 reader sees as `status.conditions`, so that
//! `kubectl wait --for=condition=Ready clusters.v1beta1.cluster.x-k8s.io/NAME` ends), beside
//! the counters of v1beta1's meaning the kinds keep there.
//!
//! The conditions are mirrored from the v1beta2 ones the controllers compute (upstream
//! computes both from the same observations), and `Ready` summarizes those upstream's v1beta1
//! `SetSummary` lists per kind. `MachinesCreated` and `Resized`, which v1beta2 has no
//! condition for, are derived here.

use chrono::{DateTime, Utc};
use infrasim_controller_runtime::conditions::{self, Condition, Mirror};
use serde_json::{json, Value};

/// A kind's v1beta1 conditions: which it mirrors, and which `Ready` summarizes.
pub(super) struct Kind {
    mirrors: &'static [Mirror],
    ready_of: &'static [&'static str],
}

pub(super) const CLUSTER: Kind = Kind {
    mirrors: &[
        Mirror("InfrastructureReady", "InfrastructureReady", "Info"),
        Mirror("ControlPlaneInitialized", "ControlPlaneInitialized", "Info"),
        Mirror("ControlPlaneReady", "ControlPlaneAvailable", "Info"),
        Mirror("TopologyReconciled", "TopologyReconciled", "Info"),
    ],
    ready_of: &["ControlPlaneReady", "InfrastructureReady"],
};

pub(super) const MACHINE: Kind = Kind {
    mirrors: &[
        Mirror("BootstrapReady", "BootstrapConfigReady", "Info"),
        Mirror("InfrastructureReady", "InfrastructureReady", "Info"),
        Mirror("NodeHealthy", "NodeHealthy", "Info"),
        Mirror("HealthCheckSucceeded", "HealthCheckSucceeded", "Warning"),
        Mirror("OwnerRemediated", "OwnerRemediated", "Warning"),
    ],
    // Upstream's order: infrastructure problems first; the Node is not part of it.
    ready_of: &[
        "InfrastructureReady",
        "BootstrapReady",
        "HealthCheckSucceeded",
        "OwnerRemediated",
    ],
};

pub(super) const MACHINE_SET: Kind = Kind {
    mirrors: &[
        Mirror("MachinesCreated", "MachinesCreated", "Error"),
        Mirror("Resized", "Resized", "Warning"),
        Mirror("MachinesReady", "MachinesReady", "Info"),
    ],
    ready_of: &["MachinesCreated", "Resized", "MachinesReady"],
};

pub(super) const MACHINE_DEPLOYMENT: Kind = Kind {
    mirrors: &[Mirror("Available", "Available", "Warning")],
    ready_of: &["Available"],
};

pub(super) const CONTROL_PLANE: Kind = Kind {
    mirrors: &[
        // v1beta1's Available: the control plane answers (kubeadm init done).
        Mirror("Available", "Initialized", "Info"),
        Mirror("CertificatesAvailable", "CertificatesAvailable", "Error"),
        Mirror("MachinesCreated", "MachinesCreated", "Error"),
        Mirror("MachinesSpecUpToDate", "MachinesUpToDate", "Info"),
        Mirror("Resized", "Resized", "Warning"),
        Mirror("MachinesReady", "MachinesReady", "Warning"),
        Mirror(
            "ControlPlaneComponentsHealthy",
            "ControlPlaneComponentsHealthy",
            "Warning",
        ),
        Mirror("EtcdClusterHealthy", "EtcdClusterHealthy", "Warning"),
    ],
    ready_of: &[
        "MachinesCreated",
        "MachinesSpecUpToDate",
        "Resized",
        "MachinesReady",
        "Available",
        "CertificatesAvailable",
    ],
};

pub(super) const MACHINE_HEALTH_CHECK: Kind = Kind {
    mirrors: &[Mirror(
        "RemediationAllowed",
        "RemediationAllowed",
        "Warning",
    )],
    ready_of: &[],
};

pub(super) const KUBEADM_CONFIG: Kind = Kind {
    mirrors: &[
        Mirror("DataSecretAvailable", "DataSecretAvailable", "Info"),
        Mirror("CertificatesAvailable", "CertificatesAvailable", "Error"),
    ],
    ready_of: &["DataSecretAvailable", "CertificatesAvailable"],
};

/// `status.deprecated` of an object of `kind` whose v1beta2 conditions are `v1beta2`:
/// `counters` (a JSON object, or null) with the v1beta1 conditions beside them. `previous` is
/// the object's current `status.deprecated`, whose `Ready` keeps its time while it holds.
pub(super) fn deprecated(
    kind: &Kind,
    v1beta2: &[Condition],
    counters: Value,
    previous: Option<&Value>,
    now: DateTime<Utc>,
) -> Value {
    let derived = derived(v1beta2);
    let inputs: Vec<&Condition> = v1beta2.iter().chain(&derived).collect();
    let before = conditions::deprecated_v1beta1(previous);
    let old = conditions::v1beta1_conditions(&inputs, kind.mirrors, kind.ready_of, &before, now);
    let mut v1beta1 = match counters {
        Value::Object(map) => map,
        _ => serde_json::Map::new(),
    };
    v1beta1.insert("conditions".into(), json!(old));
    json!({ "v1beta1": v1beta1 })
}

/// The v1beta1 conditions v1beta2 has no counterpart for, from the ones it has: machines
/// created (the stand-in reports a failed create by erroring, not by a condition) and
/// `Resized`, False while scaling up or down. Times are left empty: a derived condition keeps
/// its v1beta1 time while it holds.
fn derived(v1beta2: &[Condition]) -> Vec<Condition> {
    let mut out = vec![Condition::new("MachinesCreated", true, "", "")];
    let scaling = ["ScalingUp", "ScalingDown"]
        .into_iter()
        .find_map(|t| conditions::find(v1beta2, t).filter(|c| c.is_true()));
    out.push(match scaling {
        Some(c) => Condition::new("Resized", false, &c.type_, c.message.clone()),
        None => Condition::new("Resized", true, "", ""),
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scaling_set_is_not_resized_and_so_not_ready() {
        let t = "2026-01-01T00:00:00Z".parse().unwrap();
        let mut v1beta2 = Vec::new();
        conditions::set(
            &mut v1beta2,
            Condition::new(
                "ScalingUp",
                true,
                "ScalingUp",
                "Scaling up from 1 to 3 replicas",
            ),
            t,
        );
        conditions::set(
            &mut v1beta2,
            Condition::new("MachinesReady", true, "Ready", ""),
            t,
        );
        let counters = json!({"readyReplicas": 1});
        let d = deprecated(&MACHINE_SET, &v1beta2, counters, None, t);
        let v1beta1 = &d["v1beta1"];
        assert_eq!(v1beta1["readyReplicas"], 1);
        let types: Vec<&str> = v1beta1["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["type"].as_str().unwrap())
            .collect();
        assert_eq!(
            types,
            ["Ready", "MachinesCreated", "MachinesReady", "Resized"]
        );
        let ready = &v1beta1["conditions"][0];
        assert_eq!(ready["status"], "False");
        assert_eq!(ready["severity"], "Warning");
        assert_eq!(ready["reason"], "ScalingUp");
        assert_eq!(ready["message"], "Scaling up from 1 to 3 replicas");
    }
}
