//! The jump host SIP puts beside a tenant cluster's hosts (`jumphost-<name>`): an SSH
//! `Deployment` on a `NodePort` `Service`, a `Secret` with each host's BMC address and
//! credentials (`hosts`, JSON) and an `ssh_config` naming the private keys of the
//! `nodeSSHPrivateKeys` Secret, and a `ConfigMap` with the operators' authorized keys and a
//! `host` script that lists the hosts and reboots one through its BMC's Redfish API.

use super::services::{deployment, meta, node_port_service, pod_labels, secret_volume, Objects};
use super::types::{JumpHost, SIPCluster};
use k8s_openapi::api::core::v1::{
    ConfigMap, ConfigMapVolumeSource, Container, ContainerPort, HostAlias, KeyToPath, PodSpec,
    Secret, ServicePort, Volume, VolumeMount,
};
use k8s_openapi::ByteString;
use kube::ResourceExt;
use serde_json::json;
use std::collections::BTreeMap;

/// Where the pod finds what the Secret and ConfigMap hold.
const HOSTS_FILE: &str = "/etc/opt/sip/hosts";
const KEYS_DIR: &str = "/etc/opt/sip/ssh-private-keys";

/// A host the jump host reaches: its name, its address on the service's network, and its
/// BMC (address and credentials).
#[derive(Debug, Clone, PartialEq)]
pub struct Reachable {
    pub name: String,
    pub ip: Option<String>,
    pub bmc_ip: String,
    pub username: String,
    pub password: String,
}

/// `jumphost-<name>`.
pub fn name(cluster: &str) -> String {
    format!("jumphost-{cluster}")
}

/// The host part of a BMC address (`redfish+https://10.0.0.1:8000/redfish/v1/Systems/1` →
/// `10.0.0.1:8000`), as the jump host reaches it.
pub fn bmc_host(address: &str) -> String {
    let rest = address.split_once("://").map_or(address, |(_, r)| r);
    rest.split('/').next().unwrap_or(rest).to_string()
}

/// Every key of `keys` that is not an OpenSSH authorized-keys line (`<type> <base64> [comment]`).
pub fn invalid_keys(keys: &[String]) -> Vec<String> {
    use base64::Engine;
    keys.iter()
        .filter(|line| {
            let mut parts = line.split_whitespace();
            let (Some(kind), Some(blob)) = (parts.next(), parts.next()) else {
                return true;
            };
            let known =
                kind.starts_with("ssh-") || kind.starts_with("ecdsa-") || kind.starts_with("sk-");
            let decoded = base64::engine::general_purpose::STANDARD.decode(blob);
            // The blob starts with its own type name, length-prefixed.
            !known
                || !decoded.is_ok_and(|b| {
                    b.len() > 4 + kind.len() && &b[4..4 + kind.len()] == kind.as_bytes()
                })
        })
        .cloned()
        .collect()
}

/// The jump host for `sip`, reaching `hosts`, with the private keys named `private_keys`.
pub fn objects(
    sip: &SIPCluster,
    spec: &JumpHost,
    hosts: &[Reachable],
    private_keys: &[String],
) -> Objects {
    let name = name(&sip.name_any());
    let labels = pod_labels("jumphost", "jumphost", &name);
    let mut labelled = meta(sip, &name);
    labelled.labels = Some(labels.clone());
    let inventory: Vec<serde_json::Value> = hosts
        .iter()
        .map(|h| json!({"name": h.name, "bmc": {"ip": h.bmc_ip, "username": h.username, "password": h.password}}))
        .collect();
    let secret = Secret {
        metadata: labelled.clone(),
        data: Some(BTreeMap::from([
            (
                "hosts".to_string(),
                ByteString(serde_json::to_vec(&inventory).unwrap_or_default()),
            ),
            (
                "ssh_config".to_string(),
                ByteString(ssh_config(hosts, private_keys).into_bytes()),
            ),
        ])),
        ..Default::default()
    };
    let config_map = ConfigMap {
        metadata: labelled.clone(),
        data: Some(BTreeMap::from([
            (
                "authorized-keys".to_string(),
                spec.ssh_authorized_keys.join("\n"),
            ),
            ("host".to_string(), HOST_SCRIPT.to_string()),
        ])),
        ..Default::default()
    };
    let port = ServicePort {
        name: Some("ssh".into()),
        port: 22,
        node_port: Some(spec.node_port),
        ..Default::default()
    };
    Objects {
        secret,
        config_map: Some(config_map),
        service: node_port_service(sip, &name, &labels, vec![port]),
        deployment: deployment(labelled, &labels, pod(&name, spec, hosts)),
    }
}

