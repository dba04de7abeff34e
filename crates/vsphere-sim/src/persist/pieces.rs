//! Long lists kept in pieces. A folder of ten thousand VMs lists them all in `childEntity`,
//! and so do its pool's `vm`, its hosts', datastores' and networks'; a clone adds one item
//! to each. Written whole, every clone would write every one of those lists again: a
//! change's cost would grow with the inventory. Kept in pieces, a change writes the piece
//! it touched.
//!
//! Where a list is cut is decided by its items (content-defined chunking): a piece ends
//! after an item whose hash is a multiple of [`AVERAGE`] (or at [`MAX`] items), so adding or
//! removing an item changes the piece it is in and leaves the pieces before and after it as
//! they were, wherever in the list it happens. A piece is named by the hash of what it holds,
//! so an unchanged piece has an unchanged name and is not written again.

use crate::value::Val;
use std::hash::{BuildHasher, Hash, Hasher};

/// Lists longer than this are kept in pieces; shorter ones within their object's record.
pub(crate) const OVER: usize = 256;
/// A piece holds this many items on average.
const AVERAGE: u64 = 64;
/// And never more than this.
const MAX: usize = 1024;

/// A fixed seed: a piece's name must be the same in every process that keeps the store.
fn hasher() -> impl Hasher {
    foldhash::fast::FixedState::with_seed(0x1f1e_5173_c0de_0001).build_hasher()
}

/// One item's hash: a reference's by its value (nearly every long list is one of references),
/// any other by its debug text (long lists of those are rare).
fn item_hash(v: &Val) -> u64 {
    let mut h = hasher();
    match v {
        Val::Mor(m) => {
            m.ty.hash(&mut h);
            m.value.hash(&mut h);
        }
        Val::Str(s) => s.hash(&mut h),
        other => format!("{other:?}").hash(&mut h),
    }
    h.finish()
}

/// `items` cut into pieces, each with the hash that names it.
pub(crate) fn cut(items: &[Val]) -> Vec<(u64, &[Val])> {
    let mut pieces = Vec::new();
    let (mut start, mut piece) = (0, hasher());
    for (i, item) in items.iter().enumerate() {
        let h = item_hash(item);
        piece.write_u64(h);
        if h.is_multiple_of(AVERAGE) || i + 1 - start == MAX || i + 1 == items.len() {
            piece.write_usize(i + 1 - start);
            pieces.push((piece.finish(), &items[start..=i]));
            (start, piece) = (i + 1, hasher());
        }
    }
    pieces
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::Moref;

    fn vms(range: std::ops::Range<usize>) -> Vec<Val> {
        range
            .map(|i| Val::Mor(Moref::new("VirtualMachine", &format!("vm-{i}"))))
            .collect()
    }

    fn names(items: &[Val]) -> Vec<u64> {
        cut(items).into_iter().map(|(h, _)| h).collect()
    }

    #[test]
    fn the_pieces_hold_every_item_in_order() {
        let items = vms(0..5000);
        let pieces = cut(&items);
        assert!(pieces.len() > 20 && pieces.len() < 300, "{}", pieces.len());
        assert!(pieces.iter().all(|(_, p)| p.len() <= MAX));
        let again: Vec<Val> = pieces.iter().flat_map(|(_, p)| p.iter().cloned()).collect();
        assert_eq!(again, items);
        assert!(cut(&[]).is_empty());
    }

    #[test]
    fn adding_or_removing_an_item_changes_one_piece_or_two() {
        let items = vms(0..5000);
        let before = names(&items);
        let mut appended = items.clone();
        appended.extend(vms(5000..5001));
        let after = names(&appended);
        let new = after.iter().filter(|h| !before.contains(h)).count();
        assert!(new <= 2, "{new} pieces changed by an append");
        let mut removed = items.clone();
        removed.remove(2500);
        let after = names(&removed);
        let new = after.iter().filter(|h| !before.contains(h)).count();
        assert!(new <= 2, "{new} pieces changed by a removal in the middle");
        assert_eq!(names(&items), before, "the same list is cut the same way");
    }
}
