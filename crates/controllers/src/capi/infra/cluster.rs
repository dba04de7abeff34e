//! The infrastructure cluster reconciler: reserves the cluster's control-plane endpoint on
//! the simulated cloud and reports the cluster provisioned; deleting it frees the endpoint and
//! the workload cluster behind it.

use super::{
    apply_status, cloud_key, owner_named, paused_message, release_claim, report_paused,
    when_claimed, Error, InfraCluster, InfraStatus, Reconciler,
};
use crate::capi::core::Cluster;
use chrono::{DateTime, Utc};
use infrasim_controller_runtime::conditions::{self, Condition};
use infrasim_controller_runtime::reconcile::{Cleanup, Next, Reconcile};
use kube::api::{Api, Patch, PatchParams};
use kube::ResourceExt;
use serde_json::json;
use std::sync::Arc;

/// The field manager this controller writes status under, for both spellings of its kind:
/// the provider's and its own name (see [`infrasim_controller_runtime::writes`]).
const MANAGER: &str = "infrasim-in-memory-provider/cluster";

/// The infrastructure cluster controller of kind `K`.
pub struct ClusterReconciler<K: InfraCluster>(pub(super) Reconciler<K>);

/// An infrastructure cluster is claimed (its finalizer added) only once Cluster API's
/// Cluster owns it (nothing is reserved before), so the runner holds no finalizer of its own
/// (see [`Reconcile::FINALIZER`]): the cleanup removes it.
impl<K: InfraCluster> Reconcile<K> for ClusterReconciler<K> {
    type Error = Error;

    async fn apply(&self, obj: Arc<K>) -> Result<Next, Error> {
        let r = &self.0;
        if !hosted_here(r, &*obj) {
            return Ok(Next::AwaitChange);
        }
        when_claimed(r, obj, "Cluster", |obj, api| async move {
            apply(obj, r, &api).await
        })
        .await
    }

    /// The endpoint and the workload cluster behind it go, then the finalizer.
    async fn cleanup(&self, obj: Arc<K>) -> Result<Cleanup, Error> {
        let r = &self.0;
        if !hosted_here(r, &*obj) {
            // Its host takes it down and lets it go.
            return Ok(Cleanup::Pending(Next::AwaitChange));
        }
        release_claim(r, obj, |obj| release(obj, r)).await
    }
}

/// The cloud key of the workload cluster an infrastructure cluster is for: its owning
/// Cluster's, or (before Cluster API owns it) the one its cluster-name label names.
pub(super) fn cluster_key<K: InfraCluster>(obj: &K) -> Option<String> {
    let ns = obj.namespace().unwrap_or_default();
    owner_named(obj, "Cluster")
        .or_else(|| obj.labels().get(crate::capi::CLUSTER_NAME_LABEL).cloned())
        .map(|cluster| cloud_key(&cluster, &ns))
}

/// Whether this process hosts the workload cluster of `obj` (always, unless the fleet is
/// sharded; see [`infrasim_controller_runtime::shards`]). One not yet owned by a Cluster is
/// claimed by nobody, so any process may look at it.
fn hosted_here<K: InfraCluster>(r: &Reconciler<K>, obj: &K) -> bool {
    cluster_key(obj).is_none_or(|key| r.ctx.shards.hosts(&key))
}

async fn apply<K: InfraCluster>(
    obj: Arc<K>,
    r: &Reconciler<K>,
    api: &Api<K>,
) -> Result<Next, Error> {
    let ns = obj.namespace().unwrap_or_default();
    let Some(cluster_name) = owner_named(&*obj, "Cluster") else {
        return Ok(Next::AwaitChange);
    };
    let Some(cluster) = r.informers.get::<Cluster>(&ns, &cluster_name).await? else {
        return Ok(Next::AwaitChange);
    };
    let now = r.ctx.now();
    let mut conds = obj.current_conditions();
    if let Some(why) = paused_message(&*obj, cluster.paused()) {
        report_paused(api, &*obj, MANAGER, why, now).await?;
        return Ok(Next::AwaitChange);
    }
    conditions::set_paused(&mut conds, None, now);
    if let Some(why) = obj.unsupported() {
        let announce =
            conditions::find(&conds, "Ready").is_none_or(|c| c.reason != "UnsupportedBackend");
        let ready = Condition::new("Ready", false, "UnsupportedBackend", why);
        report_not_ready(&*obj, r, api, conds, ready, announce, now).await?;
        return Ok(Next::AwaitChange);
    }
    let key = cloud_key(&cluster_name, &ns);
    let wanted = super::wanted_port(&r.ctx, obj.endpoint());
    let endpoint = match r.ctx.cloud.reserve_endpoint(&key, wanted).await {
        Ok(e) => e,
        Err(e) => {
            // Its recorded port is taken (by another program, or outside this process's
            // range after a move): say so where users look, and try again later.
            let why = format!("the control plane endpoint cannot be served: {e}");
            let announce = conditions::find(&conds, "Ready").is_none_or(|c| c.message != why);
            let ready = Condition::new("Ready", false, "EndpointUnavailable", why);
            report_not_ready(&*obj, r, api, conds, ready, announce, now).await?;
            return Ok(Next::After(std::time::Duration::from_secs(10)));
        }
    };
    let host = r.ctx.cloud.advertise_address().to_string();
    let published = obj.endpoint().filter(|e| e.is_valid());
    match published {
        None => publish_endpoint(&*obj, r, api, &host, endpoint.port()).await?,
        // Only a sharded fleet moves endpoints (see `super::wanted_port`).
        Some(e)
            if r.ctx.shards.count().is_some()
                && (e.host != host || e.port != i32::from(endpoint.port())) =>
        {
            move_endpoint(&*obj, r, api, &cluster, e, &host, endpoint.port()).await?
        }
        Some(_) => {}
    }
    conditions::set(&mut conds, Condition::new("Ready", true, "Ready", ""), now);
    conditions::sort(&mut conds);
    let view = InfraStatus {
        provisioned: true,
        conditions: conds,
        failure_domains: Some(obj.failure_domains()).filter(|f| !f.is_empty()),
        ..InfraStatus::default()
    };
    apply_status(api, &obj, MANAGER, &view).await?;
    Ok(Next::AwaitChange)
}

