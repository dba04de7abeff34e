//! The kinds of the Support Infra Provider (Airship's SIP, `airship.airshipit.org/v1`
//! `SIPCluster`) and of metal3's `BareMetalHost` (`metal3.io/v1alpha1`) it reads, with the
//! field names and casing upstream uses, so SIP's samples and metal3's host YAML apply
//! unchanged (see `docs/upstream/sip.md` for the shapes and where we go beyond them).

// Printer columns repeat `type_ = "string"` and the like inside one `#[kube(...)]`.
#![allow(clippy::duplicated_attributes)]

use infrasim_controller_runtime::conditions::Condition;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The labels SIP puts on the hosts it claims (upstream's three), and the two this project's
/// issue names beside them (`scheduled`, `workload-cluster`), which cost nothing to keep too.
pub mod labels {
    pub const CLUSTER_NAMESPACE: &str = "sip.airshipit.org/cluster-namespace";
    pub const CLUSTER_NAME: &str = "sip.airshipit.org/cluster-name";
    pub const NODE_TYPE: &str = "sip.airshipit.org/node-type";
    pub const SCHEDULED: &str = "sip.airshipit.org/scheduled";
    pub const WORKLOAD_CLUSTER: &str = "sip.airshipit.org/workload-cluster";
    /// Every label a claim sets, so a release removes exactly these.
    pub const ALL: [&str; 5] = [
        CLUSTER_NAMESPACE,
        CLUSTER_NAME,
        NODE_TYPE,
        SCHEDULED,
        WORKLOAD_CLUSTER,
    ];
}

/// The finalizer upstream's sample carries; we add it ourselves so a deletion always releases.
pub const FINALIZER: &str = "sip.airship.airshipit.org/finalizer";

/// The two roles SIP knows, as the keys of `spec.nodes` and the value of the node-type label.
pub const CONTROL_PLANE: &str = "ControlPlane";
pub const WORKER: &str = "Worker";

/// A physical (or VM-backed) host, as metal3 describes it.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "metal3.io",
    version = "v1alpha1",
    kind = "BareMetalHost",
    namespaced,
    shortname = "bmh",
    shortname = "bmhost",
    status = "BareMetalHostStatus",
    printcolumn(
        name = "State",
        type_ = "string",
        json_path = ".status.provisioning.state"
    ),
    printcolumn(
        name = "Consumer",
        type_ = "string",
        json_path = ".spec.consumerRef.name"
    ),
    printcolumn(name = "Online", type_ = "string", json_path = ".spec.online"),
    printcolumn(name = "Error", type_ = "string", json_path = ".status.errorType"),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct BareMetalHostSpec {
    #[serde(default)]
    pub online: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bmc: Option<BmcDetails>,
    #[serde(
        default,
        rename = "bootMACAddress",
        skip_serializing_if = "Option::is_none"
    )]
    pub boot_mac_address: Option<String>,
    /// A Secret whose `networkData` key holds the host's OpenStack-style network data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_data: Option<SecretReference>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_data: Option<SecretReference>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consumer_ref: Option<ObjectReference>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub externally_provisioned: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hardware_profile: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<HostImage>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root_device_hints: Option<RootDeviceHints>,
    /// `UEFI` (the default), `UEFISecureBoot` or `legacy`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boot_mode: Option<String>,
}

