//! `infrasim bench fleet`: N simulated workload clusters in this process, as `infrasim fleet`
//! makes them: the time until every one is up, the CPU and memory that took, and what the
//! fleet costs once idle (its kubelets renewing their leases).
//!
//! The workload side alone, without a management plane or controllers: `bench capi` measures
//! the whole stack; this one is what each simulated cluster costs by itself.

use clap::Args;
use infrasim_cloud::{Cloud, CloudConfig, ClusterShape};
use std::time::{Duration, Instant};

#[derive(Debug, Args)]
pub struct FleetBenchArgs {
    /// Clusters to make.
    #[arg(long, default_value_t = 1000)]
    clusters: usize,
    /// Control-plane nodes per cluster.
    #[arg(long, default_value_t = 1)]
    control_planes: usize,
    /// Worker nodes per cluster.
    #[arg(long, default_value_t = 3)]
    workers: usize,
    /// Change events each cluster keeps (`infrasim fleet`'s default).
    #[arg(long, default_value_t = 200)]
    watch_window: usize,
    /// First port of the endpoint range (one port per cluster).
    #[arg(long, default_value_t = 20000)]
    port_min: u16,
    /// Last port of the endpoint range.
    #[arg(long, default_value_t = 30000)]
    port_max: u16,
    /// How long to watch the fleet idle once it is up (its CPU and memory meanwhile).
    #[arg(long, default_value_t = 30)]
    idle_seconds: u64,
    /// Give up after this many seconds.
    #[arg(long, default_value_t = 1800)]
    timeout: u64,
}

/// What one run measured.
struct Measured {
    created: Duration,
    ready: Duration,
    cpu_up: Duration,
    rss_up: u64,
    peak_rss: u64,
    cpu_idle: Duration,
    rss_idle: u64,
}

pub async fn run(args: FleetBenchArgs) -> anyhow::Result<()> {
    crate::harness::ensure_ports(args.clusters, args.port_min, args.port_max)?;
    let cloud = Cloud::new(CloudConfig {
        ports: args.port_min..=args.port_max,
        watch_window: args.watch_window.max(1),
        ..CloudConfig::default()
    });
    let measured = measure(&args, &cloud).await?;
    print_table(&args, &measured);
    Ok(())
}

async fn measure(args: &FleetBenchArgs, cloud: &Cloud) -> anyhow::Result<Measured> {
    let started = Instant::now();
    let cpu_before = crate::harness::process_cpu();
    for i in 0..args.clusters {
        cloud.create_cluster(shape(args, i)).await?;
    }
    let created = started.elapsed();
    let deadline = started + Duration::from_secs(args.timeout);
    let mut report = Instant::now();
    loop {
        let up = cloud
            .clusters()
            .iter()
            .filter(|c| cloud.ready(&c.name))
            .count();
        if up >= args.clusters {
            break;
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "only {up} of {} clusters up after {} s",
            args.clusters,
            args.timeout
        );
        if report.elapsed() >= Duration::from_secs(10) {
            eprintln!(
                "{up}/{} clusters up after {:.0} s",
                args.clusters,
                started.elapsed().as_secs_f64()
            );
            report = Instant::now();
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let ready = started.elapsed();
    let cpu_up = crate::harness::process_cpu().saturating_sub(cpu_before);
    let rss_up = rss();
    let idle_from = crate::harness::process_cpu();
    tokio::time::sleep(Duration::from_secs(args.idle_seconds)).await;
    Ok(Measured {
        created,
        ready,
        cpu_up,
        rss_up,
        peak_rss: crate::capi::peak_rss(),
        cpu_idle: crate::harness::process_cpu().saturating_sub(idle_from),
        rss_idle: rss(),
    })
}

/// Cluster `i` as `infrasim fleet` makes it, every bootstrap step instant.
fn shape(args: &FleetBenchArgs, i: usize) -> ClusterShape {
    ClusterShape {
        name: format!("bench-{i}"),
        control_planes: args.control_planes.max(1),
        workers: args.workers,
        ..ClusterShape::default()
    }
}

/// The process's resident memory now.
fn rss() -> u64 {
    crate::process::rss(std::process::id()).unwrap_or(0)
}

fn print_table(args: &FleetBenchArgs, m: &Measured) {
    let n = args.clusters.max(1) as f64;
    let mb = |b: u64| b as f64 / 1e6;
    println!(
        "infrasim bench fleet: {} clusters of {} control planes + {} workers, watch window {}",
        args.clusters, args.control_planes, args.workers, args.watch_window
    );
    println!();
    println!("| measure | value |");
    println!("|---|---|");
    println!("| clusters made | {:.1} s |", m.created.as_secs_f64());
    println!("| every cluster up | {:.1} s |", m.ready.as_secs_f64());
    println!(
        "| CPU (user+sys) until up | {:.1} s ({:.1} ms a cluster) |",
        m.cpu_up.as_secs_f64(),
        m.cpu_up.as_secs_f64() * 1e3 / n
    );
    println!(
        "| RSS when up | {:.0} MB ({:.0} KB a cluster) |",
        mb(m.rss_up),
        m.rss_up as f64 / 1e3 / n
    );
    println!("| peak RSS | {:.0} MB |", mb(m.peak_rss));
    println!(
        "| idle CPU over {} s | {:.1}% of a core ({:.2} ms a cluster a second) |",
        args.idle_seconds,
        m.cpu_idle.as_secs_f64() * 100.0 / args.idle_seconds.max(1) as f64,
        m.cpu_idle.as_secs_f64() * 1e3 / n / args.idle_seconds.max(1) as f64
    );
    println!(
        "| RSS after idling | {:.0} MB ({:.0} KB a cluster) |",
        mb(m.rss_idle),
        m.rss_idle as f64 / 1e3 / n
    );
    println!("| target (issue 45) | 10,000 clusters up in <= 30 s, <= 2 GiB (~200 KB a cluster) |");
}
