//! `infrasim bench faults`: N Cluster API clusters brought up through the embedded plane (as
//! `bench capi` does), then a share of them faulted at once, one `NodeNotReady` Fault per
//! faulted cluster on one worker's node, and the time from the Faults' creation to each
//! reaction Cluster API shows on that worker's Machine:
//!
//! 1. `NodeHealthy` no longer true: the node turned Ready `Unknown` (kube-controller-manager's
//!    40 s grace period, counted from the kubelet's last Lease renewal, up to 10 s before the
//!    fault, is in this figure);
//! 2. `HealthCheckSucceeded` false: its MachineHealthCheck marked it, after the class's
//!    `unhealthyNodeConditions` timeout (`--unhealthy-timeout`);
//! 3. deleted by its MachineSet: remediation started.
//!
//! There is no baseline: no other simulator injects these faults.

use crate::capi::{self, CapiBenchArgs};
use anyhow::Context as _;
use clap::Args;
use futures::{StreamExt, TryStreamExt};
use infrasim_controllers::capi::core::Machine;
use infrasim_controllers::capi::templates;
use infrasim_controllers::faults::types::{Fault, FaultParams, FaultSpec};
use kube::api::{Api, ListParams, PostParams};
use kube::runtime::watcher;
use kube::ResourceExt;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[derive(Debug, Args)]
pub struct FaultsBenchArgs {
    /// Clusters to bring up.
    #[arg(long, default_value_t = 1000)]
    clusters: usize,
    /// Workers per cluster (one control-plane machine each).
    #[arg(long, default_value_t = 1)]
    workers: u32,
    /// The share of the clusters faulted.
    #[arg(long, default_value_t = 0.1)]
    faulted: f64,
    /// The seconds a Node may be Ready `False` or `Unknown` before its MachineHealthCheck
    /// marks it (the class's 300 s, shortened so the run ends).
    #[arg(long, default_value_t = 10)]
    unhealthy_timeout: u32,
    #[arg(long, default_value_t = 20000)]
    port_min: u16,
    #[arg(long, default_value_t = 24000)]
    port_max: u16,
    /// Give up after this many seconds (each phase).
    #[arg(long, default_value_t = 1800)]
    timeout: u64,
}

/// When each reaction was seen on a faulted worker's Machine, since the Faults' creation.
#[derive(Debug, Default, Clone)]
struct Reactions {
    node_unhealthy: Option<Duration>,
    marked: Option<Duration>,
    deleted: Option<Duration>,
}

pub async fn run(args: FaultsBenchArgs) -> anyhow::Result<()> {
    let capi_args = CapiBenchArgs {
        clusters: args.clusters,
        control_planes: 1,
        workers: args.workers.max(1),
        port_min: args.port_min,
        port_max: args.port_max,
        webhooks: true,
        timeout: args.timeout,
        watch_window: 100_000,
        watcher_buffer: 65_536,
        trace_writes: None,
        metrics: false,
        state_metrics: false,
        dashboard: false,
    };
    crate::harness::ensure_ports(args.clusters, args.port_min, args.port_max)?;
    let plane = capi::plane(&capi_args, capi::in_memory_selection(), Arc::default()).await?;
    let measured = measure(&args, &capi_args, &plane.client, &plane.cloud).await;
    crate::stop_controllers(plane.controllers).await;
    measured
}

async fn measure(
    args: &FaultsBenchArgs,
    capi_args: &CapiBenchArgs,
    client: &kube::Client,
    cloud: &infrasim_cloud::Cloud,
) -> anyhow::Result<()> {
    let vars = capi::template_vars(capi_args);
    let class = templates::substitute(templates::CLUSTERCLASS_IN_MEMORY, &vars)?;
    anyhow::ensure!(
        class.contains("timeoutSeconds: 300"),
        "the class has no 300 s check"
    );
    let class = class.replace(
        "timeoutSeconds: 300",
        &format!("timeoutSeconds: {}", args.unhealthy_timeout),
    );
    templates::apply(client, &class, "default", "bench").await?;
    let started = Instant::now();
    capi::declare_clusters(args.clusters, client, &vars).await?;
    let available = capi::wait_available(capi_args, client, cloud, started).await?;
    let victims = victims(args, client).await?;
    let reactions = follow(client, victims.keys().cloned().collect());
    let cpu_before = crate::harness::process_cpu();
    let faulted_at = Instant::now();
    reactions.lock().unwrap_or_else(|p| p.into_inner()).0 = Some(faulted_at);
    create_faults(client, &victims).await?;
    let created = faulted_at.elapsed();
    wait_deleted(args, &reactions, victims.len()).await;
    let cpu = crate::harness::process_cpu().saturating_sub(cpu_before);
    let seen = reactions
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .1
        .clone();
    print_table(args, available, victims.len(), created, &seen, cpu);
    Ok(())
}

/// One worker Machine of each faulted cluster, with its Node's name, by Machine name.
async fn victims(
    args: &FaultsBenchArgs,
    client: &kube::Client,
) -> anyhow::Result<HashMap<String, (String, String)>> {
    let stride = (1.0 / args.faulted.clamp(1e-6, 1.0)).round().max(1.0) as usize;
    let machines: Api<Machine> = Api::namespaced(client.clone(), "default");
    let mut victims = HashMap::new();
    for i in (0..args.clusters).step_by(stride) {
        let cluster = format!("bench-{i}");
        let selector =
            format!("cluster.x-k8s.io/cluster-name={cluster},!cluster.x-k8s.io/control-plane");
        let list = machines
            .list(&ListParams::default().labels(&selector))
            .await?;
        let worker = list.items.iter().find_map(|m| {
            let node = m.status.as_ref()?.node_ref.as_ref()?.name.clone();
            Some((m.name_any(), node))
        });
        let (machine, node) = worker.with_context(|| format!("{cluster} has no worker Node"))?;
        victims.insert(machine, (cluster, node));
    }
    Ok(victims)
}

