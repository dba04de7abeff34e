//! The vcsim controller's kinds (`vcsim.infrastructure.cluster.x-k8s.io/v1alpha1`), in the
//! shapes CAPV's vcsim controller serves them: `VCenterSimulator`, `ControlPlaneEndpoint` and
//! `EnvVar`. Where we go beyond upstream (more of the model, the Kubernetes versions the
//! templates are made for, conditions), the fields are optional and upstream's objects apply
//! unchanged.

// Printer columns repeat `type_ = "string"` and the like inside one `#[kube(...)]`.
#![allow(clippy::duplicated_attributes)]

use infrasim_controller_runtime::conditions::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The API group of the vcsim controller's kinds.
pub const GROUP: &str = "vcsim.infrastructure.cluster.x-k8s.io";

/// A simulated vCenter: each object is its own simulator, serving on its own port.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "vcsim.infrastructure.cluster.x-k8s.io",
    version = "v1alpha1",
    kind = "VCenterSimulator",
    namespaced,
    status = "VCenterSimulatorStatus",
    category = "cluster-api",
    printcolumn(
        name = "Host",
        type_ = "string",
        json_path = ".status.host",
        description = "Where the simulator serves"
    ),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status",
        description = "Serving"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
pub struct VCenterSimulatorSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<VCenterSimulatorModel>,
    /// Beyond upstream: users besides the administrator of `status`, each with one of
    /// vCenter's system roles; read when the simulator starts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub users: Option<Vec<VCenterSimulatorUser>>,
}

/// A user of a simulator: its name and password from a Secret in the simulator's namespace
/// (keys `username` and `password`, the shape of CAPV's identity Secrets), and its role.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VCenterSimulatorUser {
    /// The Secret holding `username` and `password`.
    pub secret_name: String,
    /// One of vCenter's system roles: Admin, ReadOnly, View, Anonymous, NoAccess.
    pub role: String,
}

/// The inventory a simulator starts with (govmomi's VPX model and its flags).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VCenterSimulatorModel {
    /// The vSphere version (default `7.0.0`): its major version chooses what the simulator
    /// reports, vCenter 7.0.3 or 8.0.3.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vsphere_version: Option<String>,
    /// Datacenters (`DC0`, `DC1`, ...); default 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub datacenter: Option<i32>,
    /// Clusters per datacenter (`DC0_C0`, ...); default 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<i32>,
    /// Hosts per cluster; default 3.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_host: Option<i32>,
    /// Resource pools per cluster besides its root pool `Resources`; default 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool: Option<i32>,
    /// Datastores (`LocalDS_0`, ...); default 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub datastore: Option<i32>,
    /// Beyond upstream: VMs per resource pool and per standalone host; default 2.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vms: Option<i32>,
    /// Beyond upstream: datacenters (the last ones) placed in a folder; default 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub folders: Option<i32>,
    /// Beyond upstream: distributed port groups per datacenter; default 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub portgroups: Option<i32>,
    /// Beyond upstream: the Kubernetes versions (`v1.33.0`) to make VM templates for, as
    /// `ubuntu-2204-kube-<version>` and `ubuntu-2404-kube-<version>` in every datacenter;
    /// default: the versions CAPV's cluster classes use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubernetes_versions: Option<Vec<String>>,
}

/// Where a simulator serves and how to log in.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VCenterSimulatorStatus {
    /// `ip:port` of its HTTPS endpoint (SOAP at `/sdk`, REST at `/rest` and `/api`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub host: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub username: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub password: String,
    /// SHA-256 of its certificate, colon-separated upper-case hex (what govmomi's
    /// `SetThumbprint` and `VSPHERE_TLS_THUMBPRINT` take).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub thumbprint: String,
    /// Beyond upstream: `Ready` while it serves, with why not otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "infrasim_controller_runtime::schema::conditions")]
    pub conditions: Option<Vec<Condition>>,
}

/// A control-plane endpoint (a VIP) reserved on the simulated cloud; its name is the name of
/// the cluster it serves.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "vcsim.infrastructure.cluster.x-k8s.io",
    version = "v1alpha1",
    kind = "ControlPlaneEndpoint",
    namespaced,
    status = "ControlPlaneEndpointStatus",
    category = "cluster-api",
    printcolumn(
        name = "Host",
        type_ = "string",
        json_path = ".status.host",
        description = "Endpoint address"
    ),
    printcolumn(
        name = "Port",
        type_ = "integer",
        json_path = ".status.port",
        description = "Endpoint port"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
pub struct ControlPlaneEndpointSpec {}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct ControlPlaneEndpointStatus {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub host: String,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub port: i32,
}

fn is_zero(n: &i32) -> bool {
    *n == 0
}

/// The variables a cluster template needs to target a simulator and an endpoint.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "vcsim.infrastructure.cluster.x-k8s.io",
    version = "v1alpha1",
    kind = "EnvVar",
    namespaced,
    status = "EnvVarStatus",
    category = "cluster-api",
    printcolumn(
        name = "Cluster",
        type_ = "string",
        json_path = ".spec.cluster.name",
        description = "The workload cluster"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct EnvVarSpec {
    /// The VCenterSimulator the variables target.
    #[serde(
        rename = "vCenterSimulator",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub vcenter_simulator: Option<NamespacedRef>,
    /// The ControlPlaneEndpoint (by default the one named as the cluster).
    #[serde(default)]
    pub control_plane_endpoint: NamespacedRef,
    #[serde(default)]
    pub cluster: ClusterEnvVarSpec,
    /// The vm-operator dependencies (supervisor mode).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vm_operator_dependencies: Option<NamespacedRef>,
    /// Managed object IDs (`datacenter-2`) instead of inventory paths in the variables.
    #[serde(
        default,
        rename = "useMOID",
        skip_serializing_if = "std::ops::Not::not"
    )]
    pub use_moid: bool,
}

