//! Cluster API Provider vSphere's kinds (govmomi mode, group
//! `infrastructure.cluster.x-k8s.io`, storage version v1beta2) as the stand-in reads them:
//! `VSphereCluster`, the `VSphereMachine` a Cluster API Machine owns, and the `VSphereVM` that
//! stands for its VM. Only the fields read here are typed; the rest of CAPV's objects is
//! kept as written (`infrasim_controllers::crds::capv` serves them preserving unknown
//! fields), so CAPV's own objects apply unchanged, and the real CAPV can manage them instead.
//! No schema is derived: the CRDs are CAPV's shapes, not these.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::CustomResource;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

/// CAPV's API group in govmomi mode.
pub const GROUP: &str = "infrastructure.cluster.x-k8s.io";

/// A vCenter and the cluster's endpoint, as CAPV's VSphereCluster has them.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1beta2",
    kind = "VSphereCluster",
    namespaced,
    status = "VSphereClusterStatus",
    schema = "disabled"
)]
#[serde(rename_all = "camelCase")]
pub struct VSphereClusterSpec {
    /// The vCenter (`host`, `host:port` or `https://host:port`).
    #[serde(default)]
    pub server: String,
    /// The vCenter certificate's SHA-1 (or SHA-256) thumbprint.
    #[serde(default)]
    pub thumbprint: String,
    /// The credentials: a Secret (`username`, `password`) in the cluster's namespace, or a
    /// cluster-wide VSphereClusterIdentity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity_ref: Option<IdentityRef>,
    /// Everything else (controlPlaneEndpoint, clusterModules, failureDomainSelector, ...).
    #[serde(flatten)]
    pub rest: BTreeMap<String, Value>,
}

/// What CAPV reports of a VSphereCluster (conditions, `initialization`, `vCenterVersion`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct VSphereClusterStatus {
    #[serde(flatten)]
    pub rest: BTreeMap<String, Value>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct IdentityRef {
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub name: String,
}

/// A VM of a vCenter, as CAPV's VSphereMachine controller writes it: the clone spec copied
/// from the VSphereMachine, where its bootstrap data is, and once made, the VM's BIOS UUID.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1beta2",
    kind = "VSphereVM",
    namespaced,
    status = "VSphereVMStatus",
    schema = "disabled"
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

impl VSphereVMSpec {
    /// A string field of the clone spec (`template`, `datacenter`, `folder`, ...).
    pub fn text(&self, field: &str) -> Option<&str> {
        self.rest
            .get(field)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
    }

    /// An integer field of the clone spec (`numCPUs`, `memoryMiB`).
    pub fn number(&self, field: &str) -> Option<i64> {
        self.rest.get(field).and_then(Value::as_i64)
    }

    /// The bootstrap data Secret's name: v1beta2's `bootstrapRef.name` (v1beta1's
    /// ObjectReference has the same field).
    pub fn bootstrap_secret(&self) -> Option<&str> {
        self.rest
            .get("bootstrapRef")
            .and_then(|r| r.get("name"))
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
    }
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
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
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1beta2",
    kind = "VSphereMachine",
    namespaced,
    status = "VSphereMachineStatus",
    schema = "disabled"
)]
#[serde(rename_all = "camelCase")]
pub struct VSphereMachineSpec {
    #[serde(
        default,
        rename = "providerID",
        skip_serializing_if = "Option::is_none"
    )]
    pub provider_id: Option<String>,
    /// The clone spec and the rest of what CAPV's VSphereMachine holds.
    #[serde(flatten)]
    pub rest: BTreeMap<String, Value>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct VSphereMachineStatus {
    #[serde(flatten)]
    pub rest: BTreeMap<String, Value>,
}

