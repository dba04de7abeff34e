//! Counters the benchmarks read: how much work the controllers did, per kind.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

static RECONCILES: AtomicU64 = AtomicU64::new(0);
static BY_KIND: Mutex<BTreeMap<&'static str, u64>> = Mutex::new(BTreeMap::new());
static RELISTS: Mutex<BTreeMap<&'static str, u64>> = Mutex::new(BTreeMap::new());
static DROPPED: AtomicU64 = AtomicU64::new(0);

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

/// Counts one relist of a watch of `kind` (a watch that fell out of the server's window, or
/// the first list).
pub fn relisted(kind: &'static str) {
    let short = kind.rsplit("::").next().unwrap_or(kind);
    *RELISTS
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .entry(short)
        .or_default() += 1;
}

/// Lists and relists so far, per kind, over every controller's watches.
pub fn relists() -> BTreeMap<&'static str, u64> {
    RELISTS.lock().unwrap_or_else(|p| p.into_inner()).clone()
}

/// Counts one reconcile request dropped because its object was not in the controller's
/// cache (kube-runtime's `ObjectNotFound`): harmless when the object is gone, a lost wakeup
/// when it is not yet cached.
pub fn dropped() {
    DROPPED.fetch_add(1, Ordering::Relaxed);
}

/// Requests dropped so far.
pub fn drops() -> u64 {
    DROPPED.load(Ordering::Relaxed)
}
