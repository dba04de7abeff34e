//! Libraries: create (on a datastore the inventory has), find by name, update, delete with
//! their items; and a library as JSON.

use super::operation::{time, Ctx};
use super::store::{ContentLibrary, Library};
use crate::rest::wire::{text, Answer};
use serde_json::{json, Value};

impl ContentLibrary {
    pub(super) fn create_library(
        &mut self,
        cx: &Ctx<'_>,
        spec: &Value,
        datastore: String,
    ) -> Answer {
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
    pub(super) fn find_libraries(&self, cx: &Ctx<'_>, spec: &Value) -> Answer {
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

    pub(super) fn update_library(&mut self, cx: &Ctx<'_>, id: &str, spec: &Value) -> Answer {
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
    pub(super) fn delete_library(&mut self, cx: &Ctx<'_>, id: &str) -> Answer {
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
}

/// The datastore of a library spec's first storage backing.
pub(super) fn backing_datastore(spec: &Value) -> String {
    spec.get("storage_backings")
        .and_then(Value::as_array)
        .and_then(|b| b.first())
        .map(|b| text(b, "datastore_id"))
        .unwrap_or_default()
}

pub(super) fn library_json(id: &str, l: &Library) -> Value {
    json!({"id": id, "name": l.name, "description": l.description, "type": "LOCAL",
           "storage_backings": [{"type": "DATASTORE", "datastore_id": l.datastore}],
           "creation_time": time(l.created), "last_modified_time": time(l.modified),
           "version": l.version.to_string()})
}
