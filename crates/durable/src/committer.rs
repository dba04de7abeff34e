//! Group commit. One thread owns the write side. Writers hand it their changes, already
//! encoded, and wait; it takes every change waiting at that moment (from any number of
//! writers and groups), appends them to the log as one frame, syncs it once, then answers
//! each writer. Under load many writes share a sync; alone, a write pays for one.
//!
//! The answered changes go on to the [`applier`](crate::applier), which writes them into the
//! database thousands at a time on its own thread. The log is two files: once the active one
//! holds [`APPLY_AT`] bytes and the database has taken everything the other holds, the
//! committer goes on in the other from its beginning. Changes also go to the applier once no
//! write has come for [`IDLE`], before a group is forgotten, and when the committer stops.

use crate::applier::{Progress, Reopen, Work};
use crate::records::Change;
use crate::wal::{self, Entry, LogFile};
use infrasim_store::durability::{built_on_failed, Settle, Ticket};
use infrasim_store::StoreError;
use redb::Database;
use std::collections::HashMap;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, SyncSender};
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

/// At most this many jobs, and about this many bytes, share one frame (a bound on one
/// sync's size, and far inside what a frame's header can count).
const BATCH: usize = 4096;
const BATCH_BYTES: usize = 64 << 20;
/// A log file holds this many bytes of frames before the log goes on in the other. It is
/// also the size each file is made with, so a first pass over it writes in place.
pub const APPLY_AT: u64 = 4 << 20;
/// A log file grows past [`APPLY_AT`] while the database has not taken the other file's
/// frames; at this size the committer waits for it.
const LAG_LIMIT: u64 = 8 * APPLY_AT;
/// The answered changes go to the database once no write has come for this long, so a
/// quiet store's log holds little the database lacks.
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

/// What the committer is asked to do.
pub enum Message {
    Write(Job),
    /// Forget a group: its objects, events and counter.
    Drop(Arc<str>, SyncSender<Result<(), String>>),
    /// Answer once the database holds every write answered so far.
    Flush(SyncSender<Result<(), String>>),
}

impl Message {
    /// The bytes a write adds to a frame.
    fn bytes(&self) -> usize {
        match self {
            Message::Write(job) => job
                .changes
                .iter()
                .map(|c| c.object_key.len() + c.object.as_ref().map_or(0, Vec::len) + c.event.len())
                .sum(),
            _ => 0,
        }
    }
}

/// Per group, the newest resourceVersion logged and the counter reserved on disk.
pub type Kept = HashMap<Arc<str>, Span>;

#[derive(Debug, Clone, Copy, Default)]
pub struct Span {
    pub newest: u64,
    pub reserved: u64,
}

/// The write side: the log's two files, and what has gone where.
pub struct Committer {
    logs: [LogFile; 2],
    /// The file frames go to.
    active: usize,
    kept: Kept,
    /// The number of the newest frame in the log (the database's when the log is empty).
    seq: u64,
    /// Where the next frame goes in the active file.
    offset: u64,
    /// The newest frame of the other file: it may be written over once the database holds it.
    other_last: u64,
    /// A frame whose write or sync failed starts here: it is blanked before the next one.
    blank_at: Option<u64>,
    /// Answered changes not yet handed to the applier, in order.
    pending: Vec<Entry>,
    /// How far the database has got (the applier's word).
    progress: Arc<Progress>,
    work: Option<Sender<Work>>,
    applier: Option<JoinHandle<()>>,
}

/// A writer waiting on a frame.
struct Waiter {
    settle: Weak<dyn Settle>,
    ticket: Ticket,
    last: Option<u64>,
}

/// Starts the applier and the committer; the committer's inbox and thread (which ends the
/// applier's when it ends).
pub fn start(
    db: Database,
    reopen: Reopen,
    logs: [LogFile; 2],
    window: usize,
    images: &[infrasim_store::GroupImage],
    seq: u64,
) -> std::io::Result<(Sender<Message>, JoinHandle<()>)> {
    let progress = Arc::new(Progress::new(seq));
    let counts = crate::applier::counts_of(images);
    let applier = crate::applier::Applier::new(db, reopen, window, counts, progress.clone());
    let (work, work_inbox) = std::sync::mpsc::channel();
    let applier = std::thread::Builder::new()
        .name("store-applier".into())
        .spawn(move || applier.run(work_inbox))?;
    let committer = Committer {
        logs,
        active: 0,
        kept: kept_of(images),
        seq,
        offset: 0,
        other_last: seq,
        blank_at: None,
        pending: Vec::new(),
        progress,
        work: Some(work),
        applier: Some(applier),
    };
    // Unbounded: a writer sends while holding its group's lock, and the committer takes
    // group locks to publish, so a full queue could wait on itself. Each queued write is
    // a request in flight.
    let (inbox, receiver) = std::sync::mpsc::channel();
    let thread = std::thread::Builder::new()
        .name("store-committer".into())
        .spawn(move || committer.run(receiver))?;
    Ok((inbox, thread))
}

impl Committer {
    /// Runs until every sender is gone, then lets the applier finish.
    fn run(mut self, inbox: Receiver<Message>) {
        loop {
            let first = if self.pending.is_empty() {
                inbox.recv().map_err(|_| RecvTimeoutError::Disconnected)
            } else {
                inbox.recv_timeout(IDLE)
            };
            let first = match first {
                Ok(m) => m,
                Err(RecvTimeoutError::Timeout) => {
                    self.hand_off();
                    continue;
                }
                Err(RecvTimeoutError::Disconnected) => break,
            };
            let mut bytes = first.bytes();
            let mut batch = vec![first];
            while batch.len() < BATCH && bytes < BATCH_BYTES {
                match inbox.try_recv() {
                    Ok(m) => {
                        bytes += m.bytes();
                        batch.push(m);
                    }
                    Err(_) => break,
                }
            }
            self.handle(refuse_stale(batch));
            self.turn_over();
        }
        self.hand_off();
        drop(self.work.take());
        if let Some(applier) = self.applier.take() {
            let _ = applier.join();
        }
    }

