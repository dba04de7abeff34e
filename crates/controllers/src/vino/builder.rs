//! What ViNO makes on one Kubernetes Node, worked out without I/O: the per-host network
//! values (bridge address, DHCP block, `$vinobridge` routes), and per VM ("domain") its
//! name, interfaces with their addresses and MACs, BareMetalHost name, labels and BMC
//! address. The result is written three ways: as the Node's `airshipit.org/vino.network-values`
//! annotation (upstream's builder input, same YAML fields), as VMs in the simulator, and as
//! BareMetalHosts with their Secrets.

use super::ipam;
use super::types::{IPPoolSpec, Network, NodeSet, Range, Route, Vino};
use kube::ResourceExt;
use serde::Serialize;
use std::collections::BTreeMap;

/// The Node a builder runs on, as ViNO reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct HostNode {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    /// The Node's first InternalIP (upstream's BMC endpoint; here the vCenter's Redfish
    /// service answers for the VMs instead, see `HostFacts::bmc_address`).
    pub internal_ip: String,
}

/// The annotation's value: upstream's `Builder`, with its JSON names.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Builder {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pxe_boot_image_host: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pxe_boot_image_host_port: Option<i64>,
    pub networks: Vec<HostNetwork>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub configuration: Option<super::types::CpuConfiguration>,
    pub domains: Vec<Domain>,
    pub node_count: usize,
}

/// A network as one host sees it: the spec's fields and the host's own bridge and block.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct HostNetwork {
    #[serde(flatten)]
    pub network: Network,
    #[serde(rename = "bridgeIP")]
    pub bridge_ip: String,
    #[serde(rename = "bridgeMAC")]
    pub bridge_mac: String,
    pub range: Range,
}

/// One VM on the host.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Domain {
    /// `<nodeset>-<index>`: the libvirt domain name upstream, and the BMC's system id.
    pub name: String,
    pub role: String,
    #[serde(rename = "bootMACAddress")]
    pub boot_mac_address: String,
    #[serde(rename = "enableVNC")]
    pub enable_vnc: bool,
    pub vnc_password: String,
    pub interfaces: Vec<Interface>,
    /// What the host is known by in the plane and in the simulator (not in the annotation).
    #[serde(skip)]
    pub host: HostFacts,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Interface {
    pub ip_address: String,
    pub net_mask: String,
    pub mac_address: String,
    pub name: String,
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_: Option<String>,
    pub network: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mtu: Option<i64>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub options: BTreeMap<String, String>,
}

/// The BareMetalHost a domain becomes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HostFacts {
    /// `<cr-namespace>-<cr-name>-<node>-<nodeset>-<index>`.
    pub bmh_name: String,
    pub labels: BTreeMap<String, String>,
    /// `redfish+https://<Redfish service>/redfish/v1/Systems/<BareMetalHost name>`: the
    /// system of the domain's VM on the Redfish service of the vCenter holding it.
    pub bmc_address: String,
    pub root_device_name: String,
    /// The nodeset the domain is of (its flavor).
    pub flavor: String,
}

/// What `vino` makes on `node`, allocating from `pools` (by subnet, each already holding
/// its network's static range); `node_count` is how many Nodes the selector picks, and
/// `redfish` where the Redfish service answering for the VMs listens (host and port).
pub fn build(
    vino: &Vino,
    node: &HostNode,
    node_count: usize,
    pools: &mut BTreeMap<String, IPPoolSpec>,
    redfish: &str,
) -> Result<Builder, String> {
    let mut networks = Vec::new();
    for net in &vino.spec.networks {
        let pool = pool_of(pools, net)?;
        let range = static_range(net);
        let bridge = ipam::allocate(pool, &range, &node.name)?;
        let block = ipam::host_block(pool, net, &node.name)?;
        let mut network = net.clone();
        network.routes = routes_through(&net.routes, &bridge.ip);
        networks.push(HostNetwork {
            network,
            bridge_ip: bridge.ip,
            bridge_mac: bridge.mac,
            range: block,
        });
    }
    let mut domains = Vec::new();
    for set in &vino.spec.nodes {
        for index in 0..set.count.max(0) {
            domains.push(domain(vino, node, set, index, pools, redfish)?);
        }
    }
    Ok(Builder {
        pxe_boot_image_host: vino.spec.pxe_boot_image_host.clone(),
        pxe_boot_image_host_port: vino.spec.pxe_boot_image_host_port,
        networks,
        configuration: vino.spec.configuration.clone(),
        domains,
        node_count,
    })
}

fn pool_of<'a>(
    pools: &'a mut BTreeMap<String, IPPoolSpec>,
    net: &Network,
) -> Result<&'a mut IPPoolSpec, String> {
    pools
        .get_mut(&net.subnet)
        .ok_or_else(|| format!("no IPPool for subnet {}", net.subnet))
}

fn static_range(net: &Network) -> Range {
    Range {
        start: net.static_allocation_start.clone(),
        stop: net.static_allocation_stop.clone(),
    }
}

