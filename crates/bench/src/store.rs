//! `infrasim bench store`: what durability costs. Creates per second through the API (TLS,
//! client certificates, one HTTP/1.1 connection per client, each creating ConfigMaps back to
//! back) from 1, 8 and 64 clients, on the in-memory store and on the durable one, beside
//! Debian's etcd 3.4 server taking puts of the same size from the same number of gRPC
//! clients (its bare key-value path, started by the run on the same disk); then the time to
//! restart a durable store of N objects and the disk bytes per object; and workload clusters:
//! created per second in memory and durable, and the time to bring N of them back.

use crate::harness::{load_with, Client};
use anyhow::Context;
use bytes::Bytes;
use clap::Args;
use http_body_util::Full;
use infrasim_clock::SystemClock;
use infrasim_durable::DurableBackend;
use infrasim_etcd_sim::pb::etcdserverpb::kv_client::KvClient;
use infrasim_etcd_sim::pb::etcdserverpb::PutRequest;
use infrasim_kube_api::pki::CertificateAuthority;
use infrasim_kube_api::{ApiConfig, ApiServer};
use infrasim_store::{Backend, MemoryBackend, Store, StoreConfig};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Debug, Args)]
pub struct StoreBenchArgs {
    /// Seconds each create scenario runs.
    #[arg(long, default_value_t = 5)]
    seconds: u64,
    /// Concurrent clients, one scenario each.
    #[arg(long, value_delimiter = ',', default_value = "1,8,64")]
    clients: Vec<usize>,
    /// Store sizes whose restart time and disk use are measured.
    #[arg(long, value_delimiter = ',', default_value = "100000")]
    restart_objects: Vec<usize>,
    /// Workload clusters (one control plane, one worker) created and brought back.
    #[arg(long, default_value_t = 200)]
    clusters: usize,
    /// The etcd server binary of the baseline (Debian's etcd-server installs `etcd`).
    #[arg(long, default_value = "etcd")]
    etcd: String,
    /// etcd's client port (and the next, its peer port).
    #[arg(long, default_value_t = 24620)]
    etcd_port: u16,
    /// Where the durable stores and etcd keep their files (one disk for both); a fresh
    /// directory under the system's temporary directory when not given.
    #[arg(long)]
    dir: Option<PathBuf>,
}

pub async fn run(args: StoreBenchArgs) -> anyhow::Result<()> {
    let root = args.dir.clone().unwrap_or_else(|| {
        std::env::temp_dir().join(format!("infrasim-store-bench-{}", std::process::id()))
    });
    std::fs::create_dir_all(&root).with_context(|| format!("creating {}", root.display()))?;
    println!(
        "infrasim bench store: {} s per scenario, files in {}",
        args.seconds,
        root.display()
    );
    let mut rows: Vec<(String, Vec<f64>)> = Vec::new();
    for durable in [false, true] {
        let mut figures = Vec::new();
        for &clients in &args.clients {
            let dir = root.join(format!("api-{clients}"));
            let _ = std::fs::remove_dir_all(&dir);
            figures
                .push(api_creates(durable.then_some(dir.as_path()), clients, args.seconds).await?);
        }
        let name = if durable {
            "durable (fsync'd log + redb)"
        } else {
            "in memory (--ephemeral)"
        };
        rows.push((format!("infrasim API, {name}"), figures));
    }
    let etcd_dir = root.join("etcd");
    let _ = std::fs::remove_dir_all(&etcd_dir);
    match crate::etcd::start_etcd(&args.etcd, args.etcd_port, &etcd_dir).await {
        Ok((dial, _server)) => {
            let mut figures = Vec::new();
            for &clients in &args.clients {
                figures.push(etcd_puts(&dial, clients, args.seconds).await?);
            }
            rows.push(("etcd 3.4 puts (Debian etcd-server)".into(), figures));
        }
        Err(e) => println!("etcd baseline skipped: {e:#} (install Debian's etcd-server)"),
    }
    print_creates(&args.clients, &rows);
    println!();
    println!(
        "{:<12} {:>12} {:>16} {:>14} {:>10}",
        "objects", "restart", "disk bytes/obj", "database", "log"
    );
    let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
    for &n in &args.restart_objects {
        let (restart, bytes, log) = restart(&root.join(format!("restart-{n}")), n)?;
        println!(
            "{:<12} {:>10.2} s {:>16.0} {:>10.1} MiB {:>6.1} MiB",
            n,
            restart.as_secs_f64(),
            (bytes + log) as f64 / n.max(1) as f64,
            mib(bytes),
            mib(log)
        );
    }
    if args.clusters > 0 {
        clusters(&root.join("clusters"), args.clusters).await?;
    }
    if args.dir.is_none() {
        let _ = std::fs::remove_dir_all(&root);
    }
    Ok(())
}

