//! The database side of the durable store. Its own thread takes the changes the committer
//! has made durable in the log (and answered) and writes them into redb, every batch queued
//! at that moment in one transaction, so the committer goes on syncing frames meanwhile. It
//! says how far the database has got (the last frame it holds), which tells the committer
//! when a log file may be written over.
//!
//! A failed database commit loses nothing: the changes are in the log, and they stay here,
//! ahead of any later ones, to be tried again (at the next batch, or after [`RETRY`]); the
//! database is opened again first (redb's own recovery), as it refuses every transaction
//! after an I/O error until then.

use crate::records;
use crate::wal::Entry;
use redb::{Database, Durability, ReadableTable};
use std::collections::HashMap;
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// Opens the database again after a failed commit.
pub type Reopen = Box<dyn Fn() -> Result<Database, redb::DatabaseError> + Send>;

/// How soon changes the database refused are tried again when nothing else comes.
const RETRY: Duration = Duration::from_millis(200);

/// Per group, the events the database holds. Counted, not derived from resourceVersions:
/// those jump by the reservation at every restart, and a window measured in them would drop
/// every event from before the restart at the first write after it.
pub type Counts = HashMap<Arc<str>, u64>;

/// The events each group has in the database, from the groups just read.
pub fn counts_of(images: &[infrasim_store::GroupImage]) -> Counts {
    images
        .iter()
        .map(|image| (Arc::from(image.name.as_str()), image.window.len() as u64))
        .collect()
}

/// What the applier is asked to do, in log order.
pub enum Work {
    /// Changes of the log through frame number `.1`.
    Apply(Vec<Entry>, u64),
    /// Answer once everything before it is applied.
    Flush(SyncSender<Result<(), String>>),
}

/// How far the database has got: the last frame it holds, and whether its last commit
/// failed. The committer reads it to know when a log file may be written over, and waits on
/// it when the database lags far behind.
#[derive(Default)]
pub struct Progress {
    state: Mutex<(u64, bool)>,
    changed: Condvar,
}

impl Progress {
    pub fn new(applied: u64) -> Progress {
        Progress {
            state: Mutex::new((applied, false)),
            changed: Condvar::new(),
        }
    }

    /// The last frame the database holds.
    pub fn applied(&self) -> u64 {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).0
    }

    /// Waits until the database holds frame `seq`, or until a commit of it fails (then the
    /// log, which holds every change, is what keeps them).
    pub fn wait_for(&self, seq: u64) {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        while state.0 < seq && !state.1 {
            state = self.changed.wait(state).unwrap_or_else(|p| p.into_inner());
        }
    }

    fn set(&self, applied: u64, failing: bool) {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        *state = (applied.max(state.0), failing);
        self.changed.notify_all();
    }
}

pub struct Applier {
    /// `None` after a failed commit, until it is opened again.
    db: Option<Database>,
    reopen: Reopen,
    window: usize,
    counts: Counts,
    /// Changes not in the database yet (refused once at least), and their last frame.
    backlog: Vec<Entry>,
    backlog_seq: u64,
    progress: Arc<Progress>,
    /// Why the last commit failed, while changes wait.
    failing: Option<String>,
}

impl Drop for Applier {
    /// However the thread ends (a panic included), a committer waiting on the database goes
    /// on: no more progress will come, and the log keeps what the database does not hold.
    fn drop(&mut self) {
        self.progress.set(0, true);
    }
}

impl Applier {
    pub fn new(
        db: Database,
        reopen: Reopen,
        window: usize,
        counts: Counts,
        progress: Arc<Progress>,
    ) -> Applier {
        Applier {
            db: Some(db),
            reopen,
            window,
            counts,
            backlog: Vec::new(),
            backlog_seq: 0,
            progress,
            failing: None,
        }
    }

