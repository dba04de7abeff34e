//! One simulated vCenter (or ESX host) behind a small handle: the SOAP request loop, and the
//! routing of each request to the registry of managed-object handlers (`handlers`), of REST
//! requests to `rest`, of datastore file requests to `datastore_http` and of PBM requests
//! to `pbm`.
//!
//! What the handlers share lives below: the configuration (`config`), the state behind the
//! lock (`state`), a call's context (`call`) and the engine that holds them (`engine`).

use crate::call::{Call, Flow};
use crate::engine::{session_cookie, Engine};
use crate::fault::Fault;
use crate::objects::{refs, Inventory};
use crate::soap::{self, Request};
use crate::state::State;
use crate::{property_collector, session_manager};
use chrono::{DateTime, Utc};
use infrasim_clock::SharedClock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

pub use crate::config::{Flavor, SimConfig};
pub use crate::engine::COOKIE;

/// The answer to one SOAP request.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    pub status: u16,
    pub body: String,
    pub set_cookie: Option<String>,
}

/// A simulator handle. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Simulator {
    /// The configuration, clock and SOAP state every front drives.
    engine: Engine,
    /// The REST (vAPI) services' state: sessions (apart from the SOAP ones, as vCenter
    /// keeps them), tagging, cluster modules and content libraries.
    rest: Arc<crate::rest::Services>,
    /// Fault injection rules (see `fault_injection`).
    injections: Arc<Mutex<crate::fault_injection::Injections>>,
    /// SOAP calls answered and the bytes of their answers, for benchmarks that count what
    /// a client costs its vCenter.
    calls: Arc<AtomicU64>,
    answered_bytes: Arc<AtomicU64>,
    /// Where its calls are counted for Prometheus, once it is told (see [`Self::report_to`]).
    reporting: Arc<std::sync::OnceLock<crate::metrics::Reporting>>,
    /// The Redfish service over its VMs (see `bmc`): its accounts and sessions.
    redfish: Arc<infrasim_redfish::Service>,
}

impl Simulator {
    /// A simulator with a freshly generated inventory.
    pub fn new(config: SimConfig, clock: SharedClock) -> Self {
        let redfish = Simulator::bmc(&config, &clock);
        Simulator::with(
            Engine::new(config, clock),
            redfish,
            crate::rest::Services::default(),
        )
    }

    /// A simulator kept by `keeper` (see [`crate::persist`]): on a group that holds one, the
    /// simulator it holds (inventory, REST state, instance UUID) rather than a new one from
    /// `config`'s model; each change is kept from then on.
    pub fn kept(
        mut config: SimConfig,
        clock: SharedClock,
        keeper: crate::persist::Keeper,
    ) -> Result<Self, crate::persist::codec::Corrupt> {
        crate::persist::keep_identity(&mut config, &keeper);
        let rest = crate::rest::Services::restore(&keeper);
        let redfish = Simulator::bmc(&config, &clock);
        if let Some(accounts) = keeper.record(crate::persist::BMC_ACCOUNTS) {
            redfish
                .restore_accounts(accounts)
                .map_err(|e| crate::persist::codec::Corrupt(format!("the BMC accounts: {e}")))?;
        }
        Ok(Simulator::with(
            Engine::kept(config, clock, keeper)?,
            redfish,
            rest,
        ))
    }

    /// The BMCs' service. Its administrator is the vCenter's, as a lab's BMCs share its
    /// credentials until someone adds accounts.
    fn bmc(config: &SimConfig, clock: &SharedClock) -> infrasim_redfish::Service {
        infrasim_redfish::Service::new(
            &config.instance_uuid,
            &config.username,
            &config.password,
            clock.clone(),
        )
    }

    fn with(
        engine: Engine,
        redfish: infrasim_redfish::Service,
        rest: crate::rest::Services,
    ) -> Self {
        Simulator {
            redfish: Arc::new(redfish),
            engine,
            rest: Arc::new(rest),
            injections: Arc::default(),
            calls: Arc::default(),
            answered_bytes: Arc::default(),
            reporting: Arc::default(),
        }
    }

    /// Where the simulator's state is kept, when it is.
    pub fn keeper(&self) -> Option<&crate::persist::Keeper> {
        self.engine.keeper()
    }

    /// Reports this simulator's calls, sessions, tasks and VMs in `metrics` under the
    /// name `vcenter`, from now on (a second call changes nothing).
    pub fn report_to(&self, metrics: &crate::metrics::SimMetrics, vcenter: &str) {
        let _ = self
            .reporting
            .set(metrics.watch(vcenter, self.engine.state(), &self.injections));
    }

    /// Counts a SOAP call of `method` answered with `fault` or a result.
    fn answered(&self, method: &str, fault: Option<&Fault>) {
        if let Some(r) = self.reporting.get() {
            r.answered(method, fault.map(|f| f.ty));
        }
    }

    /// SOAP calls answered so far (well-formed or not).
    pub fn calls(&self) -> u64 {
        self.calls.load(Ordering::Relaxed)
    }

