//! `pods/portforward` with kube-rs (WebSocket, Kubernetes' channel protocol): a forward to
//! `etcd-<node>:2379` reaches that member's etcd over TLS, with its own serving certificate
//! signed by the etcd CA; other pods and ports get their error on the error channel.

mod common;
use common::three_control_planes as shape;
use infrasim_cloud::{Cloud, CloudConfig};
use infrasim_etcd_sim::pb::etcdserverpb::cluster_client::ClusterClient;
use infrasim_etcd_sim::pb::etcdserverpb::maintenance_client::MaintenanceClient;
use infrasim_etcd_sim::pb::etcdserverpb::{
    alarm_request, AlarmRequest, MemberListRequest, MemberRemoveRequest, MoveLeaderRequest,
    StatusRequest,
};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use rustls::pki_types::ServerName;
use std::sync::{Arc, Mutex};

/// A gRPC channel over `stream`: TLS trusting `ca`, presenting `client` (PEM cert, key).
async fn grpc_over<S>(
    stream: S,
    ca_pem: &str,
    cert_pem: &str,
    key_pem: &str,
) -> tonic::transport::Channel
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static,
{
    let config = client_tls(ca_pem, cert_pem, key_pem, vec![b"h2".to_vec()]);
    let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(ServerName::try_from("localhost").expect("a name"), stream)
        .await
        .expect("the member's certificate is signed by the etcd CA and names localhost");
    let once = Arc::new(Mutex::new(Some(tls)));
    tonic::transport::Endpoint::from_static("http://etcd.port-forward")
        .connect_with_connector(tower::service_fn(move |_| {
            let stream = once.lock().unwrap().take();
            async move {
                stream
                    .map(hyper_util::rt::TokioIo::new)
                    .ok_or_else(|| std::io::Error::other("one connection per forward"))
            }
        }))
        .await
        .expect("HTTP/2 over the forwarded TLS stream")
}

/// A GET of `path` over `stream` (HTTP/1.1 in TLS trusting `ca`, presenting `cert`); the body.
async fn get_over<S>(stream: S, ca_pem: &str, cert_pem: &str, key_pem: &str, path: &str) -> String
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static,
{
    use http_body_util::BodyExt;
    let config = client_tls(ca_pem, cert_pem, key_pem, vec![]);
    let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(ServerName::try_from("localhost").expect("a name"), stream)
        .await
        .expect("the API server's certificate is signed by the cluster CA");
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls))
            .await
            .expect("HTTP/1.1");
    tokio::spawn(connection);
    let request = http::Request::get(path)
        .header("host", "localhost")
        .body(http_body_util::Empty::<bytes::Bytes>::new())
        .expect("a request");
    let response = sender.send_request(request).await.expect("an answer");
    assert_eq!(response.status(), 200);
    let body = response
        .into_body()
        .collect()
        .await
        .expect("a body")
        .to_bytes();
    String::from_utf8_lossy(&body).into_owned()
}

fn client_tls(
    ca_pem: &str,
    cert_pem: &str,
    key_pem: &str,
    alpn: Vec<Vec<u8>>,
) -> rustls::ClientConfig {
    let client = infrasim_kube_api::pki::KeyedCert {
        cert_pem: cert_pem.into(),
        key_pem: key_pem.into(),
    };
    let mut config = infrasim_kube_api::client_tls_config(ca_pem, &client).expect("client TLS");
    config.alpn_protocols = alpn;
    config
}

