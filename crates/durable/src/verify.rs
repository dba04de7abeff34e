//! Reading a data directory without writing to it: every start verifies its files this way
//! before anything opens them for writing, and `infrasim store check` does nothing else.
//!
//! redb writes to its file as it opens it (a header update, and a repair after an unclean
//! shutdown), and trusts a file it finds closed cleanly, so a database damaged outside redb
//! would be changed by the very open that finds the damage. The verification therefore opens
//! the database over a [`Scratch`] backend: reads come from the file, writes stay in memory.
//! There redb checks every page's checksum (its integrity check on open), the format is
//! checked, the log's frames are replayed, and every group is read and decoded. Only if all
//! of that works does the start open the file for real, and the groups it serves are the
//! ones read here.

use crate::{wal, OpenError, FILE, LOGS};
use infrasim_store::GroupImage;
use redb::{Database, StorageBackend};
use std::collections::BTreeMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The page size the overlay keeps writes in (redb's own page size).
const PAGE: u64 = 4096;

/// What a verified directory holds: its groups as they will be served, and the log's frames
/// the database had not taken yet (the real open applies them again, for real).
pub struct Verified {
    pub images: Vec<GroupImage>,
    pub pending: Vec<wal::Entry>,
    /// The number of the log's last frame (the database's, when the log adds none).
    pub seq: u64,
    /// How many frames the log held past the database's last.
    pub pending_frames: usize,
    /// A torn last frame that recovery drops: the file and offset.
    pub torn: Option<(PathBuf, u64)>,
}

impl Verified {
    /// The number of objects over every group.
    pub fn objects(&self) -> usize {
        self.images.iter().map(|i| i.objects.len()).sum()
    }
}

/// Verifies the store in `dir`, writing nothing to its files; a missing file is an empty
/// one. `window` is the number of events a group keeps, as the store will be opened with.
pub fn verify(dir: &Path, window: usize) -> Result<Verified, OpenError> {
    let file = dir.join(FILE);
    let unreadable = |file: &Path, why: String| OpenError::Unreadable {
        file: file.to_path_buf(),
        why,
    };
    let db = open_scratch(&file).map_err(|e| unreadable(&file, e))?;
    crate::check_format(&db, &file)?;
    let applied = crate::read_applied(&db).map_err(|e| unreadable(&file, e.to_string()))?;
    let mut logs = Vec::new();
    for name in LOGS {
        let path = dir.join(name);
        logs.push(wal::LogImage::read(&path).map_err(|e| unreadable(&path, e.to_string()))?);
    }
    let found = wal::recover(&[&logs[0], &logs[1]], applied)
        .map_err(|(path, why)| unreadable(&path, why))?;
    let seq = found.frames.last().map_or(applied, |(seq, _)| *seq);
    let pending_frames = found.frames.len();
    let pending: Vec<wal::Entry> = found.frames.into_iter().flat_map(|(_, e)| e).collect();
    if seq > applied {
        crate::applier::apply_entries(&db, &pending, seq, window, &mut Default::default())
            .map_err(|e| unreadable(&file, format!("replaying the log into it: {e}")))?;
    }
    let images = crate::read_images(&db).map_err(|e| unreadable(&file, e))?;
    Ok(Verified {
        images,
        pending,
        seq,
        pending_frames,
        torn: found
            .torn
            .map(|(i, offset)| (logs[i].path().to_path_buf(), offset)),
    })
}

/// The database in `file` over a scratch overlay, its every page checked.
fn open_scratch(file: &Path) -> Result<Database, String> {
    let backend = Scratch::open(file).map_err(|e| e.to_string())?;
    let mut builder = Database::builder();
    builder.set_check_integrity_on_open(true);
    // redb documents that an open may panic on a file damaged outside it; a panic here is
    // a damaged file, reported as one rather than taking the process down.
    let opened = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        builder.create_with_backend(backend)
    }));
    match opened {
        Ok(Ok(db)) => Ok(db),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err("the database is damaged (redb could not read its pages)".to_string()),
    }
}

/// A storage backend over a file opened read-only, whose writes land in memory, page by
/// page: redb can open, repair and write a database here while the file keeps every byte.
#[derive(Debug)]
pub struct Scratch {
    /// `None` when there is no file: an empty database.
    file: Option<File>,
    state: Mutex<Overlay>,
}

#[derive(Debug)]
struct Overlay {
    /// The storage's length as redb sees it.
    len: u64,
    /// The file's own length: bytes past it (and not written) read as zeros.
    base_len: u64,
    /// Written pages, by page number.
    pages: BTreeMap<u64, Box<[u8]>>,
}

impl Scratch {
    /// The overlay over `path` (opened for reading only; a missing file reads as empty).
    pub fn open(path: &Path) -> std::io::Result<Scratch> {
        let file = match File::open(path) {
            Ok(f) => Some(f),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(e),
        };
        let base_len = match &file {
            Some(f) => f.metadata()?.len(),
            None => 0,
        };
        Ok(Scratch {
            file,
            state: Mutex::new(Overlay {
                len: base_len,
                base_len,
                pages: BTreeMap::new(),
            }),
        })
    }

