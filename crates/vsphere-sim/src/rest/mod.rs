//! The vSphere Automation API beside SOAP, in its two spellings: `/rest/...`, the older one
//! (answers wrapped in `{"value": …}`, errors as `{"type": …, "value": …}`), which govmomi's
//! `vapi/rest` client and CAPV speak, and `/api/...`, the newer one (answers bare, errors as
//! `{"error_type": …, "messages": …}`). One module per service; this one routes a request to
//! its service (sessions, tagging, cluster modules, content libraries) and writes the answer
//! in the request's spelling.

mod cluster_modules;
mod content_library;
mod session;
mod tagging;

pub(crate) use cluster_modules::ClusterModules;
pub(crate) use content_library::ContentLibrary;
pub use content_library::UPLOAD_PREFIX;
pub(crate) use session::Sessions;
pub(crate) use tagging::Tagging;

/// The state of a simulator's REST services, each behind its own lock.
#[derive(Debug, Default)]
pub(crate) struct Services {
    pub sessions: Mutex<Sessions>,
    pub tagging: Mutex<Tagging>,
    pub cluster_modules: Mutex<ClusterModules>,
    pub content_library: Mutex<ContentLibrary>,
}

/// The simulator as the REST services see it: their own state beside the engine that holds
/// the SOAP side (sessions to borrow, the inventory to read, OVF deployments to run). The
/// `Simulator` handle makes one per request; the services never name the handle, which
/// holds them.
pub(crate) struct Sim<'a> {
    pub engine: &'a Engine,
    pub services: &'a Services,
}

fn locked<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Sim<'_> {
    pub fn now(&self) -> chrono::DateTime<chrono::Utc> {
        self.engine.now()
    }

    pub fn config(&self) -> &crate::config::SimConfig {
        self.engine.config()
    }

    pub fn with_inventory<T>(&self, f: impl FnOnce(&crate::objects::Inventory) -> T) -> T {
        self.engine.with_inventory(f)
    }

    pub fn with_state<T>(
        &self,
        f: impl FnOnce(&mut crate::state::State, &crate::call::Call<'_>) -> T,
    ) -> T {
        self.engine.with_state(f)
    }

    pub fn soap_session_user(&self, cookie: &str) -> Option<String> {
        self.engine.soap_session_user(cookie)
    }

    pub fn rest_sessions(&self) -> MutexGuard<'_, Sessions> {
        locked(&self.services.sessions)
    }

    pub fn rest_tagging(&self) -> MutexGuard<'_, Tagging> {
        locked(&self.services.tagging)
    }

    pub fn rest_cluster_modules(&self) -> MutexGuard<'_, ClusterModules> {
        locked(&self.services.cluster_modules)
    }

    pub fn rest_content_library(&self) -> MutexGuard<'_, ContentLibrary> {
        locked(&self.services.content_library)
    }
}

use crate::engine::Engine;
use serde_json::{json, Value};
use std::sync::{Mutex, MutexGuard};

/// Which of the two spellings a request used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    Rest,
    Api,
}

/// One REST request, as the services read it.
pub struct Request<'a> {
    pub method: &'a http::Method,
    /// The path after `/rest` or `/api` (`/com/vmware/cis/session`, `/session`).
    pub path: &'a str,
    /// `~action`, for `/rest` operations that are not plain CRUD (`?~action=get`).
    pub action: Option<&'a str>,
    /// The whole query string (`library_id=…`), when there is one.
    pub query: Option<&'a str>,
    pub headers: &'a http::HeaderMap,
    pub body: &'a [u8],
}

/// A REST answer: status and JSON body (empty for none).
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub body: String,
}

impl Answer {
    /// A successful answer carrying `value`, wrapped as the spelling wants it.
    fn value(form: Form, status: u16, value: Value) -> Answer {
        let body = match form {
            Form::Rest => json!({ "value": value }),
            Form::Api => value,
        };
        Answer {
            status,
            body: body.to_string(),
        }
    }

    /// A successful answer with no body.
    fn empty(status: u16) -> Answer {
        Answer {
            status,
            body: String::new(),
        }
    }

    /// A vAPI standard error (`unauthenticated`, `not_found`, `invalid_argument`, …) with
    /// its message, in the spelling's error shape.
    fn error(form: Form, status: u16, kind: &str, id: &str, message: &str) -> Answer {
        let messages = json!([{"args": [], "default_message": message, "id": id}]);
        let body = match form {
            Form::Rest => json!({
                "type": format!("com.vmware.vapi.std.errors.{kind}"),
                "value": {"messages": messages},
            }),
            Form::Api => json!({"error_type": kind.to_ascii_uppercase(), "messages": messages}),
        };
        Answer {
            status,
            body: body.to_string(),
        }
    }

    fn unauthenticated(form: Form) -> Answer {
        Answer::error(
            form,
            401,
            "unauthenticated",
            "com.vmware.vapi.endpoint.method.authentication.required",
            "Authentication required.",
        )
    }

