//! What `pods/portforward` reaches in a simulated cluster, as the kubelet would forward to a
//! control-plane node's static pods: port 2379 of `etcd-<node>` is that member's etcd over
//! TLS (the member's own serving certificate, signed by the etcd CA; client certificates of
//! that CA required), and port 6443 of `kube-apiserver-<node>` is the cluster's API server
//! with its serving certificate (what KubeadmControlPlane reads certificate expiry from).
//! Each forward is an in-memory stream whose far end a task serves; anything else is refused
//! with the reason, which travels on the port's error channel.

use crate::etcd::{member_tls, CLIENT_PORT};
use crate::serving::ServingCertificates;
use infrasim_etcd_sim::{EtcdCluster, MemberService};
use infrasim_kube_api::pki::CertificateAuthority;
use infrasim_kube_api::portforward::{PodStream, PortForwarder};
use infrasim_kube_api::WeakApiServer;
use infrasim_store::{Group, ObjectKey};
use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::pin::Pin;
use std::sync::{Arc, Mutex};

/// The port kube-apiserver serves on in kubeadm's static pod.
pub const API_SERVER_PORT: u16 = 6443;

/// Buffer of each forward's in-memory stream.
const STREAM_BUFFER: usize = 64 * 1024;

/// What a cluster's forwards can reach.
pub(crate) struct Targets {
    pub group: Arc<Group>,
    pub etcd: EtcdCluster,
    pub etcd_ca: CertificateAuthority,
    /// Weak: the server holds this forwarder.
    pub server: WeakApiServer,
    /// The API servers' serving certificates, per node.
    pub serving: Arc<ServingCertificates>,
}

/// The cluster's port forwarder.
pub(crate) fn forwarder(targets: Targets) -> PortForwarder {
    // A member's serving configuration, made on its first forward.
    let configs: Mutex<HashMap<u64, Arc<rustls::ServerConfig>>> = Mutex::new(HashMap::new());
    Arc::new(move |namespace, pod, port| {
        let running = namespace == "kube-system"
            && targets
                .group
                .get("pods", &ObjectKey::new(namespace, pod))
                .is_some();
        if !running {
            return Err(format!("pod {namespace}/{pod} is not running"));
        }
        let nothing = || {
            Err(format!(
                "error forwarding port {port} to pod {namespace}/{pod}: nothing listens there (infrasim serves etcd-<node>:{CLIENT_PORT} and kube-apiserver-<node>:{API_SERVER_PORT})"
            ))
        };
        match (pod.split_once('-'), port) {
            (Some(("etcd", node)), CLIENT_PORT) => etcd(&targets, &configs, node, pod),
            (Some(("kube", rest)), API_SERVER_PORT) => match rest.strip_prefix("apiserver-") {
                Some(node) => api_server(&targets, node),
                None => nothing(),
            },
            _ => nothing(),
        }
    })
}

fn etcd(
    targets: &Targets,
    configs: &Mutex<HashMap<u64, Arc<rustls::ServerConfig>>>,
    node: &str,
    pod: &str,
) -> Result<Pin<Box<dyn PodStream>>, String> {
    let member = targets.etcd.member_named(node).ok_or_else(|| {
        format!("pod kube-system/{pod} is not running: {node} has no etcd member")
    })?;
    if targets.etcd.member_down(node) {
        // Its etcd crashed: nothing listens on the pod's port.
        return Err(format!(
            "error forwarding port {CLIENT_PORT} to pod {pod}: connect: connection refused"
        ));
    }
    let tls = {
        let mut configs = configs.lock().unwrap_or_else(|p| p.into_inner());
        match configs.get(&member.id) {
            Some(tls) => tls.clone(),
            None => {
                let tls = member_tls(&targets.etcd_ca, node, &member.client_urls)?;
                configs.insert(member.id, tls.clone());
                tls
            }
        }
    };
    let (client, server) = tokio::io::duplex(STREAM_BUFFER);
    let routes = MemberService::new(targets.etcd.clone(), member.id).routes();
    tokio::spawn(infrasim_etcd_sim::serve_connection(
        routes,
        server,
        tls,
        format!("port-forward to {pod}"),
    ));
    Ok(Box::pin(client))
}

/// The cluster's API server as `node`'s static pod serves it, with that node's certificate.
fn api_server(targets: &Targets, node: &str) -> Result<Pin<Box<dyn PodStream>>, String> {
    let not_running = || format!("pod kube-system/kube-apiserver-{node} is not running");
    let api = targets.server.upgrade().ok_or_else(not_running)?;
    let tls = targets.serving.tls(node, &targets.server)?;
    let (client, server) = tokio::io::duplex(STREAM_BUFFER);
    let acceptor = tokio_rustls::TlsAcceptor::from(tls);
    tokio::spawn(async move {
        let Ok(tls) = acceptor.accept(server).await else {
            return;
        };
        let peer = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
        if let Err(e) = api.serve_established(tls, peer).await {
            tracing::debug!(error = %e, "port-forwarded API connection ended with an error");
        }
    });
    Ok(Box::pin(client))
}
