//! Which managed objects changed, in order: what lets a property collector's wait cost the
//! objects that changed rather than every object its filters select.
//!
//! The inventory counts every mutable access (`Inventory::changes`); while the journal is
//! kept, each such access also records the object's value against the count it moved to.
//! A filter remembers the count its last report was made at and asks for what came after.
//! The journal is kept only while some property filter exists (nobody else reads it), and
//! holds a bounded number of entries: a reader that fell further behind is told so and
//! compares everything, as it would without a journal.

use std::collections::VecDeque;

/// How many changes the journal keeps. A waiter reads the journal after every call that
/// changed something, so it falls this far behind only when thousands of objects change in
/// one call or its wait is not running (then it compares everything once, which is correct).
const KEPT: usize = 8192;

/// The changed objects' values, in order of change.
#[derive(Debug, Default)]
pub(crate) struct Journal {
    kept: bool,
    /// (the change count after the change, the changed object's value).
    entries: VecDeque<(u64, Box<str>)>,
    /// Changes up to and including this count are not (or no longer) in `entries`.
    floor: u64,
}

impl Journal {
    /// Starts or stops keeping the journal; `now` is the change count at this moment.
    /// Started, it knows of no change before `now`.
    pub(crate) fn keep(&mut self, kept: bool, now: u64) {
        if kept == self.kept {
            return;
        }
        self.kept = kept;
        self.entries.clear();
        self.entries.shrink_to_fit();
        self.floor = now;
    }

    /// Records that `value` changed, the change count now being `count`.
    pub(crate) fn record(&mut self, count: u64, value: &str) {
        if !self.kept {
            return;
        }
        // Calls change the same object many times in a row (a VM's runtime, then its summary):
        // one entry serves them all.
        if let Some(last) = self.entries.back_mut() {
            if &*last.1 == value {
                last.0 = count;
                return;
            }
        }
        if self.entries.len() == KEPT {
            if let Some((dropped, _)) = self.entries.pop_front() {
                self.floor = dropped;
            }
        }
        self.entries.push_back((count, value.into()));
    }

    /// The values that changed after change count `seen`, each once; `None` when the journal
    /// does not reach back that far (or is not kept), so the reader must compare everything.
    pub(crate) fn since(&self, seen: u64) -> Option<Vec<&str>> {
        if !self.kept || seen < self.floor {
            return None;
        }
        let start = self.entries.partition_point(|(count, _)| *count <= seen);
        let mut out: Vec<&str> = Vec::new();
        let mut once = std::collections::HashSet::new();
        for (_, value) in self.entries.range(start..) {
            if once.insert(&**value) {
                out.push(value);
            }
        }
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reader_gets_what_changed_after_its_count_each_once() {
        let mut j = Journal::default();
        j.record(1, "vm-1"); // not kept yet: lost
        j.keep(true, 1);
        j.record(2, "vm-2");
        j.record(3, "vm-2");
        j.record(4, "vm-3");
        j.record(5, "vm-2");
        assert_eq!(j.since(1), Some(vec!["vm-2", "vm-3"]));
        assert_eq!(j.since(3), Some(vec!["vm-3", "vm-2"]));
        assert_eq!(j.since(5), Some(vec![]));
        assert_eq!(j.since(0), None, "before the journal was kept");
        j.keep(false, 5);
        assert_eq!(j.since(5), None);
    }

    #[test]
    fn a_reader_that_fell_behind_the_kept_entries_is_told_so() {
        let mut j = Journal::default();
        j.keep(true, 0);
        for i in 0..(KEPT as u64 + 10) {
            j.record(i + 1, &format!("vm-{i}"));
        }
        assert_eq!(j.since(3), None);
        let recent = j.since(KEPT as u64 + 8).expect("recent changes are kept");
        assert_eq!(
            recent,
            vec![format!("vm-{}", KEPT + 8), format!("vm-{}", KEPT + 9)]
        );
    }
}
