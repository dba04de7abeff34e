//! `infrasim up`: the embedded management plane on loopback, and an admin kubeconfig.

use anyhow::Context;
use clap::Args;
use infrasim_clock::SystemClock;
use infrasim_kube_api::kubeconfig::{self, KubeconfigSpec};
use infrasim_kube_api::pki::{write_private, CertificateAuthority, KeyedCert, SigningKey};
use infrasim_kube_api::{ApiConfig, ApiServer};
use infrasim_store::{Backend, MemoryBackend, Store, StoreConfig};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;

#[derive(Debug, Args)]
pub struct UpArgs {
    /// Address to listen on (loopback unless you say otherwise).
    #[arg(long, default_value = "127.0.0.1:6443")]
    listen: SocketAddr,
    /// Where state (the CA, the kubeconfig) is kept.
    #[arg(long, env = "INFRASIM_DATA_DIR")]
    data_dir: Option<PathBuf>,
    /// Where to write the admin kubeconfig (default: DATA_DIR/kubeconfig).
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// Keep everything in memory: a fresh CA every start, nothing written but the kubeconfig.
    /// Without it, every acknowledged write is fsync'd in DATA_DIR/store.redb and the plane
    /// comes back as it was after a restart.
    #[arg(long)]
    ephemeral: bool,
    /// Change events kept for watch resumption; older resourceVersions get 410 Gone.
    #[arg(long, default_value_t = 10_000)]
    watch_window: usize,
    /// Which controllers run in the plane: `all` (the Cluster API in-memory provider), or
    /// `none` (the bare API server).
    #[arg(long, default_value = "all", value_parser = ["all", "none"])]
    controllers: String,
    /// Cluster API's core: `embedded` (the stand-in's controllers and CRDs run here) or
    /// `external` (real Cluster API controllers manage the plane; the stand-in stays off).
    #[arg(long, default_value = "embedded", value_parser = ["embedded", "external"])]
    capi_core: String,
    /// Run the Cluster API in-memory provider (InMemory*, Dev*).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    inmemory: bool,
    /// Run the vcsim controller too (VCenterSimulator, ControlPlaneEndpoint, EnvVar: simulated
    /// vCenters for Cluster API Provider vSphere).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    vcsim: bool,
    /// Run the VmGroup controller too (groups of VMs cloned from a template on the vCenter a
    /// Secret names).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    vmgroup: bool,
    /// Run the SIPCluster controller too (bare-metal hosts claimed for tenant clusters, with
    /// their load balancers; installs metal3's BareMetalHost CRD where the plane lacks it).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    sip: bool,
    /// CAPV's `NodeAntiAffinity` feature gate for the CAPV stand-in: a cluster module per
    /// control plane and MachineDeployment, each machine's VM in its owner's (off by default,
    /// as in CAPV; clusterctl's variable for it is the environment's default).
    #[arg(long, env = "EXP_NODE_ANTI_AFFINITY", default_value_t = false, action = clap::ArgAction::Set)]
    capv_node_anti_affinity: bool,
    /// Serve Cluster API's and CAPV's object-state metrics at `/metrics/state`, as
    /// kube-state-metrics with their configurations would (kept from the controllers' own
    /// informers; `false` keeps none).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    state_metrics: bool,
    /// Serve the live dashboard (HTTPS, behind one-time login links printed in the banner or
    /// by `infrasim dashboard`).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    dashboard: bool,
    /// Where the dashboard listens (default: 127.0.0.1:6480, or a free loopback port when
    /// that one is taken).
    #[arg(long)]
    dashboard_listen: Option<SocketAddr>,
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
    /// Run the plane's own workloads, as kind runs a cluster on one node: a Node named
    /// `infrasim-control-plane`, with kube-controller-manager's workload controllers, a
    /// scheduler and its kubelet in miniature, so Deployments, Jobs and the rest get Pods
    /// that run (`false`: the objects are stored and nothing acts on them).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    workloads: bool,
}

/// Where the dashboard listens unless told: beside the plane's 6443, free on most machines.
const DASHBOARD_LISTEN: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 6480);

