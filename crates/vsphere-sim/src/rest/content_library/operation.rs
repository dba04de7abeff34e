//! What every content library operation shares: what a path names ([`Target`]), what an
//! operation needs besides its body ([`Ctx`]), and answers in vCenter's shapes.

use crate::datastore_files::percent_decode;
use crate::rest::wire::{text, Answer, Form};
use chrono::{DateTime, Utc};
use serde_json::{json, Value};

/// What a content library path names, in either spelling.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(in crate::rest) enum Target {
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
pub(in crate::rest) fn route(form: Form, path: &str) -> Option<Target> {
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
pub(super) struct Ctx<'a> {
    pub(super) form: Form,
    pub(super) now: DateTime<Utc>,
    pub(super) query: &'a str,
    pub(super) action: Option<&'a str>,
    /// `host:port` the client reached us at, for the upload URLs handed out.
    pub(super) host: String,
}

impl Ctx<'_> {
    /// A create's answer: 201 in the `/api` spelling, 200 in `/rest`.
    pub(super) fn created(&self, id: &str) -> Answer {
        let status = if self.form == Form::Api { 201 } else { 200 };
        Answer::value(self.form, status, json!(id))
    }

    /// The answer of an operation that returns nothing.
    pub(super) fn done(&self) -> Answer {
        Answer::empty(if self.form == Form::Api { 204 } else { 200 })
    }

    pub(super) fn ok(&self, value: Value) -> Answer {
        Answer::value(self.form, 200, value)
    }
}

pub(super) fn time(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

pub(super) fn not_allowed(form: Form, message: &str) -> Answer {
    Answer::error(
        form,
        400,
        "not_allowed_in_current_state",
        "com.vmware.vapi.std.errors.not_allowed_in_current_state",
        message,
    )
}

/// A file's name from a body: `file_name` (update sessions) or `name` (item files).
pub(super) fn file_name(body: &Value) -> String {
    let name = text(body, "file_name");
    if name.is_empty() {
        text(body, "name")
    } else {
        name
    }
}
