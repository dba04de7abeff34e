//! `infrasim bench capi`: N Cluster API clusters declared through the embedded management
//! plane (ClusterClass `in-memory`, machine steps taking no time), made real by the in-memory
//! provider and the core stand-in in this process; printed as a table: the time until every
//! Cluster is Available, reconciles per second, peak RSS.
//!
//! There is no baseline in the same run: Cluster API's own in-memory provider needs the Go
//! Cluster API controllers, which this machine cannot build. The targets (1,000
//! clusters in 60 s, 10,000 in 10 minutes on two cores) are printed beside the figures.

use anyhow::Context as _;
use clap::Args;
use futures::{StreamExt, TryStreamExt};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use infrasim_clock::SystemClock;
use infrasim_cloud::{Cloud, CloudConfig};
use infrasim_controllers::capi::core::Cluster;
use infrasim_controllers::capi::templates;
use infrasim_controllers::{crds, Context, Selection};
use infrasim_kube_api::pki::CertificateAuthority;
use infrasim_kube_api::{ApiConfig, ApiServer, Identity};
use infrasim_store::{MemoryBackend, Store, StoreConfig};
use kube::api::Api;
use kube::runtime::{watcher, WatchStreamExt};
use kube::ResourceExt;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Debug, Args)]
pub struct CapiBenchArgs {
    /// Clusters to create.
    #[arg(long, default_value_t = 100)]
    clusters: usize,
    #[arg(long, default_value_t = 1)]
    control_planes: u32,
    #[arg(long, default_value_t = 3)]
    workers: u32,
    /// First port of the endpoint range (one port per cluster).
    #[arg(long, default_value_t = 20000)]
    port_min: u16,
    /// Last port of the endpoint range (raise it beyond 4,000 clusters).
    #[arg(long, default_value_t = 24000)]
    port_max: u16,
    /// Give up after this many seconds.
    #[arg(long, default_value_t = 1800)]
    timeout: u64,
}

/// Peak resident memory of this process (VmHWM), in bytes.
fn peak_rss() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}

/// The embedded plane: the engine, a client over its in-process service, the controllers.
async fn plane(args: &CapiBenchArgs) -> anyhow::Result<kube::Client> {
    let clock = SystemClock::shared();
    // Larger than `infrasim up`'s defaults (10,000 and 4,096). With those, the burst of a
    // thousand clusters declared at once puts the controllers' watches more than the window
    // behind; each then gets 410, relists and backs off, and the last clusters wait on the
    // backoff (892 of 1,000 Available after 200 s, the process mostly idle): a known gap.
    let store = Store::new(
        StoreConfig {
            watch_window: 100_000,
            watcher_buffer: 65_536,
        },
        clock.clone(),
        Arc::new(MemoryBackend),
    );
    let group = store.create_group("management")?;
    let ca = CertificateAuthority::generate("bench-ca")?;
    let server = ApiServer::new(group, ca, clock.clone(), ApiConfig::default());
    let identity = Identity {
        user: "bench".into(),
        groups: vec!["system:masters".into()],
    };
    let client = kube::Client::new(server.local_service(identity), "default");
    let selection = Selection {
        namespace: None,
        capi_core: true,
    };
    crds::install(&client, &selection.crds()).await?;
    let cloud = Arc::new(Cloud::with_clock(
        CloudConfig {
            ports: args.port_min..=args.port_max,
            watch_window: 200,
            ..CloudConfig::default()
        },
        clock.clone(),
    ));
    tokio::spawn(infrasim_controllers::run(
        Context::new(client.clone(), cloud, clock),
        selection,
    ));
    // The plane lives as long as the process: the bench exits when it is done.
    std::mem::forget(store);
    Ok(client)
}

