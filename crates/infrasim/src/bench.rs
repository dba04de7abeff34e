//! `infrasim bench api`: the API server against a bare hyper+rustls server under the same
//! client load, in one run, printed as a table.
//!
//! Both servers run in this process on loopback with the same TLS setup (ECDSA P-256,
//! client certificates), so the ratio isolates what the API server adds per request:
//! routing, authentication, store lookup and response assembly. Numbers are machine
//! dependent; the ratio and the watch latencies are what to compare across changes.

use anyhow::Context;
use bytes::Bytes;
use clap::{Args, Subcommand};
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use infrasim_clock::SystemClock;
use infrasim_kube_api::pki::{CertificateAuthority, KeyedCert};
use infrasim_kube_api::{tls_config, ApiConfig, ApiServer};
use infrasim_store::{MemoryBackend, ObjectKey, Store, StoreConfig};
use rustls::pki_types::ServerName;
use serde_json::json;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::net::{TcpListener, TcpStream};

#[derive(Debug, Args)]
pub struct BenchArgs {
    #[command(subcommand)]
    what: BenchWhat,
}

#[derive(Debug, Subcommand)]
enum BenchWhat {
    /// GET, LIST and watch fan-out against the API server and a bare server.
    Api(ApiBenchArgs),
    /// N Cluster API clusters through the embedded plane: time until Available, reconciles
    /// per second, peak RSS.
    Capi(crate::bench_capi::CapiBenchArgs),
    /// etcd Status + MemberList per second through a cluster's endpoint and a port-forward,
    /// against Debian's etcd server.
    Etcd(crate::bench_etcd::EtcdBenchArgs),
    /// `infrasim vcsim` against govmomi's simulator (Debian's library): server CPU per
    /// RetrievePropertiesEx, per clone and per listing of every VM, memory and startup, at
    /// several model sizes.
    Vsphere(crate::bench_vsphere::VsphereBenchArgs),
    /// The vcsim controller: N VCenterSimulators in one process (time to Ready, memory), and
    /// M VMs cloned in one of them the way CAPV clones them.
    Vcsim(crate::bench_vcsim::VcsimBenchArgs),
    /// The VmGroup controller: time for an N-replica group to be ready and vCenter calls per
    /// VM, against a naive list-everything loop.
    Vmgroup(crate::bench_vmgroup::VmGroupBenchArgs),
    /// The SIPCluster controller: time to place N SIPClusters over M BareMetalHosts, one at a
    /// time.
    Sip(crate::bench_sip::SipBenchArgs),
    /// Durable state: creates per second through the API, durable against in-memory and
    /// against Debian's etcd puts; restart time and disk bytes per object.
    Store(crate::bench_store::StoreBenchArgs),
}

#[derive(Debug, Args)]
pub(crate) struct ApiBenchArgs {
    /// Seconds each throughput scenario runs.
    #[arg(long, default_value_t = 5)]
    pub(crate) seconds: u64,
    /// Concurrent client connections for GET and LIST.
    #[arg(long, default_value_t = 16)]
    pub(crate) connections: usize,
    /// Objects in the listed collection.
    #[arg(long, default_value_t = 1000)]
    objects: usize,
    /// Concurrent watchers.
    #[arg(long, default_value_t = 1000)]
    watchers: usize,
    /// Changes written while the watchers listen.
    #[arg(long, default_value_t = 200)]
    events: usize,
}

pub async fn run(args: BenchArgs) -> anyhow::Result<()> {
    match args.what {
        BenchWhat::Api(a) => api(a).await,
        BenchWhat::Capi(a) => crate::bench_capi::run(a).await,
        BenchWhat::Etcd(a) => crate::bench_etcd::run(a).await,
        BenchWhat::Vsphere(a) => crate::bench_vsphere::run(a).await,
        BenchWhat::Vcsim(a) => crate::bench_vcsim::run(a).await,
        BenchWhat::Vmgroup(a) => crate::bench_vmgroup::run(a).await,
        BenchWhat::Sip(a) => crate::bench_sip::run(a).await,
        BenchWhat::Store(a) => crate::bench_store::run(a).await,
    }
}

