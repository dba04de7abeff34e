//! Change events: what a watch delivers and what the event window keeps.

use crate::object::{ObjectKey, StoredObject};
use std::sync::Arc;

/// The kind of change, named as Kubernetes watch events name them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    Added,
    Modified,
    Deleted,
}

impl EventType {
    /// `ADDED`, `MODIFIED` or `DELETED`.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

/// One change to one object. Every event of a group has its own resourceVersion, and the
/// group's events are totally ordered by it.
#[derive(Debug, Clone)]
pub struct Event {
    /// The resourceVersion this change produced.
    pub resource_version: u64,
    pub event_type: EventType,
    /// The resource (e.g. `pods`, `deployments.apps`) the object belongs to.
    pub resource: Arc<str>,
    pub key: ObjectKey,
    /// The object after the change; for a deletion, its last state (with the deletion's
    /// resourceVersion, as kube-apiserver reports it).
    pub object: Arc<StoredObject>,
    /// The object before the change, `None` for a creation. Lets the store rebuild a past
    /// snapshot for consistent pagination and exact-resourceVersion lists.
    pub previous: Option<Arc<StoredObject>>,
}