/// The cloud the cluster figures use: ports apart from `up`'s default range.
fn cloud_config() -> infrasim_cloud::CloudConfig {
    infrasim_cloud::CloudConfig {
        ports: 25000..=29999,
        ..infrasim_cloud::CloudConfig::default()
    }
}

/// Creates `n` clusters one after another, and waits until all are up (CoreDNS and
/// kube-proxy available); the rate.
async fn create_clusters(cloud: &infrasim_cloud::Cloud, n: usize) -> anyhow::Result<f64> {
    let started = Instant::now();
    for i in 0..n {
        cloud
            .create_cluster(infrasim_cloud::ClusterShape {
                name: format!("c{i}"),
                control_planes: 1,
                workers: 1,
                workloads: infrasim_cloud::WorkloadConfig {
                    lease_renewal: Duration::ZERO,
                    pod_startup: Duration::ZERO,
                    ..infrasim_cloud::WorkloadConfig::default()
                },
                ..infrasim_cloud::ClusterShape::default()
            })
            .await?;
    }
    while cloud.clusters().iter().any(|c| !cloud.ready(&c.name)) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(n as f64 / started.elapsed().as_secs_f64())
}

async fn open_cloud(dir: &Path) -> anyhow::Result<infrasim_cloud::Cloud> {
    let config = cloud_config();
    let backend = Arc::new(DurableBackend::open(dir, config.watch_window)?);
    let store = Store::open(config.store_config(), SystemClock::shared(), backend)?;
    Ok(infrasim_cloud::Cloud::open(config, SystemClock::shared(), store).await?)
}

/// Workload clusters: created per second in memory and durable, then the durable ones
/// brought back by a new cloud once the first one's runtime (its tasks, its ports) is gone.
async fn clusters(dir: &Path, n: usize) -> anyhow::Result<()> {
    let _ = std::fs::remove_dir_all(dir);
    let in_memory = {
        let cloud = infrasim_cloud::Cloud::new(cloud_config());
        let rate = create_clusters(&cloud, n).await?;
        for c in cloud.clusters() {
            cloud.delete_cluster(&c.name).await?;
        }
        rate
    };
    let owned = dir.to_path_buf();
    // Its own runtime, ended as a process would end: every task and listener goes with it.
    let durable = std::thread::spawn(move || -> anyhow::Result<f64> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()?;
        let rate = rt.block_on(async {
            let cloud = open_cloud(&owned).await?;
            create_clusters(&cloud, n).await
        });
        rt.shutdown_timeout(Duration::from_secs(10));
        rate
    })
    .join()
    .map_err(|_| anyhow::anyhow!("the durable cloud panicked"))??;
    let bytes = std::fs::metadata(dir.join(infrasim_durable::FILE))?.len() + log_bytes(dir)?;
    let started = Instant::now();
    let cloud = open_cloud(dir).await?;
    let took = started.elapsed();
    let ready = cloud
        .clusters()
        .iter()
        .filter(|c| cloud.ready(&c.name))
        .count();
    anyhow::ensure!(ready == n, "{ready} of {n} clusters came back ready");
    println!();
    println!(
        "{:<28} {:>14} {:>14} {:>12} {:>18}",
        "workload clusters (1 cp, 1 w)",
        "created/s mem",
        "created/s dur",
        "restart",
        "disk bytes/cluster"
    );
    println!(
        "{:<28} {:>14.1} {:>14.1} {:>10.2} s {:>18.0}",
        n,
        in_memory,
        durable,
        took.as_secs_f64(),
        bytes as f64 / n.max(1) as f64
    );
    Ok(())
}

fn print_creates(clients: &[usize], rows: &[(String, Vec<f64>)]) {
    println!();
    print!("{:<50}", "creates per second, by concurrent clients");
    for c in clients {
        print!(" {:>10}", c);
    }
    println!();
    for (name, figures) in rows {
        print!("{name:<50}");
        for f in figures {
            print!(" {f:>10.0}");
        }
        println!();
    }
    if let (Some(memory), Some(durable)) = (rows.first(), rows.get(1)) {
        print!("{:<50}", "durable / in memory");
        for (d, m) in durable.1.iter().zip(&memory.1) {
            print!(" {:>10.2}", d / m.max(f64::EPSILON));
        }
        println!();
    }
    if let (Some(durable), Some(etcd)) = (rows.get(1), rows.get(2)) {
        print!("{:<50}", "durable API / etcd puts");
        for (d, e) in durable.1.iter().zip(&etcd.1) {
            print!(" {:>10.2}", d / e.max(f64::EPSILON));
        }
        println!();
    }
}

/// A ConfigMap of about the size a small controller object has.
fn configmap(name: &str) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": name, "namespace": "default", "labels": {"app": "bench"}},
           "data": {"config": "x".repeat(200)}})
}

