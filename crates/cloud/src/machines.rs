//! A cluster's machines coming and going, as kubeadm brings them up and Cluster API tears them
//! down.
//!
//! Each machine walks its own steps ([`CONTROL_PLANE_PHASES`] or [`WORKER_PHASES`]), each
//! after `startup + rand·jitter·startup` on the cloud's clock. The first control-plane machine
//! initializes the cluster; every other machine joins once an API server serves, as `kubeadm
//! join` needs one. The first API server opens the control-plane endpoint and starts the
//! addon steps ([`ADDON_PHASES`]); removing machines undoes their steps in reverse, and the
//! endpoint closes with the last API server.

use crate::bootstrap::{
    self, kubernetes_endpoints, machine_ip, Machine, MachineBehaviour, Provisioning, ADDON_PHASES,
    API_SERVER_PHASE, ETCD_PHASE, NODE_PHASE, STATIC_PODS,
};
use crate::faults::{ClusterFault, InForce};
use crate::records::{ClusterRecord, MachineRecord, Records};
use crate::serving::ServingCertificates;
use crate::sni::Router;
use crate::{CloudError, ClusterShape};
use infrasim_clock::SharedClock;
use infrasim_etcd_sim::EtcdCluster;
use infrasim_kube_api::ApiServer;
use infrasim_store::durability;
use infrasim_store::{Group, ObjectKey};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::{oneshot, watch};

/// How far a cluster has come up: steps done of all its machines' and addons' steps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    pub done: usize,
    pub total: usize,
}

impl Progress {
    pub fn complete(&self) -> bool {
        self.done >= self.total
    }
}

struct MachineState {
    machine: Machine,
    /// The steps done, one bit each: a controller that times steps itself may bring the API
    /// server up before etcd, as Cluster API's in-memory machines do.
    done: u8,
    /// The runtime times its steps (see [`Runtime::add_machine`]); otherwise a controller
    /// does (see [`Runtime::run_step`]).
    self_timed: bool,
    task: Option<tokio::task::AbortHandle>,
}

impl MachineState {
    fn steps_done(&self) -> usize {
        self.done.count_ones() as usize
    }
}

#[derive(Default)]
struct State {
    machines: BTreeMap<String, MachineState>,
    next_index: usize,
    /// Machines whose API server serves, with their node IPs.
    api_servers: BTreeMap<String, String>,
    /// Dropping it stops the endpoint's accept loop (and its connections).
    serving: Option<oneshot::Sender<()>>,
    /// Dropping it closes the cluster's connections through the shared listener.
    shared_route: Option<watch::Sender<()>>,
    /// The endpoint's listener, bound when the cluster was created so the port is ours, for
    /// a cluster that comes up at once.
    reserved: Option<tokio::net::TcpListener>,
    addons_started: bool,
    addons_task: Option<tokio::task::AbortHandle>,
    /// The endpoint is held closed (an `APIDown` fault): connections are refused until it
    /// opens again, whatever the API servers do meanwhile.
    down: bool,
    /// What the cloud keeps of the cluster, with how many addon steps are done (kept again
    /// as each comes up).
    record: ClusterRecord,
}

/// What a cluster's runtime is made of (see [`Runtime::new`]).
pub(crate) struct RuntimeConfig {
    pub shape: ClusterShape,
    /// The shared listener's routes: the cluster is there while its endpoint is open.
    pub router: Arc<Router>,
    /// The cluster's number in the cloud, which fixes its node addresses.
    pub cluster_index: u32,
    pub group: Arc<Group>,
    pub clock: SharedClock,
    pub server: ApiServer,
    pub tls: Arc<rustls::ServerConfig>,
    /// The endpoint's listener, bound by the cloud so the port is the cluster's.
    pub listener: tokio::net::TcpListener,
    pub endpoint: SocketAddr,
    pub ca_pem: String,
    /// The cluster's etcd, whose members follow the control-plane machines.
    pub etcd: EtcdCluster,
    /// Its API servers' serving certificates, one per control-plane node.
    pub serving: Arc<ServingCertificates>,
    /// Where the cluster's machines and progress are kept, and its record there.
    pub records: Records,
    pub record: ClusterRecord,
    /// The cluster's faults, met by its members and nodes as they come up.
    pub faults: InForce,
}

