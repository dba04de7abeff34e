//! Library items: create, list, find, update, delete (with their update sessions); what the
//! provisioning helpers ask of them (an item made at once, its OVF); and an item as JSON.

use super::operation::{time, Ctx};
use super::ovf::read_ovf;
use super::store::{ContentLibrary, Item, Library};
use crate::datastore_files::query_param;
use crate::rest::wire::{text, Answer};
use bytes::Bytes;
use chrono::{DateTime, Utc};
use serde_json::{json, Value};
use std::collections::BTreeMap;

impl ContentLibrary {
    /// The IDs of the items of the library the query names.
    pub(super) fn list_items(&self, cx: &Ctx<'_>) -> Answer {
        let library = query_param(cx.query, "library_id").unwrap_or_default();
        if !self.libraries.contains_key(&library) {
            return Answer::missing(cx.form, "Library", &library);
        }
        let ids: Vec<&String> = self
            .items
            .iter()
            .filter(|(_, i)| i.library == library)
            .map(|(id, _)| id)
            .collect();
        cx.ok(json!(ids))
    }

    pub(super) fn remove_item(&mut self, id: &str) -> bool {
        self.sessions.retain(|_, s| s.item != id);
        self.items.remove(id).is_some()
    }

    pub(super) fn create_item(&mut self, cx: &Ctx<'_>, spec: &Value) -> Answer {
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

    pub(super) fn find_items(&self, cx: &Ctx<'_>, spec: &Value) -> Answer {
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

    pub(super) fn update_item(&mut self, cx: &Ctx<'_>, id: &str, spec: &Value) -> Answer {
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

    pub(super) fn delete_item(&mut self, cx: &Ctx<'_>, id: &str) -> Answer {
        if !self.remove_item(id) {
            return Answer::missing(cx.form, "Library item", id);
        }
        cx.done()
    }

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

    /// The bytes of an item's OVF descriptor (its first `.ovf` file), and the item's name.
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

pub(super) fn item_json(id: &str, i: &Item) -> Value {
    let size: usize = i.files.values().map(Bytes::len).sum();
    json!({"id": id, "library_id": i.library, "name": i.name, "description": i.description,
           "type": i.ty, "size": size, "cached": true,
           "content_version": i.content_version.to_string(), "metadata_version": "1",
           "version": i.content_version.to_string(),
           "creation_time": time(i.created), "last_modified_time": time(i.modified)})
}
