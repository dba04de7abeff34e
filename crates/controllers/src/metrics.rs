//! Counters the benchmarks read: how much work the controllers did.

use std::sync::atomic::{AtomicU64, Ordering};

static RECONCILES: AtomicU64 = AtomicU64::new(0);

/// Counts one reconcile (every controller calls it first thing).
pub fn reconciled() {
    RECONCILES.fetch_add(1, Ordering::Relaxed);
}

/// Reconciles so far, by every controller of this process.
pub fn reconciles() -> u64 {
    RECONCILES.load(Ordering::Relaxed)
}
