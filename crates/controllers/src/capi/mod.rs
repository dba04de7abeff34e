//! Cluster API: the in-memory infrastructure provider (`infra`), the core kinds (`core`), an
//! embedded stand-in for the core's controllers (`standin`) and for the in-cluster IPAM provider
//! (`ipam`), with the labels and annotations Cluster API gives meaning to.

pub mod admission;
pub mod conversion;
pub mod core;
pub mod index;
pub mod infra;
pub mod ipam;
pub mod simulation_metrics;
pub mod standin;
pub mod state_metrics;
pub mod templates;
pub mod triggers;

/// The label naming an object's Cluster.
pub const CLUSTER_NAME_LABEL: &str = "cluster.x-k8s.io/cluster-name";
/// The label (value `""`) of control-plane Machines and what belongs to them.
pub const CONTROL_PLANE_LABEL: &str = "cluster.x-k8s.io/control-plane";
/// On the objects a Cluster's topology made.
pub const TOPOLOGY_OWNED_LABEL: &str = "topology.cluster.x-k8s.io/owned";
/// On a topology's MachineDeployment (and its templates): its name in the topology.
pub const TOPOLOGY_DEPLOYMENT_LABEL: &str = "topology.cluster.x-k8s.io/deployment-name";
/// The label naming a control-plane Machine's KubeadmControlPlane.
pub const CONTROL_PLANE_NAME_LABEL: &str = "cluster.x-k8s.io/control-plane-name";
/// The label naming the MachineDeployment of a MachineSet and of its Machines.
pub const DEPLOYMENT_NAME_LABEL: &str = "cluster.x-k8s.io/deployment-name";
/// The label naming the MachineSet of a Machine.
pub const SET_NAME_LABEL: &str = "cluster.x-k8s.io/set-name";
/// The finalizer Cluster API's Machine controller puts on every Machine (the MachineSet
/// controller sets it on those it creates, so none is deleted unseen).
pub const MACHINE_FINALIZER: &str = "machine.cluster.x-k8s.io";
/// The annotation that pauses reconciliation of one object.
pub const PAUSED_ANNOTATION: &str = "cluster.x-k8s.io/paused";
/// The provider name clusterctl knows this provider by (a label on its CRDs).
pub const PROVIDER_LABEL_VALUE: &str = "infrastructure-in-memory";
/// Cluster API's API group.
pub const CORE_GROUP: &str = "cluster.x-k8s.io";
/// The infrastructure providers' API group.
pub const INFRA_GROUP: &str = "infrastructure.cluster.x-k8s.io";
/// The group of CAPV's supervisor-mode kinds.
pub const SUPERVISOR_GROUP: &str = "vmware.infrastructure.cluster.x-k8s.io";

/// The message of the `Paused` condition, if `obj` or its cluster is paused, as Cluster API
/// words it (the provider's and the core's controllers say the same).
pub(crate) fn paused_message<K: kube::Resource<DynamicType = ()>>(
    obj: &K,
    cluster_paused: bool,
) -> Option<String> {
    let mut why = Vec::new();
    if cluster_paused {
        why.push("Cluster spec.paused is set to true".to_string());
    }
    if obj
        .meta()
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(PAUSED_ANNOTATION))
    {
        why.push(format!(
            "{} has the cluster.x-k8s.io/paused annotation",
            K::kind(&())
        ));
    }
    (!why.is_empty()).then(|| why.join(", "))
}
