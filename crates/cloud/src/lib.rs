//! Simulated workload clusters: each one a resource group served by the `kube-api` engine on
//! its own control-plane endpoint (a port from a range, on loopback unless told otherwise),
//! with its own PKI, brought up machine by machine as kubeadm would (see `machines`), and kept
//! alive by kube-controller-manager, kube-scheduler and kubelets in miniature (see
//! [`workloads`]).
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use infrasim_cloud::{Cloud, CloudConfig, ClusterShape, MachineBehaviour};
//! use std::time::Duration;
//!
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
//!
//! // Grow it by a worker that takes 2 s (+ up to 50%) per step, then shrink it again.
//! let slow = MachineBehaviour::uniform(Duration::from_secs(2), 0.5);
//! cloud.add_machine("c1", "c1-worker-2", false, slow).await?;
//! cloud.remove_machine("c1", "c1-worker-2");
//! # Ok(()) }
//! ```

mod bootstrap;
pub mod components;
mod create;
pub mod etcd;
mod faults;
mod homes;
mod machines;
mod pki;
pub mod portforward;
mod records;
mod serving;
mod sni;
pub mod workloads;

pub use bootstrap::{
    node_names, single_node, ClusterShape, Machine, MachineBehaviour, Provisioning, ADDON_PHASES,
    API_SERVER_PHASE, CONTROL_PLANE_PHASES, WORKER_PHASES,
};
pub use faults::{BootFault, ClusterFault};
pub use homes::Admits;
pub use machines::Progress;
pub use pki::{CertAndKey, ClusterPki, SuppliedPki};
pub use sni::{server_name, SNI_SUFFIX};
pub use workloads::WorkloadConfig;

use futures::future::BoxFuture;
use infrasim_clock::{SharedClock, SystemClock};
use infrasim_etcd_sim::EtcdCluster;
use infrasim_kube_api::pki::PkiError;
use infrasim_kube_api::ServeError;
use infrasim_store::{FreshWindow, Store, StoreConfig, StoreError};
use std::collections::{BTreeSet, HashMap};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::ops::RangeInclusive;
use std::sync::{Arc, Mutex};
use thiserror::Error;
use tokio::sync::oneshot;

