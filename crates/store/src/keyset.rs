//! The sets of keys the store's indexes hold (the objects carrying one label, the dependents
//! of one owner): a sorted vector while small, a B-tree once large.
//!
//! Most of these sets are tiny: one node's `kubernetes.io/hostname`, one ReplicaSet's pods.
//! A `BTreeSet` allocates a leaf of eleven slots (about 400 bytes for an `ObjectKey`)
//! whatever it holds, and a simulated cluster has about sixty such sets: at 1,000 clusters
//! their leaves were 28 MB of a 300 MB heap. A few keys fit a vector of their own size; past
//! [`FEW`], inserts into a sorted vector would move too much, so the set becomes a B-tree
//! (thousands of Machines of one Cluster API cluster label in a management plane).

use std::collections::BTreeSet;

/// The size past which a set is a B-tree.
const FEW: usize = 16;

/// A sorted set of keys.
#[derive(Debug, Clone)]
pub(crate) enum KeySet<K> {
    Few(Vec<K>),
    Many(BTreeSet<K>),
}

impl<K> Default for KeySet<K> {
    fn default() -> Self {
        KeySet::Few(Vec::new())
    }
}

impl<K: Ord> KeySet<K> {
    /// Adds `key`; whether it was not there.
    pub(crate) fn insert(&mut self, key: K) -> bool {
        match self {
            KeySet::Few(keys) => match keys.binary_search(&key) {
                Ok(_) => false,
                Err(at) if keys.len() < FEW => {
                    // Grown by one, not doubled: most sets stay at one or two keys, and a
                    // vector's first growth makes room for four (128 bytes of `ObjectKey`s
                    // for the one a node's or an event's set holds).
                    keys.reserve_exact(1);
                    keys.insert(at, key);
                    true
                }
                Err(_) => {
                    let mut many: BTreeSet<K> = std::mem::take(keys).into_iter().collect();
                    many.insert(key);
                    *self = KeySet::Many(many);
                    true
                }
            },
            KeySet::Many(keys) => keys.insert(key),
        }
    }

    /// Removes `key`; whether it was there. A B-tree stays one: a set that was large once
    /// tends to be again.
    pub(crate) fn remove(&mut self, key: &K) -> bool {
        match self {
            KeySet::Few(keys) => match keys.binary_search(key) {
                Ok(at) => {
                    keys.remove(at);
                    true
                }
                Err(_) => false,
            },
            KeySet::Many(keys) => keys.remove(key),
        }
    }

    pub(crate) fn len(&self) -> usize {
        match self {
            KeySet::Few(keys) => keys.len(),
            KeySet::Many(keys) => keys.len(),
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The keys in order.
    pub(crate) fn iter(&self) -> Box<dyn Iterator<Item = &K> + '_> {
        match self {
            KeySet::Few(keys) => Box::new(keys.iter()),
            KeySet::Many(keys) => Box::new(keys.iter()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn behaves_as_a_sorted_set_below_and_above_the_switch() {
        let mut set = KeySet::default();
        let mut model = BTreeSet::new();
        // A scrambled order, past FEW and back below it.
        for i in (0..3 * FEW).map(|i| (i * 7) % (3 * FEW)) {
            assert_eq!(set.insert(i), model.insert(i));
            assert_eq!(set.insert(i), model.insert(i), "a second insert of {i}");
            assert_eq!(set.len(), model.len());
        }
        assert!(matches!(set, KeySet::Many(_)));
        for i in (0..3 * FEW).step_by(2) {
            assert_eq!(set.remove(&i), model.remove(&i));
            assert!(!set.remove(&i));
        }
        assert!(set.iter().eq(model.iter()));
    }

    #[test]
    fn a_small_set_stays_a_vector_in_order() {
        let mut set = KeySet::default();
        for k in ["c", "a", "b", "a"] {
            set.insert(k);
        }
        assert!(matches!(&set, KeySet::Few(keys) if keys.len() == 3));
        assert!(
            matches!(&set, KeySet::Few(keys) if keys.capacity() == 3),
            "room for what it holds, no more"
        );
        assert_eq!(set.iter().copied().collect::<Vec<_>>(), ["a", "b", "c"]);
        assert!(set.remove(&"b"));
        assert!(!set.remove(&"z"));
        assert!(!set.is_empty());
    }
}
