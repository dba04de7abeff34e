//! What the benchmarks share: an API server served on a loopback port (on a thread of its
//! own when its CPU is measured apart), an HTTP/2 client over TLS, and the closed-loop load
//! that drives N connections for a fixed time and sums up throughput and latencies.

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::{TokioExecutor, TokioIo};
use infrasim_kube_api::pki::{CertificateAuthority, KeyedCert};
use infrasim_kube_api::{tls_config, ApiServer};
use rustls::pki_types::ServerName;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::net::{TcpListener, TcpStream};

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
pub(crate) const SERVER_THREAD: &str = "bench-apiserver";

/// Serves `server` on a runtime of its own (two threads, as many as the process's own
/// runtime has; kept for the process's life, as the bench is): its address and the threads'
/// name.
pub(crate) fn serve_on_own_thread(
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
pub(crate) fn thread_cpu(name: &str) -> Duration {
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
        ticks += cpu_ticks(&stat);
    }
    Duration::from_secs_f64(ticks as f64 / USER_HZ)
}

/// The CPU (user and system) this whole process has used so far, every thread together.
pub(crate) fn process_cpu() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    Duration::from_secs_f64(cpu_ticks(&stat) as f64 / USER_HZ)
}

/// Fails unless the endpoint range `port_min..=port_max` has a port for each of `clusters`
/// (every cluster listens on its own).
pub(crate) fn ensure_ports(clusters: usize, port_min: u16, port_max: u16) -> anyhow::Result<()> {
    let ports = usize::from(port_max.saturating_sub(port_min)) + 1;
    anyhow::ensure!(
        clusters <= ports,
        "{clusters} clusters need {clusters} ports: raise --port-max"
    );
    Ok(())
}

/// The unit of `/proc`'s CPU times on Linux (USER_HZ), in ticks per second.
const USER_HZ: f64 = 100.0;

/// User plus system ticks from a `/proc/.../stat` line.
fn cpu_ticks(stat: &str) -> u64 {
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
    field(11) + field(12)
}

/// Throughput and latency of one scenario.
pub(crate) struct Load {
    pub(crate) requests: usize,
    pub(crate) per_second: f64,
    pub(crate) p50: Duration,
    pub(crate) p99: Duration,
}

pub(crate) fn percentile(sorted: &[Duration], p: f64) -> Duration {
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

    pub(crate) async fn http2(
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

pub(crate) fn get(path: &str) -> anyhow::Result<http::Request<Empty<Bytes>>> {
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
pub(crate) async fn load(
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

pub(crate) fn fmt(d: Duration) -> String {
    if d < Duration::from_millis(1) {
        format!("{}us", d.as_micros())
    } else {
        format!("{:.2}ms", d.as_secs_f64() * 1000.0)
    }
}
