//! `infrasim fleet`: N simulated clusters straight from flags, with an admin kubeconfig each.

use clap::Args;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use infrasim_clock::SystemClock;
use infrasim_cloud::etcd::EtcdCredentials;
use infrasim_cloud::{Cloud, CloudConfig, ClusterShape, WorkloadConfig};
use std::net::IpAddr;
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct FleetArgs {
    /// How many clusters.
    #[arg(long, default_value_t = 3)]
    count: usize,
    /// Control-plane nodes per cluster.
    #[arg(long, default_value_t = 1)]
    control_planes: usize,
    /// Worker nodes per cluster.
    #[arg(long, default_value_t = 2)]
    workers: usize,
    /// Cluster names are PREFIX-0, PREFIX-1, …
    #[arg(long, default_value = "sim")]
    name_prefix: String,
    /// How long each bootstrap phase takes (`0`, `500ms`, `2s`, `1m`); 0: up at once.
    #[arg(long, default_value = "0", value_parser = parse_duration)]
    startup: std::time::Duration,
    /// Random extra per phase, as a fraction of --startup (delay = d + rand·jitter·d).
    #[arg(long, default_value_t = 0.0)]
    jitter: f64,
    /// How long a pod bound to a node takes to become Running and Ready.
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    pod_startup: std::time::Duration,
    /// How often each node's kubelet renews its Lease (0: never).
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    lease_renewal: std::time::Duration,
    /// The most change events each cluster keeps for watch resumption (older resourceVersions
    /// get 410 Gone, and clients relist). Within it, a cluster keeps its last 75 s of events
    /// (at least 100), as kube-apiserver's watch cache does: Lease renewals alone add one
    /// event per node every --lease-renewal.
    #[arg(long, default_value_t = 200)]
    watch_window: usize,
    /// The Kubernetes version the clusters report.
    #[arg(long, default_value = "v1.31.0")]
    kubernetes_version: String,
    /// Where to write `<name>.kubeconfig` files.
    #[arg(long, default_value = "./fleet")]
    out: PathBuf,
    /// The address endpoints listen on and advertise.
    #[arg(long, default_value = "127.0.0.1")]
    advertise_address: IpAddr,
    /// First port of the endpoint range.
    #[arg(long, default_value_t = 20000)]
    port_min: u16,
    /// Last port of the endpoint range.
    #[arg(long, default_value_t = 24000)]
    port_max: u16,
    /// Also serve every cluster on this one port, choosing the cluster by TLS server name
    /// (`<name>.clusters.infrasim`), and write `DIR/<name>.sni.kubeconfig` for it.
    #[arg(long)]
    shared_port: Option<u16>,
    /// Keep the clusters in DIR/store.redb: every acknowledged write is fsync'd, and a fleet
    /// started again on DIR brings its clusters back (same endpoints, certificates, objects,
    /// resourceVersions and etcd members) and makes only those missing. Without it, the
    /// clusters live in memory.
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Serve the clusters' request metrics and the process's (`/metrics`) over HTTPS here,
    /// to the bearer of the token written to `OUT/metrics.token` (its CA in
    /// `OUT/metrics-ca.crt`); off when not given or `0`; `:PORT` is every address.
    #[arg(long)]
    metrics_bind_address: Option<crate::metrics_server::BindAddress>,
}

