//! Cluster API's core kinds (v1beta2), as the in-memory provider reads them and the core
//! stand-in serves them: the fields these controllers read and write are typed, the rest of
//! an upstream object is kept as written.

mod addons;
mod cluster;
mod clusterclass;
mod healthcheck;
mod ipam;
mod kubeadm;
mod machine;
mod machineset;
mod shared;
pub mod v1beta1;

pub use addons::{
    ClusterResourceSet, ClusterResourceSetBinding, ClusterResourceSetBindingSpec,
    ClusterResourceSetSpec, ClusterResourceSetStatus, ResourceBinding, ResourceRef,
    ResourceSetBinding, RESOURCE_SET_SECRET_TYPE,
};
pub use cluster::{
    ClassRef, Cluster, ClusterInitialization, ClusterSpec, ClusterStatus, ControlPlaneTopology,
    MachineDeploymentTopology, ReplicaCounts, Topology, WorkersTopology,
};
pub use clusterclass::{
    ClusterClass, ClusterClassSpec, ClusterClassStatus, ControlPlaneClass, InfrastructureClass,
    MachineDeploymentClass, TemplateRefHolder, WorkersClass,
};
pub use healthcheck::{MachineHealthCheck, MachineHealthCheckSpec, MachineHealthCheckStatus};
pub use ipam::{
    AddressRef, IPAddress, IPAddressClaim, IPAddressClaimSpec, IPAddressClaimStatus, IPAddressSpec,
    IPPoolReference,
};
pub use kubeadm::{
    BootstrapInitialization, ControlPlaneInitialization, ControlPlaneMachineSpec,
    ControlPlaneMachineTemplate, KubeadmConfig, KubeadmConfigSpec, KubeadmConfigStatus,
    KubeadmConfigTemplate, KubeadmConfigTemplateResource, KubeadmConfigTemplateSpec,
    KubeadmControlPlane, KubeadmControlPlaneSpec, KubeadmControlPlaneStatus,
    KubeadmControlPlaneTemplate, KubeadmControlPlaneTemplateResource,
    KubeadmControlPlaneTemplateSpec, VersionCount,
};
pub use machine::{Bootstrap, Machine, MachineInitialization, MachineSpec, MachineStatus, NodeRef};
pub use machineset::{
    MachineDeployment, MachineDeploymentSpec, MachineSet, MachineSetSpec, MachineTemplateSpec,
    ReplicaStatus, RollingUpdate, Rollout, RolloutStrategy, SetDeletion,
};
pub use shared::{
    ApiEndpoint, ContractRef, FailureDomain, MachineAddress, ObjectMetaTemplate, TemplateRef,
};
