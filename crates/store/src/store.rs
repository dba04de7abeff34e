//! The store handle: a registry of resource groups sharing a clock and a backend.

use crate::backend::{Backend, MemoryBackend};
use crate::error::{Result, StoreError};
use crate::group::Group;
use crate::packing::Packer;
use infrasim_clock::{SharedClock, SystemClock};
use std::collections::HashMap;
use std::sync::{Arc, RwLock};

/// Tunables of every group in a store.
#[derive(Debug, Clone, Copy)]
pub struct StoreConfig {
    /// How many change events a group keeps for watch resumption and exact reads. A watch
    /// from an older resourceVersion gets `Expired` (HTTP 410).
    pub watch_window: usize,
    /// How many undelivered events a watcher may have queued before it is cut off.
    pub watcher_buffer: usize,
    /// Keep objects zstd-compressed against a dictionary per resource, learned from the
    /// first ones written (see `packing`): for a store of many look-alike clusters, where
    /// objects are the memory and are read rarely. Reads then restore the bytes.
    pub packed: bool,
    /// Keep only recent events, as kube-apiserver's watch cache sizes itself to its last
    /// 75 seconds: events older than `fresh.keep` leave a group's window while it holds more
    /// than `fresh.floor` (never more than `watch_window` either way). `None`: the window is
    /// `watch_window` events, however old.
    pub fresh: Option<FreshWindow>,
}

/// How long a group keeps its events (see [`StoreConfig::fresh`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FreshWindow {
    /// Events younger than this stay in the window.
    pub keep: std::time::Duration,
    /// A window of this many events or fewer keeps them, however old.
    pub floor: usize,
}

impl FreshWindow {
    /// kube-apiserver's figures: its watch cache keeps 75 s of events (`eventFreshDuration`,
    /// its bookmark period plus a margin, so a watcher's last bookmark is still in the
    /// window) and at least 100 (`defaultLowerBoundCapacity`, there per resource; a quiet
    /// resource's watchers are covered here by the per-resource eviction marks).
    pub const KUBE_APISERVER: FreshWindow = FreshWindow {
        keep: std::time::Duration::from_secs(75),
        floor: 100,
    };
}

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig {
            watch_window: 10_000,
            watcher_buffer: 4_096,
            packed: false,
            fresh: None,
        }
    }
}

/// A cheap, cloneable handle to the store.
#[derive(Debug, Clone)]
pub struct Store {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    // The lock is taken only to create, find or drop a group; never on a read or write
    // of objects, which lock their own group alone.
    groups: RwLock<HashMap<String, Arc<Group>>>,
    clock: SharedClock,
    backend: Arc<dyn Backend>,
    config: StoreConfig,
    /// The dictionaries every group's objects are packed with, when `config.packed`.
    packer: Option<Arc<Packer>>,
}

impl Store {
    /// A store over `backend`, reading time from `clock`.
    pub fn new(config: StoreConfig, clock: SharedClock, backend: Arc<dyn Backend>) -> Self {
        Store {
            inner: Arc::new(Inner {
                groups: RwLock::new(HashMap::new()),
                clock,
                backend,
                config,
                packer: config.packed.then(Default::default),
            }),
        }
    }

    /// A store over `backend` holding the groups it kept from an earlier run.
    pub fn open(
        config: StoreConfig,
        clock: SharedClock,
        backend: Arc<dyn Backend>,
    ) -> Result<Self> {
        let store = Store::new(config, clock, backend);
        let images = store.inner.backend.restore()?;
        let mut groups = store
            .inner
            .groups
            .write()
            .unwrap_or_else(|p| p.into_inner());
        for image in images {
            let name = image.name.clone();
            let group = Group::restored(
                image,
                store.inner.clock.clone(),
                store.inner.backend.clone(),
                store.inner.config,
                store.inner.packer.clone(),
            );
            groups.insert(name, group);
        }
        drop(groups);
        Ok(store)
    }

    /// An in-memory store on the system clock.
    pub fn in_memory(config: StoreConfig) -> Self {
        Store::new(config, SystemClock::shared(), Arc::new(MemoryBackend))
    }

    /// The clock the store stamps objects with.
    pub fn clock(&self) -> &SharedClock {
        &self.inner.clock
    }

    /// Creates a new, empty group.
    pub fn create_group(&self, name: &str) -> Result<Arc<Group>> {
        let mut groups = self.inner.groups.write().unwrap_or_else(|p| p.into_inner());
        if groups.contains_key(name) {
            return Err(StoreError::GroupExists(name.to_string()));
        }
        let group = self.new_group(name);
        groups.insert(name.to_string(), group.clone());
        Ok(group)
    }

    fn new_group(&self, name: &str) -> Arc<Group> {
        Group::new(
            name,
            self.inner.clock.clone(),
            self.inner.backend.clone(),
            self.inner.config,
            self.inner.packer.clone(),
        )
    }

    /// The group called `name`, made empty if there is none (a restored store has it).
    pub fn group_or_create(&self, name: &str) -> Arc<Group> {
        let mut groups = self.inner.groups.write().unwrap_or_else(|p| p.into_inner());
        groups
            .entry(name.to_string())
            .or_insert_with(|| self.new_group(name))
            .clone()
    }

    /// The group called `name`.
    pub fn group(&self, name: &str) -> Option<Arc<Group>> {
        self.inner
            .groups
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(name)
            .cloned()
    }

    /// Whether the store's backend keeps what is written beyond the process.
    pub fn keeps(&self) -> bool {
        self.inner.backend.keeps()
    }

    /// Drops a group and everything in it. Its watchers see their stream close once the last
    /// handle to the group is gone.
    pub fn drop_group(&self, name: &str) -> Result<()> {
        let removed = self
            .inner
            .groups
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .remove(name);
        match removed {
            Some(_) => self.inner.backend.drop_group(name),
            None => Err(StoreError::GroupNotFound(name.to_string())),
        }
    }

    /// The names of all groups.
    pub fn group_names(&self) -> Vec<String> {
        self.inner
            .groups
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .keys()
            .cloned()
            .collect()
    }
}