    /// Bytes of SOAP answers sent so far.
    pub fn answered_bytes(&self) -> u64 {
        self.answered_bytes.load(Ordering::Relaxed)
    }

    pub(crate) fn count_answer(&self, bytes: usize) {
        self.answered_bytes
            .fetch_add(bytes as u64, Ordering::Relaxed);
    }

    pub fn config(&self) -> &SimConfig {
        self.engine.config()
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

    /// The fault injection rules in force now.
    pub fn injections_in_force(&self) -> crate::fault_injection::InForce {
        self.injections().in_force()
    }

    fn injections(&self) -> MutexGuard<'_, crate::fault_injection::Injections> {
        self.injections.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The simulator's time now.
    pub fn now(&self) -> DateTime<Utc> {
        self.engine.now()
    }

    /// The content libraries' state (for the provisioning helpers).
    pub(crate) fn rest_content_library(&self) -> MutexGuard<'_, crate::rest::ContentLibrary> {
        self.rest
            .content_library
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    /// Tagging's state (for the provisioning helpers).
    pub(crate) fn rest_tagging(&self) -> MutexGuard<'_, crate::rest::Tagging> {
        self.rest.tagging.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs `f` on the SOAP state as a call of the simulator's own user would (see
    /// `Engine::with_state`).
    pub(crate) fn with_state<T>(&self, f: impl FnOnce(&mut State, &Call<'_>) -> T) -> T {
        self.engine.with_state(f)
    }

    /// Answers one Redfish request (a path under `/redfish`) for this simulator's VMs.
    pub fn handle_redfish(&self, req: &infrasim_redfish::Request<'_>) -> infrasim_redfish::Reply {
        let reply = self.redfish.handle(&crate::bmc::Vms(&self.engine), req);
        // The BMCs' accounts are kept with a kept simulator (what the machines' BMC
        // records hold is in the VMs, kept with them).
        let changed = reply.status < 300
            && !matches!(*req.method, http::Method::GET | http::Method::HEAD)
            && req.path.starts_with("/redfish/v1/AccountService");
        if let (Some(keeper), true) = (self.keeper(), changed) {
            keeper.put_record(crate::persist::BMC_ACCOUNTS, &self.redfish.accounts());
        }
        reply
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
        Some(crate::rest::handle(&self.engine, &self.rest, form, &req))
    }

    /// Stores a file pushed to a content library upload URL (a path under
    /// [`crate::rest::UPLOAD_PREFIX`]).
    pub fn handle_upload(
        &self,
        method: &http::Method,
        path: &str,
        headers: &http::HeaderMap,
        body: bytes::Bytes,
    ) -> crate::datastore_files::FileAnswer {
        crate::rest::upload(&self.engine, &self.rest, method, path, headers, body)
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
        if cookie
            .and_then(|c| self.engine.soap_session_user(c))
            .is_none()
        {
            return FileAnswer::text(401, "a session is required");
        }
        crate::datastore_http::answer(&self.engine, method, path, query, body)
    }

    /// Handles one PBM (storage policy) SOAP request, in the session its `Cookie` names.
    pub fn handle_pbm(&self, body: &str, cookie: Option<&str>) -> Reply {
        let request = match soap::parse(body) {
            Ok(r) => r,
            Err(f) => return fault_reply(&f),
        };
        let now = self.engine.now();
        // The session comes in the HTTP cookie or in the SOAP header, as clients send it.
        let key = cookie
            .and_then(session_cookie)
            .or_else(|| request.header_session.clone());
        let mut state = self.engine.lock();
        let session =
            key.and_then(|key| session_manager::touch(&mut state, self.config(), &key, now));
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
        self.engine.with_inventory(f)
    }

    /// Reads the inventory as it is at the simulator's time now: what its timeline has due
    /// (a task's end, a guest coming up) is done first, as it would be for a call.
    pub fn with_current_inventory<T>(&self, f: impl FnOnce(&Inventory) -> T) -> T {
        self.engine.with_current_inventory(f)
    }

    /// A subscription to the simulator's changes, for a controller in this process that
    /// waits for something in it (a VM powered on, a guest's address): the same changes that
    /// wake WaitForUpdates calls, from the moment of this call on (take it before reading
    /// what is waited for, so a change in between is not missed).
    pub fn changes(&self) -> Changes {
        Changes(self.engine.subscribe())
    }

    /// When the VM `vm` next changes by itself on the simulator's clock (a task's operation
    /// on it runs, its guest comes up), if anything is scheduled: a deadline for whoever
    /// waits for it. The change is made by the first call or read at or after that time.
    pub fn next_change_of(&self, vm: &crate::value::Moref) -> Option<DateTime<Utc>> {
        self.engine.next_change_of(vm)
    }

    /// Handles one SOAP request body with the request's `Cookie` and `User-Agent` headers.
    /// WaitForUpdates calls wait here (without the lock) until something changes, their
    /// `maxWaitSeconds` runs out, or the next scheduled event is due.
    pub async fn handle(&self, body: &str, cookie: Option<&str>, user_agent: &str) -> Reply {
        self.calls.fetch_add(1, Ordering::Relaxed);
        let request = match soap::parse(body) {
            Ok(r) => r,
            Err(f) => {
                // A request that names no method it could be counted under.
                self.answered("", Some(&f));
                return fault_reply(&f);
            }
        };
        // An injected delay is waited out before the call takes the lock, as a slow vCenter
        // answers late without holding up other sessions.
        let injected = self
            .injections()
            .take(&request.method, request.this.as_ref());
        let injected = match injected {
            Some((delay, fault)) => {
                if !delay.is_zero() {
                    self.engine.clock().sleep(delay).await;
                }
                fault
            }
            None => None,
        };
        let started = self.engine.now();
        let max_wait = property_collector::max_wait(&request);
        loop {
            let notified = self.engine.changed().notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let now = self.engine.now();
            let expired = max_wait.is_some_and(|w| now >= started + w);
            let attempt = Attempt {
                request: &request,
                cookie,
                user_agent,
                injected: injected.clone(),
                expired,
            };
            let (result, set_session, next_due) = self.attempt(now, attempt);
            match result {
                Ok(Flow::Done(inner)) => {
                    self.answered(&request.method, None);
                    return Reply {
                        status: 200,
                        body: soap::response(&request.method, &inner),
                        set_cookie: set_session
                            .map(|key| format!("{COOKIE}=\"{key}\"; Path=/; HttpOnly; Secure;")),
                    };
                }
                Err(f) => {
                    self.answered(&request.method, Some(&f));
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
                        _ = self.engine.clock().sleep(sleep) => {}
                    }
                }
            }
        }
    }

    /// One try at a SOAP call under the lock, after what the timeline has due: its outcome,
    /// the session cookie to set, and when the timeline next has something due. Wakes the
    /// WaitForUpdates waiters when the call changed something.
    fn attempt(&self, now: DateTime<Utc>, a: Attempt<'_>) -> Attempted {
        let (result, set_session, next_due, changed) = {
            let mut state = self.engine.lock();
            let before = state.inventory.changes();
            let session = a
                .cookie
                .and_then(session_cookie)
                .and_then(|key| session_manager::touch(&mut state, self.config(), &key, now));
            let mut call = self.engine.call(now, session, a.user_agent);
            call.run_due(&mut state);
            let result = match a.injected {
                Some(fault) => inject(&mut state, &mut call, a.request, fault),
                None => dispatch(&mut state, &mut call, a.request, a.expired),
            };
            let changed = state.inventory.changes() != before;
            (result, call.set_session, state.timeline.next_due(), changed)
        };
        // Only a call that changed something wakes the WaitForUpdates waiters: each woken
        // one compares every object its filters select, so waking them on reads would make
        // every read cost as much as a listing.
        if changed {
            self.engine.notify_changed();
        }
        (result, set_session, next_due)
    }
}

/// Changes of one simulator, as [`Simulator::changes`] subscribes to them.
#[derive(Debug, Clone)]
pub struct Changes(tokio::sync::watch::Receiver<u64>);

impl Changes {
    /// Waits for a change after the last one this subscription saw (or after it was made).
    /// `false` when the simulator is gone and nothing will change any more.
    pub async fn next(&mut self) -> bool {
        self.0.changed().await.is_ok()
    }
}

/// What one try of a SOAP call is given.
struct Attempt<'a> {
    request: &'a Request,
    cookie: Option<&'a str>,
    user_agent: &'a str,
    /// An injected fault to answer with instead of the call's own outcome.
    injected: Option<Fault>,
    /// Whether a WaitForUpdatesEx has waited as long as it may.
    expired: bool,
}

/// What one try came to: the outcome, a session cookie to set, the timeline's next due time.
type Attempted = (Result<Flow, Fault>, Option<String>, Option<DateTime<Utc>>);

fn fault_reply(f: &Fault) -> Reply {
    Reply {
        status: 500,
        body: soap::fault(f),
        set_cookie: None,
    }
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
            | "CloneSession"
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
    let op = crate::state::timeline::Operation::Fail(fault);
    Ok(Flow::Done(crate::task::start(
        state,
        call,
        &this,
        &req.method,
        &req.args,
        op,
    )))
}

/// Routes one call: the session and target checks, PropertyCollector's waiting methods,
/// `Fetch` (which any object answers), then the registry's handlers of the target's type.
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
    crate::authorization::check(state, call, &this, &req.method)?;
    if this.ty == "PropertyCollector" {
        if let Some(flow) =
            property_collector::wait_methods(state, call, &this, &req.method, &req.args, expired)
        {
            return flow;
        }
    }
    let done = if req.method == "Fetch" {
        property_collector::fetch(state, call, &this, &req.args)
    } else {
        crate::handlers::dispatch(state, call, &this, &req.method, &req.args)
    };
    done.map(Flow::Done)
}
