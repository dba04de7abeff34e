//! Names every cluster's API server writes alike (its bootstrap RBAC roles, API services and
//! namespaces), kept once for the whole process.
//!
//! Each stored object holds its name and namespace as `Arc<str>`s. A simulated cluster is made
//! with about eighty bootstrap objects whose names are the same in every cluster
//! (`system:controller:deployment-controller`, `v1.apps`, `kube-system`, ...), so a fleet of
//! thousands held thousands of copies of each. The writers of those objects register the
//! names here ([`share`]), and the store takes the registered `Arc` when it reads an object's
//! metadata ([`name`]) instead of allocating its own.
//!
//! Only names given to [`share`] are kept, and at most [`MAX_SHARED`] of them, so that no
//! client's input can grow the table: it holds a fixed set known to the program.

use std::collections::HashSet;
use std::sync::{Arc, LazyLock, RwLock};

/// The most names kept: several times what the bootstrap writes.
pub const MAX_SHARED: usize = 4096;

static SHARED: LazyLock<RwLock<HashSet<Arc<str>>>> = LazyLock::new(|| {
    // The empty namespace of every cluster-scoped object.
    RwLock::new(HashSet::from([Arc::from("")]))
});

/// Keeps `name` for every object named so from now on (nothing once [`MAX_SHARED`] are kept).
pub fn share(name: &str) {
    if SHARED
        .read()
        .unwrap_or_else(|p| p.into_inner())
        .contains(name)
    {
        return;
    }
    let mut shared = SHARED.write().unwrap_or_else(|p| p.into_inner());
    if shared.len() < MAX_SHARED {
        shared.insert(Arc::from(name));
    }
}

/// `name` as an `Arc`: the shared one if it was registered, a new one otherwise.
pub(crate) fn name(name: &str) -> Arc<str> {
    SHARED
        .read()
        .unwrap_or_else(|p| p.into_inner())
        .get(name)
        .cloned()
        .unwrap_or_else(|| Arc::from(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_registered_name_is_one_allocation_and_others_are_their_own() {
        share("shared-names-test");
        let a = name("shared-names-test");
        let b = name("shared-names-test");
        assert!(Arc::ptr_eq(&a, &b));
        let c = name("shared-names-test-not-registered");
        let d = name("shared-names-test-not-registered");
        assert_eq!(c, d);
        assert!(!Arc::ptr_eq(&c, &d));
        assert!(Arc::ptr_eq(&name(""), &name("")), "the empty namespace");
    }
}
