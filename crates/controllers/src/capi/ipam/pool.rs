//! The pool reconciler, for both pool kinds, as upstream's: `status.ipAddresses` counts the
//! pool's usable addresses (`total`), those handed out (`used`), those left (`free`) and
//! those handed out that the pool no longer lists (`outOfRange`); `ProtectPool` holds a
//! deleted pool until none of its addresses is left. An address made or released wakes its
//! pool.

use super::ipset::{self, IpSet};
use super::types::{AddressCounts, Problem, GROUP};
use super::{addresses_of, Error, Ipam, Pool, PoolKey};
use crate::capi::core::IPAddress;
use infrasim_controller_runtime::informers::Informers;
use infrasim_controller_runtime::reconcile::{Cleanup, Next, Reconcile};
use infrasim_controller_runtime::Controller;
use kube::runtime::reflector::ObjectRef;
use kube::ResourceExt;
use serde_json::json;
use std::sync::Arc;

/// Upstream's finalizer on a pool.
pub const FINALIZER: &str = "ipam.cluster.x-k8s.io/ProtectPool";

const MANAGER: &str = "infrasim-ipam/pool";

/// The controller of pools of kind `P`, woken by the addresses made from them.
pub(super) fn controller<P: Pool>(informers: &Informers) -> Controller<P> {
    let of_address = |a: Arc<IPAddress>| {
        let r = &a.spec.pool_ref;
        if r.api_group != GROUP || r.kind != P::KIND {
            return None;
        }
        let ns = a.namespace().unwrap_or_default();
        Some(match P::KIND {
            "GlobalInClusterIPPool" => ObjectRef::new(&r.name),
            _ => ObjectRef::new(&r.name).within(&ns),
        })
    };
    infrasim_controller_runtime::triggers::controller(&informers.of::<P>(), None)
        .watches_shared_stream(
            infrasim_controller_runtime::triggers::every_change(&informers.of::<IPAddress>()),
            of_address,
        )
}

impl<P: Pool> Reconcile<P> for Ipam {
    type Error = Error;
    const FINALIZER: Option<&'static str> = Some(FINALIZER);

    async fn apply(&self, pool: Arc<P>) -> Result<Next, Error> {
        let key = pool.key();
        let problems = pool.spec_of().problems();
        if !problems.is_empty() {
            let why = problems
                .iter()
                .map(Problem::to_string)
                .collect::<Vec<_>>()
                .join("; ");
            self.ctx
                .event(&*pool, true, "InvalidPool", why.clone())
                .await;
            return Err(Error::Reported(format!("{key}: {why}")));
        }
        let used = addresses_of(&self.informers, &key);
        let counts = count(pool.spec_of().usable().unwrap_or_default(), &used);
        if pool.meta().deletion_timestamp.is_none() {
            write_counts(self, &*pool, &key, counts).await?;
        }
        Ok(Next::AwaitChange)
    }

    /// Done once no address of the pool is left.
    async fn cleanup(&self, pool: Arc<P>) -> Result<Cleanup, Error> {
        match addresses_of(&self.informers, &pool.key()).is_empty() {
            true => Ok(Cleanup::Done),
            false => Ok(Cleanup::Pending(Next::AwaitChange)),
        }
    }
}

/// The counts of a pool whose usable addresses are `usable`, with `used` handed out.
fn count(usable: IpSet, used: &[Arc<IPAddress>]) -> AddressCounts {
    let mut outside = IpSet::default();
    for a in used {
        if let Ok(addr) = ipset::parse_ip(&a.spec.address) {
            if !usable.contains(addr) {
                outside.add(addr, addr);
            }
        }
    }
    let total = usable.count();
    AddressCounts {
        total,
        used: used.len(),
        free: total.saturating_sub(used.len()),
        out_of_range: outside.count(),
    }
}

async fn write_counts<P: Pool>(
    r: &Ipam,
    pool: &P,
    key: &PoolKey,
    counts: AddressCounts,
) -> Result<(), Error> {
    if pool.counts() == Some(&counts) {
        return Ok(());
    }
    use infrasim_controller_runtime::informers::Scoped;
    let api: kube::Api<P> = P::Scope::api(r.ctx.client.clone(), key.namespace.as_deref());
    let name = pool.name_any();
    let body = json!({
        "apiVersion": P::api_version(&()),
        "kind": P::KIND,
        "metadata": {"name": name},
        "status": {"ipAddresses": counts},
    });
    infrasim_controller_runtime::writes::apply_status(&api, &name, MANAGER, &body).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capi::core::{AddressRef, IPAddressSpec, IPPoolReference};

    fn address(ip: &str) -> Arc<IPAddress> {
        Arc::new(IPAddress::new(
            ip,
            IPAddressSpec {
                claim_ref: AddressRef { name: ip.into() },
                pool_ref: IPPoolReference::default(),
                address: ip.into(),
                prefix: 24,
                gateway: None,
            },
        ))
    }

    #[test]
    fn counts_say_what_is_free_and_what_fell_out_of_the_pool() {
        let usable = IpSet::of_entry("10.0.0.10-10.0.0.14").unwrap();
        let counts = count(usable, &[address("10.0.0.10"), address("10.0.0.99")]);
        assert_eq!(
            counts,
            AddressCounts {
                total: 5,
                used: 2,
                free: 3,
                out_of_range: 1
            }
        );
    }
}
