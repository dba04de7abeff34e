//! `infrasim bench capi`: N Cluster API clusters declared through the embedded management
//! plane (ClusterClass `in-memory`, machine steps taking no time), made real by the in-memory
//! provider and the core stand-in in this process; printed as a table: the time until every
//! Cluster is Available, reconciles per second, the CPU it took, peak RSS.
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
use tokio::task::JoinHandle;

#[derive(Debug, Args)]
pub struct CapiBenchArgs {
    /// Clusters to create.
    #[arg(long, default_value_t = 100)]
    pub(crate) clusters: usize,
    #[arg(long, default_value_t = 1)]
    pub(crate) control_planes: u32,
    #[arg(long, default_value_t = 3)]
    pub(crate) workers: u32,
    /// First port of the endpoint range (one port per cluster).
    #[arg(long, default_value_t = 20000)]
    pub(crate) port_min: u16,
    /// Last port of the endpoint range (raise it beyond 4,000 clusters).
    #[arg(long, default_value_t = 24000)]
    pub(crate) port_max: u16,
    /// Take every Cluster API write through the embedded core's admission webhooks, as
    /// `infrasim up` does (`false`: measure without them, for their cost).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub(crate) webhooks: bool,
    /// Give up after this many seconds.
    #[arg(long, default_value_t = 1800)]
    pub(crate) timeout: u64,
    /// Events the management plane's watch window keeps (`infrasim up` keeps 10,000).
    #[arg(long, default_value_t = 100_000)]
    pub(crate) watch_window: usize,
    /// Events a management-plane watcher may fall behind before it resumes from the window
    /// (`infrasim up` allows 4,096).
    #[arg(long, default_value_t = 65_536)]
    pub(crate) watcher_buffer: usize,
    /// Writes one line per management-plane write to this file: its resource, object and the
    /// fields it changed (to find writes a controller could have spared).
    #[arg(long)]
    pub(crate) trace_writes: Option<std::path::PathBuf>,
    /// Count the plane's and the clusters' requests and the controllers' reconciles in a
    /// Prometheus registry, as `infrasim up` does, and time a scrape of it at the end
    /// (`false`: no metrics, to measure what they cost).
    #[arg(long, default_value_t = false, action = clap::ArgAction::Set)]
    pub(crate) metrics: bool,
    /// With `--metrics`, keep the objects' state metrics too (`infrasim up
    /// --state-metrics`), and time a render and an HTTPS scrape of them at the end.
    #[arg(long, default_value_t = false, action = clap::ArgAction::Set)]
    pub(crate) state_metrics: bool,
    /// With `--metrics`, serve the live dashboard as `infrasim up` does while the clusters
    /// come up, and time the page's requests at the end.
    #[arg(long, default_value_t = false, action = clap::ArgAction::Set)]
    pub(crate) dashboard: bool,
}

