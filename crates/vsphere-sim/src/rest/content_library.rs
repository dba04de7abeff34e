//! The content library service (`/rest/com/vmware/content/...`, `/api/content/...`) and the
//! deployment of its OVF items (`/rest/com/vmware/vcenter/ovf/library-item`,
//! `/api/vcenter/ovf/library-item`), as govmomi's `vapi/library` and `vapi/vcenter` packages
//! (govc `library.*`, CAPV's OVF templates) speak them: local libraries backed by a datastore,
//! items in them, update sessions through which a client adds an item's files, and the
//! deployment of an OVF item as a VM of the SOAP inventory.
//!
//! A file is pushed to the upload URL its session hands out (`/cls/data/<session>/<file>`,
//! served by this simulator's HTTPS server, as vCenter's transfer service serves its own) and
//! becomes part of the item only when the session completes, as on vCenter. vCenter's rules
//! kept: library names are unique, item names unique within their library; a session
//! completes only once every file added to it is uploaded; deleting a library deletes its
//! items, and an item its sessions. Bytes live in memory; an OVF descriptor is read for its
//! VM's name, CPUs and memory only (no disks, networks or properties).

use super::Sim;
use super::{spec, text, Answer, Form, Request};
use crate::datastore_files::{percent_decode, query_param, FileAnswer};
use crate::objects::is_a;
use crate::value::{Moref, Val};
use bytes::Bytes;
use chrono::{DateTime, Utc};
use http::Method;
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// Where upload URLs point: `/cls/data/<session>/<file>`.
pub const UPLOAD_PREFIX: &str = "/cls/data/";

#[derive(Debug, Clone)]
struct Library {
    name: String,
    description: String,
    /// The datastore (reference value) the library's storage backing names.
    datastore: String,
    created: DateTime<Utc>,
    modified: DateTime<Utc>,
    version: u64,
}

#[derive(Debug, Clone)]
struct Item {
    library: String,
    name: String,
    description: String,
    /// `ovf`, `iso`, … as the client says; an item given none becomes `ovf` when an `.ovf`
    /// file arrives, as vCenter infers it.
    ty: String,
    files: BTreeMap<String, Bytes>,
    created: DateTime<Utc>,
    modified: DateTime<Utc>,
    content_version: u64,
}

/// An update session's lifecycle, in vCenter's words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Active,
    Done,
    Canceled,
    Error,
}

impl Phase {
    fn word(self) -> &'static str {
        match self {
            Phase::Active => "ACTIVE",
            Phase::Done => "DONE",
            Phase::Canceled => "CANCELED",
            Phase::Error => "ERROR",
        }
    }
}

/// A file added to an update session: where to push it, and its bytes once pushed.
#[derive(Debug, Clone)]
struct Upload {
    uri: String,
    /// The size the client announced (0 when it did not).
    size: i64,
    data: Option<Bytes>,
}

#[derive(Debug, Clone)]
struct UpdateSession {
    item: String,
    phase: Phase,
    files: BTreeMap<String, Upload>,
    expires: DateTime<Utc>,
    /// The item's content version when the session began.
    content_version: u64,
}

/// A simulator's libraries, items and update sessions, by ID.
#[derive(Debug, Default)]
pub(crate) struct ContentLibrary {
    libraries: BTreeMap<String, Library>,
    items: BTreeMap<String, Item>,
    sessions: BTreeMap<String, UpdateSession>,
}

/// What a content library path names, in either spelling.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Target {
    Libraries,
    Library(String),
    Items,
    Item(String),
    Sessions,
    Session(String),
    /// An update session's files (`/rest` names the session in the query when listing).
    SessionFiles(Option<String>),
    /// An item's files (`/rest` names the item in the query when listing).
    ItemFiles(Option<String>),
    Ovf(String),
}

/// The content library resource `path` (after `/rest` or `/api`) names, if it is one.
/// `/rest` says `/com/vmware/content/library/id:<id>`, `/api` says `/content/library/<id>`.
pub(super) fn route(form: Form, path: &str) -> Option<Target> {
    let rest = match form {
        Form::Rest => path.strip_prefix("/com/vmware/")?,
        Form::Api => path.strip_prefix('/')?,
    };
    let segments: Vec<&str> = rest.split('/').collect();
    let id = |s: &str| percent_decode(s.strip_prefix("id:").unwrap_or(s));
    Some(match segments.as_slice() {
        ["content", "library" | "local-library"] => Target::Libraries,
        ["content", "library", "item"] => Target::Items,
        ["content", "library", "item", "update-session"] => Target::Sessions,
        ["content", "library", "item", "update-session", s] => Target::Session(id(s)),
        ["content", "library", "item", "update-session", s, "file"] => {
            Target::SessionFiles(Some(id(s)))
        }
        ["content", "library", "item", "updatesession", "file"] => Target::SessionFiles(None),
        ["content", "library", "item", "updatesession", "file", s] => {
            Target::SessionFiles(Some(id(s)))
        }
        ["content", "library", "item", "file"] => Target::ItemFiles(None),
        ["content", "library", "item", "file", s] | ["content", "library", "item", s, "file"] => {
            Target::ItemFiles(Some(id(s)))
        }
        ["content", "library", "item", s] => Target::Item(id(s)),
        ["content", "library" | "local-library", s] => Target::Library(id(s)),
        ["vcenter", "ovf", "library-item", s] => Target::Ovf(id(s)),
        _ => return None,
    })
}

/// What every operation needs besides its body.
struct Ctx<'a> {
    form: Form,
    now: DateTime<Utc>,
    query: &'a str,
    action: Option<&'a str>,
    /// `host:port` the client reached us at, for the upload URLs handed out.
    host: String,
}

impl Ctx<'_> {
    /// A create's answer: 201 in the `/api` spelling, 200 in `/rest`.
    fn created(&self, id: &str) -> Answer {
        let status = if self.form == Form::Api { 201 } else { 200 };
        Answer::value(self.form, status, json!(id))
    }

    /// The answer of an operation that returns nothing.
    fn done(&self) -> Answer {
        Answer::empty(if self.form == Form::Api { 204 } else { 200 })
    }

    fn ok(&self, value: Value) -> Answer {
        Answer::value(self.form, 200, value)
    }
}

