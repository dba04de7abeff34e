//! The claim reconciler, as upstream's: a claim that names one of this provider's pools (and
//! whose Cluster, if it names one, exists and is not paused) gets the `ReleaseAddress`
//! finalizer, then the pool's lowest free address as an `IPAddress` named after it (owned
//! by the claim as controller and by the pool, with `ProtectAddress` and the claim's
//! cluster-name label), and `status.addressRef`. A pool with no free address leaves the
//! claim waiting, with a Warning event; the pool's next change (an address released, the
//! spec widened) wakes it. A deleted claim's address is released once the pool's grace
//! period has passed since the claim's deletion.

use super::types::{GlobalInClusterIPPool, InClusterIPPool, GROUP};
use super::{Error, Ipam, PoolKey, PoolState};
use crate::capi::core::{Cluster, IPAddress, IPAddressClaim};
use crate::capi::standin::objects::owner_ref;
use infrasim_controller_runtime::conditions;
use infrasim_controller_runtime::finalizers;
use infrasim_controller_runtime::informers::Informers;
use infrasim_controller_runtime::reconcile::{Cleanup, Next, Reconcile};
use infrasim_controller_runtime::triggers::{controller_where, filtered, hash};
use infrasim_controller_runtime::Controller;
use kube::api::{Api, DeleteParams, PostParams};
use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

/// Upstream's finalizer on a claim: its address is released before it goes.
pub const RELEASE_FINALIZER: &str = "ipam.cluster.x-k8s.io/ReleaseAddress";

/// Upstream's finalizer on an address: it goes only with its claim.
pub const PROTECT_FINALIZER: &str = "ipam.cluster.x-k8s.io/ProtectAddress";

const MANAGER: &str = "infrasim-ipam/claim";

/// Whether `claim` names one of this provider's pools.
fn ours(claim: &IPAddressClaim) -> bool {
    PoolKey::of_ref(&claim.spec.pool_ref, "").is_some()
}

/// The claim controller: its claims, woken by their pools' changes (a pool created, widened,
/// or an address of it released) and by their Cluster's pause.
pub(super) fn controller(informers: &Informers) -> Controller<IPAddressClaim> {
    let claims = informers.of::<IPAddressClaim>();
    let (by_pool, by_global_pool, by_cluster) = (claims.store(), claims.store(), claims.store());
    let waiting_on = move |store: &kube::runtime::reflector::Store<IPAddressClaim>,
                           pool: PoolKey| {
        store
            .state()
            .iter()
            .filter(|c| ours(c) && c.bound_address().is_none())
            .filter(|c| {
                PoolKey::of_ref(&c.spec.pool_ref, &c.namespace().unwrap_or_default()).as_ref()
                    == Some(&pool)
            })
            .map(|c| ObjectRef::from_obj(&**c))
            .collect::<Vec<_>>()
    };
    let pools = move |p: Arc<InClusterIPPool>| waiting_on(&by_pool, super::Pool::key(&*p));
    let global_pools =
        move |p: Arc<GlobalInClusterIPPool>| waiting_on(&by_global_pool, super::Pool::key(&*p));
    let clusters = move |c: Arc<Cluster>| {
        let (ns, name) = (c.namespace().unwrap_or_default(), c.name_any());
        by_cluster
            .state()
            .iter()
            .filter(|claim| ours(claim) && claim.namespace().as_deref() == Some(ns.as_str()))
            .filter(|claim| cluster_of(claim).as_deref() == Some(name.as_str()))
            .map(|claim| ObjectRef::from_obj(&**claim))
            .collect::<Vec<_>>()
    };
    controller_where(&claims, ours)
        .watches_shared_stream(
            infrasim_controller_runtime::triggers::every_change(&informers.of::<InClusterIPPool>()),
            pools,
        )
        .watches_shared_stream(
            infrasim_controller_runtime::triggers::every_change(
                &informers.of::<GlobalInClusterIPPool>(),
            ),
            global_pools,
        )
        .watches_shared_stream(
            filtered(&informers.of::<Cluster>(), cluster_paused),
            clusters,
        )
}

/// What of a Cluster a claim waits on: its pause.
fn cluster_paused(c: &Cluster) -> Option<u64> {
    hash((c.uid(), c.paused()))
}

