//! Group commit. One thread owns redb's write side. Writers hand it their changes, already
//! encoded, and wait; it takes every change waiting at that moment (from any number of
//! writers and groups), writes them in one transaction and commits it with one fsync, then
//! answers each writer. Under load many writes share a sync; alone, a write pays for one.

use crate::records;
use infrasim_store::durability::{built_on_failed, Settle, Ticket};
use infrasim_store::{Event, EventType, StoreError};
use redb::{Database, Durability, ReadableDatabase, ReadableTable};
use std::collections::HashMap;
use std::sync::mpsc::{Receiver, SyncSender};
use std::sync::{Arc, Weak};

/// At most this many jobs share one commit (a bound on one transaction's size).
const BATCH: usize = 4096;

/// One write's changes, encoded, and whom to tell how it ended.
pub struct Job {
    pub group: Arc<str>,
    pub changes: Vec<Change>,
    /// The group, told when the write is durable (it publishes it) or failed (it undoes it).
    /// Weak: the committer must never hold a group's last handle (the group holds the
    /// backend, whose drop waits for this thread).
    pub settle: Weak<dyn Settle>,
    /// The group's epoch when the write was made: an older one than the group's now means
    /// the write builds on one that was undone, and it is refused.
    pub epoch: u64,
    /// The writer's wait.
    pub ticket: Ticket,
}

/// How far past its newest resourceVersion a group's counter is reserved on disk. A
/// restarted group counts on from the reservation, so a version handed out before the
/// crash (a reader may have seen one whose write was never made durable) is never reused.
pub const RESERVE: u64 = 100_000;

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
            object_key: records::object_key(group, &e.resource, &e.key),
            object: (e.event_type != EventType::Deleted).then(|| records::object(&e.object)),
            event: records::event(e),
        }
    }
}

/// What the committer is asked to do.
pub enum Message {
    Write(Job),
    /// Forget a group: its objects, events and counter.
    Drop(Arc<str>, SyncSender<Result<(), String>>),
}

/// Per group, how many events are kept, the newest resourceVersion, and the counter
/// reserved on disk.
pub type Kept = HashMap<Arc<str>, Span>;

#[derive(Debug, Clone, Copy, Default)]
pub struct Span {
    /// Events on disk. Counted, not derived from resourceVersions: those jump by the
    /// reservation at every restart, and a window measured in them would drop every event
    /// from before the restart at the first write after it.
    pub events: u64,
    pub newest: u64,
    pub reserved: u64,
}

/// Opens the database again after a failed commit.
pub type Reopen = Box<dyn Fn() -> Result<Database, redb::DatabaseError> + Send>;

/// Runs until every sender is gone.
pub fn run(
    db: Database,
    reopen: Reopen,
    inbox: Receiver<Message>,
    window: usize,
    mut kept: Kept,
    file: std::path::PathBuf,
) {
    let mut db = Some(db);
    // Writes of a failed commit, to take back should their data have reached the file.
    let mut taking_back: Vec<TakeBack> = Vec::new();
    while let Ok(first) = inbox.recv() {
        let mut batch = vec![first];
        while batch.len() < BATCH {
            match inbox.try_recv() {
                Ok(m) => batch.push(m),
                Err(_) => break,
            }
        }
        if db.is_none() {
            // Opened again once the disk lets it recover.
            db = reopen().ok();
            kept = db
                .as_ref()
                .and_then(|d| read_kept(d).ok())
                .unwrap_or_default();
        }
        let batch = refuse_stale(batch);
        let outcome = match &db {
            Some(open) if !taking_back.is_empty() => take_back(open, &taking_back)
                .map_err(|e| format!("taking back a failed write: {e}"))
                .and_then(|()| {
                    taking_back.clear();
                    kept = read_kept(open).unwrap_or_default();
                    commit(open, &batch, window, &mut kept).map_err(|e| e.to_string())
                }),
            Some(open) => commit(open, &batch, window, &mut kept).map_err(|e| e.to_string()),
            None => Err("the database is not open (an earlier write failed)".to_string()),
        };
        if outcome.is_err() {
            taking_back.extend(to_take_back(&batch));
        }
        if let Err(why) = &outcome {
            tracing::error!(error = %why, "a commit failed; its writes are refused");
            // After an I/O error redb refuses every transaction until it is opened again;
            // opening it recovers the last commit. What the failed commit counted is read
            // again from disk.
            drop(db.take());
            db = reopen().ok();
            kept = db
                .as_ref()
                .and_then(|d| read_kept(d).ok())
                .unwrap_or_default();
        }
        answer(
            batch,
            outcome.map_err(|why| format!("writing {}: {why}", file.display())),
        );
    }
}

