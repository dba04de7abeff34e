//! The IPAM webhooks: Cluster API's on `IPAddress`
//! (`validation.ipaddress.ipam.cluster.x-k8s.io`: an address names its claim's pool), and the
//! in-cluster IPAM provider's on its pools (`validation.inclusterippool.ipam.cluster.x-k8s.io`
//! and the global pool's): a spec the provider cannot use is refused, as is an update that
//! leaves an address handed out outside the pool, and the deletion of a pool with addresses
//! still out (unless it carries `ipam.cluster.x-k8s.io/skip-validate-delete-webhook`). The
//! checks a schema can make (addresses that are IPs, prefixes, immutable specs) are the CRDs'.

use super::field::FieldError;
use super::review::{Operation, Review, Verdict};
use crate::capi::core::{IPAddress, IPAddressClaim};
use crate::capi::ipam::types::{InClusterIPPoolSpec, GROUP};
use crate::capi::ipam::PoolKey;
use kube::api::Api;
use serde_json::{json, Value};

/// Lets a pool with addresses out be deleted all the same, as upstream's webhook allows.
pub const SKIP_DELETE_CHECK: &str = "ipam.cluster.x-k8s.io/skip-validate-delete-webhook";

/// `validation.ipaddress.ipam.cluster.x-k8s.io`: an address's pool is its claim's (when the
/// claim exists).
pub async fn validate_address(client: &kube::Client, review: &Review) -> Verdict {
    if review.operation != Operation::Create {
        return Verdict::allowed();
    }
    let Ok(address) = serde_json::from_value::<IPAddress>(review.object.clone()) else {
        // The schema refuses what does not parse; nothing here to add.
        return Verdict::allowed();
    };
    let claims: Api<IPAddressClaim> = Api::namespaced(client.clone(), &review.namespace);
    let mut errors = Vec::new();
    match claims.get_opt(&address.spec.claim_ref.name).await {
        Ok(Some(claim)) if claim.spec.pool_ref != address.spec.pool_ref => {
            errors.push(FieldError::invalid(
                "spec.poolRef",
                json!(address.spec.pool_ref),
                "the referenced pool is different from the pool referenced by the claim this address should fulfill",
            ))
        }
        Ok(_) => {}
        Err(e) => errors.push(FieldError::internal(
            "spec.claimRef",
            format!("failed to fetch claim: {e}"),
        )),
    }
    Verdict::of("ipam.cluster.x-k8s.io", "IPAddress", errors)
}

/// The pools' webhook (`kind` InClusterIPPool or GlobalInClusterIPPool).
pub async fn validate_pool(client: &kube::Client, kind: &'static str, review: &Review) -> Verdict {
    let spec = |o: &Value| serde_json::from_value::<InClusterIPPoolSpec>(o["spec"].clone());
    let key = PoolKey {
        kind,
        namespace: (kind == "InClusterIPPool").then(|| review.namespace.clone()),
        name: review.object_name(),
    };
    match review.operation {
        Operation::Delete => {
            let skipped = review
                .object
                .pointer("/metadata/annotations")
                .and_then(|a| a.get(SKIP_DELETE_CHECK));
            if skipped.is_some() {
                return Verdict::allowed();
            }
            match crate::capi::ipam::addresses_in_use(client, &key).await {
                Ok(used) if used.is_empty() => Verdict::allowed(),
                Ok(_) => bad_request("Pool has IPAddresses allocated. Cannot delete Pool until all IPAddresses have been removed."),
                Err(e) => internal(e),
            }
        }
        Operation::Create | Operation::Update => {
            let Ok(new) = spec(&review.object) else {
                return Verdict::allowed();
            };
            let errors: Vec<FieldError> = new
                .problems()
                .into_iter()
                .map(|p| FieldError::invalid(p.field, p.value, p.detail))
                .collect();
            if !errors.is_empty() || review.operation == Operation::Create {
                return Verdict::of(GROUP, kind, errors);
            }
            let used = match crate::capi::ipam::addresses_in_use(client, &key).await {
                Ok(used) => used,
                Err(e) => return internal(e),
            };
            let mut outside = used;
            outside.remove_set(&new.usable().unwrap_or_default());
            match outside.is_empty() {
                true => Verdict::allowed(),
                false => bad_request(format!(
                    "pool addresses do not contain allocated addresses: [{}]",
                    outside.ranges().join(" ")
                )),
            }
        }
        Operation::Connect => Verdict::allowed(),
    }
}

/// A refusal as apimachinery's `NewBadRequest`.
fn bad_request(message: impl Into<String>) -> Verdict {
    Verdict::Denied {
        code: 400,
        message: message.into(),
    }
}

fn internal(e: kube::Error) -> Verdict {
    Verdict::Denied {
        code: 500,
        message: e.to_string(),
    }
}
