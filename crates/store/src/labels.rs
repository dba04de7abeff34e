//! An object's labels as the store keeps them beside its bytes: a sorted slice of pairs.
//!
//! Every stored object carries its parsed labels (for the label index and selectors), and so
//! does every old version the event window keeps. A `BTreeMap<String, String>` allocates a
//! node of eleven slots (about 540 bytes) however few labels there are, and most objects have
//! one to four: at thousands of simulated clusters those nodes were about a tenth of the heap.
//! A shared slice holds exactly the pairs, and reads stay a binary search.
//!
//! The slice is interned process-wide (`internment::ArcIntern`: one copy of each distinct
//! set, freed with its last holder). Most label sets recur: every version of an object keeps
//! its labels, and every simulated cluster carries the same bootstrap objects (the RBAC
//! defaults' `kubernetes.io/bootstrapping`, CoreDNS's and kube-proxy's pods, the namespaces'
//! `kubernetes.io/metadata.name`), so a fleet holds each of those sets once rather than once
//! per cluster and version. Interning costs a hash and a lookup per object written.

use internment::ArcIntern;
use serde::ser::{Serialize, SerializeMap, Serializer};

/// One label: its key and value.
type Pair = (Box<str>, Box<str>);

/// Label keys and values, sorted by key, each key once (none: no allocation). Cheap to clone;
/// equal sets are one interned copy, so equality is a pointer comparison.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Labels(Option<ArcIntern<Box<[Pair]>>>);

impl Labels {
    /// The value of label `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        let pairs = self.pairs();
        pairs
            .binary_search_by(|(k, _)| (**k).cmp(key))
            .ok()
            .map(|i| &*pairs[i].1)
    }

    fn pairs(&self) -> &[Pair] {
        self.0.as_deref().map(|set| &**set).unwrap_or_default()
    }

    /// Whether the object carries label `key`.
    pub fn contains_key(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    pub fn is_empty(&self) -> bool {
        self.pairs().is_empty()
    }

    pub fn len(&self) -> usize {
        self.pairs().len()
    }

    /// The labels, by key.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.pairs().iter().map(|(k, v)| (&**k, &**v))
    }
}

impl<K: Into<Box<str>>, V: Into<Box<str>>> FromIterator<(K, V)> for Labels {
    /// Sorted by key; of two pairs with one key, the later one stays (as a map's insert).
    fn from_iter<I: IntoIterator<Item = (K, V)>>(pairs: I) -> Self {
        let mut pairs: Vec<(Box<str>, Box<str>)> = pairs
            .into_iter()
            .map(|(k, v)| (k.into(), v.into()))
            .collect();
        // A stable sort keeps equal keys in arrival order, so the last of each is the newest.
        pairs.sort_by(|a, b| a.0.cmp(&b.0));
        let mut unique: Vec<(Box<str>, Box<str>)> = Vec::with_capacity(pairs.len());
        for pair in pairs {
            match unique.last_mut() {
                Some(last) if last.0 == pair.0 => *last = pair,
                _ => unique.push(pair),
            }
        }
        // No labels, no allocation: most objects of a cluster have none.
        Labels((!unique.is_empty()).then(|| ArcIntern::new(unique.into_boxed_slice())))
    }
}

impl<'a> IntoIterator for &'a Labels {
    type Item = (&'a str, &'a str);
    type IntoIter = std::iter::Map<
        std::slice::Iter<'a, (Box<str>, Box<str>)>,
        fn(&'a (Box<str>, Box<str>)) -> (&'a str, &'a str),
    >;

    fn into_iter(self) -> Self::IntoIter {
        self.pairs().iter().map(|(k, v)| (&**k, &**v))
    }
}

impl Serialize for Labels {
    /// As the JSON object `metadata.labels` is.
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.len()))?;
        for (k, v) in self.iter() {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_are_sorted_and_the_last_of_a_key_wins() {
        let labels: Labels = [("b", "1"), ("a", "2"), ("b", "3")].into_iter().collect();
        assert_eq!(labels.iter().collect::<Vec<_>>(), [("a", "2"), ("b", "3")]);
        assert_eq!(labels.get("b"), Some("3"));
        assert_eq!(labels.get("c"), None);
        assert!(labels.contains_key("a"));
        assert_eq!(labels.len(), 2);
    }

    #[test]
    fn equal_sets_are_one_copy_and_the_last_holder_frees_it() {
        let pairs = [("interned-test", "one"), ("app", "x")];
        let a: Labels = pairs.into_iter().collect();
        let b: Labels = pairs.into_iter().rev().collect();
        let (Some(a_set), Some(b_set)) = (&a.0, &b.0) else {
            panic!("labels with pairs hold a set");
        };
        assert!(std::ptr::eq(&**a_set, &**b_set), "one copy of equal sets");
        assert_eq!(a_set.refcount(), 2);
        let other: Labels = [("interned-test", "two")].into_iter().collect();
        assert_ne!(a, other);
        drop(b);
        assert_eq!(a.0.as_ref().map(ArcIntern::refcount), Some(1));
    }

    #[test]
    fn serializes_as_a_json_object() {
        let labels: Labels = [("tier", "web"), ("app", "x")].into_iter().collect();
        assert_eq!(
            serde_json::to_string(&labels).unwrap(),
            r#"{"app":"x","tier":"web"}"#
        );
        assert!(Labels::default().is_empty());
    }
}
