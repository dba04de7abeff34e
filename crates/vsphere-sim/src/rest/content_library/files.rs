//! Files: those added to an update session (a PUSH file gets an upload URL on this server),
//! the bytes pushed to that URL, and an item's files once its session completed.

use super::operation::{file_name, not_allowed, Ctx};
use super::store::{ContentLibrary, Phase, UpdateSession, Upload};
use crate::datastore_files::{percent_decode, query_param, FileAnswer};
use crate::rest::sim::Sim;
use crate::rest::wire::{spec, text, Answer};
use bytes::Bytes;
use http::Method;
use serde_json::{json, Value};

/// Where upload URLs point: `/cls/data/<session>/<file>`.
pub const UPLOAD_PREFIX: &str = "/cls/data/";

impl ContentLibrary {
    /// An update session's files: `add` (a PUSH file gets its upload URL), `get`, `remove`,
    /// and the list.
    pub(super) fn session_files(
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
    pub(super) fn item_files(
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

fn upload_json(name: &str, f: &Upload) -> Value {
    let transferred = f.data.as_ref().map_or(0, Bytes::len);
    let (status, size) = match &f.data {
        Some(d) => ("READY", d.len() as i64),
        None => ("WAITING_FOR_TRANSFER", f.size),
    };
    json!({"name": name, "source_type": "PUSH", "status": status, "size": size,
           "bytes_transferred": transferred, "upload_endpoint": {"uri": f.uri}})
}

/// Stores the bytes PUT or POSTed to an upload URL (`/cls/data/<session>/<file>`) for a
/// client the router found `authenticated` (asked only for an upload's method). The file must
/// have been added to a session that is still active.
pub(in crate::rest) fn upload(
    sim: &Sim<'_, ContentLibrary>,
    method: &Method,
    path: &str,
    body: Bytes,
    authenticated: impl FnOnce() -> bool,
) -> FileAnswer {
    let text = FileAnswer::text;
    if *method != Method::PUT && *method != Method::POST {
        return text(405, "uploads are PUT or POST");
    }
    if !authenticated() {
        return text(401, "a session is required");
    }
    let Some((session, name)) = path
        .strip_prefix(UPLOAD_PREFIX)
        .and_then(|rest| rest.split_once('/'))
    else {
        return text(404, "no such upload");
    };
    let mut library = sim.own_state();
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