/// Creates per second through the API from `clients` connections, on a store in memory or
/// (with a directory) durable.
async fn api_creates(dir: Option<&Path>, clients: usize, seconds: u64) -> anyhow::Result<f64> {
    let backend: Arc<dyn Backend> = match dir {
        Some(dir) => Arc::new(DurableBackend::open(dir, 10_000)?),
        None => Arc::new(MemoryBackend),
    };
    let store = Store::open(StoreConfig::default(), SystemClock::shared(), backend)?;
    let group = store.create_group("bench")?;
    let ca = CertificateAuthority::generate("bench-ca")?;
    let server = ApiServer::new(
        group,
        ca.clone(),
        SystemClock::shared(),
        ApiConfig::default(),
    );
    let (addr, _tls, stop) = crate::harness::serve(&server, &ca).await?;
    let admin = ca.client_cert("kubernetes-admin", &["system:masters"])?;
    let client = Arc::new(Client::new(&ca, &admin, false)?);
    let load = load_with(&client, addr, clients, seconds, |c, n| {
        let body = configmap(&format!("cm-{c}-{n}")).to_string();
        Ok(http::Request::post("/api/v1/namespaces/default/configmaps")
            .header(http::header::HOST, "localhost")
            .header(http::header::CONTENT_TYPE, "application/json")
            .header(http::header::ACCEPT, "application/json")
            .body(Full::new(Bytes::from(body)))?)
    })
    .await?;
    drop(stop);
    Ok(load.per_second)
}

/// Puts per second into etcd from `clients` connections, each value the size of the
/// ConfigMaps the API scenarios create.
async fn etcd_puts(dial: &crate::etcd::Dial, clients: usize, seconds: u64) -> anyhow::Result<f64> {
    let value = configmap("cm-0-0").to_string().into_bytes();
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let mut tasks = Vec::new();
    for c in 0..clients {
        let mut kv = KvClient::new(dial().await?);
        let value = value.clone();
        tasks.push(tokio::spawn(async move {
            let mut n = 0usize;
            while Instant::now() < deadline {
                let key = format!("/registry/configmaps/default/cm-{c}-{n}").into_bytes();
                kv.put(PutRequest {
                    key,
                    value: value.clone(),
                    ..Default::default()
                })
                .await?;
                n += 1;
            }
            Ok::<_, anyhow::Error>(n)
        }));
    }
    let started = Instant::now();
    let mut total = 0;
    for t in tasks {
        total += t.await??;
    }
    Ok(total as f64 / started.elapsed().as_secs_f64())
}

/// Fills a durable store in `dir` with `n` ConfigMaps (from many threads and groups, so
/// commits are shared), then reopens it: the time to serve again, and the file's size.
/// The write-ahead log's files: a fixed few MiB, made at start.
fn log_bytes(dir: &Path) -> anyhow::Result<u64> {
    let mut total = 0;
    for f in infrasim_durable::LOGS {
        total += std::fs::metadata(dir.join(f))?.len();
    }
    Ok(total)
}

/// The time to open a durable store of `n` objects, its database's bytes and its log's.
fn restart(dir: &Path, n: usize) -> anyhow::Result<(Duration, u64, u64)> {
    let _ = std::fs::remove_dir_all(dir);
    const WRITERS: usize = 32;
    {
        let backend = Arc::new(DurableBackend::open(dir, 1000)?);
        let store = Store::open(StoreConfig::default(), SystemClock::shared(), backend)?;
        std::thread::scope(|s| -> anyhow::Result<()> {
            let mut handles = Vec::new();
            for w in 0..WRITERS {
                let group = store.create_group(&format!("g{w}"))?;
                handles.push(s.spawn(move || -> anyhow::Result<()> {
                    for i in (w..n).step_by(WRITERS) {
                        group.create(
                            "configmaps",
                            configmap(&format!("cm-{i}")),
                            Default::default(),
                        )?;
                    }
                    Ok(())
                }));
            }
            for h in handles {
                h.join()
                    .map_err(|_| anyhow::anyhow!("a writer panicked"))??;
            }
            Ok(())
        })?;
    }
    let bytes = std::fs::metadata(dir.join(infrasim_durable::FILE))?.len();
    let log = log_bytes(dir)?;
    let started = Instant::now();
    let backend = Arc::new(DurableBackend::open(dir, 1000)?);
    let store = Store::open(StoreConfig::default(), SystemClock::shared(), backend)?;
    let took = started.elapsed();
    let restored: usize = store
        .group_names()
        .iter()
        .filter_map(|g| store.group(g))
        .map(|g| {
            g.snapshot("configmaps", infrasim_store::ReadAt::Latest)
                .map(|s| s.objects.len())
                .unwrap_or(0)
        })
        .sum();
    anyhow::ensure!(restored == n, "restored {restored} of {n} objects");
    drop(store);
    let _ = std::fs::remove_dir_all(dir);
    Ok((took, bytes, log))
}
