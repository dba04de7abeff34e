//! Simulated workload clusters: each one a resource group served by the `kube-api` engine on
//! its own control-plane endpoint (a port from a range, on loopback unless told otherwise),
//! with its own PKI, brought up as kubeadm leaves a cluster.
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use infrasim_cloud::{Cloud, CloudConfig, ClusterShape};
//! let cloud = Cloud::new(CloudConfig::default());
//! let cluster = cloud
//!     .create_cluster(ClusterShape {
//!         name: "c1".into(),
//!         control_planes: 1,
//!         workers: 2,
//!         kubernetes_version: "v1.31.0".into(),
//!         ..ClusterShape::default()
//!     })
//!     .await?;
//! println!("{}", cluster.kubeconfig);
//! # Ok(()) }
//! ```

mod bootstrap;
pub mod workloads;

pub use bootstrap::{node_names, ClusterShape, API_SERVER_PHASE, PHASES};
pub use workloads::WorkloadConfig;

use infrasim_clock::{SharedClock, SystemClock};
use infrasim_kube_api::kubeconfig::{self, KubeconfigSpec};
use infrasim_kube_api::pki::{CertificateAuthority, PkiError};
use infrasim_kube_api::{ApiConfig, ApiServer, ServeError};
use infrasim_store::{Store, StoreConfig, StoreError};
use std::collections::{BTreeSet, HashMap};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::ops::RangeInclusive;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use thiserror::Error;
use tokio::sync::oneshot;

