//! Group commit. One thread owns the write side. Writers hand it their changes, already
//! encoded, and wait; it takes every change waiting at that moment (from any number of
//! writers and groups), appends them to the log as one frame, syncs it once, then answers
//! each writer. Under load many writes share a sync; alone, a write pays for one.
//!
//! The answered changes are kept in memory and go into the database in one transaction once
//! the log holds [`APPLY_AT`] bytes, once no write has come for [`IDLE`], before a group is
//! forgotten, and when the committer stops; the log then starts over. The database commit is
//! paid once per thousands of writes instead of once per sync.

use crate::records;
use crate::wal::{self, Entry, LogFile};
use infrasim_store::durability::{built_on_failed, Settle, Ticket};
use infrasim_store::{Event, EventType, StoreError};
use redb::{Database, Durability, ReadableTable};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender};
use std::sync::{Arc, Weak};
use std::time::Duration;

/// At most this many jobs share one frame (a bound on one sync's size).
const BATCH: usize = 4096;
/// The log is applied to the database once its frames pass this many bytes. It is also the
/// size the log is made with, so its first pass writes in place.
pub const APPLY_AT: u64 = 4 << 20;
/// ... or once no write has come for this long, so a quiet store's log stays short.
const IDLE: Duration = Duration::from_millis(50);

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

/// Per group, how many events the database keeps, the newest resourceVersion, and the
/// counter reserved on disk.
pub type Kept = HashMap<Arc<str>, Span>;

#[derive(Debug, Clone, Copy, Default)]
pub struct Span {
    /// Events in the database. Counted, not derived from resourceVersions: those jump by
    /// the reservation at every restart, and a window measured in them would drop every
    /// event from before the restart at the first write after it.
    pub events: u64,
    pub newest: u64,
    pub reserved: u64,
}

/// Opens the database again after a failed commit.
pub type Reopen = Box<dyn Fn() -> Result<Database, redb::DatabaseError> + Send>;

/// The write side: the log, the database behind it, and what the log holds that the
/// database does not yet.
pub struct Committer {
    /// `None` after a failed database commit, until it is opened again.
    pub db: Option<Database>,
    pub reopen: Reopen,
    pub log: LogFile,
    pub log_path: PathBuf,
    pub window: usize,
    pub kept: Kept,
    /// The number of the newest frame in the log (the database's when the log is empty).
    pub seq: u64,
    /// Where the next frame goes.
    pub offset: u64,
    /// A frame whose write or sync failed starts here: it is blanked before the next one.
    pub blank_at: Option<u64>,
    /// Answered changes the database does not hold yet, in order.
    pub pending: Vec<Entry>,
}

/// A writer waiting on a frame.
struct Waiter {
    group: Arc<str>,
    settle: Weak<dyn Settle>,
    ticket: Ticket,
    last: Option<u64>,
}

impl Committer {
    /// Runs until every sender is gone, then hands the database what the log holds.
    pub fn run(mut self, inbox: Receiver<Message>) {
        loop {
            let first = if self.pending.is_empty() {
                inbox.recv().map_err(|_| RecvTimeoutError::Disconnected)
            } else {
                inbox.recv_timeout(IDLE)
            };
            let first = match first {
                Ok(m) => m,
                Err(RecvTimeoutError::Timeout) => {
                    let _ = self.apply();
                    continue;
                }
                Err(RecvTimeoutError::Disconnected) => break,
            };
            let mut batch = vec![first];
            while batch.len() < BATCH {
                match inbox.try_recv() {
                    Ok(m) => batch.push(m),
                    Err(_) => break,
                }
            }
            self.handle(refuse_stale(batch));
            if self.offset >= APPLY_AT {
                let _ = self.apply();
            }
        }
        // Left in the log if this fails: the next start replays it.
        let _ = self.apply();
    }

    fn handle(&mut self, batch: Vec<Message>) {
        let mut writes = Vec::new();
        for m in batch {
            match m {
                Message::Write(job) => writes.push(job),
                Message::Drop(group, reply) => {
                    self.append(std::mem::take(&mut writes));
                    let _ = reply.send(self.drop_group(&group));
                }
            }
        }
        self.append(writes);
    }