/// A client of the plane in this process, as the dashboard: it reads what it shows and
/// deletes the login Secrets it redeems; its users are the plane's administrators (whoever
/// may create those Secrets), so it acts with their group.
fn dashboard_client(server: &ApiServer) -> kube::Client {
    let identity = infrasim_kube_api::Identity {
        user: "system:infrasim-dashboard".into(),
        groups: vec!["system:masters".into()],
    };
    kube::Client::new(server.local_service(identity), "default")
}

/// Starts the dashboard; its address and a first login link.
async fn start_dashboard(
    args: &UpArgs,
    server: &ApiServer,
    ca: &CertificateAuthority,
    metrics: &infrasim_metrics::Metrics,
) -> anyhow::Result<(String, String)> {
    let listener = match args.dashboard_listen {
        Some(listen) => tokio::net::TcpListener::bind(listen)
            .await
            .with_context(|| format!("binding the dashboard to {listen}"))?,
        // The usual port when free; a second plane on the machine takes any other.
        None => match tokio::net::TcpListener::bind(DASHBOARD_LISTEN).await {
            Ok(listener) => listener,
            Err(_) => tokio::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
                .await
                .context("binding the dashboard to a loopback port")?,
        },
    };
    let local = listener.local_addr()?;
    let cert = ca.serving_cert(
        "infrasim-dashboard",
        &["localhost".to_string()],
        &[local.ip()],
    )?;
    let config = infrasim_dashboard::Config {
        client: dashboard_client(server),
        metrics: metrics.clone(),
        tls: infrasim_kube_api::tls_config(ca, &cert)?,
    };
    let dashboard = infrasim_dashboard::serve(listener, config).await?;
    let link = dashboard.login_link().await?;
    Ok((dashboard.url().to_string(), link))
}

/// With the dashboard off, removes the address an earlier run recorded, so `infrasim
/// dashboard` says there is none rather than minting a link to nothing.
async fn forget_dashboard(server: &ApiServer) {
    use infrasim_dashboard::login::{CONFIG_MAP, NAMESPACE};
    use k8s_openapi::api::core::v1::ConfigMap;
    let maps: kube::Api<ConfigMap> = kube::Api::namespaced(dashboard_client(server), NAMESPACE);
    if let Err(e) = maps.delete(CONFIG_MAP, &Default::default()).await {
        tracing::debug!(error = %e, "no dashboard address to remove");
    }
}

/// The plane's Node when it runs its own workloads (kind's is `kind-control-plane`).
pub const NODE: &str = "infrasim-control-plane";

/// Registers the plane's Node (when missing) and runs the workload controllers over the
/// plane's own objects until the process ends.
fn start_workloads(server: &ApiServer, clock: infrasim_clock::SharedClock) {
    let now = infrasim_store::format_time(clock.now());
    let version = infrasim_kube_api::KUBERNETES_VERSION;
    let writer = infrasim_cloud::components::controller_manager(server);
    let node = infrasim_cloud::single_node(NODE, version, &now);
    // The node's kubelet registers it, once: a restarted plane finds it there.
    if let Err(e) = infrasim_cloud::components::kubelet(&writer, NODE).ensure("nodes", node) {
        tracing::warn!(error = %e.message, "registering the plane's node");
    }
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    // The process ends the controllers: the sender lives as long as it does.
    std::mem::forget(stop);
    tokio::spawn(infrasim_cloud::workloads::run(
        writer,
        clock,
        infrasim_cloud::WorkloadConfig::default(),
        server.ca().clone(),
        infrasim_cloud::workloads::KubeletSwitch::default(),
        stopped,
    ));
}

/// Where `up` keeps its workload clusters, in the data directory: a store of their own, so
/// each cluster keeps `--cluster-watch-window` events, not the plane's window.
pub const CLUSTERS_DIR: &str = "clusters";

/// Where the processes of a sharded fleet keep their shards' homes, in a data directory they
/// share: one store per shard, `shard-<k>` (see `infrasim_cloud::CloudConfig::homes`).
pub const SHARDS_DIR: &str = "shards";

