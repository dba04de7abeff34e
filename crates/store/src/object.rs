//! Stored objects: the serialized bytes of an object plus the metadata the store reasons about.
//!
//! An object is encoded once, when it is written; reads and watch events hand out the same
//! bytes (`Arc`-shared), so a GET or a watch fan-out never re-encodes anything. A store that
//! packs its objects (see `packing`) keeps them compressed instead and restores the bytes on
//! each read.

use crate::fields::SelectableFields;
use crate::packing::{Body, Packer};
use bytes::Bytes;
use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{Map, Value};
use std::sync::Arc;

/// Where an object lives inside one resource: its namespace (empty for cluster-scoped
/// objects) and name. Ordered by namespace then name, as Kubernetes lists them.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectKey {
    pub namespace: Arc<str>,
    pub name: Arc<str>,
}

impl ObjectKey {
    /// A key; `namespace` is `""` for cluster-scoped objects.
    pub fn new(namespace: &str, name: &str) -> Self {
        ObjectKey {
            namespace: Arc::from(namespace),
            name: Arc::from(name),
        }
    }
}

/// One entry of `metadata.ownerReferences`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnerRef {
    pub uid: Arc<str>,
    pub api_version: Box<str>,
    pub kind: Box<str>,
    pub name: Box<str>,
    pub controller: bool,
    pub block_owner_deletion: bool,
}

/// The parts of `metadata` the store reads and maintains.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectMeta {
    pub name: Arc<str>,
    pub namespace: Arc<str>,
    pub uid: Arc<str>,
    pub resource_version: u64,
    pub generation: i64,
    pub creation_timestamp: DateTime<Utc>,
    pub deletion_timestamp: Option<DateTime<Utc>>,
    pub labels: crate::labels::Labels,
    // Boxed slices, not `Vec`s: every stored version carries both and nearly all are empty,
    // so the eight bytes of a `Vec`'s capacity were paid hundreds of times per cluster.
    pub finalizers: Box<[Box<str>]>,
    pub owner_references: Box<[OwnerRef]>,
}

impl ObjectMeta {
    /// The object's key.
    pub fn key(&self) -> ObjectKey {
        ObjectKey {
            namespace: self.namespace.clone(),
            name: self.name.clone(),
        }
    }
}

/// An object as the store keeps it.
#[derive(Debug, Clone)]
pub struct StoredObject {
    /// Parsed metadata (kept in step with `bytes`).
    pub meta: ObjectMeta,
    /// What the API layer derived from the object when it was written.
    pub derived: Arc<Derived>,
    /// The object, JSON-encoded, `metadata` included: read with [`StoredObject::bytes`].
    body: Body,
}

impl StoredObject {
    /// An object as it was stored (its exact bytes and what was derived from it), read back
    /// after a restart; its metadata is read from the bytes.
    pub fn from_stored(bytes: Bytes, derived: Arc<Derived>) -> serde_json::Result<Arc<Self>> {
        let value: Value = serde_json::from_slice(&bytes)?;
        Ok(Arc::new(StoredObject {
            meta: read_meta(&value),
            derived,
            body: Body::Plain(bytes),
        }))
    }

    /// An object with `bytes` as its JSON and `meta` as what the store read from it (a
    /// stored object served in another version keeps its stored metadata).
    pub fn plain(meta: ObjectMeta, derived: Arc<Derived>, bytes: Bytes) -> Arc<Self> {
        Arc::new(StoredObject {
            meta,
            derived,
            body: Body::Plain(bytes),
        })
    }

    /// The object, JSON-encoded, `metadata` included. The stored bytes themselves, unless
    /// the store packs its objects (then restored: see [`crate::StoreConfig::packed`]).
    pub fn bytes(&self) -> Bytes {
        self.body.bytes()
    }

    /// The length of [`Self::bytes`].
    pub fn len(&self) -> usize {
        self.body.len()
    }

    /// Whether the JSON is empty (never, for an object the store wrote).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bytes its JSON takes in memory: less than [`Self::len`] when packed.
    pub fn footprint(&self) -> usize {
        self.body.footprint()
    }

