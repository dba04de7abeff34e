//! The durable backend of the store: every write is fsync'd before the store acknowledges
//! it, and a restart gives every group back: its objects as they were (bytes, uid,
//! resourceVersion, finalizers, everything), its counter, and its newest events, so watches
//! resume across the restart.
//!
//! Writes of many clients and groups share one sync (`committer`), appended to a
//! write-ahead log (`DATA_DIR/store.0.wal` and `store.1.wal`, `wal`) and then, thousands at
//! a time and on a thread of their own (`applier`), written to a redb database
//! (`DATA_DIR/store.redb`). The database holds the live objects and, per
//! group, the newest events up to the watch window (older ones are trimmed as writes go on),
//! so the disk used and the time to restart follow the number of live objects, not of
//! writes ever made; the log holds the writes the database has not taken yet (a few MiB;
//! writers wait once a file passes 32 MiB), and a start replays them into it. A directory is used by one process at a time
//! (`store.lock`), and a database of another format, or a database or log that cannot be
//! read, stops the start with the file and the reason, and is left as it is.

mod applier;
mod committer;
mod disk;
mod records;
mod verify;
mod wal;

use committer::{Job, Message};
use infrasim_store::durability::{Accepted, Commit, Ticket};
use infrasim_store::{Backend, GroupImage, StoreError};
use records::Change;
use redb::{Database, ReadableDatabase, ReadableTable, ReadableTableMetadata, TableDefinition};
use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{sync_channel, Sender};
use std::sync::{Arc, Mutex};

pub use disk::Faults;
pub use verify::{verify, Verified};

/// The database file in the data directory.
pub const FILE: &str = "store.redb";
/// The lock file in the data directory.
pub const LOCK: &str = "store.lock";
/// The write-ahead log's two files in the data directory.
pub const LOGS: [&str; 2] = wal::FILES;
/// The layout this build reads and writes; a database of another is refused. Format 1 had
/// no log, and is taken as format 2 with an empty one.
pub const FORMAT: u64 = 2;

const META: TableDefinition<&str, u64> = TableDefinition::new("meta");
/// In `META`: the number of the last log frame the database holds.
const APPLIED: &str = "applied";
/// `group NUL resource NUL namespace NUL name NUL` → the object's record.
const OBJECTS: TableDefinition<&[u8], &[u8]> = TableDefinition::new("objects");
/// `(group, resourceVersion)` → the event's record.
const EVENTS: TableDefinition<(&str, u64), &[u8]> = TableDefinition::new("events");
/// group → its newest resourceVersion.
const GROUPS: TableDefinition<&str, u64> = TableDefinition::new("groups");

/// Why a data directory cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("{dir} is in use by another infrasim process (it holds {lock})", dir = .0.display(), lock = .0.join(LOCK).display())]
    Locked(PathBuf),
    #[error("{}: {why}; it is left as it is", file.display())]
    Unreadable { file: PathBuf, why: String },
    #[error("{} was written by an incompatible infrasim (store format {found}, this build reads {FORMAT}); it is left as it is: move it away, or run with --ephemeral", file.display())]
    Incompatible { file: PathBuf, found: u64 },
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// The durable backend; see the crate's documentation.
pub struct DurableBackend {
    file: PathBuf,
    inbox: Mutex<Option<Sender<Message>>>,
    committer: Mutex<Option<std::thread::JoinHandle<()>>>,
    restored: Mutex<Option<Vec<GroupImage>>>,
    /// The directory's lock, held until the backend is closed or dropped.
    lock: Mutex<Option<File>>,
}

impl std::fmt::Debug for DurableBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DurableBackend")
            .field("file", &self.file)
            .finish()
    }
}

/// Verifies the store in `dir` as a start would, writing nothing to its files, while no
/// other process uses it: what `infrasim store check` reports.
pub fn check(dir: &Path, window: usize) -> Result<Verified, OpenError> {
    if !dir.join(FILE).exists() {
        return Err(OpenError::Io {
            path: dir.join(FILE),
            source: std::io::Error::new(std::io::ErrorKind::NotFound, "no store here"),
        });
    }
    let _lock = lock_dir(dir)?;
    verify::verify(dir, window)
}

/// Takes the directory's lock, held as long as the file is open.
fn lock_dir(dir: &Path) -> Result<File, OpenError> {
    let lock_path = dir.join(LOCK);
    let lock = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|source| OpenError::Io {
            path: lock_path.clone(),
            source,
        })?;
    if lock.try_lock().is_err() {
        return Err(OpenError::Locked(dir.to_path_buf()));
    }
    Ok(lock)
}

impl DurableBackend {
    /// Opens (or makes) the store in `dir`, keeping each group's newest `window` events.
    pub fn open(dir: &Path, window: usize) -> Result<Self, OpenError> {
        Self::open_with(dir, window, Faults::none())
    }

