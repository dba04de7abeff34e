//! One simulated vCenter (or ESX host): its inventory, sessions and pending results behind a
//! small handle, and the dispatch of SOAP requests to the managed-object methods.
//!
//! Each simulator has its own lock and shares nothing with others, so many instances run in
//! one process without contending. Requests hold the lock only while they run (they never
//! wait inside it).

use crate::fault::Fault;
use crate::inventory::{self, refs, Inventory, Model};
use crate::soap::{self, Request};
use crate::value::Moref;
use crate::{property_collector, service_instance, session_manager, view_manager};
use chrono::{DateTime, Utc};
use infrasim_clock::SharedClock;
use std::collections::HashMap;
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
        }
    }
}

/// A logged-in session.
#[derive(Debug, Clone)]
pub struct Session {
    pub key: String,
    pub user: String,
    pub login_time: DateTime<Utc>,
    pub last_active: DateTime<Utc>,
    pub user_agent: String,
    pub call_count: i64,
}

/// Objects of a paged RetrievePropertiesEx still to be handed out.
#[derive(Debug)]
pub(crate) struct PendingResult {
    pub session: String,
    pub page: usize,
    pub remaining: Vec<String>,
}

/// Everything behind the simulator's lock.
#[derive(Debug)]
pub(crate) struct State {
    pub inventory: Inventory,
    pub sessions: HashMap<String, Session>,
    pub pending: HashMap<String, PendingResult>,
    pub next_token: u64,
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
                sessions: HashMap::new(),
                pending: HashMap::new(),
                next_token: 0,
            })),
        }
    }

    pub fn config(&self) -> &SimConfig {
        &self.config
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Handlers validate before they mutate, so a poisoned lock still holds a consistent
        // inventory.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Reads the inventory (for tests and tools).
    pub fn with_inventory<T>(&self, f: impl FnOnce(&Inventory) -> T) -> T {
        f(&self.lock().inventory)
    }

    /// Handles one SOAP request body with the request's `Cookie` and `User-Agent` headers.
    pub fn handle(&self, body: &str, cookie: Option<&str>, user_agent: &str) -> Reply {
        let request = match soap::parse(body) {
            Ok(r) => r,
            Err(f) => return fault_reply(&f),
        };
        let now = self.clock.now();
        let mut state = self.lock();
        let session = cookie
            .and_then(session_cookie)
            .and_then(|key| session_manager::touch(&mut state, &self.config, &key, now));
        let mut call = Call {
            config: &self.config,
            now,
            session,
            user_agent,
            set_session: None,
        };
        match dispatch(&mut state, &mut call, &request) {
            Ok(inner) => Reply {
                status: 200,
                body: soap::response(&request.method, &inner),
                set_cookie: call
                    .set_session
                    .map(|key| format!("{COOKIE}=\"{key}\"; Path=/; HttpOnly; Secure;")),
            },
            Err(f) => fault_reply(&f),
        }
    }
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

fn dispatch(state: &mut State, call: &mut Call<'_>, req: &Request) -> Result<String, Fault> {
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
    match (this.ty.as_str(), req.method.as_str()) {
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
        _ => Err(not_found()),
    }
}

/// A moref from a required argument.
pub(crate) fn arg_moref(args: &crate::soap::Element, name: &str) -> Result<Moref, Fault> {
    args.child(name)
        .and_then(crate::soap::Element::moref)
        .ok_or_else(|| Fault::invalid_argument(name))
}