/// `routes` with the gateway `$vinobridge` replaced by the host's bridge address.
fn routes_through(routes: &[Route], bridge_ip: &str) -> Vec<Route> {
    routes
        .iter()
        .map(|r| Route {
            gateway: if r.gateway == "$vinobridge" {
                bridge_ip.to_string()
            } else {
                r.gateway.clone()
            },
            ..r.clone()
        })
        .collect()
}

fn domain(
    vino: &Vino,
    node: &HostNode,
    set: &NodeSet,
    index: i64,
    pools: &mut BTreeMap<String, IPPoolSpec>,
    redfish: &str,
) -> Result<Domain, String> {
    let name = format!("{}-{index}", set.name);
    let bmh_name = format!(
        "{}-{}-{}-{name}",
        vino.namespace().unwrap_or_else(|| "default".into()),
        vino.name_any(),
        node.name
    );
    let mut interfaces = Vec::new();
    for iface in &set.network_interfaces {
        let net = vino
            .spec
            .networks
            .iter()
            .find(|n| n.name == iface.network)
            .ok_or_else(|| {
                format!(
                    "Interface {} doesn't have a matching network defined",
                    iface.network
                )
            })?;
        let owner = format!("{bmh_name}/{}", net.name);
        let given = ipam::allocate(pool_of(pools, net)?, &static_range(net), &owner)?;
        interfaces.push(Interface {
            ip_address: given.ip,
            net_mask: ipam::netmask(&net.subnet)?,
            mac_address: given.mac,
            name: iface.name.clone(),
            type_: iface.type_.clone(),
            network: iface.network.clone(),
            mtu: iface.mtu,
            options: iface.options.clone(),
        });
    }
    let boot_mac_address = interfaces
        .iter()
        .find(|i| Some(&i.name) == set.boot_interface_name.as_ref())
        .map(|i| i.mac_address.clone())
        .unwrap_or_default();
    Ok(Domain {
        host: HostFacts {
            labels: host_labels(vino, node, set),
            // Upstream names `<Node InternalIP>:8000`, where sushy-tools runs on every Node;
            // our Nodes are not machines, and the VMs' BMCs are the vCenter's service.
            bmc_address: format!("redfish+https://{redfish}/redfish/v1/Systems/{bmh_name}"),
            root_device_name: set
                .root_device_name
                .clone()
                .filter(|d| !d.is_empty())
                .unwrap_or_else(|| "/dev/vda".into()),
            flavor: set.name.clone(),
            bmh_name,
        },
        role: set.name.clone(),
        boot_mac_address,
        enable_vnc: set.enable_vnc.unwrap_or(false),
        vnc_password: vino.spec.bmc_credentials.password.clone(),
        interfaces,
        name,
    })
}

/// The label naming a host's flavor (its nodeset: `master`, `worker`). Beyond upstream, which
/// labels hosts only as `bmhLabels` say: SIP selects hosts by flavor, and this costs nothing.
pub const FLAVOR: &str = "vino.airshipit.org/flavor";

/// The host's flavor, then the Node's labels named by `nodeLabelKeysToCopy` (empty when the
/// Node lacks one, as upstream does), then the nodeset's `bmhLabels` over them.
fn host_labels(vino: &Vino, node: &HostNode, set: &NodeSet) -> BTreeMap<String, String> {
    let mut labels = BTreeMap::from([(FLAVOR.to_string(), set.name.clone())]);
    labels.extend(
        vino.spec
            .node_label_keys_to_copy
            .iter()
            .map(|k| (k.clone(), node.labels.get(k).cloned().unwrap_or_default())),
    );
    labels.extend(set.bmh_labels.clone());
    labels
}

