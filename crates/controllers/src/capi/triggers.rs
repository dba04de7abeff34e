//! What of a related Cluster API object a controller reacts to. A Cluster's status changes
//! many times while it comes up; each change would wake every Machine, bootstrap config and
//! infrastructure machine of the cluster, which need only know whether the cluster's
//! infrastructure is provisioned, its control plane initialized, or it is paused. These
//! predicates hash just that, and the runtime's
//! [`only_changes`](infrasim_controller_runtime::triggers::only_changes) passes an object on only when its
//! hash changes, so a cluster of N machines costs O(N) reconciles, not O(N²).

use crate::capi::core::{Cluster, KubeadmControlPlane, Machine, MachineDeployment};
use infrasim_controller_runtime::triggers::hash;
use kube::ResourceExt;

/// The gates a Cluster opens for what belongs to it.
pub fn cluster_gates(c: &Cluster) -> Option<u64> {
    hash((
        c.uid(),
        c.infrastructure_provisioned(),
        c.control_plane_initialized(),
        c.paused(),
        c.annotations().contains_key(crate::capi::PAUSED_ANNOTATION),
        c.metadata.deletion_timestamp.is_some(),
        c.spec
            .control_plane_endpoint
            .as_ref()
            .map(|e| (&e.host, e.port)),
        c.spec.infrastructure_ref.as_ref().map(|r| &r.name),
        c.spec.control_plane_ref.as_ref().map(|r| &r.name),
    ))
}

/// What a Machine's bootstrap config and infrastructure machine need of it: its spec, labels,
/// annotations (the bootstrapped mark, pausing), and deletion.
pub fn machine_spec(m: &Machine) -> Option<u64> {
    hash((
        m.uid(),
        serde_json::to_string(&m.spec).unwrap_or_default(),
        m.labels(),
        m.annotations(),
        m.metadata.deletion_timestamp.is_some(),
    ))
}

/// What an owner of Machines counts: their readiness, availability, being up to date, their
/// Node, their deletion (with the hooks that hold it), and their certificates' expiry.
pub fn machine_summary(m: &Machine) -> Option<u64> {
    let status = m.status.as_ref();
    let conds: Vec<(String, String, String)> = status
        .and_then(|s| s.conditions.as_ref())
        .map(|c| {
            c.iter()
                .filter(|c| {
                    matches!(
                        c.type_.as_str(),
                        "Ready"
                            | "Available"
                            | "UpToDate"
                            | "Deleting"
                            | "NodeHealthy"
                            | "HealthCheckSucceeded"
                            | "OwnerRemediated"
                    )
                })
                .map(|c| (c.type_.clone(), c.status.clone(), c.reason.clone()))
                .collect()
        })
        .unwrap_or_default();
    hash((
        m.uid(),
        conds,
        status.and_then(|s| s.node_ref.as_ref()).map(|n| &n.name),
        status.and_then(|s| s.phase.as_ref()),
        status
            .and_then(|s| s.node_info.as_ref())
            .and_then(|i| i.get("kubeletVersion"))
            .map(|v| v.to_string()),
        &m.spec.provider_id,
        &m.spec.version,
        m.annotations(),
        m.metadata.deletion_timestamp.is_some(),
        // A control plane rolls out a machine whose certificates near their expiry.
        status.and_then(|s| s.certificates_expiry_date.as_ref()),
    ))
}

/// What a health check counts of a Machine: whether its selector and cluster still take it
/// in (labels, cluster), whether its Node is healthy, the annotations that mark or exempt it,
/// and its conditions once it has a Node. A Machine's status changes a dozen times while it
/// comes up; its health check needs to hear of a few of them.
pub fn machine_health(m: &Machine) -> Option<u64> {
    let healthy = m
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .is_some_and(|c| infrasim_controller_runtime::conditions::is_true(c, "NodeHealthy"));
    let marks: Vec<(&String, &String)> = m
        .annotations()
        .iter()
        .filter(|(k, _)| {
            matches!(
                k.as_str(),
                "cluster.x-k8s.io/remediate-machine"
                    | "cluster.x-k8s.io/skip-remediation"
                    | "cluster.x-k8s.io/paused"
            )
        })
        .collect();
    let node = m
        .status
        .as_ref()
        .and_then(|s| s.node_ref.as_ref())
        .map(|n| &n.name);
    // Once the Machine has its Node, any condition may be one a check watches
    // (`unhealthyMachineConditions`); before, its conditions change with every boot step and
    // only the startup timeout matters, which runs from InfrastructureReady.
    let conds: Vec<(&str, &str)> = m
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .into_iter()
        .flatten()
        .filter(|c| node.is_some() || c.type_ == "InfrastructureReady")
        .filter(|c| c.type_ != "Ready" && c.type_ != "Available")
        .map(|c| (c.type_.as_str(), c.status.as_str()))
        .collect();
    hash((
        m.uid(),
        m.labels(),
        &m.spec.cluster_name,
        healthy,
        marks,
        node,
        m.metadata.deletion_timestamp.is_some(),
        conds,
    ))
}

/// A Machine's failed health check (`HealthCheckSucceeded` not True), which its Ready
/// summarizes. A first verdict of True changes nothing of Ready, so it wakes nobody.
pub fn health_verdict(m: &Machine) -> Option<u64> {
    let verdict = m
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .and_then(|c| infrasim_controller_runtime::conditions::find(c, "HealthCheckSucceeded"))
        .filter(|c| !c.is_true())
        .map(|c| (c.status.clone(), c.reason.clone()));
    hash((m.uid(), verdict))
}

/// The conditions a Machine's `spec.readinessGates` name (its Ready counts them), as they
/// change: another controller writes them (the control plane, for its component health).
pub fn readiness_gates(m: &Machine) -> Option<u64> {
    let current = m.status.as_ref().and_then(|s| s.conditions.as_deref());
    let gated: Vec<_> = gate_types(m)
        .into_iter()
        .map(|ty| {
            current
                .and_then(|c| infrasim_controller_runtime::conditions::find(c, &ty))
                .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
        })
        .collect();
    hash((m.uid(), gated))
}

/// The condition types of a Machine's readiness gates.
pub fn gate_types(m: &Machine) -> Vec<String> {
    m.spec
        .readiness_gates
        .iter()
        .flatten()
        .filter_map(|g| g.get("conditionType")?.as_str().map(str::to_string))
        .collect()
}

/// What makes a control plane's Machines up to date or not: its version and the template of
/// their infrastructure.
pub fn control_plane_rollout(k: &KubeadmControlPlane) -> Option<u64> {
    hash((
        k.uid(),
        &k.spec.version,
        &k.spec.machine_template.spec.infrastructure_ref.name,
    ))
}

/// What makes a deployment's Machines up to date or not: its Machine template.
pub fn deployment_rollout(md: &MachineDeployment) -> Option<u64> {
    hash((
        md.uid(),
        serde_json::to_string(&md.spec.template.spec).unwrap_or_default(),
    ))
}