    /// 400 `invalid_argument`: the request's arguments are wrong (not JSON, a field missing).
    fn invalid(form: Form, message: &str) -> Answer {
        Answer::error(
            form,
            400,
            "invalid_argument",
            "com.vmware.vapi.std.errors.invalid_argument",
            message,
        )
    }

    /// 400 `already_exists`: a name the service keeps unique is taken.
    fn already_exists(form: Form, message: &str) -> Answer {
        Answer::error(
            form,
            400,
            "already_exists",
            "com.vmware.vapi.std.errors.already_exists",
            message,
        )
    }

    /// 404 `not_found` for a service's object `what` (`Category`, `Library`) called `id`.
    fn missing(form: Form, what: &str, id: &str) -> Answer {
        Answer::error(
            form,
            404,
            "not_found",
            "com.vmware.vapi.std.errors.not_found",
            &format!("{what} with identifier {id} does not exist."),
        )
    }

    fn not_found(form: Form, what: &str) -> Answer {
        Answer::error(
            form,
            404,
            "not_found",
            "com.vmware.vapi.rest.httpNotFound",
            &format!("Not found: {what}"),
        )
    }
}

/// A request's JSON body (`{}` for none); a body that is not JSON is refused with 400.
fn json_body(form: Form, body: &[u8]) -> Result<Value, Answer> {
    if body.is_empty() {
        return Ok(json!({}));
    }
    serde_json::from_slice(body)
        .map_err(|e| Answer::invalid(form, &format!("the request body is not JSON: {e}")))
}

/// A request's spec: `/rest` wraps it (`create_spec`, `update_spec`), `/api` sends it bare.
fn spec<'a>(body: &'a Value, wrapper: &str) -> &'a Value {
    body.get(wrapper).unwrap_or(body)
}

/// String field `key` of a JSON object, empty when absent.
fn text(v: &Value, key: &str) -> String {
    v.get(key).and_then(Value::as_str).unwrap_or("").to_string()
}

/// The strings of array field `key` of a request body (`tag_ids`, `vms`, …).
fn strings(body: &Value, key: &str) -> Vec<String> {
    body.get(key)
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// The spelling of `path` and the rest of it, when it is a REST path at all.
pub fn split(path: &str) -> Option<(Form, &str)> {
    if let Some(rest) = path.strip_prefix("/rest") {
        return (rest.is_empty() || rest.starts_with('/')).then_some((Form::Rest, rest));
    }
    let rest = path.strip_prefix("/api")?;
    (rest.is_empty() || rest.starts_with('/')).then_some((Form::Api, rest))
}

/// Answers one REST request for `sim`.
pub(crate) fn handle(sim: &Sim<'_>, form: Form, req: &Request<'_>) -> Answer {
    let session_path = match form {
        Form::Rest => "/com/vmware/cis/session",
        Form::Api => "/session",
    };
    if req.path == session_path {
        return session::handle(sim, form, req);
    }
    // Every other service needs a session first, as vCenter's endpoint checks it first.
    if session::current(sim, req).is_none() {
        return Answer::unauthenticated(form);
    }
    if let Some((kind, id)) = tagging::route(form, req.path) {
        return tagging::handle(sim, form, req, kind, id);
    }
    if let Some(target) = content_library::route(form, req.path) {
        return content_library::handle(sim, form, req, target);
    }
    match cluster_modules::route(req.path) {
        Some(rest) => cluster_modules::handle(sim, form, req, rest),
        None => Answer::not_found(form, req.path),
    }
}

/// Stores a file pushed to a content library upload URL (a path under [`UPLOAD_PREFIX`]).
pub(crate) fn upload(
    sim: &Sim<'_>,
    method: &http::Method,
    path: &str,
    headers: &http::HeaderMap,
    body: bytes::Bytes,
) -> crate::datastore_files::FileAnswer {
    content_library::upload(sim, method, path, headers, body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_split_into_their_spelling() {
        assert_eq!(
            split("/rest/com/vmware/cis/session"),
            Some((Form::Rest, "/com/vmware/cis/session"))
        );
        assert_eq!(split("/api/session"), Some((Form::Api, "/session")));
        assert_eq!(split("/apis/x"), None);
        assert_eq!(split("/sdk"), None);
    }

    #[test]
    fn errors_take_the_shape_of_their_spelling() {
        let rest: Value = serde_json::from_str(&Answer::unauthenticated(Form::Rest).body).unwrap();
        assert_eq!(rest["type"], "com.vmware.vapi.std.errors.unauthenticated");
        assert_eq!(
            rest["value"]["messages"][0]["default_message"],
            "Authentication required."
        );
        let api: Value = serde_json::from_str(&Answer::unauthenticated(Form::Api).body).unwrap();
        assert_eq!(api["error_type"], "UNAUTHENTICATED");
    }
}
