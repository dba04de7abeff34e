//! ViNO's kinds (Airship's "Virtual Nodes", `airship.airshipit.org/v1`): `Vino`, which asks
//! for VM-backed bare-metal hosts on every Kubernetes Node its selector picks, and `IPPool`,
//! the record of the addresses and MACs handed out on one subnet. Field names and casing are
//! upstream's (`dns_servers` included), so ViNO's samples apply unchanged; see
//! `docs/upstream/vino.md` for the shapes and what each field does upstream.

use infrasim_controller_runtime::conditions::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The finalizer upstream's controller adds.
pub const FINALIZER: &str = "vino.airshipit.org";

/// The Node annotation holding what a Node's builder makes (upstream's name).
pub const NETWORK_VALUES: &str = "airshipit.org/vino.network-values";

/// VM-backed hosts on the Kubernetes Nodes `nodeSelector` picks: `count` VMs of each
/// `nodes[]` kind per Node, each a BareMetalHost.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "airship.airshipit.org",
    version = "v1",
    kind = "Vino",
    plural = "vinoes",
    namespaced,
    status = "VinoStatus"
)]
#[serde(rename_all = "camelCase")]
pub struct VinoSpec {
    /// The Nodes that host VMs (upstream copies it into its DaemonSet's pods).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_selector: Option<NodeSelector>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub configuration: Option<CpuConfiguration>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub networks: Vec<Network>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<NodeSet>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub daemon_set_options: Option<DaemonSetOptions>,
    /// What every host's BMC answers to.
    pub bmc_credentials: BmcCredentials,
    /// Node labels copied onto the hosts made on that Node (its rack, its server).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub node_label_keys_to_copy: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pxe_boot_image_host: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pxe_boot_image_host_port: Option<i64>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeSelector {
    pub match_labels: BTreeMap<String, String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CpuConfiguration {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_exclude: Option<String>,
}

/// A network the VMs have an interface on; its static range gives each host's bridge and
/// each VM interface an address, its DHCP range a block per host.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Network {
    pub name: String,
    /// A CIDR, such as `192.168.2.0/20`: the key of the network's IPPool.
    #[serde(default)]
    pub subnet: String,
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dhcp_allocation_start: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dhcp_allocation_stop: Option<String>,
    /// Each host's DHCP block holds 2^bitStep addresses (4 when unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_subnet_bit_step: Option<i64>,
    #[serde(default)]
    pub static_allocation_start: String,
    #[serde(default)]
    pub static_allocation_stop: String,
    #[serde(default, rename = "dns_servers", skip_serializing_if = "Vec::is_empty")]
    pub dns_servers: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub routes: Vec<Route>,
    /// The first MAC handed out on the network (`02:00:00:00:00:00` when unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mac_prefix: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub physical_interface: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub libvirt_template: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bridge_name: Option<String>,
}

/// A route; the gateway `$vinobridge` stands for the host's bridge address.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct Route {
    #[serde(default)]
    pub network: String,
    #[serde(default)]
    pub netmask: String,
    #[serde(default)]
    pub gateway: String,
}

