//! CAPV's supervisor mode (`vmware.infrastructure.cluster.x-k8s.io`), where machines are
//! vm-operator VirtualMachines rather than VMs CAPV clones itself: a `VSphereCluster` gets its
//! VirtualMachineSetResourcePolicy and its control plane endpoint (see [`cluster`]), and a
//! `VSphereMachine` the VirtualMachine CAPV makes for it, whose progress it reports until the
//! VM has an address and a BIOS UUID (see [`machine`]). vm-operator's part (deploying the VM
//! from its image in the simulator, and booting it into the workload cluster) is the vcsim
//! family's vm-operator stand-in; this side never touches a vCenter.
//!
//! ProviderServiceAccounts give the workload cluster credentials for the supervisor (see
//! [`service_accounts`]), and service discovery its address (see [`service_discovery`]).
//!
//! The network is CAPV's `dummy` provider's: no load balancer, so the endpoint is the one the
//! Cluster or the VSphereCluster names (what `infrasim env` hands a template).

pub(super) mod cluster;
pub(super) mod machine;
pub(super) mod service_accounts;
pub(super) mod service_discovery;

/// vm-operator's API version CAPV writes VirtualMachines in.
pub const VMOPERATOR_API: &str = "vmoperator.vmware.com/v1alpha6";

/// The labels CAPV puts on a cluster's VMs (vm-operator's VirtualMachineService and the cloud
/// provider select them), for a control-plane or a worker machine.
pub fn role_labels(cluster: &str, control_plane: bool) -> Vec<(&'static str, String)> {
    let role = if control_plane {
        "controlplane"
    } else {
        "node"
    };
    vec![
        ("capv.vmware.com/cluster.name", cluster.to_string()),
        ("capw.vmware.com/cluster.name", cluster.to_string()),
        ("capv.vmware.com/cluster.role", role.to_string()),
        ("capw.vmware.com/cluster.role", role.to_string()),
    ]
}