/// The Cluster a claim is for: `spec.clusterName`, else Cluster API's cluster-name label.
fn cluster_of(claim: &IPAddressClaim) -> Option<String> {
    claim
        .spec
        .cluster_name
        .clone()
        .filter(|n| !n.is_empty())
        .or_else(|| claim.labels().get(crate::capi::CLUSTER_NAME_LABEL).cloned())
}

impl Reconcile<IPAddressClaim> for Ipam {
    type Error = Error;
    // The finalizer is added here, once the claim is known to name one of this provider's
    // pools and its Cluster is not paused, as upstream adds it.

    async fn apply(&self, claim: Arc<IPAddressClaim>) -> Result<Next, Error> {
        let ns = claim.namespace().unwrap_or_default();
        let Some(key) = PoolKey::of_ref(&claim.spec.pool_ref, &ns) else {
            return Ok(Next::AwaitChange);
        };
        if let Some(cluster) = cluster_of(&claim) {
            // A Cluster that is missing (not yet made, or gone) or paused leaves the claim
            // alone; its arrival or unpausing wakes it.
            match self.informers.get::<Cluster>(&ns, &cluster).await? {
                Some(c) if !c.paused() => {}
                _ => return Ok(Next::AwaitChange),
            }
        }
        if finalizers::ensure(&self.ctx.client, &*claim, RELEASE_FINALIZER).await? {
            return Ok(Next::AwaitChange);
        }
        let Some(pool) = self.pool(&key).await?.filter(|p| !p.paused) else {
            return Ok(Next::AwaitChange);
        };
        let lock = self.lock_of(&key);
        let _held = lock.lock().await;
        let address = match self.address_of(&claim, &key).await? {
            Some(a) => a,
            None => match self.hand_out(&claim, &key, &pool).await? {
                Some(a) => a,
                None => {
                    let why = format!("failed to find free address in {key}: no address available");
                    self.ctx
                        .event(&*claim, true, "PoolExhausted", why.clone())
                        .await;
                    return Err(Error::Reported(why));
                }
            },
        };
        if claim.bound_address() != Some(address.name_any().as_str()) {
            let api: Api<IPAddressClaim> = Api::namespaced(self.ctx.client.clone(), &ns);
            let body = json!({
                "apiVersion": IPAddressClaim::api_version(&()),
                "kind": "IPAddressClaim",
                "metadata": {"name": claim.name_any()},
                "status": {"addressRef": {"name": address.name_any()}},
            });
            let name = claim.name_any();
            infrasim_controller_runtime::writes::apply_status(&api, &name, MANAGER, &body).await?;
        }
        Ok(Next::AwaitChange)
    }

    /// Releases the claim's address (after the pool's grace period), then lets it go.
    async fn cleanup(&self, claim: Arc<IPAddressClaim>) -> Result<Cleanup, Error> {
        if !claim.finalizers().iter().any(|f| f == RELEASE_FINALIZER) {
            return Ok(Cleanup::Done);
        }
        let ns = claim.namespace().unwrap_or_default();
        if let Some(key) = PoolKey::of_ref(&claim.spec.pool_ref, &ns) {
            let pool = self.pool(&key).await?;
            if let Some(wait) = self.grace_left(&claim, pool.as_ref()) {
                return Ok(Cleanup::Pending(Next::After(wait)));
            }
        }
        let api: Api<IPAddress> = Api::namespaced(self.ctx.client.clone(), &ns);
        if let Some(address) = api.get_opt(&claim.name_any()).await? {
            finalizers::remove(&self.ctx.client, &address, PROTECT_FINALIZER).await?;
            match api
                .delete(&address.name_any(), &DeleteParams::default())
                .await
            {
                Ok(_) => {}
                Err(kube::Error::Api(e)) if e.code == 404 => {}
                Err(e) => return Err(e.into()),
            }
        }
        finalizers::remove(&self.ctx.client, &*claim, RELEASE_FINALIZER).await?;
        Ok(Cleanup::Done)
    }
}

impl Ipam {
    /// The address already made for `claim` (named after it), if any.
    async fn address_of(
        &self,
        claim: &IPAddressClaim,
        key: &PoolKey,
    ) -> Result<Option<Arc<IPAddress>>, Error> {
        let ns = claim.namespace().unwrap_or_default();
        let found = self
            .informers
            .get::<IPAddress>(&ns, &claim.name_any())
            .await?;
        Ok(found.filter(|a| key.holds(a)))
    }

