//! The key space of one simulated etcd cluster: keys with etcd's revision bookkeeping
//! (create, mod, version), a history of events for watches that start in the past, and
//! compaction. Pure data: the cluster handle around it locks, times and broadcasts.

use crate::pb::mvccpb::{event::EventType, Event, KeyValue};
use std::collections::{BTreeMap, VecDeque};

/// How many past events a cluster keeps for watches that start at an older revision. The
/// key space is a cluster's own small one (KubeadmControlPlane and etcdctl users), so a
/// short history is plenty; older starts are answered as compacted.
const HISTORY: usize = 1000;

/// Why a request on the key space was refused (gRPC codes as etcd answers them).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum KeyError {
    /// `etcdserver: mvcc: required revision has been compacted`
    #[error("etcdserver: mvcc: required revision has been compacted")]
    Compacted,
    /// `etcdserver: mvcc: required revision is a future revision`
    #[error("etcdserver: mvcc: required revision is a future revision")]
    FutureRevision,
    #[error("etcdserver: key is not provided")]
    EmptyKey,
    #[error("etcdserver: key not found")]
    KeyNotFound,
}

/// The keys `[key, range_end)` in etcd's notation: an empty end is the key alone, `"\0"` is
/// everything from `key` on.
#[derive(Debug, Clone)]
pub struct KeyRange {
    pub key: Vec<u8>,
    pub end: Vec<u8>,
}

impl KeyRange {
    pub fn new(key: Vec<u8>, end: Vec<u8>) -> Self {
        KeyRange { key, end }
    }

    pub fn contains(&self, k: &[u8]) -> bool {
        if self.end.is_empty() {
            return k == self.key.as_slice();
        }
        if self.end == [0] {
            return k >= self.key.as_slice();
        }
        k >= self.key.as_slice() && k < self.end.as_slice()
    }
}

/// One cluster's keys.
#[derive(Debug, Default)]
pub struct KeySpace {
    /// The newest revision; 1 for an empty store, as etcd starts.
    revision: i64,
    compacted: i64,
    keys: BTreeMap<Vec<u8>, KeyValue>,
    history: VecDeque<Event>,
}

impl KeySpace {
    pub fn new() -> Self {
        KeySpace {
            revision: 1,
            ..Default::default()
        }
    }

    /// The keys as they were kept at `revision`, compacted there (no history is kept, so a
    /// read or watch of an earlier revision is answered as compacted, as after etcd restores
    /// a snapshot).
    pub fn restore(revision: i64, keys: Vec<KeyValue>) -> Self {
        KeySpace {
            revision: revision.max(1),
            compacted: revision.max(1),
            keys: keys.into_iter().map(|kv| (kv.key.clone(), kv)).collect(),
            history: VecDeque::new(),
        }
    }

    pub fn revision(&self) -> i64 {
        self.revision
    }

    pub fn compacted(&self) -> i64 {
        self.compacted
    }

    /// The current keys in `range`, in key order.
    pub fn range(&self, range: &KeyRange) -> Vec<KeyValue> {
        if range.end.is_empty() {
            return self.keys.get(&range.key).cloned().into_iter().collect();
        }
        let from = (
            std::ops::Bound::Included(range.key.clone()),
            std::ops::Bound::Unbounded,
        );
        self.keys
            .range::<Vec<u8>, _>(from)
            .take_while(|(k, _)| range.contains(k))
            .map(|(_, v)| v.clone())
            .collect()
    }

    /// The value of `key` right now.
    pub fn get(&self, key: &[u8]) -> Option<&KeyValue> {
        self.keys.get(key)
    }

    /// Checks a read at `revision` (0 or less: now) can be served.
    pub fn check_read_revision(&self, revision: i64) -> Result<(), KeyError> {
        if revision > self.revision {
            return Err(KeyError::FutureRevision);
        }
        if revision > 0 && revision < self.compacted {
            return Err(KeyError::Compacted);
        }
        Ok(())
    }

    /// Starts a write: every change of one request (or transaction) shares one revision.
    pub fn begin(&mut self) -> Revision<'_> {
        Revision {
            rev: self.revision + 1,
            space: self,
            events: Vec::new(),
        }
    }

    /// The events after `after` that the history still holds, or `Compacted` if some of
    /// them are gone.
    pub fn events_since(&self, after: i64) -> Result<Vec<Event>, KeyError> {
        let oldest = self
            .history
            .front()
            .and_then(|e| e.kv.as_ref())
            .map(|kv| kv.mod_revision)
            .unwrap_or(self.revision + 1);
        if after + 1 < oldest.min(self.revision + 1) || after < self.compacted {
            return Err(KeyError::Compacted);
        }
        Ok(self
            .history
            .iter()
            .filter(|e| e.kv.as_ref().is_some_and(|kv| kv.mod_revision > after))
            .cloned()
            .collect())
    }

    /// Forgets the history up to `revision`.
    pub fn compact(&mut self, revision: i64) -> Result<(), KeyError> {
        if revision <= self.compacted {
            return Err(KeyError::Compacted);
        }
        if revision > self.revision {
            return Err(KeyError::FutureRevision);
        }
        self.compacted = revision;
        self.history
            .retain(|e| e.kv.as_ref().is_some_and(|kv| kv.mod_revision > revision));
        Ok(())
    }

    /// The keys' contents hashed (FNV-1a over keys, values and revisions): equal key spaces
    /// hash equal, as etcd's HashKV lets members compare theirs.
    pub fn hash(&self) -> u32 {
        let mut h: u32 = 0x811c_9dc5;
        let mut feed = |bytes: &[u8]| {
            for b in bytes {
                h ^= u32::from(*b);
                h = h.wrapping_mul(0x0100_0193);
            }
        };
        for kv in self.keys.values() {
            feed(&kv.key);
            feed(&kv.value);
            feed(&kv.mod_revision.to_be_bytes());
        }
        h
    }

    /// The current keys, in key order.
    pub fn all(&self) -> impl Iterator<Item = &KeyValue> {
        self.keys.values()
    }

    /// Bytes the keys take, for Status's database size.
    pub fn size(&self) -> i64 {
        self.keys
            .values()
            .map(|kv| (kv.key.len() + kv.value.len() + 48) as i64)
            .sum()
    }
}