    /// Runs until the committer is gone, then tries once more what is left.
    pub fn run(mut self, inbox: Receiver<Work>) {
        let mut held = None;
        loop {
            let Some(work) = held.take().or_else(|| self.next(&inbox)) else {
                break;
            };
            match work {
                Work::Apply(entries, seq) => {
                    self.take(entries, seq);
                    // Changes queued behind these go into the same transaction.
                    while let Ok(more) = inbox.try_recv() {
                        match more {
                            Work::Apply(entries, seq) => self.take(entries, seq),
                            other => {
                                held = Some(other);
                                break;
                            }
                        }
                    }
                    self.apply();
                }
                Work::Flush(reply) => {
                    let _ = reply.send(match &self.failing {
                        Some(why) => Err(why.clone()),
                        None => Ok(()),
                    });
                }
            }
        }
        // Left in the log if this fails: the next start replays it.
        self.apply();
    }

    /// The next work; while changes wait, they are tried again every [`RETRY`].
    fn next(&mut self, inbox: &Receiver<Work>) -> Option<Work> {
        loop {
            if self.backlog.is_empty() {
                return inbox.recv().ok();
            }
            match inbox.recv_timeout(RETRY) {
                Ok(work) => return Some(work),
                Err(RecvTimeoutError::Timeout) => self.apply(),
                Err(RecvTimeoutError::Disconnected) => return None,
            }
        }
    }

    fn take(&mut self, entries: Vec<Entry>, seq: u64) {
        self.backlog.extend(entries);
        self.backlog_seq = self.backlog_seq.max(seq);
    }

    fn apply(&mut self) {
        if self.backlog.is_empty() {
            return;
        }
        let mut counts = self.counts.clone();
        let (entries, seq, window) = (&self.backlog, self.backlog_seq, self.window);
        let outcome = database(&mut self.db, &self.reopen).and_then(|db| {
            apply_entries(db, entries, seq, window, &mut counts).map_err(|e| e.to_string())
        });
        match outcome {
            Ok(()) => {
                self.counts = counts;
                self.backlog.clear();
                self.failing = None;
                self.progress.set(seq, false);
            }
            Err(why) => {
                tracing::error!(error = %why, "the database could not take the log's writes; they wait in the log");
                self.db = None;
                self.failing = Some(why);
                self.progress.set(0, true);
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
                Entry::Forget { group } => {
                    let (prefix, end) = records::group_range(group);
                    objects.retain_in(prefix.as_slice()..end.as_slice(), |_, _| false)?;
                    events.retain_in((&**group, 0)..=(&**group, u64::MAX), |_, _| false)?;
                    groups.remove(&**group)?;
                    counts.remove(group);
                }
            }
        }
        trim(&mut events, window, counts)?;
        txn.open_table(crate::META)?.insert(crate::APPLIED, seq)?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wait_ends_when_the_database_gets_there_or_its_commits_fail() {
        let progress = Arc::new(Progress::new(3));
        let applier = {
            let progress = progress.clone();
            std::thread::spawn(move || {
                progress.set(5, false);
                progress.set(7, false);
            })
        };
        progress.wait_for(7);
        assert_eq!(progress.applied(), 7);
        applier.join().unwrap();
        // A failure keeps how far it got, and lets a waiter go on (the log holds the rest).
        progress.set(0, true);
        progress.wait_for(100);
        assert_eq!(progress.applied(), 7);
    }

    #[test]
    fn an_applier_that_ends_lets_a_waiting_committer_go_on() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join(crate::FILE);
        let db = Database::create(&file).unwrap();
        let progress = Arc::new(Progress::new(0));
        let reopen: Reopen = Box::new(move || Database::open(&file));
        let applier = Applier::new(db, reopen, 10, Counts::new(), progress.clone());
        let waiter = {
            let progress = progress.clone();
            std::thread::spawn(move || progress.wait_for(1))
        };
        // As a panic unwinding the applier's thread would drop it.
        drop(applier);
        waiter.join().unwrap();
        assert_eq!(progress.applied(), 0, "nothing was applied");
    }
}