/// Peak resident memory of this process (VmHWM), in bytes.
pub(crate) fn peak_rss() -> u64 {
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

/// Writes to the management plane by resource, counted from a watch of its group.
pub(crate) type WriteCounts = Arc<std::sync::Mutex<HashMap<String, u64>>>;

/// Counts every write of `group` by resource until the group goes away.
fn count_writes(
    group: &Arc<infrasim_store::Group>,
    trace: Option<&std::path::Path>,
) -> anyhow::Result<WriteCounts> {
    let counts: WriteCounts = Arc::default();
    let mut watch = group.watch(None)?;
    let tally = counts.clone();
    let group = group.clone();
    let mut trace = match trace {
        Some(path) => Some(std::io::BufWriter::new(
            std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?,
        )),
        None => None,
    };
    tokio::spawn(async move {
        loop {
            let resource = match watch.next().await {
                Ok(event) => {
                    if let Some(out) = trace.as_mut() {
                        use std::io::Write as _;
                        let _ = writeln!(out, "{}", trace_line(&event));
                        let _ = out.flush();
                    }
                    event.resource.to_string()
                }
                Err(infrasim_store::WatchError::Lagged) => match group.watch(None) {
                    // Counted as such, so that a short count does not pass for the truth.
                    Ok(w) => {
                        watch = w;
                        "(uncounted: the counter fell behind)".to_string()
                    }
                    Err(_) => return,
                },
                Err(infrasim_store::WatchError::Closed) => return,
            };
            let mut t = tally.lock().unwrap_or_else(|p| p.into_inner());
            *t.entry(resource).or_default() += 1;
        }
    });
    Ok(counts)
}

/// One write, for `--trace-writes`: resource, object, type, and the paths it changed.
fn trace_line(event: &infrasim_store::Event) -> String {
    let new = event.object.to_value().unwrap_or_default();
    let old = event.previous.as_ref().and_then(|p| p.to_value().ok());
    let mut changed = Vec::new();
    if let Some(old) = &old {
        changed_paths(old, &new, "", 0, &mut changed);
    }
    format!(
        "{} {} {}/{} {:?} {}",
        event.resource_version,
        event.resource,
        event.key.namespace,
        event.key.name,
        event.event_type,
        changed.join(" ")
    )
}

/// The paths (four levels deep at most) where `a` and `b` differ, but for the
/// resourceVersion and managedFields, which every write changes.
fn changed_paths(
    a: &serde_json::Value,
    b: &serde_json::Value,
    prefix: &str,
    depth: usize,
    out: &mut Vec<String>,
) {
    use serde_json::Value;
    if a == b
        || matches!(
            prefix,
            ".metadata.resourceVersion" | ".metadata.managedFields"
        )
    {
        return;
    }
    match (a, b) {
        (Value::Object(x), Value::Object(y)) if depth < 4 => {
            let keys: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for k in keys {
                let null = Value::Null;
                let (p, q) = (x.get(k).unwrap_or(&null), y.get(k).unwrap_or(&null));
                changed_paths(p, q, &format!("{prefix}.{k}"), depth + 1, out);
            }
        }
        // Conditions, by type: which of them changed.
        (Value::Array(x), Value::Array(y))
            if x.iter().chain(y).all(|c| c.get("type").is_some()) =>
        {
            let types: std::collections::BTreeSet<&str> = x
                .iter()
                .chain(y)
                .filter_map(|c| c.get("type").and_then(Value::as_str))
                .collect();
            for t in types {
                let find = |list: &[Value]| {
                    list.iter()
                        .find(|c| c.get("type").and_then(Value::as_str) == Some(t))
                        .cloned()
                };
                if find(x) != find(y) {
                    out.push(format!("{prefix}[{t}]"));
                }
            }
        }
        _ => out.push(prefix.to_string()),
    }
}

/// The embedded plane: the engine, a client over its in-process service, the controllers.
/// The in-memory provider's and the core stand-in's selection.
pub(crate) fn in_memory_selection() -> Selection {
    Selection {
        inmemory: true,
        namespace: None,
        capi_core: true,
        vcsim: false,
        vmgroup: false,
        sip: false,
        v1beta1: true,
        reach: Default::default(),
        capv_node_anti_affinity: false,
        state_metrics: false,
        part: Default::default(),
    }
}

/// The embedded plane as the benchmarks drive it.
pub(crate) struct Plane {
    pub client: kube::Client,
    pub writes: WriteCounts,
    pub cloud: Arc<Cloud>,
    pub controllers: JoinHandle<()>,
    /// The registry, with `--metrics`.
    pub metrics: Option<infrasim_metrics::Metrics>,
    /// The plane served over HTTPS for scrapes of it, with `--metrics`.
    pub scraper: Option<crate::capi_scrape::Scraper>,
}

/// The embedded plane with `selection`'s controllers, the vcsim controller's simulators kept
/// in `simulators`.
pub(crate) async fn plane(
    args: &CapiBenchArgs,
    selection: Selection,
    simulators: Arc<infrasim_controllers::vcsim::Simulators>,
) -> anyhow::Result<Plane> {
    let clock = SystemClock::shared();
    // Larger than `infrasim up`'s defaults (10,000 and 4,096) unless told otherwise: see the
    // README on what a burst of clusters does to watches that fall behind the window.
    let store = Store::new(
        StoreConfig {
            watch_window: args.watch_window.max(1),
            watcher_buffer: args.watcher_buffer.max(1),
            packed: false,
            fresh: None,
        },
        clock.clone(),
        Arc::new(MemoryBackend),
    );
    let group = store.create_group("management")?;
    let writes = count_writes(&group, args.trace_writes.as_deref())?;
    let ca = CertificateAuthority::generate("bench-ca")?;
    let metrics = args.metrics.then(infrasim_metrics::Metrics::new);
    let requests = metrics.as_ref().map(|m| {
        infrasim_kube_api::metrics::register_storage(m, group.clone());
        infrasim_kube_api::RequestMetrics::register(m)
    });
    let config = ApiConfig {
        metrics: requests.clone(),
        ..ApiConfig::default()
    };
    let server = ApiServer::new(group, ca.clone(), clock.clone(), config);
    let scraper = match args.metrics {
        true => Some(crate::capi_scrape::Scraper::start(&server, &ca).await?),
        false => None,
    };
    let identity = Identity {
        user: "bench".into(),
        groups: vec!["system:masters".into()],
    };
    let client = kube::Client::new(server.local_service(identity), "default");
    infrasim_controllers::capi::admission::serve_in(&server, client.clone(), true);
    crds::install(&client, &selection.crds()).await?;
    // Measured as users run it: every Cluster API write through the embedded core's webhooks.
    if args.webhooks {
        infrasim_controllers::capi::admission::install(&client, &selection.reach).await?;
    }
    let cloud = Arc::new(Cloud::with_clock(
        CloudConfig {
            ports: args.port_min..=args.port_max,
            watch_window: 200,
            metrics: requests,
            ..CloudConfig::default()
        },
        clock.clone(),
    ));
    let mut ctx = Context::new(client.clone(), cloud.clone(), clock);
    if let Some(m) = &metrics {
        use infrasim_controllers::runtime::prometheus::ControllerMetrics;
        ctx = ctx.with_metrics(ControllerMetrics::register(m));
    }
    let controllers = tokio::spawn(infrasim_controllers::run_with(ctx, selection, simulators));
    // The plane lives as long as the process: the bench exits when it is done.
    std::mem::forget(store);
    Ok(Plane {
        client,
        writes,
        cloud,
        controllers,
        metrics,
        scraper,
    })
}

pub async fn run(args: CapiBenchArgs) -> anyhow::Result<()> {
    crate::harness::ensure_ports(args.clusters, args.port_min, args.port_max)?;
    let selection = Selection {
        state_metrics: args.state_metrics,
        ..in_memory_selection()
    };
    let plane = plane(&args, selection, Arc::default()).await?;
    let dashboard = match (&plane.metrics, args.dashboard) {
        (Some(metrics), true) => Some(crate::capi_dashboard::start(&plane.client, metrics).await?),
        _ => None,
    };
    let measured = measure(&args, &plane.client, &plane.writes, &plane.cloud).await;
    if let (Ok(()), Some(metrics), Some(scraper)) = (&measured, &plane.metrics, &plane.scraper) {
        println!("{}", crate::capi_scrape::cost(metrics, scraper).await?);
    }
    if let (Ok(()), Some(dashboard)) = (&measured, &dashboard) {
        println!("{}", dashboard.measure(args.clusters).await?);
    }
    crate::stop_controllers(plane.controllers).await;
    measured
}

/// Declares the clusters, waits for every one to be Available and prints the table.
async fn measure(
    args: &CapiBenchArgs,
    client: &kube::Client,
    writes: &WriteCounts,
    cloud: &Cloud,
) -> anyhow::Result<()> {
    let vars = template_vars(args);
    let class = templates::substitute(templates::CLUSTERCLASS_IN_MEMORY, &vars)?;
    templates::apply(client, &class, "default", "bench").await?;
    let started = Instant::now();
    let cpu_before = crate::harness::process_cpu();
    let reconciles_before = infrasim_controllers::metrics::reconciles();
    declare_clusters(args.clusters, client, &vars).await?;
    let declared = started.elapsed();
    let available = wait_available(args, client, cloud, started).await?;
    let measured = Measured {
        declared,
        available,
        reconciles: infrasim_controllers::metrics::reconciles() - reconciles_before,
        cpu: crate::harness::process_cpu().saturating_sub(cpu_before),
    };
    print_table(args, &measured);
    println!("{}", writes_done(writes, args.clusters));
    println!("{}", workload_writes(cloud));
    Ok(())
}

/// The templates' variables: the machine counts asked for, and every bootstrap step
/// instant, so the time measured is the controllers' own.
pub(crate) fn template_vars(args: &CapiBenchArgs) -> HashMap<String, String> {
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
    vars
}

/// Applies the Clusters `bench-0` .. `bench-<clusters - 1>`, 32 at a time.
pub(crate) async fn declare_clusters(
    clusters: usize,
    client: &kube::Client,
    vars: &HashMap<String, String>,
) -> anyhow::Result<()> {
    let created = futures::stream::iter(0..clusters)
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
    Ok(())
}

/// Waits until every cluster is Available and returns the time since `started`; past the
/// timeout, says what holds the others back and fails.
pub(crate) async fn wait_available(
    args: &CapiBenchArgs,
    client: &kube::Client,
    cloud: &Cloud,
    started: Instant,
) -> anyhow::Result<Duration> {
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
    let mut report = tokio::time::interval(Duration::from_secs(10));
    let available = loop {
        let next = tokio::select! {
            next = tokio::time::timeout_at(deadline, events.try_next()) => next,
            _ = report.tick() => {
                if bar.is_hidden() {
                    eprintln!("{}/{} clusters Available after {:.0} s ({})", ready.len(), args.clusters, started.elapsed().as_secs_f64(), watch_health());
                }
                continue;
            }
        };
        let cluster = match next {
            Ok(Ok(Some(c))) => c,
            Ok(Ok(None)) => anyhow::bail!("the watch of Clusters ended"),
            Ok(Err(e)) => return Err(e).context("watching Clusters"),
            Err(_) => {
                eprint!("{}", diagnose(client, cloud, &ready).await);
                eprintln!("{}", work_done(args.clusters));
                anyhow::bail!(
                    "only {} of {} clusters Available after {}s",
                    ready.len(),
                    args.clusters,
                    args.timeout
                )
            }
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
    Ok(available)
}

/// What holds back the clusters that are not Available: how many wait on each reason of
/// their `Available` condition, and the conditions of one of them, to start from.
async fn diagnose(client: &kube::Client, cloud: &Cloud, ready: &HashSet<String>) -> String {
    let clusters: Api<Cluster> = Api::namespaced(client.clone(), "default");
    let Ok(list) = clusters.list(&Default::default()).await else {
        return "cannot list Clusters\n".into();
    };
    let stuck: Vec<&Cluster> = list
        .items
        .iter()
        .filter(|c| !ready.contains(&c.name_any()))
        .collect();
    let mut reasons: HashMap<String, usize> = HashMap::new();
    for c in &stuck {
        let conditions = c.status.as_ref().and_then(|s| s.conditions.as_deref());
        let reason = conditions
            .and_then(|cs| cs.iter().find(|c| c.type_ == "Available"))
            .map_or("no Available condition".to_string(), |c| {
                // The message names the cluster's objects: group by its first line's shape.
                let first = c.message.lines().next().unwrap_or("");
                let shape = first.split(':').next().unwrap_or(first);
                format!("{} {}: {shape}", c.status, c.reason)
            });
        *reasons.entry(reason).or_default() += 1;
    }
    let mut out = String::new();
    for (reason, n) in reasons {
        out.push_str(&format!("{n} clusters: {reason}\n"));
    }
    if let Some(c) = stuck.first() {
        out.push_str(&format!(
            "{}: {}\n",
            c.name_any(),
            serde_json::to_string(&c.status).unwrap_or_default()
        ));
        out.push_str(&machines_of(client, &c.name_any()).await);
        out.push_str(&nodes_of(cloud, &c.name_any()));
    }
    out
}

/// One line per Node of `cluster`'s workload cluster (hosted here): its name and provider ID.
fn nodes_of(cloud: &Cloud, cluster: &str) -> String {
    let key = infrasim_controllers::capi::infra::cloud_key(cluster, "default");
    let Some(group) = cloud.group(&key) else {
        return format!("  no workload cluster {key} in this process\n");
    };
    let nodes = group
        .snapshot("nodes", infrasim_store::ReadAt::Latest)
        .map(|s| s.objects.values().cloned().collect::<Vec<_>>())
        .unwrap_or_default();
    let mut out = String::new();
    for node in nodes {
        let value: serde_json::Value = serde_json::from_slice(&node.bytes()).unwrap_or_default();
        out.push_str(&format!(
            "  Node {} providerID {}\n",
            value["metadata"]["name"], value["spec"]["providerID"]
        ));
    }
    out
}

/// One line per Machine of `cluster`: its phase and the conditions that are not True.
async fn machines_of(client: &kube::Client, cluster: &str) -> String {
    use infrasim_controllers::capi::core::Machine;
    let machines: Api<Machine> = Api::namespaced(client.clone(), "default");
    let selector = format!(
        "{}={cluster}",
        infrasim_controllers::capi::CLUSTER_NAME_LABEL
    );
    let Ok(list) = machines
        .list(&kube::api::ListParams::default().labels(&selector))
        .await
    else {
        return "cannot list Machines\n".into();
    };
    let mut out = String::new();
    let sets: Api<infrasim_controllers::capi::core::MachineSet> =
        Api::namespaced(client.clone(), "default");
    if let Ok(sets) = sets
        .list(&kube::api::ListParams::default().labels(&selector))
        .await
    {
        for ms in sets.items {
            out.push_str(&format!(
                "  MachineSet {} replicas {:?} status {}\n",
                ms.name_any(),
                ms.spec.replicas,
                serde_json::to_string(&ms.status).unwrap_or_default()
            ));
        }
    }
    for m in list.items {
        let status = m.status.as_ref();
        let failing: Vec<String> = status
            .and_then(|s| s.conditions.as_deref())
            .unwrap_or_default()
            .iter()
            .filter(|c| c.status != "True")
            .map(|c| format!("{}={} {} {}", c.type_, c.status, c.reason, c.message))
            .collect();
        out.push_str(&format!(
            "  Machine {} phase {:?}: {}\n",
            m.name_any(),
            status.and_then(|s| s.phase.as_deref()),
            failing.join("; ")
        ));
    }
    out
}

fn is_available(c: &Cluster) -> bool {
    c.status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .is_some_and(|c| infrasim_controllers::conditions::is_true(c, "Available"))
}

/// What one run measured, from the first cluster declared to the last one Available.
struct Measured {
    declared: Duration,
    available: Duration,
    reconciles: u64,
    /// The process's CPU meanwhile (the plane, the controllers, the workload clusters and
    /// the bench's own watch): steadier from run to run than the wall time.
    cpu: Duration,
}

fn print_table(args: &CapiBenchArgs, m: &Measured) {
    let Measured {
        declared,
        available,
        reconciles,
        cpu,
    } = *m;
    let machines = args.clusters * (args.control_planes + args.workers) as usize;
    let rss = peak_rss();
    let target = match args.clusters {
        0..=1_000 => "1,000 clusters in <= 60 s",
        _ => "10,000 clusters in <= 10 min",
    };
    println!(
        "infrasim bench capi: {} clusters of {} control planes + {} workers ({machines} machines), Cluster API core stand-in, admission webhooks {}",
        args.clusters,
        args.control_planes,
        args.workers,
        if args.webhooks { "on" } else { "off" }
    );
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
    println!("| CPU (user+sys) meanwhile | {:.1} s |", cpu.as_secs_f64());
    println!(
        "| CPU per cluster | {:.0} ms |",
        cpu.as_secs_f64() * 1e3 / args.clusters.max(1) as f64
    );
    println!("| peak RSS | {:.0} MB |", rss as f64 / 1e6);
    println!(
        "| peak RSS per cluster | {:.0} KB |",
        rss as f64 / 1e3 / args.clusters.max(1) as f64
    );
    println!("| target (issue 10) | {target} |");
    println!();
    println!("{}", work_done(args.clusters));
}

/// The controllers' work so far: reconciles per cluster by kind, and how their watches fared.
fn work_done(clusters: usize) -> String {
    let per_kind: Vec<String> = infrasim_controllers::metrics::by_kind()
        .into_iter()
        .map(|(k, n)| format!("{k} {:.1}", n as f64 / clusters.max(1) as f64))
        .collect();
    format!(
        "reconciles per cluster, by kind: {}\n{}",
        per_kind.join(", "),
        watch_health()
    )
}

/// The management plane's writes per cluster, by resource, most first.
fn writes_done(writes: &WriteCounts, clusters: usize) -> String {
    let counts = writes.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let total: u64 = counts.values().sum();
    let mut by_resource: Vec<(String, u64)> = counts.into_iter().collect();
    by_resource.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let per = |n: u64| n as f64 / clusters.max(1) as f64;
    let listed: Vec<String> = by_resource
        .iter()
        .map(|(r, n)| format!("{r} {:.1}", per(*n)))
        .collect();
    format!(
        "management writes per cluster: {:.1} ({})",
        per(total),
        listed.join(", ")
    )
}

/// The workload clusters' writes per cluster (their groups' resourceVersions: every write
/// since each cluster started, its kubelets' lease renewals included).
fn workload_writes(cloud: &Cloud) -> String {
    let clusters = cloud.clusters();
    let total: u64 = clusters
        .iter()
        .filter_map(|c| cloud.group(&c.name))
        .map(|g| g.resource_version())
        .sum();
    format!(
        "workload-cluster writes per cluster: {:.1}",
        total as f64 / clusters.len().max(1) as f64
    )
}

/// How the controllers' watches fared: lists and relists per kind (one list per watch when
/// no watch fell out of the server's window), and reconcile requests dropped for an object
/// not yet cached.
fn watch_health() -> String {
    let lists: Vec<String> = infrasim_controllers::metrics::relists()
        .into_iter()
        .map(|(k, n)| format!("{k} {n}"))
        .collect();
    let running: Vec<String> = infrasim_controllers::metrics::running()
        .into_iter()
        .map(|(k, n)| format!("{k} {n}"))
        .collect();
    format!(
        "lists by kind: {}; requests for uncached objects: {}; reconciles running: {}",
        lists.join(", "),
        infrasim_controllers::metrics::drops(),
        running.join(", ")
    )
}