    /// Appends the jobs' changes as one frame, and answers their writers.
    fn append(&mut self, jobs: Vec<Job>) {
        if jobs.is_empty() {
            return;
        }
        let mut entries = Vec::new();
        let mut waiters = Vec::with_capacity(jobs.len());
        // Reservations as they will be once this frame is durable.
        let mut spans: HashMap<Arc<str>, Span> = HashMap::new();
        for job in jobs {
            let last = job.changes.last().map(|c| c.resource_version);
            if let Some(newest) = last {
                let span = spans
                    .entry(job.group.clone())
                    .or_insert_with(|| self.kept.get(&job.group).copied().unwrap_or_default());
                span.newest = newest;
                if span.newest + RESERVE / 2 > span.reserved {
                    span.reserved = span.newest + RESERVE;
                    entries.push(Entry::Reserve {
                        group: job.group.clone(),
                        reserved: span.reserved,
                    });
                }
            }
            entries.extend(job.changes.into_iter().map(|change| Entry::Put {
                group: job.group.clone(),
                change,
            }));
            waiters.push(Waiter {
                group: job.group,
                settle: job.settle,
                ticket: job.ticket,
                last,
            });
        }
        let frame = wal::frame(self.seq + 1, &entries);
        let outcome = self.write_frame(&frame);
        if outcome.is_ok() {
            self.seq += 1;
            self.offset += frame.len() as u64;
            for (group, span) in spans {
                let kept = self.kept.entry(group).or_default();
                (kept.newest, kept.reserved) = (span.newest, span.reserved);
            }
            self.pending.extend(entries);
        } else if let Err(why) = &outcome {
            tracing::error!(error = %why, "a commit failed; its writes are refused");
        }
        let log = self.log_path.display();
        answer(
            waiters,
            outcome.map_err(|why| format!("writing {log}: {why}")),
        );
    }

    fn write_frame(&mut self, frame: &[u8]) -> Result<(), String> {
        if let Some(at) = self.blank_at {
            self.log
                .blank(at)
                .map_err(|e| format!("taking back a failed write: {e}"))?;
            self.blank_at = None;
        }
        let at = self.offset;
        let written = self.log.write_at(frame, at).and_then(|()| self.log.sync());
        if let Err(e) = written {
            // Its data may have reached the file although its writers are told it failed;
            // blanking its start makes the refusal true on disk too.
            self.blank_at = Some(at);
            return Err(e.to_string());
        }
        Ok(())
    }

    /// Hands the database what the log holds, in one transaction, and starts the log over.
    fn apply(&mut self) -> Result<(), String> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let mut counts: Counts = self
            .kept
            .iter()
            .map(|(g, s)| (g.clone(), s.events))
            .collect();
        let outcome = database(&mut self.db, &self.reopen).and_then(|db| {
            apply_entries(db, &self.pending, self.seq, self.window, &mut counts)
                .map_err(|e| e.to_string())
        });
        match &outcome {
            Ok(()) => {
                for (group, events) in counts {
                    self.kept.entry(group).or_default().events = events;
                }
                self.pending.clear();
                self.offset = 0;
            }
            Err(why) => {
                // The writes stay in the log and in memory, and are tried again later.
                // After an I/O error redb refuses every transaction until it is opened
                // again; opening it recovers its last commit.
                tracing::error!(error = %why, "the database could not take the log's writes");
                self.db = None;
            }
        }
        outcome
    }

    fn drop_group(&mut self, group: &Arc<str>) -> Result<(), String> {
        self.apply()?;
        let outcome = database(&mut self.db, &self.reopen)
            .and_then(|db| forget(db, group).map_err(|e| e.to_string()));
        match outcome {
            Ok(()) => {
                self.kept.remove(group);
                Ok(())
            }
            Err(why) => {
                self.db = None;
                Err(why)
            }
        }
    }
}

/// The database, opened again if a failed commit closed it.
fn database<'a>(db: &'a mut Option<Database>, reopen: &Reopen) -> Result<&'a Database, String> {
    if db.is_none() {
        *db = Some(reopen().map_err(|e| e.to_string())?);
    }
    db.as_ref()
        .ok_or_else(|| "the database is not open".to_string())
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

