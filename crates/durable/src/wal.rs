//! The write-ahead log in front of the database (two files, `DATA_DIR/store.0.wal` and
//! `store.1.wal`), as etcd keeps a WAL in front of bbolt. A commit appends one frame and
//! syncs it, and its writers are answered; the database takes the frames' changes later,
//! many commits in one transaction, on a thread of its own. So a commit costs one
//! sequential write of its own bytes and one sync, where a database commit rewrites the
//! B-tree pages each change touches; that difference is the durable store's throughput
//! under many writers. Frames go to one file until it is full, then to the other from its
//! beginning (once the database holds every frame there), so the log stays a few MiB.
//!
//! A frame starts on a page boundary: a header (magic, payload length, frame number, CRC-32
//! of the length, number and payload) and the payload, the changes in order. Numbers go up
//! by one per frame and never restart; the database records the last one it took, so
//! recovery replays exactly the frames after it. In a file, the frames from its start whose
//! numbers go up by one are the log; the first frame that is not the next one (a frame of an
//! earlier pass over the file) ends it. A damaged frame is a torn last write when no later
//! frame follows it (its writers were never answered: it is dropped with a warning) and
//! corruption when one does (recovery stops with the file and the offset, and the file is
//! left as it is). No frame header can be forged by an object's contents: a header holds
//! NUL bytes, which JSON text never does.

use crate::disk::Faults;
use crate::records::{put_bytes, Change, Corrupt, Reader};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The log's files in the data directory: frames go to one until it is full, then to the
/// other, while the database takes what the first holds.
pub const FILES: [&str; 2] = ["store.0.wal", "store.1.wal"];
/// Frames start on page boundaries: a torn write damages one frame, never the one before.
const PAGE: usize = 4096;
const MAGIC: [u8; 4] = *b"isWL";
const HEADER: usize = 24;
/// Frames carry at most this many payload bytes (a bound on what recovery believes of a
/// length it reads).
const MAX_PAYLOAD: usize = 1 << 30;

/// One change the log carries to the database, in commit order.
pub enum Entry {
    /// An event of `group`, and its object's new state.
    Put { group: Arc<str>, change: Change },
    /// `group`'s resourceVersion counter reserved up to this.
    Reserve { group: Arc<str>, reserved: u64 },
    /// `group` is gone: its objects, events and counter.
    Forget { group: Arc<str> },
}

const PUT: u8 = 1;
const RESERVE: u8 = 2;
const FORGET: u8 = 3;

/// A frame holding `entries` as number `seq`, padded to whole pages.
pub fn frame(seq: u64, entries: &[Entry]) -> Vec<u8> {
    let size: usize = entries.iter().map(Entry::encoded_len).sum();
    let mut out = Vec::with_capacity(HEADER + size + PAGE);
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&[0; HEADER - 4]);
    for e in entries {
        e.encode(&mut out);
    }
    let payload = out.len() - HEADER;
    out[4..8].copy_from_slice(&(payload as u32).to_le_bytes());
    out[8..16].copy_from_slice(&seq.to_le_bytes());
    let crc = checksum(&out[4..16], &out[HEADER..]);
    out[16..20].copy_from_slice(&crc.to_le_bytes());
    out.resize(out.len().next_multiple_of(PAGE), 0);
    out
}

fn checksum(head: &[u8], payload: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(head);
    h.update(payload);
    h.finalize()
}

impl Entry {
    fn encoded_len(&self) -> usize {
        match self {
            Entry::Put { group, change } => {
                1 + 4
                    + group.len()
                    + 8
                    + 4
                    + change.object_key.len()
                    + 1
                    + change.object.as_ref().map_or(0, |o| 4 + o.len())
                    + 4
                    + change.event.len()
            }
            Entry::Reserve { group, .. } => 1 + 4 + group.len() + 8,
            Entry::Forget { group } => 1 + 4 + group.len(),
        }
    }

    fn encode(&self, out: &mut Vec<u8>) {
        match self {
            Entry::Put { group, change } => {
                out.push(PUT);
                put_bytes(out, group.as_bytes());
                out.extend_from_slice(&change.resource_version.to_le_bytes());
                put_bytes(out, &change.object_key);
                match &change.object {
                    Some(o) => {
                        out.push(1);
                        put_bytes(out, o);
                    }
                    None => out.push(0),
                }
                put_bytes(out, &change.event);
            }
            Entry::Reserve { group, reserved } => {
                out.push(RESERVE);
                put_bytes(out, group.as_bytes());
                out.extend_from_slice(&reserved.to_le_bytes());
            }
            Entry::Forget { group } => {
                out.push(FORGET);
                put_bytes(out, group.as_bytes());
            }
        }
    }
}

