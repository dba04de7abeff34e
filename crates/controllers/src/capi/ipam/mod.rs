//! A stand-in for Cluster API's in-cluster IPAM provider
//! (`cluster-api-ipam-provider-in-cluster`), so a template whose machines take their
//! addresses from a pool (CAPV's `addressesFromPools`, Cluster API's IPAM contract) works
//! with `infrasim` alone: an `IPAddressClaim` that names an `InClusterIPPool` (in its
//! namespace) or a `GlobalInClusterIPPool` gets the pool's lowest free address as an
//! `IPAddress` named after it, and `status.addressRef` names that; a pool reports how many
//! addresses it has, uses and has free. Claims naming other providers' pools are left to
//! them.
//!
//! Finalizers as upstream's: `ReleaseAddress` on a claim (its address goes before it does,
//! after the pool's `addressReuseGracePeriodSeconds`), `ProtectAddress` on an address (it
//! goes only with its claim), `ProtectPool` on a pool (it goes only once no address of it
//! is left). Pool specs are checked at the door by the provider's webhook (see
//! `capi::admission::ipam`); a pool stored without it that it would have refused gets a
//! Warning event and hands nothing out (see [`types::InClusterIPPoolSpec::problems`]).
//!
//! It runs with the embedded Cluster API core; where real Cluster API manages the plane
//! (`--capi-core=external`), so does a real IPAM provider. Each reconciler writes under a
//! field manager of its own, `infrasim-ipam/<its file>`.

mod claim;
pub mod ipset;
mod pool;
pub mod types;

use crate::capi::core::{IPAddress, IPPoolReference};
use infrasim_controller_runtime::context::Context;
use infrasim_controller_runtime::informers::Informers;
use kube::ResourceExt;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use types::{GlobalInClusterIPPool, InClusterIPPool, InClusterIPPoolSpec, GROUP};

/// Why a reconcile failed (it is retried with backoff).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Kube(#[from] kube::Error),
    /// Said in an event already; failed so the runner backs off.
    #[error("{0}")]
    Reported(String),
}

/// What the IPAM reconcilers share.
pub struct Ipam {
    pub ctx: Context,
    pub informers: Arc<Informers>,
    /// One lock per pool: two claims of one pool are never given addresses at once, or both
    /// could be given the same one (upstream gets the same from a claim controller that
    /// reconciles one claim at a time).
    locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

impl Ipam {
    fn lock_of(&self, pool: &PoolKey) -> Arc<tokio::sync::Mutex<()>> {
        let mut locks = self.locks.lock().unwrap_or_else(|p| p.into_inner());
        locks.entry(pool.to_string()).or_default().clone()
    }
}

/// Runs the in-cluster IPAM provider's controllers until the process ends.
pub async fn run(ctx: Context, informers: Arc<Informers>) {
    let r = Arc::new(Ipam {
        ctx: ctx.clone(),
        informers: informers.clone(),
        locks: Mutex::default(),
    });
    futures::join!(
        infrasim_controller_runtime::reconcile::run(
            &ctx,
            pool::controller::<InClusterIPPool>(&informers),
            r.clone()
        ),
        infrasim_controller_runtime::reconcile::run(
            &ctx,
            pool::controller::<GlobalInClusterIPPool>(&informers),
            r.clone()
        ),
        infrasim_controller_runtime::reconcile::run(&ctx, claim::controller(&informers), r.clone()),
    );
}

/// One of the provider's pools: the kind, and (for an `InClusterIPPool`) its namespace.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PoolKey {
    pub kind: &'static str,
    /// `None` for a global pool.
    pub namespace: Option<String>,
    pub name: String,
}

impl std::fmt::Display for PoolKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{} {ns}/{}", self.kind, self.name),
            None => write!(f, "{} {}", self.kind, self.name),
        }
    }
}

impl PoolKey {
    /// The pool a reference names, seen from `namespace`, if it is one of this provider's.
    pub fn of_ref(r: &IPPoolReference, namespace: &str) -> Option<PoolKey> {
        if r.api_group != GROUP {
            return None;
        }
        let (kind, namespace) = match r.kind.as_str() {
            "InClusterIPPool" => ("InClusterIPPool", Some(namespace.to_string())),
            "GlobalInClusterIPPool" => ("GlobalInClusterIPPool", None),
            _ => return None,
        };
        Some(PoolKey {
            kind,
            namespace,
            name: r.name.clone(),
        })
    }