/// Tells every writer (and group) of a frame how it ended.
fn answer(waiters: Vec<Waiter>, outcome: Result<(), String>) {
    let mut failed_groups = std::collections::HashSet::new();
    for w in waiters {
        match &outcome {
            Ok(()) => {
                if let (Some(last), Some(group)) = (w.last, w.settle.upgrade()) {
                    group.durable(last);
                }
                w.ticket.settle(Ok(()));
            }
            Err(why) => {
                if failed_groups.insert(w.group.clone()) {
                    if let Some(group) = w.settle.upgrade() {
                        group.failed();
                    }
                }
                w.ticket.settle(Err(StoreError::Backend(why.clone())));
            }
        }
    }
}

/// Per group, the events the database holds.
pub type Counts = HashMap<Arc<str>, u64>;

/// Writes `entries` (the log through frame `seq`) into the database in one transaction,
/// trimming each group's events to the newest `window`.
pub fn apply_entries(
    db: &Database,
    entries: &[Entry],
    seq: u64,
    window: usize,
    counts: &mut Counts,
) -> Result<(), redb::Error> {
    // Events this pass would trim at once are never written.
    let mut skip: HashMap<&str, usize> = HashMap::new();
    for e in entries {
        if let Entry::Put { group, .. } = e {
            *skip.entry(group).or_default() += 1;
        }
    }
    for n in skip.values_mut() {
        *n = n.saturating_sub(window.max(1));
    }
    let mut txn = db.begin_write()?;
    txn.set_durability(Durability::Immediate)?;
    {
        let mut objects = txn.open_table(crate::OBJECTS)?;
        let mut events = txn.open_table(crate::EVENTS)?;
        let mut groups = txn.open_table(crate::GROUPS)?;
        for e in entries {
            match e {
                Entry::Put { group, change } => {
                    let key = change.object_key.as_slice();
                    match &change.object {
                        Some(record) => objects.insert(key, record.as_slice())?,
                        None => objects.remove(key)?,
                    };
                    if let Some(n) = skip.get_mut(&**group).filter(|n| **n > 0) {
                        *n -= 1;
                        continue;
                    }
                    let at = (&**group, change.resource_version);
                    events.insert(at, change.event.as_slice())?;
                    *counts.entry(group.clone()).or_default() += 1;
                }
                Entry::Reserve { group, reserved } => {
                    groups.insert(&**group, reserved)?;
                }
            }
        }
        trim(&mut events, window, counts)?;
        txn.open_table(crate::META)?.insert(crate::APPLIED, seq)?;
    }
    txn.commit()?;
    Ok(())
}

/// Drops a group's objects, events and counter.
fn forget(db: &Database, group: &str) -> Result<(), redb::Error> {
    let mut txn = db.begin_write()?;
    txn.set_durability(Durability::Immediate)?;
    {
        let (prefix, end) = records::group_range(group);
        let mut objects = txn.open_table(crate::OBJECTS)?;
        objects.retain_in(prefix.as_slice()..end.as_slice(), |_, _| false)?;
        let mut events = txn.open_table(crate::EVENTS)?;
        events.retain_in((group, 0)..=(group, u64::MAX), |_, _| false)?;
        txn.open_table(crate::GROUPS)?.remove(group)?;
    }
    txn.commit()?;
    Ok(())
}

/// Drops each group's events older than the newest `window`, once a quarter window more
/// has piled up (so trimming is paid for once per many writes).
fn trim(
    events: &mut redb::Table<(&str, u64), &[u8]>,
    window: usize,
    counts: &mut Counts,
) -> Result<(), redb::Error> {
    let window = window.max(1) as u64;
    for (group, count) in counts.iter_mut() {
        if *count < window + window / 4 {
            continue;
        }
        let surplus = *count - window;
        let first_kept = events
            .range((&**group, 0)..=(&**group, u64::MAX))?
            .nth(surplus as usize)
            .transpose()?
            .map(|(k, _)| k.value().1);
        let Some(keep_from) = first_kept else {
            continue;
        };
        events.retain_in((&**group, 0)..(&**group, keep_from), |_, _| false)?;
        *count = window;
    }
    Ok(())
}

/// The span of events each group has in the database, from the groups just read.
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