    /// As [`DurableBackend::open`], on a disk whose writes `faults` can make fail (tests of
    /// what a full or failing disk does).
    pub fn open_with(dir: &Path, window: usize, faults: Arc<Faults>) -> Result<Self, OpenError> {
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| OpenError::Io { path, source }
        };
        std::fs::create_dir_all(dir).map_err(io(dir))?;
        let lock = lock_dir(dir)?;
        // Everything is read and checked before anything is opened for writing: a damaged
        // file is reported and left exactly as it was found.
        let verified = verify::verify(dir, window)?;
        if let Some((file, offset)) = &verified.torn {
            tracing::warn!(
                file = %file.display(),
                offset,
                "dropped a torn last frame (a write cut short by a crash, never acknowledged)"
            );
        }
        let file = dir.join(FILE);
        let unreadable = |why: String| OpenError::Unreadable {
            file: file.clone(),
            why,
        };
        let db = disk::open(&file, &faults).map_err(|e| unreadable(e.to_string()))?;
        check_format(&db, &file)?;
        let logs = replay_log(&db, dir, &faults, window, &verified)?;
        let (images, seq) = (verified.images, verified.seq);
        let reopen = {
            let (file, faults) = (file.clone(), faults.clone());
            move || disk::open(&file, &faults)
        };
        let (inbox, committer) = committer::start(db, Box::new(reopen), logs, window, &images, seq)
            .map_err(io(&file))?;
        Ok(DurableBackend {
            file,
            inbox: Mutex::new(Some(inbox)),
            committer: Mutex::new(Some(committer)),
            restored: Mutex::new(Some(images)),
            lock: Mutex::new(Some(lock)),
        })
    }

    /// The database file.
    pub fn file(&self) -> &Path {
        &self.file
    }

    /// Waits until the database holds every write acknowledged so far (the log is then
    /// only a copy): for measurements and tests that look at the database alone.
    pub fn flush(&self) -> Result<(), StoreError> {
        let (reply, answer) = sync_channel(1);
        self.send(Message::Flush(reply))?;
        self.wait(answer)
    }

    fn send(&self, message: Message) -> Result<(), StoreError> {
        let inbox = self.inbox.lock().unwrap_or_else(|p| p.into_inner()).clone();
        inbox
            .ok_or(std::sync::mpsc::SendError(()))
            .and_then(|i| i.send(message).map_err(|_| std::sync::mpsc::SendError(())))
            .map_err(|_| {
                StoreError::Backend(format!("{}: the committer stopped", self.file.display()))
            })
    }

    fn wait(
        &self,
        answer: std::sync::mpsc::Receiver<Result<(), String>>,
    ) -> Result<(), StoreError> {
        match answer.recv() {
            Ok(Ok(())) => Ok(()),
            Ok(Err(why)) => Err(StoreError::Backend(format!(
                "writing {}: {why}",
                self.file.display()
            ))),
            Err(_) => Err(StoreError::Backend(format!(
                "{}: the committer stopped",
                self.file.display()
            ))),
        }
    }
}

impl DurableBackend {
    /// Lets the committer finish what it was given, closes the database and lets go of the
    /// directory, so that another process (or this one) can open it as soon as this returns.
    /// Writes submitted afterwards fail: whoever still holds the store (a task that has not
    /// noticed its cluster stopped) can no longer change what the next owner reads.
    pub fn close(&self) {
        drop(self.inbox.lock().unwrap_or_else(|p| p.into_inner()).take());
        if let Some(thread) = self
            .committer
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        {
            // Never from the committer itself (it cannot wait for its own end).
            if thread.thread().id() != std::thread::current().id() {
                let _ = thread.join();
            }
        }
        drop(self.lock.lock().unwrap_or_else(|p| p.into_inner()).take());
    }
}

impl Drop for DurableBackend {
    fn drop(&mut self) {
        self.close();
    }
}

impl Backend for DurableBackend {
    fn submit(&self, commit: Commit<'_>) -> infrasim_store::Result<Accepted> {
        // Encoded here, on the writer's thread, so the committer only writes.
        let changes = commit
            .changes
            .iter()
            .map(|e| Change::of(commit.group, e))
            .collect();
        let ticket = Ticket::new();
        self.send(Message::Write(Job {
            group: Arc::from(commit.group),
            changes,
            settle: Arc::downgrade(&commit.settle),
            epoch: commit.epoch,
            ticket: ticket.clone(),
        }))?;
        Ok(Accepted::Queued(ticket))
    }

    fn drop_group(&self, group: &str) -> infrasim_store::Result<()> {
        let (reply, answer) = sync_channel(1);
        self.send(Message::Drop(Arc::from(group), reply))?;
        self.wait(answer)
    }

    fn restore(&self) -> infrasim_store::Result<Vec<GroupImage>> {
        Ok(self
            .restored
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
            .unwrap_or_default())
    }
}

