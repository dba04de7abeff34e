//! What the content library service remembers: libraries, items and update sessions, by
//! ID. The data alone; the operations on it are in the files of their concern.

use bytes::Bytes;
use chrono::{DateTime, Utc};
use std::collections::BTreeMap;

#[derive(Debug, Clone)]
pub(super) struct Library {
    pub(super) name: String,
    pub(super) description: String,
    /// The datastore (reference value) the library's storage backing names.
    pub(super) datastore: String,
    pub(super) created: DateTime<Utc>,
    pub(super) modified: DateTime<Utc>,
    pub(super) version: u64,
}

#[derive(Debug, Clone)]
pub(super) struct Item {
    pub(super) library: String,
    pub(super) name: String,
    pub(super) description: String,
    /// `ovf`, `iso`, … as the client says; an item given none becomes `ovf` when an `.ovf`
    /// file arrives, as vCenter infers it.
    pub(super) ty: String,
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
#[derive(Debug, Default)]
pub(crate) struct ContentLibrary {
    pub(super) libraries: BTreeMap<String, Library>,
    pub(super) items: BTreeMap<String, Item>,
    pub(super) sessions: BTreeMap<String, UpdateSession>,
}
