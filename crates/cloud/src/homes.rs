//! Where a cluster's objects and records live: its home. A cloud has a home of its own (in
//! memory, or the durable store `--data-dir` opens) and, in a process hosting a shard of a
//! fleet over several processes, one more per shard it holds: a durable store in a directory
//! of its own under [`CloudConfig::homes`](crate::CloudConfig::homes), which every process
//! of the fleet reaches (shared storage). Whoever holds a shard opens its home and brings its
//! clusters back as they were; whoever gives a shard up sets its home down, stopping its
//! clusters without forgetting anything, and lets go of the directory for the next holder.
//! A process that dies lets go of it with its life (the directory lock is the kernel's).
//!
//! Why a store per shard and not one per process: a dead process's shards may be taken by
//! different survivors, and a store is opened by one process at a time.

use crate::records::Records;
use crate::{Cloud, CloudError};
use futures::future::BoxFuture;
use infrasim_durable::DurableBackend;
use infrasim_store::Store;
use std::sync::Arc;

/// Which clusters (by name) a home takes.
pub type Admits = Box<dyn Fn(&str) -> bool + Send + Sync>;

/// An [`Admits`] kept by the cloud, shared by a home and the record of its setting down.
pub(crate) type SharedAdmits = Arc<dyn Fn(&str) -> bool + Send + Sync>;

/// A store of clusters and their records.
pub(crate) struct Home {
    /// `None` for the cloud's own home.
    pub name: Option<String>,
    pub store: Store,
    pub records: Records,
    /// Which clusters made from now on go here (the cloud's own takes the rest).
    admits: Option<SharedAdmits>,
    /// Closed when the home is set down, so the next holder can open it at once.
    backend: Option<Arc<DurableBackend>>,
}

impl Home {
    /// The cloud's own home, over `store`.
    pub fn own(store: Store) -> Self {
        Home {
            name: None,
            records: Records::open(&store),
            store,
            admits: None,
            backend: None,
        }
    }

    fn admits(&self, cluster: &str) -> bool {
        self.admits.as_ref().is_some_and(|a| a(cluster))
    }
}

impl Cloud {
    /// The home a cluster of this name is made in: the first home taken up that admits it,
    /// else the cloud's own. Refused when a home set down here admits it and none taken up
    /// does: its shard is another process's now (a reconcile still running when the shard
    /// went must not make the cluster here, where the next holder would never see it).
    pub(crate) fn home_for(&self, cluster: &str) -> Result<Arc<Home>, CloudError> {
        if let Some(home) = self.lock_homes().iter().find(|h| h.admits(cluster)) {
            return Ok(home.clone());
        }
        let closed = self.lock_set_down();
        if let Some((name, _)) = closed.iter().find(|(_, admits)| admits(cluster)) {
            return Err(CloudError::Home {
                home: name.clone(),
                why: format!("it is set down here, and cluster {cluster:?} belongs to it"),
            });
        }
        Ok(self.own.clone())
    }

    fn lock_set_down(&self) -> std::sync::MutexGuard<'_, Vec<(String, SharedAdmits)>> {
        self.set_down.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn lock_homes(&self) -> std::sync::MutexGuard<'_, Vec<Arc<Home>>> {
        self.homes.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Takes up home `name` (a directory under [`CloudConfig::homes`](crate::CloudConfig))
    /// for the clusters `admits` names: opens its store (made if new) and brings back the
    /// clusters it keeps, each on its recorded port if this cloud can serve it, else on a
    /// free one (a home taken over from a process on another range or machine). Answers how
    /// many came back; `None` when this cloud keeps no homes (its clusters are then made in
    /// its own). A home whose directory another process holds is refused
    /// ([`CloudError::Home`]): it is being set down there, or that process is alive.
    // Boxed: callers in other crates link this state machine instead of compiling it
    // again (docs/contributing.md: "A public async function another crate awaits").
    #[inline(never)]
    pub fn take_up_home<'a>(
        &'a self,
        name: &'a str,
        admits: Admits,
    ) -> BoxFuture<'a, Result<Option<usize>, CloudError>> {
        Box::pin(self.take_up_home_inner(name, admits))
    }

    async fn take_up_home_inner(
        &self,
        name: &str,
        admits: Admits,
    ) -> Result<Option<usize>, CloudError> {
        let Some(root) = &self.config.homes else {
            return Ok(None);
        };
        if self
            .lock_homes()
            .iter()
            .any(|h| h.name.as_deref() == Some(name))
        {
            return Err(CloudError::Home {
                home: name.to_string(),
                why: "it is taken up already".into(),
            });
        }
        let refused = |why: String| CloudError::Home {
            home: name.to_string(),
            why,
        };
        let dir = root.join(name);
        let backend = DurableBackend::open(&dir, self.config.watch_window)
            .map_err(|e| refused(e.to_string()))?;
        let backend = Arc::new(backend);
        let store = Store::open(
            self.config.store_config(),
            self.clock.clone(),
            backend.clone(),
        )
        .map_err(|e| refused(e.to_string()))?;
        self.lock_set_down().retain(|(n, _)| n != name);
        let home = Arc::new(Home {
            name: Some(name.to_string()),
            records: Records::open(&store),
            store,
            admits: Some(Arc::from(admits)),
            backend: Some(backend),
        });
        self.lock_homes().push(home.clone());
        match self.restore_home(&home).await {
            Ok(count) => Ok(Some(count)),
            Err(e) => {
                // Half taken up is not taken up: what came back stops, the rest is left as
                // it was found for the next attempt.
                self.set_down_home(name);
                Err(e)
            }
        }
    }

    /// Sets home `name` down: its clusters stop where they stand (endpoints closed, machines
    /// and controllers stopped; their objects and records untouched) and its store is closed,
    /// letting go of its directory. `false` if no such home was taken up.
    pub fn set_down_home(&self, name: &str) -> bool {
        let home = {
            let mut homes = self.lock_homes();
            let Some(at) = homes.iter().position(|h| h.name.as_deref() == Some(name)) else {
                return false;
            };
            homes.remove(at)
        };
        let stopped: Vec<crate::Running> = {
            let mut clusters = self.lock_clusters();
            let names: Vec<String> = clusters
                .iter()
                .filter(|(_, r)| Arc::ptr_eq(&r.home, &home))
                .map(|(n, _)| n.clone())
                .collect();
            names.iter().filter_map(|n| clusters.remove(n)).collect()
        };
        for running in stopped {
            running.runtime.halt();
            self.free_port(running.info.endpoint.port());
        }
        if let Some(backend) = &home.backend {
            backend.close();
        }
        // Kept to refuse clusters it admits from now on (see `home_for`); the store itself
        // may still be held by a stopped task, but never written again.
        if let Some(admits) = &home.admits {
            self.lock_set_down()
                .push((name.to_string(), admits.clone()));
        }
        tracing::info!(home = name, "home set down");
        true
    }

    /// The name of the home cluster `cluster` runs from; `None` for the cloud's own (or no
    /// such cluster).
    pub fn home_of(&self, cluster: &str) -> Option<String> {
        self.with_cluster(cluster, |r| r.home.name.clone())
            .flatten()
    }
}
