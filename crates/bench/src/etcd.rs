//! `infrasim bench etcd`: etcd's Status + MemberList, as KubeadmControlPlane asks them, per
//! second through a simulated cluster's endpoint and through a port-forward to a member,
//! against Debian's etcd server (3.4, package `etcd-server`) started on loopback in the same
//! run. Every path is TLS with client certificates of an etcd CA, and every client connection
//! is its own HTTP/2 connection.

use anyhow::Context;
use clap::Args;
use infrasim_cloud::{Cloud, CloudConfig, ClusterShape};
use infrasim_etcd_sim::pb::etcdserverpb::cluster_client::ClusterClient;
use infrasim_etcd_sim::pb::etcdserverpb::maintenance_client::MaintenanceClient;
use infrasim_etcd_sim::pb::etcdserverpb::{MemberListRequest, StatusRequest};
use infrasim_kube_api::pki::{CertificateAuthority, KeyedCert};
use k8s_openapi::api::core::v1::Pod;
use rustls::pki_types::ServerName;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite};
use tonic::transport::Channel;

#[derive(Debug, Args)]
pub struct EtcdBenchArgs {
    /// Seconds each path is measured.
    #[arg(long, default_value_t = 5)]
    seconds: u64,
    /// Concurrent clients (each its own connection).
    #[arg(long, default_value_t = 8)]
    connections: usize,
    /// The etcd server binary of the baseline (Debian's etcd-server installs `etcd`).
    #[arg(long, default_value = "etcd")]
    etcd: String,
    /// The first of the loopback ports the run uses (the cluster's endpoint, etcd's client
    /// and peer ports).
    #[arg(long, default_value_t = 24500)]
    port: u16,
}

/// A client connection's credentials: the CA that signs the server, a client certificate.
#[derive(Clone)]
struct Credentials {
    ca_pem: String,
    client: KeyedCert,
}

/// Opens one client connection.
pub(crate) type Dial =
    Arc<dyn Fn() -> futures::future::BoxFuture<'static, anyhow::Result<Channel>> + Send + Sync>;

pub async fn run(args: EtcdBenchArgs) -> anyhow::Result<()> {
    let cloud = Cloud::new(CloudConfig {
        ports: args.port..=args.port + 9,
        ..CloudConfig::default()
    });
    let info = cloud
        .create_cluster(ClusterShape {
            name: "etcd-bench".into(),
            control_planes: 3,
            workers: 0,
            kubernetes_version: "v1.31.0".into(),
            ..ClusterShape::default()
        })
        .await?;
    let pki = cloud.pki("etcd-bench").context("the cluster's PKI")?;
    let client = pki.etcd_ca.client_cert("etcd-bench-client", &[])?;
    let endpoint = info.endpoint;
    let direct = Credentials {
        ca_pem: pki.ca.cert_pem.clone(),
        client: client.clone(),
    };
    let forwarded = Credentials {
        ca_pem: pki.etcd_ca.cert_pem.clone(),
        client,
    };
    let kube = nodelay_client(&info.kubeconfig).await?;
    let pods: kube::Api<Pod> = kube::Api::namespaced(kube, "kube-system");
    let seconds = Duration::from_secs(args.seconds);
    let mut rows = Vec::new();
    let dial_endpoint: Dial = Arc::new(move || {
        let creds = direct.clone();
        Box::pin(async move { tls_channel(connect(endpoint).await?, &creds).await })
    });
    rows.push((
        "simulated, cluster endpoint",
        measure(dial_endpoint, args.connections, seconds).await?,
    ));
    let dial_forward: Dial = Arc::new(move || {
        let (pods, creds) = (pods.clone(), forwarded.clone());
        Box::pin(async move {
            let mut forward = pods
                .portforward("etcd-etcd-bench-control-plane-1", &[2379])
                .await?;
            let stream = forward.take_stream(2379).context("a forwarded stream")?;
            tokio::spawn(async move {
                let _ = forward.join().await;
            });
            tls_channel(stream, &creds).await
        })
    });
    rows.push((
        "simulated, port-forward to a member",
        measure(dial_forward, args.connections, seconds).await?,
    ));
    match real_etcd(&args).await {
        Ok((dial, _server)) => rows.push((
            "etcd 3.4 (Debian etcd-server)",
            measure(dial, args.connections, seconds).await?,
        )),
        Err(e) => {
            println!("baseline skipped: {e:#} (install Debian's etcd-server, or pass --etcd PATH)")
        }
    }
    print_table(&rows, args.connections);
    Ok(())
}

