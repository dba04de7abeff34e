//! `infrasim controller`: the Cluster API in-memory provider (and, unless real Cluster API
//! runs there, the core stand-in) against any Kubernetes cluster, hosting the simulated
//! workload clusters in this process; one replica leads at a time, through a Lease.

use anyhow::Context as _;
use clap::Args;
use infrasim_clock::SystemClock;
use infrasim_cloud::{Cloud, CloudConfig};
use infrasim_controllers::runtime::client_metrics::ClientMetrics;
use infrasim_controllers::runtime::prometheus::ControllerMetrics;
use infrasim_controllers::runtime::shards::{ShardMember, Shards};
use infrasim_controllers::{crds, leader::Elector, Context, Part, Selection};
use infrasim_metrics::Metrics;
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::Arc;

#[derive(Debug, Args)]
pub struct ControllerArgs {
    /// The management cluster (default: $KUBECONFIG, then ~/.kube/config, then in-cluster).
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// Watch this namespace only (default: all).
    #[arg(long)]
    namespace: Option<String>,
    /// Cluster API's core: `embedded` (the stand-in runs here) or `external` (real Cluster
    /// API controllers manage the cluster).
    #[arg(long, default_value = "embedded", value_parser = ["embedded", "external"])]
    capi_core: String,
    /// Run the Cluster API in-memory provider (InMemory*, Dev*).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    inmemory: bool,
    /// Run the vcsim controller too (VCenterSimulator, ControlPlaneEndpoint, EnvVar: simulated
    /// vCenters for Cluster API Provider vSphere).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    vcsim: bool,
    /// CAPV's `NodeAntiAffinity` feature gate for the CAPV stand-in (cluster modules; off by
    /// default, as in CAPV).
    #[arg(long, env = "EXP_NODE_ANTI_AFFINITY", default_value_t = false, action = clap::ArgAction::Set)]
    capv_node_anti_affinity: bool,
    /// Serve Cluster API's and CAPV's object-state metrics at `/metrics/state`, as
    /// kube-state-metrics with their configurations would (kept from the controllers' own
    /// informers; `false` keeps none).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    state_metrics: bool,
    /// Run the VmGroup controller too (groups of VMs cloned from a template on the vCenter a
    /// Secret names).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    vmgroup: bool,
    /// Run the SIPCluster controller too (bare-metal hosts claimed for tenant clusters, with
    /// their load balancers; installs metal3's BareMetalHost CRD where the plane lacks it).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    sip: bool,
    /// Apply the CRDs of the controllers that run (server-side, forced) before starting.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    install_crds: bool,
    /// Elect a leader through a Lease, so replicas can run side by side.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    leader_elect: bool,
    /// Where the Lease lives.
    #[arg(long, default_value = "default")]
    leader_election_namespace: String,
    /// The address workload clusters' endpoints listen on and advertise.
    #[arg(long, default_value = "127.0.0.1")]
    advertise_address: IpAddr,
    /// First port of the workload clusters' endpoint range.
    #[arg(long, default_value_t = 20000)]
    port_min: u16,
    /// Last port of the workload clusters' endpoint range.
    #[arg(long, default_value_t = 24000)]
    port_max: u16,
    /// The most change events each workload cluster keeps for watch resumption. Within it,
    /// a cluster keeps its last 75 s of events (at least 100), as kube-apiserver's watch
    /// cache does; older resourceVersions get 410 Gone, and clients relist.
    #[arg(long, default_value_t = 1000)]
    cluster_watch_window: usize,
    /// Serve Cluster API's webhooks over HTTPS here (the conversion webhook, so the core
    /// kinds are served in v1beta1 too, and with the embedded core its defaulting and
    /// validating webhooks), registered with the plane by URL; the plane must reach this
    /// address (`127.0.0.1:0`: loopback, any port). Without it, the plane serves v1beta2
    /// only and nothing defaults or validates as Cluster API's webhooks do.
    #[arg(long)]
    webhook_listen: Option<std::net::SocketAddr>,
    /// Keep the workload clusters durable in DIR/clusters (taken once this replica leads): a
    /// restarted controller brings them back as they were, for the Cluster API objects the
    /// plane kept. Without it they live in memory and are made again after a restart. With
    /// `--shards`, each shard's clusters are kept in DIR/shards/shard-<k>, opened by the
    /// process holding the shard: give every process the same DIR on shared storage and a
    /// shard taken over comes back as it was (every object of its clusters), not made again.
    #[arg(long)]
    data_dir: Option<std::path::PathBuf>,
    /// Serve the process's metrics (`/metrics`, and the objects' state at `/metrics/state`)
    /// over HTTPS here, to bearer tokens the plane authenticates and allows to `get` them
    /// (controller-runtime's flag; off when not given or `0`; `:PORT` is every address).
    #[arg(long)]
    metrics_bind_address: Option<crate::metrics_server::BindAddress>,
    /// Spread the workload clusters over every `infrasim controller` started with the same
    /// number against this plane: each cluster belongs to one of N shards, each process hosts
    /// the shards whose Lease (`infrasim-shard-<k>`) it holds, a fair share of them, on its
    /// own port range, and takes over those of a process that stops. The other controllers
    /// (Cluster API's core, vcsim, ...) run in the one that holds the leader Lease. 0: no
    /// shards, one process hosts every cluster (the leader).
    #[arg(long, default_value_t = 0)]
    shards: u32,
    /// This process's name in its Leases (default: $HOSTNAME and a random suffix).
    #[arg(long)]
    identity: Option<String>,
    /// Cluster API's watch filter: reconcile only objects labelled
    /// `cluster.x-k8s.io/watch-filter=VALUE`, so several managers can share one plane.
    #[arg(long)]
    watch_filter: Option<String>,
}

