//! How objects and events are laid out on disk. An object is kept as the exact bytes the
//! store encoded (so a restored object answers byte for byte as before) after what the API
//! layer derived from it; an event adds its type, resource and key, and the object before it.
//!
//! The layout is ours, a few length-prefixed fields, rather than a serde format: the object's
//! bytes go in as they are, with no re-encoding, and a reader that finds a field cut short or
//! a flag it does not know says so instead of guessing.

use bytes::Bytes;
use infrasim_store::{Derived, Event, EventType, ObjectKey, StoredObject};
use std::sync::Arc;

/// One event, as the tables need it.
pub struct Change {
    pub resource_version: u64,
    pub object_key: Vec<u8>,
    /// The object's record, or `None` when the event deletes it.
    pub object: Option<Vec<u8>>,
    pub event: Vec<u8>,
}

impl Change {
    pub fn of(group: &str, e: &Event) -> Change {
        Change {
            resource_version: e.resource_version,
            object_key: object_key(group, &e.resource, &e.key),
            object: (e.event_type != EventType::Deleted).then(|| object(&e.object)),
            event: event(e),
        }
    }
}

/// Why a record cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Corrupt(pub String);

pub(crate) fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    out.extend_from_slice(&(b.len() as u32).to_le_bytes());
    out.extend_from_slice(b);
}

/// A cursor over a record.
pub(crate) struct Reader<'a> {
    pub data: &'a [u8],
}

impl<'a> Reader<'a> {
    pub fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], Corrupt> {
        if self.data.len() < n {
            return Err(Corrupt(format!("record cut short in {what}")));
        }
        let (head, rest) = self.data.split_at(n);
        self.data = rest;
        Ok(head)
    }

    pub fn byte(&mut self, what: &str) -> Result<u8, Corrupt> {
        Ok(self.take(1, what)?[0])
    }

    pub fn u32(&mut self, what: &str) -> Result<usize, Corrupt> {
        let b = self.take(4, what)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
    }

    pub fn u64(&mut self, what: &str) -> Result<u64, Corrupt> {
        let b = self.take(8, what)?;
        let mut le = [0u8; 8];
        le.copy_from_slice(b);
        Ok(u64::from_le_bytes(le))
    }

    pub fn bytes(&mut self, what: &str) -> Result<&'a [u8], Corrupt> {
        let n = self.u32(what)?;
        self.take(n, what)
    }

    pub fn str(&mut self, what: &str) -> Result<&'a str, Corrupt> {
        std::str::from_utf8(self.bytes(what)?).map_err(|_| Corrupt(format!("{what} is not UTF-8")))
    }
}

const HELD: u8 = 1;
const TYPED: u8 = 2;
const NO_GENERATION: u8 = 4;

/// An object's record: its derived facts, then its bytes.
pub fn object(o: &StoredObject) -> Vec<u8> {
    let mut out = Vec::with_capacity(o.len() + 16);
    put_object(&mut out, o);
    out
}

fn put_object(out: &mut Vec<u8>, o: &StoredObject) {
    let d = &o.derived;
    let flags =
        (d.held as u8 * HELD) | (d.typed as u8 * TYPED) | (d.no_generation as u8 * NO_GENERATION);
    out.push(flags);
    out.extend_from_slice(&(d.fields.len() as u32).to_le_bytes());
    for (k, v) in d.fields.iter() {
        put_bytes(out, k.as_bytes());
        put_bytes(out, v.as_bytes());
    }
    put_bytes(out, &o.bytes());
}

/// Reads an object's record.
pub fn read_object(data: &[u8]) -> Result<Arc<StoredObject>, Corrupt> {
    read_object_from(&mut Reader { data })
}

fn read_object_from(r: &mut Reader<'_>) -> Result<Arc<StoredObject>, Corrupt> {
    let flags = r.byte("flags")?;
    if flags & !(HELD | TYPED | NO_GENERATION) != 0 {
        return Err(Corrupt(format!("unknown object flags {flags:#x}")));
    }
    let count = r.u32("field count")?;
    let mut pairs = Vec::with_capacity(count.min(64));
    for _ in 0..count {
        pairs.push((r.str("field name")?, r.str("field value")?));
    }
    let fields = pairs.into_iter().collect();
    let derived = Arc::new(Derived {
        fields,
        held: flags & HELD != 0,
        typed: flags & TYPED != 0,
        no_generation: flags & NO_GENERATION != 0,
    });
    let bytes = Bytes::copy_from_slice(r.bytes("object")?);
    StoredObject::from_stored(bytes, derived).map_err(|e| Corrupt(format!("object JSON: {e}")))
}

