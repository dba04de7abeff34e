//! The ControlPlaneEndpoint reconciler: reserves a control-plane endpoint (a port of the
//! simulated cloud, 20000-24000 by default) for the cluster the object is named after, keeps
//! it across restarts (the recorded port is asked for again), and frees it, with the
//! workload cluster served behind it, when the object goes.

use super::types::{ControlPlaneEndpoint, ControlPlaneEndpointStatus};
use super::{Error, Reconciler};
use crate::capi::infra::cloud_key;
use infrasim_controller_runtime::reconcile::{Cleanup, Next, Reconcile};
use kube::api::Api;
use kube::ResourceExt;
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

/// Upstream's finalizer name.
pub const FINALIZER: &str = "control-plane-endpoint.vcsim.infrastructure.cluster.x-k8s.io";

/// The field manager this controller writes under, the family's and its own name (see
/// [`infrasim_controller_runtime::writes`]).
const MANAGER: &str = "infrasim-vcsim-controller/endpoint";

impl Reconcile<ControlPlaneEndpoint> for Reconciler {
    type Error = Error;
    const FINALIZER: Option<&'static str> = Some(FINALIZER);

    async fn apply(&self, obj: Arc<ControlPlaneEndpoint>) -> Result<Next, Error> {
        reserve(&obj, self).await
    }

    /// The endpoint is released, with any workload cluster behind it.
    async fn cleanup(&self, obj: Arc<ControlPlaneEndpoint>) -> Result<Cleanup, Error> {
        // The same key the machines of the cluster created its workload cluster under.
        let key = cloud_key(&obj.name_any(), &obj.namespace().unwrap_or_default());
        let freed =
            self.ctx.cloud.delete_cluster(&key).await? | self.ctx.cloud.release_endpoint(&key);
        if freed {
            let why = "the endpoint and any cluster behind it are gone".to_string();
            self.ctx.event(&*obj, false, "EndpointReleased", why).await;
        }
        Ok(Cleanup::Done)
    }
}

async fn reserve(obj: &ControlPlaneEndpoint, r: &Reconciler) -> Result<Next, Error> {
    let ns = obj.namespace().unwrap_or_default();
    let name = obj.name_any();
    let api: Api<ControlPlaneEndpoint> = Api::namespaced(r.ctx.client.clone(), &ns);
    // The same key the machines of the cluster will create its workload cluster under.
    let key = cloud_key(&name, &ns);
    let recorded = obj
        .status
        .as_ref()
        .map(|s| s.port)
        .filter(|p| (1..=i32::from(u16::MAX)).contains(p))
        .map(|p| p as u16);
    let endpoint = match r.ctx.cloud.reserve_endpoint(&key, recorded).await {
        Ok(e) => e,
        Err(e) => {
            // Its recorded port is taken (by another program): say so, try again later. A
            // retry, not a poll: that program tells nobody here when it lets go.
            let why = format!("the control plane endpoint cannot be served: {e}");
            r.ctx.event(obj, true, "EndpointUnavailable", why).await;
            return Ok(Next::After(Duration::from_secs(10)));
        }
    };
    let status = ControlPlaneEndpointStatus {
        host: r.ctx.cloud.advertise_address().to_string(),
        port: i32::from(endpoint.port()),
    };
    if obj.status.as_ref() != Some(&status) {
        let body = json!({
            "apiVersion": "vcsim.infrastructure.cluster.x-k8s.io/v1alpha1",
            "kind": "ControlPlaneEndpoint",
            "status": status,
        });
        infrasim_controller_runtime::writes::apply_status(&api, &name, MANAGER, &body).await?;
        let why = format!(
            "control plane endpoint {}:{} reserved",
            status.host, status.port
        );
        r.ctx.event(obj, false, "EndpointReserved", why).await;
    }
    Ok(Next::AwaitChange)
}