/// A domain's network data in OpenStack's shape, as upstream's sample template renders it
/// (in JSON where the template writes YAML):
/// a `phy` link per interface, and per network its id, type, link, address, netmask, DNS
/// servers and routes (gateways already resolved). SIP reads a host's address from it by
/// network id. The text of the template Secret a nodeset names is not run: it is a Go
/// text/template with sprig's functions, which no Rust crate runs, so every host gets this
/// shape whatever the template says.
pub fn network_data(domain: &Domain, networks: &[HostNetwork]) -> Result<String, String> {
    let links: Vec<serde_json::Value> = domain
        .interfaces
        .iter()
        .map(|i| {
            let mut link = serde_json::json!({
                "id": i.name, "name": i.name, "type": "phy",
                "mtu": i.mtu, "ethernet_mac_address": i.mac_address,
            });
            for (k, v) in &i.options {
                link[k] = serde_json::Value::String(v.clone());
            }
            link
        })
        .collect();
    let nets: Vec<serde_json::Value> = networks
        .iter()
        .filter_map(|hn| {
            let i = domain
                .interfaces
                .iter()
                .find(|i| i.network == hn.network.name)?;
            let mut n = serde_json::json!({
                "id": hn.network.name, "type": hn.network.type_, "link": i.name,
                "ip_address": i.ip_address, "netmask": i.net_mask,
                "dns_nameservers": hn.network.dns_servers,
            });
            if !hn.network.routes.is_empty() {
                n["routes"] = serde_json::to_value(&hn.network.routes).ok()?;
            }
            Some(n)
        })
        .collect();
    // JSON (cloud-init's own network_data.json form, and YAML too): a YAML 1.1 reader would
    // take an unquoted MAC such as 52:54:00:06:00:01 for a base-60 number.
    serde_json::to_string_pretty(&serde_json::json!({"links": links, "networks": nets}))
        .map_err(|e| format!("network data: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vino {
        let mut v: Vino = serde_yaml::from_str(super::super::types::tests::SAMPLE).unwrap();
        v.metadata.namespace = Some("default".into());
        v
    }

    fn node(name: &str, ip: &str) -> HostNode {
        HostNode {
            name: name.into(),
            labels: [
                ("airshipit.org/server".to_string(), "s1".to_string()),
                ("beta.kubernetes.io/os".to_string(), "linux".to_string()),
            ]
            .into(),
            internal_ip: ip.into(),
        }
    }

    fn pools(v: &Vino) -> BTreeMap<String, IPPoolSpec> {
        v.spec
            .networks
            .iter()
            .map(|n| {
                let mut p = ipam::new_pool(n).unwrap();
                ipam::register(&mut p, n).unwrap();
                (n.subnet.clone(), p)
            })
            .collect()
    }

    /// The build of the Node `node1` (10.0.0.5), the first of its ViNO's.
    fn node1(v: &Vino, pools: &mut BTreeMap<String, IPPoolSpec>) -> Builder {
        build(v, &node("node1", "10.0.0.5"), 1, pools, "127.0.0.1:8989").unwrap()
    }

    #[test]
    fn a_node_gets_its_bridge_block_and_one_domain_per_vm_with_upstreams_names() {
        let v = sample();
        let mut pools = pools(&v);
        let b = node1(&v, &mut pools);
        assert_eq!(b.networks[0].bridge_ip, "192.168.2.10");
        assert_eq!(b.networks[0].network.routes[0].gateway, "192.168.2.10");
        assert_eq!(b.networks[0].range.stop, "192.168.4.63", "bit step 6");
        assert_eq!(b.domains.len(), 5);
        let master = &b.domains[0];
        assert_eq!(master.name, "master-0");
        assert_eq!(master.host.bmh_name, "default-vino-test-cr-node1-master-0");
        assert_eq!(master.boot_mac_address, "52:54:00:06:00:01");
        assert_eq!(master.interfaces[0].ip_address, "192.168.2.11");
        assert_eq!(
            master.host.bmc_address,
            "redfish+https://127.0.0.1:8989/redfish/v1/Systems/default-vino-test-cr-node1-master-0"
        );
        let labels = &b.domains[4].host.labels;
        assert_eq!(labels["airshipit.org/server"], "s1");
        assert_eq!(
            labels["airshipit.org/rack"], "",
            "missing on the Node: empty"
        );
        assert_eq!(labels["airshipit.org/k8s-role"], "worker");
        assert_eq!(labels[FLAVOR], "worker");
        // The same again gives the same; a second Node gets the next addresses.
        let again = node1(&v, &mut pools);
        assert_eq!(again, b);
        let other = build(
            &v,
            &node("node2", "10.0.0.6"),
            2,
            &mut pools,
            "127.0.0.1:8989",
        )
        .unwrap();
        assert_eq!(other.networks[0].bridge_ip, "192.168.2.16");
        assert_eq!(other.networks[0].range.start, "192.168.4.64");
        let yaml = serde_yaml::to_string(&b).unwrap();
        for field in [
            "bridgeIP:",
            "bootMACAddress:",
            "nodeCount: 1",
            "dns_servers:",
        ] {
            assert!(yaml.contains(field), "{field} in {yaml}");
        }
    }

    #[test]
    fn network_data_names_each_network_with_its_address_and_a_bad_interface_is_refused() {
        let v = sample();
        let mut pools = pools(&v);
        let b = node1(&v, &mut pools);
        let data = network_data(&b.domains[1], &b.networks).unwrap();
        let parsed: serde_json::Value = serde_yaml::from_str(&data).unwrap();
        assert_eq!(parsed["networks"][0]["id"], "management");
        assert_eq!(parsed["networks"][0]["ip_address"], "192.168.2.12");
        assert_eq!(
            parsed["networks"][0]["routes"][0]["gateway"],
            "192.168.2.10"
        );
        assert_eq!(
            parsed["links"][0]["ethernet_mac_address"],
            "52:54:00:06:00:02"
        );
        let mut bad = sample();
        bad.spec.nodes[0].network_interfaces[0].network = "storage".into();
        let why = build(&bad, &node("n", "10.0.0.7"), 1, &mut pools, "h:1").unwrap_err();
        assert_eq!(
            why,
            "Interface storage doesn't have a matching network defined"
        );
    }
}