/// Serves `server` on a loopback port with a certificate of `ca` for `localhost`: its
/// address, its TLS configuration, and what stops it when dropped.
pub(crate) async fn serve(
    server: &ApiServer,
    ca: &CertificateAuthority,
) -> anyhow::Result<(
    SocketAddr,
    Arc<rustls::ServerConfig>,
    tokio::sync::oneshot::Sender<()>,
)> {
    let serving = ca.serving_cert(
        "kube-apiserver",
        &["localhost".into()],
        &["127.0.0.1".parse()?],
    )?;
    let tls = tls_config(ca, &serving)?;
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(server.clone().serve(listener, tls.clone(), async {
        let _ = stopped.await;
    }));
    Ok((addr, tls, stop))
}

/// The name of the thread [`serve_on_own_thread`] serves on.
const SERVER_THREAD: &str = "bench-apiserver";

/// Serves `server` on a runtime of its own (two threads, as many as the process's own
/// runtime has; kept for the process's life, as the bench is): its address and the threads'
/// name.
fn serve_on_own_thread(
    server: &ApiServer,
    ca: &CertificateAuthority,
) -> anyhow::Result<(SocketAddr, &'static str)> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name(SERVER_THREAD)
        .enable_all()
        .build()?;
    let (server, ca) = (server.clone(), ca.clone());
    let (tx, rx) = std::sync::mpsc::channel();
    runtime.spawn(async move {
        // Made here, so the listener and its connections belong to this runtime's reactor.
        let served = serve(&server, &ca).await;
        let _ = tx.send(served.map(|(addr, _, stop)| (addr, stop)));
        std::future::pending::<()>().await;
    });
    let (addr, stop) = rx.recv()??;
    std::mem::forget((runtime, stop));
    Ok((addr, SERVER_THREAD))
}

/// The CPU time (user and system) the threads named `name` of this process have used.
fn thread_cpu(name: &str) -> Duration {
    let ticks_per_second = 100.0; // USER_HZ, what /proc reports in on Linux
    let mut ticks = 0u64;
    for task in std::fs::read_dir("/proc/self/task")
        .into_iter()
        .flatten()
        .flatten()
    {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if !name.starts_with(comm.trim()) || comm.trim().is_empty() {
            continue;
        }
        let stat = std::fs::read_to_string(task.path().join("stat")).unwrap_or_default();
        // Fields after the parenthesised command: utime and stime are the 12th and 13th.
        let fields: Vec<&str> = stat
            .rsplit_once(')')
            .map_or("", |(_, r)| r)
            .split_whitespace()
            .collect();
        let field = |i: usize| {
            fields
                .get(i)
                .and_then(|f| f.parse::<u64>().ok())
                .unwrap_or(0)
        };
        ticks += field(11) + field(12);
    }
    Duration::from_secs_f64(ticks as f64 / ticks_per_second)
}

/// Throughput and latency of one scenario.
pub(crate) struct Load {
    pub(crate) requests: usize,
    pub(crate) per_second: f64,
    pub(crate) p50: Duration,
    pub(crate) p99: Duration,
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

pub(crate) struct Client {
    tls: tokio_rustls::TlsConnector,
}

impl Client {
    pub(crate) fn new(
        ca: &CertificateAuthority,
        cert: &KeyedCert,
        h2: bool,
    ) -> anyhow::Result<Self> {
        let mut config = infrasim_kube_api::client_tls_config(&ca.cert_pem, cert)?;
        config.alpn_protocols = vec![if h2 {
            b"h2".to_vec()
        } else {
            b"http/1.1".to_vec()
        }];
        Ok(Client {
            tls: tokio_rustls::TlsConnector::from(Arc::new(config)),
        })
    }

    async fn tls(
        &self,
        addr: SocketAddr,
    ) -> anyhow::Result<tokio_rustls::client::TlsStream<TcpStream>> {
        let tcp = TcpStream::connect(addr).await?;
        tcp.set_nodelay(true)?;
        Ok(self
            .tls
            .connect(ServerName::try_from("localhost")?.to_owned(), tcp)
            .await?)
    }

    pub(crate) async fn http1<B>(
        &self,
        addr: SocketAddr,
    ) -> anyhow::Result<hyper::client::conn::http1::SendRequest<B>>
    where
        B: hyper::body::Body + Send + 'static,
        B::Data: Send,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let (send, conn) =
            hyper::client::conn::http1::handshake(TokioIo::new(self.tls(addr).await?)).await?;
        tokio::spawn(conn);
        Ok(send)
    }