/// A cloud over the durable store in `dir`, with the clusters it kept brought back (the
/// banner says how many, in how long).
pub async fn open_cloud(
    config: infrasim_cloud::CloudConfig,
    dir: &std::path::Path,
    clock: infrasim_clock::SharedClock,
) -> anyhow::Result<infrasim_cloud::Cloud> {
    let opening = std::time::Instant::now();
    let backend = infrasim_durable::DurableBackend::open(dir, config.watch_window)
        .context("opening the workload clusters' store")?;
    let store = Store::open(config.store_config(), clock.clone(), Arc::new(backend))
        .context("reading the workload clusters' store")?;
    let cloud = infrasim_cloud::Cloud::open(config, clock, store)
        .await
        .context("bringing the workload clusters back")?;
    println!(
        "workload clusters: durable in {} ({} restored in {} ms)",
        dir.join(infrasim_durable::FILE).display(),
        cloud.clusters().len(),
        opening.elapsed().as_millis()
    );
    Ok(cloud)
}

/// The default data directory: `$XDG_DATA_HOME/infrasim` or `~/.local/share/infrasim`.
pub fn default_data_dir() -> PathBuf {
    if let Some(xdg) = std::env::var_os("XDG_DATA_HOME").filter(|v| !v.is_empty()) {
        return PathBuf::from(xdg).join("infrasim");
    }
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("."));
    home.join(".local/share/infrasim")
}

pub async fn run(args: UpArgs) -> anyhow::Result<()> {
    let data_dir = args.data_dir.clone().unwrap_or_else(default_data_dir);
    let kubeconfig_path = args
        .kubeconfig
        .clone()
        .unwrap_or_else(|| data_dir.join("kubeconfig"));
    let Plane {
        server,
        requests,
        ca,
        clock,
        restored,
    } = open_plane(&args, &data_dir)?;

    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("binding {}", args.listen))?;
    let local = listener.local_addr()?;
    let serving = serving_cert(&ca, local)?;
    let tls = server.tls_config(&serving)?;

    let server_url = write_admin_kubeconfig(&ca, local, &kubeconfig_path)?;
    publish_cluster_info(&server, &ca, &server_url).await?;

    println!("infrasim management plane listening on {server_url}");
    println!("kubeconfig: {}", kubeconfig_path.display());
    println!("export KUBECONFIG={}", kubeconfig_path.display());
    if args.ephemeral {
        println!("state: in memory (--ephemeral); nothing survives a restart");
    } else {
        println!(
            "state: durable in {} (its write-ahead log beside it; {} objects restored in {} ms; resourceVersions go on from {})",
            data_dir.join(infrasim_durable::FILE).display(),
            restored.objects,
            restored.took.as_millis(),
            restored.version,
        );
    }
    if args.workloads {
        start_workloads(&server, clock.clone());
        println!("workloads: Node {NODE} (Deployments, Jobs, … get Pods that run)");
    }
    let metrics = requests.registry().clone();
    let controllers = match args.controllers.as_str() {
        "all" => {
            Some(start_controllers(&args, &data_dir, &server, &server_url, clock, requests).await?)
        }
        _ => None,
    };
    // After the controllers, whose CRDs the dashboard's watches need.
    if args.dashboard {
        let (url, link) = start_dashboard(&args, &server, &ca, &metrics).await?;
        println!("dashboard: {url} (one-time login link: {link})");
    } else {
        forget_dashboard(&server).await;
    }
    tracing::info!(%local, "serving");
    let served = server.serve(listener, tls, crate::shutdown_signal()).await;
    if let Some(task) = controllers {
        crate::stop_controllers(task).await;
    }
    served?;
    tracing::info!("stopped");
    Ok(())
}

/// The management plane before it listens: its API server over the opened store, the CA
/// that signs its certificates, its clock, and what it came back with.
struct Plane {
    server: ApiServer,
    /// The plane's handle on the request metrics, whose families the clusters share.
    requests: infrasim_kube_api::RequestMetrics,
    ca: CertificateAuthority,
    clock: infrasim_clock::SharedClock,
    restored: Restored,
}

/// What the plane brought back from its data directory, for the banner.
struct Restored {
    objects: usize,
    /// The resourceVersion the plane goes on from.
    version: u64,
    took: std::time::Duration,
}