/// One change of a failed commit, and what its key held before.
pub struct TakeBack {
    group: Arc<str>,
    resource_version: u64,
    object_key: Vec<u8>,
    previous: Option<Vec<u8>>,
}

/// The changes of `batch`'s writes, newest first, with what each key held before. A commit
/// whose sync failed may still have reached the file (redb then finds it there when opened
/// again), though its writers were told it failed and the groups undid it; taking it back
/// makes the refusal true on disk too. Read from the events' records: only a failure pays.
fn to_take_back(batch: &[Message]) -> Vec<TakeBack> {
    let mut out = Vec::new();
    for m in batch.iter().rev() {
        let Message::Write(job) = m else { continue };
        for c in job.changes.iter().rev() {
            let previous = records::read_event(&c.event, c.resource_version)
                .ok()
                .and_then(|e| e.previous)
                .map(|p| records::object(&p));
            out.push(TakeBack {
                group: job.group.clone(),
                resource_version: c.resource_version,
                object_key: c.object_key.clone(),
                previous,
            });
        }
    }
    out
}

/// Puts back what the keys of failed writes held before them (newest first), and drops
/// their events: a no-op where the failed commit never reached the file.
fn take_back(db: &Database, changes: &[TakeBack]) -> Result<(), redb::Error> {
    let mut txn = db.begin_write()?;
    txn.set_durability(Durability::Immediate)?;
    {
        let mut objects = txn.open_table(crate::OBJECTS)?;
        let mut events = txn.open_table(crate::EVENTS)?;
        for c in changes {
            match &c.previous {
                Some(record) => objects.insert(c.object_key.as_slice(), record.as_slice())?,
                None => objects.remove(c.object_key.as_slice())?,
            };
            events.remove((&*c.group, c.resource_version))?;
        }
    }
    txn.commit()?;
    Ok(())
}

/// Refuses the writes that build on an undone one (their group's epoch moved on).
fn refuse_stale(batch: Vec<Message>) -> Vec<Message> {
    batch
        .into_iter()
        .filter_map(|m| match m {
            Message::Write(job) if job.settle.upgrade().is_some_and(|s| s.epoch() != job.epoch) => {
                job.ticket.settle(Err(built_on_failed(&job.group)));
                None
            }
            other => Some(other),
        })
        .collect()
}

/// Tells every writer (and group) of the batch how its commit ended.
fn answer(batch: Vec<Message>, outcome: Result<(), String>) {
    let mut failed_groups = std::collections::HashSet::new();
    for m in batch {
        match m {
            Message::Write(job) => match &outcome {
                Ok(()) => {
                    if let (Some(last), Some(group)) = (job.changes.last(), job.settle.upgrade()) {
                        group.durable(last.resource_version);
                    }
                    job.ticket.settle(Ok(()));
                }
                Err(why) => {
                    if failed_groups.insert(job.group.clone()) {
                        if let Some(group) = job.settle.upgrade() {
                            group.failed();
                        }
                    }
                    job.ticket.settle(Err(StoreError::Backend(why.clone())));
                }
            },
            Message::Drop(_, reply) => {
                let _ = reply.send(outcome.clone());
            }
        }
    }
}