    /// Page `n` as it reads now (from the file, zeros past it).
    fn base_page(&self, overlay: &Overlay, n: u64) -> std::io::Result<Box<[u8]>> {
        let mut page = vec![0u8; PAGE as usize].into_boxed_slice();
        let start = n * PAGE;
        if let Some(file) = &self.file {
            if start < overlay.base_len {
                let len = (overlay.base_len - start).min(PAGE) as usize;
                file.read_exact_at(&mut page[..len], start)?;
            }
        }
        Ok(page)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Overlay> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl StorageBackend for Scratch {
    fn len(&self) -> Result<u64, std::io::Error> {
        Ok(self.lock().len)
    }

    fn read(&self, offset: u64, out: &mut [u8]) -> Result<(), std::io::Error> {
        let overlay = self.lock();
        let end = offset + out.len() as u64;
        if end > overlay.len {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                format!("read of {offset}..{end} past the end ({})", overlay.len),
            ));
        }
        let mut at = offset;
        while at < end {
            let (n, within) = (at / PAGE, at % PAGE);
            let take = (PAGE - within).min(end - at) as usize;
            let dst = &mut out[(at - offset) as usize..][..take];
            match overlay.pages.get(&n) {
                Some(page) => dst.copy_from_slice(&page[within as usize..][..take]),
                None => {
                    let page = self.base_page(&overlay, n)?;
                    dst.copy_from_slice(&page[within as usize..][..take]);
                }
            }
            at += take as u64;
        }
        Ok(())
    }

    fn set_len(&self, len: u64) -> Result<(), std::io::Error> {
        let mut overlay = self.lock();
        if len < overlay.len {
            // Bytes cut off read as zeros if the storage grows again: drop the pages past
            // the end (a page starting at the new end is past it too), zero the tail of the
            // last one, and stop reading the file past it.
            let kept = len.div_ceil(PAGE);
            overlay.pages.retain(|&n, _| n < kept);
            if !len.is_multiple_of(PAGE) {
                let last = len / PAGE;
                let mut page = match overlay.pages.remove(&last) {
                    Some(p) => p,
                    None => self.base_page(&overlay, last)?,
                };
                page[(len % PAGE) as usize..].fill(0);
                overlay.pages.insert(last, page);
            }
            overlay.base_len = overlay.base_len.min(len);
        }
        overlay.len = len;
        Ok(())
    }

    fn sync_data(&self) -> Result<(), std::io::Error> {
        Ok(())
    }

    fn write(&self, offset: u64, data: &[u8]) -> Result<(), std::io::Error> {
        let mut overlay = self.lock();
        let end = offset + data.len() as u64;
        let mut at = offset;
        while at < end {
            let (n, within) = (at / PAGE, at % PAGE);
            let take = (PAGE - within).min(end - at) as usize;
            if !overlay.pages.contains_key(&n) {
                let page = self.base_page(&overlay, n)?;
                overlay.pages.insert(n, page);
            }
            if let Some(page) = overlay.pages.get_mut(&n) {
                page[within as usize..][..take]
                    .copy_from_slice(&data[(at - offset) as usize..][..take]);
            }
            at += take as u64;
        }
        overlay.len = overlay.len.max(end);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(s: &Scratch, offset: u64, len: usize) -> Vec<u8> {
        let mut out = vec![0; len];
        s.read(offset, &mut out).unwrap();
        out
    }

    #[test]
    fn writes_stay_in_memory_and_reads_see_them() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, vec![7u8; 10_000]).unwrap();
        let s = Scratch::open(&path).unwrap();
        s.write(4090, &[1; 12]).unwrap();
        assert_eq!(
            bytes(&s, 4088, 16),
            [7, 7, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 7, 7]
        );
        s.write(12_000, &[2; 4]).unwrap();
        assert_eq!(s.len().unwrap(), 12_004);
        assert_eq!(bytes(&s, 9_998, 4), [7, 7, 0, 0], "the gap reads as zeros");
        s.set_len(5).unwrap();
        s.set_len(8).unwrap();
        assert_eq!(
            bytes(&s, 0, 8),
            [7, 7, 7, 7, 7, 0, 0, 0],
            "cut bytes come back as zeros"
        );
        assert!(s.read(0, &mut [0; 9]).is_err(), "no read past the end");
        assert_eq!(std::fs::read(&path).unwrap(), vec![7u8; 10_000]);
    }

    #[test]
    fn a_page_cut_at_its_start_reads_as_zeros_when_the_storage_grows_again() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, vec![7u8; 3 * PAGE as usize]).unwrap();
        let s = Scratch::open(&path).unwrap();
        s.write(PAGE, &vec![1; PAGE as usize]).unwrap();
        s.set_len(PAGE).unwrap();
        s.set_len(3 * PAGE).unwrap();
        assert_eq!(
            bytes(&s, PAGE - 1, 2),
            [7, 0],
            "the written page went with the cut"
        );
        assert!(bytes(&s, PAGE, 2 * PAGE as usize).iter().all(|b| *b == 0));
    }

    #[test]
    fn a_missing_file_is_empty() {
        let dir = tempfile::tempdir().unwrap();
        let s = Scratch::open(&dir.path().join("none")).unwrap();
        assert_eq!(s.len().unwrap(), 0);
        s.write(0, b"abc").unwrap();
        assert_eq!(bytes(&s, 0, 3), b"abc");
        assert!(!dir.path().join("none").exists());
    }
}