/// An event's record: type, resource, key, the object after and (if any) before.
pub fn event(e: &Event) -> Vec<u8> {
    let mut out = Vec::with_capacity(e.object.len() * 2 + 64);
    out.push(match e.event_type {
        EventType::Added => 0,
        EventType::Modified => 1,
        EventType::Deleted => 2,
    });
    put_bytes(&mut out, e.resource.as_bytes());
    put_bytes(&mut out, e.key.namespace.as_bytes());
    put_bytes(&mut out, e.key.name.as_bytes());
    put_object(&mut out, &e.object);
    match &e.previous {
        Some(p) => {
            out.push(1);
            put_object(&mut out, p);
        }
        None => out.push(0),
    }
    out
}

/// Reads an event's record; `resource_version` is its key.
pub fn read_event(data: &[u8], resource_version: u64) -> Result<Event, Corrupt> {
    let mut r = Reader { data };
    let event_type = match r.byte("event type")? {
        0 => EventType::Added,
        1 => EventType::Modified,
        2 => EventType::Deleted,
        t => return Err(Corrupt(format!("unknown event type {t}"))),
    };
    let resource = Arc::from(r.str("resource")?);
    let namespace = r.str("namespace")?;
    let name = r.str("name")?;
    let object = read_object_from(&mut r)?;
    let previous = match r.byte("previous flag")? {
        0 => None,
        1 => Some(read_object_from(&mut r)?),
        f => return Err(Corrupt(format!("unknown previous flag {f}"))),
    };
    Ok(Event {
        resource_version,
        event_type,
        resource,
        key: ObjectKey::new(namespace, name),
        object,
        previous,
    })
}

/// The key of an object in the objects table: group, resource, namespace and name, each
/// ended by a NUL (none of them can hold one), so one group's objects are one key range.
pub fn object_key(group: &str, resource: &str, key: &ObjectKey) -> Vec<u8> {
    let mut out = group_prefix(group);
    for part in [resource, &key.namespace, &key.name] {
        out.extend_from_slice(part.as_bytes());
        out.push(0);
    }
    out
}

/// The prefix every object key of `group` starts with.
pub fn group_prefix(group: &str) -> Vec<u8> {
    let mut out = group.as_bytes().to_vec();
    out.push(0);
    out
}

/// The bounds of `group`'s object keys: from its prefix (ending in NUL) up to, not
/// including, the same with 1 in place of the NUL.
pub fn group_range(group: &str) -> (Vec<u8>, Vec<u8>) {
    let start = group_prefix(group);
    let mut end = start.clone();
    if let Some(last) = end.last_mut() {
        *last = 1;
    }
    (start, end)
}

/// The resource of an object key.
pub fn resource_of(key: &[u8]) -> Result<&str, Corrupt> {
    key.split(|b| *b == 0)
        .nth(1)
        .and_then(|r| std::str::from_utf8(r).ok())
        .ok_or_else(|| Corrupt("object key without a resource".into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stored(json: &str, typed: bool) -> Arc<StoredObject> {
        let derived = Arc::new(Derived {
            fields: [("spec.nodeName", "n1")].into_iter().collect(),
            held: false,
            typed,
            no_generation: true,
        });
        StoredObject::from_stored(Bytes::copy_from_slice(json.as_bytes()), derived).unwrap()
    }

    #[test]
    fn objects_and_events_read_back_byte_for_byte() {
        let o = stored(
            r#"{"kind":"Pod","apiVersion":"v1","metadata":{"name":"p","namespace":"d","uid":"u","resourceVersion":"7"}}"#,
            true,
        );
        let back = read_object(&object(&o)).unwrap();
        assert_eq!(back.bytes(), o.bytes());
        assert_eq!(back.derived, o.derived);
        assert_eq!(back.meta, o.meta);
        let e = Event {
            resource_version: 7,
            event_type: EventType::Modified,
            resource: Arc::from("pods"),
            key: ObjectKey::new("d", "p"),
            object: o.clone(),
            previous: Some(o.clone()),
        };
        let read = read_event(&event(&e), 7).unwrap();
        assert_eq!(read.event_type, EventType::Modified);
        assert_eq!((&*read.resource, &read.key), ("pods", &e.key));
        assert_eq!(read.previous.unwrap().bytes(), o.bytes());
        let key = object_key("g", "pods", &e.key);
        assert!(key.starts_with(&group_prefix("g")));
        assert_eq!(resource_of(&key).unwrap(), "pods");
    }

    #[test]
    fn a_cut_or_unknown_record_is_refused_with_what_is_wrong() {
        let o = stored(r#"{"metadata":{"name":"a"}}"#, false);
        let full = object(&o);
        let cut = read_object(&full[..full.len() - 3]).unwrap_err();
        assert!(cut.0.contains("cut short"), "{cut}");
        let mut flagged = full.clone();
        flagged[0] = 0x80;
        assert!(read_object(&flagged).unwrap_err().0.contains("flags"));
        assert!(read_event(&[9], 1).unwrap_err().0.contains("event type"));
    }
}