    fn handle(&mut self, batch: Vec<Message>) {
        let mut writes = Vec::new();
        for m in batch {
            match m {
                Message::Write(job) => writes.push(job),
                Message::Drop(group, reply) => {
                    self.append(std::mem::take(&mut writes));
                    let _ = reply.send(self.forget(group));
                }
                Message::Flush(reply) => {
                    self.append(std::mem::take(&mut writes));
                    self.flush(reply);
                }
            }
        }
        self.append(writes);
    }

    /// Hands the answered changes to the applier, which answers `reply` once it holds them.
    fn flush(&mut self, reply: SyncSender<Result<(), String>>) {
        self.hand_off();
        let sent = match &self.work {
            Some(w) => w.send(Work::Flush(reply)).map_err(|e| e.0),
            None => Err(Work::Flush(reply)),
        };
        if let Err(Work::Flush(reply)) = sent {
            let _ = reply.send(Err("the database's thread stopped".into()));
        }
    }

    /// Hands the answered changes to the applier.
    fn hand_off(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        let entries = std::mem::take(&mut self.pending);
        if let Some(work) = &self.work {
            // Should the applier be gone, the changes are in the log for the next start.
            let _ = work.send(Work::Apply(entries, self.seq));
        }
    }

    /// Once the active file is full: its changes go to the applier, and once the database
    /// holds every frame of the other file, the log goes on there from its beginning.
    fn turn_over(&mut self) {
        if self.offset < APPLY_AT {
            return;
        }
        self.hand_off();
        if self.offset >= LAG_LIMIT {
            // The database lags far behind: the writers wait for it here, so the log and the
            // changes queued in memory stay bounded. Not if its commits fail: the log holds
            // every change, and grows until the disk heals or a write to it fails.
            self.progress.wait_for(self.other_last);
        }
        let free = self.progress.applied() >= self.other_last;
        // A failed frame is blanked in the active file before anything else is written.
        if free && self.blank_at.is_none() {
            self.other_last = self.seq;
            self.active = 1 - self.active;
            self.offset = 0;
        }
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
                settle: job.settle,
                ticket: job.ticket,
                last,
            });
        }
        let outcome = self.log(entries);
        if outcome.is_ok() {
            for (group, span) in spans {
                self.kept.insert(group, span);
            }
        }
        answer(waiters, outcome);
    }

    /// Logs that `group` is gone, in order with the writes around it (a start replays the
    /// two in that order too).
    fn forget(&mut self, group: Arc<str>) -> Result<(), String> {
        self.log(vec![Entry::Forget {
            group: group.clone(),
        }])?;
        self.kept.remove(&group);
        Ok(())
    }

    /// Appends `entries` as the next frame and syncs it; once it is durable they wait for the
    /// applier.
    fn log(&mut self, entries: Vec<Entry>) -> Result<(), String> {
        let frame = wal::frame(self.seq + 1, &entries);
        if let Err(why) = self.write_frame(&frame) {
            tracing::error!(error = %why, "a commit failed; its writes are refused");
            let log = self.logs[self.active].path().display();
            return Err(format!("writing {log}: {why}"));
        }
        self.seq += 1;
        self.offset += frame.len() as u64;
        self.pending.extend(entries);
        Ok(())
    }

    fn write_frame(&mut self, frame: &[u8]) -> Result<(), String> {
        let log = &self.logs[self.active];
        if let Some(at) = self.blank_at {
            log.blank(at)
                .map_err(|e| format!("taking back a failed write: {e}"))?;
            self.blank_at = None;
        }
        let at = self.offset;
        if let Err(e) = log.write_at(frame, at).and_then(|()| log.sync()) {
            // Its data may have reached the file although its writers are told it failed;
            // blanking its start makes the refusal true on disk too.
            self.blank_at = Some(at);
            return Err(e.to_string());
        }
        Ok(())
    }
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

/// Tells every writer (and group) of a frame how it ended. Each group hears once, of its
/// newest write in the frame (durable through it means durable through every earlier one),
/// before any writer is answered, so an answered write is already published.
fn answer(waiters: Vec<Waiter>, outcome: Result<(), String>) {
    // Keyed by the group object, not its name: a group dropped and made again under the
    // same name is another group.
    let mut groups: HashMap<usize, (&Weak<dyn Settle>, u64)> = HashMap::new();
    for w in &waiters {
        let id = w.settle.as_ptr() as *const () as usize;
        let newest = w.last.unwrap_or(0);
        groups
            .entry(id)
            .and_modify(|(_, rv)| *rv = (*rv).max(newest))
            .or_insert((&w.settle, newest));
    }
    for (settle, newest) in groups.into_values() {
        let Some(group) = settle.upgrade() else {
            continue;
        };
        match &outcome {
            Ok(()) if newest > 0 => group.durable(newest),
            Ok(()) => {}
            Err(_) => group.failed(),
        }
    }
    for w in waiters {
        let told = outcome.clone().map_err(StoreError::Backend);
        w.ticket.settle(told);
    }
}

/// Each group's newest resourceVersion and reservation, from the groups just read.
fn kept_of(images: &[infrasim_store::GroupImage]) -> Kept {
    images
        .iter()
        .map(|image| {
            let span = Span {
                newest: image.window.last().map_or(0, |e| e.resource_version),
                reserved: image.resource_version,
            };
            (Arc::from(image.name.as_str()), span)
        })
        .collect()
}
