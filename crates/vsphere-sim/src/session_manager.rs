//! SessionManager: Login (the simulator's user, or one of its configured users with their
//! role), Logout, SessionIsActive, TerminateSession, AcquireCloneTicket and CloneSession
//! (a ticket opens one more session of the same user, once, within a minute), and idle
//! expiry.
//!
//! The live sessions (`state::sessions`) are driven from here; what other managed objects keep
//! per session (the property collectors' results, filters and reports, session-scoped
//! views) is theirs, and ending a session asks each of them to let go of it.

use crate::call::Call;
use crate::config::SimConfig;
use crate::fault::Fault;
use crate::objects::refs;
use crate::soap::Element;
use crate::state::sessions::Session;
use crate::state::State;
use crate::value::{write_element, Data, Moref, Val};
use chrono::{DateTime, Utc};

/// Validates a session key and marks it active; expired sessions are removed.
pub(crate) fn touch(
    state: &mut State,
    config: &SimConfig,
    key: &str,
    now: DateTime<Utc>,
) -> Option<String> {
    let idle = chrono::Duration::from_std(config.session_idle).unwrap_or(chrono::Duration::MAX);
    if !state.sessions.touch(key, idle, now)? {
        end_session(state, key);
        return None;
    }
    Some(key.to_string())
}

/// Forgets a session and everything scoped to it: paged results, views, filters and the
/// collectors it created, as vCenter does at logout.
fn end_session(state: &mut State, key: &str) {
    state.sessions.remove(key);
    state.inventory.note_change();
    state.collectors.drop_session(key);
    state.journal_follows_filters();
    let prefix = format!("session[{key}]");
    let scoped: Vec<crate::value::Moref> = state
        .inventory
        .iter()
        .filter(|o| o.moref.value.starts_with(&prefix))
        .map(|o| o.moref.clone())
        .collect();
    for m in scoped {
        state.inventory.remove(&m);
    }
}

/// The UserSession data object of a session.
pub(crate) fn user_session(s: &Session) -> Data {
    Data::new("UserSession")
        .with("key", s.key.as_str())
        .with("userName", s.user.as_str())
        .with("fullName", s.user.as_str())
        .with("loginTime", s.login_time)
        .with("lastActiveTime", s.last_active)
        .with("locale", "en")
        .with("messageLocale", "en")
        .with("extensionSession", false)
        .with("ipAddress", "127.0.0.1")
        .with("userAgent", s.user_agent.as_str())
        .with("callCount", s.call_count)
}

/// The UserSession of every live session (`SessionManager.sessionList`), oldest first.
pub(crate) fn session_list(state: &State) -> Val {
    let mut sessions: Vec<&Session> = state.sessions.iter().collect();
    sessions.sort_by_key(|s| (s.login_time, s.key.clone()));
    Val::Array(
        "UserSession",
        sessions
            .into_iter()
            .map(|s| Val::from(user_session(s)))
            .collect(),
    )
}

/// TerminateSession: ends other sessions, as an administrator does from vCenter's session
/// list (a controller's test kills its session this way). The caller's own session may not
/// be terminated, and every key must name a live session, or nothing is ended.
fn terminate(state: &mut State, call: &Call<'_>, args: &Element) -> Result<String, Fault> {
    let keys: Vec<String> = args
        .children_named("sessionId")
        .map(|e| e.text.trim().to_string())
        .collect();
    if keys.is_empty() || keys.iter().any(|k| Some(k) == call.session.as_ref()) {
        return Err(Fault::invalid_argument("sessionId"));
    }
    if let Some(missing) = keys.iter().find(|k| !state.sessions.contains(k)) {
        return Err(Fault::new_pub(
            "NotFound",
            format!("The session {missing} was not found."),
        ));
    }
    for key in &keys {
        end_session(state, key);
    }
    Ok(String::new())
}

