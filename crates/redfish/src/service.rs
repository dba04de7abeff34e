//! The service: one request in, one reply out. A request is routed, authenticated (HTTP
//! Basic or an `X-Auth-Token`, except for what DSP0266 leaves open), checked against the
//! method's privilege and, for a change, against `If-Match`; then read or changed. Every
//! resource's reply carries its ETag (a hash of its body, also in `@odata.etag`) and
//! `OData-Version`.

use crate::accounts::{Account, Accounts};
use crate::actions;
use crate::errors::RedfishError;
use crate::machines::{Hardware, Machines};
use crate::resources::{chassis, managers, root, services, systems};
use crate::routes::Route;
use crate::sessions::{Sessions, TIMEOUT_RANGE};
use base64::Engine as _;
use http::{HeaderMap, Method};
use infrasim_clock::SharedClock;
use serde_json::Value;
use std::sync::{Mutex, MutexGuard};

/// Request bodies are at most this long (a BMC takes small JSON documents only).
pub const MAX_BODY: usize = 1 << 20;

/// A request, as the HTTP server read it.
#[derive(Debug)]
pub struct Request<'a> {
    pub method: &'a Method,
    pub path: &'a str,
    /// The query string, without its `?`.
    pub query: Option<&'a str>,
    pub headers: &'a HeaderMap,
    pub body: &'a [u8],
}

/// A reply: status, headers, body.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(&'static str, String)>,
    pub body: Vec<u8>,
}

impl Reply {
    fn json(status: u16, body: &Value) -> Self {
        Reply {
            status,
            headers: vec![
                ("content-type", "application/json; charset=utf-8".into()),
                ("odata-version", "4.0".into()),
            ],
            body: serde_json::to_vec(body).unwrap_or_default(),
        }
    }

    fn empty(status: u16) -> Self {
        Reply {
            status,
            headers: vec![("odata-version", "4.0".into())],
            body: Vec::new(),
        }
    }

    /// The reply refusing a request with `e`.
    pub fn error(e: &RedfishError) -> Self {
        let mut r = Reply::json(e.status, &e.body());
        if e.status == 401 {
            r.headers.push((
                "www-authenticate",
                "Basic realm=\"infrasim redfish\"".into(),
            ));
        }
        r
    }