    async fn http2(
        &self,
        addr: SocketAddr,
    ) -> anyhow::Result<hyper::client::conn::http2::SendRequest<Empty<Bytes>>> {
        let (send, conn) = hyper::client::conn::http2::handshake(
            TokioExecutor::new(),
            TokioIo::new(self.tls(addr).await?),
        )
        .await?;
        tokio::spawn(conn);
        Ok(send)
    }
}

fn get(path: &str) -> anyhow::Result<http::Request<Empty<Bytes>>> {
    Ok(http::Request::get(path)
        .header(http::header::HOST, "localhost")
        .header(http::header::ACCEPT, "application/json")
        .body(Empty::new())?)
}

/// Requests per second and latency percentiles of a load.
pub(crate) fn summarize(mut all: Vec<Duration>, elapsed: Duration) -> Load {
    all.sort();
    let elapsed = elapsed.as_secs_f64().max(f64::EPSILON);
    Load {
        requests: all.len(),
        per_second: all.len() as f64 / elapsed,
        p50: percentile(&all, 0.5),
        p99: percentile(&all, 0.99),
    }
}

/// `connections` connections issuing GET `path` back to back for `seconds`.
async fn load(
    client: &Arc<Client>,
    addr: SocketAddr,
    path: &str,
    connections: usize,
    seconds: u64,
) -> anyhow::Result<Load> {
    let path = path.to_string();
    load_with(client, addr, connections, seconds, move |_, _| get(&path)).await
}

/// `connections` connections sending the requests `make(connection, n)` builds back to back
/// for `seconds`; each must succeed.
pub(crate) async fn load_with<B, F>(
    client: &Arc<Client>,
    addr: SocketAddr,
    connections: usize,
    seconds: u64,
    make: F,
) -> anyhow::Result<Load>
where
    B: hyper::body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    F: Fn(usize, usize) -> anyhow::Result<http::Request<B>> + Send + Sync + 'static,
{
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let make = Arc::new(make);
    let mut tasks = Vec::new();
    for c in 0..connections {
        let mut send = client.http1::<B>(addr).await?;
        let make = make.clone();
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            while Instant::now() < deadline {
                let request = make(c, latencies.len())?;
                let started = Instant::now();
                let resp = send.send_request(request).await?;
                anyhow::ensure!(resp.status().is_success(), "status {}", resp.status());
                resp.into_body().collect().await?;
                latencies.push(started.elapsed());
            }
            Ok::<_, anyhow::Error>(latencies)
        }));
    }
    let started = Instant::now();
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await??);
    }
    Ok(summarize(all, started.elapsed()))
}

/// A server that answers every request with the same bytes: the floor any API server stands on.
async fn bare_server(tls: Arc<rustls::ServerConfig>, body: Bytes) -> anyhow::Result<SocketAddr> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let acceptor = tokio_rustls::TlsAcceptor::from(tls);
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            let body = body.clone();
            tokio::spawn(async move {
                let _ = tcp.set_nodelay(true);
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let service = hyper::service::service_fn(move |_req: http::Request<Incoming>| {
                    let body = body.clone();
                    async move {
                        let mut resp = http::Response::new(Full::new(body));
                        resp.headers_mut().insert(
                            http::header::CONTENT_TYPE,
                            http::HeaderValue::from_static("application/json"),
                        );
                        Ok::<_, std::convert::Infallible>(resp)
                    }
                });
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(tls), service)
                    .await;
            });
        }
    });
    Ok(addr)
}

