//! The snapshot trees of every VM and their current snapshots (driven by `snapshot`; the
//! inventory holds the snapshot objects and the properties rendered from the trees).

use crate::value::{Moref, Val};
use chrono::{DateTime, Utc};
use std::collections::HashMap;

/// One snapshot of a VM.
#[derive(Debug, Clone)]
pub(crate) struct SnapNode {
    pub(crate) moref: Moref,
    pub(crate) name: String,
    pub(crate) description: String,
    pub(crate) id: i32,
    pub(crate) created: DateTime<Utc>,
    pub(crate) power: String,
    pub(crate) parent: Option<Moref>,
    /// The VM's `config` when the snapshot was taken.
    pub(crate) config: Option<Val>,
}

/// The snapshots of every VM, by the VM's moref value.
#[derive(Debug, Default)]
pub(crate) struct Snapshots {
    /// Each VM's snapshots, in the order they were taken (`parent` links make the tree).
    trees: HashMap<String, Vec<SnapNode>>,
    current: HashMap<String, Moref>,
}

impl Snapshots {
    pub(crate) fn tree(&self, vm: &str) -> &[SnapNode] {
        self.trees.get(vm).map(Vec::as_slice).unwrap_or_default()
    }

    pub(crate) fn tree_mut(&mut self, vm: &str) -> &mut Vec<SnapNode> {
        self.trees.entry(vm.to_string()).or_default()
    }

    /// One snapshot of a VM, if the VM has it.
    pub(crate) fn node_mut(&mut self, vm: &str, snapshot: &Moref) -> Option<&mut SnapNode> {
        self.trees
            .get_mut(vm)?
            .iter_mut()
            .find(|n| &n.moref == snapshot)
    }

    pub(crate) fn current(&self, vm: &str) -> Option<&Moref> {
        self.current.get(vm)
    }

    /// Sets (or with `None` clears) the VM's current snapshot.
    pub(crate) fn set_current(&mut self, vm: &str, snapshot: Option<Moref>) {
        match snapshot {
            Some(s) => self.current.insert(vm.to_string(), s),
            None => self.current.remove(vm),
        };
    }

    /// Forgets a VM's tree and current snapshot; returns the snapshots it had.
    pub(crate) fn remove_vm(&mut self, vm: &str) -> Vec<SnapNode> {
        self.current.remove(vm);
        self.trees.remove(vm).unwrap_or_default()
    }
}