/// A client of the cluster a kubeconfig (or the environment) points at.
pub async fn client_from(path: Option<&std::path::Path>) -> anyhow::Result<kube::Client> {
    client_counted(path, None).await
}

/// [`client_from`], its requests counted in `counted` (as client-go counts a controller's)
/// when given.
async fn client_counted(
    path: Option<&std::path::Path>,
    counted: Option<&ClientMetrics>,
) -> anyhow::Result<kube::Client> {
    let config = match path {
        Some(p) => {
            let kc = kube::config::Kubeconfig::read_from(p)
                .with_context(|| format!("reading {}", p.display()))?;
            kube::Config::from_custom_kubeconfig(kc, &Default::default()).await?
        }
        None => kube::Config::infer().await?,
    };
    let host = config
        .cluster_url
        .authority()
        .map(|a| a.to_string())
        .unwrap_or_default();
    let builder = kube::client::ClientBuilder::try_from(config)?;
    Ok(match counted {
        Some(counted) => builder.with_layer(&counted.layer(&host)).build(),
        None => builder.build(),
    })
}

pub async fn run(args: ControllerArgs) -> anyhow::Result<()> {
    let metrics_address = args.metrics_bind_address.and_then(|b| b.0);
    let metrics = metrics_address.map(|_| Metrics::new());
    let counted = metrics.as_ref().map(ClientMetrics::register);
    let client = client_counted(args.kubeconfig.as_deref(), counted.as_ref()).await?;
    // Every replica serves its metrics, the one waiting for the lease too (as
    // controller-runtime's managers do).
    if let (Some(listen), Some(metrics)) = (metrics_address, &metrics) {
        let access = crate::metrics_server::Access::Plane(client.clone());
        let (addr, _) = crate::metrics_server::serve(listen, metrics.clone(), access).await?;
        println!("metrics: https://{addr}/metrics and /metrics/state");
    }
    let embedded = args.capi_core == "embedded";
    let reach = serve_webhooks(&args, &client, embedded).await?;
    let selection = selection(&args, reach.as_ref());
    if args.install_crds {
        crds::install(&client, &selection.crds())
            .await
            .context("installing the CRDs")?;
    }
    if let (Some(reach), true) = (&reach, embedded) {
        infrasim_controllers::capi::admission::install(&client, reach)
            .await
            .context("registering the embedded core's admission webhooks")?;
    }
    let clock = SystemClock::shared();
    let identity = args.identity.clone().unwrap_or_else(|| {
        format!(
            "{}_{}",
            std::env::var("HOSTNAME").unwrap_or_else(|_| "infrasim".into()),
            uuid::Uuid::new_v4()
        )
    });
    let elector = args.leader_elect.then(|| {
        Elector::new(
            client.clone(),
            &args.leader_election_namespace,
            "infrasim-controller",
            &identity,
            clock.clone(),
        )
    });
    let cloud_config = CloudConfig {
        advertise: args.advertise_address,
        ports: args.port_min..=args.port_max,
        watch_window: args.cluster_watch_window.max(1),
        // The workload clusters' requests, as the in-memory provider counts them.
        metrics: metrics
            .as_ref()
            .map(infrasim_kube_api::RequestMetrics::register),
        homes: args
            .data_dir
            .as_ref()
            .filter(|_| args.shards > 0)
            .map(|dir| dir.join(crate::up::SHARDS_DIR)),
    };
    let parts = Parts {
        client,
        clock,
        cloud_config,
        metrics: metrics.as_ref().map(ControllerMetrics::register),
        elector,
        identity,
        selection,
    };
    if args.shards > 0 {
        return run_sharded(&args, parts).await;
    }
    if let Some(e) = &parts.elector {
        println!(
            "waiting to lead (Lease {}/infrasim-controller)",
            args.leader_election_namespace
        );
        e.acquire().await.context("leader election")?;
    }
    // The durable clusters are taken only once this replica leads.
    let ctx = parts.context(&args).await?;
    println!("controllers: {}", parts.selection.describe());
    tokio::select! {
        _ = infrasim_controllers::run(ctx, parts.selection.clone()) => {}
        _ = keep_leading(parts.elector.as_ref()) => {
            anyhow::bail!("leadership lost: stopping, as a controller must")
        }
        _ = crate::shutdown_signal() => {}
    }
    Ok(())
}