    /// Whether `address` came from this pool.
    pub fn holds(&self, address: &IPAddress) -> bool {
        let ns = address.namespace().unwrap_or_default();
        PoolKey::of_ref(&address.spec.pool_ref, &ns).as_ref() == Some(self)
    }
}

/// What the pool reconcilers and the claims need of either pool kind.
pub trait Pool: infrasim_controller_runtime::informers::Watched {
    const KIND: &'static str;
    fn spec_of(&self) -> &InClusterIPPoolSpec;
    fn key(&self) -> PoolKey;
    /// The counts its status has now.
    fn counts(&self) -> Option<&types::AddressCounts>;
}

impl Pool for InClusterIPPool {
    const KIND: &'static str = "InClusterIPPool";
    fn spec_of(&self) -> &InClusterIPPoolSpec {
        &self.spec
    }
    fn counts(&self) -> Option<&types::AddressCounts> {
        self.status.as_ref()?.addresses.as_ref()
    }
    fn key(&self) -> PoolKey {
        PoolKey {
            kind: Self::KIND,
            namespace: Some(self.namespace().unwrap_or_default()),
            name: self.name_any(),
        }
    }
}

impl Pool for GlobalInClusterIPPool {
    const KIND: &'static str = "GlobalInClusterIPPool";
    fn spec_of(&self) -> &InClusterIPPoolSpec {
        &self.spec.spec
    }
    fn counts(&self) -> Option<&types::AddressCounts> {
        self.status.as_ref()?.addresses.as_ref()
    }
    fn key(&self) -> PoolKey {
        PoolKey {
            kind: Self::KIND,
            namespace: None,
            name: self.name_any(),
        }
    }
}

/// What a claim reads of its pool, of either kind.
pub(crate) struct PoolState {
    pub spec: InClusterIPPoolSpec,
    pub uid: String,
    /// Cluster API's paused annotation: its claims are left alone.
    pub paused: bool,
    pub deleting: bool,
}

impl PoolState {
    fn of<P: Pool>(pool: &P) -> PoolState {
        let meta = pool.meta();
        PoolState {
            spec: pool.spec_of().clone(),
            uid: meta.uid.clone().unwrap_or_default(),
            paused: meta
                .annotations
                .as_ref()
                .is_some_and(|a| a.contains_key(crate::capi::PAUSED_ANNOTATION)),
            deleting: meta.deletion_timestamp.is_some(),
        }
    }
}

impl Ipam {
    /// The pool `key` names, from the cache, if it exists.
    async fn pool(&self, key: &PoolKey) -> Result<Option<PoolState>, kube::Error> {
        Ok(match &key.namespace {
            Some(ns) => self
                .informers
                .get::<InClusterIPPool>(ns, &key.name)
                .await?
                .map(|p| PoolState::of(&*p)),
            None => self
                .informers
                .get::<GlobalInClusterIPPool>("", &key.name)
                .await?
                .map(|p| PoolState::of(&*p)),
        })
    }
}

/// The addresses handed out from the pool `key`, read from the server (not a cache): what
/// decides a new address, under the pool's lock, and what the pool's webhook checks.
pub(crate) async fn addresses_in_use(
    client: &kube::Client,
    key: &PoolKey,
) -> Result<ipset::IpSet, kube::Error> {
    let api: kube::Api<IPAddress> = match &key.namespace {
        Some(ns) => kube::Api::namespaced(client.clone(), ns),
        None => kube::Api::all(client.clone()),
    };
    let mut used = ipset::IpSet::default();
    for a in api.list(&Default::default()).await?.items {
        if let (true, Ok(addr)) = (key.holds(&a), ipset::parse_ip(&a.spec.address)) {
            used.add(addr, addr);
        }
    }
    Ok(used)
}

/// The addresses handed out from `pool`, from the cache (see [`addresses_in_use`] for the
/// read that decides a new address).
fn addresses_of(informers: &Informers, pool: &PoolKey) -> Vec<Arc<IPAddress>> {
    informers
        .of::<IPAddress>()
        .store()
        .state()
        .into_iter()
        .filter(|a| pool.holds(a))
        .collect()
}
