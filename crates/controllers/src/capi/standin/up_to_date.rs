//! The `UpToDate` condition of a Machine, as Cluster API's Machine controller reports it:
//! whether the Machine is what its owner wants now (a control-plane Machine against its
//! KubeadmControlPlane's version and template, a MachineSet's against its deployment's
//! current template). Its own module because the Machine controller asks and the owners'
//! controllers know the answer: here both sides meet without importing each other.

use super::kcp;
use super::machinedeployment::rollout_key;
use super::Reconciler;
use crate::capi::core::{KubeadmControlPlane, Machine, MachineDeployment, MachineSet};
use chrono::{DateTime, Utc};
use infrasim_controller_runtime::conditions::Condition;
use kube::ResourceExt;

/// The `UpToDate` condition of a Machine its control plane or MachineSet owns (none for
/// another owner).
pub(super) async fn of_machine(m: &Machine, r: &Reconciler<Machine>) -> Option<Condition> {
    let owner = m
        .owner_references()
        .iter()
        .find(|o| o.controller == Some(true))?
        .clone();
    let ns = m.namespace().unwrap_or_default();
    match owner.kind.as_str() {
        "KubeadmControlPlane" => {
            let kcp = r
                .core
                .informers
                .get::<KubeadmControlPlane>(&ns, &owner.name)
                .await
                .ok()??;
            let template = kcp::infra_template(r, m).await;
            let config = kcp::config_spec(r, m).await;
            Some(
                match kcp::outdated(
                    &kcp,
                    m,
                    template.as_deref(),
                    config.as_ref(),
                    r.core.ctx.now(),
                ) {
                    None => Condition::new("UpToDate", true, "UpToDate", ""),
                    Some(why) => Condition::new("UpToDate", false, "NotUpToDate", why),
                },
            )
        }
        "MachineSet" => of_set_member(m, r, &owner.name).await,
        _ => None,
    }
}

/// When a control-plane Machine falls out of date by time alone (its certificates, its
/// control plane's `rollout.after`), for its controller to look again then.
pub(super) async fn due_next(m: &Machine, r: &Reconciler<Machine>) -> Option<DateTime<Utc>> {
    let owner = (m.owner_references().iter())
        .find(|o| o.controller == Some(true) && o.kind == "KubeadmControlPlane")?;
    let ns = m.namespace().unwrap_or_default();
    let kcp = (r.core.informers)
        .get::<KubeadmControlPlane>(&ns, &owner.name)
        .await
        .ok()??;
    super::certificate_expiry::due_next(&kcp, m, r.core.ctx.now())
}

/// The `UpToDate` condition of a Machine of a MachineSet: whether the set's template is its
/// deployment's current one.
async fn of_set_member(m: &Machine, r: &Reconciler<Machine>, set: &str) -> Option<Condition> {
    let ns = m.namespace().unwrap_or_default();
    let ms = r.core.informers.get::<MachineSet>(&ns, set).await.ok()??;
    let md_name = ms
        .owner_references()
        .iter()
        .find(|o| o.kind == "MachineDeployment")?
        .name
        .clone();
    let md = r
        .core
        .informers
        .get::<MachineDeployment>(&ns, &md_name)
        .await
        .ok()??;
    let (have, want) = (&ms.spec.template.spec, &md.spec.template.spec);
    if rollout_key(have) == rollout_key(want) {
        return Some(Condition::new("UpToDate", true, "UpToDate", ""));
    }
    let mut why = Vec::new();
    if have.version != want.version {
        why.push(format!(
            "* Version {}, {} required",
            have.version.as_deref().unwrap_or("(none)"),
            want.version.as_deref().unwrap_or("(none)")
        ));
    }
    if have.infrastructure_ref != want.infrastructure_ref {
        why.push(format!(
            "* {} is not up-to-date",
            want.infrastructure_ref.kind
        ));
    }
    if have.bootstrap != want.bootstrap {
        why.push("* Bootstrap config is not up-to-date".into());
    }
    if have.failure_domain != want.failure_domain {
        why.push("* Failure domain is not up-to-date".into());
    }
    Some(Condition::new(
        "UpToDate",
        false,
        "NotUpToDate",
        why.join("\n"),
    ))
}