pub(super) fn handle(sim: &Sim<'_>, form: Form, req: &Request<'_>, target: Target) -> Answer {
    let body = match super::json_body(form, req.body) {
        Ok(body) => body,
        Err(refused) => return refused,
    };
    let host = req
        .headers
        .get(http::header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("localhost")
        .to_string();
    let cx = Ctx {
        form,
        now: sim.now(),
        query: req.query.unwrap_or(""),
        action: req.action,
        host,
    };
    let method = req.method.clone();
    match target {
        // Deployment takes the SOAP state's lock, so it reads the library under its own
        // lock first and lets it go (no lock is held across both).
        Target::Ovf(id) => deploy(sim, &cx, &method, &id, &body),
        // A library's datastore is checked against the inventory before the library lock.
        Target::Libraries if method == Method::POST && cx.action.is_none() => {
            let spec = spec(&body, "create_spec");
            let datastore = backing_datastore(spec);
            let exists =
                sim.with_inventory(|inv| inv.get(&Moref::new("Datastore", &datastore)).is_some());
            if !exists {
                return Answer::invalid(
                    form,
                    &format!("A library needs a datastore storage backing; {datastore:?} is none."),
                );
            }
            sim.rest_content_library()
                .create_library(&cx, spec, datastore)
        }
        target => sim
            .rest_content_library()
            .dispatch(&cx, &method, target, &body),
    }
}

/// The datastore of a library spec's first storage backing.
fn backing_datastore(spec: &Value) -> String {
    spec.get("storage_backings")
        .and_then(Value::as_array)
        .and_then(|b| b.first())
        .map(|b| text(b, "datastore_id"))
        .unwrap_or_default()
}

fn time(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

fn not_allowed(form: Form, message: &str) -> Answer {
    Answer::error(
        form,
        400,
        "not_allowed_in_current_state",
        "com.vmware.vapi.std.errors.not_allowed_in_current_state",
        message,
    )
}

/// A file's name from a body: `file_name` (update sessions) or `name` (item files).
fn file_name(body: &Value) -> String {
    let name = text(body, "file_name");
    if name.is_empty() {
        text(body, "name")
    } else {
        name
    }
}

impl ContentLibrary {
    /// Every operation but library creation and deployment.
    fn dispatch(&mut self, cx: &Ctx<'_>, method: &Method, target: Target, body: &Value) -> Answer {
        let form = cx.form;
        match (target, method, cx.action) {
            (Target::Libraries, &Method::GET, None) => {
                cx.ok(json!(self.libraries.keys().collect::<Vec<_>>()))
            }
            (Target::Libraries, &Method::POST, Some("find")) => {
                self.find_libraries(cx, spec(body, "spec"))
            }
            (Target::Library(id), &Method::GET, None) => match self.libraries.get(&id) {
                Some(l) => cx.ok(library_json(&id, l)),
                None => Answer::missing(form, "Library", &id),
            },
            (Target::Library(id), &Method::PATCH, None) => {
                self.update_library(cx, &id, spec(body, "update_spec"))
            }
            (Target::Library(id), &Method::DELETE, None) => self.delete_library(cx, &id),
            (Target::Items, &Method::POST, None | Some("create")) => {
                self.create_item(cx, spec(body, "create_spec"))
            }
            (Target::Items, &Method::POST, Some("find")) => self.find_items(cx, spec(body, "spec")),
            (Target::Items, &Method::GET, None) => {
                let library = query_param(cx.query, "library_id").unwrap_or_default();
                if !self.libraries.contains_key(&library) {
                    return Answer::missing(form, "Library", &library);
                }
                let ids: Vec<&String> = self
                    .items
                    .iter()
                    .filter(|(_, i)| i.library == library)
                    .map(|(id, _)| id)
                    .collect();
                cx.ok(json!(ids))
            }
            (Target::Item(id), &Method::GET, None) => match self.items.get(&id) {
                Some(i) => cx.ok(item_json(&id, i)),
                None => Answer::missing(form, "Library item", &id),
            },
            (Target::Item(id), &Method::PATCH, None) => {
                self.update_item(cx, &id, spec(body, "update_spec"))
            }
            (Target::Item(id), &Method::DELETE, None) => self.delete_item(cx, &id),
            (target @ (Target::Sessions | Target::Session(_)), method, action) => {
                self.sessions(cx, method, target, action, body)
            }
            (Target::SessionFiles(id), method, action) => {
                self.session_files(cx, method, id, action, body)
            }
            (Target::ItemFiles(id), method, action) => {
                let id = id
                    .or_else(|| query_param(cx.query, "library_item_id"))
                    .unwrap_or_default();
                self.item_files(cx, method, &id, action, body)
            }
            _ => Answer::error(
                form,
                405,
                "operation_not_found",
                "com.vmware.vapi.rest.httpMethodNotAllowed",
                "This method is not allowed here.",
            ),
        }
    }

    fn create_library(&mut self, cx: &Ctx<'_>, spec: &Value, datastore: String) -> Answer {
        let name = text(spec, "name");
        if name.is_empty() {
            return Answer::invalid(cx.form, "A library needs a name.");
        }
        if self.libraries.values().any(|l| l.name == name) {
            return Answer::already_exists(
                cx.form,
                &format!("A library named {name} already exists."),
            );
        }
        let id = uuid::Uuid::new_v4().to_string();
        let library = Library {
            name,
            description: text(spec, "description"),
            datastore,
            created: cx.now,
            modified: cx.now,
            version: 1,
        };
        self.libraries.insert(id.clone(), library);
        cx.created(&id)
    }

    /// Libraries by name (as vCenter compares them, ignoring case) and type (all are LOCAL).
    fn find_libraries(&self, cx: &Ctx<'_>, spec: &Value) -> Answer {
        let name = text(spec, "name");
        let ty = text(spec, "type");
        let ids: Vec<&String> = self
            .libraries
            .iter()
            .filter(|(_, l)| name.is_empty() || l.name.eq_ignore_ascii_case(&name))
            .filter(|_| ty.is_empty() || ty == "LOCAL")
            .map(|(id, _)| id)
            .collect();
        cx.ok(json!(ids))
    }

    fn update_library(&mut self, cx: &Ctx<'_>, id: &str, spec: &Value) -> Answer {
        let name = text(spec, "name");
        if !name.is_empty()
            && self
                .libraries
                .iter()
                .any(|(other, l)| other != id && l.name == name)
        {
            return Answer::already_exists(
                cx.form,
                &format!("A library named {name} already exists."),
            );
        }
        let Some(l) = self.libraries.get_mut(id) else {
            return Answer::missing(cx.form, "Library", id);
        };
        if !name.is_empty() {
            l.name = name;
        }
        if let Some(d) = spec.get("description").and_then(Value::as_str) {
            l.description = d.to_string();
        }
        l.modified = cx.now;
        l.version += 1;
        cx.done()
    }

    /// Deletes a library with its items (and their sessions).
    fn delete_library(&mut self, cx: &Ctx<'_>, id: &str) -> Answer {
        if self.libraries.remove(id).is_none() {
            return Answer::missing(cx.form, "Library", id);
        }
        let items: Vec<String> = self
            .items
            .iter()
            .filter(|(_, i)| i.library == id)
            .map(|(item, _)| item.clone())
            .collect();
        for item in items {
            self.remove_item(&item);
        }
        cx.done()
    }

    fn remove_item(&mut self, id: &str) -> bool {
        self.sessions.retain(|_, s| s.item != id);
        self.items.remove(id).is_some()
    }

    fn create_item(&mut self, cx: &Ctx<'_>, spec: &Value) -> Answer {
        let library = text(spec, "library_id");
        let name = text(spec, "name");
        if !self.libraries.contains_key(&library) {
            return Answer::missing(cx.form, "Library", &library);
        }
        if name.is_empty() {
            return Answer::invalid(cx.form, "A library item needs a name.");
        }
        if self
            .items
            .values()
            .any(|i| i.library == library && i.name == name)
        {
            return Answer::already_exists(
                cx.form,
                &format!("An item named {name} already exists in library {library}."),
            );
        }
        let id = uuid::Uuid::new_v4().to_string();
        let item = Item {
            library,
            name,
            description: text(spec, "description"),
            ty: text(spec, "type"),
            files: BTreeMap::new(),
            created: cx.now,
            modified: cx.now,
            content_version: 1,
        };
        self.items.insert(id.clone(), item);
        cx.created(&id)
    }

    fn find_items(&self, cx: &Ctx<'_>, spec: &Value) -> Answer {
        let matches = |key: &str, value: &str| {
            let wanted = text(spec, key);
            wanted.is_empty() || wanted == value
        };
        let ids: Vec<&String> = self
            .items
            .iter()
            .filter(|(_, i)| {
                matches("library_id", &i.library)
                    && matches("name", &i.name)
                    && matches("type", &i.ty)
            })
            .map(|(id, _)| id)
            .collect();
        cx.ok(json!(ids))
    }

    fn update_item(&mut self, cx: &Ctx<'_>, id: &str, spec: &Value) -> Answer {
        let name = text(spec, "name");
        let Some(library) = self.items.get(id).map(|i| i.library.clone()) else {
            return Answer::missing(cx.form, "Library item", id);
        };
        if !name.is_empty()
            && self
                .items
                .iter()
                .any(|(other, i)| other != id && i.library == library && i.name == name)
        {
            return Answer::already_exists(
                cx.form,
                &format!("An item named {name} already exists in library {library}."),
            );
        }
        if let Some(i) = self.items.get_mut(id) {
            if !name.is_empty() {
                i.name = name;
            }
            if let Some(d) = spec.get("description").and_then(Value::as_str) {
                i.description = d.to_string();
            }
            i.modified = cx.now;
        }
        cx.done()
    }

    fn delete_item(&mut self, cx: &Ctx<'_>, id: &str) -> Answer {
        if !self.remove_item(id) {
            return Answer::missing(cx.form, "Library item", id);
        }
        cx.done()
    }

    /// Update sessions: create, list, get, delete, and the `complete`, `cancel`, `fail` and
    /// `keep-alive` actions.
    fn sessions(
        &mut self,
        cx: &Ctx<'_>,
        method: &Method,
        target: Target,
        action: Option<&str>,
        body: &Value,
    ) -> Answer {
        let form = cx.form;
        let id = match (target, method, action) {
            (Target::Sessions, &Method::POST, None | Some("create")) => {
                return self.create_session(cx, spec(body, "create_spec"))
            }
            (Target::Sessions, &Method::GET, None) => {
                return cx.ok(json!(self.sessions.keys().collect::<Vec<_>>()))
            }
            (Target::Session(id), _, _) => id,
            _ => return Answer::not_found(form, "update session operation"),
        };
        let Some(session) = self.sessions.get_mut(&id) else {
            return Answer::missing(form, "Update session", &id);
        };
        match (method, action) {
            (&Method::GET, None) => cx.ok(session_json(&id, session)),
            (&Method::DELETE, None) => {
                self.sessions.remove(&id);
                cx.done()
            }
            (&Method::POST, Some("keep-alive")) => {
                session.expires = cx.now + chrono::Duration::hours(1);
                cx.done()
            }
            (&Method::POST, Some(action @ ("cancel" | "fail"))) => {
                if session.phase != Phase::Active {
                    return not_allowed(form, &format!("Update session {id} is not active."));
                }
                session.phase = if action == "cancel" {
                    Phase::Canceled
                } else {
                    Phase::Error
                };
                cx.done()
            }
            (&Method::POST, Some("complete")) => self.complete(cx, &id),
            _ => Answer::not_found(form, "update session operation"),
        }
    }

    fn create_session(&mut self, cx: &Ctx<'_>, spec: &Value) -> Answer {
        let item = text(spec, "library_item_id");
        let Some(i) = self.items.get(&item) else {
            return Answer::missing(cx.form, "Library item", &item);
        };
        let id = uuid::Uuid::new_v4().to_string();
        let session = UpdateSession {
            content_version: i.content_version,
            item,
            phase: Phase::Active,
            files: BTreeMap::new(),
            expires: cx.now + chrono::Duration::hours(1),
        };
        self.sessions.insert(id.clone(), session);
        cx.created(&id)
    }

    /// Completes a session: its files, all uploaded, replace the item's files of their names.
    fn complete(&mut self, cx: &Ctx<'_>, id: &str) -> Answer {
        let form = cx.form;
        let Some(session) = self.sessions.get_mut(id) else {
            return Answer::missing(form, "Update session", id);
        };
        if session.phase != Phase::Active {
            return not_allowed(form, &format!("Update session {id} is not active."));
        }
        if let Some((name, _)) = session.files.iter().find(|(_, f)| f.data.is_none()) {
            return not_allowed(
                form,
                &format!("File {name} of update session {id} has not been uploaded."),
            );
        }
        let Some(item) = self.items.get_mut(&session.item) else {
            return Answer::missing(form, "Library item", &session.item);
        };
        session.phase = Phase::Done;
        for (name, file) in &session.files {
            if let Some(data) = &file.data {
                item.files.insert(name.clone(), data.clone());
            }
        }
        if item.ty.is_empty() && item.files.keys().any(|f| f.ends_with(".ovf")) {
            item.ty = "ovf".to_string();
        }
        item.content_version += 1;
        item.modified = cx.now;
        cx.done()
    }

    /// An update session's files: `add` (a PUSH file gets its upload URL), `get`, `remove`,
    /// and the list.
    fn session_files(
        &mut self,
        cx: &Ctx<'_>,
        method: &Method,
        id: Option<String>,
        action: Option<&str>,
        body: &Value,
    ) -> Answer {
        let form = cx.form;
        let id = id
            .or_else(|| query_param(cx.query, "update_session_id"))
            .unwrap_or_default();
        let Some(session) = self.sessions.get_mut(&id) else {
            return Answer::missing(form, "Update session", &id);
        };
        match (method, action) {
            (&Method::GET, None) | (&Method::POST, Some("list")) => {
                let files: Vec<Value> = session
                    .files
                    .iter()
                    .map(|(name, f)| upload_json(name, f))
                    .collect();
                cx.ok(json!(files))
            }
            (&Method::POST, Some("add")) => {
                if session.phase != Phase::Active {
                    return not_allowed(form, &format!("Update session {id} is not active."));
                }
                add_file(cx, &id, session, spec(body, "file_spec"))
            }
            (&Method::POST, Some("get")) => match session.files.get(&file_name(body)) {
                Some(f) => cx.ok(upload_json(&file_name(body), f)),
                None => Answer::missing(form, "File", &file_name(body)),
            },
            (&Method::POST, Some("remove")) => match session.files.remove(&file_name(body)) {
                Some(_) => cx.done(),
                None => Answer::missing(form, "File", &file_name(body)),
            },
            _ => Answer::not_found(form, "update session file operation"),
        }
    }

    /// An item's files: the list, and one by name (`get`).
    fn item_files(
        &self,
        cx: &Ctx<'_>,
        method: &Method,
        id: &str,
        action: Option<&str>,
        body: &Value,
    ) -> Answer {
        let Some(item) = self.items.get(id) else {
            return Answer::missing(cx.form, "Library item", id);
        };
        let file = |name: &str, data: &Bytes| {
            json!({"name": name, "size": data.len(), "cached": true,
                   "version": item.content_version.to_string()})
        };
        match (method, action) {
            (&Method::GET, None) => {
                let files: Vec<Value> = item.files.iter().map(|(n, d)| file(n, d)).collect();
                cx.ok(json!(files))
            }
            (&Method::POST, Some("get")) => {
                let name = file_name(body);
                match item.files.get(&name) {
                    Some(d) => cx.ok(file(&name, d)),
                    None => Answer::missing(cx.form, "File", &name),
                }
            }
            _ => Answer::not_found(cx.form, "library item file operation"),
        }
    }

    /// The bytes of an item's OVF descriptor (its first `.ovf` file), and the item's name.
    /// The item `item` of library `library` with `files`, creating the library (on the
    /// datastore `datastore`, a reference value) and the item when there are none of those
    /// names; an existing item keeps its files. What the library's provisioning calls
    /// (`Simulator::add_library_item`) do at once. Returns the item's ID.
    pub(crate) fn ensure_item(
        &mut self,
        library: &str,
        datastore: &str,
        item: &str,
        ty: &str,
        files: &[(String, Bytes)],
        now: DateTime<Utc>,
    ) -> String {
        let library_id = match self.libraries.iter().find(|(_, l)| l.name == library) {
            Some((id, _)) => id.clone(),
            None => {
                let id = uuid::Uuid::new_v4().to_string();
                let l = Library {
                    name: library.to_string(),
                    description: String::new(),
                    datastore: datastore.to_string(),
                    created: now,
                    modified: now,
                    version: 1,
                };
                self.libraries.insert(id.clone(), l);
                id
            }
        };
        if let Some((id, _)) = self
            .items
            .iter()
            .find(|(_, i)| i.library == library_id && i.name == item)
        {
            return id.clone();
        }
        let id = uuid::Uuid::new_v4().to_string();
        let i = Item {
            library: library_id,
            name: item.to_string(),
            description: String::new(),
            ty: ty.to_string(),
            files: files.iter().cloned().collect(),
            created: now,
            modified: now,
            content_version: 1,
        };
        self.items.insert(id.clone(), i);
        id
    }

    /// The CPUs and memory (MiB) the OVF of item `id` asks for, if the item exists.
    pub(crate) fn ovf_size(&self, id: &str) -> Option<(Option<i64>, Option<i64>)> {
        let (_, ovf) = self.ovf_of(id)?;
        let system = ovf.map(|o| read_ovf(&o)).unwrap_or_default();
        Some((system.cpus, system.memory_mb))
    }

    pub(crate) fn ovf_of(&self, id: &str) -> Option<(String, Option<Bytes>)> {
        let item = self.items.get(id)?;
        let ovf = item
            .files
            .iter()
            .find(|(name, _)| name.to_ascii_lowercase().ends_with(".ovf"))
            .map(|(_, data)| data.clone());
        Some((item.name.clone(), ovf))
    }
}

/// Adds a file to an active session. PUSH files get an upload URL on this server; PULL (the
/// server fetching a URL itself) is not simulated and refused as such.
fn add_file(cx: &Ctx<'_>, session_id: &str, session: &mut UpdateSession, spec: &Value) -> Answer {
    let name = text(spec, "name");
    if name.is_empty() || name.contains('/') {
        return Answer::invalid(cx.form, &format!("Invalid file name {name:?}."));
    }
    let source = text(spec, "source_type");
    if source != "PUSH" {
        return Answer::invalid(
            cx.form,
            &format!("Source type {source:?} is not supported by the simulator: use PUSH."),
        );
    }
    let encoded = percent_encoding::utf8_percent_encode(&name, percent_encoding::NON_ALPHANUMERIC);
    let upload = Upload {
        uri: format!("https://{}{UPLOAD_PREFIX}{session_id}/{encoded}", cx.host),
        size: spec.get("size").and_then(Value::as_i64).unwrap_or(0),
        data: None,
    };
    let answer = cx.ok(upload_json(&name, &upload));
    session.files.insert(name, upload);
    answer
}

fn library_json(id: &str, l: &Library) -> Value {
    json!({"id": id, "name": l.name, "description": l.description, "type": "LOCAL",
           "storage_backings": [{"type": "DATASTORE", "datastore_id": l.datastore}],
           "creation_time": time(l.created), "last_modified_time": time(l.modified),
           "version": l.version.to_string()})
}

fn item_json(id: &str, i: &Item) -> Value {
    let size: usize = i.files.values().map(Bytes::len).sum();
    json!({"id": id, "library_id": i.library, "name": i.name, "description": i.description,
           "type": i.ty, "size": size, "cached": true,
           "content_version": i.content_version.to_string(), "metadata_version": "1",
           "version": i.content_version.to_string(),
           "creation_time": time(i.created), "last_modified_time": time(i.modified)})
}

fn session_json(id: &str, s: &UpdateSession) -> Value {
    let progress = if s.phase == Phase::Done { 100 } else { 0 };
    json!({"id": id, "library_item_id": s.item, "state": s.phase.word(),
           "library_item_content_version": s.content_version.to_string(),
           "client_progress": progress, "expiration_time": time(s.expires)})
}

fn upload_json(name: &str, f: &Upload) -> Value {
    let transferred = f.data.as_ref().map_or(0, Bytes::len);
    let (status, size) = match &f.data {
        Some(d) => ("READY", d.len() as i64),
        None => ("WAITING_FOR_TRANSFER", f.size),
    };
    json!({"name": name, "source_type": "PUSH", "status": status, "size": size,
           "bytes_transferred": transferred, "upload_endpoint": {"uri": f.uri}})
}

/// Stores the bytes PUT or POSTed to an upload URL (`/cls/data/<session>/<file>`), in the
/// session of a REST token or of a SOAP cookie (govmomi uploads with either). The file must
/// have been added to a session that is still active.
pub(super) fn upload(
    sim: &Sim<'_>,
    method: &Method,
    path: &str,
    headers: &http::HeaderMap,
    body: Bytes,
) -> FileAnswer {
    let text = FileAnswer::text;
    if *method != Method::PUT && *method != Method::POST {
        return text(405, "uploads are PUT or POST");
    }
    let probe = Request {
        method,
        path,
        action: None,
        query: None,
        headers,
        body: &[],
    };
    let cookie = headers
        .get(http::header::COOKIE)
        .and_then(|c| c.to_str().ok());
    let authenticated = super::session::current(sim, &probe).is_some()
        || cookie.and_then(|c| sim.soap_session_user(c)).is_some();
    if !authenticated {
        return text(401, "a session is required");
    }
    let Some((session, name)) = path
        .strip_prefix(UPLOAD_PREFIX)
        .and_then(|rest| rest.split_once('/'))
    else {
        return text(404, "no such upload");
    };
    let mut library = sim.rest_content_library();
    let file = library
        .sessions
        .get_mut(&percent_decode(session))
        .filter(|s| s.phase == Phase::Active)
        .and_then(|s| s.files.get_mut(&percent_decode(name)));
    match file {
        Some(f) => {
            f.data = Some(body);
            text(200, "")
        }
        None => text(404, "no such file in an active update session"),
    }
}

/// What an OVF descriptor says of its first VirtualSystem.
#[derive(Debug, Default, PartialEq)]
struct OvfSystem {
    name: Option<String>,
    cpus: Option<i64>,
    memory_mb: Option<i64>,
}

/// Reads an OVF descriptor's VM name (`ovf:id`, or its `Name`), CPUs (resource type 3) and
/// memory (resource type 4, in its allocation units); anything unreadable is left out, so the
/// VM gets the simulator's defaults.
fn read_ovf(bytes: &[u8]) -> OvfSystem {
    let mut out = OvfSystem::default();
    let Ok(doc) = std::str::from_utf8(bytes).map(roxmltree::Document::parse) else {
        return out;
    };
    let Ok(doc) = doc else { return out };
    let named = |n: &roxmltree::Node<'_, '_>, name: &str| n.tag_name().name() == name;
    let Some(system) = doc.descendants().find(|n| named(n, "VirtualSystem")) else {
        return out;
    };
    let child = |n: roxmltree::Node<'_, '_>, name: &str| {
        n.children()
            .find(|c| named(c, name))
            .and_then(|c| c.text())
            .map(|t| t.trim().to_string())
    };
    out.name = system
        .attributes()
        .find(|a| a.name() == "id")
        .map(|a| a.value().to_string())
        .or_else(|| child(system, "Name"));
    for item in system.descendants().filter(|n| named(n, "Item")) {
        let quantity = child(item, "VirtualQuantity").and_then(|q| q.parse::<i64>().ok());
        match child(item, "ResourceType").as_deref() {
            Some("3") => out.cpus = quantity,
            Some("4") => {
                let units = child(item, "AllocationUnits").unwrap_or_default();
                let scale = if units.contains("2^30") || units.starts_with("G") {
                    1024
                } else {
                    1
                };
                out.memory_mb = quantity.map(|q| q * scale);
            }
            _ => {}
        }
    }
    out
}

/// The VM folder of the datacenter `entity` is in.
fn vm_folder_of(inv: &crate::objects::Inventory, entity: &Moref) -> Option<Moref> {
    inv.datacenter_of(entity)?
        .props
        .get("vmFolder")
        .and_then(Val::as_mor)
        .cloned()
}

/// Deploys an OVF item (`~action=deploy`) as a VM: in the target's resource pool and folder
/// (the pool's datacenter's VM folder when none is given), named as the deployment spec
/// says (else as the OVF, else as the item), with the OVF's CPUs and memory. A VM that
/// cannot be created (a taken name) is a deployment that did not succeed, as vCenter reports
/// it; an unknown item, pool or folder is not_found.
fn deploy(sim: &Sim<'_>, cx: &Ctx<'_>, method: &Method, id: &str, body: &Value) -> Answer {
    let form = cx.form;
    if *method != Method::POST || cx.action != Some("deploy") {
        return Answer::not_found(form, "OVF library item operation");
    }
    let Some((item_name, ovf)) = sim.rest_content_library().ovf_of(id) else {
        return Answer::missing(form, "Library item", id);
    };
    let Some(ovf) = ovf else {
        return Answer::invalid(form, &format!("Library item {id} has no OVF descriptor."));
    };
    let system = read_ovf(&ovf);
    let deployment = body.get("deployment_spec").unwrap_or(&Value::Null);
    let target = body.get("target").unwrap_or(&Value::Null);
    let pool = text(target, "resource_pool_id");
    if pool.is_empty() {
        return Answer::invalid(form, "target.resource_pool_id is required.");
    }
    let name = Some(text(deployment, "name"))
        .filter(|n| !n.is_empty())
        .or(system.name.clone())
        .unwrap_or(item_name);
    let mut config = vec![field("name", &name)];
    if let Some(n) = system.cpus {
        config.push(field("numCPUs", &n.to_string()));
    }
    if let Some(n) = system.memory_mb {
        config.push(field("memoryMB", &n.to_string()));
    }
    let annotation = text(deployment, "annotation");
    if !annotation.is_empty() {
        config.push(field("annotation", &annotation));
    }
    let placement = Placement {
        pool: Moref::new("ResourcePool", &pool),
        folder: Some(text(target, "folder_id")).filter(|f| !f.is_empty()),
        host: Some(text(target, "host_id")).filter(|h| !h.is_empty()),
        datastore: Some(text(deployment, "default_datastore_id")).filter(|d| !d.is_empty()),
    };
    match create_vm(sim, form, &placement, config) {
        Ok(vm) => cx.ok(json!({"succeeded": true,
                               "resource_id": {"type": "VirtualMachine", "id": vm.value}})),
        Err(Ok(message)) => cx.ok(json!({"succeeded": false, "error": {"errors": [{
            "category": "SERVER",
            "error": {"@class": "com.vmware.vapi.std.errors.error",
                      "messages": [{"id": "com.vmware.ovfs.ovfs-main.ovfs.deploy_failed",
                                    "default_message": message, "args": []}]}}]}})),
        Err(Err(refused)) => refused,
    }
}

/// Where a deployed VM goes: pool, folder, host and datastore (reference values).
struct Placement {
    pool: Moref,
    folder: Option<String>,
    host: Option<String>,
    datastore: Option<String>,
}

fn field(name: &str, value: &str) -> crate::soap::Element {
    crate::soap::Element {
        name: name.to_string(),
        text: value.to_string(),
        ..Default::default()
    }
}

/// Creates the VM as CreateVM_Task does (`folder::create_vm`), under the SOAP state's lock.
/// `Err(Ok(message))` is a VM the inventory refused; `Err(Err(answer))` a target not found.
fn create_vm(
    sim: &Sim<'_>,
    form: Form,
    at: &Placement,
    mut config: Vec<crate::soap::Element>,
) -> Result<Moref, Result<String, Answer>> {
    sim.with_state(|state, call| {
        let inv = &state.inventory;
        let absent = |what: &str, id: &str| Err(Err(Answer::missing(form, what, id)));
        if !inv
            .by_value(&at.pool.value)
            .is_some_and(|p| is_a(&p.moref.ty, "ResourcePool"))
        {
            return absent("Resource pool", &at.pool.value);
        }
        let folder = match &at.folder {
            Some(f) => Moref::new("Folder", f),
            None => match vm_folder_of(inv, &at.pool) {
                Some(f) => f,
                None => return absent("Folder", "of the resource pool's datacenter"),
            },
        };
        if inv.get(&folder).is_none() {
            return absent("Folder", &folder.value);
        }
        let host = at.host.as_deref().map(|h| Moref::new("HostSystem", h));
        if let Some(h) = host.as_ref().filter(|h| inv.get(h).is_none()) {
            return absent("Host", &h.value);
        }
        if let Some(ds) = &at.datastore {
            let Some(name) = inv.get(&Moref::new("Datastore", ds)).map(|d| d.name()) else {
                return absent("Datastore", ds);
            };
            let mut files = field("files", "");
            files
                .children
                .push(field("vmPathName", &format!("[{name}]")));
            config.push(files);
        }
        let spec = crate::soap::Element {
            name: "config".to_string(),
            children: config,
            ..Default::default()
        };
        match crate::folder::create_vm(state, call, &folder, &spec, &at.pool, host.as_ref()) {
            Ok(Some(Val::Mor(vm))) => Ok(vm),
            Ok(_) => Err(Ok("the VM was not created".to_string())),
            Err(fault) => Err(Ok(fault.message)),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::simulator::Simulator;
    use crate::SimConfig;
    use infrasim_clock::FakeClock;
    use std::sync::Arc;

    const OVF: &str = r#"<?xml version="1.0"?>
<Envelope xmlns="http://schemas.dmtf.org/ovf/envelope/1" xmlns:ovf="http://schemas.dmtf.org/ovf/envelope/1"
  xmlns:rasd="http://schemas.dmtf.org/wbem/wscim/1/cim-schema/2/CIM_ResourceAllocationSettingData">
  <VirtualSystem ovf:id="ubuntu-2204">
    <VirtualHardwareSection>
      <Item><rasd:ResourceType>3</rasd:ResourceType><rasd:VirtualQuantity>4</rasd:VirtualQuantity></Item>
      <Item><rasd:AllocationUnits>byte * 2^30</rasd:AllocationUnits>
        <rasd:ResourceType>4</rasd:ResourceType><rasd:VirtualQuantity>2</rasd:VirtualQuantity></Item>
    </VirtualHardwareSection>
  </VirtualSystem>
</Envelope>"#;

    /// A simulator and a REST session token on it.
    fn session() -> (Simulator, String) {
        let config = SimConfig {
            password: "pw".into(),
            ..SimConfig::default()
        };
        let clock = FakeClock::new("2030-01-01T00:00:00Z".parse().unwrap());
        let sim = Simulator::new(config, Arc::new(clock));
        let basic = base64::Engine::encode(
            &base64::engine::general_purpose::STANDARD,
            "administrator@vsphere.local:pw",
        );
        let (_, token) = call_with(
            &sim,
            &[("authorization", &format!("Basic {basic}"))],
            "POST",
            "/api/session",
            b"",
        );
        (sim, token.as_str().unwrap().to_string())
    }

    fn call_with(
        sim: &Simulator,
        headers: &[(&str, &str)],
        method: &str,
        url: &str,
        body: &[u8],
    ) -> (u16, Value) {
        let mut map = http::HeaderMap::new();
        map.insert(http::header::HOST, "127.0.0.1:8989".parse().unwrap());
        for (k, v) in headers {
            map.insert(
                http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                v.parse().unwrap(),
            );
        }
        let (path, query) = url
            .split_once('?')
            .map_or((url, None), |(p, q)| (p, Some(q)));
        let method = Method::from_bytes(method.as_bytes()).unwrap();
        let a = sim.handle_rest(&method, path, query, &map, body).unwrap();
        (
            a.status,
            serde_json::from_str(&a.body).unwrap_or(Value::Null),
        )
    }

    fn call(sim: &Simulator, token: &str, method: &str, url: &str, body: Value) -> (u16, Value) {
        let body = if body.is_null() {
            Vec::new()
        } else {
            body.to_string().into_bytes()
        };
        call_with(sim, &[("vmware-api-session-id", token)], method, url, &body)
    }

    fn first(sim: &Simulator, ty: &str) -> String {
        sim.with_inventory(|inv| {
            inv.iter()
                .find(|o| o.moref.ty == ty)
                .unwrap()
                .moref
                .value
                .clone()
        })
    }

    /// A library on the first datastore with an OVF item, its file uploaded; (library, item).
    fn ovf_item(sim: &Simulator, token: &str) -> (String, String) {
        let ds = first(sim, "Datastore");
        let (status, library) = call(
            sim,
            token,
            "POST",
            "/rest/com/vmware/content/local-library",
            json!({"create_spec": {"name": "templates", "type": "LOCAL",
                   "storage_backings": [{"type": "DATASTORE", "datastore_id": ds}]}}),
        );
        assert_eq!(status, 200, "{library}");
        let library = library["value"].as_str().unwrap().to_string();
        let (_, item) = call(
            sim,
            token,
            "POST",
            "/rest/com/vmware/content/library/item",
            json!({"create_spec": {"name": "ubuntu", "library_id": library, "type": "ovf"}}),
        );
        let item = item["value"].as_str().unwrap().to_string();
        let (_, session) = call(
            sim,
            token,
            "POST",
            "/rest/com/vmware/content/library/item/update-session",
            json!({"create_spec": {"library_item_id": item}}),
        );
        let session = session["value"].as_str().unwrap().to_string();
        let add = format!(
            "/rest/com/vmware/content/library/item/updatesession/file/id:{session}?~action=add"
        );
        let (status, file) = call(
            sim,
            token,
            "POST",
            &add,
            json!({"file_spec": {"name": "ubuntu.ovf", "source_type": "PUSH", "size": OVF.len()}}),
        );
        assert_eq!(status, 200, "{file}");
        assert_eq!(file["value"]["status"], "WAITING_FOR_TRANSFER");
        let uri = file["value"]["upload_endpoint"]["uri"]
            .as_str()
            .unwrap()
            .to_string();
        let path = uri
            .strip_prefix("https://127.0.0.1:8989")
            .expect("our own server");
        let complete = format!(
            "/rest/com/vmware/content/library/item/update-session/id:{session}?~action=complete"
        );
        let (status, refused) = call(sim, token, "POST", &complete, Value::Null);
        assert_eq!(
            (status, refused["type"].as_str()),
            (
                400,
                Some("com.vmware.vapi.std.errors.not_allowed_in_current_state")
            )
        );
        let mut headers = http::HeaderMap::new();
        assert_eq!(
            sim.handle_upload(&Method::PUT, path, &headers, Bytes::from(OVF))
                .status,
            401
        );
        headers.insert("vmware-api-session-id", token.parse().unwrap());
        assert_eq!(
            sim.handle_upload(&Method::PUT, path, &headers, Bytes::from(OVF))
                .status,
            200
        );
        assert_eq!(call(sim, token, "POST", &complete, Value::Null).0, 200);
        (library, item)
    }

    #[test]
    fn both_spellings_route_to_the_same_resources() {
        assert_eq!(
            route(Form::Rest, "/com/vmware/content/local-library/id:a"),
            Some(Target::Library("a".into()))
        );
        assert_eq!(
            route(Form::Api, "/content/library/a"),
            Some(Target::Library("a".into()))
        );
        assert_eq!(
            route(Form::Api, "/content/library/item/i/file"),
            Some(Target::ItemFiles(Some("i".into())))
        );
        assert_eq!(
            route(
                Form::Rest,
                "/com/vmware/content/library/item/updatesession/file"
            ),
            Some(Target::SessionFiles(None))
        );
        assert_eq!(
            route(Form::Api, "/content/library/item/update-session/s/file"),
            Some(Target::SessionFiles(Some("s".into())))
        );
        assert_eq!(
            route(Form::Rest, "/com/vmware/vcenter/ovf/library-item/id:i"),
            Some(Target::Ovf("i".into()))
        );
        assert_eq!(route(Form::Api, "/com/vmware/content/library"), None);
        assert_eq!(route(Form::Rest, "/vcenter/cluster/modules"), None);
    }

    #[test]
    fn an_ovf_gives_its_name_cpus_and_memory() {
        let ovf = read_ovf(OVF.as_bytes());
        assert_eq!(
            ovf,
            OvfSystem {
                name: Some("ubuntu-2204".into()),
                cpus: Some(4),
                memory_mb: Some(2048)
            }
        );
        assert_eq!(read_ovf(b"not xml"), OvfSystem::default());
    }

    #[test]
    fn an_uploaded_ovf_item_deploys_as_a_vm_in_the_target_pool_and_folder() {
        let (sim, token) = session();
        let (library, item) = ovf_item(&sim, &token);
        let (_, got) = call(
            &sim,
            &token,
            "GET",
            &format!("/api/content/library/item/{item}"),
            Value::Null,
        );
        assert_eq!(
            (got["type"].as_str(), got["size"].as_u64()),
            (Some("ovf"), Some(OVF.len() as u64))
        );
        let (_, found) = call(
            &sim,
            &token,
            "POST",
            "/api/content/library/item?action=find",
            json!({"library_id": library, "name": "ubuntu"}),
        );
        assert_eq!(found, json!([item]));

        let pool = first(&sim, "ResourcePool");
        let folder = sim
            .with_inventory(|inv| vm_folder_of(inv, &Moref::new("ResourcePool", &pool)))
            .unwrap();
        let deploy = format!("/rest/com/vmware/vcenter/ovf/library-item/id:{item}?~action=deploy");
        let spec = json!({"deployment_spec": {"name": "from-library", "accept_all_EULA": true},
                          "target": {"resource_pool_id": pool, "folder_id": folder.value}});
        let (status, result) = call(&sim, &token, "POST", &deploy, spec.clone());
        assert_eq!(status, 200, "{result}");
        assert_eq!(result["value"]["succeeded"], true, "{result}");
        let vm = result["value"]["resource_id"]["id"]
            .as_str()
            .unwrap()
            .to_string();
        sim.with_inventory(|inv| {
            let o = inv
                .get(&Moref::new("VirtualMachine", &vm))
                .expect("the deployed VM");
            assert_eq!(o.name(), "from-library");
            assert_eq!(
                o.props
                    .get("resourcePool")
                    .and_then(Val::as_mor)
                    .map(|m| m.value.as_str()),
                Some(pool.as_str())
            );
            assert_eq!(o.props.get("parent").and_then(Val::as_mor), Some(&folder));
            assert!(matches!(
                o.path("config.hardware.numCPU"),
                Some(Val::Int(4))
            ));
            assert!(matches!(
                o.path("config.hardware.memoryMB"),
                Some(Val::Int(2048))
            ));
        });
        // The name is now taken: the deployment does not succeed, as vCenter reports it.
        let (_, again) = call(&sim, &token, "POST", &deploy, spec);
        assert_eq!(again["value"]["succeeded"], false, "{again}");
        let missing = "/api/vcenter/ovf/library-item/nope?action=deploy";
        assert_eq!(
            call(
                &sim,
                &token,
                "POST",
                missing,
                json!({"target": {"resource_pool_id": pool}})
            )
            .0,
            404
        );
    }

    #[test]
    fn deleting_a_library_deletes_its_items_and_bad_requests_are_refused() {
        let (sim, token) = session();
        let (library, item) = ovf_item(&sim, &token);
        let (status, err) = call_with(
            &sim,
            &[("vmware-api-session-id", &token)],
            "POST",
            "/api/content/local-library",
            b"{not json",
        );
        assert_eq!(
            (status, err["error_type"].as_str()),
            (400, Some("INVALID_ARGUMENT"))
        );
        let (status, _) = call(
            &sim,
            &token,
            "POST",
            "/api/content/local-library",
            json!({"name": "x", "storage_backings": [{"type": "DATASTORE", "datastore_id": "datastore-404"}]}),
        );
        assert_eq!(status, 400);
        let (status, _) = call(
            &sim,
            &token,
            "POST",
            "/rest/com/vmware/content/library/item",
            json!({"create_spec": {"name": "ubuntu", "library_id": library, "type": "ovf"}}),
        );
        assert_eq!(status, 400, "a second item of the same name");
        assert_eq!(
            call(
                &sim,
                &token,
                "DELETE",
                &format!("/api/content/local-library/{library}"),
                Value::Null
            )
            .0,
            204
        );
        let (status, err) = call(
            &sim,
            &token,
            "GET",
            &format!("/rest/com/vmware/content/library/item/id:{item}"),
            Value::Null,
        );
        assert_eq!(
            (status, err["type"].as_str()),
            (404, Some("com.vmware.vapi.std.errors.not_found"))
        );
        assert_eq!(
            call(
                &sim,
                &token,
                "GET",
                "/rest/com/vmware/content/library",
                Value::Null
            )
            .1,
            json!({"value": []})
        );
    }
}
