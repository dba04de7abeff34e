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
        when_claimed(r, obj, "Cluster", |obj, api| async move {
            apply(obj, r, &api).await
        })
        .await
    }

    /// The endpoint and the workload cluster behind it go, then the finalizer.
    async fn cleanup(&self, obj: Arc<K>) -> Result<Cleanup, Error> {
        let r = &self.0;
        release_claim(r, obj, |obj| release(obj, r)).await
    }
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
    let wanted = obj
        .endpoint()
        .filter(|e| e.port != 0)
        .map(|e| e.port as u16);
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
    if obj.endpoint().is_none_or(|e| !e.is_valid()) {
        publish_endpoint(&*obj, r, api, &host, endpoint.port()).await?;
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