/// Serves Cluster API's webhooks at `--webhook-listen`, when given: where the plane reaches them.
async fn serve_webhooks(
    args: &ControllerArgs,
    client: &kube::Client,
    embedded: bool,
) -> anyhow::Result<Option<infrasim_controllers::capi::admission::Reach>> {
    let Some(listen) = args.webhook_listen else {
        return Ok(None);
    };
    let hooks = infrasim_controllers::capi::admission::CoreWebhooks::new(client.clone(), embedded);
    let reach = crate::webhook_server::serve(listen, hooks).await?;
    if let infrasim_controllers::capi::admission::Reach::Url { base, .. } = &reach {
        println!("webhooks: {base}");
    }
    Ok(Some(reach))
}

/// The controllers the flags select.
fn selection(
    args: &ControllerArgs,
    reach: Option<&infrasim_controllers::capi::admission::Reach>,
) -> Selection {
    Selection {
        inmemory: args.inmemory,
        namespace: args.namespace.clone(),
        capi_core: args.capi_core == "embedded",
        vcsim: args.vcsim,
        vmgroup: args.vmgroup,
        sip: args.sip,
        // A plane elsewhere reaches the conversion webhook only where this process serves it.
        v1beta1: reach.is_some(),
        reach: reach.cloned().unwrap_or_default(),
        capv_node_anti_affinity: args.capv_node_anti_affinity,
        state_metrics: args.state_metrics,
        part: Default::default(),
    }
}

/// What the controllers of this process are made of, before they run.
struct Parts {
    client: kube::Client,
    clock: infrasim_clock::SharedClock,
    cloud_config: CloudConfig,
    metrics: Option<ControllerMetrics>,
    elector: Option<Elector>,
    identity: String,
    selection: Selection,
}

impl Parts {
    /// The controllers' context over this process's cloud (its clusters brought back from
    /// `--data-dir` when given).
    async fn context(&self, args: &ControllerArgs) -> anyhow::Result<Context> {
        let (config, clock) = (self.cloud_config.clone(), self.clock.clone());
        let cloud = match &args.data_dir {
            // Sharded, every cluster lives in its shard's home (see `CloudConfig::homes`).
            Some(dir) if args.shards == 0 => {
                crate::up::open_cloud(config, &dir.join(crate::up::CLUSTERS_DIR), clock.clone())
                    .await?
            }
            _ => Cloud::with_clock(config, clock.clone()),
        };
        let mut ctx = Context::new(self.client.clone(), Arc::new(cloud), clock)
            .with_watch_filter(args.watch_filter.clone());
        if let Some(metrics) = &self.metrics {
            ctx = ctx.with_metrics(metrics.clone());
        }
        Ok(ctx)
    }
}

/// Returns when this replica stops leading (never without leader election).
async fn keep_leading(elector: Option<&Elector>) {
    match elector {
        Some(e) => e.keep().await,
        None => std::future::pending().await,
    }
}

/// A host of a sharded fleet: the in-memory provider at once, for the shards this process
/// holds; the other controllers once it leads. Losing a shard or the lead stops the process.
async fn run_sharded(args: &ControllerArgs, parts: Parts) -> anyhow::Result<()> {
    let ctx = parts
        .context(args)
        .await?
        .with_shards(Shards::new(args.shards));
    let member = ShardMember::new(
        ctx.client.clone(),
        ctx.clock.clone(),
        ctx.cloud.clone(),
        ctx.shards.clone(),
        &args.leader_election_namespace,
        &parts.identity,
    );
    println!(
        "hosting a share of {} shards as {} (Leases {}/infrasim-shard-*), endpoints on {}:{}-{}",
        args.shards,
        parts.identity,
        args.leader_election_namespace,
        args.advertise_address,
        args.port_min,
        args.port_max
    );
    let provider = Selection {
        part: Part::Provider,
        ..parts.selection.clone()
    };
    let rest = Selection {
        part: Part::AllButProvider,
        ..parts.selection.clone()
    };
    let lead_and_run = async {
        if let Some(e) = &parts.elector {
            e.acquire().await.context("leader election")?;
        }
        println!("leading: {}", rest.describe());
        tokio::select! {
            _ = infrasim_controllers::run(ctx.clone(), rest.clone()) => {}
            _ = keep_leading(parts.elector.as_ref()) => {
                anyhow::bail!("leadership lost: stopping, as a controller must")
            }
        }
        anyhow::Ok(())
    };
    tokio::select! {
        _ = infrasim_controllers::run(ctx.clone(), provider) => {}
        lost = member.run() => anyhow::bail!("{lost}: stopping"),
        done = lead_and_run => done?,
        _ = crate::shutdown_signal() => {}
    }
    Ok(())
}