/// Opens the store (durable in `data_dir` unless ephemeral) and the CA, and the API server
/// over them, with its service-account key kept beside the CA when durable.
fn open_plane(args: &UpArgs, data_dir: &std::path::Path) -> anyhow::Result<Plane> {
    // Opened first: a directory another process holds is refused before anything in it is
    // touched.
    let opening = std::time::Instant::now();
    let backend: Arc<dyn Backend> = if args.ephemeral {
        Arc::new(MemoryBackend)
    } else {
        Arc::new(
            infrasim_durable::DurableBackend::open(data_dir, args.watch_window.max(1))
                .context("opening the data directory")?,
        )
    };
    let ca = if args.ephemeral {
        CertificateAuthority::generate("infrasim-management-ca")?
    } else {
        CertificateAuthority::load_or_generate(&data_dir.join("pki"), "infrasim-management-ca")
            .with_context(|| format!("loading the CA from {}", data_dir.display()))?
    };

    let clock = SystemClock::shared();
    let store = Store::open(
        StoreConfig {
            watch_window: args.watch_window.max(1),
            ..StoreConfig::default()
        },
        clock.clone(),
        backend,
    )
    .context("reading the stored state")?;
    let group = store.group_or_create("management");
    let restored_version = group.resource_version();
    let restored_objects: usize = group
        .resources()
        .iter()
        .filter_map(|r| group.snapshot(r, infrasim_store::ReadAt::Latest).ok())
        .map(|s| s.objects.len())
        .sum();
    let restore_took = opening.elapsed();
    // The process's one registry: the plane counts its requests in it as kube-apiserver,
    // the workload clusters theirs as Cluster API's in-memory provider, and `/metrics`
    // renders it all.
    let metrics = infrasim_metrics::Metrics::new();
    let requests = infrasim_kube_api::RequestMetrics::register(&metrics);
    infrasim_kube_api::metrics::register_storage(&metrics, group.clone());
    let config = ApiConfig {
        metrics: Some(requests.clone()),
        ..ApiConfig::default()
    };
    let server = ApiServer::new(group, ca.clone(), clock.clone(), config);
    if !args.ephemeral {
        let key = SigningKey::load_or_generate(&data_dir.join("pki").join("sa.key")).with_context(
            || {
                format!(
                    "loading the service-account key from {}",
                    data_dir.display()
                )
            },
        )?;
        server.set_service_account_key(&key)?;
    }
    Ok(Plane {
        server,
        requests,
        ca,
        clock,
        restored: Restored {
            objects: restored_objects,
            version: restored_version,
            took: restore_took,
        },
    })
}

/// The API server's serving certificate, for the names and addresses clients reach it by:
/// loopback, the in-cluster service, and the address it listens on.
fn serving_cert(ca: &CertificateAuthority, local: SocketAddr) -> anyhow::Result<KeyedCert> {
    let mut ips: Vec<IpAddr> = vec![
        IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(Ipv6Addr::LOCALHOST),
        IpAddr::V4(Ipv4Addr::new(10, 96, 0, 1)),
    ];
    if !local.ip().is_unspecified() && !ips.contains(&local.ip()) {
        ips.push(local.ip());
    }
    let dns: Vec<String> = [
        "localhost",
        "kubernetes",
        "kubernetes.default",
        "kubernetes.default.svc",
        "kubernetes.default.svc.cluster.local",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    Ok(ca.serving_cert("kube-apiserver", &dns, &ips)?)
}

/// Writes the admin kubeconfig (a `system:masters` client certificate) to `path`, and
/// returns the server URL it points at: loopback when listening on every address.
fn write_admin_kubeconfig(
    ca: &CertificateAuthority,
    local: SocketAddr,
    path: &std::path::Path,
) -> anyhow::Result<String> {
    let admin = ca.client_cert("kubernetes-admin", &["system:masters"])?;
    let host = if local.ip().is_unspecified() {
        IpAddr::V4(Ipv4Addr::LOCALHOST)
    } else {
        local.ip()
    };
    let server_url = format!("https://{}", SocketAddr::new(host, local.port()));
    let config = kubeconfig::render(&KubeconfigSpec {
        cluster_name: "infrasim",
        user_name: "kubernetes-admin",
        server: &server_url,
        ca_pem: &ca.cert_pem,
        client_cert_pem: &admin.cert_pem,
        client_key_pem: &admin.key_pem,
        tls_server_name: None,
    });
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("creating {}", parent.display()))?;
    }
    write_private(path, &config).with_context(|| format!("writing {}", path.display()))?;
    Ok(server_url)
}