/// Why a cluster could not be created.
#[derive(Debug, Error)]
pub enum CloudError {
    #[error("cluster {0:?} already exists")]
    Exists(String),
    #[error("no cluster {0:?}")]
    NoCluster(String),
    #[error("machine {0:?} already exists")]
    MachineExists(String),
    #[error("no free port in {0:?}")]
    NoPort(RangeInclusive<u16>),
    #[error("port {0} is taken or outside the endpoint range")]
    PortTaken(u16),
    #[error(transparent)]
    Pki(#[from] PkiError),
    #[error(transparent)]
    Serve(#[from] ServeError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("the clusters' home {home:?} cannot be taken up: {why}")]
    Home { home: String, why: String },
    #[error("cluster {cluster:?} could not be restored: {source}")]
    Restore {
        cluster: String,
        source: Box<CloudError>,
    },
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
    /// Where the clusters' API servers count their requests (each under its cluster's
    /// name); `None` counts nothing.
    pub metrics: Option<infrasim_kube_api::RequestMetrics>,
    /// Where a process hosting shards of a fleet keeps each shard's clusters: one durable
    /// store per shard in a directory of its own below this one, which every process of the
    /// fleet reaches, opened while the shard is held (see [`Cloud::take_up_home`]). `None`:
    /// a shard taken over is made again from the management objects.
    pub homes: Option<std::path::PathBuf>,
}

/// The events a workload cluster's watcher may fall behind by before it is cut off and
/// resumes from the window, with no gap (the window keeps 75 s of them).
const WATCHER_BUFFER: usize = 64;

impl CloudConfig {
    /// The configuration of a store to hold this cloud's clusters (see [`Cloud::open`]).
    pub fn store_config(&self) -> StoreConfig {
        StoreConfig {
            watch_window: self.watch_window,
            // How many events a watcher may have waiting before it is cut off; it then
            // resumes from the window (which keeps 75 s of them) with no gap. A slot holds
            // on to its last event's shell (about 136 bytes with the slot; the objects are
            // the window's to keep), so a buffer as long as `up`'s window (1,024 slots) would
            // hold about 140 KB of every cluster; one longer than the window gains nothing.
            watcher_buffer: self.watch_window.clamp(16, WATCHER_BUFFER),
            // Thousands of clusters of the same objects, read far less than the plane's:
            // packed, about a tenth of their size (see infrasim_store's `packing`).
            packed: true,
            // An idle cluster still writes (its kubelets renew their Leases every 10 s): a
            // window of the last events however old grew to `watch_window` versions of its
            // Leases. kube-apiserver keeps 75 s of them, and so does each cluster here.
            fresh: Some(FreshWindow::KUBE_APISERVER),
        }
    }
}

impl Default for CloudConfig {
    fn default() -> Self {
        CloudConfig {
            advertise: IpAddr::V4(Ipv4Addr::LOCALHOST),
            ports: 20000..=24000,
            watch_window: 1000,
            metrics: None,
            homes: None,
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
    /// The same credentials through the shared listener (`tls-server-name` picks the
    /// cluster), when the cloud has one.
    pub shared_kubeconfig: Option<String>,
    pub nodes: usize,
}

struct Running {
    info: ClusterInfo,
    pki: ClusterPki,
    /// The admin's client certificate (the shared listener's kubeconfig is made with it).
    admin: infrasim_kube_api::pki::KeyedCert,
    runtime: Arc<machines::Runtime>,
    /// Where its objects and records live.
    home: Arc<homes::Home>,
    /// Which of its nodes' kubelets are stopped (a `NodeNotReady` fault).
    kubelets: workloads::KubeletSwitch,
    /// Dropping it stops the cluster's controllers.
    _stop_workloads: oneshot::Sender<()>,
}

/// Many clusters in one process.
pub struct Cloud {
    config: CloudConfig,
    clock: SharedClock,
    /// The cloud's own store and records (see [`records`]): every cluster's but those of
    /// the `homes` taken up.
    own: Arc<homes::Home>,
    /// The homes of the shards this process holds (see [`homes`]).
    homes: Mutex<Vec<Arc<homes::Home>>>,
    /// The homes set down here, by name, with the clusters each admits.
    set_down: Mutex<Vec<(String, homes::SharedAdmits)>>,
    clusters: Mutex<HashMap<String, Running>>,
    /// Clusters being created (see [`create::Pending`]).
    creating: Mutex<BTreeSet<String>>,
    ports: Mutex<BTreeSet<u16>>,
    /// Endpoints reserved for clusters not created yet (Cluster API's infrastructure cluster
    /// takes its endpoint before the control plane has certificates): bound, not served.
    reserved: Mutex<HashMap<String, tokio::net::TcpListener>>,
    router: Arc<sni::Router>,
    shared: Mutex<Option<SocketAddr>>,
    /// The next cluster's number (see [`machines::RuntimeConfig::cluster_index`]).
    next_index: std::sync::atomic::AtomicU32,
    /// The faults put on clusters, kept apart from the running clusters so that a cluster
    /// created or brought back later starts with its own (see [`faults`]).
    /// Shared with each running cluster, which reads its own faults as its parts come up.
    faults: Arc<Mutex<faults::FaultBook>>,
    /// The clusters whose faults change, as they change (see [`Cloud::fault_changes`]).
    fault_changes: tokio::sync::broadcast::Sender<String>,
}

/// An etcd alarm a fault raises: on the member of that name, or on every member.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct EtcdAlarm {
    pub member: Option<String>,
    pub alarm: infrasim_etcd_sim::pb::etcdserverpb::AlarmType,
}

impl Cloud {
    pub fn new(config: CloudConfig) -> Self {
        Self::with_clock(config, SystemClock::shared())
    }

    /// A cloud whose startup delays and timestamps read `clock` (tests pass a fake one),
    /// holding its clusters in memory.
    pub fn with_clock(config: CloudConfig, clock: SharedClock) -> Self {
        let store = Store::new(
            config.store_config(),
            clock.clone(),
            Arc::new(infrasim_store::MemoryBackend),
        );
        Self::on_store(config, clock, store)
    }

    /// A cloud over `store` (opened with [`CloudConfig::store_config`]), bringing back the
    /// clusters it holds from an earlier run: each at its endpoint, with its PKI, objects,
    /// resourceVersions, machines (steps done stay done) and etcd members, and goes on with
    /// what was left of their startup. A cluster whose port another program took stops the
    /// opening, naming it; nothing kept is changed.
    // Boxed: callers in other crates link this state machine instead of compiling it
    // again (docs/contributing.md: "A public async function another crate awaits").
    #[inline(never)]
    pub fn open(
        config: CloudConfig,
        clock: SharedClock,
        store: Store,
    ) -> BoxFuture<'static, Result<Self, CloudError>> {
        Box::pin(Self::open_inner(config, clock, store))
    }

    async fn open_inner(
        config: CloudConfig,
        clock: SharedClock,
        store: Store,
    ) -> Result<Self, CloudError> {
        let cloud = Self::on_store(config, clock, store);
        cloud.restore_home(&cloud.own).await?;
        Ok(cloud)
    }

    fn on_store(config: CloudConfig, clock: SharedClock, store: Store) -> Self {
        Cloud {
            config,
            clock,
            own: Arc::new(homes::Home::own(store)),
            homes: Mutex::default(),
            set_down: Mutex::default(),
            clusters: Mutex::new(HashMap::new()),
            creating: Mutex::new(BTreeSet::new()),
            ports: Mutex::new(BTreeSet::new()),
            reserved: Mutex::new(HashMap::new()),
            router: Arc::new(sni::Router::default()),
            shared: Mutex::new(None),
            next_index: std::sync::atomic::AtomicU32::new(0),
            faults: Arc::default(),
            fault_changes: tokio::sync::broadcast::channel(1024).0,
        }
    }

    /// Opens the shared listener on `port` of the advertise address (0: any free port):
    /// every cluster is then also reachable there by TLS server name
    /// ([`server_name`]). Clusters created afterwards get a `shared_kubeconfig`.
    // Boxed: callers in other crates link this state machine instead of compiling it
    // again (docs/contributing.md: "A public async function another crate awaits").
    #[inline(never)]
    pub fn listen_shared<'a>(&'a self, port: u16) -> BoxFuture<'a, Result<SocketAddr, CloudError>> {
        Box::pin(self.listen_shared_inner(port))
    }

