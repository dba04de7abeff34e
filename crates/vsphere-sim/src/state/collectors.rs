//! The property collectors' state: paged results, filters, and what each collector last
//! reported through each filter (driven by `property_collector`), every piece of it owned by
//! a session.

use crate::filter_spec::FilterSpec;
use crate::value::Moref;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// Objects of a paged RetrievePropertiesEx still to be handed out.
#[derive(Debug)]
pub(crate) struct PendingResult {
    pub(crate) session: String,
    pub(crate) page: usize,
    pub(crate) remaining: Vec<String>,
}

/// A property filter created with CreateFilter, its spec parsed once.
#[derive(Debug, Clone)]
pub(crate) struct Filter {
    pub(crate) session: String,
    pub(crate) collector: String,
    pub(crate) spec: Arc<FilterSpec>,
}

/// The rendered property values of one object: (path, `<val>` XML).
pub(crate) type ObjectValues = (Moref, Vec<(String, String)>);
/// Per object value, what a filter reported.
pub(crate) type FilterValues = HashMap<String, ObjectValues>;

/// What a collector last reported through one filter, and what its next report needs.
#[derive(Debug, Default)]
pub(crate) struct FilterReport {
    /// The inventory's change count when the report was made: later changes are news.
    pub(crate) seen: u64,
    /// The reported values, per selected object.
    pub(crate) values: FilterValues,
    /// The objects whose properties decide what the filter selects (every object a traversal
    /// read, a container view's folders, datacenters, compute resources and pools): a change
    /// to one of them means selecting again; a change to any other object means comparing
    /// that object only.
    pub(crate) nodes: HashSet<String>,
    /// Objects whose changes `maxObjectUpdates` left out of the last report.
    pub(crate) owed: HashSet<String>,
    /// Whether the next report selects again (the last one was cut short, or there was none).
    pub(crate) reselect: bool,
}

impl FilterReport {
    /// The report of a filter nothing was reported through yet: everything it selects enters.
    pub(crate) fn first() -> Self {
        FilterReport {
            reselect: true,
            ..FilterReport::default()
        }
    }
}

/// What a collector last reported, per filter, and the version of that report.
#[derive(Debug, Default)]
pub(crate) struct Reported {
    version: u64,
    last: HashMap<String, FilterReport>,
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

    /// Whether any filter exists (someone may wait for changes).
    pub(crate) fn any_filter(&self) -> bool {
        !self.filters.is_empty()
    }

    /// The filters of one collector with their specs, by name, in a stable order.
    pub(crate) fn filters_of(&self, key: &CollectorKey) -> Vec<(String, Arc<FilterSpec>)> {
        let mut out: Vec<(String, Arc<FilterSpec>)> = self
            .filters
            .iter()
            .filter(|(_, f)| f.session == key.0 && f.collector == key.1)
            .map(|(k, f)| (k.clone(), f.spec.clone()))
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    /// The version of the collector's last report (0 before the first).
    pub(crate) fn version(&self, key: &CollectorKey) -> u64 {
        self.updates.get(key).map_or(0, |r| r.version)
    }

    /// Forgets what the collector reported, so its next report holds everything (a wait with
    /// the initial, empty version). The version count goes on.
    pub(crate) fn forget_reports(&mut self, key: &CollectorKey) {
        if let Some(r) = self.updates.get_mut(key) {
            r.last.clear();
        }
    }

    /// Takes what the collector last reported through `filter` (the first report's state
    /// if nothing yet), to be brought up to date and given back with [`Collectors::put_report`].
    pub(crate) fn take_report(&mut self, key: &CollectorKey, filter: &str) -> FilterReport {
        self.updates
            .get_mut(key)
            .and_then(|r| r.last.remove(filter))
            .unwrap_or_else(FilterReport::first)
    }

    /// Gives back a filter's report (a filter destroyed meanwhile keeps none).
    pub(crate) fn put_report(&mut self, key: &CollectorKey, filter: String, report: FilterReport) {
        if self.filters.contains_key(&filter) {
            let reported = self.updates.entry(key.clone()).or_default();
            reported.last.insert(filter, report);
        }
    }

    /// Counts a report made by the collector; returns its version.
    pub(crate) fn next_version(&mut self, key: &CollectorKey) -> u64 {
        let reported = self.updates.entry(key.clone()).or_default();
        reported.version += 1;
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