    /// The value of header `name`, if set.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Who a request is from.
struct Principal {
    account: Account,
    session: Option<String>,
}

/// A Redfish service: its accounts and sessions, answering for the machines it is given.
#[derive(Debug)]
pub struct Service {
    uuid: String,
    clock: SharedClock,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    accounts: Accounts,
    sessions: Sessions,
}

/// What a GET renders: a JSON resource, or the CSDL document.
enum Rendered {
    Json(Value),
    Xml(String),
}

impl Service {
    /// A service whose one account is the administrator `user` with `password`.
    pub fn new(uuid: &str, user: &str, password: &str, clock: SharedClock) -> Self {
        Service {
            uuid: uuid.to_string(),
            clock,
            state: Mutex::new(State {
                accounts: Accounts::with_admin(user, password),
                sessions: Sessions::default(),
            }),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // Every change validates before it writes, so a poisoned lock holds consistent state.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The accounts as they are now (to keep them; see [`Service::restore_accounts`]).
    pub fn accounts(&self) -> serde_json::Value {
        serde_json::to_value(&self.state().accounts).unwrap_or_default()
    }

    /// Takes back the accounts [`Service::accounts`] gave (they replace those there).
    pub fn restore_accounts(&self, kept: serde_json::Value) -> Result<(), serde_json::Error> {
        self.state().accounts = serde_json::from_value(kept)?;
        Ok(())
    }

    /// Answers one request for the machines `m`.
    pub fn handle(&self, m: &dyn Machines, req: &Request<'_>) -> Reply {
        match self.answer(m, req) {
            Ok(r) => r,
            Err(e) => {
                let mut r = Reply::error(&e);
                if e.status == 405 {
                    if let Some(route) = Route::parse(req.path) {
                        r.headers.push(("allow", allow(&route)));
                    }
                }
                r
            }
        }
    }

    fn answer(&self, m: &dyn Machines, req: &Request<'_>) -> Result<Reply, RedfishError> {
        let route = Route::parse(req.path).ok_or_else(|| RedfishError::not_found(req.path))?;
        if !route.allows().contains(req.method) {
            return Err(RedfishError::method_not_allowed());
        }
        if req.body.len() > MAX_BODY {
            return Err(RedfishError::too_large(MAX_BODY));
        }
        // DSP0266: a request for an OData version the service does not speak is refused.
        if header(req.headers, "odata-version").is_some_and(|v| v.trim() != "4.0") {
            return Err(RedfishError::precondition_failed());
        }
        // No query parameter is supported (ProtocolFeaturesSupported says so); one of
        // Redfish's own (`$expand`, `$select`, ...) gets 501 rather than being ignored.
        if let Some(q) = req
            .query
            .into_iter()
            .flat_map(|q| q.split('&'))
            .find(|p| p.starts_with('$'))
        {
            return Err(RedfishError::query_not_supported(q));
        }
        let who = if route.is_open(req.method) {
            None
        } else {
            Some(self.authenticate(req)?)
        };
        match (req.method, who) {
            (&Method::GET | &Method::HEAD, who) => self.get(m, &route, who.as_ref(), req),
            (&Method::POST, None) => self.login(req),
            (method, Some(who)) => {
                let body = body_json(req.body)?;
                if method != Method::POST {
                    self.check_etag(m, &route, &who, req)?;
                }
                self.change(m, &route, &who, req, &body)
            }
            _ => Err(RedfishError::no_session()),
        }
    }

    /// The account a request's token or Basic credentials name.
    fn authenticate(&self, req: &Request<'_>) -> Result<Principal, RedfishError> {
        let now = self.clock.now();
        let mut st = self.state();
        if let Some(token) = header(req.headers, "x-auth-token") {
            let s = st
                .sessions
                .by_token(token, now)
                .ok_or_else(RedfishError::no_session)?;
            let account = st
                .accounts
                .get(&s.account)
                .filter(|a| a.enabled)
                .cloned()
                .ok_or_else(RedfishError::no_session)?;
            return Ok(Principal {
                account,
                session: Some(s.id),
            });
        }
        let (user, password) = header(req.headers, "authorization")
            .and_then(basic)
            .ok_or_else(RedfishError::no_session)?;
        let account = st
            .accounts
            .check(&user, &password)
            .cloned()
            .ok_or_else(|| RedfishError::unauthorized(req.path))?;
        Ok(Principal {
            account,
            session: None,
        })
    }

    /// `POST .../Sessions`: a login.
    fn login(&self, req: &Request<'_>) -> Result<Reply, RedfishError> {
        let body = body_json(req.body)?;
        let field = |name: &str| {
            body.get(name)
                .and_then(Value::as_str)
                .ok_or_else(|| RedfishError::parameter_missing("Create", name))
        };
        let (user, password) = (field("UserName")?, field("Password")?);
        let now = self.clock.now();
        let mut st = self.state();
        let account = st
            .accounts
            .check(user, password)
            .cloned()
            .ok_or_else(|| RedfishError::unauthorized(req.path))?;
        let (session, token) = st.sessions.open(&account.id, &account.user, now);
        let mut r = Reply::json(201, &with_etag(services::session(&session)).0);
        r.headers.push(("x-auth-token", token));
        r.headers
            .push(("location", services::session_path(&session.id)));
        Ok(r)
    }

    fn get(
        &self,
        m: &dyn Machines,
        route: &Route,
        who: Option<&Principal>,
        req: &Request<'_>,
    ) -> Result<Reply, RedfishError> {
        if who.is_some_and(|w| !w.account.may("Login")) {
            return Err(RedfishError::insufficient_privilege());
        }
        let mut reply = match self.render(m, route, req.path)? {
            Rendered::Xml(text) => Reply {
                status: 200,
                headers: vec![
                    ("content-type", "application/xml; charset=utf-8".into()),
                    ("odata-version", "4.0".into()),
                ],
                body: text.into_bytes(),
            },
            Rendered::Json(v) if *route == Route::Versions => Reply::json(200, &v),
            Rendered::Json(v) => {
                let described = described_by(&v);
                let (v, etag) = with_etag(v);
                if header(req.headers, "if-none-match").is_some_and(|h| etag_matches(h, &etag)) {
                    let mut r = Reply::empty(304);
                    r.headers.push(("etag", etag));
                    return Ok(r);
                }
                let mut r = Reply::json(200, &v);
                r.headers.push(("etag", etag));
                if let Some(link) = described {
                    r.headers.push(("link", link));
                }
                r
            }
        };
        reply.headers.push(("cache-control", "no-cache".into()));
        reply.headers.push(("allow", allow(route)));
        if req.method == Method::HEAD {
            reply.body.clear();
        }
        Ok(reply)
    }

    /// The resource `route` names, as a GET answers it.
    fn render(
        &self,
        m: &dyn Machines,
        route: &Route,
        path: &str,
    ) -> Result<Rendered, RedfishError> {
        use Route::*;
        let now = self.clock.now();
        let missing = || RedfishError::not_found(path);
        let one = |id: &str| m.find(id).ok_or_else(missing);
        let json = |v: Option<Value>| v.map(Rendered::Json).ok_or_else(missing);
        Ok(Rendered::Json(match route {
            Versions => root::versions(),
            Root => root::service_root(&self.uuid),
            OData => root::odata(),
            Metadata => return Ok(Rendered::Xml(root::metadata())),
            Systems => systems::systems(&m.list()),
            System(id) => systems::system(&one(id)?),
            Processors(id) => systems::processors(&one(id)?),
            Processor(id, p) => return json(systems::processor(&one(id)?, p)),
            Memories(id) => systems::memories(&one(id)?),
            Memory(id, d) => return json(systems::memory(&one(id)?, d)),
            Storages(id) => systems::storages(&one(id)?),
            Storage(id, s) => return json(systems::storage(&one(id)?, s)),
            Nics(id) => systems::nics(&one(id)?),
            Nic(id, n) => return json(systems::nic(&one(id)?, n)),
            Bios(id) => systems::bios(&one(id)?),
            BiosSettings(id) => systems::bios_settings(&one(id)?),
            SecureBoot(id) => systems::secure_boot(&one(id)?),
            Managers => managers::managers(&m.list()),
            Manager(id) => managers::manager(&one(id)?, now),
            Medias(id) => managers::medias(&one(id)?),
            Media(id, d) => return json(managers::media(&one(id)?, d)),
            Chassis => chassis::all_chassis(&m.list()),
            OneChassis(id) => chassis::chassis(&one(id)?),
            Drives(id) => chassis::drives(&one(id)?),
            Drive(id, d) => return json(chassis::drive(&one(id)?, d)),
            _ => return self.render_service(route, path),
        }))
    }

    /// The service-wide resources (sessions, accounts, roles, updates, tasks).
    fn render_service(&self, route: &Route, path: &str) -> Result<Rendered, RedfishError> {
        use Route::*;
        let now = self.clock.now();
        let mut st = self.state();
        let missing = || RedfishError::not_found(path);
        Ok(Rendered::Json(match route {
            SessionService => services::session_service(st.sessions.timeout),
            Sessions => services::sessions(st.sessions.all(now)),
            Session(id) => services::session(&st.sessions.get(id, now).ok_or_else(missing)?),
            AccountService => services::account_service(),
            Accounts => services::accounts(st.accounts.all()),
            Account(id) => services::account(st.accounts.get(id).ok_or_else(missing)?),
            Roles => services::roles(),
            Role(id) => services::role(id).ok_or_else(missing)?,
            UpdateService => services::update_service(),
            Firmwares => services::firmwares(),
            Firmware(id) => services::firmware(id).ok_or_else(missing)?,
            TaskService => services::task_service(now),
            Tasks => services::tasks(),
            _ => return Err(missing()),
        }))
    }

    /// `If-Match`: the resource must still be what the client last read.
    fn check_etag(
        &self,
        m: &dyn Machines,
        route: &Route,
        who: &Principal,
        req: &Request<'_>,
    ) -> Result<(), RedfishError> {
        let Some(wanted) = header(req.headers, "if-match") else {
            return Ok(());
        };
        if !who.account.may("Login") {
            return Err(RedfishError::insufficient_privilege());
        }
        match self.render(m, route, req.path)? {
            Rendered::Json(v) if etag_matches(wanted, &etag_of(&v)) => Ok(()),
            _ => Err(RedfishError::precondition_failed()),
        }
    }

    /// A PATCH, POST (an action or a new account) or DELETE.
    fn change(
        &self,
        m: &dyn Machines,
        route: &Route,
        who: &Principal,
        req: &Request<'_>,
        body: &Value,
    ) -> Result<Reply, RedfishError> {
        use Route::*;
        let now = self.clock.now();
        let hardware = |id: &str| -> Result<Hardware, RedfishError> {
            if !who.account.may("ConfigureComponents") {
                return Err(RedfishError::insufficient_privilege());
            }
            m.find(id).ok_or_else(|| RedfishError::not_found(id))
        };
        match route {
            System(id) => actions::patch_system(m, &hardware(id)?, body)?,
            Reset(id) => actions::reset(m, &hardware(id)?, body, now)?,
            BiosSettings(id) => actions::patch_bios(m, &hardware(id)?, body)?,
            BiosReset(id) => actions::reset_bios(m, &hardware(id)?)?,
            SecureBoot(id) => actions::patch_secure_boot(m, &hardware(id)?, body)?,
            ManagerReset(id) => {
                hardware(id)?;
            }
            InsertMedia(id, d) => actions::insert_media(m, &hardware(id)?, d, body)?,
            EjectMedia(id, d) => actions::eject_media(m, &hardware(id)?, d)?,
            Media(id, d) => actions::patch_media(m, &hardware(id)?, d, body)?,
            _ => return self.change_service(route, who, req.method, body),
        }
        Ok(match route {
            System(_) | BiosSettings(_) | SecureBoot(_) | Media(..) => {
                self.get_after_change(m, route, req.path)?
            }
            _ => Reply::empty(204),
        })
    }

    /// The resource as it is after a PATCH: what a PATCH answers.
    fn get_after_change(
        &self,
        m: &dyn Machines,
        route: &Route,
        path: &str,
    ) -> Result<Reply, RedfishError> {
        match self.render(m, route, path)? {
            Rendered::Json(v) => {
                let (v, etag) = with_etag(v);
                let mut r = Reply::json(200, &v);
                r.headers.push(("etag", etag));
                Ok(r)
            }
            Rendered::Xml(_) => Ok(Reply::empty(204)),
        }
    }

    /// The changes to the service itself: session timeout, logouts, accounts.
    fn change_service(
        &self,
        route: &Route,
        who: &Principal,
        method: &Method,
        body: &Value,
    ) -> Result<Reply, RedfishError> {
        use Route::*;
        let mut st = self.state();
        match (route, method) {
            (SessionService, _) => {
                if !who.account.may("ConfigureManager") {
                    return Err(RedfishError::insufficient_privilege());
                }
                st.sessions.timeout = session_timeout(body)?.unwrap_or(st.sessions.timeout);
                let v = with_etag(services::session_service(st.sessions.timeout));
                let mut r = Reply::json(200, &v.0);
                r.headers.push(("etag", v.1));
                Ok(r)
            }
            (Session(id), _) => {
                let own = who.session.as_deref() == Some(id.as_str());
                if !own && !who.account.may("ConfigureManager") {
                    return Err(RedfishError::insufficient_privilege());
                }
                if !st.sessions.close(id) {
                    return Err(RedfishError::not_found(&services::session_path(id)));
                }
                Ok(Reply::empty(204))
            }
            (Accounts, _) => {
                if !who.account.may("ConfigureUsers") {
                    return Err(RedfishError::insufficient_privilege());
                }
                let a = st.accounts.create(body)?;
                let mut r = Reply::json(201, &with_etag(services::account(&a)).0);
                r.headers.push(("location", services::account_path(&a.id)));
                Ok(r)
            }
            (Account(id), &Method::DELETE) => {
                if !who.account.may("ConfigureUsers") {
                    return Err(RedfishError::insufficient_privilege());
                }
                let gone = st.accounts.delete(id)?;
                st.sessions.close_account(&gone.id);
                Ok(Reply::empty(204))
            }
            (Account(id), _) => {
                st.accounts.update(id, body, &who.account)?;
                let a = st
                    .accounts
                    .get(id)
                    .cloned()
                    .ok_or_else(|| RedfishError::not_found(id))?;
                if !a.enabled {
                    st.sessions.close_account(&a.id);
                }
                let v = with_etag(services::account(&a));
                let mut r = Reply::json(200, &v.0);
                r.headers.push(("etag", v.1));
                Ok(r)
            }
            _ => Err(RedfishError::method_not_allowed()),
        }
    }
}

/// `SessionTimeout` from a PATCH of the session service, in DSP0266's range.
fn session_timeout(body: &Value) -> Result<Option<u64>, RedfishError> {
    let fields = body.as_object().ok_or_else(RedfishError::malformed_json)?;
    let mut out = None;
    for (k, v) in fields {
        match k.as_str() {
            "SessionTimeout" => {
                let n = v
                    .as_u64()
                    .ok_or_else(|| RedfishError::value_type(&v.to_string(), k))?;
                if !TIMEOUT_RANGE.contains(&n) {
                    return Err(RedfishError::value_out_of_range(&n.to_string(), k));
                }
                out = Some(n);
            }
            k if k.starts_with('@') => {}
            "ServiceEnabled" | "Id" | "Name" | "Sessions" | "Status" => {
                return Err(RedfishError::property_not_writable(k))
            }
            other => return Err(RedfishError::property_unknown(other)),
        }
    }
    Ok(out)
}

/// The `Allow` header of a resource.
fn allow(route: &Route) -> String {
    route
        .allows()
        .iter()
        .map(Method::as_str)
        .collect::<Vec<_>>()
        .join(", ")
}

/// A request body as JSON: none is an empty object (an action without parameters).
fn body_json(body: &[u8]) -> Result<Value, RedfishError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(Value::Object(Default::default()));
    }
    match serde_json::from_slice::<Value>(body) {
        Ok(v @ Value::Object(_)) => Ok(v),
        _ => Err(RedfishError::malformed_json()),
    }
}

/// The resource with its `@odata.etag`, and the ETag: a weak tag from a hash of the body.
fn with_etag(mut v: Value) -> (Value, String) {
    let etag = etag_of(&v);
    if let Value::Object(map) = &mut v {
        map.insert("@odata.etag".into(), Value::String(etag.clone()));
    }
    (v, etag)
}

/// The ETag of a rendered resource (without its `@odata.etag`): a weak tag from its hash.
fn etag_of(v: &Value) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, v.to_string().as_bytes());
    let hex: String = digest.as_ref()[..8]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("W/\"{hex}\"")
}

/// The `Link` header naming a resource's JSON schema (`rel=describedby`), from its
/// `@odata.type` (`#ComputerSystem.v1_20_0.ComputerSystem` → `ComputerSystem.v1_20_0.json`).
fn described_by(v: &Value) -> Option<String> {
    let ty = v.get("@odata.type")?.as_str()?.trim_start_matches('#');
    let (namespace, _) = ty.rsplit_once('.')?;
    Some(format!(
        "<http://redfish.dmtf.org/schemas/v1/{namespace}.json>; rel=describedby"
    ))
}

/// Whether an `If-Match`/`If-None-Match` list names `etag` (weak or strong form, or `*`).
fn etag_matches(list: &str, etag: &str) -> bool {
    let bare = etag.trim_start_matches("W/");
    list.split(',')
        .map(str::trim)
        .any(|t| t == "*" || t.trim_start_matches("W/") == bare)
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// The user and password of a `Basic` authorization.
fn basic(value: &str) -> Option<(String, String)> {
    let (scheme, rest) = value.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(rest.trim())
        .ok()?;
    let text = String::from_utf8(decoded).ok()?;
    let (u, p) = text.split_once(':')?;
    Some((u.to_string(), p.to_string()))
}