#[tokio::test]
async fn forwards_reach_an_etcd_member_and_the_api_server() {
    let cloud = Cloud::new(CloudConfig {
        ports: 23560..=23580,
        ..CloudConfig::default()
    });
    let info = cloud.create_cluster(shape("pf")).await.expect("a cluster");
    let pki = cloud.pki("pf").expect("PKI");
    let etcd = cloud.etcd("pf").expect("etcd");
    let client = common::client(&info.kubeconfig).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "kube-system");
    let etcd_client = pki
        .etcd_ca
        .client_cert("kube-apiserver-etcd-client", &[])
        .expect("a client certificate");

    // The second control plane's member answers, not the leader.
    let node = "pf-control-plane-1";
    let mut forward = pods
        .portforward(&format!("etcd-{node}"), &[2379])
        .await
        .expect("the upgrade is accepted");
    let stream = forward.take_stream(2379).expect("a stream for 2379");
    let channel = grpc_over(
        stream,
        &pki.etcd_ca.cert_pem,
        &etcd_client.cert_pem,
        &etcd_client.key_pem,
    )
    .await;
    let member = etcd.member_named(node).expect("a member").id;
    let status = MaintenanceClient::new(channel.clone())
        .status(StatusRequest::default())
        .await
        .expect("Status")
        .into_inner();
    assert_eq!(status.header.map(|h| h.member_id), Some(member));
    // kube-rs speaks the WebSocket channel protocol; the server counted it so.
    let metrics = client
        .request_text(
            http::Request::get("/metrics")
                .body(Vec::new())
                .expect("request"),
        )
        .await
        .expect("/metrics");
    assert!(
        metrics
            .contains("infrasim_port_forward_sessions_total{protocol=\"v4.channel.k8s.io\"} 1\n"),
        "{metrics}"
    );
    assert_ne!(status.leader, member);
    let members = ClusterClient::new(channel)
        .member_list(MemberListRequest::default())
        .await
        .expect("MemberList")
        .into_inner()
        .members;
    assert_eq!(members.len(), 3);
    drop(forward);

    // kube-apiserver-<node>:6443 is the API server behind its serving certificate.
    let mut api = pods
        .portforward("kube-apiserver-pf-control-plane-0", &[6443])
        .await
        .expect("the upgrade is accepted");
    let stream = api.take_stream(6443).expect("a stream for 6443");
    let admin = pki
        .ca
        .client_cert("kubernetes-admin", &["system:masters"])
        .expect("an admin certificate");
    let version = get_over(
        stream,
        &pki.ca.cert_pem,
        &admin.cert_pem,
        &admin.key_pem,
        "/version",
    )
    .await;
    assert!(version.contains("\"gitVersion\":\"v1.31.0\""), "{version}");
    drop(api);

    // A pod where nothing listens: the error travels on the port's error channel.
    let mut refused = pods
        .portforward("kube-apiserver-pf-control-plane-0", &[2379])
        .await
        .expect("the upgrade is accepted");
    let error = refused
        .take_error(2379)
        .expect("an error channel")
        .await
        .expect("an error");
    assert!(error.contains("nothing listens"), "{error}");
}

#[tokio::test]
async fn a_thousand_forwards_leave_no_task_behind() {
    let cloud = Cloud::new(CloudConfig {
        ports: 23585..=23590,
        ..CloudConfig::default()
    });
    let info = cloud
        .create_cluster(shape("leak"))
        .await
        .expect("a cluster");
    let pods: Api<Pod> = Api::namespaced(common::client(&info.kubeconfig).await, "kube-system");
    let open_and_close = |n: usize| {
        let pods = pods.clone();
        async move {
            for _ in 0..n {
                let mut forward = pods
                    .portforward("etcd-leak-control-plane-0", &[2379])
                    .await
                    .expect("the upgrade is accepted");
                let stream = forward.take_stream(2379).expect("a stream");
                drop(stream);
                drop(forward);
            }
        }
    };
    common::leaves_no_task("kube-rs port-forwards", open_and_close).await;
}

/// A gRPC channel to `node`'s etcd member through a port-forward to its pod, as
/// KubeadmControlPlane dials each member.
async fn dial(
    pods: &Api<Pod>,
    node: &str,
    pki: &infrasim_cloud::ClusterPki,
) -> tonic::transport::Channel {
    let mut forward = pods
        .portforward(&format!("etcd-{node}"), &[2379])
        .await
        .expect("the upgrade is accepted");
    let stream = forward.take_stream(2379).expect("a stream");
    // The forward lives as long as its stream is read: keep the forwarder's task going.
    tokio::spawn(async move {
        let _ = forward.join().await;
    });
    let client = pki
        .etcd_ca
        .client_cert("kube-apiserver-etcd-client", &[])
        .expect("a client certificate");
    grpc_over(
        stream,
        &pki.etcd_ca.cert_pem,
        &client.cert_pem,
        &client.key_pem,
    )
    .await
}

