//! The support services a SIPCluster's tenant cluster needs in front of its hosts, named and
//! shaped as SIP makes them in the SIPCluster's namespace: per load balancer an haproxy
//! `Deployment`, a `NodePort` `Service`, and a `Secret` whose `haproxy.cfg` lists the hosts of
//! the role it serves (`loadbalancer-controlplane-<name>` in front of the tenant's API servers
//! on 6443, `loadbalancer-worker-<name>` over a node-port range). Each object is owned by the
//! SIPCluster and removed with it.

use super::types::{SIPCluster, CONTROL_PLANE};
use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{
    ConfigMap, Container, ContainerPort, PodSpec, PodTemplateSpec, Secret, SecretVolumeSource,
    Service, ServicePort, ServiceSpec, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::ByteString;
use kube::{Resource, ResourceExt};
use std::collections::BTreeMap;

/// The image when a service names none (upstream's default).
const HAPROXY: &str = "haproxy:2.3.2";
/// The port the tenant's API servers listen on.
const API_PORT: i32 = 6443;

/// A host a load balancer sends to: its name and address.
#[derive(Debug, Clone, PartialEq)]
pub struct Backend {
    pub name: String,
    pub ip: String,
}

/// The objects of one service, applied together and removed together (by the same name).
pub struct Objects {
    pub secret: Secret,
    pub config_map: Option<ConfigMap>,
    pub deployment: Deployment,
    pub service: Service,
}

/// A `NodePort` Service of `sip`'s named `name`, in front of the pods labelled `labels`.
pub(super) fn node_port_service(
    sip: &SIPCluster,
    name: &str,
    labels: &BTreeMap<String, String>,
    ports: Vec<ServicePort>,
) -> Service {
    Service {
        metadata: meta(sip, name),
        spec: Some(ServiceSpec {
            type_: Some("NodePort".into()),
            selector: Some(labels.clone()),
            ports: Some(ports),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// A one-replica Deployment (`metadata` its own) of pods labelled `labels` running `pod`.
pub(super) fn deployment(
    metadata: ObjectMeta,
    labels: &BTreeMap<String, String>,
    pod: PodSpec,
) -> Deployment {
    Deployment {
        metadata,
        spec: Some(DeploymentSpec {
            replicas: Some(1),
            selector: LabelSelector {
                match_labels: Some(labels.clone()),
                ..Default::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels.clone()),
                    ..Default::default()
                }),
                spec: Some(pod),
            },
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// A volume of the Secret `secret`.
pub(super) fn secret_volume(volume: &str, secret: &str) -> Volume {
    Volume {
        name: volume.into(),
        secret: Some(SecretVolumeSource {
            secret_name: Some(secret.into()),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// `loadbalancer-controlplane-<name>` / `loadbalancer-worker-<name>`.
pub fn load_balancer_name(role: &str, cluster: &str) -> String {
    format!("loadbalancer-{}-{cluster}", role.to_lowercase())
}

/// The load balancer of `role` for `sip`: `ports` (name, port; the node port is the same
/// number for a worker range, given apart for the control plane) over `backends`.
pub fn load_balancer(
    sip: &SIPCluster,
    role: &str,
    image: &str,
    ports: &[(String, i32, i32)],
    backends: &[Backend],
) -> Objects {
    let name = load_balancer_name(role, &sip.name_any());
    let labels = pod_labels("loadbalancer", "haproxy", &name);
    let meta = meta(sip, &name);
    let config = haproxy_cfg(role == CONTROL_PLANE, ports, backends);
    let secret = Secret {
        metadata: meta.clone(),
        type_: Some("Opaque".into()),
        data: Some(BTreeMap::from([(
            "haproxy.cfg".to_string(),
            ByteString(config.into_bytes()),
        )])),
        ..Default::default()
    };
    let container = Container {
        name: "loadbalancer".into(),
        image: Some(if image.is_empty() { HAPROXY } else { image }.to_string()),
        image_pull_policy: Some("IfNotPresent".into()),
        ports: Some(
            ports
                .iter()
                .map(|(name, port, _)| ContainerPort {
                    name: Some(name.clone()),
                    container_port: *port,
                    ..Default::default()
                })
                .collect(),
        ),
        volume_mounts: Some(vec![VolumeMount {
            name: "haproxy-config".into(),
            mount_path: "/usr/local/etc/haproxy".into(),
            ..Default::default()
        }]),
        ..Default::default()
    };
    let pod = PodSpec {
        containers: vec![container],
        volumes: Some(vec![secret_volume("haproxy-config", &name)]),
        ..Default::default()
    };
    let service_ports = ports
        .iter()
        .map(|(name, port, node_port)| ServicePort {
            name: Some(name.clone()),
            port: *port,
            node_port: Some(*node_port),
            ..Default::default()
        })
        .collect();
    Objects {
        secret,
        config_map: None,
        deployment: deployment(meta, &labels, pod),
        service: node_port_service(sip, &name, &labels, service_ports),
    }
}

/// The control plane's port: the API servers' 6443, reached on `node_port`.
pub fn control_plane_ports(node_port: i32) -> Vec<(String, i32, i32)> {
    vec![("http".into(), API_PORT, node_port)]
}

/// A worker range's ports: each port of the range, on the same node port.
pub fn worker_ports(start: i32, end: i32) -> Vec<(String, i32, i32)> {
    (start..=end).map(|p| (format!("port-{p}"), p, p)).collect()
}

/// haproxy's configuration: a frontend per port, each to a backend with every host on that
/// port; the control plane's health-checked on the API servers' `/readyz` over TLS.
fn haproxy_cfg(control_plane: bool, ports: &[(String, i32, i32)], backends: &[Backend]) -> String {
    let mut cfg = String::from(
        "global\n  log stdout format raw local0 notice\n  daemon\n\ndefaults\n  mode tcp\n  option tcplog\n  option dontlognull\n  retries 1\n  timeout connect 30s\n  timeout client 600s\n  timeout server 600s\n",
    );
    for (name, port, _) in ports {
        cfg.push_str(&format!(
            "\nfrontend {name}-frontend\n  bind *:{port}\n  default_backend {name}-backend\n\nbackend {name}-backend\n  balance roundrobin\n  option log-health-checks\n"
        ));
        if control_plane {
            cfg.push_str("  option httpchk GET /readyz\n  http-check expect status 200\n  default-server check check-ssl verify none inter 5s downinter 2s fall 4\n");
        } else {
            cfg.push_str("  option tcp-check\n  default-server check\n");
        }
        for b in backends {
            cfg.push_str(&format!("  server {} {}:{port}\n", b.name, b.ip));
        }
    }
    cfg
}

pub(super) fn pod_labels(component: &str, name: &str, instance: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        ("app.kubernetes.io/part-of".into(), "sip".into()),
        ("app.kubernetes.io/component".into(), component.into()),
        ("app.kubernetes.io/name".into(), name.into()),
        ("app.kubernetes.io/instance".into(), instance.into()),
    ])
}

/// An object of `sip`'s, in its namespace, owned by it.
pub(super) fn meta(sip: &SIPCluster, name: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        namespace: sip.namespace(),
        owner_references: sip.controller_owner_ref(&()).map(|o| vec![o]),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sip::types::{SIPClusterSpec, WORKER};

    #[test]
    fn a_load_balancer_lists_its_hosts_behind_each_port() {
        let mut sip = SIPCluster::new("c1", SIPClusterSpec::default());
        sip.metadata.namespace = Some("tenants".into());
        sip.metadata.uid = Some("u1".into());
        let backends = [
            Backend {
                name: "h0".into(),
                ip: "10.0.0.1".into(),
            },
            Backend {
                name: "h4".into(),
                ip: "10.0.0.5".into(),
            },
        ];
        let lb = load_balancer(
            &sip,
            CONTROL_PLANE,
            "",
            &control_plane_ports(30001),
            &backends,
        );
        assert_eq!(
            lb.secret.metadata.name.as_deref(),
            Some("loadbalancer-controlplane-c1")
        );
        let cfg = String::from_utf8(lb.secret.data.unwrap()["haproxy.cfg"].0.clone()).unwrap();
        assert!(cfg.contains("bind *:6443"), "{cfg}");
        assert!(
            cfg.contains("server h0 10.0.0.1:6443\n  server h4 10.0.0.5:6443"),
            "{cfg}"
        );
        assert!(cfg.contains("GET /readyz"));
        let port = &lb.service.spec.unwrap().ports.unwrap()[0];
        assert_eq!((port.port, port.node_port), (6443, Some(30001)));
        let owner = &lb.deployment.metadata.owner_references.unwrap()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.name.as_str()),
            ("SIPCluster", "c1")
        );

        let lb = load_balancer(
            &sip,
            WORKER,
            "haproxy:3",
            &worker_ports(30002, 30004),
            &backends,
        );
        let ports = lb.service.spec.unwrap().ports.unwrap();
        assert_eq!(ports.len(), 3);
        assert_eq!((ports[2].port, ports[2].node_port), (30004, Some(30004)));
        let cfg = String::from_utf8(lb.secret.data.unwrap()["haproxy.cfg"].0.clone()).unwrap();
        assert!(
            cfg.contains("frontend port-30003-frontend")
                && cfg.contains("server h4 10.0.0.5:30003")
        );
    }
}
