//! Where acknowledged writes go to survive a restart.
//!
//! Every write of a group produces an ordered batch of [`Event`]s; the group hands that batch
//! to its backend before it acknowledges the write or publishes it to watchers. The in-memory
//! backend keeps nothing. A durable backend appends the batch to a log (and may group-commit
//! batches of many groups into one fsync); the store's write path is already shaped for it.

use crate::durability::{Accepted, Commit};
use crate::error::Result;
use crate::event::Event;
use crate::group::GroupImage;
use std::sync::Arc;

/// Persistence for the changes of resource groups.
pub trait Backend: Send + Sync + std::fmt::Debug {
    /// Makes one write's changes durable, in order. An error aborts the write: nothing of it
    /// is applied or published.
    fn append(&self, group: &str, changes: &[Arc<Event>]) -> Result<()>;

    /// Takes one write's changes (made while the group's lock is held, so in
    /// resourceVersion order): durable already, or queued with a ticket, its group told
    /// through `commit.settle` when they are durable or failed. An error refuses the write
    /// at once: nothing of it is applied or published. By default, [`Backend::append`].
    fn submit(&self, commit: Commit<'_>) -> Result<Accepted> {
        self.append(commit.group, commit.changes)
            .map(|_| Accepted::Done)
    }

    /// Forgets a dropped group.
    fn drop_group(&self, group: &str) -> Result<()>;

    /// The groups an earlier run left, to load before anything is served (none for a backend
    /// that keeps nothing).
    fn restore(&self) -> Result<Vec<GroupImage>> {
        Ok(Vec::new())
    }
}

/// Keeps nothing: for `--ephemeral` runs and tests.
#[derive(Debug, Default)]
pub struct MemoryBackend;

impl Backend for MemoryBackend {
    fn append(&self, _group: &str, _changes: &[Arc<Event>]) -> Result<()> {
        Ok(())
    }

    fn drop_group(&self, _group: &str) -> Result<()> {
        Ok(())
    }
}