pub(crate) fn dispatch(
    state: &mut State,
    call: &mut Call<'_>,
    _this: &Moref,
    method: &str,
    args: &Element,
) -> Option<Result<String, Fault>> {
    Some(match method {
        "Login" => login(state, call, args),
        "Logout" => {
            if let Some(user) = call
                .session
                .as_ref()
                .and_then(|k| state.sessions.get(k))
                .map(|s| s.user.clone())
            {
                crate::event_manager::emit(
                    state,
                    call,
                    "UserLogoutSessionEvent",
                    None,
                    format!("User {user} logged out"),
                );
            }
            if let Some(key) = call.session.take() {
                end_session(state, &key);
            }
            Ok(String::new())
        }
        "SessionIsActive" => {
            let key = args.text_of("sessionID").unwrap_or("");
            let user = args.text_of("userName").unwrap_or("");
            let active = state.sessions.get(key).is_some_and(|s| s.user == user);
            let mut out = String::new();
            write_element(&mut out, "returnval", &Val::Bool(active), false);
            Ok(out)
        }
        "TerminateSession" => terminate(state, call, args),
        "AcquireCloneTicket" => acquire_clone_ticket(state, call),
        "CloneSession" => clone_session(state, call, args),
        _ => return None,
    })
}

fn login(state: &mut State, call: &mut Call<'_>, args: &Element) -> Result<String, Fault> {
    let user = args.text_of("userName").unwrap_or("");
    let password = args.text_of("password").unwrap_or("");
    let role = call
        .config
        .authenticate(user, password)
        .ok_or_else(Fault::invalid_login)?;
    open_session(state, call, user, role)
}

/// How long a clone ticket may be redeemed.
const CLONE_TICKET_LIFETIME: chrono::Duration = chrono::Duration::seconds(60);

/// AcquireCloneTicket: a one-time ticket for another session of the caller's user.
fn acquire_clone_ticket(state: &mut State, call: &Call<'_>) -> Result<String, Fault> {
    let Some(session) = call.session.as_ref().and_then(|k| state.sessions.get(k)) else {
        return Err(Fault::not_authenticated(&refs::session_manager(
            state.inventory.esx(),
        )));
    };
    let (user, role) = (session.user.clone(), session.role);
    let ticket = format!("cst-VCT-{}", uuid::Uuid::new_v4());
    let until = call.now + CLONE_TICKET_LIFETIME;
    state
        .sessions
        .add_ticket(&ticket, (user, role), call.now, until);
    let mut out = String::new();
    write_element(&mut out, "returnval", &Val::from(ticket), false);
    Ok(out)
}

/// CloneSession: a new session of the ticket's user; the ticket is spent.
fn clone_session(state: &mut State, call: &mut Call<'_>, args: &Element) -> Result<String, Fault> {
    let ticket = args.text_of("cloneTicket").unwrap_or("").trim();
    match state.sessions.redeem_ticket(ticket, call.now) {
        Some((user, role)) => open_session(state, call, &user, role),
        None => Err(Fault::invalid_login()),
    }
}

/// A new session of `user` for this call's client: its cookie is set, and a login event.
fn open_session(
    state: &mut State,
    call: &mut Call<'_>,
    user: &str,
    role: crate::authorization::SystemRole,
) -> Result<String, Fault> {
    let key = uuid::Uuid::new_v4().to_string();
    let session = Session {
        key: key.clone(),
        user: user.to_string(),
        login_time: call.now,
        last_active: call.now,
        user_agent: call.user_agent.to_string(),
        call_count: 0,
        role,
    };
    let mut out = String::new();
    write_element(
        &mut out,
        "returnval",
        &Val::from(user_session(&session)),
        false,
    );
    state.sessions.insert(session);
    state.inventory.note_change();
    crate::event_manager::emit(
        state,
        call,
        "UserLoginSessionEvent",
        None,
        format!("User {user}@127.0.0.1 logged in as {}", call.user_agent),
    );
    call.session = Some(key.clone());
    call.set_session = Some(key);
    Ok(out)
}