/// One kind of VM (`master`, `worker`: the builder's flavor), `count` of them per Node.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeSet {
    pub name: String,
    #[serde(default)]
    pub count: i64,
    /// Labels for each host, over those copied from its Node.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub bmh_labels: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub libvirt_template: Option<NamespacedName>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub network_interfaces: Vec<NetworkInterface>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub disk_drives: Vec<DiskDrive>,
    /// A Secret whose `template` key is the hosts' network data template.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_data_template: Option<NamespacedName>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root_device_name: Option<String>,
    /// The interface whose MAC the host boots from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boot_interface_name: Option<String>,
    #[serde(default, rename = "enableVNC", skip_serializing_if = "Option::is_none")]
    pub enable_vnc: Option<bool>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct NamespacedName {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub namespace: String,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct NetworkInterface {
    pub name: String,
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_: Option<String>,
    /// The `networks[].name` the interface is on.
    #[serde(default)]
    pub network: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mtu: Option<i64>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub options: BTreeMap<String, String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct DiskDrive {
    #[serde(default)]
    pub name: String,
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub options: Option<DiskOptions>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DiskOptions {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size_gb: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sparse: Option<bool>,
}

/// Upstream's DaemonSet template and images; accepted, and unused here (no DaemonSet runs:
/// the simulator is every Node's hypervisor).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DaemonSetOptions {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespaced_name: Option<NamespacedName>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub libvirt_image: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sushy_image: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vino_builder_image: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_annotator_image: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct BmcCredentials {
    pub username: String,
    pub password: String,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VinoStatus {
    /// Upstream's leftover reference, never written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_map_ref: Option<k8s_openapi::api::core::v1::ObjectReference>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

/// The addresses and MACs handed out on one subnet (`ippool-<subnet with - for :./>`).
/// Allocations are kept for good: the same owner always gets the same address back.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "airship.airshipit.org",
    version = "v1",
    kind = "IPPool",
    plural = "ippools",
    namespaced
)]
#[serde(rename_all = "camelCase")]
pub struct IPPoolSpec {
    pub subnet: String,
    #[serde(default)]
    pub ranges: Vec<Range>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allocated_ranges: Vec<AllocatedRange>,
    #[serde(default, rename = "allocatedIPs")]
    pub allocated_ips: Vec<AllocatedIp>,
    #[serde(default)]
    pub mac_prefix: String,
    #[serde(default, rename = "nextMAC")]
    pub next_mac: String,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct Range {
    pub start: String,
    pub stop: String,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AllocatedRange {
    #[serde(default)]
    pub allocated_to: String,
    pub start: String,
    pub stop: String,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AllocatedIp {
    pub ip: String,
    #[serde(default)]
    pub mac: String,
    #[serde(default)]
    pub allocated_to: String,
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Upstream's sample CR (config/samples/vino_cr_4_workers_1_cp.yaml), as its fields are
    /// documented in docs/upstream/vino.md.
    pub(crate) const SAMPLE: &str = r#"
apiVersion: airship.airshipit.org/v1
kind: Vino
metadata:
  name: vino-test-cr
  labels: {}
spec:
  nodeLabelKeysToCopy: ["airshipit.org/server", "airshipit.org/rack"]
  nodeSelector:
    matchLabels:
      beta.kubernetes.io/os: linux
  configuration:
    cpuExclude: 0-1
  networks:
  - name: management
    libvirtTemplate: management
    subnet: 192.168.2.0/20
    dhcpAllocationStart: 192.168.4.0
    dhcpAllocationStop: 192.168.7.255
    instanceSubnetBitStep: 6
    type: bridge
    staticAllocationStart: 192.168.2.10
    staticAllocationStop: 192.168.2.24
    routes:
    - network: 10.0.0.0
      netmask: 255.255.255.0
      gateway: $vinobridge
    dns_servers: ["135.188.34.124"]
    macPrefix: "52:54:00:06:00:00"
    physicalInterface: enp3s7
    bridgeName: vm-infra
  nodes:
  - name: master
    count: 1
    bmhLabels:
      airshipit.org/k8s-role: master
    networkDataTemplate:
      name: test-template
      namespace: default
    bootInterfaceName: management
    networkInterfaces:
    - name: management
      type: network
      network: management
      mtu: 1500
    enableVNC: true
  - name: worker
    count: 4
    bmhLabels:
      airshipit.org/k8s-role: worker
    networkDataTemplate:
      name: test-template
      namespace: default
    bootInterfaceName: management
    networkInterfaces:
    - name: management
      type: network
      network: management
      mtu: 1500
  bmcCredentials:
    username: admin
    password: passw0rd
"#;

    #[test]
    fn upstreams_sample_reads_with_its_field_names() {
        let vino: Vino = serde_yaml::from_str(SAMPLE).unwrap();
        let net = &vino.spec.networks[0];
        assert_eq!(net.dns_servers, ["135.188.34.124"]);
        assert_eq!(net.instance_subnet_bit_step, Some(6));
        assert_eq!(net.routes[0].gateway, "$vinobridge");
        assert_eq!(vino.spec.nodes[1].count, 4);
        assert_eq!(vino.spec.nodes[0].enable_vnc, Some(true));
        let back = serde_json::to_value(&vino.spec).unwrap();
        assert_eq!(back["networks"][0]["dns_servers"][0], "135.188.34.124");
        assert_eq!(back["nodes"][0]["enableVNC"], true);
    }
}