/// What one cluster's machines share.
pub(crate) struct Runtime {
    pub shape: ClusterShape,
    pub router: Arc<Router>,
    pub cluster_index: u32,
    pub group: Arc<Group>,
    pub clock: SharedClock,
    pub server: ApiServer,
    pub tls: Arc<rustls::ServerConfig>,
    pub endpoint: SocketAddr,
    pub ca_pem: String,
    pub etcd: EtcdCluster,
    pub serving: Arc<ServingCertificates>,
    records: Records,
    faults: InForce,
    state: Mutex<State>,
    api_up: watch::Sender<bool>,
}

impl Runtime {
    pub fn new(config: RuntimeConfig) -> Arc<Self> {
        // A cluster that comes up step by step refuses connections until its first API
        // server serves; its port stays reserved in the cloud's port set meanwhile.
        let keep = config.shape.startup.is_zero();
        Self::build(config, keep)
    }

    /// A runtime holding its endpoint's listener, or not, until the first API server serves.
    fn build(config: RuntimeConfig, keep_listener: bool) -> Arc<Self> {
        let reserved = keep_listener.then_some(config.listener);
        Arc::new(Runtime {
            shape: config.shape,
            router: config.router,
            cluster_index: config.cluster_index,
            group: config.group,
            clock: config.clock,
            server: config.server,
            tls: config.tls,
            endpoint: config.endpoint,
            ca_pem: config.ca_pem,
            etcd: config.etcd,
            serving: config.serving,
            records: config.records,
            faults: config.faults,
            state: Mutex::new(State {
                reserved,
                record: config.record,
                ..State::default()
            }),
            api_up: watch::channel(false).0,
        })
    }

    /// A cluster's runtime as a restart finds it: its machines with the steps they had done,
    /// its addons as far as they had come. Nothing is written again; see [`Runtime::resume`].
    pub fn restored(config: RuntimeConfig, machines: Vec<MachineRecord>) -> Arc<Self> {
        // The listener is kept whatever the timing: the port was the cluster's before.
        let runtime = Self::build(config, true);
        {
            let mut state = runtime.lock();
            for record in machines {
                let machine = record.machine();
                if machine.control_plane && record.done & (1 << API_SERVER_PHASE) != 0 {
                    state.api_servers.insert(
                        machine.name.clone(),
                        machine_ip(runtime.cluster_index, &machine),
                    );
                }
                state.next_index = state.next_index.max(machine.index + 1);
                state.machines.insert(
                    machine.name.clone(),
                    MachineState {
                        machine,
                        done: record.done,
                        self_timed: record.self_timed,
                        task: None,
                    },
                );
            }
            state.addons_started = state.record.addons_done > 0 || !state.api_servers.is_empty();
        }
        runtime
    }

    /// Goes on where a restored cluster stopped: serves its endpoint if an API server had
    /// come up (on the port it had), and finishes the steps left of its addons
    /// and of the machines it times itself. A controller's machines wait for their controller.
    pub async fn resume(self: &Arc<Self>) {
        let (serving, listener, addons_from, unfinished) = {
            let mut state = self.lock();
            let serving = !state.api_servers.is_empty();
            let done = state.record.addons_done;
            let addons_from = (state.addons_started && done < ADDON_PHASES.len()).then_some(done);
            let unfinished: Vec<(Machine, usize)> = state
                .machines
                .values()
                .filter(|m| m.self_timed)
                .filter_map(|m| {
                    let from = (0..m.machine.phases().len()).find(|i| m.done & (1 << i) == 0)?;
                    Some((m.machine.clone(), from))
                })
                .collect();
            let listener = if serving { state.reserved.take() } else { None };
            (serving, listener, addons_from, unfinished)
        };
        if serving {
            self.open_endpoint(listener).await;
        }
        self.api_up.send_replace(serving);
        if let Some(from) = addons_from {
            self.start_addons(from).await;
        }
        let first_control_plane = self
            .machines()
            .into_iter()
            .find(|(m, _)| m.control_plane)
            .map(|(m, _)| m.name);
        for (machine, from) in unfinished {
            // Only the first control-plane machine initializes; the rest join a serving one.
            let joins = first_control_plane.as_deref() != Some(machine.name.as_str());
            let name = machine.name.clone();
            let task = tokio::spawn(durability::detached(
                self.clone().run_machine(machine, joins, from),
            ));
            if let Some(m) = self.lock().machines.get_mut(&name) {
                m.task = Some(task.abort_handle());
            }
        }
    }

