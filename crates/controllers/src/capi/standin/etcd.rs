//! KubeadmControlPlane's etcd client: before a control-plane Machine goes, its etcd member is
//! removed (leadership moved off it first), as Cluster API's control plane does at the
//! machine's pre-terminate hook.
//!
//! Upstream dials each member through a port-forward to its `etcd-<node>` pod; here the
//! cluster's endpoint serves etcd's gRPC API too (answered by the leader), with the cluster's
//! serving certificate. The client trusts the CA of the cluster's kubeconfig and presents a
//! certificate signed by the etcd CA of the `<cluster>-etcd` secret, as upstream signs its own.

use infrasim_etcd_sim::pb::etcdserverpb::cluster_client::ClusterClient;
use infrasim_etcd_sim::pb::etcdserverpb::maintenance_client::MaintenanceClient;
use infrasim_etcd_sim::pb::etcdserverpb::{
    AlarmRequest, Member as PbMember, MemberListRequest, MemberRemoveRequest, MoveLeaderRequest,
    StatusRequest,
};
use infrasim_etcd_sim::{Member, MembershipImage};
use infrasim_kube_api::pki::CertificateAuthority;
use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;
use std::time::Duration;

/// Why the etcd of a cluster could not be asked.
#[derive(Debug, thiserror::Error)]
pub enum EtcdError {
    #[error(transparent)]
    Kube(#[from] kube::Error),
    #[error("{0}")]
    Credentials(String),
    #[error("etcd: {0}")]
    Grpc(#[from] tonic::Status),
}

type Channel = hyper_util::client::legacy::Client<
    hyper_rustls::HttpsConnector<hyper_util::client::legacy::connect::HttpConnector>,
    tonic::body::Body,
>;

/// An etcd client of cluster `cluster` in `namespace`, through its endpoint.
async fn connect(
    mgmt: &kube::Client,
    namespace: &str,
    cluster: &str,
) -> Result<(Channel, http::Uri), EtcdError> {
    let secrets: Api<Secret> = Api::namespaced(mgmt.clone(), namespace);
    let field = |s: &Secret, k: &str| {
        s.data
            .as_ref()
            .and_then(|d| d.get(k))
            .and_then(|b| String::from_utf8(b.0.clone()).ok())
    };
    let missing = |what: String| EtcdError::Credentials(what);
    let kubeconfig = secrets
        .get_opt(&format!("{cluster}-kubeconfig"))
        .await?
        .and_then(|s| field(&s, "value"))
        .ok_or_else(|| missing(format!("no {cluster}-kubeconfig secret")))?;
    let kubeconfig = kube::config::Kubeconfig::from_yaml(&kubeconfig)
        .map_err(|e| missing(format!("{cluster}-kubeconfig: {e}")))?;
    let endpoint = kubeconfig
        .clusters
        .first()
        .and_then(|c| c.cluster.clone())
        .ok_or_else(|| missing(format!("{cluster}-kubeconfig names no cluster")))?;
    let server: http::Uri = endpoint
        .server
        .as_deref()
        .unwrap_or_default()
        .parse()
        .map_err(|e| missing(format!("{cluster}-kubeconfig server: {e}")))?;
    let ca_pem = endpoint
        .certificate_authority_data
        .as_deref()
        .and_then(|b64| {
            use base64::Engine;
            base64::engine::general_purpose::STANDARD.decode(b64).ok()
        })
        .and_then(|b| String::from_utf8(b).ok())
        .ok_or_else(|| missing(format!("{cluster}-kubeconfig has no CA data")))?;
    let etcd = secrets
        .get_opt(&format!("{cluster}-etcd"))
        .await?
        .ok_or_else(|| missing(format!("no {cluster}-etcd secret")))?;
    let (Some(cert), Some(key)) = (field(&etcd, "tls.crt"), field(&etcd, "tls.key")) else {
        return Err(missing(format!("{cluster}-etcd has no tls.crt/tls.key")));
    };
    let ca = CertificateAuthority::from_pem(&cert, &key)
        .map_err(|e| missing(format!("{cluster}-etcd: {e}")))?;
    let client = ca
        .client_cert("cluster-api.x-k8s.io-etcd-client", &[])
        .map_err(|e| missing(e.to_string()))?;
    // No ALPN here: the connector offers h2 itself (and refuses a configuration that has some).
    let tls = infrasim_kube_api::client_tls_config(&ca_pem, &client)
        .map_err(|e| missing(format!("etcd client TLS: {e}")))?;
    // Small writes go at once, as gRPC clients send them: with Nagle's algorithm on, each
    // request's second frame waits for the server's delayed ACK (40 ms a call).
    let mut http = hyper_util::client::legacy::connect::HttpConnector::new();
    http.enforce_http(false);
    http.set_nodelay(true);
    let https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_only()
        .enable_http2()
        .wrap_connector(http);
    let channel = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .http2_only(true)
        .pool_idle_timeout(Duration::from_secs(5))
        .pool_timer(hyper_util::rt::TokioTimer::new())
        .build(https);
    Ok((channel, server))
}

/// The cluster and maintenance clients of cluster `cluster`'s etcd, and its members.
async fn listed(
    mgmt: &kube::Client,
    namespace: &str,
    cluster: &str,
) -> Result<
    (
        ClusterClient<Channel>,
        MaintenanceClient<Channel>,
        Vec<PbMember>,
    ),
    EtcdError,
> {
    let (channel, origin) = connect(mgmt, namespace, cluster).await?;
    let mut members = ClusterClient::with_origin(channel.clone(), origin.clone());
    let maintenance = MaintenanceClient::with_origin(channel, origin);
    let list = members
        .member_list(MemberListRequest::default())
        .await?
        .into_inner()
        .members;
    Ok((members, maintenance, list))
}

/// The members and alarms of cluster `cluster`'s etcd, asked through its endpoint: how the
/// control plane reads the etcd of a cluster hosted by another process (a sharded fleet's),
/// whose members it cannot look at in place. A member that does not answer is not told
/// apart here (the leader answers for all).
pub async fn membership(
    mgmt: &kube::Client,
    namespace: &str,
    cluster: &str,
) -> Result<MembershipImage, EtcdError> {
    let (_, mut maintenance, list) = listed(mgmt, namespace, cluster).await?;
    let alarms = maintenance
        .alarm(AlarmRequest::default())
        .await?
        .into_inner()
        .alarms;
    Ok(MembershipImage {
        members: list
            .into_iter()
            .map(|m| Member {
                id: m.id,
                name: m.name,
                peer_urls: m.peer_ur_ls,
                client_urls: m.client_ur_ls,
                is_learner: m.is_learner,
            })
            .collect(),
        alarms: alarms.into_iter().map(|a| (a.member_id, a.alarm)).collect(),
        ..MembershipImage::default()
    })
}

/// Removes the etcd member named `node` from cluster `cluster`'s etcd, moving leadership to
/// another voting member first if it leads. A member already gone, or the last one, is left
/// as it is: there is nothing to remove, or nothing to keep quorum for.
pub async fn remove_member(
    mgmt: &kube::Client,
    namespace: &str,
    cluster: &str,
    node: &str,
) -> Result<(), EtcdError> {
    let (mut members, mut maintenance, list) = listed(mgmt, namespace, cluster).await?;
    let Some(gone) = list.iter().find(|m| m.name == node) else {
        return Ok(());
    };
    let Some(heir) = list
        .iter()
        .find(|m| m.id != gone.id && !m.is_learner && !m.name.is_empty())
    else {
        return Ok(());
    };
    let status = maintenance
        .status(StatusRequest::default())
        .await?
        .into_inner();
    if status.leader == gone.id {
        maintenance
            .move_leader(MoveLeaderRequest { target_id: heir.id })
            .await?;
    }
    match members
        .member_remove(MemberRemoveRequest { id: gone.id })
        .await
    {
        Ok(_) => Ok(()),
        Err(e) if e.code() == tonic::Code::NotFound => Ok(()),
        Err(e) => Err(e.into()),
    }
}
