//! A group's objects by uid, for the garbage collector's owner lookups.
//!
//! Every object of a group is in it, so at thousands of clusters its entries add up: as a map
//! from the uid to the resource and key, an entry was 64 bytes, and a cluster of 117 objects
//! had a table of 256 of them (16 KB). An entry here is the resource and the current version
//! itself (24 bytes), read by the uid the version carries; every write of an object puts its
//! new version in, so the index never keeps a superseded one alive.

use crate::object::{ObjectKey, StoredObject};
use std::borrow::Borrow;
use std::collections::HashSet;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

/// Every current object of a group, by uid.
#[derive(Debug, Default)]
pub(crate) struct UidIndex(HashSet<Entry>);

impl UidIndex {
    /// Puts `object` (a new object, or a new version of one) in, under its uid.
    pub(crate) fn put(&mut self, resource: &Arc<str>, object: &Arc<StoredObject>) {
        self.0.replace(Entry {
            resource: resource.clone(),
            object: object.clone(),
        });
    }

    /// Takes the object with `uid` out.
    pub(crate) fn remove(&mut self, uid: &str) {
        self.0.remove(uid);
    }

    /// Whether an object with `uid` exists.
    pub(crate) fn contains(&self, uid: &str) -> bool {
        self.0.contains(uid)
    }

    /// The resource and key of the object with `uid`.
    pub(crate) fn get(&self, uid: &str) -> Option<(Arc<str>, ObjectKey)> {
        self.0
            .get(uid)
            .map(|e| (e.resource.clone(), e.object.meta.key()))
    }
}

/// One object: its resource and current version. Hashed and compared as its uid, so the set
/// is looked up with a `&str`.
#[derive(Debug)]
struct Entry {
    resource: Arc<str>,
    object: Arc<StoredObject>,
}

impl Borrow<str> for Entry {
    fn borrow(&self) -> &str {
        &self.object.meta.uid
    }
}

// `Borrow` requires these to agree with `str`'s: they hash and compare the uid alone.
impl Hash for Entry {
    fn hash<H: Hasher>(&self, state: &mut H) {
        <str as Hash>::hash(self.borrow(), state)
    }
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        <Self as Borrow<str>>::borrow(self) == <Self as Borrow<str>>::borrow(other)
    }
}

impl Eq for Entry {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::object::Derived;
    use bytes::Bytes;
    use serde_json::json;

    fn version(name: &str, uid: &str, rv: u64) -> Arc<StoredObject> {
        let value = json!({"metadata": {"name": name, "namespace": "ns", "uid": uid,
            "resourceVersion": rv.to_string()}});
        StoredObject::from_stored(Bytes::from(value.to_string()), Arc::new(Derived::default()))
            .unwrap()
    }

    #[test]
    fn finds_objects_by_uid_and_keeps_only_their_latest_version() {
        let mut index = UidIndex::default();
        let pods: Arc<str> = Arc::from("pods");
        let first = version("a", "u-1", 1);
        index.put(&pods, &first);
        index.put(&Arc::from("configmaps"), &version("b", "u-2", 2));
        assert!(index.contains("u-1") && index.contains("u-2") && !index.contains("u-3"));
        assert_eq!(
            index.get("u-1"),
            Some((pods.clone(), ObjectKey::new("ns", "a")))
        );
        // A new version replaces the old, which the index no longer holds.
        let superseded = Arc::downgrade(&first);
        drop(first);
        index.put(&pods, &version("a", "u-1", 3));
        assert!(superseded.upgrade().is_none());
        assert_eq!(index.0.len(), 2);
        index.remove("u-1");
        assert!(!index.contains("u-1") && index.get("u-1").is_none());
        assert!(index.contains("u-2"));
    }
}