struct Figures {
    pairs: usize,
    per_second: f64,
    p50: Duration,
    p99: Duration,
}

/// `connections` clients, each on its own connection, asking Status then MemberList for
/// `seconds`.
async fn measure(dial: Dial, connections: usize, seconds: Duration) -> anyhow::Result<Figures> {
    let mut channels = Vec::new();
    for _ in 0..connections {
        channels.push(dial().await?);
    }
    let latencies = Arc::new(Mutex::new(Vec::new()));
    let started = Instant::now();
    let mut clients = Vec::new();
    for channel in channels {
        let latencies = latencies.clone();
        clients.push(tokio::spawn(async move {
            let mut maintenance = MaintenanceClient::new(channel.clone());
            let mut cluster = ClusterClient::new(channel);
            let mut mine = Vec::new();
            while started.elapsed() < seconds {
                let t = Instant::now();
                maintenance.status(StatusRequest::default()).await?;
                cluster.member_list(MemberListRequest::default()).await?;
                mine.push(t.elapsed());
            }
            latencies
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .extend(mine);
            Ok::<_, tonic::Status>(())
        }));
    }
    for c in clients {
        c.await??;
    }
    let elapsed = started.elapsed().as_secs_f64();
    let mut all = std::mem::take(&mut *latencies.lock().unwrap_or_else(|p| p.into_inner()));
    all.sort();
    let pick = |p: f64| {
        all.get(((all.len().max(1) - 1) as f64 * p).round() as usize)
            .copied()
            .unwrap_or_default()
    };
    Ok(Figures {
        pairs: all.len(),
        per_second: all.len() as f64 / elapsed,
        p50: pick(0.5),
        p99: pick(0.99),
    })
}

fn print_table(rows: &[(&str, Figures)], connections: usize) {
    println!(
        "etcd Status + MemberList pairs, {connections} connections, TLS with client certificates\n"
    );
    println!("| path | pairs | pairs per second | p50 | p99 |");
    println!("|---|---|---|---|---|");
    for (name, f) in rows {
        println!(
            "| {name} | {} | {:.0} | {:.2} ms | {:.2} ms |",
            f.pairs,
            f.per_second,
            f.p50.as_secs_f64() * 1e3,
            f.p99.as_secs_f64() * 1e3
        );
    }
}

/// A TCP connection that sends small writes at once, as gRPC clients' are (with Nagle's
/// algorithm on, each request's second frame waits for the server's delayed ACK, 40 ms).
async fn connect(address: SocketAddr) -> std::io::Result<tokio::net::TcpStream> {
    let tcp = tokio::net::TcpStream::connect(address).await?;
    tcp.set_nodelay(true)?;
    Ok(tcp)
}

/// A kube client of `kubeconfig` whose connections send small writes at once. kube's
/// default connector leaves Nagle's algorithm on, which stalls a port-forward's small
/// frames for the server's delayed ACK.
async fn nodelay_client(kubeconfig: &str) -> anyhow::Result<kube::Client> {
    use kube::client::ConfigExt;
    let config = kube::Config::from_custom_kubeconfig(
        kube::config::Kubeconfig::from_yaml(kubeconfig)?,
        &Default::default(),
    )
    .await?;
    let mut http = hyper_util::client::legacy::connect::HttpConnector::new();
    http.enforce_http(false);
    http.set_nodelay(true);
    let https = config.rustls_https_connector_with_connector(http)?;
    Ok(infrasim_controllers::capi::standin::workload::client_over(
        &config, https,
    )?)
}

