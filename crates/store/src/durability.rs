//! When a write is durable. A backend that syncs to disk takes a write's changes and answers
//! later; meanwhile the group's lock is free, so other writers of the group go on and their
//! writes share the sync. The write's answer must still wait: inside [`scope`] (an API
//! request) the wait is handed to the request, which awaits it before it answers; anywhere
//! else the writing thread waits itself.
//!
//! A group publishes a write's events to watchers only once the backend says it is durable,
//! in resourceVersion order. If a commit fails, every write of the group not yet durable is
//! undone and the group's epoch moves on, so a write computed on top of an undone one (queued
//! before the undo) is refused by the backend rather than stored.

use crate::error::{Result, StoreError};
use crate::event::Event;
use std::future::Future;
use std::sync::{Arc, Condvar, Mutex};

/// What a group offers its backend, to be told how its writes ended.
pub trait Settle: Send + Sync {
    /// Every write of the group through `resource_version` is durable: publish them.
    fn durable(&self, resource_version: u64);
    /// A commit that held writes of the group failed: undo every write not yet durable.
    fn failed(&self);
    /// The group's epoch: a write submitted in an older one builds on an undone write.
    fn epoch(&self) -> u64;
}

/// One write's changes, handed to a backend.
pub struct Commit<'a> {
    pub group: &'a str,
    pub changes: &'a [Arc<Event>],
    pub settle: Arc<dyn Settle>,
    /// The group's epoch when the write was made.
    pub epoch: u64,
}

/// How a backend took a write.
pub enum Accepted {
    /// It is durable already (or kept nowhere): the group publishes it at once.
    Done,
    /// It is queued; the ticket says when it is durable or why it failed.
    Queued(Ticket),
}

/// The outcome of one queued write, to be waited for from a thread or a task.
#[derive(Clone, Default)]
pub struct Ticket {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Ticket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ticket")
            .field("outcome", &self.outcome())
            .finish()
    }
}

#[derive(Default)]
struct Shared {
    outcome: Mutex<Option<Result<()>>>,
    settled: Condvar,
    notify: tokio::sync::Notify,
}

impl Ticket {
    /// A ticket not yet settled.
    pub fn new() -> Ticket {
        Ticket::default()
    }

    /// Settles the ticket; every waiter wakes.
    pub fn settle(&self, outcome: Result<()>) {
        let mut slot = self
            .shared
            .outcome
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        *slot = Some(outcome);
        self.shared.settled.notify_all();
        self.shared.notify.notify_waiters();
    }

