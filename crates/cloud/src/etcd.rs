//! A cluster's etcd: one simulated etcd cluster per workload cluster, whose members follow
//! the control-plane machines (a member starts with a machine's etcd step, named after its
//! node, and goes with the machine), reached on the cluster's endpoint by gRPC requests.
//!
//! The endpoint is a load balancer in front of the control planes in Cluster API's clusters;
//! here the member that answers there is the leader. Only client certificates of the etcd CA
//! reach etcd, as kubeadm configures it (see kube-api's sidecar).

use http_body_util::BodyExt;
use infrasim_etcd_sim::{EtcdCluster, MemberService};
use infrasim_kube_api::pki::CertificateAuthority;
use infrasim_kube_api::{Sidecar, SidecarBody, SidecarError};
use infrasim_store::durability;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;

/// etcd's client port, as kubeadm's static pod serves it.
pub const CLIENT_PORT: u16 = 2379;
/// etcd's peer port.
pub const PEER_PORT: u16 = 2380;

/// What etcdctl needs to reach a cluster's etcd: a CA bundle that verifies the endpoint (the
/// cluster CA) and the members' own serving certificates (the etcd CA), and a client
/// certificate of the etcd CA.
#[derive(Clone)]
pub struct EtcdCredentials {
    pub ca_bundle_pem: String,
    pub cert_pem: String,
    pub key_pem: String,
}

impl EtcdCredentials {
    /// Signs a client certificate for `user` with the cluster's etcd CA.
    pub fn new(
        pki: &crate::ClusterPki,
        user: &str,
    ) -> Result<Self, infrasim_kube_api::pki::PkiError> {
        let client = pki.etcd_ca.client_cert(user, &[])?;
        Ok(EtcdCredentials {
            ca_bundle_pem: format!("{}{}", pki.ca.cert_pem, pki.etcd_ca.cert_pem),
            cert_pem: client.cert_pem,
            key_pem: client.key_pem,
        })
    }

    /// Writes `ca.crt`, `client.crt` and `client.key` (owner-only) into `dir`, for
    /// `etcdctl --cacert DIR/ca.crt --cert DIR/client.crt --key DIR/client.key`.
    pub fn write(&self, dir: &std::path::Path) -> std::io::Result<()> {
        std::fs::create_dir_all(dir)?;
        std::fs::write(dir.join("ca.crt"), &self.ca_bundle_pem)?;
        infrasim_kube_api::pki::write_private(&dir.join("client.crt"), &self.cert_pem)?;
        infrasim_kube_api::pki::write_private(&dir.join("client.key"), &self.key_pem)
    }
}

/// The URLs member `ip` advertises: (peer, client).
pub fn member_urls(ip: &str) -> (String, String) {
    (
        format!("https://{ip}:{PEER_PORT}"),
        format!("https://{ip}:{CLIENT_PORT}"),
    )
}

/// The endpoint's gRPC side, answered by `etcd`'s leader, open to certificates of `etcd_ca_pem`.
pub fn sidecar(etcd: &EtcdCluster, etcd_ca_pem: &str) -> Sidecar {
    let etcd = etcd.clone();
    let routes: std::sync::Mutex<Option<(u64, tonic::service::Routes)>> = Default::default();
    Sidecar {
        content_type: "application/grpc",
        client_ca_pem: etcd_ca_pem.to_string(),
        service: Arc::new(move |req| {
            let Some(leader) = etcd.answering() else {
                return Box::pin(async {
                    boxed(tonic_status(tonic::Status::unavailable(
                        "etcdserver: no leader (no control-plane machine has started etcd yet)",
                    )))
                });
            };
            // The leader's services, made again only when leadership moves: building them
            // (five servers behind a router) cost more than answering a Status.
            let routes = {
                let mut cached = routes.lock().unwrap_or_else(|p| p.into_inner());
                match &*cached {
                    Some((id, routes)) if *id == leader => routes.clone(),
                    _ => {
                        let made = MemberService::new(etcd.clone(), leader).routes();
                        *cached = Some((leader, made.clone()));
                        made
                    }
                }
            };
            // A membership change is kept in the cloud's store (see `records`): the answer
            // waits until it is durable, as etcd answers once raft has committed.
            Box::pin(async move {
                let (response, writes) =
                    durability::scope(infrasim_etcd_sim::handle(routes, req)).await;
                match writes.wait().await {
                    Ok(()) => boxed(response),
                    Err(e) => boxed(tonic_status(tonic::Status::unavailable(format!(
                        "etcdserver: the change could not be stored: {e}"
                    )))),
                }
            })
        }),
        refuse: || {
            boxed(tonic_status(tonic::Status::unauthenticated(
                "etcd accepts only client certificates signed by the cluster's etcd CA",
            )))
        },
    }
}

fn tonic_status(status: tonic::Status) -> http::Response<tonic::body::Body> {
    status.into_http()
}

fn boxed(response: http::Response<tonic::body::Body>) -> http::Response<SidecarBody> {
    response.map(|body| {
        body.map_err(|status| SidecarError(Box::new(status)))
            .boxed_unsync()
    })
}

/// The serving configuration of member `node`: kubeadm's etcd server certificate SANs (the
/// node's name, localhost, loopback and the node's address).
pub(crate) fn member_tls(
    ca: &CertificateAuthority,
    node: &str,
    client_urls: &[String],
) -> Result<Arc<rustls::ServerConfig>, String> {
    let mut ips = vec![IpAddr::V4(Ipv4Addr::LOCALHOST)];
    ips.extend(client_urls.iter().filter_map(|u| {
        u.strip_prefix("https://")?
            .rsplit_once(':')?
            .0
            .parse::<IpAddr>()
            .ok()
    }));
    let cert = ca
        .serving_cert(node, &[node.to_string(), "localhost".into()], &ips)
        .map_err(|e| format!("etcd serving certificate for {node}: {e}"))?;
    infrasim_etcd_sim::tls_config(&ca.cert_pem, &cert.cert_pem, &cert.key_pem)
        .map_err(|e| format!("etcd TLS for {node}: {e}"))
}