#[tokio::test]
async fn kubeadm_control_planes_calls_scale_three_members_down_to_one() {
    let cloud = Cloud::new(CloudConfig {
        ports: 23591..=23595,
        ..CloudConfig::default()
    });
    let info = cloud.create_cluster(shape("kcp")).await.expect("a cluster");
    let pki = cloud.pki("kcp").expect("PKI");
    let pods: Api<Pod> = Api::namespaced(common::client(&info.kubeconfig).await, "kube-system");
    let nodes = [
        "kcp-control-plane-0",
        "kcp-control-plane-1",
        "kcp-control-plane-2",
    ];
    let mut channels = Vec::new();
    for node in nodes {
        channels.push(dial(&pods, node, &pki).await);
    }
    // Status of every member: each answers as itself, and all agree on the leader.
    let mut ids = Vec::new();
    let mut leaders = Vec::new();
    for channel in &channels {
        let status = MaintenanceClient::new(channel.clone())
            .status(StatusRequest::default())
            .await
            .expect("Status")
            .into_inner();
        ids.push(status.header.expect("a header").member_id);
        leaders.push(status.leader);
    }
    assert!(leaders.iter().all(|l| *l == leaders[0]));
    let leader = ids
        .iter()
        .position(|id| *id == leaders[0])
        .expect("the leader is a member");
    let alarms = MaintenanceClient::new(channels[0].clone())
        .alarm(AlarmRequest {
            action: alarm_request::AlarmAction::Get as i32,
            ..Default::default()
        })
        .await
        .expect("AlarmList")
        .into_inner();
    assert!(alarms.alarms.is_empty());

    // Scale down to the last member: move leadership there (asked of the leader), then
    // remove the other two.
    let keep = (leader + 1) % 3;
    MaintenanceClient::new(channels[leader].clone())
        .move_leader(MoveLeaderRequest {
            target_id: ids[keep],
        })
        .await
        .expect("MoveLeader from the leader");
    let mut cluster = ClusterClient::new(channels[keep].clone());
    for gone in (0..3).filter(|i| *i != keep) {
        cluster
            .member_remove(MemberRemoveRequest { id: ids[gone] })
            .await
            .expect("MemberRemove");
    }
    let members = cluster
        .member_list(MemberListRequest::default())
        .await
        .expect("MemberList")
        .into_inner()
        .members;
    assert_eq!(
        members.iter().map(|m| m.name.as_str()).collect::<Vec<_>>(),
        [nodes[keep]]
    );
    let status = MaintenanceClient::new(channels[keep].clone())
        .status(StatusRequest::default())
        .await
        .expect("Status")
        .into_inner();
    assert_eq!(status.leader, ids[keep]);
    // A removed member no longer answers.
    let removed = (keep + 1) % 3;
    assert!(MaintenanceClient::new(channels[removed].clone())
        .status(StatusRequest::default())
        .await
        .is_err());
}

#[tokio::test]
async fn an_api_server_certificate_reissued_in_the_past_is_refused_by_a_verifying_client() {
    let cloud = Cloud::new(CloudConfig {
        ports: 23596..=23599,
        ..CloudConfig::default()
    });
    let info = cloud.create_cluster(shape("exp")).await.expect("a cluster");
    let pki = cloud.pki("exp").expect("PKI");
    let pods: Api<Pod> = Api::namespaced(common::client(&info.kubeconfig).await, "kube-system");
    let admin = pki
        .ca
        .client_cert("kubernetes-admin", &["system:masters"])
        .expect("an admin certificate");
    let (node, other) = ("exp-control-plane-0", "exp-control-plane-1");
    let year = cloud
        .api_server_certificate_expiry("exp", node)
        .expect("a hosted cluster");
    let yesterday = chrono::DateTime::from_timestamp(chrono::Utc::now().timestamp() - 86_400, 0)
        .expect("a time");
    let fault = infrasim_cloud::ClusterFault {
        expiring_certificates: [(node.to_string(), yesterday)].into(),
        ..Default::default()
    };
    cloud.set_fault("exp", "test/expired", fault);
    assert_eq!(
        cloud.api_server_certificate_expiry("exp", node),
        Some(yesterday)
    );
    assert_eq!(
        cloud.api_server_certificate_expiry("exp", other),
        Some(year)
    );

    // rustls, verifying as any client does, refuses the expired certificate...
    let connect = |node: String| {
        let (pods, admin, ca) = (pods.clone(), admin.clone(), pki.ca.cert_pem.clone());
        async move {
            let mut forward = pods
                .portforward(&format!("kube-apiserver-{node}"), &[6443])
                .await
                .expect("the upgrade is accepted");
            let stream = forward.take_stream(6443).expect("a stream for 6443");
            let config = client_tls(&ca, &admin.cert_pem, &admin.key_pem, vec![]);
            tokio_rustls::TlsConnector::from(Arc::new(config))
                .connect(ServerName::try_from("localhost").expect("a name"), stream)
                .await
                .map(|_| ())
        }
    };
    let refused = connect(node.to_string())
        .await
        .expect_err("an expired certificate");
    assert!(refused.to_string().contains("expired"), "{refused}");
    // ...while the other node serves its own, and the node's comes back with the fault gone.
    connect(other.to_string())
        .await
        .expect("a valid certificate");
    cloud.set_fault(
        "exp",
        "test/expired",
        infrasim_cloud::ClusterFault::default(),
    );
    connect(node.to_string())
        .await
        .expect("the certificate it was made with");
    assert_eq!(cloud.api_server_certificate_expiry("exp", node), Some(year));
}