/// The fields of a VSphereMachine's spec that are not its VM's clone spec: what the
/// VSphereMachine controller does not copy into the VSphereVM (CAPV copies the clone spec,
/// then the power-off settings, and keeps the VM's own BIOS UUID).
pub const NOT_CLONE_SPEC: &[&str] = &[
    "providerID",
    "failureDomain",
    "naming",
    "namingStrategy",
    "biosUUID",
];

/// The provider ID of a VM's Node, as CAPV makes it from the BIOS UUID.
pub fn provider_id(bios_uuid: &str) -> String {
    format!("vsphere://{bios_uuid}")
}

/// The name of the owner of `kind` in `group` among `refs`.
pub fn owner_named(refs: &[OwnerReference], kind: &str, group: &str) -> Option<String> {
    refs.iter()
        .find(|o| o.kind == kind && o.api_version.split('/').next() == Some(group))
        .map(|o| o.name.clone())
}

/// A cluster-wide identity (cluster-scoped): the Secret in CAPV's own namespace holding a
/// vCenter user, and the namespaces whose clusters may log in with it.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1beta2",
    kind = "VSphereClusterIdentity",
    status = "KeptStatus",
    schema = "disabled"
)]
#[serde(rename_all = "camelCase")]
pub struct VSphereClusterIdentitySpec {
    #[serde(default)]
    pub secret_name: String,
    /// `allowedNamespaces.selector`: absent admits no namespace, an empty selector all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_namespaces: Option<Value>,
    #[serde(flatten)]
    pub rest: BTreeMap<String, Value>,
}

/// A failure domain (cluster-scoped): where in a vCenter its machines go (`topology`), and
/// the tags that mark its region and zone.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1beta2",
    kind = "VSphereFailureDomain",
    schema = "disabled"
)]
#[serde(rename_all = "camelCase")]
pub struct VSphereFailureDomainSpec {
    #[serde(default)]
    pub region: FailureDomainLevel,
    #[serde(default)]
    pub zone: FailureDomainLevel,
    #[serde(default)]
    pub topology: FailureDomainTopology,
}

/// A failure domain's region or zone: the tag `name` of category `tagCategory` that every
/// object of `type` (Datacenter, ComputeCluster or HostGroup) of its topology carries.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct FailureDomainLevel {
    #[serde(default)]
    pub name: String,
    #[serde(default, rename = "type")]
    pub type_: String,
    #[serde(default)]
    pub tag_category: String,
}

/// Where a failure domain's machines go.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct FailureDomainTopology {
    #[serde(default)]
    pub datacenter: String,
    #[serde(default)]
    pub compute_cluster: String,
    /// `vmGroupName` and `hostGroupName`: a VM-host affinity rule of the compute cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hosts: Option<BTreeMap<String, String>>,
    #[serde(default)]
    pub networks: Vec<String>,
    /// Per network: `networkName`, DHCP and nameserver settings, IP pools (merged into the
    /// VM's devices in order).
    #[serde(default)]
    pub network_configurations: Vec<Value>,
    #[serde(default)]
    pub datastore: String,
}

/// A failure domain deployed on a vCenter (cluster-scoped): its `server`, the
/// VSphereFailureDomain it names, whether control planes may go there, and the resource
/// pool and folder its machines are placed in.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1beta2",
    kind = "VSphereDeploymentZone",
    status = "KeptStatus",
    schema = "disabled"
)]
#[serde(rename_all = "camelCase")]
pub struct VSphereDeploymentZoneSpec {
    #[serde(default)]
    pub server: String,
    #[serde(default)]
    pub failure_domain: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_plane: Option<bool>,
    /// `resourcePool` and `folder`.
    #[serde(default)]
    pub placement_constraint: BTreeMap<String, String>,
}

/// A status kept as written (conditions, `ready`, the v1beta1 copy of the conditions).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct KeptStatus {
    #[serde(flatten)]
    pub rest: BTreeMap<String, Value>,
}

impl KeptStatus {
    /// `status.ready`, if reported.
    pub fn ready(&self) -> Option<bool> {
        self.rest.get("ready").and_then(Value::as_bool)
    }
}