/// The entries of a frame's payload.
fn entries(payload: &[u8]) -> Result<Vec<Entry>, Corrupt> {
    let mut r = Reader { data: payload };
    let mut out = Vec::new();
    while !r.data.is_empty() {
        let tag = r.byte("entry tag")?;
        let group: Arc<str> = Arc::from(r.str("group")?);
        out.push(match tag {
            PUT => {
                let resource_version = r.u64("resourceVersion")?;
                let object_key = r.bytes("object key")?.to_vec();
                let object = match r.byte("object flag")? {
                    0 => None,
                    1 => Some(r.bytes("object")?.to_vec()),
                    f => return Err(Corrupt(format!("unknown object flag {f}"))),
                };
                let event = r.bytes("event")?.to_vec();
                let change = Change {
                    resource_version,
                    object_key,
                    object,
                    event,
                };
                Entry::Put { group, change }
            }
            RESERVE => Entry::Reserve {
                group,
                reserved: r.u64("reservation")?,
            },
            FORGET => Entry::Forget { group },
            t => return Err(Corrupt(format!("unknown entry tag {t}"))),
        });
    }
    Ok(out)
}

/// The log file, on a disk whose writes and syncs `faults` can make fail.
pub struct LogFile {
    file: File,
    path: PathBuf,
    faults: Arc<Faults>,
}

