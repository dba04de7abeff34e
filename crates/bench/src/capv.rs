//! `infrasim bench capv`: N clusters of CAPV's default flavor (`deploy/capv/cluster-template.yaml`)
//! through the embedded plane, one VCenterSimulator for all of them, made real by the core
//! stand-in, the CAPV stand-in (a VM cloned, configured and powered on per machine) and the
//! vcsim controller's VM bootstrap; beside the same N clusters of the in-memory provider,
//! measured by `infrasim bench capi` in a process of its own (so neither run's memory or CPU
//! is counted in the other's). Printed as a table: time to every Cluster Available, CPU,
//! peak RSS, and the simulator's SOAP calls and answer bytes per VM.
//!
//! The targets, printed beside the figures: N = 100 in at most twice the in-memory
//! time; N = 1,000 (4,000 VMs) in at most 10 minutes.

use crate::capi::{self, CapiBenchArgs};
use anyhow::Context as _;
use clap::Args;
use futures::StreamExt;
use infrasim_controllers::capi::templates;
use infrasim_controllers::vcsim::types::{
    ClusterEnvVarSpec, ControlPlaneEndpoint, ControlPlaneEndpointSpec, EnvVar, EnvVarSpec,
    NamespacedRef, VCenterSimulator, VCenterSimulatorSpec,
};
use infrasim_controllers::{vcsim::Simulators, Selection};
use kube::api::{Api, PostParams};
use kube::runtime::wait::await_condition;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// CAPV's default flavor, as `infrasim generate` renders it for a user.
const TEMPLATE: &str = include_str!("../../../deploy/capv/cluster-template.yaml");

const NAMESPACE: &str = "default";
const SIMULATOR: &str = "bench";

#[derive(Debug, Args)]
pub struct CapvBenchArgs {
    /// Clusters to create.
    #[arg(long, default_value_t = 10)]
    clusters: usize,
    #[arg(long, default_value_t = 1)]
    control_planes: u32,
    #[arg(long, default_value_t = 3)]
    workers: u32,
    /// Give up after this many seconds.
    #[arg(long, default_value_t = 1800)]
    timeout: u64,
    /// Skip the in-memory provider's run beside it.
    #[arg(long)]
    no_baseline: bool,
}

impl CapvBenchArgs {
    /// The in-memory bench's arguments for the same clusters.
    fn as_capi(&self, port_min: u16) -> CapiBenchArgs {
        CapiBenchArgs {
            clusters: self.clusters,
            control_planes: self.control_planes,
            workers: self.workers,
            port_min,
            port_max: 24000,
            webhooks: true,
            timeout: self.timeout,
            watch_window: 100_000,
            watcher_buffer: 65_536,
            trace_writes: None,
            metrics: false,
            state_metrics: false,
            dashboard: false,
        }
    }
}

/// One run's figures.
struct Measured {
    available: Duration,
    cpu: Duration,
    rss: u64,
    /// The simulator's SOAP calls and answer bytes meanwhile.
    calls: u64,
    bytes: u64,
}

pub async fn run(args: CapvBenchArgs) -> anyhow::Result<()> {
    let simulators = Arc::new(Simulators::default());
    let selection = Selection {
        inmemory: false,
        namespace: None,
        capi_core: true,
        vcsim: true,
        vmgroup: false,
        sip: false,
        v1beta1: false,
        reach: Default::default(),
        capv_node_anti_affinity: false,
        state_metrics: false,
        part: Default::default(),
    };
    let base = args.as_capi(20000);
    let plane = capi::plane(&base, selection, simulators.clone()).await?;
    let measured = measure(&args, &base, &plane.client, &plane.cloud, &simulators).await;
    crate::stop_controllers(plane.controllers).await;
    let measured = measured?;
    let baseline = match args.no_baseline {
        true => None,
        false => Some(in_memory(&args).await?),
    };
    print_table(&args, &measured, baseline.as_ref());
    Ok(())
}