    /// Makes the claim's address from the pool's lowest free one; `None` when none is free.
    /// Which addresses are taken is read from the server, not the cache: under the pool's
    /// lock, the address made for the previous claim must count.
    async fn hand_out(
        &self,
        claim: &IPAddressClaim,
        key: &PoolKey,
        pool: &PoolState,
    ) -> Result<Option<Arc<IPAddress>>, Error> {
        let spec = &pool.spec;
        let taken = super::addresses_in_use(&self.ctx.client, key).await?;
        let usable = spec.usable().map_err(Error::Reported)?;
        let Some(free) = usable.first_free(&taken) else {
            return Ok(None);
        };
        let ns = claim.namespace().unwrap_or_default();
        let pool_owner = json!({
            "apiVersion": format!("{GROUP}/v1alpha2"), "kind": key.kind, "name": key.name,
            "uid": pool.uid, "controller": false, "blockOwnerDeletion": true,
        });
        let mut labels = serde_json::Map::new();
        if let Some(c) = claim.labels().get(crate::capi::CLUSTER_NAME_LABEL) {
            labels.insert(crate::capi::CLUSTER_NAME_LABEL.into(), json!(c));
        }
        let address: IPAddress = serde_json::from_value(json!({
            "apiVersion": IPAddress::api_version(&()),
            "kind": "IPAddress",
            "metadata": {
                "name": claim.name_any(),
                "namespace": ns,
                "labels": labels,
                "finalizers": [PROTECT_FINALIZER],
                "ownerReferences": [owner_ref(claim, true), pool_owner],
            },
            "spec": {
                "claimRef": {"name": claim.name_any()},
                "poolRef": {"apiGroup": GROUP, "kind": key.kind, "name": key.name},
                "address": free.ip().to_string(),
                "prefix": spec.prefix,
                "gateway": spec.gateway.as_deref().filter(|g| !g.is_empty()),
            },
        }))
        .map_err(|e| Error::Reported(format!("building the IPAddress: {e}")))?;
        let api: Api<IPAddress> = Api::namespaced(self.ctx.client.clone(), &ns);
        match api.create(&PostParams::default(), &address).await {
            Ok(made) => Ok(Some(Arc::new(made))),
            // Made by an earlier run whose claim status write was lost: it is the claim's.
            Err(kube::Error::Api(e)) if e.code == 409 => {
                Ok(api.get_opt(&claim.name_any()).await?.map(Arc::new))
            }
            Err(e) => Err(e.into()),
        }
    }

    /// How much of the pool's `addressReuseGracePeriodSeconds` is left since the claim's
    /// deletion; `None` when it has passed, or the pool is gone or going (a cluster torn
    /// down releases at once, as upstream's).
    fn grace_left(&self, claim: &IPAddressClaim, pool: Option<&PoolState>) -> Option<Duration> {
        let grace = pool
            .filter(|p| !p.deleting)
            .and_then(|p| p.spec.address_reuse_grace_period_seconds)?;
        let deleted = claim.meta().deletion_timestamp.as_ref();
        let deleted = deleted.and_then(|t| conditions::parse_time(&t.0.to_string()))?;
        let until = deleted + chrono::Duration::seconds(grace.max(0).into());
        let left = until - self.ctx.now();
        left.to_std().ok().filter(|d| !d.is_zero())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capi::core::{IPAddressClaimSpec, IPPoolReference};

    fn claim(group: &str, kind: &str) -> IPAddressClaim {
        IPAddressClaim::new(
            "vm-0-0",
            IPAddressClaimSpec {
                cluster_name: None,
                pool_ref: IPPoolReference {
                    api_group: group.into(),
                    kind: kind.into(),
                    name: "pool".into(),
                },
            },
        )
    }

    #[test]
    fn only_claims_of_in_cluster_pools_are_taken() {
        assert!(ours(&claim(GROUP, "InClusterIPPool")));
        assert!(ours(&claim(GROUP, "GlobalInClusterIPPool")));
        assert!(!ours(&claim(GROUP, "InfobloxIPPool")));
        assert!(!ours(&claim("example.com", "InClusterIPPool")));
    }
}
