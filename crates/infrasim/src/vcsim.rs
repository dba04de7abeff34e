//! `infrasim vcsim`: one vSphere simulator on loopback.

use anyhow::Context;
use clap::Args;
use infrasim_clock::SystemClock;
use infrasim_vsphere_sim::persist::Keeper;
use infrasim_vsphere_sim::server::ServerCert;
use infrasim_vsphere_sim::{Flavor, Instance, Model, SimConfig, Simulator};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

#[derive(Debug, Args)]
pub struct VcsimArgs {
    /// Address to listen on (loopback unless you say otherwise).
    #[arg(long, default_value = "127.0.0.1:8989")]
    listen: SocketAddr,
    /// The one user name accepted.
    #[arg(long, default_value = "administrator@vsphere.local")]
    username: String,
    /// The one password accepted (generated and printed when not given).
    #[arg(long, env = "INFRASIM_VCSIM_PASSWORD")]
    password: Option<String>,
    /// The serving certificate (PEM, leaf first) instead of a generated self-signed one.
    #[arg(long, requires = "tls_key")]
    tls_cert: Option<std::path::PathBuf>,
    /// The key of --tls-cert (PEM).
    #[arg(long, requires = "tls_cert")]
    tls_key: Option<std::path::PathBuf>,
    /// Datacenters.
    #[arg(long, default_value_t = 1)]
    datacenters: usize,
    /// Clusters per datacenter.
    #[arg(long, default_value_t = 1)]
    clusters: usize,
    /// Hosts per cluster.
    #[arg(long, default_value_t = 3)]
    hosts: usize,
    /// Standalone hosts per datacenter.
    #[arg(long, default_value_t = 1)]
    standalone_hosts: usize,
    /// VMs per standalone host and per resource pool.
    #[arg(long, default_value_t = 2)]
    vms: usize,
    /// Datastores per datacenter.
    #[arg(long, default_value_t = 1)]
    datastores: usize,
    /// Extra resource pools per cluster.
    #[arg(long, default_value_t = 0)]
    pools: usize,
    /// Distributed port groups per datacenter.
    #[arg(long, default_value_t = 1)]
    portgroups: usize,
    /// Datacenters (the last ones) placed in a folder, with their content in subfolders.
    #[arg(long, default_value_t = 0)]
    folders: usize,
    /// Simulate a single ESXi host instead of a vCenter.
    #[arg(long)]
    esx: bool,
    /// Report vCenter 7.0 instead of 8.0.
    #[arg(long)]
    vcenter7: bool,
    /// More users: a JSON array of {"name", "password", "role"}, the role one of vCenter's
    /// system roles (Admin, ReadOnly, View, Anonymous, NoAccess); the --username user is Admin.
    #[arg(long)]
    users: Option<std::path::PathBuf>,
    /// Minutes an idle session lives.
    #[arg(long, default_value_t = 30)]
    session_idle_minutes: u64,
    /// Milliseconds a task stays queued and running before it completes.
    #[arg(long, default_value_t = 0)]
    task_delay_ms: u64,
    /// Milliseconds after power-on before the guest reports tools and IP addresses.
    #[arg(long, default_value_t = 200)]
    guest_delay_ms: u64,
    /// A fault injection rules file (a JSON array of {method, type?, object?, fault?,
    /// message?, delayMs?, times?}), re-read whenever it changes.
    #[arg(long)]
    faults: Option<std::path::PathBuf>,
    /// Keep the simulator in this directory (a durable store, as `up --data-dir`): every
    /// change is on disk before it is answered, and a start on a directory that holds a
    /// simulator brings it back (inventory, tags, certificate, password) instead of making
    /// one of the model flags. Without it, nothing outlives the process.
    #[arg(long)]
    data_dir: Option<std::path::PathBuf>,
    /// Threads serving requests. One (the default) serves every connection on one thread,
    /// which costs the least CPU per call: no request has to wake a second thread, and on
    /// a small machine the clients keep the other cores. 0 means one per core.
    #[arg(long, default_value_t = 1)]
    threads: usize,
}

impl VcsimArgs {
    /// The runtime this command runs on, as `--threads` says.
    pub fn runtime(&self) -> std::io::Result<tokio::runtime::Runtime> {
        let mut builder = match self.threads {
            1 => tokio::runtime::Builder::new_current_thread(),
            0 => tokio::runtime::Builder::new_multi_thread(),
            n => {
                let mut b = tokio::runtime::Builder::new_multi_thread();
                b.worker_threads(n);
                b
            }
        };
        builder.enable_all().build()
    }
}