/// Publishes the plane's CA and address as kubeadm does, in `kube-public/cluster-info`
/// (a kubeconfig with one unnamed cluster), where clients that discover a cluster read
/// them: CAPV's supervisor service discovery, `kubeadm join`'s discovery. Written at every
/// start, since the address may change between runs.
async fn publish_cluster_info(
    server: &ApiServer,
    ca: &CertificateAuthority,
    server_url: &str,
) -> anyhow::Result<()> {
    let identity = infrasim_kube_api::Identity {
        user: "system:infrasim-up".into(),
        groups: vec!["system:masters".into()],
    };
    let client = kube::Client::new(server.local_service(identity), "kube-public");
    let kubeconfig = infrasim_kube_api::kubeconfig::cluster_info(server_url, &ca.cert_pem);
    let body = serde_json::json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "cluster-info", "namespace": "kube-public"},
        "data": {"kubeconfig": kubeconfig},
    });
    let api: kube::Api<k8s_openapi::api::core::v1::ConfigMap> =
        kube::Api::namespaced(client, "kube-public");
    let params = kube::api::PatchParams::apply("infrasim-up").force();
    api.patch("cluster-info", &params, &kube::api::Patch::Apply(&body))
        .await
        .context("publishing kube-public/cluster-info")?;
    Ok(())
}

/// Installs the controllers' CRDs into the plane and runs the controllers in this process,
/// over the engine's in-process service (no socket, no TLS between them); the task runs them.
async fn start_controllers(
    args: &UpArgs,
    data_dir: &std::path::Path,
    server: &ApiServer,
    server_url: &str,
    clock: infrasim_clock::SharedClock,
    requests: infrasim_kube_api::RequestMetrics,
) -> anyhow::Result<tokio::task::JoinHandle<()>> {
    use infrasim_cloud::{Cloud, CloudConfig};
    use infrasim_controllers::{crds, Context, Selection};
    let identity = infrasim_kube_api::Identity {
        user: "system:infrasim-controllers".into(),
        groups: vec!["system:masters".into()],
    };
    // The controllers' requests, counted as client-go counts a controller's, under the
    // plane's address (which they reach in process, not over it).
    use infrasim_controllers::runtime::{client_metrics::ClientMetrics, prometheus};
    let counted = ClientMetrics::register(requests.registry());
    let host = server_url.trim_start_matches("https://");
    let client = kube::Client::new(
        counted.count(host, server.local_service(identity)),
        "default",
    );
    let selection = Selection {
        inmemory: args.inmemory,
        namespace: None,
        capi_core: args.capi_core == "embedded",
        vcsim: args.vcsim,
        vmgroup: args.vmgroup,
        sip: args.sip,
        v1beta1: true,
        reach: Default::default(),
        capv_node_anti_affinity: args.capv_node_anti_affinity,
        state_metrics: args.state_metrics,
        part: Default::default(),
    };
    use infrasim_controllers::capi::admission;
    admission::serve_in(server, client.clone(), selection.capi_core);
    crds::install(&client, &selection.crds())
        .await
        .context("installing the controllers' CRDs")?;
    // The embedded core defaults and validates as Cluster API's webhooks do; with Cluster
    // API's own core, its webhooks decide, and any configuration of ours left by an earlier
    // run goes.
    if selection.capi_core {
        admission::install(&client, &selection.reach)
            .await
            .context("registering the embedded core's admission webhooks")?;
    } else {
        admission::uninstall(&client)
            .await
            .context("removing the embedded core's admission webhooks")?;
    }
    let config = CloudConfig {
        advertise: args.advertise_address,
        ports: args.port_min..=args.port_max,
        watch_window: args.cluster_watch_window.max(1),
        metrics: Some(requests.clone()),
        homes: None,
    };
    let cloud = if args.ephemeral {
        Cloud::with_clock(config, clock.clone())
    } else {
        open_cloud(config, &data_dir.join(CLUSTERS_DIR), clock.clone()).await?
    };
    let cloud = Arc::new(cloud);
    println!(
        "controllers: {}; workload endpoints on {}:{}-{}",
        selection.describe(),
        args.advertise_address,
        args.port_min,
        args.port_max
    );
    Ok(tokio::spawn(infrasim_controllers::run(
        Context::new(client, cloud, clock)
            .with_metrics(prometheus::ControllerMetrics::register(requests.registry())),
        selection,
    )))
}
