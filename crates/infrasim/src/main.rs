//! The `infrasim` command: wires the crates together behind a CLI.

mod cluster;
mod controller;
mod dashboard;
mod env;
mod fault;
mod fleet;
mod https;
mod metrics_server;
mod store;
mod up;
mod vcsim;
mod webhook_server;

use clap::{Parser, Subcommand};
use tracing_subscriber::EnvFilter;

/// The process allocates and frees many small JSON values per request (every object crosses
/// serde on its way in and out of the store); glibc's malloc spent about a quarter of the
/// Cluster API bench in its own bookkeeping, mimalloc's size-class pages much less.
/// `--features system-allocator` keeps glibc's malloc, so that a heap profiler preloaded in
/// its place (jemalloc's) sees the allocations mimalloc would keep to itself; the method is in
/// docs/benchmarks.md#memory-per-cluster-how-it-is-measured.
#[cfg(not(feature = "system-allocator"))]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Simulated infrastructure for Kubernetes cluster lifecycle tools.
#[derive(Debug, Parser)]
#[command(name = "infrasim", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// What `infrasim bench` takes in a build without the benchmarks: anything, to name it in
/// the error.
#[cfg(not(feature = "bench"))]
#[derive(Debug, clap::Args)]
struct NoBench {
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    rest: Vec<String>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Start the embedded management plane (a Kubernetes-compatible API server).
    Up(up::UpArgs),
    /// Cluster API clusters through the management plane: create, list, kubeconfig, delete.
    Cluster(cluster::ClusterArgs),
    /// Run the Cluster API in-memory provider (and the core stand-in) against any cluster.
    Controller(controller::ControllerArgs),
    /// Print a fresh one-time login link for the dashboard of the plane a kubeconfig names.
    Dashboard(dashboard::DashboardArgs),
    /// Faults on workload clusters (API latency and errors, nodes NotReady): create, list, delete.
    Fault(fault::FaultArgs),
    /// Host N simulated workload clusters, each with an admin kubeconfig.
    Fleet(fleet::FleetArgs),
    /// Print generated manifests: clusterctl's provider files, or the CRDs.
    Manifests {
        #[arg(value_parser = ["components", "metadata", "crds", "core-crds", "vmgroup", "sip",
                              "vmgroup-kustomization", "sip-kustomization"])]
        which: String,
    },
    /// Create a VCenterSimulator, a ControlPlaneEndpoint and an EnvVar, wait for them and
    /// write the variables a CAPV cluster template needs (CAPV's `vcsim.sh`).
    Env(env::EnvArgs),
    /// Serve one vSphere simulator (SOAP at /sdk).
    Vcsim(vcsim::VcsimArgs),
    /// Print a cluster template with its variables substituted from the environment, as
    /// `clusterctl generate cluster --from FILE` does (`${VAR}`, `${VAR:=default}`).
    Generate {
        /// The template file.
        #[arg(long)]
        from: std::path::PathBuf,
    },
    /// Measure the servers against baselines and print a table.
    #[cfg(feature = "bench")]
    Bench(infrasim_bench::BenchArgs),
    /// Measure the servers against baselines (this build has none: build with
    /// `--features bench`).
    #[cfg(not(feature = "bench"))]
    Bench(NoBench),
    /// Check a data directory's stores without writing to them.
    Store(store::StoreArgs),
}

/// Stops the task running the controllers before the runtime goes away (see
/// [`infrasim_controllers::stop`]).
pub async fn stop_controllers(task: tokio::task::JoinHandle<()>) {
    infrasim_controllers::stop(task).await;
}

/// Completes on Ctrl-C or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(_) => {
                    let _ = ctrl_c.await;
                    return;
                }
            };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
}

/// Raises the soft limit on open files to the hard limit, as Go programs (kube-apiserver, govc)
/// do at start: every simulated cluster holds a listening socket and its clients' connections,
/// and a soft limit of 1,024 would stop a fleet at a few hundred clusters.
fn raise_open_file_limit() {
    match rlimit::increase_nofile_limit(u64::MAX) {
        Ok(limit) => tracing::debug!(limit, "open file limit"),
        Err(e) => tracing::warn!(error = %e, "cannot raise the open file limit"),
    }
}

fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_env("INFRASIM_LOG").unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    raise_open_file_limit();
    // The simulator picks its own runtime (`--threads`); every other command shares this one.
    let shared = || {
        tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
    };
    match cli.command {
        Command::Up(args) => shared()?.block_on(up::run(args)),
        #[cfg(feature = "bench")]
        Command::Bench(args) => shared()?.block_on(infrasim_bench::run(args)),
        #[cfg(not(feature = "bench"))]
        Command::Bench(args) => anyhow::bail!(
            "this infrasim was built without its benchmarks; run them with: cargo run --release -p infrasim --features bench -- bench {}",
            args.rest.join(" ")
        ),
        Command::Vcsim(args) => args.runtime()?.block_on(vcsim::run(args)),
        Command::Dashboard(args) => shared()?.block_on(dashboard::run(args)),
        Command::Fleet(args) => shared()?.block_on(fleet::run(args)),
        Command::Cluster(args) => shared()?.block_on(cluster::run(args)),
        Command::Fault(args) => shared()?.block_on(fault::run(args)),
        Command::Env(args) => shared()?.block_on(env::run(args)),
        Command::Generate { from } => {
            let text = std::fs::read_to_string(&from)
                .map_err(|e| anyhow::anyhow!("reading {}: {e}", from.display()))?;
            let vars = std::env::vars().collect();
            print!("{}", infrasim_controllers::capi::templates::substitute(&text, &vars)?);
            Ok(())
        }
        Command::Manifests { which } => {
            use infrasim_controllers::{crds, deploy};
            let text = match which.as_str() {
                "components" => deploy::components()?,
                "metadata" => deploy::metadata(),
                "crds" => crds::to_yaml(&crds::provider(false))?,
                "vmgroup" => deploy::vmgroup()?,
                "sip" => deploy::sip()?,
                "vmgroup-kustomization" => deploy::vmgroup_kustomization(),
                "sip-kustomization" => deploy::sip_kustomization(),
                _ => crds::to_yaml(&crds::core(false))?,
            };
            print!("{text}");
            Ok(())
        }
        Command::Controller(args) => shared()?.block_on(controller::run(args)),
        Command::Store(args) => store::run(args),
    }
}
