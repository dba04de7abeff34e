//! `infrasim bench api`: the API server against a bare hyper+rustls server under the same
//! client load, in one run, printed as a table.
//!
//! Both servers run in this process on loopback with the same TLS setup (ECDSA P-256,
//! client certificates), so the ratio isolates what the API server adds per request:
//! routing, authentication, store lookup and response assembly. Numbers are machine
//! dependent; the ratio and the watch latencies are what to compare across changes.

use crate::harness::{fmt, get, load, percentile, serve, serve_on_own_thread, thread_cpu, Client};
use anyhow::Context;
use bytes::Bytes;
use clap::Args;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use infrasim_clock::SystemClock;
use infrasim_kube_api::pki::{CertificateAuthority, KeyedCert};
use infrasim_kube_api::{ApiConfig, ApiServer};
use infrasim_store::{MemoryBackend, ObjectKey, Store, StoreConfig};
use serde_json::json;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::net::TcpListener;

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

pub(crate) async fn run(args: ApiBenchArgs) -> anyhow::Result<()> {
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

    let target = create_config_maps(&group, args.objects)?;
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
    throughput(&args, &client, &reader_client, addr, tls, target.bytes()).await?;
    watch(&server, &ca, &admin, &group, &args).await?;
    crate::cel::creates(&client, addr, (args.connections, args.seconds)).await?;
    let _ = target;
    Ok(())
}

/// The listed collection: the namespace `bench` with `objects` ConfigMaps, and the one the
/// GET scenarios read, which is returned.
fn create_config_maps(
    group: &Arc<infrasim_store::Group>,
    objects: usize,
) -> anyhow::Result<Arc<infrasim_store::StoredObject>> {
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "bench"}});
    group.create("namespaces", ns, Default::default())?;
    let cm = |name: String| {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": name, "namespace": "bench", "labels": {"app": "bench"}},
               "data": {"key": "value", "t": "0"}})
    };
    for i in 0..objects {
        group.create("configmaps", cm(format!("cm-{i:05}")), Default::default())?;
    }
    Ok(group.create("configmaps", cm("target".into()), Default::default())?)
}

/// The throughput table: each scenario against the API server (as the admin, or as
/// `reader_client`, a user RBAC decides for), then against a bare server answering with the
/// same bytes over the same TLS.
async fn throughput(
    args: &ApiBenchArgs,
    client: &Arc<Client>,
    reader_client: &Arc<Client>,
    addr: SocketAddr,
    tls: Arc<rustls::ServerConfig>,
    target: Bytes,
) -> anyhow::Result<()> {
    println!(
        "{:<22} {:>14} {:>10} {:>10} {:>14} {:>10} {:>10} {:>8}",
        "scenario", "infrasim req/s", "p50", "p99", "bare req/s", "p50", "p99", "ratio"
    );

    let get_path = "/api/v1/namespaces/bench/configmaps/target";
    let list_path = "/api/v1/namespaces/bench/configmaps";
    // The bare server returns exactly the bytes the API server would, so both move the same
    // payload over the same TLS.
    let list_body = collect(client, addr, list_path).await?;
    for (name, path, body, who) in [
        ("GET one object", get_path, target.clone(), client),
        ("GET as an RBAC user", get_path, target, reader_client),
        ("LIST all objects", list_path, list_body, client),
    ] {
        let ours = load(who, addr, path, args.connections, args.seconds).await?;
        let bare_addr = bare_server(tls.clone(), body).await?;
        let bare = load(client, bare_addr, "/", args.connections, args.seconds).await?;
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
    Ok(())
}

/// The watch fan-out scenario and what it cost the server's own thread.
async fn watch(
    server: &ApiServer,
    ca: &CertificateAuthority,
    admin: &KeyedCert,
    group: &Arc<infrasim_store::Group>,
    args: &ApiBenchArgs,
) -> anyhow::Result<()> {
    // The watchers' server runs on a thread of its own, so the server's share of the work can
    // be told from the clients' (both in this process, on this machine's cores).
    let (watch_addr, server_thread) = serve_on_own_thread(server, ca)?;
    let busy_before = thread_cpu(server_thread);
    let started = Instant::now();
    let watch = watch_fan_out(ca, admin, watch_addr, group, args).await?;
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
    Ok(())
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