/// The reactions seen on `victims`' Machines, from a watch started now: the watch's start
/// time and the reactions by Machine name.
type Seen = Arc<Mutex<(Option<Instant>, HashMap<String, Reactions>)>>;

fn follow(client: &kube::Client, victims: Vec<String>) -> Seen {
    let seen: Seen = Arc::default();
    let machines: Api<Machine> = Api::namespaced(client.clone(), "default");
    let out = seen.clone();
    tokio::spawn(async move {
        let mut events = std::pin::pin!(watcher(machines, watcher::Config::default()));
        while let Ok(Some(event)) = events.try_next().await {
            let (m, gone) = match event {
                watcher::Event::Apply(m) | watcher::Event::InitApply(m) => (m, false),
                watcher::Event::Delete(m) => (m, true),
                _ => continue,
            };
            if !victims.contains(&m.name_any()) {
                continue;
            }
            let mut state = out.lock().unwrap_or_else(|p| p.into_inner());
            let Some(since) = state.0 else {
                continue;
            };
            let now = since.elapsed();
            let r = state.1.entry(m.name_any()).or_default();
            let conds = m.status.as_ref().and_then(|s| s.conditions.clone());
            let status_of = |ty: &str| {
                (conds.iter().flatten())
                    .find(|c| c.type_ == ty)
                    .map(|c| c.status.clone())
            };
            if status_of("NodeHealthy").is_some_and(|s| s != "True") {
                r.node_unhealthy.get_or_insert(now);
            }
            if status_of("HealthCheckSucceeded").as_deref() == Some("False") {
                r.marked.get_or_insert(now);
            }
            if gone || m.metadata.deletion_timestamp.is_some() {
                r.deleted.get_or_insert(now);
            }
        }
    });
    seen
}

/// Creates one `NodeNotReady` Fault per victim, 32 at a time, and starts the clock.
async fn create_faults(
    client: &kube::Client,
    victims: &HashMap<String, (String, String)>,
) -> anyhow::Result<()> {
    let api: Api<Fault> = Api::namespaced(client.clone(), "default");
    let results = futures::stream::iter(victims.values())
        .map(|(cluster, node)| {
            let api = api.clone();
            let fault = Fault::new(
                &format!("notready-{cluster}"),
                FaultSpec {
                    cluster_name: Some(cluster.clone()),
                    type_: "NodeNotReady".into(),
                    params: Some(FaultParams {
                        node: Some(node.clone()),
                        ..FaultParams::default()
                    }),
                    ..FaultSpec::default()
                },
            );
            async move { api.create(&PostParams::default(), &fault).await }
        })
        .buffer_unordered(32)
        .collect::<Vec<_>>()
        .await;
    for r in results {
        r.context("creating a Fault")?;
    }
    Ok(())
}

/// Waits until every victim's Machine was deleted, or the timeout.
async fn wait_deleted(args: &FaultsBenchArgs, seen: &Seen, victims: usize) {
    let deadline = Instant::now() + Duration::from_secs(args.timeout);
    while Instant::now() < deadline {
        let done = (seen.lock().unwrap_or_else(|p| p.into_inner()).1.values())
            .filter(|r| r.deleted.is_some())
            .count();
        if done >= victims {
            return;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Which reaction a row of the table reads.
type Pick = fn(&Reactions) -> Option<Duration>;

fn print_table(
    args: &FaultsBenchArgs,
    available: Duration,
    victims: usize,
    created: Duration,
    seen: &HashMap<String, Reactions>,
    cpu: Duration,
) {
    println!(
        "{} clusters (1 control plane, {} workers) Available in {:.1} s; {victims} faulted \
         (NodeNotReady on one worker each), their Faults created in {:.2} s",
        args.clusters,
        args.workers.max(1),
        available.as_secs_f64(),
        created.as_secs_f64()
    );
    println!("| reaction, from the Faults' creation | seen on | first | median | last |");
    println!("|---|---|---|---|---|");
    let rows: [(&str, Pick); 3] = [
        (
            "Machine NodeHealthy not true (node Unknown; 40 s grace included)",
            |r| r.node_unhealthy,
        ),
        (
            "MachineHealthCheck marks it (HealthCheckSucceeded false)",
            |r| r.marked,
        ),
        ("MachineSet deletes it (remediation started)", |r| r.deleted),
    ];
    for (what, pick) in rows {
        let mut times: Vec<Duration> = seen.values().filter_map(pick).collect();
        times.sort();
        let at = |p: f64| crate::harness::percentile(&times, p).as_secs_f64();
        println!(
            "| {what} | {}/{victims} | {:.2} s | {:.2} s | {:.2} s |",
            times.len(),
            at(0.0),
            at(0.5),
            at(1.0)
        );
    }
    println!(
        "CPU from the Faults to the last deletion: {:.1} s; the class's unhealthy-node \
         timeout {} s; peak RSS {:.0} MB",
        cpu.as_secs_f64(),
        args.unhealthy_timeout,
        capi::peak_rss() as f64 / 1e6
    );
}