async fn api(args: ApiBenchArgs) -> anyhow::Result<()> {
    let ca = CertificateAuthority::generate("bench-ca")?;
    let store = Store::new(
        StoreConfig::default(),
        SystemClock::shared(),
        Arc::new(MemoryBackend),
    );
    let group = store.create_group("bench")?;
    let server = ApiServer::new(
        group.clone(),
        ca.clone(),
        store.clock().clone(),
        ApiConfig::default(),
    );
    let (addr, tls, _stop) = serve(&server, &ca).await?;

    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "bench"}});
    group.create("namespaces", ns, Default::default())?;
    let cm = |name: String| {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": name, "namespace": "bench", "labels": {"app": "bench"}},
               "data": {"key": "value", "t": "0"}})
    };
    for i in 0..args.objects {
        group.create("configmaps", cm(format!("cm-{i:05}")), Default::default())?;
    }
    let target = group.create("configmaps", cm("target".into()), Default::default())?;
    let admin = ca.client_cert("kubernetes-admin", &["system:masters"])?;
    let client = Arc::new(Client::new(&ca, &admin, false)?);
    // A user RBAC decides for: the bootstrap `view` ClusterRole (aggregated), bound in the
    // namespace; every request of theirs is evaluated against all bindings.
    let reader = ca.client_cert("bench-reader", &[])?;
    let reader_client = Arc::new(Client::new(&ca, &reader, false)?);
    group.create(
        "rolebindings.rbac.authorization.k8s.io",
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
               "metadata": {"name": "bench-reader", "namespace": "bench"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
               "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "bench-reader"}]}),
        Default::default(),
    )?;

    println!(
        "infrasim bench api: {} s per scenario, {} connections, {} objects, {} watchers x {} events",
        args.seconds, args.connections, args.objects, args.watchers, args.events
    );
    println!();
    println!(
        "{:<22} {:>14} {:>10} {:>10} {:>14} {:>10} {:>10} {:>8}",
        "scenario", "infrasim req/s", "p50", "p99", "bare req/s", "p50", "p99", "ratio"
    );

    let get_path = "/api/v1/namespaces/bench/configmaps/target";
    let list_path = "/api/v1/namespaces/bench/configmaps";
    // The bare server returns exactly the bytes the API server would, so both move the same
    // payload over the same TLS.
    let list_body = collect(&client, addr, list_path).await?;
    for (name, path, body, who) in [
        ("GET one object", get_path, target.bytes.clone(), &client),
        (
            "GET as an RBAC user",
            get_path,
            target.bytes.clone(),
            &reader_client,
        ),
        ("LIST all objects", list_path, list_body, &client),
    ] {
        let ours = load(who, addr, path, args.connections, args.seconds).await?;
        let bare_addr = bare_server(tls.clone(), body).await?;
        let bare = load(&client, bare_addr, "/", args.connections, args.seconds).await?;
        println!(
            "{:<22} {:>14.0} {:>10} {:>10} {:>14.0} {:>10} {:>10} {:>8.2}",
            name,
            ours.per_second,
            fmt(ours.p50),
            fmt(ours.p99),
            bare.per_second,
            fmt(bare.p50),
            fmt(bare.p99),
            ours.per_second / bare.per_second.max(f64::EPSILON)
        );
        tracing::debug!(ours = ours.requests, bare = bare.requests, "requests");
    }

    // The watchers' server runs on a thread of its own, so the server's share of the work can
    // be told from the clients' (both in this process, on this machine's cores).
    let (watch_addr, server_thread) = serve_on_own_thread(&server, &ca)?;
    let busy_before = thread_cpu(server_thread);
    let started = Instant::now();
    let watch = watch_fan_out(&ca, &admin, watch_addr, &group, &args).await?;
    let (elapsed, busy) = (started.elapsed(), thread_cpu(server_thread) - busy_before);
    println!();
    println!(
        "watch fan-out: {} watchers x {} events: {} of {} deliveries, p50 {}, p99 {}, max {}",
        args.watchers,
        args.events,
        watch.delivered,
        args.watchers * args.events,
        fmt(watch.p50),
        fmt(watch.p99),
        fmt(watch.max)
    );
    println!(
        "  the server: {:.1} us of CPU per delivery, {:.2} cores busy over the fan-out's {:.1} s (the watchers' side has the rest of the machine)",
        busy.as_secs_f64() * 1e6 / watch.delivered.max(1) as f64,
        busy.as_secs_f64() / elapsed.as_secs_f64(),
        elapsed.as_secs_f64()
    );
    crate::bench_cel::creates(&client, addr, &args).await?;
    let _ = target;
    Ok(())
}

pub(crate) fn fmt(d: Duration) -> String {
    if d < Duration::from_millis(1) {
        format!("{}us", d.as_micros())
    } else {
        format!("{:.2}ms", d.as_secs_f64() * 1000.0)
    }
}

async fn collect(client: &Client, addr: SocketAddr, path: &str) -> anyhow::Result<Bytes> {
    let mut send = client.http1(addr).await?;
    let resp = send.send_request(get(path)?).await?;
    anyhow::ensure!(resp.status().is_success(), "GET {path}: {}", resp.status());
    Ok(resp.into_body().collect().await?.to_bytes())
}