/// Hands the database the frames its log held past the last it took (writes answered
/// before a crash, found by the verification), then starts the log over; the log's files.
fn replay_log(
    db: &Database,
    dir: &Path,
    faults: &Arc<Faults>,
    window: usize,
    verified: &verify::Verified,
) -> Result<[wal::LogFile; 2], OpenError> {
    let unreadable = |file: &Path, why: String| OpenError::Unreadable {
        file: file.to_path_buf(),
        why,
    };
    let open = |name: &str| {
        let path = dir.join(name);
        wal::LogFile::open(&path, faults.clone()).map_err(|e| unreadable(&path, e.to_string()))
    };
    let logs = [open(LOGS[0])?, open(LOGS[1])?];
    if verified.pending_frames > 0 {
        applier::apply_entries(
            db,
            &verified.pending,
            verified.seq,
            window,
            &mut Default::default(),
        )
        .map_err(|e| unreadable(&dir.join(FILE), format!("replaying the log into it: {e}")))?;
    }
    for log in &logs {
        log.reset(committer::APPLY_AT)
            .map_err(|e| unreadable(log.path(), format!("starting it over: {e}")))?;
    }
    Ok(logs)
}

/// The number of the last log frame the database holds (0 for a new one).
fn read_applied(db: &Database) -> Result<u64, redb::Error> {
    let txn = db.begin_read()?;
    let meta = txn.open_table(META)?;
    let applied = meta.get(APPLIED)?.map(|v| v.value());
    Ok(applied.unwrap_or(0))
}

/// Refuses a database of another format; marks a new one with ours.
fn check_format(db: &Database, file: &Path) -> Result<(), OpenError> {
    let unreadable = |e: redb::Error| OpenError::Unreadable {
        file: file.to_path_buf(),
        why: e.to_string(),
    };
    let txn = db.begin_write().map_err(|e| unreadable(e.into()))?;
    {
        let mut meta = txn.open_table(META).map_err(|e| unreadable(e.into()))?;
        let found = meta
            .get("format")
            .map_err(|e| unreadable(e.into()))?
            .map(|v| v.value());
        match found {
            Some(FORMAT) => {}
            // The same tables, without a log.
            Some(1) => {
                meta.insert("format", FORMAT)
                    .map_err(|e| unreadable(e.into()))?;
            }
            Some(found) => {
                return Err(OpenError::Incompatible {
                    file: file.to_path_buf(),
                    found,
                })
            }
            None => {
                let groups = txn.open_table(GROUPS).map_err(|e| unreadable(e.into()))?;
                if groups.len().map_err(|e| unreadable(e.into()))? > 0 {
                    // Data without a format mark: not a file this project wrote.
                    return Err(OpenError::Incompatible {
                        file: file.to_path_buf(),
                        found: 0,
                    });
                }
                meta.insert("format", FORMAT)
                    .map_err(|e| unreadable(e.into()))?;
            }
        }
        txn.open_table(OBJECTS).map_err(|e| unreadable(e.into()))?;
        txn.open_table(EVENTS).map_err(|e| unreadable(e.into()))?;
    }
    txn.commit().map_err(|e| unreadable(e.into()))
}

/// Every group the database holds.
fn read_images(db: &Database) -> Result<Vec<GroupImage>, String> {
    let txn = db.begin_read().map_err(|e| e.to_string())?;
    let groups = txn.open_table(GROUPS).map_err(|e| e.to_string())?;
    let objects = txn.open_table(OBJECTS).map_err(|e| e.to_string())?;
    let events = txn.open_table(EVENTS).map_err(|e| e.to_string())?;
    let mut images = Vec::new();
    for entry in groups.iter().map_err(|e| e.to_string())? {
        let (name, rv) = entry.map_err(|e| e.to_string())?;
        let name = name.value().to_string();
        let mut image = GroupImage {
            name: name.clone(),
            resource_version: rv.value(),
            ..GroupImage::default()
        };
        let (prefix, end) = records::group_range(&name);
        let mut resources: HashMap<String, Arc<str>> = HashMap::new();
        for entry in objects
            .range(prefix.as_slice()..end.as_slice())
            .map_err(|e| e.to_string())?
        {
            let (key, value) = entry.map_err(|e| e.to_string())?;
            let resource = records::resource_of(key.value()).map_err(|e| e.0)?;
            let resource = resources
                .entry(resource.to_string())
                .or_insert_with(|| Arc::from(resource))
                .clone();
            let object = records::read_object(value.value())
                .map_err(|e| format!("group {name}, an object of {resource}: {e}"))?;
            image.objects.push((resource, object));
        }
        for entry in events
            .range((name.as_str(), 0)..=(name.as_str(), u64::MAX))
            .map_err(|e| e.to_string())?
        {
            let (key, value) = entry.map_err(|e| e.to_string())?;
            let rv = key.value().1;
            let event = records::read_event(value.value(), rv)
                .map_err(|e| format!("group {name}, event {rv}: {e}"))?;
            image.window.push(Arc::new(event));
        }
        images.push(image);
    }
    Ok(images)
}

#[cfg(test)]
mod tests;
