//! The VSphereClusterIdentity reconciler, as CAPV's: an identity claims its Secret in CAPV's
//! own namespace (the identity as the Secret's owner, and CAPV's finalizer on it, so the
//! Secret outlives neither the identity nor an accidental delete) and reports
//! `status.ready` and the `Available` condition. A Secret another identity or cluster
//! already owns is refused (`SecretAlreadyInUse`). A deleted identity takes its Secret
//! with it. Clusters read the identity's credentials only once it is ready (see
//! [`super::credentials`]).

use super::credentials::MANAGER_NAMESPACE;
use super::types::{VSphereClusterIdentity, GROUP};
use super::{Error, Reconciler};
use infrasim_controller_runtime::conditions::{self, Condition};
use infrasim_controller_runtime::informers::Informers;
use infrasim_controller_runtime::reconcile::{Cleanup, Next, Reconcile};
use infrasim_controller_runtime::Controller;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use kube::{Resource, ResourceExt};
use serde_json::{json, Value};
use std::sync::Arc;

/// CAPV's finalizer on a VSphereClusterIdentity.
pub const FINALIZER: &str = "vsphereclusteridentity/infrastructure.cluster.x-k8s.io";

/// CAPV's finalizer on a credentials Secret an identity or a cluster has claimed.
pub const SECRET_FINALIZER: &str = "vspherecluster/infrastructure.cluster.x-k8s.io";

const MANAGER: &str = "infrasim-capv/identity";

/// The VSphereClusterIdentity controller. A Secret that appears later is found by the
/// retry of the failed reconcile, as CAPV (which does not watch Secrets either) finds it.
pub(super) fn controller(informers: &Informers) -> Controller<VSphereClusterIdentity> {
    infrasim_controller_runtime::triggers::controller(
        &informers.of::<VSphereClusterIdentity>(),
        None,
    )
}

impl Reconcile<VSphereClusterIdentity> for Reconciler {
    type Error = Error;
    const FINALIZER: Option<&'static str> = Some(FINALIZER);

    async fn apply(&self, identity: Arc<VSphereClusterIdentity>) -> Result<Next, Error> {
        if let Some(why) = crate::capi::paused_message(&*identity, false) {
            let paused = Condition::new("Paused", true, "Paused", why);
            write_status(self, &identity, paused, None).await?;
            return Ok(Next::AwaitChange);
        }
        match claim_secret(self, &identity).await {
            Ok(()) => {
                let available = Condition::new("Available", true, "Available", "");
                write_status(self, &identity, available, Some(true)).await?;
                Ok(Next::AwaitChange)
            }
            Err((reason, why, ready)) => {
                let refused = Condition::new("Available", false, reason, why.clone());
                write_status(self, &identity, refused, ready).await?;
                Err(Error::Reported(format!(
                    "VSphereClusterIdentity {}: {why}",
                    identity.name_any()
                )))
            }
        }
    }

    /// The Secret loses CAPV's finalizer and is deleted, as CAPV deletes it.
    async fn cleanup(&self, identity: Arc<VSphereClusterIdentity>) -> Result<Cleanup, Error> {
        let secrets: Api<Secret> = Api::namespaced(self.ctx.client.clone(), MANAGER_NAMESPACE);
        let deleting = Condition::new("Available", false, "Deleting", "");
        write_status(self, &identity, deleting, None).await?;
        release_secret(&secrets, &identity.spec.secret_name).await?;
        Ok(Cleanup::Done)
    }
}

