//! The file under the database, with faults on demand: a test makes its writes and syncs fail
//! as a full or broken disk would, then heals it, and sees requests refused and then served
//! again. Outside tests no fault is ever set and every call goes straight to the file.

use redb::backends::FileBackend;
use redb::{BackendError, Database, DatabaseError, StorageBackend};
use std::ops::Bound;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;

/// Whether the disk under a database fails its writes.
#[derive(Debug)]
pub struct Faults {
    failing: AtomicBool,
    failing_sync: AtomicBool,
    /// Only the database's writes fail (the log's land).
    failing_database: AtomicBool,
    /// Disk operations left before the power goes (negative: it never does).
    power: AtomicI64,
}

impl Default for Faults {
    fn default() -> Self {
        Faults {
            failing: AtomicBool::new(false),
            failing_sync: AtomicBool::new(false),
            failing_database: AtomicBool::new(false),
            power: AtomicI64::new(-1),
        }
    }
}

impl Faults {
    /// A disk that never fails.
    pub fn none() -> Arc<Faults> {
        Arc::new(Faults::default())
    }

    /// Lets `operations` more writes, length changes and syncs reach the file, then fails
    /// every one after, as a machine losing power in the middle of a commit leaves the file:
    /// whatever the commit wrote before the cut is there, nothing after it.
    pub fn cut_power_after(&self, operations: i64) {
        self.power.store(operations, Ordering::SeqCst);
    }

    /// Makes every write and sync fail (`true`) as a full disk does, or work again.
    pub fn set_failing(&self, failing: bool) {
        self.failing.store(failing, Ordering::SeqCst);
    }

    /// Makes every sync fail (`true`) while writes still land: a commit whose data may or
    /// may not have reached the disk, the ambiguous failure.
    pub fn set_failing_sync(&self, failing: bool) {
        self.failing_sync.store(failing, Ordering::SeqCst);
    }

    /// Makes the database's writes and syncs fail (`true`) while the log's land: writes are
    /// still answered, and wait in the log until the database takes them.
    pub fn set_failing_database(&self, failing: bool) {
        self.failing_database.store(failing, Ordering::SeqCst);
    }

    fn check_database(&self) -> std::io::Result<()> {
        if self.failing_database.load(Ordering::SeqCst) {
            return Err(std::io::Error::other(
                "Input/output error (injected, in the database)",
            ));
        }
        Ok(())
    }

    pub(crate) fn check_sync(&self) -> std::io::Result<()> {
        if self.failing_sync.load(Ordering::SeqCst) {
            return Err(std::io::Error::other(
                "Input/output error (injected, on sync)",
            ));
        }
        self.check()
    }

    pub(crate) fn check(&self) -> std::io::Result<()> {
        let left = self
            .power
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n > 0).then(|| n - 1)
            });
        if left == Err(0) {
            return Err(std::io::Error::other("the power went (injected)"));
        }
        if self.failing.load(Ordering::SeqCst) {
            return Err(std::io::Error::new(
                std::io::ErrorKind::StorageFull,
                "No space left on device (injected)",
            ));
        }
        Ok(())
    }
}

/// Opens (or makes) `path` for reading and writing, owner only: the database and its log
/// hold Secrets and the workload clusters' CA keys. A file an older build made with the
/// umask's mode is narrowed too.
pub fn open_owner_only(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let file = std::fs::File::options()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(path)?;
    file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    Ok(file)
}

/// Opens (or makes) the database in `file` on a disk with `faults`.
pub fn open(file: &Path, faults: &Arc<Faults>) -> Result<Database, DatabaseError> {
    let handle = open_owner_only(file).map_err(|e| DatabaseError::Storage(e.into()))?;
    let backend = Failable {
        inner: FileBackend::new(handle)?,
        faults: faults.clone(),
    };
    Database::builder().create_with_backend(backend)
}

#[derive(Debug)]
struct Failable {
    inner: FileBackend,
    faults: Arc<Faults>,
}

impl StorageBackend for Failable {
    fn len(&self) -> Result<u64, std::io::Error> {
        self.inner.len()
    }

    fn read(&self, offset: u64, out: &mut [u8]) -> Result<(), std::io::Error> {
        self.inner.read(offset, out)
    }

    fn set_len(&self, len: u64) -> Result<(), std::io::Error> {
        self.faults.check_database()?;
        self.faults.check()?;
        self.inner.set_len(len)
    }

    fn sync_data(&self) -> Result<(), std::io::Error> {
        self.faults.check_database()?;
        self.faults.check_sync()?;
        self.inner.sync_data()
    }

    fn write(&self, offset: u64, data: &[u8]) -> Result<(), std::io::Error> {
        self.faults.check_database()?;
        self.faults.check()?;
        self.inner.write(offset, data)
    }

    fn close(&self) -> Result<(), std::io::Error> {
        self.inner.close()
    }

    fn try_lock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<bool, BackendError> {
        self.inner.try_lock_range(start, end)
    }

    fn try_lock_shared_range(
        &self,
        start: Bound<u64>,
        end: Bound<u64>,
    ) -> Result<bool, BackendError> {
        self.inner.try_lock_shared_range(start, end)
    }

    fn lock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<(), BackendError> {
        self.inner.lock_range(start, end)
    }

    fn lock_shared_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<(), BackendError> {
        self.inner.lock_shared_range(start, end)
    }

    fn unlock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<(), BackendError> {
        self.inner.unlock_range(start, end)
    }

    fn query_lock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<bool, BackendError> {
        self.inner.query_lock_range(start, end)
    }
}