/// A reference to an object of a known kind; its namespace defaults to the referrer's.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct NamespacedRef {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
}

/// What the variables say of the Cluster API cluster.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterEnvVarSpec {
    pub name: String,
    #[serde(default)]
    pub namespace: String,
    /// Default: the newest version the simulator's model has templates of (the version of
    /// the template the variables name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubernetes_version: Option<String>,
    /// Default 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_plane_machines: Option<i32>,
    /// Default 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker_machines: Option<i32>,
    /// Index of the datacenter (`DC0`); default 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub datacenter: Option<i32>,
    /// Index of the cluster in the datacenter (`DC0_C0`); default 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<i32>,
    /// Index of the datastore (`LocalDS_0`); default 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub datastore: Option<i32>,
    /// `hard`, `soft` or `trySoft` (the default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power_off_mode: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct EnvVarStatus {
    /// Name to value, for `clusterctl generate cluster` or `envsubst`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variables: Option<BTreeMap<String, String>>,
}

/// What vm-operator needs to run against a vCenter (supervisor mode): storage and VM
/// classes, a content library with images, its provider config and credentials; from a
/// VCenterSimulator of this process (`vCenterSimulatorRef`, defaults as upstream's) or a
/// vCenter given in full.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "vcsim.infrastructure.cluster.x-k8s.io",
    version = "v1alpha1",
    kind = "VMOperatorDependencies",
    // Upstream's resource path (kube-derive would add "es" to the singular).
    plural = "vmoperatordependencies",
    namespaced,
    status = "VMOperatorDependenciesStatus",
    category = "cluster-api",
    printcolumn(
        name = "Ready",
        type_ = "boolean",
        json_path = ".status.ready",
        description = "The dependencies exist"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct VMOperatorDependenciesSpec {
    /// Where vm-operator runs (default namespace `vmware-system-vmop`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operator_ref: Option<VMOperatorRef>,
    #[serde(default, rename = "vCenter", skip_serializing_if = "Option::is_none")]
    pub vcenter: Option<VCenterSpec>,
    #[serde(
        default,
        rename = "vCenterSimulatorRef",
        skip_serializing_if = "Option::is_none"
    )]
    pub vcenter_simulator_ref: Option<NamespacedRef>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub storage_classes: Vec<StorageClassSpec>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub virtual_machine_classes: Vec<VirtualMachineClassSpec>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct VMOperatorRef {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
}

/// A vCenter and the places in it vm-operator uses.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VCenterSpec {
    /// `host:port`.
    #[serde(default, rename = "serverURL")]
    pub server_url: String,
    #[serde(default)]
    pub username: String,
    #[serde(default)]
    pub password: String,
    #[serde(default)]
    pub thumbprint: String,
    #[serde(default)]
    pub datacenter: String,
    #[serde(default)]
    pub cluster: String,
    #[serde(default)]
    pub folder: String,
    #[serde(default)]
    pub resource_pool: String,
    #[serde(default)]
    pub content_library: ContentLibraryConfig,
    #[serde(default)]
    pub distributed_port_group_name: String,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct ContentLibraryConfig {
    #[serde(default)]
    pub name: String,
    /// The backing datastore, by inventory path.
    #[serde(default)]
    pub datastore: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub items: Vec<ContentLibraryItemConfig>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContentLibraryItemConfig {
    /// The item's name (upstream's JSON spells this field `datacenter`).
    #[serde(default, rename = "datacenter")]
    pub name: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<ContentLibraryItemFile>,
    #[serde(default)]
    pub item_type: String,
    #[serde(default)]
    pub product_info: String,
    #[serde(default, rename = "osInfo")]
    pub os_info: String,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct ContentLibraryItemFile {
    #[serde(default)]
    pub name: String,
    /// The file's bytes, base64 as Kubernetes carries `[]byte`.
    #[serde(default)]
    pub content: String,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StorageClassSpec {
    pub name: String,
    /// The storage policy's name (its ID goes in the StorageClass).
    pub storage_policy: String,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct VirtualMachineClassSpec {
    pub name: String,
    #[serde(default)]
    pub cpus: i64,
    /// A quantity (`4G`, `4Gi`).
    #[serde(default)]
    pub memory: String,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct VMOperatorDependenciesStatus {
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ready: bool,
    /// Beyond upstream: `Ready` with why not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "infrasim_controller_runtime::schema::conditions")]
    pub conditions: Option<Vec<Condition>>,
}
