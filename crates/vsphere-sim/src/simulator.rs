//! One simulated vCenter (or ESX host): its state behind a small handle, and the dispatch of
//! SOAP requests (and of the timeline's due work) to the managed-object modules.
//!
//! Each simulator has its own lock and shares nothing with others, so many instances run in
//! one process without contending. Requests hold the lock only while they run (they never
//! wait inside it).

use crate::fault::Fault;
use crate::inventory::{self, refs, Inventory, Model};
use crate::soap::{self, Request};
use crate::task::{Operation, Scheduled};
use crate::value::Moref;
use crate::{property_collector, service_instance, session_manager, view_manager};
use chrono::{DateTime, Utc};
use infrasim_clock::SharedClock;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// Which vCenter the simulator claims to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavor {
    /// vCenter 8.0 (API 8.0.3.0).
    VCenter8,
    /// vCenter 7.0 (API 7.0.3.0).
    VCenter7,
    /// A standalone ESXi 8.0 host.
    Esx8,
}

/// How a simulator is set up.
#[derive(Debug, Clone)]
pub struct SimConfig {
    pub username: String,
    pub password: String,
    /// Sessions idle longer than this expire (`NotAuthenticated` afterwards).
    pub session_idle: Duration,
    pub flavor: Flavor,
    pub model: Model,
    /// The instance UUID vCenter reports in `about.instanceUuid`.
    pub instance_uuid: String,
    /// How long a task stays queued and running before its operation completes (half
    /// queued, half running), so clients can observe both states.
    pub task_delay: Duration,
    /// How long after power-on a guest reports tools running and its IP addresses.
    pub guest_delay: Duration,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            username: "administrator@vsphere.local".into(),
            password: String::new(),
            session_idle: Duration::from_secs(30 * 60),
            flavor: Flavor::VCenter8,
            model: Model::default(),
            instance_uuid: inventory::uuid_for("infrasim", "instance"),
            task_delay: Duration::ZERO,
            guest_delay: Duration::from_millis(200),
        }
    }
}

/// Everything behind the simulator's lock: the inventory, and beside it each managed
/// object's own state, kept (with private fields) by the module that implements it.
#[derive(Debug, Default)]
pub(crate) struct State {
    pub inventory: Inventory,
    pub sessions: session_manager::Sessions,
    pub collectors: property_collector::Collectors,
    pub timeline: crate::task::Timeline,
    /// The VMs' guests: boots and addresses (driven by `virtual_machine`).
    pub guests: crate::guest::Guests,
    pub events: crate::event_manager::EventLog,
    pub snapshots: crate::snapshot::Snapshots,
    /// The storage policies of VMs (read by PBM).
    pub profiles: crate::pbm::Associations,
}

impl State {
    /// Runs everything due by now, in order (running may schedule more), routing each
    /// entry to the module that does its work.
    pub fn run_due(&mut self, call: &Call<'_>) {
        while let Some(what) = self.timeline.take_due(call.now) {
            match what {
                Scheduled::Start { task } => crate::task::mark_running(self, &task, call.now),
                Scheduled::Run { task, op } => {
                    let outcome = match *op {
                        Operation::Vm(op) => crate::virtual_machine::run(self, call, op),
                        Operation::Rename { entity, name } => {
                            crate::managed_entity::rename(self, &entity, &name)
                        }
                        Operation::Destroy { entity } => {
                            crate::managed_entity::destroy(self, call, &entity)
                        }
                        Operation::Snapshot(op) => crate::snapshot::run(self, call, op),
                        Operation::MoveInto { folder, list } => {
                            crate::folder::move_into(self, &folder, &list)
                        }
                        Operation::CreateVm {
                            folder,
                            config,
                            pool,
                            host,
                        } => crate::folder::create_vm(
                            self,
                            call,
                            &folder,
                            &config,
                            &pool,
                            host.as_ref(),
                        ),
                        Operation::Fail(fault) => Err(fault),
                        Operation::Done(result) => Ok(result),
                    };
                    crate::task::complete(self, &task, outcome, call.now);
                }
                Scheduled::GuestReady { vm, boot } => {
                    crate::virtual_machine::guest_ready(self, &vm, boot)
                }
            }
        }
    }
}