/// Reports the cluster not provisioned with `ready` (a false `Ready` condition), and as a
/// warning event too when `announce` says users have not been told this yet.
async fn report_not_ready<K: InfraCluster>(
    obj: &K,
    r: &Reconciler<K>,
    api: &Api<K>,
    mut conds: Vec<Condition>,
    ready: Condition,
    announce: bool,
    now: DateTime<Utc>,
) -> Result<(), Error> {
    if announce {
        r.ctx
            .event(obj, true, &ready.reason, ready.message.clone())
            .await;
    }
    conditions::set(&mut conds, ready, now);
    conditions::sort(&mut conds);
    let view = InfraStatus {
        provisioned: false,
        conditions: conds,
        ..InfraStatus::default()
    };
    apply_status(api, obj, MANAGER, &view).await
}

/// Writes the reserved endpoint into the spec (once: it is not changed after) and tells
/// users where the control plane will answer.
async fn publish_endpoint<K: InfraCluster>(
    obj: &K,
    r: &Reconciler<K>,
    api: &Api<K>,
    host: &str,
    port: u16,
) -> Result<(), Error> {
    // The endpoint is spec, set once: a merge patch leaves every other field (and its
    // owner, such as Cluster API's topology controller) alone.
    let patch = json!({"spec": {"controlPlaneEndpoint": {"host": host, "port": port}}});
    api.patch(
        &obj.name_any(),
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await?;
    r.ctx
        .event(
            obj,
            false,
            "EndpointReserved",
            format!("control plane endpoint {host}:{port} reserved"),
        )
        .await;
    Ok(())
}

/// Moves a published endpoint to the one this process reserved: the cluster was taken over
/// from a process on another port range or machine (a sharded fleet), so its old address
/// answers no more. The infrastructure cluster and the Cluster both get the new address:
/// upstream copies the endpoint into the Cluster once and never moves it, but a control-plane
/// endpoint whose host went away is what a VIP failover moves, and a Cluster left on the old
/// address would point every client at nothing. Cluster API's kubeconfig then follows (see
/// the control plane's `certs::ensure_kubeconfig`).
async fn move_endpoint<K: InfraCluster>(
    obj: &K,
    r: &Reconciler<K>,
    api: &Api<K>,
    cluster: &Cluster,
    from: &crate::capi::core::ApiEndpoint,
    host: &str,
    port: u16,
) -> Result<(), Error> {
    // The Cluster first: should this reconcile stop halfway, the infrastructure cluster
    // still shows the old address and the next one moves both again.
    let patch = json!({"spec": {"controlPlaneEndpoint": {"host": host, "port": port}}});
    let clusters: Api<Cluster> = Api::namespaced(
        r.ctx.client.clone(),
        &cluster.namespace().unwrap_or_default(),
    );
    clusters
        .patch(
            &cluster.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await?;
    api.patch(
        &obj.name_any(),
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await?;
    let note = format!(
        "control plane endpoint moved from {}:{} to {host}:{port}: the cluster is hosted here now",
        from.host, from.port
    );
    r.ctx.event(obj, false, "EndpointMoved", note).await;
    Ok(())
}

/// Frees the cluster's endpoint and the workload cluster behind it, if the cloud has them.
async fn release<K: InfraCluster>(obj: Arc<K>, r: &Reconciler<K>) -> Result<(), Error> {
    let ns = obj.namespace().unwrap_or_default();
    if let Some(cluster) = owner_named(&*obj, "Cluster")
        .or_else(|| obj.labels().get(crate::capi::CLUSTER_NAME_LABEL).cloned())
    {
        if r.ctx
            .cloud
            .delete_cluster(&cloud_key(&cluster, &ns))
            .await?
        {
            r.ctx
                .event(
                    &*obj,
                    false,
                    "EndpointReleased",
                    format!("the workload cluster of {cluster} is gone and its endpoint is free"),
                )
                .await;
        }
    }
    Ok(())
}