/// Keeps `sim`'s fault injection rules those of `path`, re-reading it when its
/// modification time changes; a file that does not parse is reported and its rules left as
/// they were.
async fn watch_faults(sim: Simulator, path: std::path::PathBuf) {
    let mut seen = None;
    loop {
        let modified = std::fs::metadata(&path).and_then(|m| m.modified()).ok();
        if modified != seen {
            seen = modified;
            let text = std::fs::read_to_string(&path).unwrap_or_else(|_| "[]".into());
            match infrasim_vsphere_sim::fault_injection::Injection::parse_rules(&text) {
                Ok(rules) => {
                    tracing::info!(rules = rules.len(), path = %path.display(), "fault injection rules");
                    sim.set_injections(rules);
                }
                Err(e) => {
                    tracing::warn!(error = %e, path = %path.display(), "fault injection rules not loaded")
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// The users of a `--users` file.
fn read_users(
    path: &std::path::Path,
) -> anyhow::Result<Vec<infrasim_vsphere_sim::authorization::SimUser>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| {
        format!(
            "{}: a JSON array of {{\"name\", \"password\", \"role\"}} (role: Admin, ReadOnly, View, Anonymous or NoAccess)",
            path.display()
        )
    })
}

fn generated_password() -> String {
    uuid::Uuid::new_v4().simple().to_string()[..20].to_string()
}

/// The keeper of the simulator in `dir`: a durable store of its own there.
fn open_keeper(dir: &std::path::Path) -> anyhow::Result<Keeper> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let backend = infrasim_durable::DurableBackend::open(dir, KEPT_EVENTS)
        .with_context(|| format!("opening the data directory {}", dir.display()))?;
    let config = infrasim_store::StoreConfig {
        watch_window: KEPT_EVENTS,
        // Ten thousand VMs' records differ in a few fields each: packed, they take a tenth of
        // the memory, and they are read only at a start.
        packed: true,
        ..infrasim_store::StoreConfig::default()
    };
    let store = infrasim_store::Store::open(config, SystemClock::shared(), Arc::new(backend))
        .with_context(|| format!("reading the simulator kept in {}", dir.display()))?;
    let group = store.group_or_create("vcenter");
    // The store lives as long as the process: the simulator writes to it until the end.
    std::mem::forget(store);
    Ok(Keeper::new(group))
}

/// Events the kept simulator's store holds besides its objects: nobody watches it, so few.
const KEPT_EVENTS: usize = 100;

/// In a kept simulator's records: the password it was first given or made.
const PASSWORD: &str = "password";

pub async fn run(args: VcsimArgs) -> anyhow::Result<()> {
    let keeper = args.data_dir.as_deref().map(open_keeper).transpose()?;
    let kept_password = keeper.as_ref().and_then(|k| k.record::<String>(PASSWORD));
    let password = args
        .password
        .clone()
        .or(kept_password)
        .unwrap_or_else(generated_password);
    if let Some(keeper) = &keeper {
        keeper.put_record(PASSWORD, &password);
    }
    let flavor = match (args.esx, args.vcenter7) {
        (true, _) => Flavor::Esx8,
        (false, true) => Flavor::VCenter7,
        (false, false) => Flavor::VCenter8,
    };
    let config = SimConfig {
        username: args.username.clone(),
        password: password.clone(),
        session_idle: Duration::from_secs(args.session_idle_minutes.max(1) * 60),
        flavor,
        model: Model {
            datacenters: args.datacenters,
            clusters: args.clusters,
            hosts_per_cluster: args.hosts,
            standalone_hosts: args.standalone_hosts,
            vms: args.vms,
            datastores: args.datastores,
            pools: args.pools,
            portgroups: args.portgroups,
            folders: args.folders,
            esx: args.esx,
        },
        task_delay: Duration::from_millis(args.task_delay_ms),
        guest_delay: Duration::from_millis(args.guest_delay_ms),
        users: match &args.users {
            Some(path) => read_users(path)?,
            None => Vec::new(),
        },
        ..SimConfig::default()
    };
    let cert = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => {
            let read = |p: &std::path::Path| {
                std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))
            };
            Some(
                ServerCert::from_pem(&read(cert)?, &read(key)?)
                    .context("the --tls-cert and --tls-key")?,
            )
        }
        _ => None,
    };
    let clock = SystemClock::shared();
    let instance = match keeper {
        Some(keeper) => Instance::start_kept(config, args.listen, clock, cert, keeper).await,
        None => Instance::start_with_cert(config, args.listen, clock, cert).await,
    }
    .with_context(|| format!("serving on {}", args.listen))?;
    let sim = instance.simulator().clone();
    if let Some(path) = args.faults.clone() {
        let rules = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        let rules = infrasim_vsphere_sim::fault_injection::Injection::parse_rules(&rules)
            .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        sim.set_injections(rules);
        tokio::spawn(watch_faults(sim.clone(), path));
    }
    let cert = instance.cert();
    println!("export GOVC_URL={}", instance.url());
    println!("export GOVC_INSECURE=1");
    println!("export GOVC_USERNAME={}", args.username);
    println!("export GOVC_PASSWORD={password}");
    println!("# TLS thumbprint (SHA-256): {}", cert.thumbprint_sha256);
    println!("# TLS thumbprint (SHA-1): {}", cert.thumbprint_sha1);
    tracing::info!(addr = %instance.addr(), "vSphere simulator serving");
    crate::shutdown_signal().await;
    instance.stop().await?;
    Ok(())
}