/// What a SOAP call needs besides its arguments.
pub(crate) struct Call<'a> {
    pub config: &'a SimConfig,
    pub now: DateTime<Utc>,
    /// The caller's session key, when it has a valid one.
    pub session: Option<String>,
    pub user_agent: &'a str,
    /// A cookie to set on the response (Login).
    pub set_session: Option<String>,
    /// The files uploaded to datastores (read by the datastore browser).
    pub files: &'a Mutex<crate::datastore_files::DatastoreFiles>,
}

/// The answer to one SOAP request.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    pub status: u16,
    pub body: String,
    pub set_cookie: Option<String>,
}

/// The cookie vCenter's SOAP sessions travel in.
pub const COOKIE: &str = "vmware_soap_session";

/// A simulator handle. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Simulator {
    config: Arc<SimConfig>,
    clock: SharedClock,
    state: Arc<Mutex<State>>,
    /// Wakes WaitForUpdates calls after any request that may have changed something.
    changed: Arc<tokio::sync::Notify>,
    /// The REST (vAPI) services' state: sessions (apart from the SOAP ones, as vCenter
    /// keeps them) and tagging.
    rest: Arc<crate::rest::Services>,
    /// Fault injection rules (see `fault_injection`).
    injections: Arc<Mutex<crate::fault_injection::Injections>>,
    /// Files uploaded to datastores over HTTP (see `datastore_files`).
    files: Arc<Mutex<crate::datastore_files::DatastoreFiles>>,
    /// SOAP calls answered and the bytes of their answers, for benchmarks that count what
    /// a client costs its vCenter.
    calls: Arc<std::sync::atomic::AtomicU64>,
    answered_bytes: Arc<std::sync::atomic::AtomicU64>,
}

impl Simulator {
    /// A simulator with a freshly generated inventory.
    pub fn new(config: SimConfig, clock: SharedClock) -> Self {
        let mut model = config.model.clone();
        model.esx = config.flavor == Flavor::Esx8;
        let inventory = inventory::generate(&model, clock.now());
        let mut inventory = inventory;
        service_instance::install_managers(&mut inventory);
        Simulator {
            config: Arc::new(config),
            clock,
            state: Arc::new(Mutex::new(State {
                inventory,
                ..State::default()
            })),
            changed: Arc::new(tokio::sync::Notify::new()),
            rest: Arc::default(),
            injections: Arc::default(),
            files: Arc::default(),
            calls: Arc::default(),
            answered_bytes: Arc::default(),
        }
    }