/// An HTTP/2 gRPC channel over `stream` after a TLS handshake as `creds`.
async fn tls_channel<S>(stream: S, creds: &Credentials) -> anyhow::Result<Channel>
where
    S: AsyncRead + AsyncWrite + Send + Unpin + 'static,
{
    let mut config = infrasim_kube_api::client_tls_config(&creds.ca_pem, &creds.client)?;
    config.alpn_protocols = vec![b"h2".to_vec()];
    let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(ServerName::try_from("localhost")?, stream)
        .await?;
    let once = Arc::new(Mutex::new(Some(tls)));
    let channel = tonic::transport::Endpoint::from_static("http://etcd.bench")
        .connect_with_connector(tower::service_fn(move |_| {
            let stream = once.lock().unwrap_or_else(|p| p.into_inner()).take();
            async move {
                stream
                    .map(hyper_util::rt::TokioIo::new)
                    .ok_or_else(|| std::io::Error::other("one connection per dial"))
            }
        }))
        .await?;
    Ok(channel)
}

async fn real_etcd(args: &EtcdBenchArgs) -> anyhow::Result<(Dial, tokio::process::Child)> {
    let dir = std::env::temp_dir().join(format!("infrasim-etcd-bench-{}", std::process::id()));
    start_etcd(&args.etcd, args.port + 10, &dir).await
}

/// Debian's etcd on loopback with TLS and client certificate authentication, as kubeadm runs
/// it, keeping its files in `dir`, its client port `client_port` (and the next for peers);
/// the dialer of its clients and the server process (killed when dropped).
pub(crate) async fn start_etcd(
    etcd: &str,
    client_port: u16,
    dir: &std::path::Path,
) -> anyhow::Result<(Dial, tokio::process::Child)> {
    let ca = CertificateAuthority::generate("etcd-ca")?;
    let serving = ca.serving_cert(
        "etcd",
        &["localhost".into()],
        &[IpAddr::V4(Ipv4Addr::LOCALHOST)],
    )?;
    let client = ca.client_cert("etcd-bench-client", &[])?;
    std::fs::create_dir_all(dir)?;
    std::fs::write(dir.join("ca.crt"), &ca.cert_pem)?;
    std::fs::write(dir.join("server.crt"), &serving.cert_pem)?;
    infrasim_kube_api::pki::write_private(&dir.join("server.key"), &serving.key_pem)?;
    let peer_port = client_port + 1;
    let child = tokio::process::Command::new(etcd)
        .args([
            "--name=bench".to_string(),
            format!("--data-dir={}", dir.join("data").display()),
            format!("--listen-client-urls=https://127.0.0.1:{client_port}"),
            format!("--advertise-client-urls=https://127.0.0.1:{client_port}"),
            format!("--listen-peer-urls=http://127.0.0.1:{peer_port}"),
            format!("--initial-advertise-peer-urls=http://127.0.0.1:{peer_port}"),
            format!("--initial-cluster=bench=http://127.0.0.1:{peer_port}"),
            format!("--cert-file={}", dir.join("server.crt").display()),
            format!("--key-file={}", dir.join("server.key").display()),
            format!("--trusted-ca-file={}", dir.join("ca.crt").display()),
            "--client-cert-auth".to_string(),
            "--log-level=error".to_string(),
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("starting {etcd}"))?;
    let creds = Credentials {
        ca_pem: ca.cert_pem.clone(),
        client,
    };
    let address = SocketAddr::from((Ipv4Addr::LOCALHOST, client_port));
    let dial: Dial = Arc::new(move || {
        let creds = creds.clone();
        Box::pin(async move { tls_channel(connect(address).await?, &creds).await })
    });
    // Until it serves.
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        if let Ok(channel) = dial().await {
            if MaintenanceClient::new(channel)
                .status(StatusRequest::default())
                .await
                .is_ok()
            {
                return Ok((dial, child));
            }
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "{etcd} did not serve within 15 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
