//! The vSphere Automation API beside SOAP, in its two spellings: `/rest/...`, the older one
//! (answers wrapped in `{"value": …}`, errors as `{"type": …, "value": …}`), which govmomi's
//! `vapi/rest` client and CAPV speak, and `/api/...`, the newer one (answers bare, errors as
//! `{"error_type": …, "messages": …}`). One module per service; this one routes a request to
//! its service (sessions, tagging, cluster modules, content libraries), each given the engine
//! and its own state (`sim`). What a request and an answer are sits below them all (`wire`).

mod cluster_modules;
mod content_library;
pub(crate) mod session;
mod sim;
mod tagging;
mod wire;

pub(crate) use cluster_modules::ClusterModules;
pub(crate) use content_library::ContentLibrary;
pub use content_library::UPLOAD_PREFIX;
pub(crate) use session::Sessions;
pub(crate) use tagging::Tagging;
pub use wire::{Answer, Form, Request};

use crate::engine::Engine;
use sim::Sim;
use std::sync::Mutex;

/// The state of a simulator's REST services, each behind its own lock.
#[derive(Debug, Default)]
pub(crate) struct Services {
    pub sessions: Mutex<Sessions>,
    pub tagging: Mutex<Tagging>,
    pub cluster_modules: Mutex<ClusterModules>,
    pub content_library: Mutex<ContentLibrary>,
}

impl Services {
    /// The services' state as `keeper` holds it (nothing held: none).
    pub(crate) fn restore(keeper: &crate::persist::Keeper) -> Self {
        Services {
            tagging: Mutex::new(keeper.record(crate::persist::TAGGING).unwrap_or_default()),
            cluster_modules: Mutex::new(
                keeper
                    .record(crate::persist::CLUSTER_MODULES)
                    .unwrap_or_default(),
            ),
            content_library: Mutex::new(
                keeper
                    .record(crate::persist::CONTENT_LIBRARY)
                    .unwrap_or_default(),
            ),
            ..Services::default()
        }
    }
}

/// Keeps a service's state after a request that may have changed it (one that is not a
/// read and succeeded), when the simulator is kept. The state is written whole, read under
/// its lock at the time of writing, so the last write holds the last state whatever order
/// two requests' writes come in.
fn keep<T: serde::Serialize>(
    engine: &Engine,
    req: &Request<'_>,
    answer: &Answer,
    name: &str,
    state: &Mutex<T>,
) {
    let Some(keeper) = engine.keeper() else {
        return;
    };
    if req.method == http::Method::GET || answer.status >= 300 {
        return;
    }
    keeper.put_record(name, &*state.lock().unwrap_or_else(|p| p.into_inner()));
}

/// The spelling of `path` and the rest of it, when it is a REST path at all.
pub fn split(path: &str) -> Option<(Form, &str)> {
    if let Some(rest) = path.strip_prefix("/rest") {
        return (rest.is_empty() || rest.starts_with('/')).then_some((Form::Rest, rest));
    }
    let rest = path.strip_prefix("/api")?;
    (rest.is_empty() || rest.starts_with('/')).then_some((Form::Api, rest))
}

/// Answers one REST request to the services of `engine`'s simulator.
pub(crate) fn handle(
    engine: &Engine,
    services: &Services,
    form: Form,
    req: &Request<'_>,
) -> Answer {
    let sessions = Sim::new(engine, &services.sessions);
    let session_path = match form {
        Form::Rest => "/com/vmware/cis/session",
        Form::Api => "/session",
    };
    if req.path == session_path {
        return session::handle(&sessions, form, req);
    }
    // Every other service needs a session first, as vCenter's endpoint checks it first.
    if session::current(&sessions, req).is_none() {
        return Answer::unauthenticated(form);
    }
    if let Some((kind, id)) = tagging::route(form, req.path) {
        let sim = Sim::new(engine, &services.tagging);
        let answer = tagging::handle(&sim, form, req, kind, id);
        keep(
            engine,
            req,
            &answer,
            crate::persist::TAGGING,
            &services.tagging,
        );
        return answer;
    }
    if let Some(target) = content_library::route(form, req.path) {
        let sim = Sim::new(engine, &services.content_library);
        let answer = content_library::handle(&sim, form, req, target);
        let name = crate::persist::CONTENT_LIBRARY;
        keep(engine, req, &answer, name, &services.content_library);
        return answer;
    }
    match cluster_modules::route(req.path) {
        Some(rest) => {
            let sim = Sim::new(engine, &services.cluster_modules);
            let answer = cluster_modules::handle(&sim, form, req, rest);
            let name = crate::persist::CLUSTER_MODULES;
            keep(engine, req, &answer, name, &services.cluster_modules);
            answer
        }
        None => Answer::not_found(form, req.path),
    }
}

/// Stores a file pushed to a content library upload URL (a path under [`UPLOAD_PREFIX`]),
/// for a client with a REST session (its token) or a SOAP one (its cookie): govmomi uploads
/// with either.
pub(crate) fn upload(
    engine: &Engine,
    services: &Services,
    method: &http::Method,
    path: &str,
    headers: &http::HeaderMap,
    body: bytes::Bytes,
) -> crate::datastore_files::FileAnswer {
    // Asked only once the method is known to be an upload's, as the session is touched.
    let authenticated = || {
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
        session::current(&Sim::new(engine, &services.sessions), &probe).is_some()
            || cookie.and_then(|c| engine.soap_session_user(c)).is_some()
    };
    let library = Sim::new(engine, &services.content_library);
    content_library::upload(&library, method, path, body, authenticated)
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
}
