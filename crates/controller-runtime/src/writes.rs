//! Writes whose answer the controller does not read. `kube::Api`'s write methods decode the
//! answer into the kind, managedFields and all, and on the hottest path (a status apply per
//! reconcile) that decoding cost about as much as the write itself. These send the same
//! request through the same client and check the answer's status, nothing more.
//!
//! Field managers: every controller writes under one of its own, named
//! `<family's manager>/<controller>`: the controller's file (`infrasim-capi-core/machineset`,
//! `infrasim-vcsim-controller/envvar`, `infrasim-sip-controller/hosts`), or for a family
//! whose one reconciler is its `mod.rs`, its kind (`infrasim-vino-controller/vino`). The
//! name is a `const MANAGER` beside the reconciler, not an associated const of `Reconcile`:
//! the writes happen in a controller file's free functions, which reach a module's const
//! without naming the reconciler's type (one vcsim `Reconciler` serves six kinds), and the
//! runner itself writes nothing under a manager. So an object's managedFields say which
//! controller wrote what, and a controller that stops setting a field removes only its own.
//! Controllers that write the same fields of one object share a manager instead, with the
//! reason beside it (`capi::standin::remediation::OWNER_MANAGER`): a forced apply by one
//! would take the fields over, and the other could no longer remove them by leaving them out.

use kube::api::{Api, Patch, PatchParams};
use kube::core::Request;
use kube::Resource;
use serde::Serialize;

/// Server-side applies `body` (apiVersion, kind, metadata.name and the fields `manager`
/// owns) as `manager`, taking over conflicting fields; an object already so is left as it is
/// by the server.
pub async fn apply<K>(
    api: &Api<K>,
    name: &str,
    manager: &str,
    body: &serde_json::Value,
) -> Result<(), kube::Error>
where
    K: Resource + Clone,
{
    let params = PatchParams::apply(manager).force();
    let request = Request::new(api.resource_url())
        .patch(name, &params, &Patch::Apply(body))
        .map_err(kube::Error::BuildRequest)?;
    api.clone().into_client().request_text(request).await?;
    Ok(())
}

/// Server-side applies `body` to `name`'s status as `manager`, taking over conflicting
/// fields, and checks that the server accepted it.
pub async fn apply_status<K, P>(
    api: &Api<K>,
    name: &str,
    manager: &str,
    body: &P,
) -> Result<(), kube::Error>
where
    K: Resource + Clone,
    P: Serialize + std::fmt::Debug,
{
    let params = PatchParams::apply(manager).force();
    let request = Request::new(api.resource_url())
        .patch_subresource("status", name, &params, &Patch::Apply(body))
        .map_err(kube::Error::BuildRequest)?;
    api.clone().into_client().request_text(request).await?;
    Ok(())
}
