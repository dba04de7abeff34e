//! An object's selectable fields (`spec.nodeName`, `status.phase`, …) as the store keeps them
//! beside its bytes: every name and value in one allocation.
//!
//! Each stored version carries them, and the window keeps hundreds of versions per cluster.
//! An Event has eleven selectable fields: as a vector of boxed strings that was 23
//! allocations and about 800 bytes per Event, about 30 KB of every simulated cluster; packed
//! into one buffer (each string behind its length) it is one allocation of about 350 bytes.

use std::fmt;

/// Name and value pairs, in the order given, in one buffer.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct SelectableFields(Box<[u8]>);

impl SelectableFields {
    /// The pairs `fields`, in order.
    pub fn new<N: AsRef<str>, V: AsRef<str>>(fields: impl IntoIterator<Item = (N, V)>) -> Self {
        let mut buffer = Vec::new();
        for (name, value) in fields {
            put(&mut buffer, name.as_ref());
            put(&mut buffer, value.as_ref());
        }
        SelectableFields(buffer.into_boxed_slice())
    }

    /// The value of field `name`.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.iter().find(|(n, _)| *n == name).map(|(_, v)| v)
    }

    /// The pairs, in order.
    pub fn iter(&self) -> Pairs<'_> {
        Pairs { rest: &self.0 }
    }

    /// How many pairs there are.
    pub fn len(&self) -> usize {
        self.iter().count()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
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

/// The pairs of a [`SelectableFields`].
pub struct Pairs<'a> {
    rest: &'a [u8],
}

impl<'a> Pairs<'a> {
    fn take(&mut self) -> Option<&'a str> {
        let (len, rest) = self.rest.split_first_chunk::<4>()?;
        let len = u32::from_le_bytes(*len) as usize;
        let (s, rest) = rest.split_at_checked(len)?;
        self.rest = rest;
        // Written from a `&str` by `put`, whole: always UTF-8.
        std::str::from_utf8(s).ok()
    }
}

impl<'a> Iterator for Pairs<'a> {
    type Item = (&'a str, &'a str);

    fn next(&mut self) -> Option<Self::Item> {
        Some((self.take()?, self.take()?))
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
}