/// The changes of one revision; [`Revision::commit`] makes them the store's.
pub struct Revision<'a> {
    space: &'a mut KeySpace,
    rev: i64,
    events: Vec<Event>,
}

impl Revision<'_> {
    /// Sets `key` to `value` (attached to `lease`, 0 for none); the previous value if any.
    pub fn put(&mut self, key: Vec<u8>, value: Vec<u8>, lease: i64) -> Option<KeyValue> {
        let prev = self.space.keys.get(&key).cloned();
        let kv = KeyValue {
            create_revision: prev.as_ref().map_or(self.rev, |p| p.create_revision),
            mod_revision: self.rev,
            version: prev.as_ref().map_or(1, |p| p.version + 1),
            key: key.clone(),
            value,
            lease,
        };
        self.space.keys.insert(key, kv.clone());
        self.events.push(Event {
            r#type: EventType::Put as i32,
            kv: Some(kv),
            prev_kv: prev.clone(),
        });
        prev
    }

    /// Deletes the keys in `range`; the deleted values.
    pub fn delete(&mut self, range: &KeyRange) -> Vec<KeyValue> {
        let gone = self.space.range(range);
        for kv in &gone {
            self.space.keys.remove(&kv.key);
            self.events.push(Event {
                r#type: EventType::Delete as i32,
                kv: Some(KeyValue {
                    key: kv.key.clone(),
                    mod_revision: self.rev,
                    ..Default::default()
                }),
                prev_kv: Some(kv.clone()),
            });
        }
        gone
    }

    /// Reads as the writes so far left the keys.
    pub fn space(&self) -> &KeySpace {
        self.space
    }

    /// Applies the revision (a revision with no change leaves the store's as it was) and
    /// hands back its events, for the watchers.
    pub fn commit(self) -> Vec<Event> {
        if self.events.is_empty() {
            return Vec::new();
        }
        self.space.revision = self.rev;
        for e in &self.events {
            if self.space.history.len() == HISTORY {
                self.space.history.pop_front();
            }
            self.space.history.push_back(e.clone());
        }
        self.events
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(s: &mut KeySpace, k: &str, v: &str) -> Vec<Event> {
        let mut w = s.begin();
        w.put(k.into(), v.into(), 0);
        w.commit()
    }

    fn keys(kvs: &[KeyValue]) -> Vec<String> {
        kvs.iter()
            .map(|kv| String::from_utf8_lossy(&kv.key).into_owned())
            .collect()
    }

    #[test]
    fn revisions_and_versions_move_as_etcds_do() {
        let mut s = KeySpace::new();
        assert_eq!(s.revision(), 1);
        put(&mut s, "a", "1");
        put(&mut s, "a", "2");
        let kv = s.get(b"a").cloned().expect("a is set");
        assert_eq!((kv.create_revision, kv.mod_revision, kv.version), (2, 3, 2));
        let mut w = s.begin();
        assert_eq!(w.delete(&KeyRange::new(b"a".to_vec(), vec![])).len(), 1);
        w.commit();
        assert_eq!(s.revision(), 4);
        put(&mut s, "a", "3");
        let kv = s.get(b"a").cloned().expect("a is set again");
        assert_eq!((kv.create_revision, kv.version), (5, 1));
    }

    #[test]
    fn ranges_follow_etcds_end_conventions() {
        let mut s = KeySpace::new();
        for k in ["a", "b/1", "b/2", "c"] {
            put(&mut s, k, "x");
        }
        let one = KeyRange::new(b"b/1".to_vec(), vec![]);
        assert_eq!(keys(&s.range(&one)), ["b/1"]);
        let prefix = KeyRange::new(b"b/".to_vec(), b"b0".to_vec());
        assert_eq!(keys(&s.range(&prefix)), ["b/1", "b/2"]);
        let from = KeyRange::new(b"b/2".to_vec(), vec![0]);
        assert_eq!(keys(&s.range(&from)), ["b/2", "c"]);
        let all = KeyRange::new(vec![0], vec![0]);
        assert_eq!(s.range(&all).len(), 4);
    }

    #[test]
    fn history_serves_past_starts_until_compacted() {
        let mut s = KeySpace::new();
        put(&mut s, "a", "1");
        put(&mut s, "b", "2");
        put(&mut s, "c", "3");
        assert_eq!(s.events_since(2).map(|e| e.len()), Ok(2));
        s.compact(3).expect("3 is not compacted yet");
        assert_eq!(s.events_since(1), Err(KeyError::Compacted));
        assert_eq!(s.events_since(3).map(|e| e.len()), Ok(1));
        assert_eq!(s.compact(2), Err(KeyError::Compacted));
        assert_eq!(s.check_read_revision(2), Err(KeyError::Compacted));
        assert_eq!(s.check_read_revision(9), Err(KeyError::FutureRevision));
    }

    #[test]
    fn a_revision_without_changes_does_not_advance() {
        let mut s = KeySpace::new();
        let mut w = s.begin();
        w.delete(&KeyRange::new(b"none".to_vec(), vec![]));
        assert!(w.commit().is_empty());
        assert_eq!(s.revision(), 1);
    }
}