    /// SOAP calls answered so far (well-formed or not).
    pub fn calls(&self) -> u64 {
        self.calls.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Bytes of SOAP answers sent so far.
    pub fn answered_bytes(&self) -> u64 {
        self.answered_bytes
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    pub(crate) fn count_answer(&self, bytes: usize) {
        self.answered_bytes
            .fetch_add(bytes as u64, std::sync::atomic::Ordering::Relaxed);
    }

    pub fn config(&self) -> &SimConfig {
        &self.config
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Handlers validate before they mutate, so a poisoned lock still holds a consistent
        // inventory.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Adds a fault injection rule (after those already there: the first that matches a
    /// call applies).
    pub fn inject(&self, rule: crate::fault_injection::Injection) {
        self.injections().add(rule);
    }

    /// Replaces every fault injection rule (none: the simulator behaves again).
    pub fn set_injections(&self, rules: Vec<crate::fault_injection::Injection>) {
        self.injections().replace(rules);
    }

    fn injections(&self) -> MutexGuard<'_, crate::fault_injection::Injections> {
        self.injections.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The simulator's time now.
    pub fn now(&self) -> DateTime<Utc> {
        self.clock.now()
    }

    pub(crate) fn rest_sessions(&self) -> MutexGuard<'_, crate::rest::Sessions> {
        self.rest.sessions.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn rest_tagging(&self) -> MutexGuard<'_, crate::rest::Tagging> {
        self.rest.tagging.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn rest_cluster_modules(&self) -> MutexGuard<'_, crate::rest::ClusterModules> {
        self.rest
            .cluster_modules
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn rest_content_library(&self) -> MutexGuard<'_, crate::rest::ContentLibrary> {
        self.rest
            .content_library
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    /// Runs `f` on the SOAP state as a call of the simulator's own user would (for a REST
    /// operation that changes the inventory: an OVF deployment), after what the timeline has
    /// due, then wakes waiting WaitForUpdates calls so they see the change.
    pub(crate) fn with_state<T>(&self, f: impl FnOnce(&mut State, &Call<'_>) -> T) -> T {
        let out = {
            let mut state = self.lock();
            let call = Call {
                config: &self.config,
                now: self.clock.now(),
                session: None,
                user_agent: "vapi",
                set_session: None,
                files: &self.files,
            };
            state.run_due(&call);
            f(&mut state, &call)
        };
        self.changed.notify_waiters();
        out
    }

    /// The user of the live SOAP session a `Cookie` header names, if any (touching it, so
    /// an idle one ends here): vCenter lets a SOAP session open a REST one.
    pub(crate) fn soap_session_user(&self, cookie: &str) -> Option<String> {
        let key = session_cookie(cookie)?;
        let mut state = self.lock();
        let key = session_manager::touch(&mut state, &self.config, &key, self.clock.now())?;
        state.sessions.get(&key).map(|s| s.user.clone())
    }

    /// Answers one REST (vAPI) request: `path` is the request's path, `query` its query.
    pub fn handle_rest(
        &self,
        method: &http::Method,
        path: &str,
        query: Option<&str>,
        headers: &http::HeaderMap,
        body: &[u8],
    ) -> Option<crate::rest::Answer> {
        let (form, rest_path) = crate::rest::split(path)?;
        let action = query.and_then(|q| {
            // `/rest` says `~action` (which Go's encoder escapes), `/api` says `action`.
            q.split('&').find_map(|kv| {
                ["~action=", "%7Eaction=", "%7eaction=", "action="]
                    .iter()
                    .find_map(|prefix| kv.strip_prefix(prefix))
            })
        });
        let req = crate::rest::Request {
            method,
            path: rest_path,
            action,
            query,
            headers,
            body,
        };
        Some(crate::rest::handle(self, form, &req))
    }

    /// A datastore file request (`/folder/<path>?dcPath=…&dsName=…`): `method` GET, HEAD,
    /// PUT or DELETE, in the session the `Cookie` names; or a listing (`/folder`, of the
    /// datacenters, a datacenter's datastores or a datastore's folders).
    pub fn handle_file(
        &self,
        method: &http::Method,
        path: &str,
        query: &str,
        cookie: Option<&str>,
        body: bytes::Bytes,
    ) -> crate::datastore_files::FileAnswer {
        use crate::datastore_files::FileAnswer;
        if cookie.and_then(|c| self.soap_session_user(c)).is_none() {
            return FileAnswer::text(401, "a session is required");
        }
        crate::datastore_files::answer(self, method, path, query, body)
    }

    /// The files uploaded to datastores.
    pub(crate) fn uploaded_files(&self) -> &Mutex<crate::datastore_files::DatastoreFiles> {
        &self.files
    }

    /// Handles one PBM (storage policy) SOAP request, in the session its `Cookie` names.
    pub fn handle_pbm(&self, body: &str, cookie: Option<&str>) -> Reply {
        let request = match soap::parse(body) {
            Ok(r) => r,
            Err(f) => return fault_reply(&f),
        };
        let now = self.clock.now();
        // The session comes in the HTTP cookie or in the SOAP header, as clients send it.
        let key = cookie
            .and_then(session_cookie)
            .or_else(|| request.header_session.clone());
        let mut state = self.lock();
        let session =
            key.and_then(|key| session_manager::touch(&mut state, &self.config, &key, now));
        match crate::pbm::dispatch(&request, session.as_deref(), now, &state.profiles) {
            Ok(inner) => Reply {
                status: 200,
                body: crate::pbm::response(&request.method, &inner),
                set_cookie: None,
            },
            Err(f) => fault_reply(&f),
        }
    }

    /// Reads the inventory (for tests and tools).
    pub fn with_inventory<T>(&self, f: impl FnOnce(&Inventory) -> T) -> T {
        f(&self.lock().inventory)
    }

    /// Handles one SOAP request body with the request's `Cookie` and `User-Agent` headers.
    /// WaitForUpdates calls wait here (without the lock) until something changes, their
    /// `maxWaitSeconds` runs out, or the next scheduled event is due.
    pub async fn handle(&self, body: &str, cookie: Option<&str>, user_agent: &str) -> Reply {
        self.calls
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let request = match soap::parse(body) {
            Ok(r) => r,
            Err(f) => return fault_reply(&f),
        };
        // An injected delay is waited out before the call takes the lock, as a slow vCenter
        // answers late without holding up other sessions.
        let injected = self
            .injections()
            .take(&request.method, request.this.as_ref());
        let injected = match injected {
            Some((delay, fault)) => {
                if !delay.is_zero() {
                    self.clock.sleep(delay).await;
                }
                fault
            }
            None => None,
        };
        let started = self.clock.now();
        let max_wait = property_collector::max_wait(&request);
        loop {
            let notified = self.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let now = self.clock.now();
            let expired = max_wait.is_some_and(|w| now >= started + w);
            let (result, set_session, next_due, changed) = {
                let mut state = self.lock();
                let before = state.inventory.changes();
                let session = cookie
                    .and_then(session_cookie)
                    .and_then(|key| session_manager::touch(&mut state, &self.config, &key, now));
                let mut call = Call {
                    config: &self.config,
                    now,
                    session,
                    user_agent,
                    set_session: None,
                    files: &self.files,
                };
                state.run_due(&call);
                let result = match injected.clone() {
                    Some(fault) => inject(&mut state, &mut call, &request, fault),
                    None => dispatch(&mut state, &mut call, &request, expired),
                };
                let changed = state.inventory.changes() != before;
                (result, call.set_session, state.timeline.next_due(), changed)
            };
            // Only a call that changed something wakes the WaitForUpdates waiters: each woken
            // one compares every object its filters select, so waking them on reads would
            // make every read cost as much as a listing.
            if changed {
                self.changed.notify_waiters();
            }
            match result {
                Ok(Flow::Done(inner)) => {
                    return Reply {
                        status: 200,
                        body: soap::response(&request.method, &inner),
                        set_cookie: set_session
                            .map(|key| format!("{COOKIE}=\"{key}\"; Path=/; HttpOnly; Secure;")),
                    };
                }
                Err(f) => {
                    return fault_reply(&f);
                }
                Ok(Flow::Wait) => {
                    let mut wake = max_wait.map(|w| started + w);
                    if let Some(due) = next_due {
                        wake = Some(wake.map_or(due, |w| w.min(due)));
                    }
                    let sleep = wake
                        .map(|w| (w - now).to_std().unwrap_or_default())
                        .unwrap_or(Duration::from_secs(3600));
                    tokio::select! {
                        _ = &mut notified => {}
                        _ = self.clock.sleep(sleep) => {}
                    }
                }
            }
        }
    }
}

/// What a dispatched call came to.
pub(crate) enum Flow {
    /// The response body.
    Done(String),
    /// Nothing to report yet (WaitForUpdates): wait and try again.
    Wait,
}

fn fault_reply(f: &Fault) -> Reply {
    Reply {
        status: 500,
        body: soap::fault(f),
        set_cookie: None,
    }
}

/// The session key in a `Cookie` header (pyvmomi sends back the whole `Set-Cookie` value).
fn session_cookie(header: &str) -> Option<String> {
    header.split(';').find_map(|part| {
        let (k, v) = part.trim().split_once('=')?;
        (k == COOKIE).then(|| v.trim_matches('"').to_string())
    })
}

/// Methods that work without a session.
fn anonymous(method: &str) -> bool {
    matches!(
        method,
        "RetrieveServiceContent"
            | "Login"
            | "CurrentTime"
            | "LoginByToken"
            | "LoginExtensionByCertificate"
    )
}

/// An injected failure of a call: a `*_Task` method returns a Task that ends in error, any
/// other answers with the fault; both only once the call would have been let in.
fn inject(
    state: &mut State,
    call: &mut Call<'_>,
    req: &Request,
    fault: Fault,
) -> Result<Flow, Fault> {
    let this = req
        .this
        .clone()
        .ok_or_else(|| Fault::invalid_request("the request has no _this"))?;
    if call.session.is_none() && !anonymous(&req.method) {
        return Err(Fault::not_authenticated(&this));
    }
    if state.inventory.by_value(&this.value).is_none() {
        return Err(Fault::not_found(&this));
    }
    if !req.method.ends_with("_Task") {
        return Err(fault);
    }
    let op = crate::task::Operation::Fail(fault);
    Ok(Flow::Done(crate::task::start(
        state,
        call,
        &this,
        &req.method,
        &req.args,
        op,
    )))
}

fn dispatch(
    state: &mut State,
    call: &mut Call<'_>,
    req: &Request,
    expired: bool,
) -> Result<Flow, Fault> {
    let this = req
        .this
        .clone()
        .ok_or_else(|| Fault::invalid_request("the request has no _this"))?;
    if call.session.is_none()
        && !anonymous(&req.method)
        && !(req.method == "Fetch" && this == refs::service_instance())
    {
        return Err(Fault::not_authenticated(&this));
    }
    // The target must exist (sessions' views included) and be of the named type.
    if state.inventory.by_value(&this.value).is_none() {
        return Err(Fault::not_found(&this));
    }
    let not_found = || Fault::method_not_found(&this, &req.method);
    if this.ty == "PropertyCollector" {
        if let Some(flow) =
            property_collector::wait_methods(state, call, &this, &req.method, &req.args, expired)
        {
            return flow;
        }
    }
    let done = match (&*this.ty, req.method.as_str()) {
        (_, "Fetch") => property_collector::fetch(state, call, &this, &req.args),
        ("ServiceInstance", "RetrieveServiceContent") => {
            Ok(service_instance::retrieve_service_content(call))
        }
        ("ServiceInstance", "CurrentTime") => Ok(service_instance::current_time(call)),
        ("SessionManager", m) => {
            session_manager::dispatch(state, call, m, &req.args).ok_or_else(not_found)?
        }
        ("PropertyCollector", m) => {
            property_collector::dispatch(state, call, m, &req.args).ok_or_else(not_found)?
        }
        ("ViewManager", m) => {
            view_manager::dispatch(state, call, m, &req.args).ok_or_else(not_found)?
        }
        ("ContainerView" | "ListView", "DestroyView") => view_manager::destroy(state, &this),
        ("SearchIndex", m) => {
            crate::search_index::dispatch(state, m, &req.args).ok_or_else(not_found)?
        }
        // No unresolved (snapshot or replica) VMFS volumes are ever found.
        ("HostStorageSystem", "QueryUnresolvedVmfsVolume") => Ok(String::new()),
        ("HostDatastoreBrowser", m) => {
            crate::datastore_browser::dispatch(state, call, &this, m, &req.args)
                .ok_or_else(not_found)?
        }
        ("VirtualMachine", m) => {
            match crate::virtual_machine::dispatch(state, call, &this, m, &req.args)
                .or_else(|| crate::snapshot::dispatch_vm(state, call, &this, m, &req.args))
            {
                Some(r) => r,
                None => crate::managed_entity::dispatch(state, call, &this, m, &req.args)
                    .ok_or_else(not_found)?,
            }
        }
        ("VirtualMachineSnapshot", m) => {
            crate::snapshot::dispatch_snapshot(state, call, &this, m, &req.args)
                .ok_or_else(not_found)?
        }
        ("CustomFieldsManager", m) => {
            crate::custom_fields::dispatch(state, m, &req.args).ok_or_else(not_found)?
        }
        ("EventManager", m) => {
            crate::event_manager::dispatch(state, m, &req.args).ok_or_else(not_found)?
        }
        ("Folder" | "ResourcePool", m)
            if matches!(
                m,
                "CreateFolder" | "MoveIntoFolder_Task" | "CreateResourcePool" | "CreateVM_Task"
            ) =>
        {
            crate::folder::dispatch(state, call, &this, m, &req.args).ok_or_else(not_found)?
        }
        (
            "Folder"
            | "Datacenter"
            | "ResourcePool"
            | "ClusterComputeResource"
            | "ComputeResource"
            | "HostSystem"
            | "Datastore",
            m,
        ) => crate::managed_entity::dispatch(state, call, &this, m, &req.args)
            .ok_or_else(not_found)?,
        ("PropertyFilter", "DestroyPropertyFilter") => {
            property_collector::destroy_filter(state, &this)
        }
        _ => Err(not_found()),
    };
    done.map(Flow::Done)
}

/// A moref from a required argument.
pub(crate) fn arg_moref(args: &crate::soap::Element, name: &str) -> Result<Moref, Fault> {
    args.child(name)
        .and_then(crate::soap::Element::moref)
        .ok_or_else(|| Fault::invalid_argument(name))
}