/// Declares the clusters and waits for every one to be Available.
async fn measure(
    args: &CapvBenchArgs,
    base: &CapiBenchArgs,
    client: &kube::Client,
    cloud: &infrasim_cloud::Cloud,
    simulators: &Simulators,
) -> anyhow::Result<Measured> {
    let vars = prepare(args, client).await?;
    let endpoints = endpoints(args.clusters, client).await?;
    let sim = simulators
        .simulator(&format!("{NAMESPACE}/{SIMULATOR}"))
        .context("the VCenterSimulator is not running in this process")?;
    let (calls, bytes) = (sim.calls(), sim.answered_bytes());
    let started = Instant::now();
    let cpu = crate::harness::process_cpu();
    let created = futures::stream::iter(0..args.clusters)
        .map(|i| {
            let mut vars = vars.clone();
            let (host, port) = endpoints[i].clone();
            vars.insert("CLUSTER_NAME".into(), format!("bench-{i}"));
            vars.insert("CONTROL_PLANE_ENDPOINT_IP".into(), host);
            vars.insert("CONTROL_PLANE_ENDPOINT_PORT".into(), port.to_string());
            async move {
                let text = templates::substitute(TEMPLATE, &vars)?;
                templates::apply(client, &text, NAMESPACE, "bench").await?;
                anyhow::Ok(())
            }
        })
        .buffer_unordered(32)
        .collect::<Vec<_>>()
        .await;
    for r in created {
        r.context("creating a cluster")?;
    }
    let available = capi::wait_available(base, client, cloud, started).await?;
    Ok(Measured {
        available,
        cpu: crate::harness::process_cpu().saturating_sub(cpu),
        rss: capi::peak_rss(),
        calls: sim.calls() - calls,
        bytes: sim.answered_bytes() - bytes,
    })
}

/// The VCenterSimulator, and the variables `infrasim env` would write for a cluster on it
/// (from an EnvVar, as the vcsim controller writes them), with the bench's machine counts.
async fn prepare(
    args: &CapvBenchArgs,
    client: &kube::Client,
) -> anyhow::Result<HashMap<String, String>> {
    let sims: Api<VCenterSimulator> = Api::namespaced(client.clone(), NAMESPACE);
    sims.create(
        &PostParams::default(),
        &VCenterSimulator::new(SIMULATOR, VCenterSimulatorSpec::default()),
    )
    .await?;
    let endpoints: Api<ControlPlaneEndpoint> = Api::namespaced(client.clone(), NAMESPACE);
    endpoints
        .create(
            &PostParams::default(),
            &ControlPlaneEndpoint::new("bench-vars", ControlPlaneEndpointSpec {}),
        )
        .await?;
    let spec = EnvVarSpec {
        vcenter_simulator: Some(NamespacedRef {
            namespace: NAMESPACE.into(),
            name: SIMULATOR.into(),
        }),
        control_plane_endpoint: NamespacedRef {
            namespace: NAMESPACE.into(),
            name: "bench-vars".into(),
        },
        cluster: ClusterEnvVarSpec {
            name: "bench-vars".into(),
            namespace: NAMESPACE.into(),
            control_plane_machines: Some(args.control_planes as i32),
            worker_machines: Some(args.workers as i32),
            ..Default::default()
        },
        ..Default::default()
    };
    let envvars: Api<EnvVar> = Api::namespaced(client.clone(), NAMESPACE);
    envvars
        .create(&PostParams::default(), &EnvVar::new("bench-vars", spec))
        .await?;
    let has_vars = |e: Option<&EnvVar>| {
        e.and_then(|e| e.status.as_ref())
            .and_then(|s| s.variables.as_ref())
            .is_some()
    };
    let env = tokio::time::timeout(
        Duration::from_secs(60),
        await_condition(envvars, "bench-vars", has_vars),
    )
    .await
    .context("the EnvVar had no variables in 60 s")??
    .context("the EnvVar was deleted")?;
    let vars = env.status.and_then(|s| s.variables).unwrap_or_default();
    Ok(vars.into_iter().collect())
}

/// A ControlPlaneEndpoint per cluster, as `infrasim env` makes one: each one's host and port.
async fn endpoints(clusters: usize, client: &kube::Client) -> anyhow::Result<Vec<(String, i32)>> {
    let api: Api<ControlPlaneEndpoint> = Api::namespaced(client.clone(), NAMESPACE);
    let mut reserved = Vec::with_capacity(clusters);
    for i in 0..clusters {
        let name = format!("bench-{i}");
        api.create(
            &PostParams::default(),
            &ControlPlaneEndpoint::new(&name, ControlPlaneEndpointSpec {}),
        )
        .await?;
        let has_port = |c: Option<&ControlPlaneEndpoint>| {
            c.and_then(|c| c.status.as_ref())
                .is_some_and(|s| s.port > 0)
        };
        let c = tokio::time::timeout(
            Duration::from_secs(30),
            await_condition(api.clone(), &name, has_port),
        )
        .await
        .with_context(|| format!("ControlPlaneEndpoint {name} had no port in 30 s"))??
        .context("the ControlPlaneEndpoint was deleted")?;
        let status = c.status.unwrap_or_default();
        reserved.push((status.host, status.port));
    }
    Ok(reserved)
}