    async fn listen_shared_inner(&self, port: u16) -> Result<SocketAddr, CloudError> {
        let listener = tokio::net::TcpListener::bind(SocketAddr::new(self.config.advertise, port))
            .await
            .map_err(ServeError::from)?;
        let addr = listener.local_addr().map_err(ServeError::from)?;
        tokio::spawn(self.router.clone().serve(listener));
        *self.shared.lock().unwrap_or_else(|p| p.into_inner()) = Some(addr);
        // Clusters already running (restored ones) are reachable there too.
        for running in self.lock_clusters().values_mut() {
            running.info = self.cluster_info(
                &running.info.name.clone(),
                running.info.nodes,
                running.info.endpoint,
                &running.pki,
                &running.admin,
            );
        }
        Ok(addr)
    }

    /// The address endpoints listen on and clients are told.
    pub fn advertise_address(&self) -> IpAddr {
        self.config.advertise
    }

    /// Reserves an endpoint for cluster `name` before it is created: `port` if given (a
    /// cluster coming back after a restart keeps its endpoint) or the lowest free one. The
    /// endpoint of a reserved or running cluster is returned as it is.
    // Boxed: callers in other crates link this state machine instead of compiling it
    // again (docs/contributing.md: "A public async function another crate awaits").
    #[inline(never)]
    pub fn reserve_endpoint<'a>(
        &'a self,
        name: &'a str,
        port: Option<u16>,
    ) -> BoxFuture<'a, Result<SocketAddr, CloudError>> {
        Box::pin(self.reserve_endpoint_inner(name, port))
    }

    async fn reserve_endpoint_inner(
        &self,
        name: &str,
        port: Option<u16>,
    ) -> Result<SocketAddr, CloudError> {
        if let Some(info) = self.with_cluster(name, |r| r.info.endpoint) {
            return Ok(info);
        }
        if let Some(addr) = self
            .reserved
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(name)
            .and_then(|l| l.local_addr().ok())
        {
            return Ok(addr);
        }
        let listener = match port {
            Some(port) => self.bind_port(port).await?,
            None => self.bind().await?,
        };
        let addr = listener.local_addr().map_err(ServeError::from)?;
        let mut reserved = self.reserved.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(other) = reserved.get(name).and_then(|l| l.local_addr().ok()) {
            // Reserved meanwhile by a concurrent call: keep that one.
            self.free_port(addr.port());
            return Ok(other);
        }
        reserved.insert(name.to_string(), listener);
        Ok(addr)
    }

    /// Gives up an endpoint reserved for a cluster that was never created.
    pub fn release_endpoint(&self, name: &str) -> bool {
        let released = self
            .reserved
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(name);
        match released.and_then(|l| l.local_addr().ok()) {
            Some(addr) => {
                self.free_port(addr.port());
                true
            }
            None => false,
        }
    }

    fn lock_clusters(&self) -> std::sync::MutexGuard<'_, HashMap<String, Running>> {
        self.clusters.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn lock_creating(&self) -> std::sync::MutexGuard<'_, BTreeSet<String>> {
        self.creating.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn lock_reserved(&self) -> std::sync::MutexGuard<'_, HashMap<String, tokio::net::TcpListener>> {
        self.reserved.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn free_port(&self, port: u16) {
        self.ports
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&port);
    }

    /// Binds `port` of the advertise address, which must be in the cloud's range and free.
    async fn bind_port(&self, port: u16) -> Result<tokio::net::TcpListener, CloudError> {
        if !self.config.ports.contains(&port)
            || !self
                .ports
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(port)
        {
            return Err(CloudError::PortTaken(port));
        }
        match tokio::net::TcpListener::bind(SocketAddr::new(self.config.advertise, port)).await {
            Ok(l) => Ok(l),
            Err(_) => {
                self.free_port(port);
                Err(CloudError::PortTaken(port))
            }
        }
    }

    /// Binds the lowest free port of the range (skipping ports other programs hold).
    async fn bind(&self) -> Result<tokio::net::TcpListener, CloudError> {
        let mut from = *self.config.ports.start();
        while let Some(port) = self.reserve_lowest_free(from) {
            match tokio::net::TcpListener::bind(SocketAddr::new(self.config.advertise, port)).await
            {
                Ok(l) => return Ok(l),
                Err(_) => {
                    self.free_port(port);
                    match port.checked_add(1) {
                        Some(next) => from = next,
                        None => break,
                    }
                }
            }
        }
        Err(CloudError::NoPort(self.config.ports.clone()))
    }

    /// Reserves the lowest port of the range from `from` on that no cluster holds. One walk
    /// of the taken ports in order, under one lock: at ten thousand clusters a port-by-port
    /// probe took a lock ten thousand times per cluster created.
    fn reserve_lowest_free(&self, from: u16) -> Option<u16> {
        let end = *self.config.ports.end();
        let mut taken = self.ports.lock().unwrap_or_else(|p| p.into_inner());
        let mut candidate = from;
        for &port in taken.range(from..) {
            if port != candidate {
                break;
            }
            candidate = port.checked_add(1)?;
        }
        if candidate > end {
            return None;
        }
        taken.insert(candidate);
        Some(candidate)
    }

    /// Reads something of a running cluster, under the registry lock.
    fn with_cluster<T>(&self, name: &str, read: impl FnOnce(&Running) -> T) -> Option<T> {
        self.clusters
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(name)
            .map(read)
    }

    fn runtime(&self, name: &str) -> Option<Arc<machines::Runtime>> {
        self.with_cluster(name, |r| r.runtime.clone())
    }

    /// Puts `fault` in force on cluster `name` on behalf of `source` (a Fault object),
    /// replacing what that source put there before; an empty fault clears the source's.
    /// It takes effect now if the cluster runs, and on any cluster of that name made or
    /// brought back later. The sources' faults add up ([`ClusterFault::combine`]):
    /// - requests wait the sum of the latencies and fail at the largest error fraction;
    /// - a stopped kubelet renews no Lease and reports nothing, so after
    ///   [`workloads::NODE_MONITOR_GRACE`] its node turns Ready `Unknown` and is tainted
    ///   unreachable, as kube-controller-manager's node lifecycle controller does;
    /// - etcd alarms are raised (etcdctl lists them, etcd refuses what they refuse: see
    ///   [`infrasim_etcd_sim`]'s KV service), on members that join while they are in force
    ///   too;
    /// - an endpoint held down refuses connections (the port stays the cluster's) and the
    ///   shared listener does not route to it, as when every API server is down;
    /// - a deleted node's Node object (and its Lease) is deleted, as a cloud controller
    ///   manager deletes the Node of a vanished machine, and its kubelet is silent; when the
    ///   fault ends, the kubelet registers the Node again, as a restarted kubelet does;
    /// - an etcd member down answers nothing (a port-forward to its pod is refused), and
    ///   leadership moves off it while a majority is up; without one, etcd has no leader and
    ///   refuses what needs one, and the API server's writes time out. A member or a node
    ///   named before it exists meets the fault when it comes up (it joins down, it does not
    ///   register);
    /// - a boot fault is read by whoever boots the cluster's machines ([`Cloud::faults`]).
    pub fn set_fault(&self, name: &str, source: &str, fault: ClusterFault) {
        let (before, now) = faults::open(&self.faults).set(name, source, fault);
        if before != now {
            // Nobody listening is no error: the change is in the book for whoever asks.
            let _ = self.fault_changes.send(name.to_string());
        }
        let Some((runtime, kubelets)) =
            self.with_cluster(name, |r| (r.runtime.clone(), r.kubelets.clone()))
        else {
            return;
        };
        for member in now.etcd_members_down.difference(&before.etcd_members_down) {
            runtime.etcd.set_member_down(member, true);
        }
        for member in before.etcd_members_down.difference(&now.etcd_members_down) {
            runtime.etcd.set_member_down(member, false);
        }
        let quorum = runtime.etcd.has_quorum();
        runtime.server.faults().set(now.server_fault(quorum));
        kubelets.set(now.silent_kubelets());
        for node in now.deleted_nodes.difference(&before.deleted_nodes) {
            runtime.delete_node(node);
        }
        for node in before.deleted_nodes.difference(&now.deleted_nodes) {
            runtime.register_node(node);
        }
        runtime.set_endpoint_down(now.endpoint_down);
        runtime
            .serving
            .set_expiring(now.expiring_certificates.clone());
        for gone in before.etcd_alarms.difference(&now.etcd_alarms) {
            runtime
                .etcd
                .set_alarm(gone.member.as_deref(), gone.alarm, false);
        }
        for alarm in &now.etcd_alarms {
            runtime
                .etcd
                .set_alarm(alarm.member.as_deref(), alarm.alarm, true);
        }
    }

    /// The names of the clusters whose faults change from now on, one per change: what a
    /// controller that shows a fault where a real cluster would (a control plane's etcd
    /// health) follows, since nothing in the management plane changes with it.
    pub fn fault_changes(&self) -> tokio::sync::broadcast::Receiver<String> {
        self.fault_changes.subscribe()
    }

    /// The faults in force on cluster `name`, all sources together.
    pub fn faults(&self, name: &str) -> ClusterFault {
        faults::open(&self.faults).of(name)
    }

    /// The store group a simulated vCenter named `key` keeps itself in (see
    /// `infrasim_vsphere_sim::persist`): a group of its own in the cloud's own store, beside
    /// the clusters, when that store outlives the process; `None` otherwise (a simulator
    /// kept in memory would only hold its objects twice).
    pub fn simulator_group(&self, key: &str) -> Option<Arc<infrasim_store::Group>> {
        let store = &self.own.store;
        store
            .keeps()
            .then(|| store.group_or_create(&simulator_group_name(key)))
    }

    /// Forgets what a simulated vCenter named `key` kept (it was deleted).
    pub fn forget_simulator(&self, key: &str) {
        let _ = self.own.store.drop_group(&simulator_group_name(key));
    }

    /// A running cluster's store group: what its API server serves, for readers in this
    /// process that would otherwise reach it through its endpoint (the controllers' cluster
    /// cache follows Nodes here rather than holding a watch connection per cluster).
    pub fn group(&self, name: &str) -> Option<Arc<infrasim_store::Group>> {
        self.with_cluster(name, |r| r.runtime.group.clone())
    }

    /// When the serving certificate of `node`'s API server in cluster `name` expires (what
    /// KubeadmControlPlane reads into a Machine's `certificatesExpiryDate`); `None` when the
    /// cluster does not run here.
    pub fn api_server_certificate_expiry(
        &self,
        name: &str,
        node: &str,
    ) -> Option<chrono::DateTime<chrono::Utc>> {
        self.with_cluster(name, |r| r.runtime.serving.expiry(node))
    }

    /// A cluster's etcd (its members follow the control-plane machines).
    pub fn etcd(&self, name: &str) -> Option<EtcdCluster> {
        self.with_cluster(name, |r| r.runtime.etcd.clone())
    }

    /// A cluster's certificate authorities and service-account key (what Cluster API keeps
    /// in the cluster's secrets).
    pub fn pki(&self, name: &str) -> Option<ClusterPki> {
        self.with_cluster(name, |r| r.pki.clone())
    }

    /// How far a cluster has come up: steps done of all its machines' and addons' steps.
    pub fn progress(&self, name: &str) -> Option<Progress> {
        Some(self.runtime(name)?.progress())
    }

    /// A cluster's machines, in creation order, with the steps each has done.
    pub fn machines(&self, name: &str) -> Option<Vec<(Machine, usize)>> {
        Some(self.runtime(name)?.machines())
    }

    /// Adds a machine to a cluster (a control-plane machine joins the control plane) and
    /// brings it up step by step, as `kubeadm join` would.
    // Boxed: callers in other crates link this state machine instead of compiling it
    // again (docs/contributing.md: "A public async function another crate awaits").
    #[inline(never)]
    pub fn add_machine<'a>(
        &'a self,
        cluster: &'a str,
        machine: &'a str,
        control_plane: bool,
        behaviour: MachineBehaviour,
    ) -> BoxFuture<'a, Result<Machine, CloudError>> {
        Box::pin(self.add_machine_inner(cluster, machine, control_plane, behaviour))
    }

    async fn add_machine_inner(
        &self,
        cluster: &str,
        machine: &str,
        control_plane: bool,
        behaviour: MachineBehaviour,
    ) -> Result<Machine, CloudError> {
        let runtime = self
            .runtime(cluster)
            .ok_or_else(|| CloudError::NoCluster(cluster.to_string()))?;
        durably(runtime.add_machine(machine, control_plane, behaviour)).await
    }

    /// Does step `step` of a machine now (see [`CONTROL_PLANE_PHASES`] and
    /// [`WORKER_PHASES`]), registering the machine on its first step; a step already done is
    /// left alone. For controllers that time the steps themselves, as Cluster API's
    /// in-memory provider does. Returns how many of its steps the machine has done.
    // Boxed: callers in other crates link this state machine instead of compiling it
    // again (docs/contributing.md: "A public async function another crate awaits").
    #[inline(never)]
    pub fn run_machine_step<'a>(
        &'a self,
        cluster: &'a str,
        machine: &'a str,
        control_plane: bool,
        kubernetes_version: Option<&'a str>,
        step: usize,
    ) -> BoxFuture<'a, Result<usize, CloudError>> {
        Box::pin(self.run_machine_step_inner(
            cluster,
            machine,
            control_plane,
            kubernetes_version,
            step,
        ))
    }

    async fn run_machine_step_inner(
        &self,
        cluster: &str,
        machine: &str,
        control_plane: bool,
        kubernetes_version: Option<&str>,
        step: usize,
    ) -> Result<usize, CloudError> {
        let runtime = self
            .runtime(cluster)
            .ok_or_else(|| CloudError::NoCluster(cluster.to_string()))?;
        durably(runtime.run_step(machine, control_plane, kubernetes_version, step)).await
    }

    /// Registers a machine before its first step (see [`Cloud::run_machine_step`]) so that
    /// its Node carries `provider_id`; a machine already registered is left as it is.
    // Boxed: callers in other crates link this state machine instead of compiling it
    // again (docs/contributing.md: "A public async function another crate awaits").
    #[inline(never)]
    pub fn register_machine<'a>(
        &'a self,
        cluster: &'a str,
        machine: &'a str,
        control_plane: bool,
        provider_id: &'a str,
    ) -> BoxFuture<'a, Result<(), CloudError>> {
        Box::pin(self.register_machine_inner(cluster, machine, control_plane, provider_id))
    }

    async fn register_machine_inner(
        &self,
        cluster: &str,
        machine: &str,
        control_plane: bool,
        provider_id: &str,
    ) -> Result<(), CloudError> {
        let runtime = self
            .runtime(cluster)
            .ok_or_else(|| CloudError::NoCluster(cluster.to_string()))?;
        durably(async {
            runtime.register_with_provider_id(machine, control_plane, provider_id);
            Ok(())
        })
        .await
    }

    /// The InternalIP of a machine's node (fixed when the machine is registered).
    pub fn machine_address(&self, cluster: &str, machine: &str) -> Option<String> {
        let runtime = self.runtime(cluster)?;
        let index = runtime.cluster_index;
        runtime
            .machines()
            .into_iter()
            .find(|(m, _)| m.name == machine)
            .map(|(m, _)| bootstrap::machine_ip(index, &m))
    }

    /// How users reach running cluster `name`.
    pub fn cluster(&self, name: &str) -> Option<ClusterInfo> {
        self.with_cluster(name, |r| r.info.clone())
    }

    /// Whether cluster `name` exists.
    pub fn has_cluster(&self, name: &str) -> bool {
        self.with_cluster(name, |_| ()).is_some()
    }

    /// The endpoint of a running cluster, or the one reserved for it.
    pub fn endpoint(&self, name: &str) -> Option<SocketAddr> {
        self.with_cluster(name, |r| r.info.endpoint).or_else(|| {
            self.reserved
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .get(name)
                .and_then(|l| l.local_addr().ok())
        })
    }

    /// Removes a machine from a cluster, undoing its steps in reverse; the endpoint closes
    /// with the last API server. `false` if there is no such machine. Answers once the
    /// removal is durable (an error if it could not be stored).
    // Boxed: callers in other crates link this state machine instead of compiling it
    // again (docs/contributing.md: "A public async function another crate awaits").
    #[inline(never)]
    pub fn remove_machine<'a>(
        &'a self,
        cluster: &'a str,
        machine: &'a str,
    ) -> BoxFuture<'a, Result<bool, CloudError>> {
        Box::pin(self.remove_machine_inner(cluster, machine))
    }

    async fn remove_machine_inner(&self, cluster: &str, machine: &str) -> Result<bool, CloudError> {
        let Some(runtime) = self.runtime(cluster) else {
            return Ok(false);
        };
        durably(async { Ok(runtime.remove_machine(machine)) }).await
    }

    /// Whether a cluster is up: every bootstrap phase done and every Deployment and DaemonSet
    /// of `kube-system` (CoreDNS, kube-proxy) fully available.
    pub fn ready(&self, name: &str) -> bool {
        // Read outside the registry lock: decoding the workloads must not hold up every
        // other cluster's calls.
        let Some(runtime) = self.runtime(name) else {
            return false;
        };
        if !runtime.progress().complete() {
            return false;
        }
        let available = |resource: &str| {
            runtime
                .group
                .snapshot(resource, infrasim_store::ReadAt::Latest)
                .map(|s| {
                    s.objects.values().all(|o| {
                        if &*o.meta.namespace != "kube-system" {
                            return true;
                        }
                        serde_json::from_slice::<Rollout>(&o.bytes())
                            .is_ok_and(|r| r.complete(o.meta.generation))
                    })
                })
                .unwrap_or(false)
        };
        available("deployments.apps") && available("daemonsets.apps")
    }

    /// Stops serving a cluster and drops its objects; its port becomes free again (as does
    /// an endpoint only reserved for it). Answers once the cluster is forgotten for good.
    // Boxed: callers in other crates link this state machine instead of compiling it
    // again (docs/contributing.md: "A public async function another crate awaits").
    #[inline(never)]
    pub fn delete_cluster<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<bool, CloudError>> {
        Box::pin(self.delete_cluster_inner(name))
    }

    async fn delete_cluster_inner(&self, name: &str) -> Result<bool, CloudError> {
        let released = self.release_endpoint(name);
        let deleted = durably(async { Ok(self.delete_running(name)) }).await?;
        Ok(deleted || released)
    }

    fn delete_running(&self, name: &str) -> bool {
        let removed = self
            .clusters
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(name);
        match removed {
            Some(r) => {
                r.runtime.shutdown();
                self.ports
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .remove(&r.info.endpoint.port());
                let _ = r.home.store.drop_group(&create::group_name(name));
                // Forgotten last, as a machine is (see `Runtime::remove_machine`).
                r.home.records.delete_cluster(name);
                true
            }
            None => false,
        }
    }

    /// The names of the clusters this cloud runs or holds an endpoint for, sorted.
    pub fn hosted(&self) -> Vec<String> {
        let mut all: BTreeSet<String> = self.lock_clusters().keys().cloned().collect();
        all.extend(
            self.reserved
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .keys()
                .cloned(),
        );
        all.into_iter().collect()
    }

    /// Whether an endpoint at `host:port` can be served here: `host` is the address this
    /// cloud advertises and `port` is in its range. A cluster whose recorded endpoint is not
    /// (one taken over from a process on another range or machine) needs a new one.
    pub fn can_serve(&self, host: &str, port: u16) -> bool {
        host.parse::<IpAddr>()
            .is_ok_and(|ip| ip == self.config.advertise)
            && self.config.ports.contains(&port)
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

/// A shared cloud.
pub type SharedCloud = Arc<Cloud>;

/// The group of a simulated vCenter: apart from the clusters' (whose names are theirs).
fn simulator_group_name(key: &str) -> String {
    format!("vcsim/{key}")
}

/// Runs `work`, answering once the writes it made are durable: a caller told a machine's step
/// is done (and records so in its own store) can count on it after a crash.
async fn durably<T>(
    work: impl std::future::Future<Output = Result<T, CloudError>>,
) -> Result<T, CloudError> {
    let (out, writes) = infrasim_store::durability::scope(work).await;
    writes.wait().await?;
    out
}

/// What [`Cloud::ready`] reads of a Deployment or a DaemonSet: only these fields are decoded
/// (the readiness poll reads every addon of every cluster, and decoding whole objects into
/// JSON values was most of its cost).
#[derive(serde::Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct Rollout {
    spec: RolloutSpec,
    status: RolloutStatus,
}

