//! Where acknowledged writes go to survive a restart.
//!
//! Every write of a group produces an ordered batch of events; the group hands that batch to
//! its backend before it acknowledges the write or publishes it to watchers. The in-memory
//! backend keeps nothing and answers at once; a durable one queues the batch and says later
//! (see [`crate::durability`]), sharing one sync among many writes.

use crate::durability::{Accepted, Commit};
use crate::error::Result;
use crate::event::Event;
use crate::object::StoredObject;
use std::sync::Arc;

/// What a durable backend gives back of a group after a restart: its counter, its objects
/// and the newest of its events (oldest first, consecutive in the group's history).
#[derive(Debug, Default)]
pub struct GroupImage {
    pub name: String,
    pub resource_version: u64,
    pub objects: Vec<(Arc<str>, Arc<StoredObject>)>,
    pub window: Vec<Arc<Event>>,
}

/// Persistence for the changes of resource groups.
pub trait Backend: Send + Sync + std::fmt::Debug {
    /// Takes one write's changes (made while the group's lock is held, so in
    /// resourceVersion order): durable already, or queued with a ticket, its group told
    /// through `commit.settle` when they are durable or failed. An error refuses the write
    /// at once: nothing of it is applied or published.
    fn submit(&self, commit: Commit<'_>) -> Result<Accepted>;

    /// Forgets a dropped group.
    fn drop_group(&self, group: &str) -> Result<()>;

    /// The groups an earlier run left, to load before anything is served (none for a backend
    /// that keeps nothing).
    fn restore(&self) -> Result<Vec<GroupImage>> {
        Ok(Vec::new())
    }

    /// Whether what is written outlives the process (false for a backend that keeps
    /// nothing): a writer that only writes to survive a restart need not write at all then.
    fn keeps(&self) -> bool {
        true
    }
}

/// Keeps nothing: for `--ephemeral` runs and tests.
#[derive(Debug, Default)]
pub struct MemoryBackend;

impl Backend for MemoryBackend {
    fn submit(&self, _commit: Commit<'_>) -> Result<Accepted> {
        Ok(Accepted::Done)
    }

    fn drop_group(&self, _group: &str) -> Result<()> {
        Ok(())
    }

    fn keeps(&self) -> bool {
        false
    }
}
