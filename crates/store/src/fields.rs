//! An object's selectable fields (`spec.nodeName`, `status.phase`, …) as the store keeps them
//! beside its bytes: the kind's list of field names, shared, and every value in one buffer.
//!
//! Each stored version carries them, and the window keeps hundreds of versions per cluster.
//! An Event has eleven selectable fields: as a vector of boxed strings that was 23
//! allocations and about 800 bytes per Event; packed into one buffer, names and values, one
//! allocation of about 350 bytes, of which the names (the same in every Event) were two
//! thirds. The names are now the kind's one static list, and the buffer holds the values
//! alone (at 1,000 fleet clusters at rest the fields' heap went from 17.9 MB to 6.9 MB).

use std::fmt;
use std::sync::Mutex;

/// Name and value pairs, in the order of the kind's names.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct SelectableFields {
    names: &'static [&'static str],
    /// Each value behind its length, in the order of `names`.
    values: Box<[u8]>,
}

impl SelectableFields {
    /// The values of the fields `names` (a kind's static list), in order. A value missing
    /// from the end reads as empty.
    pub fn with_names<V: AsRef<str>>(
        names: &'static [&'static str],
        values: impl IntoIterator<Item = V>,
    ) -> Self {
        let mut buffer = Vec::new();
        let mut count = 0;
        for value in values.into_iter().take(names.len()) {
            put(&mut buffer, value.as_ref());
            count += 1;
        }
        for _ in count..names.len() {
            put(&mut buffer, "");
        }
        SelectableFields {
            names,
            values: buffer.into_boxed_slice(),
        }
    }

    /// The pairs `fields`, in order, whatever their names (read back from a record, or made
    /// in a test): the list of names is looked up among those already seen.
    pub fn new<N: AsRef<str>, V: AsRef<str>>(fields: impl IntoIterator<Item = (N, V)>) -> Self {
        let (names, values): (Vec<N>, Vec<V>) = fields.into_iter().unzip();
        let names: Vec<&str> = names.iter().map(AsRef::as_ref).collect();
        SelectableFields::with_names(interned(&names), values)
    }

    /// The value of field `name`.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.iter().find(|(n, _)| *n == name).map(|(_, v)| v)
    }

    /// The pairs, in order.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, &str)> + '_ {
        self.names
            .iter()
            .copied()
            .zip(Values { rest: &self.values })
    }

    /// How many pairs there are.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }
}

/// The lists of field names seen, each kept once for the process's lifetime. The API layer
/// names a kind's fields from a static list (see `with_names`); other lists come from the
/// records a durable store reads back and from tests, a handful of distinct ones, so keeping
/// each for good is bounded by the kinds there are.
fn interned(names: &[&str]) -> &'static [&'static str] {
    static SEEN: Mutex<Vec<&'static [&'static str]>> = Mutex::new(Vec::new());
    if names.is_empty() {
        return &[];
    }
    let mut seen = SEEN.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(list) = seen.iter().find(|list| **list == names) {
        return list;
    }
    let list: Vec<&'static str> = names
        .iter()
        .map(|n| &*Box::leak(Box::<str>::from(*n)))
        .collect();
    let list: &'static [&'static str] = Box::leak(list.into_boxed_slice());
    seen.push(list);
    list
}

impl fmt::Debug for SelectableFields {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl<N: AsRef<str>, V: AsRef<str>> FromIterator<(N, V)> for SelectableFields {
    fn from_iter<I: IntoIterator<Item = (N, V)>>(pairs: I) -> Self {
        SelectableFields::new(pairs)
    }
}

/// A string behind its length (four bytes, little-endian).
fn put(buffer: &mut Vec<u8>, s: &str) {
    // A field's value is part of an object the API accepted: far below 4 GiB.
    let len = u32::try_from(s.len()).unwrap_or(u32::MAX);
    buffer.extend_from_slice(&len.to_le_bytes());
    buffer.extend_from_slice(&s.as_bytes()[..len as usize]);
}

/// The values of a [`SelectableFields`], in order.
struct Values<'a> {
    rest: &'a [u8],
}

impl<'a> Iterator for Values<'a> {
    type Item = &'a str;

    fn next(&mut self) -> Option<&'a str> {
        let (len, rest) = self.rest.split_first_chunk::<4>()?;
        let len = u32::from_le_bytes(*len) as usize;
        let (s, rest) = rest.split_at_checked(len)?;
        self.rest = rest;
        // Written from a `&str` by `put`, whole: always UTF-8.
        std::str::from_utf8(s).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_come_back_in_order_with_empty_and_unusual_values() {
        let pairs = [
            ("spec.nodeName", "node-1"),
            ("status.podIP", ""),
            ("reason", "a\0b=c,d"),
            ("type", "Normal ✓"),
        ];
        let fields: SelectableFields = pairs.iter().copied().collect();
        assert_eq!(fields.iter().collect::<Vec<_>>(), pairs);
        assert_eq!(fields.get("reason"), Some("a\0b=c,d"));
        assert_eq!(fields.get("status.podIP"), Some(""));
        assert_eq!(fields.get("spec.schedulerName"), None);
        assert_eq!(fields.len(), 4);
        assert_eq!(
            format!("{fields:?}"),
            r#"{"spec.nodeName": "node-1", "status.podIP": "", "reason": "a\0b=c,d", "type": "Normal ✓"}"#
        );
        assert!(SelectableFields::default().is_empty());
    }

    #[test]
    fn a_kinds_static_names_and_the_same_names_read_back_are_equal() {
        static NAMES: &[&str] = &["spec.nodeName", "status.phase"];
        let made = SelectableFields::with_names(NAMES, ["node-1", "Running"]);
        let read_back: SelectableFields =
            [("spec.nodeName", "node-1"), ("status.phase", "Running")]
                .into_iter()
                .collect();
        assert_eq!(made, read_back);
        assert_eq!(read_back.get("status.phase"), Some("Running"));
        // Values missing from the end read as empty, extra ones are not kept.
        let short = SelectableFields::with_names(NAMES, ["node-1"]);
        assert_eq!(short.get("status.phase"), Some(""));
        let long = SelectableFields::with_names(NAMES, ["a", "b", "c"]);
        assert_eq!(long.iter().count(), 2);
        // A list of names is kept once, however often it is read back.
        let again: SelectableFields = [("spec.nodeName", "x"), ("status.phase", "y")]
            .into_iter()
            .collect();
        assert!(std::ptr::eq(again.names, read_back.names));
    }
}