/// Which disk the host's image goes on.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RootDeviceHints {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_name: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BmcDetails {
    /// `redfish+https://10.0.0.1/redfish/v1/Systems/1`, `ipmi://10.0.0.1`, …
    pub address: String,
    /// A Secret in the host's namespace with `username` and `password`.
    pub credentials_name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disable_certificate_verification: Option<bool>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct SecretReference {
    #[serde(default)]
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HostImage {
    #[serde(default)]
    pub url: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checksum: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checksum_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BareMetalHostStatus {
    /// `OK`, `discovered`, `error`, ...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operational_status: Option<String>,
    /// `registration error`, `inspection error`, `provisioning error`, ...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_message: Option<String>,
    /// How many errors since the last operation that succeeded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_count: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub powered_on: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provisioning: Option<Provisioning>,
    /// What inspection found.
    #[serde(default, rename = "hardware", skip_serializing_if = "Option::is_none")]
    pub hardware: Option<HardwareDetails>,
    /// The last credentials the BMC accepted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub good_credentials: Option<CredentialsStatus>,
    /// The last credentials tried.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tried_credentials: Option<CredentialsStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operation_history: Option<OperationHistory>,
    /// When the status was last written (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_updated: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Provisioning {
    #[serde(default, rename = "ID")]
    pub id: String,
    /// `available`, `provisioning`, `provisioned`, `deprovisioning`, …
    #[serde(default)]
    pub state: String,
    /// The image last provisioned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<HostImage>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root_device_hints: Option<RootDeviceHints>,
    /// `UEFI`, `UEFISecureBoot` or `legacy`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boot_mode: Option<String>,
}

/// A Secret and the resourceVersion it was read at.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CredentialsStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials: Option<SecretReference>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials_version: Option<String>,
}

/// When each operation started and ended (RFC 3339).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct OperationHistory {
    #[serde(default)]
    pub register: OperationMetric,
    #[serde(default)]
    pub inspect: OperationMetric,
    #[serde(default)]
    pub provision: OperationMetric,
    #[serde(default)]
    pub deprovision: OperationMetric,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct OperationMetric {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<String>,
}

/// The hardware inspection found, in metal3's shape.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HardwareDetails {
    #[serde(default)]
    pub system_vendor: HardwareSystemVendor,
    #[serde(default)]
    pub firmware: Firmware,
    #[serde(default)]
    pub ram_mebibytes: i64,
    #[serde(default)]
    pub nics: Vec<Nic>,
    #[serde(default)]
    pub storage: Vec<Storage>,
    #[serde(default)]
    pub cpu: Cpu,
    #[serde(default)]
    pub hostname: String,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HardwareSystemVendor {
    #[serde(default)]
    pub manufacturer: String,
    #[serde(default)]
    pub product_name: String,
    #[serde(default)]
    pub serial_number: String,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct Firmware {
    #[serde(default)]
    pub bios: Bios,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct Bios {
    #[serde(default)]
    pub date: String,
    #[serde(default)]
    pub vendor: String,
    #[serde(default)]
    pub version: String,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Nic {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub model: String,
    #[serde(default)]
    pub mac: String,
    #[serde(default)]
    pub ip: String,
    #[serde(default)]
    pub speed_gbps: i64,
    #[serde(default)]
    pub pxe: bool,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Storage {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub rotational: bool,
    /// `HDD`, `SSD` or `NVME`.
    #[serde(default, rename = "type")]
    pub type_: String,
    #[serde(default)]
    pub size_bytes: i64,
    #[serde(default)]
    pub vendor: String,
    #[serde(default)]
    pub model: String,
    #[serde(default)]
    pub serial_number: String,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Cpu {
    #[serde(default)]
    pub arch: String,
    #[serde(default)]
    pub model: String,
    #[serde(default)]
    pub clock_megahertz: f64,
    #[serde(default)]
    pub flags: Vec<String>,
    #[serde(default)]
    pub count: i64,
}

/// Hosts for one tenant cluster's control plane and workers, with the services in front of
/// them.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "airship.airshipit.org",
    version = "v1",
    kind = "SIPCluster",
    plural = "sipclusters",
    namespaced,
    status = "SIPClusterStatus",
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status"
    ),
    printcolumn(
        name = "Reason",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].reason"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct SIPClusterSpec {
    /// By role: `ControlPlane` and `Worker`.
    #[serde(default)]
    pub nodes: BTreeMap<String, NodeSet>,
    #[serde(default)]
    pub services: Services,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeSet {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_selector: Option<LabelSelector>,
    /// A host label to spread over: no two hosts of the role share its value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology_key: Option<String>,
    #[serde(default)]
    pub count: NodeCount,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, JsonSchema)]
pub struct NodeCount {
    #[serde(default)]
    pub active: i32,
    #[serde(default)]
    pub standby: i32,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Services {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub load_balancer_control_plane: Vec<LoadBalancerControlPlane>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub load_balancer_worker: Vec<LoadBalancerWorker>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub jump_host: Vec<JumpHost>,
    /// An OIDC provider for the tenant's API servers (SIP's `auth` service of early 2021).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub auth: Vec<AuthService>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AuthService {
    #[serde(flatten)]
    pub common: ServiceCommon,
    pub node_port: i32,
    /// A Secret in the SIPCluster's namespace with the provider's TLS (`tls.crt`, `tls.key`)
    /// and the CA that signed it (`ca.crt`), which the tenant's API servers trust.
    pub ca_secret: String,
}

/// What every service has.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServiceCommon {
    #[serde(default)]
    pub image: String,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_labels: BTreeMap<String, String>,
    /// The network `id` in each host's network data whose address the service uses.
    #[serde(default)]
    pub node_interface_id: String,
    #[serde(default, rename = "clusterIP", skip_serializing_if = "Option::is_none")]
    pub cluster_ip: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LoadBalancerControlPlane {
    #[serde(flatten)]
    pub common: ServiceCommon,
    pub node_port: i32,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LoadBalancerWorker {
    #[serde(flatten)]
    pub common: ServiceCommon,
    pub node_port_range: PortRange,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, JsonSchema)]
pub struct PortRange {
    pub start: i32,
    pub end: i32,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct JumpHost {
    #[serde(flatten)]
    pub common: ServiceCommon,
    pub node_port: i32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bmc: Option<JumpHostBmc>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ssh_authorized_keys: Vec<String>,
    /// A Secret in the SIPCluster's namespace whose keys are private keys for the hosts.
    #[serde(rename = "nodeSSHPrivateKeys")]
    pub node_ssh_private_keys: String,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct JumpHostBmc {
    #[serde(default)]
    pub proxy: bool,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SIPClusterStatus {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// The hosts chosen, by role (ours: upstream reports only the condition).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub hosts: BTreeMap<String, Vec<ChosenHost>>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ChosenHost {
    pub name: String,
    pub namespace: String,
    /// Its address on the services' network (`nodeInterfaceId`), when one names it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip: Option<String>,
    /// Held in reserve: it takes an active host's place when one fails.
    #[serde(default)]
    pub standby: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Upstream's sample SIPCluster, in its field names (abridged keys, same shapes).
    const SAMPLE: &str = r#"
apiVersion: airship.airshipit.org/v1
kind: SIPCluster
metadata:
  name: sipcluster-system
  namespace: sipcluster-system
  finalizers: [sip.airship.airshipit.org/finalizer]
spec:
  nodes:
    ControlPlane:
      labelSelector:
        matchLabels: {vino.airshipit.org/flavor: control-plane}
      topologyKey: vino.airshipit.org/rack
      count: {active: 1, standby: 1}
    Worker:
      labelSelector:
        matchLabels: {vino.airshipit.org/flavor: worker}
      topologyKey: vino.airshipit.org/host
      count: {active: 1, standby: 1}
  services:
    jumpHost:
      - image: quay.io/airshipit/jump-host:latest
        nodePort: 30000
        nodeInterfaceId: oam-ipv4
        bmc: {proxy: false}
        sshAuthorizedKeys: ["ssh-rsa AAAA example-key"]
        nodeSSHPrivateKeys: ssh-private-keys
    loadBalancerControlPlane:
      - image: haproxy:2.3.2
        nodePort: 30001
        nodeInterfaceId: oam-ipv4
    loadBalancerWorker:
      - image: haproxy:2.3.2
        nodePortRange: {start: 30002, end: 30011}
        nodeInterfaceId: oam-ipv4
"#;

    #[test]
    fn upstreams_sample_reads_as_written() {
        let c: SIPCluster = serde_yaml::from_str(SAMPLE).unwrap();
        let cp = &c.spec.nodes[CONTROL_PLANE];
        assert_eq!(cp.topology_key.as_deref(), Some("vino.airshipit.org/rack"));
        assert_eq!((cp.count.active, cp.count.standby), (1, 1));
        let jump = &c.spec.services.jump_host[0];
        assert_eq!(jump.node_ssh_private_keys, "ssh-private-keys");
        assert_eq!(jump.common.node_interface_id, "oam-ipv4");
        let workers = &c.spec.services.load_balancer_worker[0];
        assert_eq!(
            (workers.node_port_range.start, workers.node_port_range.end),
            (30002, 30011)
        );
        // And back out in the same names.
        let out = serde_json::to_value(&c.spec).unwrap();
        assert_eq!(
            out["services"]["jumpHost"][0]["nodeSSHPrivateKeys"],
            "ssh-private-keys"
        );
        assert_eq!(
            out["services"]["loadBalancerControlPlane"][0]["nodePort"],
            30001
        );
    }

    #[test]
    fn a_host_reads_in_metal3s_names() {
        let h: BareMetalHost = serde_yaml::from_str(
            "apiVersion: metal3.io/v1alpha1\nkind: BareMetalHost\nmetadata: {name: rdm9r006o001}\nspec:\n  online: true\n  bootMACAddress: 00:3b:8b:0c:ec:8b\n  bmc:\n    address: redfish+https://32.68.51.12/redfish/v1/Systems/System.Embedded.1\n    credentialsName: rdm9r006o001-bmc-credentials\n    disableCertificateVerification: true\n  networkData: {name: rdm9r006o001-networkdata, namespace: sipcluster-system}\n",
        )
        .unwrap();
        assert!(h.spec.online);
        assert_eq!(
            h.spec.boot_mac_address.as_deref(),
            Some("00:3b:8b:0c:ec:8b")
        );
        assert_eq!(
            h.spec.bmc.unwrap().credentials_name,
            "rdm9r006o001-bmc-credentials"
        );
        assert_eq!(
            h.spec.network_data.unwrap().name,
            "rdm9r006o001-networkdata"
        );
    }
}