struct WatchFigures {
    delivered: usize,
    p50: Duration,
    p99: Duration,
    max: Duration,
}

/// Starts `watchers` watches (100 HTTP/2 streams per connection), writes `events` changes,
/// and measures the time from each write to its arrival at each watcher.
async fn watch_fan_out(
    ca: &CertificateAuthority,
    admin: &KeyedCert,
    addr: SocketAddr,
    group: &Arc<infrasim_store::Group>,
    args: &ApiBenchArgs,
) -> anyhow::Result<WatchFigures> {
    let client = Client::new(ca, admin, true)?;
    let origin = Instant::now();
    let rv = group.resource_version();
    let path = format!(
        "/api/v1/namespaces/bench/configmaps?watch=true&resourceVersion={rv}&fieldSelector=metadata.name%3Dtarget&timeoutSeconds=120"
    );
    let (ready_tx, mut ready_rx) = tokio::sync::mpsc::channel::<()>(args.watchers.max(1));
    let mut tasks = Vec::new();
    let per_connection = 100;
    for chunk in 0..args.watchers.div_ceil(per_connection) {
        let send = client.http2(addr).await.context("connecting watchers")?;
        let count = per_connection.min(args.watchers - chunk * per_connection);
        for _ in 0..count {
            let mut send = send.clone();
            let path = path.clone();
            let ready = ready_tx.clone();
            let expected = args.events;
            tasks.push(tokio::spawn(async move {
                send.ready().await?;
                let resp = send.send_request(get(&path)?).await?;
                anyhow::ensure!(resp.status().is_success(), "watch: {}", resp.status());
                let _ = ready.send(()).await;
                let mut body = resp.into_body();
                let mut latencies = Vec::with_capacity(expected);
                let mut buf = Vec::new();
                while latencies.len() < expected {
                    let Some(frame) = body.frame().await else {
                        break;
                    };
                    let Ok(data) = frame?.into_data() else {
                        continue;
                    };
                    buf.extend_from_slice(&data);
                    // Lines are read where they lie and the buffer shifted once per frame,
                    // so the watchers' side costs little next to the server's.
                    let mut start = 0;
                    while let Some(end) = buf[start..].iter().position(|b| *b == b'\n') {
                        if let Some(sent) = sent_at(&buf[start..start + end]) {
                            let now = origin.elapsed().as_nanos() as u64;
                            latencies.push(Duration::from_nanos(now.saturating_sub(sent)));
                        }
                        start += end + 1;
                    }
                    buf.drain(..start);
                }
                Ok::<_, anyhow::Error>(latencies)
            }));
        }
    }
    drop(ready_tx);
    for _ in 0..args.watchers {
        if tokio::time::timeout(Duration::from_secs(30), ready_rx.recv())
            .await
            .ok()
            .flatten()
            .is_none()
        {
            anyhow::bail!("watchers did not all start");
        }
    }
    let key = ObjectKey::new("bench", "target");
    for _ in 0..args.events {
        let current = group.get("configmaps", &key).context("target vanished")?;
        let mut value = current.to_value()?;
        value["data"]["t"] = json!(origin.elapsed().as_nanos().to_string());
        group.update("configmaps", value, current.derived.clone(), None)?;
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let mut all = Vec::new();
    for t in tasks {
        match tokio::time::timeout(Duration::from_secs(60), t).await {
            Ok(Ok(Ok(l))) => all.extend(l),
            Ok(Ok(Err(e))) => tracing::warn!(error = %e, "watcher failed"),
            _ => tracing::warn!("watcher did not finish"),
        }
    }
    all.sort();
    Ok(WatchFigures {
        delivered: all.len(),
        p50: percentile(&all, 0.5),
        p99: percentile(&all, 0.99),
        max: all.last().copied().unwrap_or_default(),
    })
}

/// The write time (ns since the bench's origin) stamped in a watch event's `data.t`. Found
/// by scanning rather than parsing, so the client's own cost stays small next to the server's.
fn sent_at(line: &[u8]) -> Option<u64> {
    const NEEDLE: &[u8] = b"\"t\":\"";
    let start = line.windows(NEEDLE.len()).position(|w| w == NEEDLE)? + NEEDLE.len();
    let digits = line[start..]
        .iter()
        .take_while(|b| b.is_ascii_digit())
        .count();
    std::str::from_utf8(&line[start..start + digits])
        .ok()?
        .parse()
        .ok()
}
