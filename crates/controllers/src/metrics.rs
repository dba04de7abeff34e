//! Counters the benchmarks read: how much work the controllers did, per kind.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

static RECONCILES: AtomicU64 = AtomicU64::new(0);
static BY_KIND: Mutex<BTreeMap<&'static str, u64>> = Mutex::new(BTreeMap::new());

/// Counts one reconcile of a `kind` object (every controller calls it first thing).
pub fn reconciled(kind: &'static str) {
    RECONCILES.fetch_add(1, Ordering::Relaxed);
    *BY_KIND
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .entry(kind)
        .or_default() += 1;
}

/// Reconciles so far, by every controller of this process.
pub fn reconciles() -> u64 {
    RECONCILES.load(Ordering::Relaxed)
}

/// Reconciles so far, per kind.
pub fn by_kind() -> BTreeMap<&'static str, u64> {
    BY_KIND.lock().unwrap_or_else(|p| p.into_inner()).clone()
}