fn pod(name: &str, spec: &JumpHost, hosts: &[Reachable]) -> PodSpec {
    let mount = |volume: &str, path: &str, sub: Option<&str>| VolumeMount {
        name: volume.into(),
        mount_path: path.into(),
        sub_path: sub.map(str::to_string),
        ..Default::default()
    };
    let container = Container {
        name: "jumphost".into(),
        image: Some(spec.common.image.clone()),
        ports: Some(vec![ContainerPort {
            name: Some("ssh".into()),
            container_port: 22,
            ..Default::default()
        }]),
        volume_mounts: Some(vec![
            mount("data", HOSTS_FILE, Some("hosts")),
            mount("data", "/home/ubuntu/.ssh/config", Some("ssh_config")),
            mount("scripts", "/opt/sip/bin", None),
            mount("ssh-private-keys", KEYS_DIR, None),
            mount(
                "authorized-keys",
                "/home/ubuntu/.ssh/authorized_keys",
                Some("authorized_keys"),
            ),
        ]),
        ..Default::default()
    };
    let config_map = |items: Option<Vec<KeyToPath>>, mode: i32| ConfigMapVolumeSource {
        name: name.to_string(),
        items,
        default_mode: Some(mode),
        ..Default::default()
    };
    let volumes = vec![
        secret_volume("data", name),
        Volume {
            name: "scripts".into(),
            config_map: Some(config_map(None, 0o777)),
            ..Default::default()
        },
        secret_volume("ssh-private-keys", &spec.node_ssh_private_keys),
        Volume {
            name: "authorized-keys".into(),
            config_map: Some(config_map(
                Some(vec![KeyToPath {
                    key: "authorized-keys".into(),
                    path: "authorized_keys".into(),
                    mode: Some(0o600),
                }]),
                0o700,
            )),
            ..Default::default()
        },
    ];
    let aliases: Vec<HostAlias> = hosts
        .iter()
        .filter_map(|h| {
            Some(HostAlias {
                ip: h.ip.clone()?,
                hostnames: Some(vec![h.name.clone()]),
            })
        })
        .collect();
    PodSpec {
        containers: vec![container],
        volumes: Some(volumes),
        host_aliases: (!aliases.is_empty()).then_some(aliases),
        ..Default::default()
    }
}

/// SSH settings: every private key for every host, and each host by its name (which the pod's
/// host aliases resolve to its address).
fn ssh_config(hosts: &[Reachable], private_keys: &[String]) -> String {
    let mut out = String::from("Host *\n");
    for key in private_keys {
        out.push_str(&format!("  IdentityFile {KEYS_DIR}/{key}\n"));
    }
    for h in hosts {
        out.push_str(&format!("\nHost {0}\n  HostName {0}\n", h.name));
    }
    out
}

/// `host list` prints the hosts; `host reboot <name>` restarts one through its BMC's Redfish
/// API (ForceRestart), with the credentials the hosts file holds.
const HOST_SCRIPT: &str = r#"#!/bin/sh
set -eu
HOSTS_FILE=/etc/opt/sip/hosts
case "${1:-}" in
  list) jq -r '.[].name' "$HOSTS_FILE" ;;
  reboot)
    host="${2:?usage: host reboot <name>}"
    bmc=$(jq -r --arg h "$host" '.[] | select(.name == $h) | .bmc' "$HOSTS_FILE")
    [ -n "$bmc" ] || { echo "no host $host" >&2; exit 1; }
    ip=$(echo "$bmc" | jq -r .ip); user=$(echo "$bmc" | jq -r .username); pass=$(echo "$bmc" | jq -r .password)
    curl -sk -u "$user:$pass" -H 'Content-Type: application/json' \
      -d '{"ResetType": "ForceRestart"}' \
      "https://$ip/redfish/v1/Systems/1/Actions/ComputerSystem.Reset" ;;
  *) echo "usage: host list | host reboot <name>" >&2; exit 2 ;;
esac
"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bmc_addresses_keep_their_host_and_port() {
        assert_eq!(
            bmc_host("redfish+https://32.68.51.13/redfish/v1/Systems/System.Embedded.1"),
            "32.68.51.13"
        );
        assert_eq!(bmc_host("ipmi://10.0.0.1:623"), "10.0.0.1:623");
        assert_eq!(bmc_host("10.0.0.2"), "10.0.0.2");
    }

    #[test]
    fn only_openssh_key_lines_are_authorized() {
        use base64::Engine;
        let blob = |kind: &str| {
            let mut b = (kind.len() as u32).to_be_bytes().to_vec();
            b.extend_from_slice(kind.as_bytes());
            b.extend_from_slice(&[0, 0, 0, 1, 1]);
            base64::engine::general_purpose::STANDARD.encode(b)
        };
        let good = format!("ssh-ed25519 {} me@laptop", blob("ssh-ed25519"));
        let lying = format!("ssh-rsa {}", blob("ssh-ed25519"));
        let keys = vec![good, lying.clone(), "not a key".to_string()];
        assert_eq!(invalid_keys(&keys), vec![lying, "not a key".to_string()]);
    }

    #[test]
    fn the_jump_host_knows_each_hosts_bmc_and_every_private_key() {
        let mut sip = SIPCluster::new("c1", Default::default());
        sip.metadata.namespace = Some("t".into());
        let spec = JumpHost {
            node_port: 30000,
            node_ssh_private_keys: "keys".into(),
            ..Default::default()
        };
        let hosts = [Reachable {
            name: "node0".into(),
            ip: Some("10.0.0.10".into()),
            bmc_ip: "10.1.0.10".into(),
            username: "root".into(),
            password: "pw".into(),
        }];
        let o = objects(&sip, &spec, &hosts, &["id_ed25519".to_string()]);
        let data = o.secret.data.unwrap();
        let inventory: serde_json::Value = serde_json::from_slice(&data["hosts"].0).unwrap();
        assert_eq!(inventory[0]["bmc"]["ip"], "10.1.0.10");
        let config = String::from_utf8(data["ssh_config"].0.clone()).unwrap();
        assert!(config.contains("IdentityFile /etc/opt/sip/ssh-private-keys/id_ed25519"));
        assert!(config.contains("Host node0\n  HostName node0"));
        let pod = o.deployment.spec.unwrap().template.spec.unwrap();
        assert_eq!(pod.host_aliases.unwrap()[0].ip, "10.0.0.10");
        assert_eq!(
            o.service.spec.unwrap().ports.unwrap()[0].node_port,
            Some(30000)
        );
    }
}