    /// The same object with its JSON packed by `packer` for `resource`.
    pub(crate) fn repacked(&self, packer: &Packer, resource: &str) -> Arc<StoredObject> {
        Arc::new(StoredObject {
            meta: self.meta.clone(),
            derived: self.derived.clone(),
            body: packer.pack(resource, self.bytes()),
        })
    }

    /// The object decoded as JSON.
    pub fn to_value(&self) -> serde_json::Result<Value> {
        serde_json::from_slice(&self.bytes())
    }

    /// The value of a selectable field: `metadata.name` and `metadata.namespace` always, the
    /// rest when the API layer extracted them.
    pub fn field(&self, path: &str) -> Option<&str> {
        match path {
            "metadata.name" => Some(&self.meta.name),
            "metadata.namespace" => Some(&self.meta.namespace),
            _ => self.derived.fields.get(path),
        }
    }
}

/// Facts about an object that only the API layer knows how to read, computed when it is
/// written and kept beside it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Derived {
    /// Extra selectable fields (`spec.nodeName`, `status.phase`, …), so field selectors never
    /// parse the object.
    pub fields: SelectableFields,
    /// The kind itself holds deletion back, beyond `metadata.finalizers` (a namespace's
    /// `spec.finalizers`): once marked for deletion, the object stays until this clears.
    pub held: bool,
    /// A built-in kind, encoded in its Go type's field order as kube-apiserver encodes it
    /// (`kind`, `apiVersion`, `metadata`, body, `status`); otherwise a custom resource,
    /// encoded with sorted keys as Go encodes an unstructured object. See `encode`.
    pub typed: bool,
    /// The kind keeps no `metadata.generation`: kube-apiserver sets and advances it only for
    /// kinds whose spec a controller observes (Deployments, Jobs, custom resources, …), not
    /// for ConfigMaps, Secrets, Services or Pods.
    pub no_generation: bool,
}

impl StoredObject {
    /// Whether nothing holds the object back from removal once it is marked for deletion.
    pub fn releasable(&self) -> bool {
        self.meta.finalizers.is_empty() && !self.derived.held
    }
}