pub async fn run(args: CapiBenchArgs) -> anyhow::Result<()> {
    let ports = usize::from(args.port_max.saturating_sub(args.port_min)) + 1;
    anyhow::ensure!(
        args.clusters <= ports,
        "{} clusters need {} ports: raise --port-max",
        args.clusters,
        args.clusters
    );
    let client = plane(&args).await?;
    let mut vars: HashMap<String, String> = HashMap::from([
        (
            "CONTROL_PLANE_MACHINE_COUNT".into(),
            args.control_planes.to_string(),
        ),
        ("WORKER_MACHINE_COUNT".into(), args.workers.to_string()),
    ]);
    for step in [
        "VM_STARTUP",
        "NODE_STARTUP",
        "ETCD_STARTUP",
        "API_SERVER_STARTUP",
    ] {
        vars.insert(step.into(), "0s".into());
    }
    let class = templates::substitute(templates::CLUSTERCLASS_IN_MEMORY, &vars)?;
    templates::apply(&client, &class, "default", "bench").await?;
    let started = Instant::now();
    let reconciles_before = infrasim_controllers::metrics::reconciles();
    let created = futures::stream::iter(0..args.clusters)
        .map(|i| {
            let client = client.clone();
            let mut vars = vars.clone();
            vars.insert("CLUSTER_NAME".into(), format!("bench-{i}"));
            async move {
                let text = templates::substitute(templates::CLUSTER_IN_MEMORY, &vars)?;
                templates::apply(&client, &text, "default", "bench").await?;
                anyhow::Ok(())
            }
        })
        .buffer_unordered(32)
        .collect::<Vec<_>>()
        .await;
    for r in created {
        r.context("creating a cluster")?;
    }
    let declared = started.elapsed();
    let bar =
        ProgressBar::with_draw_target(Some(args.clusters as u64), ProgressDrawTarget::stderr());
    bar.set_style(
        ProgressStyle::with_template(
            "{spinner} clusters Available [{bar:40}] {pos}/{len} ({elapsed})",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> "),
    );
    // Watched, not polled: a poll would list every Cluster twice a second, a load the plane
    // under test would carry, and would round the time up to the poll.
    let clusters: Api<Cluster> = Api::namespaced(client.clone(), "default");
    let mut events =
        std::pin::pin!(watcher(clusters, watcher::Config::default()).applied_objects());
    let mut ready: HashSet<String> = HashSet::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(args.timeout);
    let available = loop {
        let next = tokio::time::timeout_at(deadline, events.try_next()).await;
        let cluster = match next {
            Ok(Ok(Some(c))) => c,
            Ok(Ok(None)) => anyhow::bail!("the watch of Clusters ended"),
            Ok(Err(e)) => return Err(e).context("watching Clusters"),
            Err(_) => anyhow::bail!(
                "only {} of {} clusters Available after {}s",
                ready.len(),
                args.clusters,
                args.timeout
            ),
        };
        if is_available(&cluster) {
            ready.insert(cluster.name_any());
        } else {
            ready.remove(&cluster.name_any());
        }
        bar.set_position(ready.len() as u64);
        if ready.len() >= args.clusters {
            break started.elapsed();
        }
    };
    bar.finish_and_clear();
    let reconciles = infrasim_controllers::metrics::reconciles() - reconciles_before;
    print_table(&args, declared, available, reconciles);
    Ok(())
}

fn is_available(c: &Cluster) -> bool {
    c.status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .is_some_and(|c| infrasim_controllers::conditions::is_true(c, "Available"))
}

fn print_table(args: &CapiBenchArgs, declared: Duration, available: Duration, reconciles: u64) {
    let machines = args.clusters * (args.control_planes + args.workers) as usize;
    let rss = peak_rss();
    let target = match args.clusters {
        0..=1_000 => "1,000 clusters in <= 60 s",
        _ => "10,000 clusters in <= 10 min",
    };
    println!("infrasim bench capi: {} clusters of {} control planes + {} workers ({machines} machines), Cluster API core stand-in", args.clusters, args.control_planes, args.workers);
    println!();
    println!("| measure | value |");
    println!("|---|---|");
    println!(
        "| clusters declared (32 at a time) | {:.1} s |",
        declared.as_secs_f64()
    );
    println!(
        "| every Cluster Available | {:.1} s |",
        available.as_secs_f64()
    );
    println!(
        "| clusters Available per second | {:.1} |",
        args.clusters as f64 / available.as_secs_f64().max(0.001)
    );
    println!("| reconciles (all controllers) | {reconciles} |");
    println!(
        "| reconciles per second | {:.0} |",
        reconciles as f64 / available.as_secs_f64().max(0.001)
    );
    println!("| peak RSS | {:.0} MB |", rss as f64 / 1e6);
    println!(
        "| peak RSS per cluster | {:.0} KB |",
        rss as f64 / 1e3 / args.clusters.max(1) as f64
    );
    println!("| target (issue 10) | {target} |");
    let per_kind: Vec<String> = infrasim_controllers::metrics::by_kind()
        .into_iter()
        .map(|(k, n)| format!("{k} {:.1}", n as f64 / args.clusters.max(1) as f64))
        .collect();
    println!();
    println!("reconciles per cluster, by kind: {}", per_kind.join(", "));
}
