//! Cluster API Provider vSphere's kinds the vcsim controller reads, in CAPV's group and
//! storage version (`infrasim_controllers::crds::capv` serves them when CAPV is absent):
//! `VSphereMachine` (owned by a Cluster API Machine) and the `VSphereVM` it owns. Only the
//! fields read here are typed; the rest of CAPV's objects is kept as written, so CAPV's own
//! objects apply unchanged, and without CAPV a test client can write them as CAPV would.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

/// A VM of a vCenter, as CAPV's VSphereMachine controller writes it.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1beta2",
    kind = "VSphereVM",
    namespaced,
    status = "VSphereVMStatus",
    category = "cluster-api"
)]
#[serde(rename_all = "camelCase")]
pub struct VSphereVMSpec {
    /// The VM's BIOS UUID (`config.uuid`), from which its Node's provider ID is made.
    #[serde(default, rename = "biosUUID", skip_serializing_if = "Option::is_none")]
    pub bios_uuid: Option<String>,
    /// The vCenter (`https://host:port`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    /// Everything else CAPV writes (the clone spec, bootstrapRef, powerOffMode, ...).
    #[serde(flatten)]
    pub rest: BTreeMap<String, Value>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VSphereVMStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub addresses: Option<Vec<String>>,
    /// The VM's managed object ID (`vm-42`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vm_ref: Option<String>,
    #[serde(flatten)]
    pub rest: BTreeMap<String, Value>,
}

/// CAPV's infrastructure machine: owned by a Machine, owner of a VSphereVM.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1beta2",
    kind = "VSphereMachine",
    namespaced,
    status = "VSphereMachineStatus",
    category = "cluster-api"
)]
#[serde(rename_all = "camelCase")]
pub struct VSphereMachineSpec {
    #[serde(
        default,
        rename = "providerID",
        skip_serializing_if = "Option::is_none"
    )]
    pub provider_id: Option<String>,
    #[serde(flatten)]
    pub rest: BTreeMap<String, Value>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct VSphereMachineStatus {
    #[serde(flatten)]
    pub rest: BTreeMap<String, Value>,
}

/// The provider ID of a VM's Node, as CAPV makes it from the BIOS UUID.
pub fn provider_id(bios_uuid: &str) -> String {
    format!("vsphere://{bios_uuid}")
}

/// CAPV's supervisor-mode kinds (`vmware.infrastructure.cluster.x-k8s.io`): the
/// VSphereMachine that owns a vm-operator VirtualMachine.
pub mod supervisor {
    use kube::CustomResource;
    use schemars::JsonSchema;
    use serde::{Deserialize, Serialize};
    use serde_json::Value;
    use std::collections::BTreeMap;

    #[derive(
        CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema,
    )]
    #[kube(
        group = "vmware.infrastructure.cluster.x-k8s.io",
        version = "v1beta2",
        kind = "VSphereMachine",
        namespaced
    )]
    pub struct VSphereMachineSpec {
        #[serde(flatten)]
        pub rest: BTreeMap<String, Value>,
    }
}