/// Formats a timestamp as Kubernetes does (RFC 3339, seconds, `Z`).
pub fn format_time(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

fn parse_time(v: Option<&Value>) -> Option<DateTime<Utc>> {
    v.and_then(Value::as_str)
        .and_then(|s| DateTime::parse_from_rfc3339(s).ok())
        .map(|t| t.with_timezone(&Utc))
}

/// Reads the store-relevant metadata out of an object. Missing fields read as empty; the API
/// layer validates names before anything reaches the store.
pub(crate) fn read_meta(object: &Value) -> ObjectMeta {
    let empty = Map::new();
    let meta = object
        .get("metadata")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let str_of = |k: &str| meta.get(k).and_then(Value::as_str).unwrap_or("");
    let labels = meta
        .get("labels")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| v.as_str().map(|v| (k.as_str(), v)))
                .collect()
        })
        .unwrap_or_default();
    let finalizers = meta
        .get("finalizers")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(|v| v.as_str().map(Box::from)).collect())
        .unwrap_or_default();
    let owner_references = meta
        .get("ownerReferences")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|r| {
                    let s = |k: &str| r.get(k).and_then(Value::as_str).unwrap_or("");
                    let uid = s("uid");
                    if uid.is_empty() {
                        return None;
                    }
                    let s = |k: &str| Box::from(s(k));
                    Some(OwnerRef {
                        uid: Arc::from(uid),
                        api_version: s("apiVersion"),
                        kind: s("kind"),
                        name: s("name"),
                        controller: r
                            .get("controller")
                            .and_then(Value::as_bool)
                            .unwrap_or(false),
                        block_owner_deletion: r
                            .get("blockOwnerDeletion")
                            .and_then(Value::as_bool)
                            .unwrap_or(false),
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    ObjectMeta {
        name: crate::shared_names::name(str_of("name")),
        namespace: crate::shared_names::name(str_of("namespace")),
        uid: Arc::from(str_of("uid")),
        resource_version: str_of("resourceVersion").parse().unwrap_or(0),
        generation: meta.get("generation").and_then(Value::as_i64).unwrap_or(0),
        creation_timestamp: parse_time(meta.get("creationTimestamp")).unwrap_or_default(),
        deletion_timestamp: parse_time(meta.get("deletionTimestamp")),
        labels,
        finalizers,
        owner_references,
    }
}

/// The `metadata` object of `object`, created if missing.
pub(crate) fn meta_mut(object: &mut Value) -> &mut Map<String, Value> {
    if !object.is_object() {
        *object = Value::Object(Map::new());
    }
    let root = object.as_object_mut().expect("just made an object");
    let meta = root
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if !meta.is_object() {
        *meta = Value::Object(Map::new());
    }
    meta.as_object_mut().expect("just made an object")
}

/// Everything but `metadata` and `status`: what `generation` tracks.
pub(crate) fn spec_equal(a: &Value, b: &Value) -> bool {
    let (Some(a), Some(b)) = (a.as_object(), b.as_object()) else {
        return a == b;
    };
    let relevant = |k: &String| k != "metadata" && k != "status";
    let mut ak = a.keys().filter(|k| relevant(k));
    let bk: Vec<_> = b.keys().filter(|k| relevant(k)).collect();
    if ak.clone().count() != bk.len() {
        return false;
    }
    ak.all(|k| b.get(k) == a.get(k))
}

/// Builds a stored object from a value whose metadata the store has already set, packed
/// with `packing`'s dictionary for its resource when the store packs its objects. A new
/// version of `previous` shares with it what did not change (see [`share_unchanged`]).
pub(crate) fn seal(
    value: &Value,
    derived: Arc<Derived>,
    packing: Option<(&Packer, &str)>,
    previous: Option<&StoredObject>,
) -> serde_json::Result<Arc<StoredObject>> {
    let mut encoded = if derived.typed {
        crate::encode::to_vec_typed(value)?
    } else {
        serde_json::to_vec(value)?
    };
    // The encoder's buffer grows by doubling, so it ends up to twice the object's length; the
    // store keeps these bytes for the object's lifetime (and the window's), so it keeps only
    // what was written: one copy here saved about a quarter of a fleet's object memory.
    encoded.shrink_to_fit();
    let bytes = Bytes::from(encoded);
    let body = match packing {
        Some((packer, resource)) => packer.pack(resource, bytes),
        None => Body::Plain(bytes),
    };
    let (meta, derived) = match previous {
        Some(previous) => share_unchanged(read_meta(value), derived, previous),
        None => (read_meta(value), derived),
    };
    Ok(Arc::new(StoredObject {
        meta,
        derived,
        body,
    }))
}

/// `meta` and `derived` with every part equal to `previous`'s taken from it. Most writes are
/// a status or a spec: the new version then holds its predecessor's name, namespace, uid and
/// selectable fields rather than copies, and the superseded version the window keeps costs
/// little more than its bytes. (At 1,000 fleet clusters the parsed metadata and fields of
/// those versions were about 60 KB a cluster.) Labels need no step here: equal sets are one
/// interned copy already (see `labels`).
fn share_unchanged(
    mut meta: ObjectMeta,
    derived: Arc<Derived>,
    previous: &StoredObject,
) -> (ObjectMeta, Arc<Derived>) {
    let before = &previous.meta;
    for (now, then) in [
        (&mut meta.name, &before.name),
        (&mut meta.namespace, &before.namespace),
        (&mut meta.uid, &before.uid),
    ] {
        if now == then {
            *now = then.clone();
        }
    }
    let derived = if derived == previous.derived {
        previous.derived.clone()
    } else {
        derived
    };
    (meta, derived)
}

#[cfg(test)]
mod tests {
    /// A fleet keeps about two hundred stored versions per cluster, each in its own `Arc`
    /// allocation (two counters and the object). The allocator rounds that up to a size class
    /// (jemalloc's and mimalloc's: ..., 160, 192, 224, ...): at 216 bytes it took 224, and a
    /// field that brings it past 192 again costs 32 bytes on every version.
    #[test]
    fn a_stored_version_fits_the_192_byte_size_class() {
        let allocation =
            2 * std::mem::size_of::<usize>() + std::mem::size_of::<super::StoredObject>();
        assert!(allocation <= 192, "{allocation} bytes");
    }
}