    /// Keeps machine `name` as it stands (under the state lock, so records are written in the
    /// order the machine changed).
    fn keep_machine(&self, state: &State, name: &str) {
        if let Some(m) = state.machines.get(name) {
            let record = MachineRecord::new(&m.machine, m.done, m.self_timed);
            if let Err(e) = self.records.put_machine(&self.shape.name, &record) {
                tracing::error!(cluster = %self.shape.name, machine = name, error = %e, "keeping a machine");
            }
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The addon steps take the cluster's startup time.
    fn addon_delay(&self) -> std::time::Duration {
        Provisioning {
            startup: self.shape.startup,
            jitter: self.shape.jitter,
        }
        .delay()
    }

    fn now(&self) -> String {
        infrasim_store::format_time(self.clock.now())
    }

    /// Adds a machine and starts bringing it up. The first control-plane machine initializes
    /// the cluster; any other waits for a serving API server before it joins.
    pub async fn add_machine(
        self: &Arc<Self>,
        name: &str,
        control_plane: bool,
        behaviour: MachineBehaviour,
    ) -> Result<Machine, CloudError> {
        let (machine, joins) = {
            let mut state = self.lock();
            if state.machines.contains_key(name) {
                return Err(CloudError::MachineExists(name.to_string()));
            }
            let initializes =
                control_plane && !state.machines.values().any(|m| m.machine.control_plane);
            let machine = Machine {
                behaviour,
                ..Machine::new(name, control_plane)
            };
            let machine = self.register(&mut state, machine, true);
            (machine, !initializes)
        };
        let instant = (0..machine.phases().len()).all(|i| behaviour.step(i).startup.is_zero());
        if instant && (!joins || *self.api_up.borrow()) {
            // Up at once: every step now, in order.
            self.clone().run_machine(machine.clone(), false, 0).await;
        } else {
            let task = tokio::spawn(durability::detached(self.clone().run_machine(
                machine.clone(),
                joins,
                0,
            )));
            if let Some(m) = self.lock().machines.get_mut(name) {
                m.task = Some(task.abort_handle());
            }
        }
        Ok(machine)
    }

    /// Records a new machine, giving it the next index (which fixes its addresses).
    fn register(&self, state: &mut State, mut machine: Machine, self_timed: bool) -> Machine {
        machine.index = state.next_index;
        let name = machine.name.clone();
        state.next_index += 1;
        state.machines.insert(
            name.clone(),
            MachineState {
                machine: machine.clone(),
                done: 0,
                self_timed,
                task: None,
            },
        );
        self.keep_machine(state, &name);
        machine
    }

    /// Registers machine `name` before its first step, with the provider ID its Node will
    /// carry; a machine already registered keeps what it has.
    pub fn register_with_provider_id(&self, name: &str, control_plane: bool, provider_id: &str) {
        let mut state = self.lock();
        if state.machines.contains_key(name) {
            return;
        }
        let machine = Machine {
            provider_id: Some(provider_id.to_string()),
            ..Machine::new(name, control_plane)
        };
        self.register(&mut state, machine, false);
    }

    /// Does step `step` of machine `name` now, if it is not done yet, registering the machine
    /// on its first step: for a controller that times the steps itself (Cluster API's
    /// in-memory machines). The API server step brings the scheduler and controller-manager
    /// with it. Returns the steps the machine has done.
    pub async fn run_step(
        self: &Arc<Self>,
        name: &str,
        control_plane: bool,
        kubernetes_version: Option<&str>,
        step: usize,
    ) -> Result<usize, CloudError> {
        let machine = {
            let mut state = self.lock();
            match state.machines.get(name) {
                Some(m) if m.machine.control_plane != control_plane => {
                    return Err(CloudError::MachineExists(name.to_string()))
                }
                Some(m) => m.machine.clone(),
                None => {
                    let machine = Machine {
                        kubernetes_version: kubernetes_version.map(str::to_string),
                        ..Machine::new(name, control_plane)
                    };
                    self.register(&mut state, machine, false)
                }
            }
        };
        let steps: &[usize] = if control_plane && step == API_SERVER_PHASE {
            &[API_SERVER_PHASE, API_SERVER_PHASE + 1]
        } else {
            std::slice::from_ref(&step)
        };
        for &step in steps.iter().filter(|s| **s < machine.phases().len()) {
            let already = self
                .lock()
                .machines
                .get(name)
                .is_some_and(|m| m.done & (1 << step) != 0);
            if !already {
                self.do_step(&machine, step).await;
            }
        }
        Ok(self
            .lock()
            .machines
            .get(name)
            .map_or(0, MachineState::steps_done))
    }

    /// The faults in force on the cluster as its member `name` joins: down if a fault names
    /// it (the API server's answers follow the quorum that leaves), and the alarms raised on
    /// every member or on it.
    fn meet_member_faults(&self, name: &str, faults: &ClusterFault) {
        if faults.etcd_members_down.contains(name) && self.etcd.set_member_down(name, true) {
            let quorum = self.etcd.has_quorum();
            self.server.faults().set(faults.server_fault(quorum));
        }
        let alarms = faults.etcd_alarms.iter();
        for alarm in alarms.filter(|a| a.member.as_deref().is_none_or(|m| m == name)) {
            self.etcd.set_alarm(Some(name), alarm.alarm, true);
        }
    }

    /// Writes one step's objects and records it as done.
    async fn do_step(self: &Arc<Self>, machine: &Machine, step: usize) {
        let faults = self.faults.now();
        // A node a fault deleted before it registered stays unregistered (its objects are
        // written when the fault ends, as for a node deleted after it registered).
        if step < NODE_PHASE || !faults.deleted_nodes.contains(&machine.name) {
            bootstrap::write_phase(
                &self.writer(),
                bootstrap::machine_phase(
                    &self.shape,
                    self.cluster_index,
                    machine,
                    step,
                    &self.now(),
                ),
            );
        }
        if machine.control_plane && step == ETCD_PHASE {
            let (peer, client) = crate::etcd::member_urls(&machine_ip(self.cluster_index, machine));
            self.etcd.start_member(&machine.name, &peer, &client);
            self.meet_member_faults(&machine.name, &faults);
        }
        if machine.control_plane && step == API_SERVER_PHASE {
            self.api_server_started(machine).await;
        }
        let mut state = self.lock();
        if let Some(m) = state.machines.get_mut(&machine.name) {
            m.done |= 1 << step;
            self.keep_machine(&state, &machine.name);
        }
    }

    /// Brings a machine up from step `from` on, each step after its delay; one that joins
    /// waits for a serving API server first.
    async fn run_machine(self: Arc<Self>, machine: Machine, joins: bool, from: usize) {
        if joins {
            let mut up = self.api_up.subscribe();
            if up.wait_for(|up| *up).await.is_err() {
                return;
            }
        }
        for step in from..machine.phases().len() {
            let delay = machine.behaviour.step(step).delay();
            if !delay.is_zero() {
                self.clock.sleep(delay).await;
            }
            if !self.lock().machines.contains_key(&machine.name) {
                return; // removed meanwhile
            }
            self.do_step(&machine, step).await;
        }
    }

    async fn api_server_started(self: &Arc<Self>, machine: &Machine) {
        let (first, start_addons, reserved) = {
            let mut state = self.lock();
            state.api_servers.insert(
                machine.name.clone(),
                machine_ip(self.cluster_index, machine),
            );
            let first = state.serving.is_none();
            let start_addons = !state.addons_started;
            state.addons_started = true;
            (first, start_addons, state.reserved.take())
        };
        if first {
            self.open_endpoint(reserved).await;
        }
        self.update_kubernetes_endpoints();
        self.api_up.send_replace(true);
        if start_addons {
            self.start_addons(0).await;
        }
    }

    /// Closes the endpoint (its port then refuses connections, and the shared listener no
    /// longer routes to the cluster) or opens it again, when an API server serves.
    pub fn set_endpoint_down(self: &Arc<Self>, down: bool) {
        let (closing, reopen) = {
            let mut state = self.lock();
            if state.down == down {
                return;
            }
            state.down = down;
            if down {
                // A listener kept for later would still take connections into its backlog.
                state.reserved = None;
                state.shared_route = None;
                (state.serving.take(), false)
            } else {
                (
                    None,
                    !state.api_servers.is_empty() && state.serving.is_none(),
                )
            }
        };
        if down {
            drop(closing);
            self.router.remove(&self.shape.name);
        } else if reopen {
            let runtime = self.clone();
            tokio::spawn(async move { runtime.open_endpoint(None).await });
        }
    }

    /// Serves the endpoint (on `reserved`, the listener bound for it, if there is one) and
    /// the cluster's route through the shared listener; not while it is held closed.
    async fn open_endpoint(&self, reserved: Option<tokio::net::TcpListener>) {
        if self.lock().down {
            return;
        }
        let listener = match reserved {
            Some(l) => Ok(l),
            None => tokio::net::TcpListener::bind(self.endpoint).await,
        };
        match listener {
            Ok(listener) => {
                let (tx, rx) = oneshot::channel::<()>();
                tokio::spawn(
                    self.server
                        .clone()
                        .serve(listener, self.tls.clone(), async move {
                            let _ = rx.await;
                        }),
                );
                let route =
                    self.router
                        .insert(&self.shape.name, self.server.clone(), self.tls.clone());
                let mut state = self.lock();
                state.serving = Some(tx);
                state.shared_route = Some(route);
            }
            Err(e) => {
                tracing::error!(endpoint = %self.endpoint, error = %e, "the endpoint could not be opened");
            }
        }
    }

    /// Runs the addon steps from `from` on: at once for a cluster that comes up at once,
    /// else in a task of their own.
    async fn start_addons(self: &Arc<Self>, from: usize) {
        if self.shape.startup.is_zero() {
            self.clone().run_addons(from).await;
        } else {
            let task = tokio::spawn(durability::detached(self.clone().run_addons(from)));
            self.lock().addons_task = Some(task.abort_handle());
        }
    }

    async fn run_addons(self: Arc<Self>, from: usize) {
        for step in from..ADDON_PHASES.len() {
            if !self.shape.startup.is_zero() {
                self.clock.sleep(self.addon_delay()).await;
            }
            let ips: Vec<String> = self.lock().api_servers.values().cloned().collect();
            bootstrap::write_phase(
                &self.writer(),
                bootstrap::addon_phase(
                    &self.shape,
                    &self.endpoint.to_string(),
                    &self.ca_pem,
                    &ips,
                    step,
                ),
            );
            let mut state = self.lock();
            state.record.addons_done = step + 1;
            if let Err(e) = self.records.put_cluster(&state.record) {
                tracing::error!(cluster = %self.shape.name, error = %e, "keeping the cluster's progress");
            }
        }
    }

    /// The cluster's kube-controller-manager writing in-process, of which the cluster's
    /// other components are made (see [`crate::components`]).
    fn writer(&self) -> infrasim_kube_api::SystemWriter {
        crate::components::controller_manager(&self.server)
    }

    /// Keeps `default/kubernetes` listing the serving API servers (once it exists).
    fn update_kubernetes_endpoints(&self) {
        let ips: Vec<String> = self.lock().api_servers.values().cloned().collect();
        let key = ObjectKey::new("default", "kubernetes");
        let resource = "endpointslices.discovery.k8s.io";
        let Some(current) = self.group.get(resource, &key) else {
            return;
        };
        let Ok(old) = current.to_value() else {
            return;
        };
        let mut next = kubernetes_endpoints(&ips);
        next["metadata"] = old["metadata"].clone();
        let read = infrasim_store::Read {
            object: &current,
            value: &old,
        };
        let writer = crate::components::api_server(&self.writer());
        if let Err(e) = writer.update(resource, next, read) {
            tracing::debug!(error = %e.message, "updating the kubernetes endpoints");
        }
    }

    /// Removes a machine, undoing its steps in reverse: its control-plane pods (the endpoint
    /// closes if this was the last API server), then its Node and Lease. The pods bound to the
    /// node are collected by the cluster's controllers, as kube-controller-manager's pod GC
    /// does.
    pub fn remove_machine(&self, name: &str) -> bool {
        let Some(removed) = self.lock().machines.remove(name) else {
            return false;
        };
        if let Some(task) = removed.task {
            task.abort();
        }
        // Through the API: the machine's kubelet takes its mirror pods and Lease with it, and
        // its Node goes as a node lifecycle controller removes the Node of a vanished machine.
        let controllers = self.writer();
        let kubelet = crate::components::kubelet(&controllers, name);
        let delete = |resource: &str, namespace: &str, object: &str| {
            let writer = if resource == "nodes" {
                &controllers
            } else {
                &kubelet
            };
            if let Err(e) = writer.delete(resource, namespace, object) {
                if e.code != 404 {
                    tracing::debug!(resource, error = %e.message, "removing a machine's object");
                }
            }
        };
        if removed.machine.control_plane {
            for component in STATIC_PODS.iter().rev() {
                delete("pods", "kube-system", &format!("{component}-{name}"));
                if *component == "kube-apiserver" {
                    self.api_server_stopped(name);
                }
            }
            // Its etcd member goes with it (the last member stays: a cluster keeps its
            // etcd until the cluster goes).
            let _ = self.etcd.remove_member_named(name);
        }
        delete("leases.coordination.k8s.io", "kube-node-lease", name);
        delete("nodes", "", name);
        // Forgotten last: a restart between finds the machine still kept, and whoever removes
        // it removes it again, rather than finding a Node no machine accounts for.
        self.records.delete_machine(&self.shape.name, name);
        true
    }

    /// Deletes machine `name`'s Node and its Lease (a `NodeDeleted` fault), leaving the
    /// machine itself: its pods are collected as those of a missing node are.
    pub fn delete_node(&self, name: &str) {
        let controllers = self.writer();
        for (resource, namespace) in [
            ("leases.coordination.k8s.io", "kube-node-lease"),
            ("nodes", ""),
        ] {
            if let Err(e) = controllers.delete(resource, namespace, name) {
                if e.code != 404 {
                    tracing::debug!(resource, error = %e.message, "deleting a node");
                }
            }
        }
    }

    /// Registers machine `name`'s Node again (its kubelet restarted after a `NodeDeleted`
    /// fault), with the mirror pods of the static pods it runs, which went with the Node: the
    /// objects of every step done from the Node's on, those still there left as they are.
    pub fn register_node(&self, name: &str) {
        let (machine, done) = {
            let state = self.lock();
            let Some(m) = state.machines.get(name) else {
                return;
            };
            (m.machine.clone(), m.done)
        };
        let now = self.now();
        let steps = NODE_PHASE..bootstrap::CONTROL_PLANE_PHASES.len();
        for step in steps.filter(|s| done & (1 << s) != 0) {
            let objects =
                bootstrap::machine_phase(&self.shape, self.cluster_index, &machine, step, &now);
            bootstrap::write_phase(&self.writer(), objects);
        }
    }

    fn api_server_stopped(&self, name: &str) {
        let closing = {
            let mut state = self.lock();
            if state.api_servers.remove(name).is_none() {
                return;
            }
            if state.api_servers.is_empty() {
                state.shared_route = None;
                state.serving.take()
            } else {
                None
            }
        };
        if let Some(stop) = closing {
            drop(stop);
            self.router.remove(&self.shape.name);
            self.api_up.send_replace(false);
        } else {
            self.update_kubernetes_endpoints();
        }
    }

    /// Removes every machine, the last created first, and stops the addon steps.
    pub fn shutdown(&self) {
        let mut machines: Vec<Machine> = self
            .lock()
            .machines
            .values()
            .map(|m| m.machine.clone())
            .collect();
        machines.sort_by_key(|m| std::cmp::Reverse(m.index));
        for m in machines {
            self.remove_machine(&m.name);
        }
        let mut state = self.lock();
        if let Some(task) = state.addons_task.take() {
            task.abort();
        }
        state.serving = None;
        state.shared_route = None;
        state.reserved = None;
        self.router.remove(&self.shape.name);
    }

    /// Stops the cluster where it stands, as a room losing power: its machines' boot steps
    /// and its addon steps stop and its endpoint closes, but nothing is removed: its objects
    /// and records stay as they are for whoever brings it back (see [`crate::homes`]).
    pub fn halt(&self) {
        let mut state = self.lock();
        for machine in state.machines.values_mut() {
            if let Some(task) = machine.task.take() {
                task.abort();
            }
        }
        if let Some(task) = state.addons_task.take() {
            task.abort();
        }
        state.serving = None;
        state.shared_route = None;
        state.reserved = None;
        drop(state);
        self.router.remove(&self.shape.name);
        self.api_up.send_replace(false);
    }

    pub fn progress(&self) -> Progress {
        let state = self.lock();
        let (done, total) = state.machines.values().fold(
            (state.record.addons_done, ADDON_PHASES.len()),
            |(d, t), m| (d + m.steps_done(), t + m.machine.phases().len()),
        );
        Progress { done, total }
    }

    /// The machines, in creation order, with the steps each has done.
    pub fn machines(&self) -> Vec<(Machine, usize)> {
        let mut all: Vec<(Machine, usize)> = self
            .lock()
            .machines
            .values()
            .map(|m| (m.machine.clone(), m.steps_done()))
            .collect();
        all.sort_by_key(|(m, _)| m.index);
        all
    }
}
