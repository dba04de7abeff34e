//! Maintenance.Snapshot: the key space as etcd's backend file, a bbolt database, streamed in
//! chunks and followed by its SHA-256, as etcd sends it (so `etcdctl snapshot save` writes
//! what `etcdctl snapshot status` reads back: revision, key count, size).
//!
//! The file is written here by hand, not by a bbolt crate (none writes the format): two meta
//! pages, an empty freelist, and one root leaf (spanning overflow pages if it must) holding
//! etcd's `key` and `meta` buckets inline. Keys are stored as etcd stores them: under their
//! revision (8 bytes big-endian main, `_`, 8 bytes sub), the value a marshalled KeyValue.

use crate::keyspace::KeySpace;
use prost::Message;

const PAGE: usize = 4096;
const MAGIC: u32 = 0xED0C_DAED;
const VERSION: u32 = 2;
const HEADER: usize = 16;
const ELEMENT: usize = 16;
const LEAF: u16 = 0x02;
const META: u16 = 0x04;
const FREELIST: u16 = 0x10;
const BUCKET_ELEMENT: u32 = 0x01;
/// How much of the file one response carries.
pub const CHUNK: usize = 32 * 1024;

/// The key space as a bbolt file.
pub fn database(keys: &KeySpace) -> Vec<u8> {
    let mut key_bucket: Vec<(Vec<u8>, Vec<u8>)> = keys
        .all()
        .map(|kv| (revision_key(kv.mod_revision), kv.encode_to_vec()))
        .collect();
    key_bucket.sort();
    let meta_bucket = vec![(
        b"consistent_index".to_vec(),
        (keys.revision() as u64).to_be_bytes().to_vec(),
    )];
    let root = leaf(&[
        (b"key".to_vec(), inline_bucket(&key_bucket), BUCKET_ELEMENT),
        (
            b"meta".to_vec(),
            inline_bucket(&meta_bucket),
            BUCKET_ELEMENT,
        ),
    ]);
    // Pages: 0 and 1 meta, 2 the freelist, 3.. the root leaf.
    let root_pages = root.len().div_ceil(PAGE).max(1);
    let high_water = 3 + root_pages as u64;
    let mut file = vec![0u8; high_water as usize * PAGE];
    for (id, txid) in [(0u64, 0u64), (1, 1)] {
        write_meta(&mut file[id as usize * PAGE..], id, txid, high_water);
    }
    header(&mut file[2 * PAGE..], 2, FREELIST, 0, 0);
    file[3 * PAGE..3 * PAGE + root.len()].copy_from_slice(&root);
    header(&mut file[3 * PAGE..], 3, LEAF, 2, root_pages as u32 - 1);
    file
}

/// etcd's backend key of a revision.
fn revision_key(main: i64) -> Vec<u8> {
    let mut k = Vec::with_capacity(17);
    k.extend_from_slice(&(main as u64).to_be_bytes());
    k.push(b'_');
    k.extend_from_slice(&0u64.to_be_bytes());
    k
}

fn header(page: &mut [u8], id: u64, flags: u16, count: u16, overflow: u32) {
    page[0..8].copy_from_slice(&id.to_le_bytes());
    page[8..10].copy_from_slice(&flags.to_le_bytes());
    page[10..12].copy_from_slice(&count.to_le_bytes());
    page[12..16].copy_from_slice(&overflow.to_le_bytes());
}

fn write_meta(page: &mut [u8], id: u64, txid: u64, high_water: u64) {
    header(page, id, META, 0, 0);
    let mut m = Vec::with_capacity(64);
    m.extend_from_slice(&MAGIC.to_le_bytes());
    m.extend_from_slice(&VERSION.to_le_bytes());
    m.extend_from_slice(&(PAGE as u32).to_le_bytes());
    m.extend_from_slice(&0u32.to_le_bytes()); // flags
    m.extend_from_slice(&3u64.to_le_bytes()); // root bucket's page
    m.extend_from_slice(&0u64.to_le_bytes()); // root bucket's sequence
    m.extend_from_slice(&2u64.to_le_bytes()); // freelist page
    m.extend_from_slice(&high_water.to_le_bytes());
    m.extend_from_slice(&txid.to_le_bytes());
    let checksum = fnv1a64(&m);
    m.extend_from_slice(&checksum.to_le_bytes());
    page[HEADER..HEADER + m.len()].copy_from_slice(&m);
}

/// A leaf page's bytes (header, elements, then keys and values), elements in key order.
fn leaf(items: &[(Vec<u8>, Vec<u8>, u32)]) -> Vec<u8> {
    let mut page = vec![0u8; HEADER + ELEMENT * items.len()];
    header(&mut page, 0, LEAF, items.len() as u16, 0);
    for (i, (k, v, flags)) in items.iter().enumerate() {
        let element = HEADER + ELEMENT * i;
        // Positions count from the element itself.
        let pos = (page.len() - element) as u32;
        page[element..element + 4].copy_from_slice(&flags.to_le_bytes());
        page[element + 4..element + 8].copy_from_slice(&pos.to_le_bytes());
        page[element + 8..element + 12].copy_from_slice(&(k.len() as u32).to_le_bytes());
        page[element + 12..element + 16].copy_from_slice(&(v.len() as u32).to_le_bytes());
        page.extend_from_slice(k);
        page.extend_from_slice(v);
    }
    page
}

/// A bucket stored in its parent's leaf: its header (no root page, sequence 0) and its own
/// leaf page.
fn inline_bucket(items: &[(Vec<u8>, Vec<u8>)]) -> Vec<u8> {
    let leaf_items: Vec<(Vec<u8>, Vec<u8>, u32)> = items
        .iter()
        .map(|(k, v)| (k.clone(), v.clone(), 0))
        .collect();
    let mut value = vec![0u8; 16];
    value.extend_from_slice(&leaf(&leaf_items));
    value
}

fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// SHA-256 of `file`, the trailer etcd appends to a snapshot.
pub fn digest(file: &[u8]) -> Vec<u8> {
    ring::digest::digest(&ring::digest::SHA256, file)
        .as_ref()
        .to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_file_has_two_valid_meta_pages_and_the_buckets_in_the_root() {
        let mut keys = KeySpace::new();
        let mut w = keys.begin();
        w.put(b"a".to_vec(), b"1".to_vec(), 0);
        w.commit();
        let file = database(&keys);
        assert_eq!(file.len() % PAGE, 0);
        for id in 0..2 {
            let meta = &file[id * PAGE + HEADER..id * PAGE + HEADER + 64];
            assert_eq!(&meta[0..4], &MAGIC.to_le_bytes());
            let sum = u64::from_le_bytes(meta[56..64].try_into().unwrap_or_default());
            assert_eq!(sum, fnv1a64(&meta[..56]));
        }
        let root = &file[3 * PAGE..];
        assert_eq!(u16::from_le_bytes([root[10], root[11]]), 2);
        let text = String::from_utf8_lossy(root);
        assert!(text.contains("key") && text.contains("meta"));
    }
}