/// vm-operator's kinds as CAPV's supervisor mode writes them and the vcsim family's
/// vm-operator stand-in reads them (both sides use these types, so neither imports the
/// other).
pub mod vmoperator {
    use kube::CustomResource;
    use schemars::JsonSchema;
    use serde::{Deserialize, Serialize};
    use serde_json::Value;
    use std::collections::BTreeMap;

    /// The fields of vm-operator's VirtualMachine read here; the rest is kept as written.
    #[derive(
        CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema,
    )]
    #[kube(
        group = "vmoperator.vmware.com",
        version = "v1alpha6",
        kind = "VirtualMachine",
        namespaced,
        status = "VirtualMachineStatus"
    )]
    #[serde(rename_all = "camelCase")]
    pub struct VirtualMachineSpec {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub image_name: Option<String>,
        /// `PoweredOn` (the default) or `PoweredOff`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub power_state: Option<String>,
        #[serde(flatten)]
        pub rest: BTreeMap<String, Value>,
    }

    #[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
    #[serde(rename_all = "camelCase")]
    pub struct VirtualMachineStatus {
        #[serde(default, rename = "uniqueID", skip_serializing_if = "Option::is_none")]
        pub unique_id: Option<String>,
        #[serde(flatten)]
        pub rest: BTreeMap<String, Value>,
    }
}

/// CAPV's supervisor-mode kinds (`vmware.infrastructure.cluster.x-k8s.io`): the
/// VSphereMachine that owns a vm-operator VirtualMachine.
pub mod supervisor {
    use kube::CustomResource;
    use serde::{Deserialize, Serialize};
    use serde_json::Value;
    use std::collections::BTreeMap;

    /// A machine of a supervisor cluster: its VM class, image, storage class, power-off
    /// mode (kept as written); `providerID` once its VirtualMachine is up.
    #[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
    #[kube(
        group = "vmware.infrastructure.cluster.x-k8s.io",
        version = "v1beta2",
        kind = "VSphereMachine",
        namespaced,
        status = "Status",
        schema = "disabled"
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

    /// A supervisor cluster: its control plane endpoint (kept as written).
    #[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
    #[kube(
        group = "vmware.infrastructure.cluster.x-k8s.io",
        version = "v1beta2",
        kind = "VSphereCluster",
        namespaced,
        status = "Status",
        schema = "disabled"
    )]
    pub struct VSphereClusterSpec {
        #[serde(flatten)]
        pub rest: BTreeMap<String, Value>,
    }

    /// Credentials a supervisor cluster's workloads get for the supervisor (CAPV's
    /// ProviderServiceAccount): a service account in the cluster's namespace with `rules`,
    /// whose token is copied into the workload cluster as `targetSecretName` in
    /// `targetNamespace`. `ref` names the VSphereCluster it is for.
    #[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
    #[kube(
        group = "vmware.infrastructure.cluster.x-k8s.io",
        version = "v1beta2",
        kind = "ProviderServiceAccount",
        namespaced,
        schema = "disabled"
    )]
    #[serde(rename_all = "camelCase")]
    pub struct ProviderServiceAccountSpec {
        #[serde(default, rename = "ref", skip_serializing_if = "Option::is_none")]
        pub cluster_ref: Option<NamedRef>,
        #[serde(default)]
        pub rules: Vec<Value>,
        #[serde(default)]
        pub target_namespace: String,
        #[serde(default)]
        pub target_secret_name: String,
    }

    /// The part of an object reference CAPV reads: its name.
    #[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
    pub struct NamedRef {
        #[serde(default)]
        pub name: String,
    }

    /// What CAPV reports of either kind (conditions, `initialization`, addresses, ...).
    #[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
    pub struct Status {
        #[serde(flatten)]
        pub rest: BTreeMap<String, Value>,
    }
}