/// Why a cluster could not be created.
#[derive(Debug, Error)]
pub enum CloudError {
    #[error("cluster {0:?} already exists")]
    Exists(String),
    #[error("no free port in {0:?}")]
    NoPort(RangeInclusive<u16>),
    #[error(transparent)]
    Pki(#[from] PkiError),
    #[error(transparent)]
    Serve(#[from] ServeError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Where endpoints listen.
#[derive(Debug, Clone)]
pub struct CloudConfig {
    /// The address endpoints bind and advertise (loopback by default).
    pub advertise: IpAddr,
    /// The ports control-plane endpoints take, lowest free first.
    pub ports: RangeInclusive<u16>,
    /// Change events each cluster keeps for watch resumption.
    pub watch_window: usize,
}

impl Default for CloudConfig {
    fn default() -> Self {
        CloudConfig {
            advertise: IpAddr::V4(Ipv4Addr::LOCALHOST),
            ports: 20000..=24000,
            watch_window: 1000,
        }
    }
}

/// A running cluster, as its users reach it.
#[derive(Debug, Clone)]
pub struct ClusterInfo {
    pub name: String,
    pub endpoint: SocketAddr,
    /// An admin kubeconfig (client certificate signed by the cluster's own CA).
    pub kubeconfig: String,
    pub nodes: usize,
}

struct Running {
    info: ClusterInfo,
    /// Bootstrap phases completed (of `PHASES.len()`).
    progress: Arc<AtomicUsize>,
    group: Arc<infrasim_store::Group>,
    _stop: oneshot::Sender<()>,
    _stop_workloads: oneshot::Sender<()>,
}

/// Many clusters in one process.
pub struct Cloud {
    config: CloudConfig,
    clock: SharedClock,
    store: Store,
    clusters: Mutex<HashMap<String, Running>>,
    ports: Mutex<BTreeSet<u16>>,
}

impl Cloud {
    pub fn new(config: CloudConfig) -> Self {
        Self::with_clock(config, SystemClock::shared())
    }

    /// A cloud whose startup delays and timestamps read `clock` (tests pass a fake one).
    pub fn with_clock(config: CloudConfig, clock: SharedClock) -> Self {
        let store = Store::new(
            StoreConfig {
                watch_window: config.watch_window,
                watcher_buffer: 1024,
            },
            clock.clone(),
            Arc::new(infrasim_store::MemoryBackend),
        );
        Cloud {
            config,
            clock,
            store,
            clusters: Mutex::new(HashMap::new()),
            ports: Mutex::new(BTreeSet::new()),
        }
    }

    /// Binds the lowest free port of the range (skipping ports other programs hold).
    async fn bind(&self) -> Result<tokio::net::TcpListener, CloudError> {
        for port in self.config.ports.clone() {
            {
                let mut taken = self.ports.lock().unwrap_or_else(|p| p.into_inner());
                if taken.contains(&port) {
                    continue;
                }
                taken.insert(port);
            }
            match tokio::net::TcpListener::bind(SocketAddr::new(self.config.advertise, port)).await
            {
                Ok(l) => return Ok(l),
                Err(_) => {
                    self.ports
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .remove(&port);
                }
            }
        }
        Err(CloudError::NoPort(self.config.ports.clone()))
    }

    /// Creates, bootstraps and serves a cluster. With a zero `startup` it is up at once;
    /// otherwise it comes up phase by phase on the cloud's clock (see [`PHASES`]), and its
    /// endpoint opens with the API server phase.
    pub async fn create_cluster(&self, shape: ClusterShape) -> Result<ClusterInfo, CloudError> {
        if self
            .clusters
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains_key(&shape.name)
        {
            return Err(CloudError::Exists(shape.name));
        }
        let group = self
            .store
            .create_group(&format!("cluster/{}", shape.name))?;
        let ca = CertificateAuthority::generate(&format!("{}-ca", shape.name))?;
        let listener = self.bind().await?;
        let endpoint = listener.local_addr().map_err(ServeError::from)?;
        let index = self
            .clusters
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .len() as u32;
        let now = infrasim_store::format_time(self.clock.now());
        let server = ApiServer::new(
            group.clone(),
            ca.clone(),
            self.clock.clone(),
            ApiConfig {
                kubernetes_version: shape.kubernetes_version.clone(),
                ..ApiConfig::default()
            },
        );
        // The serving certificate carries the SANs kubeadm gives an API server.
        let dns: Vec<String> = [
            "localhost".to_string(),
            "kubernetes".into(),
            "kubernetes.default".into(),
            "kubernetes.default.svc".into(),
            "kubernetes.default.svc.cluster.local".into(),
        ]
        .into_iter()
        .chain(
            node_names(&shape)
                .into_iter()
                .filter(|(_, cp)| *cp)
                .map(|(n, _)| n),
        )
        .collect();
        let ips = vec![
            self.config.advertise,
            IpAddr::V4(Ipv4Addr::new(10, 96, 0, 1)),
        ];
        let serving = ca.serving_cert("kube-apiserver", &dns, &ips)?;
        let tls = server.tls_config(&serving)?;
        let (stop, stopped) = oneshot::channel::<()>();
        // kube-controller-manager, kube-scheduler and the kubelets, for this cluster.
        let (stop_workloads, workloads_stopped) = oneshot::channel::<()>();
        tokio::spawn(workloads::run(
            group.clone(),
            self.clock.clone(),
            shape.workloads.clone(),
            workloads_stopped,
        ));
        let progress = Arc::new(AtomicUsize::new(0));
        let objects = bootstrap::objects(&shape, index, &endpoint.to_string(), &ca.cert_pem, &now);
        if shape.startup.is_zero() {
            bootstrap::write_phase(&group, objects);
            progress.store(PHASES.len(), Ordering::SeqCst);
            tokio::spawn(server.serve(listener, tls, async move {
                let _ = stopped.await;
            }));
        } else {
            // Until the API server phase, connections are refused, as with a real endpoint.
            drop(listener);
            tokio::spawn(run_phases(Phased {
                phases: bootstrap::phases(objects),
                group: group.clone(),
                server,
                tls,
                endpoint,
                clock: self.clock.clone(),
                startup: shape.startup,
                jitter: shape.jitter.max(0.0),
                progress: progress.clone(),
                stopped,
            }));
        }
        let admin = ca.client_cert("kubernetes-admin", &["system:masters"])?;
        let kubeconfig = kubeconfig::render(&KubeconfigSpec {
            cluster_name: &shape.name,
            user_name: &format!("{}-admin", shape.name),
            server: &format!("https://{endpoint}"),
            ca_pem: &ca.cert_pem,
            client_cert_pem: &admin.cert_pem,
            client_key_pem: &admin.key_pem,
            tls_server_name: None,
        });
        let info = ClusterInfo {
            name: shape.name.clone(),
            endpoint,
            kubeconfig,
            nodes: shape.control_planes + shape.workers,
        };
        self.clusters
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(
                shape.name.clone(),
                Running {
                    info: info.clone(),
                    progress,
                    group,
                    _stop: stop,
                    _stop_workloads: stop_workloads,
                },
            );
        Ok(info)
    }

    /// How many bootstrap phases a cluster has completed (of [`PHASES`]`.len()`).
    pub fn progress(&self, name: &str) -> Option<usize> {
        self.clusters
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(name)
            .map(|r| r.progress.load(Ordering::SeqCst))
    }

    /// Whether a cluster is up: every bootstrap phase done and every Deployment and DaemonSet
    /// of `kube-system` (CoreDNS, kube-proxy) fully available.
    pub fn ready(&self, name: &str) -> bool {
        let clusters = self.clusters.lock().unwrap_or_else(|p| p.into_inner());
        let Some(r) = clusters.get(name) else {
            return false;
        };
        if r.progress.load(Ordering::SeqCst) < PHASES.len() {
            return false;
        }
        let available = |resource: &str, want: &str, have: &str| {
            r.group
                .snapshot(resource, infrasim_store::ReadAt::Latest)
                .map(|s| {
                    s.objects.values().all(|o| {
                        if &*o.meta.namespace != "kube-system" {
                            return true;
                        }
                        let Ok(v) = o.to_value() else { return false };
                        let get = |p: &str| v.pointer(p).and_then(serde_json::Value::as_i64);
                        let want = get(want).unwrap_or(1);
                        get(have).unwrap_or(0) >= want
                            && get("/status/observedGeneration") >= get("/metadata/generation")
                    })
                })
                .unwrap_or(false)
        };
        available(
            "deployments.apps",
            "/spec/replicas",
            "/status/availableReplicas",
        ) && available(
            "daemonsets.apps",
            "/status/desiredNumberScheduled",
            "/status/numberAvailable",
        )
    }

    /// Stops serving a cluster and drops its objects; its port becomes free again.
    pub fn delete_cluster(&self, name: &str) -> bool {
        let removed = self
            .clusters
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(name);
        match removed {
            Some(r) => {
                self.ports
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .remove(&r.info.endpoint.port());
                let _ = self.store.drop_group(&format!("cluster/{name}"));
                true
            }
            None => false,
        }
    }

    /// The running clusters, by name.
    pub fn clusters(&self) -> Vec<ClusterInfo> {
        let mut all: Vec<ClusterInfo> = self
            .clusters
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .map(|r| r.info.clone())
            .collect();
        all.sort_by(|a, b| a.name.cmp(&b.name));
        all
    }
}

/// What a phased bootstrap needs.
struct Phased {
    phases: Vec<Vec<(&'static str, serde_json::Value)>>,
    group: Arc<infrasim_store::Group>,
    server: ApiServer,
    tls: Arc<rustls::ServerConfig>,
    endpoint: SocketAddr,
    clock: SharedClock,
    startup: std::time::Duration,
    jitter: f64,
    progress: Arc<AtomicUsize>,
    stopped: oneshot::Receiver<()>,
}

/// Writes the phases one after another, each after `startup + rand·jitter·startup`, and
/// opens the endpoint with the API server phase. Ends (closing the endpoint) when the
/// cluster is deleted.
async fn run_phases(mut p: Phased) {
    let mut serving: Option<oneshot::Sender<()>> = None;
    let phases = std::mem::take(&mut p.phases);
    for (i, phase) in phases.into_iter().enumerate() {
        let delay = p.startup + p.startup.mul_f64(p.jitter * rand::random::<f64>());
        tokio::select! {
            _ = p.clock.sleep(delay) => {}
            _ = &mut p.stopped => return,
        }
        bootstrap::write_phase(&p.group, phase);
        if i == API_SERVER_PHASE {
            match tokio::net::TcpListener::bind(p.endpoint).await {
                Ok(listener) => {
                    let (tx, rx) = oneshot::channel::<()>();
                    tokio::spawn(p.server.clone().serve(listener, p.tls.clone(), async move {
                        let _ = rx.await;
                    }));
                    serving = Some(tx);
                }
                Err(e) => {
                    tracing::error!(endpoint = %p.endpoint, error = %e, "the endpoint could not be opened");
                    return;
                }
            }
        }
        p.progress.store(i + 1, Ordering::SeqCst);
    }
    let _ = (&mut p.stopped).await;
    drop(serving);
}

/// A shared cloud.
pub type SharedCloud = Arc<Cloud>;
