//! The vAPI session service (`/rest/com/vmware/cis/session`, `/api/session`): a login with
//! the simulator's credentials (HTTP basic authentication) or with a live SOAP session's
//! cookie, as vCenter accepts both, gives a token that later requests send in the
//! `vmware-api-session-id` header; sessions end at logout or after the simulator's idle
//! timeout, like SOAP ones. REST sessions are kept apart from SOAP sessions: a REST token is
//! no SOAP cookie, as on vCenter.

use super::sim::Sim;
use super::wire::{Answer, Form, Request};
use base64::Engine;
use chrono::{DateTime, Utc};
use http::Method;
use serde_json::json;
use std::collections::HashMap;

/// The header a REST client sends its session token in.
pub const SESSION_HEADER: &str = "vmware-api-session-id";

/// One REST session.
#[derive(Debug, Clone)]
struct Session {
    user: String,
    created: DateTime<Utc>,
    last_accessed: DateTime<Utc>,
}

/// A simulator's REST sessions, by token.
#[derive(Debug, Default)]
pub(crate) struct Sessions {
    by_token: HashMap<String, Session>,
}

/// The token a request names: the `vmware-api-session-id` header, or the cookie of that name
/// vCenter sets at login (browsers and `curl -b` send that).
fn token_of<'r>(req: &'r Request<'_>) -> Option<&'r str> {
    if let Some(t) = req.headers.get(SESSION_HEADER) {
        return t.to_str().ok();
    }
    req.headers
        .get_all(http::header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|c| c.trim().split_once('='))
        .find(|(name, _)| *name == SESSION_HEADER)
        .map(|(_, value)| value.trim_matches('"'))
}

/// The `Set-Cookie` value of a successful REST login (`answer` to `POST path`), as vCenter
/// sets the session's token as a cookie too; `None` for any other answer.
pub(crate) fn login_cookie(method: &Method, path: &str, status: u16, body: &str) -> Option<String> {
    let login_path = path.trim_end_matches('/') == "/rest/com/vmware/cis/session"
        || path.trim_end_matches('/') == "/api/session";
    if *method != Method::POST || !login_path || !(200..300).contains(&status) {
        return None;
    }
    let value: serde_json::Value = serde_json::from_str(body).ok()?;
    let token = value.get("value").unwrap_or(&value).as_str()?;
    Some(format!(
        "{SESSION_HEADER}={token}; Path=/; Secure; HttpOnly"
    ))
}

/// The token and user of the request's live session, touching it (idle sessions end here).
pub(super) fn current(sim: &Sim<'_, Sessions>, req: &Request<'_>) -> Option<(String, String)> {
    let token = token_of(req)?;
    let now = sim.now();
    let idle =
        chrono::Duration::from_std(sim.config().session_idle).unwrap_or(chrono::Duration::MAX);
    let mut sessions = sim.own_state();
    let session = sessions.by_token.get_mut(token)?;
    if now - session.last_accessed > idle {
        sessions.by_token.remove(token);
        return None;
    }
    session.last_accessed = now;
    Some((token.to_string(), session.user.clone()))
}

pub(super) fn handle(sim: &Sim<'_, Sessions>, form: Form, req: &Request<'_>) -> Answer {
    match (form, req.method, req.action) {
        (Form::Rest, &Method::POST, None) | (Form::Api, &Method::POST, _) => login(sim, form, req),
        (Form::Rest, &Method::POST, Some("get")) | (Form::Api, &Method::GET, _) => {
            info(sim, form, req)
        }
        (_, &Method::DELETE, _) => logout(sim, form, req),
        _ => Answer::error(
            form,
            405,
            "operation_not_found",
            "com.vmware.vapi.rest.httpMethodNotAllowed",
            "This method is not allowed for the session service.",
        ),
    }
}

/// Who the request logs in as: basic credentials that match, or a live SOAP session.
fn login_user(sim: &Sim<'_, Sessions>, req: &Request<'_>) -> Option<String> {
    let header = |name: http::HeaderName| req.headers.get(name).and_then(|v| v.to_str().ok());
    if let Some(basic) = header(http::header::AUTHORIZATION).and_then(|a| a.strip_prefix("Basic "))
    {
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(basic.trim())
            .ok()?;
        let decoded = String::from_utf8(decoded).ok()?;
        let (user, password) = decoded.split_once(':')?;
        let known = sim.config().authenticate(user, password).is_some();
        return known.then(|| user.to_string());
    }
    header(http::header::COOKIE).and_then(|c| sim.soap_session_user(c))
}

fn login(sim: &Sim<'_, Sessions>, form: Form, req: &Request<'_>) -> Answer {
    let Some(user) = login_user(sim, req) else {
        return Answer::unauthenticated(form);
    };
    let token = uuid::Uuid::new_v4().simple().to_string();
    let now = sim.now();
    sim.own_state().by_token.insert(
        token.clone(),
        Session {
            user,
            created: now,
            last_accessed: now,
        },
    );
    let status = match form {
        Form::Rest => 200,
        Form::Api => 201,
    };
    Answer::value(form, status, json!(token))
}

fn info(sim: &Sim<'_, Sessions>, form: Form, req: &Request<'_>) -> Answer {
    let Some((token, _)) = current(sim, req) else {
        return Answer::unauthenticated(form);
    };
    let sessions = sim.own_state();
    let Some(s) = sessions.by_token.get(&token) else {
        return Answer::unauthenticated(form);
    };
    let time = |t: DateTime<Utc>| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    Answer::value(
        form,
        200,
        json!({"user": s.user, "created_time": time(s.created), "last_accessed_time": time(s.last_accessed)}),
    )
}

fn logout(sim: &Sim<'_, Sessions>, form: Form, req: &Request<'_>) -> Answer {
    let Some((token, _)) = current(sim, req) else {
        return Answer::unauthenticated(form);
    };
    sim.own_state().by_token.remove(&token);
    Answer::empty(match form {
        Form::Rest => 200,
        Form::Api => 204,
    })
}
