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
//!
//! This file routes an operation to its concern: `libraries`, `items`, `update_sessions`,
//! `files` (with uploads), `deploy` (with `ovf`), all over what the service remembers
//! (`store`) and what every operation shares (`operation`).

mod deploy;
mod files;
mod items;
mod libraries;
mod operation;
mod ovf;
mod store;
#[cfg(test)]
mod tests;
mod update_sessions;

pub(super) use files::upload;
pub use files::UPLOAD_PREFIX;
pub(super) use operation::{route, Target};
pub(crate) use store::ContentLibrary;

use crate::datastore_files::query_param;
use crate::rest::sim::Sim;
use crate::rest::wire::{spec, Answer, Form, Request};
use crate::value::Moref;
use http::Method;
use operation::Ctx;
use serde_json::{json, Value};

pub(super) fn handle(
    sim: &Sim<'_, ContentLibrary>,
    form: Form,
    req: &Request<'_>,
    target: Target,
) -> Answer {
    let body = match super::wire::json_body(form, req.body) {
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
        Target::Ovf(id) => deploy::deploy(sim, &cx, &method, &id, &body),
        // A library's datastore is checked against the inventory before the library lock.
        Target::Libraries if method == Method::POST && cx.action.is_none() => {
            let spec = spec(&body, "create_spec");
            let datastore = libraries::backing_datastore(spec);
            let exists =
                sim.with_inventory(|inv| inv.get(&Moref::new("Datastore", &datastore)).is_some());
            if !exists {
                return Answer::invalid(
                    form,
                    &format!("A library needs a datastore storage backing; {datastore:?} is none."),
                );
            }
            sim.own_state().create_library(&cx, spec, datastore)
        }
        target => sim.own_state().dispatch(&cx, &method, target, &body),
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
                Some(l) => cx.ok(libraries::library_json(&id, l)),
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
            (Target::Items, &Method::GET, None) => self.list_items(cx),
            (Target::Item(id), &Method::GET, None) => match self.items.get(&id) {
                Some(i) => cx.ok(items::item_json(&id, i)),
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
}