    fn outcome(&self) -> Option<Result<()>> {
        self.shared
            .outcome
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Blocks the thread until the ticket is settled.
    pub fn wait_blocking(&self) -> Result<()> {
        let mut slot = self
            .shared
            .outcome
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        loop {
            if let Some(outcome) = slot.clone() {
                return outcome;
            }
            slot = self
                .shared
                .settled
                .wait(slot)
                .unwrap_or_else(|p| p.into_inner());
        }
    }

    /// Waits, without blocking the thread, until the ticket is settled.
    pub async fn wait(&self) -> Result<()> {
        loop {
            let notified = self.shared.notify.notified();
            tokio::pin!(notified);
            // Registered before the check, so a settle between the two is not missed.
            notified.as_mut().enable();
            if let Some(outcome) = self.outcome() {
                return outcome;
            }
            notified.await;
        }
    }
}

tokio::task_local! {
    /// The waits of the writes made in a [`scope`]; `None` in a [`detached`] one.
    static DEFERRED: Option<Arc<Mutex<Vec<Ticket>>>>;
}

/// The waits a request's writes handed it.
pub struct Deferred(Arc<Mutex<Vec<Ticket>>>);

impl Deferred {
    /// Waits until every write made in the scope is durable; the first failure.
    pub async fn wait(self) -> Result<()> {
        let tickets = std::mem::take(&mut *self.0.lock().unwrap_or_else(|p| p.into_inner()));
        let mut outcome = Ok(());
        for ticket in tickets {
            if let Err(e) = ticket.wait().await {
                outcome = outcome.and(Err(e));
            }
        }
        outcome
    }
}

/// Runs `f` with its writes' waits handed back (not made on the writing thread); the caller
/// waits for them with [`Deferred::wait`] before it tells anyone the writes were made.
pub async fn scope<F: Future>(f: F) -> (F::Output, Deferred) {
    let slot = Arc::new(Mutex::new(Vec::new()));
    let out = DEFERRED.scope(Some(slot.clone()), f).await;
    (out, Deferred(slot))
}

/// Runs `f`, a writer nobody waits on (a simulated kubelet or controller that runs for the
/// life of its cluster), with its writes' waits dropped: its writes are durable, and published
/// to watchers, when their commit is, but `f` goes on at once. A write whose commit fails is
/// undone as any other, so what `f` wrote and watchers saw never disagree. Without this, each
/// write of such a loop would hold its thread for a sync, or pile up waits nobody takes.
pub async fn detached<F: Future>(f: F) -> F::Output {
    DEFERRED.scope(None, f).await
}

/// Hands `ticket` to the scope this runs in; `Some(ticket)` back when there is none.
pub(crate) fn defer(ticket: Ticket) -> Option<Ticket> {
    let mut ticket = Some(ticket);
    let handed = DEFERRED.try_with(|slot| {
        if let (Some(slot), Some(t)) = (slot, ticket.take()) {
            slot.lock().unwrap_or_else(|p| p.into_inner()).push(t);
        }
    });
    match handed {
        Ok(()) => None,
        Err(_) => ticket,
    }
}

/// The error a write gets when a write it built on failed.
pub fn built_on_failed(group: &str) -> StoreError {
    StoreError::Backend(format!(
        "group {group}: an earlier write this one built on could not be stored"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_deferred_wait_ends_when_the_ticket_settles() {
        let ticket = Ticket::new();
        let settle = ticket.clone();
        let (handed, deferred) = scope(async move { defer(ticket).is_none() }).await;
        assert!(handed, "inside a scope the wait is handed over");
        let waiter = tokio::spawn(deferred.wait());
        tokio::task::yield_now().await;
        settle.settle(Err(StoreError::Backend("disk".into())));
        assert_eq!(
            waiter.await.unwrap(),
            Err(StoreError::Backend("disk".into()))
        );
        assert!(defer(Ticket::new()).is_some(), "outside one it is not");
        let never = Ticket::new();
        let dropped = detached(async move { defer(never).is_none() }).await;
        assert!(dropped, "a detached scope takes the wait and drops it");
    }

    /// A backend that queues every write until the test settles it.
    #[derive(Debug, Default)]
    struct Manual {
        queued: Mutex<Vec<(u64, Ticket)>>,
    }

    impl crate::Backend for Manual {
        fn submit(&self, commit: Commit<'_>) -> Result<Accepted> {
            let ticket = Ticket::new();
            let last = commit.changes.last().map_or(0, |e| e.resource_version);
            self.queued.lock().unwrap().push((last, ticket.clone()));
            Ok(Accepted::Queued(ticket))
        }
        fn drop_group(&self, _: &str) -> Result<()> {
            Ok(())
        }
    }

    fn cm(name: &str) -> serde_json::Value {
        serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
                           "metadata": {"name": name, "namespace": "d"}})
    }

    #[tokio::test]
    async fn watchers_hear_of_a_write_once_durable_and_a_failed_one_is_undone() {
        use crate::{ObjectKey, Store, StoreConfig};
        let backend = Arc::new(Manual::default());
        let store = Store::new(
            StoreConfig::default(),
            infrasim_clock::SystemClock::shared(),
            backend.clone(),
        );
        let group = store.create_group("g").unwrap();
        let mut watch = group.watch(None).unwrap();
        let g = group.clone();
        let (made, deferred) =
            scope(async move { g.create("configmaps", cm("a"), Default::default()) }).await;
        let made = made.unwrap();
        assert!(
            watch.try_next().unwrap().is_none(),
            "not durable yet: not sent"
        );
        let (rv, ticket) = backend.queued.lock().unwrap().pop().unwrap();
        assert_eq!(rv, made.meta.resource_version);
        Settle::durable(&*group, rv);
        ticket.settle(Ok(()));
        assert_eq!(deferred.wait().await, Ok(()));
        assert_eq!(watch.try_next().unwrap().unwrap().resource_version, rv);

        let g = group.clone();
        let (b, deferred) =
            scope(async move { g.create("configmaps", cm("b"), Default::default()) }).await;
        let b = b.unwrap();
        let at_a = group
            .snapshot("configmaps", crate::ReadAt::Exact(rv))
            .unwrap();
        assert_eq!(
            at_a.objects.len(),
            1,
            "a read at a's version holds no write after it"
        );
        let epoch = Settle::epoch(&*group);
        let (_, ticket) = backend.queued.lock().unwrap().pop().unwrap();
        Settle::failed(&*group);
        ticket.settle(Err(StoreError::Backend("disk full".into())));
        assert!(deferred.wait().await.is_err());
        assert!(
            group.get("configmaps", &ObjectKey::new("d", "b")).is_none(),
            "undone"
        );
        assert_eq!(Settle::epoch(&*group), epoch + 1);
        assert!(watch.try_next().unwrap().is_none(), "never sent");
        let g = group.clone();
        let (c, _) =
            scope(async move { g.create("configmaps", cm("c"), Default::default()) }).await;
        assert!(
            c.unwrap().meta.resource_version > b.meta.resource_version,
            "not reused"
        );
    }

    #[test]
    fn a_blocking_wait_ends_when_the_ticket_settles() {
        let ticket = Ticket::new();
        let settle = ticket.clone();
        let t = std::thread::spawn(move || settle.settle(Ok(())));
        assert_eq!(ticket.wait_blocking(), Ok(()));
        t.join().unwrap();
    }
}