impl LogFile {
    /// Opens (or makes) the log in `path`, owner-only like the database.
    pub fn open(path: &Path, faults: Arc<Faults>) -> std::io::Result<LogFile> {
        let file = crate::disk::open_owner_only(path)?;
        let path = path.to_path_buf();
        Ok(LogFile { file, path, faults })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes `data` at `offset`. A disk writes a page at a time, so a power cut (under
    /// [`Faults::cut_power_after`]) can land between two pages: each page is one operation.
    pub fn write_at(&self, data: &[u8], offset: u64) -> std::io::Result<()> {
        let mut landed = 0;
        let mut cut = None;
        for _ in data.chunks(PAGE) {
            match self.faults.check() {
                Ok(()) => landed += 1,
                Err(e) => {
                    cut = Some(e);
                    break;
                }
            }
        }
        let len = (landed * PAGE).min(data.len());
        if len > 0 {
            self.file.write_all_at(&data[..len], offset)?;
        }
        cut.map_or(Ok(()), Err)
    }

    pub fn sync(&self) -> std::io::Result<()> {
        self.faults.check_sync()?;
        self.file.sync_data()
    }

    /// Empties the log and gives it `size` bytes of zeros, so the appends of the first pass
    /// over it overwrite pages in place and their syncs change no file metadata.
    pub fn reset(&self, size: u64) -> std::io::Result<()> {
        self.faults.check()?;
        self.file.set_len(0)?;
        self.file.set_len(size)?;
        self.file.write_all_at(&vec![0; size as usize], 0)?;
        self.file.sync_all()
    }

    /// Blanks the page at `offset` (where a frame whose sync failed begins), so recovery
    /// never replays a write its writers were told failed.
    pub fn blank(&self, offset: u64) -> std::io::Result<()> {
        self.write_at(&[0; PAGE], offset)?;
        self.sync()
    }

    /// The file's bytes as they are now, for [`recover`].
    #[cfg(test)]
    pub fn image(&self) -> std::io::Result<LogImage> {
        let mut bytes = vec![0; self.file.metadata()?.len() as usize];
        self.file.read_exact_at(&mut bytes, 0)?;
        Ok(LogImage {
            path: self.path.clone(),
            bytes,
        })
    }
}

/// A log file's bytes, read without opening it for writing (a missing file is empty): what
/// a start verifies before it writes anything.
pub struct LogImage {
    path: PathBuf,
    bytes: Vec<u8>,
}

impl LogImage {
    pub fn read(path: &Path) -> std::io::Result<LogImage> {
        let bytes = match std::fs::read(path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(e),
        };
        Ok(LogImage {
            path: path.to_path_buf(),
            bytes,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// What recovery found in the log: the frames after the database's last, in order.
pub struct Recovered {
    pub frames: Vec<(u64, Vec<Entry>)>,
    /// The file and offset of a torn last frame that was dropped.
    pub torn: Option<(usize, u64)>,
}

/// Reads the frames after number `applied` from the log's files. Each file holds a chain of
/// frames from its start whose numbers go up by one (an older pass over the file may follow
/// it); together, the chains' frames after `applied` must number on from it without a gap.
/// An error names the file found wrong.
pub fn recover(logs: &[&LogImage], applied: u64) -> Result<Recovered, (PathBuf, String)> {
    let mut frames = Vec::new();
    let mut torn = None;
    for (i, log) in logs.iter().enumerate() {
        let wrong = |e: String| (log.path.clone(), e);
        let chain = chain(&log.bytes, applied).map_err(wrong)?;
        frames.extend(chain.frames.into_iter().map(|(seq, e)| (seq, i, e)));
        torn = torn.or(chain.torn.map(|at| (i, at)));
    }
    frames.sort_by_key(|(seq, _, _)| *seq);
    for (n, (seq, i, _)) in frames.iter().enumerate() {
        let expected = applied + 1 + n as u64;
        if *seq != expected {
            let why = format!(
                "frame {seq} is here, but no log file holds frames {expected} to {}",
                seq - 1
            );
            return Err((logs[*i].path.clone(), why));
        }
    }
    let frames = frames.into_iter().map(|(seq, _, e)| (seq, e)).collect();
    Ok(Recovered { frames, torn })
}

/// What one file holds.
struct Chain {
    frames: Vec<(u64, Vec<Entry>)>,
    torn: Option<u64>,
}

fn chain(all: &[u8], applied: u64) -> Result<Chain, String> {
    let mut frames = Vec::new();
    let mut offset = 0;
    let mut newest: Option<u64> = None;
    let last = loop {
        let frame = read_frame(all, offset);
        let Frame::Whole { seq, payload, next } = frame else {
            break frame;
        };
        if let Some(n) = newest {
            if seq <= n {
                break frame; // an earlier pass over the file
            }
            if seq > n + 1 {
                return Err(format!(
                    "frame {seq} at offset {offset} follows frame {n} (frames are missing)"
                ));
            }
        }
        if seq > applied {
            let found = entries(payload).map_err(|e| {
                format!("frame {seq} at offset {offset} is whole but unreadable: {e}")
            })?;
            frames.push((seq, found));
        }
        newest = Some(seq);
        offset = next;
    };
    // The chain ends here. A whole frame that should come after it means the end is damage
    // in the middle, not a torn last write.
    let after = newest.unwrap_or(0).max(applied);
    let mut probe = offset + PAGE;
    while probe < all.len() {
        if let Frame::Whole { seq, .. } = read_frame(all, probe) {
            if seq > after {
                return Err(format!(
                    "the frame at offset {offset} is damaged, and frame {seq} at offset {probe} \
                     was written after it"
                ));
            }
        }
        probe += PAGE;
    }
    let torn = matches!(last, Frame::Damaged).then_some(offset as u64);
    Ok(Chain { frames, torn })
}

enum Frame<'a> {
    Whole {
        seq: u64,
        payload: &'a [u8],
        next: usize,
    },
    /// No frame starts here: zeros, the end of the file, or the inside of an older frame.
    Blank,
    /// A frame's start whose frame is not whole.
    Damaged,
}

fn read_frame(all: &[u8], offset: usize) -> Frame<'_> {
    let Some(head) = all.get(offset..offset + HEADER) else {
        return Frame::Blank;
    };
    if head[..4] != MAGIC {
        return Frame::Blank;
    }
    let word = |at: usize| u32::from_le_bytes([head[at], head[at + 1], head[at + 2], head[at + 3]]);
    let len = word(4) as usize;
    let payload = (len <= MAX_PAYLOAD)
        .then(|| all.get(offset + HEADER..offset + HEADER + len))
        .flatten();
    match payload {
        Some(payload) if checksum(&head[4..16], payload) == word(16) => {
            let mut seq = [0; 8];
            seq.copy_from_slice(&head[8..16]);
            Frame::Whole {
                seq: u64::from_le_bytes(seq),
                payload,
                next: (offset + HEADER + len).next_multiple_of(PAGE),
            }
        }
        _ => Frame::Damaged,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(group: &str, rv: u64) -> Entry {
        Entry::Put {
            group: Arc::from(group),
            change: Change {
                resource_version: rv,
                object_key: format!("{group}\0cm\0ns\0n{rv}\0").into_bytes(),
                object: rv.is_multiple_of(2).then(|| vec![rv as u8; 5000]),
                event: vec![7; 300],
            },
        }
    }

    fn log_with(frames: &[(u64, usize)]) -> (tempfile::TempDir, LogFile, Vec<u64>) {
        let dir = tempfile::tempdir().unwrap();
        let log = LogFile::open(&dir.path().join(FILES[0]), Faults::none()).unwrap();
        let mut offsets = Vec::new();
        let mut at = 0;
        for &(seq, n) in frames {
            let entries: Vec<Entry> = (0..n as u64).map(|i| put("g", seq * 10 + i)).collect();
            let f = frame(seq, &entries);
            log.write_at(&f, at).unwrap();
            offsets.push(at);
            at += f.len() as u64;
        }
        (dir, log, offsets)
    }

    fn seqs(r: &Recovered) -> Vec<u64> {
        r.frames.iter().map(|(s, _)| *s).collect()
    }

    #[test]
    fn frames_after_the_applied_one_come_back_in_order_with_their_entries() {
        let (_dir, log, _) = log_with(&[(4, 2), (5, 1), (6, 3)]);
        let r = recover(&[&log.image().unwrap()], 4).unwrap();
        assert_eq!(seqs(&r), vec![5, 6]);
        assert_eq!(r.torn, None);
        let Entry::Put { group, change } = &r.frames[1].1[2] else {
            panic!("a put")
        };
        assert_eq!((&**group, change.resource_version), ("g", 62));
        assert_eq!(change.object.as_deref(), Some(&[62u8; 5000][..]));
        assert_eq!(change.event, vec![7; 300]);
        let reserve = frame(
            9,
            &[Entry::Reserve {
                group: Arc::from("h"),
                reserved: 77,
            }],
        );
        log.write_at(&reserve, 0).unwrap();
        let r = recover(&[&log.image().unwrap()], 8).unwrap();
        assert!(matches!(
            &r.frames[0].1[0],
            Entry::Reserve { reserved: 77, .. }
        ));
        let forget = frame(
            10,
            &[Entry::Forget {
                group: Arc::from("h"),
            }],
        );
        log.write_at(&forget, 4096).unwrap();
        let r = recover(&[&log.image().unwrap()], 9).unwrap();
        assert!(matches!(&r.frames[0].1[0], Entry::Forget { group } if &**group == "h"));
    }

    #[test]
    fn an_older_pass_over_the_file_ends_the_log() {
        // Frames 1-3 were applied and the log started over with frame 4, shorter than them.
        let (_dir, log, offsets) = log_with(&[(1, 3), (2, 3), (3, 3)]);
        log.write_at(&frame(4, &[put("g", 40)]), offsets[0])
            .unwrap();
        let r = recover(&[&log.image().unwrap()], 3).unwrap();
        assert_eq!(seqs(&r), vec![4]);
        assert_eq!(r.torn, None, "an old frame is not damage");
        assert_eq!(
            seqs(&recover(&[&log.image().unwrap()], 4).unwrap()),
            Vec::<u64>::new()
        );
    }

    #[test]
    fn a_torn_last_frame_is_dropped_and_damage_before_a_later_frame_is_refused() {
        let (_dir, log, offsets) = log_with(&[(1, 1), (2, 4), (3, 1)]);
        // The last frame's second page never landed.
        log.write_at(&[0x33; PAGE], offsets[2] + PAGE as u64)
            .unwrap();
        let mut last = frame(3, &[put("g", 30), put("g", 32)]);
        last.truncate(PAGE);
        log.write_at(&last, offsets[2]).unwrap();
        let r = recover(&[&log.image().unwrap()], 0).unwrap();
        assert_eq!(seqs(&r), vec![1, 2]);
        assert_eq!(r.torn, Some((0, offsets[2])));
        // One flipped byte in the middle frame, with frame 3 whole after it: corruption.
        let (_dir, log, offsets) = log_with(&[(1, 1), (2, 4), (3, 1)]);
        log.write_at(&[0xff], offsets[1] + 100).unwrap();
        let (_, err) = recover(&[&log.image().unwrap()], 0).err().expect("refused");
        assert!(err.contains(&format!("offset {}", offsets[1])), "{err}");
        assert!(err.contains("frame 3"), "{err}");
    }

    #[test]
    fn a_gap_in_the_numbers_is_refused() {
        let (_dir, log, _) = log_with(&[(1, 1), (3, 1)]);
        let (_, err) = recover(&[&log.image().unwrap()], 0).err().expect("refused");
        assert!(err.contains("missing"), "{err}");
    }

    #[test]
    fn the_two_files_chains_join_and_a_gap_between_them_is_refused() {
        // The first file was being applied (frames 1-3) when the log went on in the second.
        let (_a, first, _) = log_with(&[(1, 1), (2, 1), (3, 2)]);
        let (_b, second, _) = log_with(&[(4, 1), (5, 1)]);
        let r = recover(&[&first.image().unwrap(), &second.image().unwrap()], 0).unwrap();
        assert_eq!(seqs(&r), vec![1, 2, 3, 4, 5]);
        let r = recover(&[&first.image().unwrap(), &second.image().unwrap()], 3).unwrap();
        assert_eq!(seqs(&r), vec![4, 5], "the database holds 1-3");
        let (_c, after_gap, _) = log_with(&[(5, 1), (6, 1)]);
        let (path, err) = recover(&[&first.image().unwrap(), &after_gap.image().unwrap()], 0)
            .err()
            .expect("refused");
        assert_eq!(path, after_gap.path());
        assert!(err.contains("frames 4 to 4"), "{err}");
    }
}