pub async fn run(args: FleetArgs) -> anyhow::Result<()> {
    std::fs::create_dir_all(&args.out)?;
    let metrics = match args.metrics_bind_address.and_then(|b| b.0) {
        Some(listen) => Some(serve_metrics(listen, &args.out).await?),
        None => None,
    };
    let config = CloudConfig {
        advertise: args.advertise_address,
        ports: args.port_min..=args.port_max,
        watch_window: args.watch_window.max(1),
        // Every cluster's requests, as Cluster API's in-memory provider counts them.
        metrics: metrics
            .as_ref()
            .map(infrasim_kube_api::RequestMetrics::register),
        homes: None,
    };
    let cloud = match &args.data_dir {
        Some(dir) => crate::up::open_cloud(config, dir, SystemClock::shared()).await?,
        None => Cloud::new(config),
    };
    let shared = match args.shared_port {
        Some(port) => Some(cloud.listen_shared(port).await?),
        None => None,
    };
    let bar = progress_bar(args.count);
    bar.set_message("creating clusters");
    for i in 0..args.count {
        let name = format!("{}-{i}", args.name_prefix);
        make_cluster(&args, &cloud, &name).await?;
        bar.inc(1);
    }
    // Then until every cluster is up: bootstrapped, with CoreDNS and kube-proxy running, as
    // kubectl would see it.
    bar.set_message("bringing clusters up");
    loop {
        let clusters = cloud.clusters();
        let up = clusters.iter().filter(|c| cloud.ready(&c.name)).count();
        bar.set_position((args.count + up) as u64);
        if up == clusters.len() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    bar.finish_and_clear();
    print_fleet(&args, &cloud, shared);
    println!("fleet ready; Ctrl-C stops it");
    crate::shutdown_signal().await;
    Ok(())
}

/// Two steps per cluster: made, then up.
fn progress_bar(count: usize) -> ProgressBar {
    // A progress bar on a terminal; nothing on a pipe, where the table below is the output.
    let bar = ProgressBar::with_draw_target(Some((count * 2) as u64), ProgressDrawTarget::stderr());
    bar.set_style(
        ProgressStyle::with_template("{spinner} {msg:<22} [{bar:40}] {pos}/{len} ({elapsed})")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    bar
}

/// Makes cluster `name` unless the data directory brought it back, and writes its
/// kubeconfigs and etcdctl's credentials into the output directory.
async fn make_cluster(args: &FleetArgs, cloud: &Cloud, name: &str) -> anyhow::Result<()> {
    let info = match cloud.cluster(name) {
        // Brought back from the data directory, as it was made.
        Some(info) => info,
        None => {
            cloud
                .create_cluster(ClusterShape {
                    name: name.to_string(),
                    control_planes: args.control_planes.max(1),
                    workers: args.workers,
                    kubernetes_version: args.kubernetes_version.clone(),
                    startup: args.startup,
                    jitter: args.jitter,
                    workloads: WorkloadConfig {
                        pod_startup: args.pod_startup,
                        lease_renewal: args.lease_renewal,
                        ..WorkloadConfig::default()
                    },
                    ..ClusterShape::default()
                })
                .await?
        }
    };
    let path = args.out.join(format!("{name}.kubeconfig"));
    infrasim_kube_api::pki::write_private(&path, &info.kubeconfig)?;
    if let Some(kc) = &info.shared_kubeconfig {
        let path = args.out.join(format!("{name}.sni.kubeconfig"));
        infrasim_kube_api::pki::write_private(&path, kc)?;
    }
    // etcdctl's files: `--cacert DIR/<name>-etcd/ca.crt --cert .../client.crt --key ...`.
    if let Some(pki) = cloud.pki(name) {
        EtcdCredentials::new(&pki, "infrasim-etcdctl")?
            .write(&args.out.join(format!("{name}-etcd")))?;
    }
    Ok(())
}

/// The table of clusters with their endpoints and kubeconfigs, and how to reach them
/// through the shared port and with etcdctl.
fn print_fleet(args: &FleetArgs, cloud: &Cloud, shared: Option<std::net::SocketAddr>) {
    println!(
        "{:<24} {:<24} {:>11}  KUBECONFIG",
        "NAME", "ENDPOINT", "NODES READY"
    );
    for c in cloud.clusters() {
        println!(
            "{:<24} {:<24} {:>11}  {}",
            c.name,
            format!("https://{}", c.endpoint),
            format!("{}/{}", c.nodes, c.nodes),
            args.out.join(format!("{}.kubeconfig", c.name)).display()
        );
    }
    if let Some(addr) = shared {
        println!(
            "shared endpoint https://{addr}: every cluster by TLS server name <name>.{} ({}/<name>.sni.kubeconfig)",
            infrasim_cloud::SNI_SUFFIX,
            args.out.display()
        );
    }
    println!(
        "etcd on each endpoint: etcdctl --endpoints https://<endpoint> --cacert {dir}/<name>-etcd/ca.crt --cert {dir}/<name>-etcd/client.crt --key {dir}/<name>-etcd/client.key",
        dir = args.out.display()
    );
}

/// `0`, `250ms`, `2s`, `1.5s`, `3m`; a bare number is seconds.
fn parse_duration(s: &str) -> Result<std::time::Duration, String> {
    let s = s.trim();
    let (number, unit) = match s.find(|c: char| c.is_ascii_alphabetic()) {
        Some(i) => (&s[..i], &s[i..]),
        None => (s, "s"),
    };
    let n: f64 = number
        .parse()
        .map_err(|_| format!("invalid duration {s:?}"))?;
    let seconds = match unit {
        "ms" => n / 1000.0,
        "s" => n,
        "m" => n * 60.0,
        _ => return Err(format!("invalid duration unit in {s:?} (use ms, s or m)")),
    };
    if !(0.0..=86_400.0).contains(&seconds) {
        return Err(format!("duration {s:?} out of range"));
    }
    Ok(std::time::Duration::from_secs_f64(seconds))
}

/// Serves the process's metrics on `listen` to the bearer of a token made now, written with
/// the server's CA into `out` (readable by this user only).
async fn serve_metrics(
    listen: std::net::SocketAddr,
    out: &std::path::Path,
) -> anyhow::Result<infrasim_metrics::Metrics> {
    let metrics = infrasim_metrics::Metrics::new();
    // 244 random bits, from two version-4 UUIDs.
    let token = format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    );
    let access = crate::metrics_server::Access::Token(token.as_str().into());
    let (addr, ca) = crate::metrics_server::serve(listen, metrics.clone(), access).await?;
    infrasim_kube_api::pki::write_private(&out.join("metrics.token"), &token)?;
    std::fs::write(out.join("metrics-ca.crt"), ca)?;
    println!(
        "metrics: https://{addr}/metrics (bearer token in {})",
        out.join("metrics.token").display()
    );
    Ok(metrics)
}
