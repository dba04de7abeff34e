//! An index of a resource's objects by the values of a few of their selectable fields, as
//! kube-apiserver's watch cache keeps indexers for the field selectors its clients ask most
//! (Pods by `spec.nodeName`). The API layer names the fields (see
//! [`crate::Group::index_field`]); a list whose field selector requires one of them reads the
//! objects holding that value instead of every object of the resource.
//!
//! Why: the dashboard reads a cluster's events by `involvedObject.uid=`, one query per object
//! of its tree; at 10,000 clusters in one namespace each query scanned about 210,000 Events,
//! and a tree took seconds where its objects took a millisecond.

use crate::keyset::KeySet;
use crate::object::{ObjectKey, StoredObject};
use std::collections::HashMap;

/// One resource's indexed fields and, per `field=value`, the objects holding it.
#[derive(Debug, Default)]
pub(crate) struct FieldIndex {
    fields: Vec<String>,
    keys: HashMap<String, KeySet<ObjectKey>>,
}

/// The value `object` is indexed under: a field it lacks selects as empty, as the field
/// selector reads it.
fn indexed_value<'a>(object: &'a StoredObject, field: &str) -> &'a str {
    object.field(field).unwrap_or("")
}

/// The index key of `field` holding `value` (`=` never appears in a field's name).
fn entry(field: &str, value: &str) -> String {
    format!("{field}={value}")
}

fn add(
    keys: &mut HashMap<String, KeySet<ObjectKey>>,
    field: &str,
    key: &ObjectKey,
    object: &StoredObject,
) {
    keys.entry(entry(field, indexed_value(object, field)))
        .or_default()
        .insert(key.clone());
}

impl FieldIndex {
    /// Indexes `field` too (once however often asked), over `objects`: those the resource
    /// holds already.
    pub(crate) fn add_field<'a>(
        &mut self,
        field: &str,
        objects: impl Iterator<Item = (&'a ObjectKey, &'a StoredObject)>,
    ) {
        if self.covers(field) {
            return;
        }
        for (key, object) in objects {
            add(&mut self.keys, field, key, object);
        }
        self.fields.push(field.to_string());
    }

    /// Whether `field` is indexed.
    pub(crate) fn covers(&self, field: &str) -> bool {
        self.fields.iter().any(|f| f == field)
    }

    /// `object` (known as `key`) is now stored.
    pub(crate) fn insert(&mut self, key: &ObjectKey, object: &StoredObject) {
        for field in &self.fields {
            add(&mut self.keys, field, key, object);
        }
    }

    /// `object` (known as `key`) is no longer stored in this version.
    pub(crate) fn remove(&mut self, key: &ObjectKey, object: &StoredObject) {
        for field in &self.fields {
            let at = entry(field, indexed_value(object, field));
            if let Some(set) = self.keys.get_mut(&at) {
                set.remove(key);
                if set.is_empty() {
                    self.keys.remove(&at);
                }
            }
        }
    }

    /// The objects whose indexed `field` is `value` (none, when no object holds it).
    pub(crate) fn get(&self, field: &str, value: &str) -> Option<&KeySet<ObjectKey>> {
        self.keys.get(&entry(field, value))
    }
}
