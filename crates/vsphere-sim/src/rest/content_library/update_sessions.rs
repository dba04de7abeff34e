//! Update sessions, through which a client changes an item's files: create, list, get,
//! delete, keep alive, cancel, fail, and complete (the uploaded files become the item's);
//! and a session as JSON.

use super::operation::{not_allowed, time, Ctx, Target};
use super::store::{ContentLibrary, Phase, UpdateSession};
use crate::rest::wire::{spec, text, Answer};
use http::Method;
use serde_json::{json, Value};
use std::collections::BTreeMap;

impl ContentLibrary {
    /// Update sessions: create, list, get, delete, and the `complete`, `cancel`, `fail` and
    /// `keep-alive` actions.
    pub(super) fn sessions(
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

    pub(super) fn create_session(&mut self, cx: &Ctx<'_>, spec: &Value) -> Answer {
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
    pub(super) fn complete(&mut self, cx: &Ctx<'_>, id: &str) -> Answer {
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
}

pub(super) fn session_json(id: &str, s: &UpdateSession) -> Value {
    let progress = if s.phase == Phase::Done { 100 } else { 0 };
    json!({"id": id, "library_item_id": s.item, "state": s.phase.word(),
           "library_item_content_version": s.content_version.to_string(),
           "client_progress": progress, "expiration_time": time(s.expires)})
}
