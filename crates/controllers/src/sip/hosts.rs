//! A stand-in for metal3's bare-metal operator where metal3 does not run (the plane's
//! BareMetalHost CRD is the one we install, marked `crds::ONLY_IF_ABSENT`): a new host is
//! registered and inspected at once and becomes `available` (operational status `OK`), is
//! `provisioned` while it has an image and `available` again without one, and reports
//! `poweredOn` as `spec.online` asks. Any other state (one a test or a user set, such as
//! `deprovisioning`) is left as it is. Where metal3's own CRD is installed, its operator owns
//! host status and this stand-in does nothing.

use super::types::{BareMetalHost, BareMetalHostStatus, Provisioning};
use infrasim_controller_runtime::context::Context;
use infrasim_controller_runtime::informers::Informers;
use infrasim_controller_runtime::reconcile::{Next, Reconcile};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::Api;
use kube::ResourceExt;
use serde_json::json;
use std::sync::Arc;

/// The field manager host status is written under: the SIP family's and this file's name
/// (see [`infrasim_controller_runtime::writes`]).
const MANAGER: &str = "infrasim-sip-controller/hosts";

/// Runs the stand-in, if the plane's BareMetalHost CRD is ours, until the process ends.
pub async fn run(ctx: Context, informers: Arc<Informers>) {
    let crds: Api<CustomResourceDefinition> = Api::all(ctx.client.clone());
    let ours = match crds.get_opt("baremetalhosts.metal3.io").await {
        Ok(Some(crd)) => crd.annotations().contains_key(crate::crds::ONLY_IF_ABSENT),
        _ => false,
    };
    if !ours {
        tracing::info!("BareMetalHost status is left to metal3's operator");
        return;
    }
    let hosts = informers.of::<BareMetalHost>();
    let controller = infrasim_controller_runtime::triggers::controller(&hosts, None);
    let standin = Arc::new(Standin { ctx: ctx.clone() });
    infrasim_controller_runtime::reconcile::run(&ctx, controller, standin).await;
}

/// The stand-in's reconciler: it writes host status only.
struct Standin {
    ctx: Context,
}

impl Reconcile<BareMetalHost> for Standin {
    type Error = kube::Error;

    async fn apply(&self, host: Arc<BareMetalHost>) -> Result<Next, kube::Error> {
        let Some(status) = next_status(&host) else {
            return Ok(Next::AwaitChange);
        };
        let api: Api<BareMetalHost> = Api::namespaced(
            self.ctx.client.clone(),
            &host.namespace().unwrap_or_default(),
        );
        let body =
            json!({"apiVersion": "metal3.io/v1alpha1", "kind": "BareMetalHost", "status": status});
        infrasim_controller_runtime::writes::apply_status(&api, &host.name_any(), MANAGER, &body)
            .await?;
        Ok(Next::AwaitChange)
    }
}

/// The status the host should have, when it differs from what it has.
fn next_status(host: &BareMetalHost) -> Option<BareMetalHostStatus> {
    let now = host.status.clone().unwrap_or_default();
    let state = now
        .provisioning
        .as_ref()
        .map(|p| p.state.as_str())
        .unwrap_or("");
    let wanted_state = match (state, host.spec.image.is_some()) {
        ("", _) if host.spec.externally_provisioned == Some(true) => "externally provisioned",
        ("" | "available" | "provisioned", true) => "provisioned",
        ("" | "available" | "provisioned", false) => "available",
        (other, _) => other,
    };
    let mut next = now.clone();
    next.provisioning = Some(Provisioning {
        id: host.uid().unwrap_or_default(),
        state: wanted_state.to_string(),
    });
    next.operational_status
        .get_or_insert_with(|| "OK".to_string());
    next.powered_on = Some(host.spec.online);
    (next != now).then_some(next)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sip::types::{BareMetalHostSpec, HostImage};

    fn host(online: bool, image: bool, state: Option<&str>) -> BareMetalHost {
        let mut h = BareMetalHost::new(
            "h",
            BareMetalHostSpec {
                online,
                image: image.then(HostImage::default),
                ..Default::default()
            },
        );
        h.status = state.map(|s| BareMetalHostStatus {
            operational_status: Some("OK".into()),
            powered_on: Some(online),
            provisioning: Some(Provisioning {
                id: String::new(),
                state: s.into(),
            }),
            ..Default::default()
        });
        h
    }

    #[test]
    fn hosts_become_available_provisioned_and_follow_online() {
        let fresh = next_status(&host(true, false, None)).unwrap();
        assert_eq!(fresh.provisioning.unwrap().state, "available");
        assert_eq!(
            (fresh.operational_status.as_deref(), fresh.powered_on),
            (Some("OK"), Some(true))
        );
        let imaged = next_status(&host(true, true, Some("available"))).unwrap();
        assert_eq!(imaged.provisioning.unwrap().state, "provisioned");
        assert_eq!(
            next_status(&host(true, true, Some("provisioned"))),
            None,
            "nothing to change"
        );
        let mut h = host(true, false, Some("available"));
        h.spec.online = false;
        assert_eq!(next_status(&h).unwrap().powered_on, Some(false));
        // A state someone else set is theirs.
        assert_eq!(
            next_status(&host(true, false, Some("deprovisioning"))),
            None
        );
    }
}
