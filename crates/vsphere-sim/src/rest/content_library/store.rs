//! What the content library service remembers: libraries, items and update sessions, by
//! ID. The data alone; the operations on it are in the files of their concern.

use bytes::Bytes;
use chrono::{DateTime, Utc};
use std::collections::BTreeMap;

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub(super) struct Library {
    pub(super) name: String,
    pub(super) description: String,
    /// The datastore (reference value) the library's storage backing names.
    pub(super) datastore: String,
    pub(super) created: DateTime<Utc>,
    pub(super) modified: DateTime<Utc>,
    pub(super) version: u64,
}

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub(super) struct Item {
    pub(super) library: String,
    pub(super) name: String,
    pub(super) description: String,
    /// `ovf`, `iso`, … as the client says; an item given none becomes `ovf` when an `.ovf`
    /// file arrives, as vCenter infers it.
    pub(super) ty: String,
    #[serde(with = "files_base64")]
    pub(super) files: BTreeMap<String, Bytes>,
    pub(super) created: DateTime<Utc>,
    pub(super) modified: DateTime<Utc>,
    pub(super) content_version: u64,
}

/// An update session's lifecycle, in vCenter's words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Phase {
    Active,
    Done,
    Canceled,
    Error,
}

impl Phase {
    pub(super) fn word(self) -> &'static str {
        match self {
            Phase::Active => "ACTIVE",
            Phase::Done => "DONE",
            Phase::Canceled => "CANCELED",
            Phase::Error => "ERROR",
        }
    }
}

/// A file added to an update session: where to push it, and its bytes once pushed.
#[derive(Debug, Clone)]
pub(super) struct Upload {
    pub(super) uri: String,
    /// The size the client announced (0 when it did not).
    pub(super) size: i64,
    pub(super) data: Option<Bytes>,
}

#[derive(Debug, Clone)]
pub(super) struct UpdateSession {
    pub(super) item: String,
    pub(super) phase: Phase,
    pub(super) files: BTreeMap<String, Upload>,
    pub(super) expires: DateTime<Utc>,
    /// The item's content version when the session began.
    pub(super) content_version: u64,
}

/// A simulator's libraries, items and update sessions, by ID.
/// Kept whole (see `persist`) but for the update sessions, which end with the process as a
/// vCenter's do.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
pub(crate) struct ContentLibrary {
    pub(super) libraries: BTreeMap<String, Library>,
    pub(super) items: BTreeMap<String, Item>,
    #[serde(skip)]
    pub(super) sessions: BTreeMap<String, UpdateSession>,
}

/// An item's files kept as base64 text (the store keeps JSON).
mod files_base64 {
    use base64::Engine;
    use bytes::Bytes;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};
    use std::collections::BTreeMap;

    pub fn serialize<S: Serializer>(
        files: &BTreeMap<String, Bytes>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        let engine = base64::engine::general_purpose::STANDARD;
        let text: BTreeMap<&String, String> =
            files.iter().map(|(k, v)| (k, engine.encode(v))).collect();
        text.serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<BTreeMap<String, Bytes>, D::Error> {
        let engine = base64::engine::general_purpose::STANDARD;
        BTreeMap::<String, String>::deserialize(d)?
            .into_iter()
            .map(|(k, v)| {
                let bytes = engine.decode(v).map_err(serde::de::Error::custom)?;
                Ok((k, Bytes::from(bytes)))
            })
            .collect()
    }
}
