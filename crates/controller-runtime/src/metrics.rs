//! Counters the benchmarks read: how much work the controllers did, per kind.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

static RECONCILES: AtomicU64 = AtomicU64::new(0);
static BY_KIND: Mutex<BTreeMap<&'static str, u64>> = Mutex::new(BTreeMap::new());
static RELISTS: Mutex<BTreeMap<String, u64>> = Mutex::new(BTreeMap::new());
static DROPPED: AtomicU64 = AtomicU64::new(0);
static RUNNING: Mutex<BTreeMap<&'static str, u64>> = Mutex::new(BTreeMap::new());

/// Counts one reconcile of a `kind` object (every controller calls it first thing), and
/// counts it as running until the returned guard drops.
pub fn reconciled(kind: &'static str) -> Running {
    RECONCILES.fetch_add(1, Ordering::Relaxed);
    *BY_KIND
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .entry(kind)
        .or_default() += 1;
    *RUNNING
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .entry(kind)
        .or_default() += 1;
    Running { kind }
}

/// A reconcile under way; see [`reconciled`].
#[must_use]
pub struct Running {
    kind: &'static str,
}

impl Drop for Running {
    fn drop(&mut self) {
        let mut running = RUNNING.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = running.get_mut(self.kind) {
            *n = n.saturating_sub(1);
        }
    }
}

/// Reconciles under way, per kind: on an idle process, a reconcile that never ends.
pub fn running() -> BTreeMap<&'static str, u64> {
    RUNNING
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .iter()
        .filter(|(_, n)| **n > 0)
        .map(|(k, n)| (*k, *n))
        .collect()
}

/// Reconciles so far, by every controller of this process.
pub fn reconciles() -> u64 {
    RECONCILES.load(Ordering::Relaxed)
}

/// Reconciles so far, per kind.
pub fn by_kind() -> BTreeMap<&'static str, u64> {
    BY_KIND.lock().unwrap_or_else(|p| p.into_inner()).clone()
}

/// Counts one list of a watch of `kind`: its first, or a relist after it fell out of the
/// server's window.
pub fn relisted(kind: String) {
    *RELISTS
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .entry(kind)
        .or_default() += 1;
}

/// Lists so far, per kind, over every watch of the process.
pub fn relists() -> BTreeMap<String, u64> {
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