#[derive(serde::Deserialize, Default)]
#[serde(default)]
struct RolloutSpec {
    replicas: Option<i64>,
}

#[derive(serde::Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct RolloutStatus {
    observed_generation: Option<i64>,
    available_replicas: Option<i64>,
    desired_number_scheduled: Option<i64>,
    number_available: Option<i64>,
}

impl Rollout {
    /// Every replica (of a Deployment) or scheduled pod (of a DaemonSet) available, and the
    /// status about the object's `generation`.
    fn complete(&self, generation: i64) -> bool {
        let status = &self.status;
        let (want, have) = match status.desired_number_scheduled {
            Some(desired) => (desired, status.number_available),
            None => (self.spec.replicas.unwrap_or(1), status.available_replicas),
        };
        have.unwrap_or(0) >= want && status.observed_generation.unwrap_or(0) >= generation
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lowest_free_port_of_the_range_is_reserved() {
        let cloud = Cloud::new(CloudConfig {
            ports: 100..=103,
            ..CloudConfig::default()
        });
        assert_eq!(cloud.reserve_lowest_free(100), Some(100));
        assert_eq!(cloud.reserve_lowest_free(100), Some(101));
        cloud.free_port(100);
        assert_eq!(cloud.reserve_lowest_free(100), Some(100));
        // A port another program holds is skipped by starting past it.
        assert_eq!(cloud.reserve_lowest_free(103), Some(103));
        assert_eq!(cloud.reserve_lowest_free(100), Some(102));
        assert_eq!(cloud.reserve_lowest_free(100), None);
        assert_eq!(cloud.reserve_lowest_free(104), None);
    }
}