/// Why an identity's Secret could not be claimed: the condition's reason, its message, and
/// `status.ready` to report (`None`: left as it is, as CAPV leaves it).
type Refusal = (&'static str, String, Option<bool>);

/// Makes the identity the owner of its Secret, with CAPV's finalizer on it.
async fn claim_secret(r: &Reconciler, identity: &VSphereClusterIdentity) -> Result<(), Refusal> {
    let name = &identity.spec.secret_name;
    let secrets: Api<Secret> = Api::namespaced(r.ctx.client.clone(), MANAGER_NAMESPACE);
    let secret = match secrets.get_opt(name).await {
        Ok(Some(secret)) => secret,
        Ok(None) => {
            let why = format!("secrets \"{name}\" not found in namespace {MANAGER_NAMESPACE}");
            return Err(("SecretNotAvailable", why, None));
        }
        Err(e) => return Err(("SecretNotAvailable", e.to_string(), None)),
    };
    // No controller flag, as CAPV adds it.
    let owner = crate::capi::standin::objects::owner_ref(identity, false);
    claim(&secrets, &secret, owner).await.map_err(|e| match e {
        Claim::InUse => (
            "SecretAlreadyInUse",
            "secret being used by another Cluster/VSphereIdentity".to_string(),
            Some(false),
        ),
        Claim::Failed(e) => ("SettingSecretOwnerReferenceFailed", e.to_string(), None),
    })
}

/// Why a Secret could not be claimed.
pub(super) enum Claim {
    /// Another VSphereCluster or VSphereClusterIdentity owns it.
    InUse,
    Failed(kube::Error),
}

/// Adds `owner` and CAPV's finalizer to a credentials Secret, unless another CAPV cluster or
/// identity owns it. The write carries the Secret's resourceVersion: a concurrent change
/// makes it fail and be retried, never lose an owner or a finalizer.
pub(super) async fn claim(
    secrets: &Api<Secret>,
    secret: &Secret,
    owner: OwnerReference,
) -> Result<(), Claim> {
    let owners = secret.owner_references();
    let ours = owners.iter().any(|o| o.uid == owner.uid);
    let claimed_by_another = owners.iter().any(|o| {
        o.api_version.starts_with(&format!("{GROUP}/"))
            && matches!(o.kind.as_str(), "VSphereCluster" | "VSphereClusterIdentity")
    });
    if !ours && claimed_by_another {
        return Err(Claim::InUse);
    }
    let has_finalizer = secret.finalizers().iter().any(|f| f == SECRET_FINALIZER);
    if ours && has_finalizer {
        return Ok(());
    }
    let mut owners = owners.to_vec();
    if !ours {
        owners.push(owner);
    }
    let mut finalizers = secret.finalizers().to_vec();
    if !has_finalizer {
        finalizers.push(SECRET_FINALIZER.to_string());
    }
    let body = json!({"metadata": {
        "resourceVersion": secret.resource_version(),
        "ownerReferences": owners,
        "finalizers": finalizers,
    }});
    secrets
        .patch(
            &secret.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&body),
        )
        .await
        .map(drop)
        .map_err(Claim::Failed)
}

/// Takes CAPV's finalizer off a credentials Secret and deletes it (one already gone is
/// no error).
pub(super) async fn release_secret(secrets: &Api<Secret>, name: &str) -> Result<(), Error> {
    let Some(secret) = secrets.get_opt(name).await? else {
        return Ok(());
    };
    if secret.finalizers().iter().any(|f| f == SECRET_FINALIZER) {
        let kept: Vec<&String> = secret
            .finalizers()
            .iter()
            .filter(|f| *f != SECRET_FINALIZER)
            .collect();
        let body = json!({"metadata": {
            "resourceVersion": secret.resource_version(),
            "finalizers": kept,
        }});
        secrets
            .patch(name, &PatchParams::default(), &Patch::Merge(&body))
            .await?;
    }
    if secret.metadata.deletion_timestamp.is_none() {
        match secrets.delete(name, &DeleteParams::default()).await {
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            other => drop(other?),
        }
    }
    Ok(())
}

/// Writes the identity's status as CAPV does: `Paused` and `Available` (no `Ready` in
/// v1beta2), and in the v1beta1 copy `CredentialsAvailable` with `Ready` as its summary.
async fn write_status(
    r: &Reconciler,
    identity: &VSphereClusterIdentity,
    set: Condition,
    ready: Option<bool>,
) -> Result<(), Error> {
    let now = r.ctx.now();
    let before = identity.status.as_ref().map(|s| &s.rest);
    let mut conds: Vec<Condition> = before
        .and_then(|s| s.get("conditions"))
        .and_then(|v| serde_json::from_value(v.clone()).ok())
        .unwrap_or_default();
    if set.type_ != "Paused" {
        conditions::set(
            &mut conds,
            Condition::new("Paused", false, "NotPaused", ""),
            now,
        );
    }
    conditions::set(&mut conds, set, now);
    let mut v1beta1: Vec<Condition> = conds
        .iter()
        .filter(|c| c.type_ == "Available")
        .map(|c| Condition {
            type_: "CredentialsAvailable".into(),
            ..c.clone()
        })
        .collect();
    if let Some(c) = v1beta1.first().cloned() {
        v1beta1.push(Condition {
            type_: "Ready".into(),
            ..c
        });
    }
    let mut status = json!({
        "conditions": conds,
        "deprecated": {"v1beta1": {"conditions": conditions::to_v1beta1(&v1beta1)}},
    });
    let ready = ready.or_else(|| before.and_then(|s| s.get("ready")).and_then(Value::as_bool));
    if let Some(ready) = ready {
        status["ready"] = json!(ready);
    }
    let name = identity.name_any();
    let api: Api<VSphereClusterIdentity> = Api::all(r.ctx.client.clone());
    let body = json!({
        "apiVersion": VSphereClusterIdentity::api_version(&()),
        "kind": "VSphereClusterIdentity",
        "metadata": {"name": name},
        "status": status,
    });
    infrasim_controller_runtime::writes::apply_status(&api, &name, MANAGER, &body).await?;
    Ok(())
}