/// `infrasim bench capi` for the same clusters, in a process of its own: its figures.
async fn in_memory(args: &CapvBenchArgs) -> anyhow::Result<Measured> {
    let exe = std::env::current_exe()?;
    let out = tokio::process::Command::new(exe)
        .args(["bench", "capi", "--clusters", &args.clusters.to_string()])
        .args(["--control-planes", &args.control_planes.to_string()])
        .args(["--workers", &args.workers.to_string()])
        .args(["--timeout", &args.timeout.to_string()])
        .stderr(std::process::Stdio::inherit())
        .output()
        .await?;
    anyhow::ensure!(out.status.success(), "infrasim bench capi failed");
    let text = String::from_utf8_lossy(&out.stdout);
    let row = |label: &str| -> anyhow::Result<f64> {
        let line = text
            .lines()
            .find(|l| l.starts_with(&format!("| {label} |")))
            .with_context(|| format!("no row {label:?} in bench capi's table"))?;
        let value = line
            .split('|')
            .nth(2)
            .unwrap_or("")
            .split_whitespace()
            .next()
            .unwrap_or("");
        value
            .parse()
            .with_context(|| format!("row {label:?}: {value:?}"))
    };
    Ok(Measured {
        available: Duration::from_secs_f64(row("every Cluster Available")?),
        cpu: Duration::from_secs_f64(row("CPU (user+sys) meanwhile")?),
        rss: (row("peak RSS")? * 1e6) as u64,
        calls: 0,
        bytes: 0,
    })
}

fn print_table(args: &CapvBenchArgs, capv: &Measured, in_memory: Option<&Measured>) {
    let vms = args.clusters * (args.control_planes + args.workers) as usize;
    let per_vm = |n: f64| n / vms.max(1) as f64;
    println!(
        "infrasim bench capv: {} clusters of {} control planes + {} workers ({vms} VMs in one VCenterSimulator), CAPV's default flavor, beside the in-memory provider",
        args.clusters, args.control_planes, args.workers
    );
    println!();
    println!("| measure | CAPV stand-in | in-memory provider |");
    println!("|---|---|---|");
    let other = |f: &dyn Fn(&Measured) -> String| in_memory.map_or("-".to_string(), f);
    println!(
        "| every Cluster Available | {:.1} s | {} |",
        capv.available.as_secs_f64(),
        other(&|m| format!("{:.1} s", m.available.as_secs_f64()))
    );
    println!(
        "| CPU (user+sys) meanwhile | {:.1} s | {} |",
        capv.cpu.as_secs_f64(),
        other(&|m| format!("{:.1} s", m.cpu.as_secs_f64()))
    );
    println!(
        "| CPU per machine | {:.0} ms | {} |",
        per_vm(capv.cpu.as_secs_f64() * 1e3),
        other(&|m| format!("{:.0} ms", per_vm(m.cpu.as_secs_f64() * 1e3)))
    );
    println!(
        "| peak RSS | {:.0} MB | {} |",
        capv.rss as f64 / 1e6,
        other(&|m| format!("{:.0} MB", m.rss as f64 / 1e6))
    );
    println!(
        "| vCenter SOAP calls per VM | {:.1} | - |",
        per_vm(capv.calls as f64)
    );
    println!(
        "| vCenter answer bytes per VM | {:.0} KB | - |",
        per_vm(capv.bytes as f64 / 1e3)
    );
    if let Some(m) = in_memory {
        println!(
            "| time against the in-memory provider | {:.2}x | 1x |",
            capv.available.as_secs_f64() / m.available.as_secs_f64().max(0.001)
        );
    }
    println!(
        "| target (issue 43) | N = 100 in <= 2x the in-memory time; N = 1,000 in <= 10 min | |"
    );
}
