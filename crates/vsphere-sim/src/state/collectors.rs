//! The property collectors' state: paged results, filters, and what each collector last
//! reported through each filter (driven by `property_collector`), every piece of it owned by
//! a session.

use crate::soap::Element;
use crate::value::Moref;
use std::collections::{HashMap, HashSet};

/// Objects of a paged RetrievePropertiesEx still to be handed out.
#[derive(Debug)]
pub(crate) struct PendingResult {
    pub(crate) session: String,
    pub(crate) page: usize,
    pub(crate) remaining: Vec<String>,
}

/// A property filter created with CreateFilter.
#[derive(Debug, Clone)]
pub(crate) struct Filter {
    pub(crate) session: String,
    pub(crate) collector: String,
    pub(crate) spec: Element,
}

/// The rendered property values of one object: (path, `<val>` XML).
pub(crate) type ObjectValues = (Moref, Vec<(String, String)>);
/// Per object value, what a filter reported.
pub(crate) type FilterValues = HashMap<String, ObjectValues>;

/// What a collector last reported, per filter, per object, per property (rendered values).
#[derive(Debug, Default)]
pub(crate) struct Reported {
    version: u64,
    last: HashMap<String, FilterValues>,
}

/// A collector of a session: (session key, collector moref value).
pub(crate) type CollectorKey = (String, String);

/// The property collectors' state, every piece of it owned by a session.
#[derive(Debug, Default)]
pub(crate) struct Collectors {
    /// Paged results by token.
    pending: HashMap<String, PendingResult>,
    next_token: u64,
    /// Filters by their moref value.
    filters: HashMap<String, Filter>,
    updates: HashMap<CollectorKey, Reported>,
    /// Collectors whose waiting WaitForUpdates a CancelWaitForUpdates asked to return.
    cancelled: HashSet<CollectorKey>,
}

impl Collectors {
    /// Keeps the rest of a paged result; returns the token that continues it.
    pub(crate) fn keep_pending(
        &mut self,
        session: String,
        page: usize,
        remaining: Vec<String>,
    ) -> String {
        self.next_token += 1;
        let token = self.next_token.to_string();
        let pending = PendingResult {
            session,
            page,
            remaining,
        };
        self.pending.insert(token.clone(), pending);
        token
    }

    pub(crate) fn take_pending(&mut self, token: &str) -> Option<PendingResult> {
        self.pending.remove(token)
    }

    pub(crate) fn add_filter(&mut self, name: String, filter: Filter) {
        self.filters.insert(name, filter);
    }

    /// Forgets a filter and what any collector reported through it.
    pub(crate) fn destroy_filter(&mut self, name: &str) {
        self.filters.remove(name);
        for r in self.updates.values_mut() {
            r.last.remove(name);
        }
    }

    /// Removes the filters of a destroyed collector; returns their names.
    pub(crate) fn remove_collector_filters(&mut self, collector: &str) -> Vec<String> {
        let mut dead = Vec::new();
        self.filters.retain(|k, f| {
            let keep = f.collector != collector;
            if !keep {
                dead.push(k.clone());
            }
            keep
        });
        dead
    }

    pub(crate) fn cancel(&mut self, key: CollectorKey) {
        self.cancelled.insert(key);
    }

    /// Whether a wait of this collector was cancelled (clearing the cancellation).
    pub(crate) fn take_cancel(&mut self, key: &CollectorKey) -> bool {
        self.cancelled.remove(key)
    }

    /// The filters of one collector, by name.
    pub(crate) fn filters_of(&self, key: &CollectorKey) -> Vec<(String, Filter)> {
        self.filters
            .iter()
            .filter(|(_, f)| f.session == key.0 && f.collector == key.1)
            .map(|(k, f)| (k.clone(), f.clone()))
            .collect()
    }

    /// What a collector last reported through a filter.
    pub(crate) fn reported(&self, key: &CollectorKey, filter: &str) -> Option<&FilterValues> {
        self.updates.get(key).and_then(|r| r.last.get(filter))
    }

    /// Records what a collector reports now, per filter; returns the report's version.
    pub(crate) fn record(&mut self, key: &CollectorKey, fresh: Vec<(String, FilterValues)>) -> u64 {
        let reported = self.updates.entry(key.clone()).or_default();
        reported.version += 1;
        for (name, values) in fresh {
            reported.last.insert(name, values);
        }
        reported.version
    }

    /// Forgets a session's paged results, filters and reports (its session-scoped objects
    /// leave the inventory with the session).
    pub(crate) fn drop_session(&mut self, key: &str) {
        self.pending.retain(|_, p| p.session != key);
        self.filters.retain(|_, f| f.session != key);
        self.updates.retain(|(s, _), _| s != key);
    }
}
