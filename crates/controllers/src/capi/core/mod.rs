//! Cluster API's core kinds (v1beta2), as the in-memory provider reads them and the core
//! stand-in serves them.

mod cluster;
mod machine;
mod shared;

pub use cluster::{
    ClassRef, Cluster, ClusterInitialization, ClusterSpec, ClusterStatus, ControlPlaneTopology,
    MachineDeploymentTopology, ReplicaCounts, Topology, WorkersTopology,
};
pub use machine::{Bootstrap, Machine, MachineInitialization, MachineSpec, MachineStatus, NodeRef};
pub use shared::{
    ApiEndpoint, ContractRef, FailureDomain, MachineAddress, ObjectMetaTemplate, TemplateRef,
};