fn commit(
    db: &Database,
    batch: &[Message],
    window: usize,
    kept: &mut Kept,
) -> Result<(), redb::Error> {
    let mut txn = db.begin_write()?;
    txn.set_durability(Durability::Immediate)?;
    {
        let mut objects = txn.open_table(crate::OBJECTS)?;
        let mut events = txn.open_table(crate::EVENTS)?;
        let mut groups = txn.open_table(crate::GROUPS)?;
        for m in batch {
            match m {
                Message::Write(job) => {
                    for c in &job.changes {
                        match &c.object {
                            Some(record) => {
                                objects.insert(c.object_key.as_slice(), record.as_slice())?
                            }
                            None => objects.remove(c.object_key.as_slice())?,
                        };
                        events.insert((&*job.group, c.resource_version), c.event.as_slice())?;
                    }
                    let Some(last) = job.changes.last() else {
                        continue;
                    };
                    let span = kept.entry(job.group.clone()).or_default();
                    span.events += job.changes.len() as u64;
                    span.newest = last.resource_version;
                    if span.newest + RESERVE / 2 > span.reserved {
                        span.reserved = span.newest + RESERVE;
                        groups.insert(&*job.group, span.reserved)?;
                    }
                }
                Message::Drop(group, _) => {
                    let (prefix, end) = records::group_range(group);
                    objects.retain_in(prefix.as_slice()..end.as_slice(), |_, _| false)?;
                    events.retain_in((&**group, 0)..=(&**group, u64::MAX), |_, _| false)?;
                    groups.remove(&**group)?;
                    kept.remove(group);
                }
            }
        }
        trim(&mut events, window, kept)?;
    }
    txn.commit()?;
    Ok(())
}

/// Drops each group's events older than the newest `window`, once a quarter window more
/// has piled up (so trimming is paid for once per many writes).
fn trim(
    events: &mut redb::Table<(&str, u64), &[u8]>,
    window: usize,
    kept: &mut Kept,
) -> Result<(), redb::Error> {
    let window = window.max(1) as u64;
    for (group, span) in kept.iter_mut() {
        if span.events < window + window / 4 {
            continue;
        }
        let surplus = span.events - window;
        let first_kept = events
            .range((&**group, 0)..=(&**group, u64::MAX))?
            .nth(surplus as usize)
            .transpose()?
            .map(|(k, _)| k.value().1);
        let Some(keep_from) = first_kept else {
            continue;
        };
        events.retain_in((&**group, 0)..(&**group, keep_from), |_, _| false)?;
        span.events = window;
    }
    Ok(())
}

/// The span of events each group has on disk, from the groups just read (what [`read_kept`]
/// finds, without a second pass over the events at start-up).
pub fn kept_of(images: &[infrasim_store::GroupImage]) -> Kept {
    images
        .iter()
        .map(|image| {
            let span = Span {
                events: image.window.len() as u64,
                newest: image.window.last().map_or(0, |e| e.resource_version),
                reserved: image.resource_version,
            };
            (Arc::from(image.name.as_str()), span)
        })
        .collect()
}

/// The span of events each group has on disk.
pub fn read_kept(db: &Database) -> Result<Kept, redb::Error> {
    let txn = db.begin_read()?;
    let groups = txn.open_table(crate::GROUPS)?;
    let events = txn.open_table(crate::EVENTS)?;
    let mut kept = Kept::new();
    for entry in groups.iter()? {
        let (name, reserved) = entry?;
        let name = name.value();
        let range = || events.range((name, 0)..=(name, u64::MAX));
        let newest = range()?
            .next_back()
            .transpose()?
            .map_or(0, |(k, _)| k.value().1);
        let span = Span {
            events: range()?.count() as u64,
            newest,
            reserved: reserved.value(),
        };
        kept.insert(Arc::from(name), span);
    }
    Ok(kept)
}
