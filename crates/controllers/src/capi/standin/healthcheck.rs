//! The MachineHealthCheck controller, reporting: which Machines a check targets and how many
//! are healthy (their Node healthy and the Machine ready). It does not remediate: a simulated
//! node fails only when a test makes it, and remediation is not part of this stand-in yet.

use super::{apply_status, Core, Error, Reconciler};
use crate::capi::core::{Machine, MachineHealthCheck, MachineHealthCheckStatus};
use crate::capi::index::Index;
use crate::conditions::{self, Condition};
use kube::api::{Api, ListParams};
use kube::runtime::controller::Action;
use kube::ResourceExt;
use std::sync::Arc;

pub(super) async fn run(core: Arc<Core>) {
    let informers = core.informers.clone();
    let by_cluster = Index::new(|h: &MachineHealthCheck| vec![h.spec.cluster_name.clone()]);
    let controller = crate::capi::triggers::controller(&informers.of(), Some(&by_cluster))
        .watches_shared_stream(
            crate::capi::triggers::filtered(
                &informers.of::<Machine>(),
                crate::capi::triggers::machine_health,
            ),
            move |m| {
                let ns = m.namespace().unwrap_or_default();
                by_cluster.lookup(&ns, &m.spec.cluster_name)
            },
        );
    super::serve(controller, core, reconcile).await;
}

async fn reconcile(
    mhc: Arc<MachineHealthCheck>,
    r: Arc<Reconciler<MachineHealthCheck>>,
) -> Result<Action, Error> {
    let _running = crate::metrics::reconciled("MachineHealthCheck");
    if mhc.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let ns = mhc.namespace().unwrap_or_default();
    let selector = super::machineset::selector_string(&mhc.spec.selector);
    let machines = r
        .api::<Machine>(&ns)
        .list(&ListParams::default().labels(&selector))
        .await?
        .items;
    let targets: Vec<&Machine> = machines
        .iter()
        .filter(|m| m.spec.cluster_name == mhc.spec.cluster_name)
        .collect();
    let healthy = targets
        .iter()
        .filter(|m| {
            let c = m
                .status
                .as_ref()
                .and_then(|s| s.conditions.clone())
                .unwrap_or_default();
            conditions::is_true(&c, "NodeHealthy")
        })
        .count() as i32;
    let now = r.core.ctx.now();
    let mut conds = mhc
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default();
    conditions::set(
        &mut conds,
        Condition::new("RemediationAllowed", true, "RemediationAllowed", ""),
        now,
    );
    conditions::set(
        &mut conds,
        Condition::new("Paused", false, "NotPaused", ""),
        now,
    );
    conditions::sort(&mut conds);
    let mut names: Vec<String> = targets.iter().map(|m| m.name_any()).collect();
    names.sort();
    let status = MachineHealthCheckStatus {
        expected_machines: Some(targets.len() as i32),
        current_healthy: Some(healthy),
        remediations_allowed: Some(targets.len() as i32),
        targets: Some(names),
        conditions: Some(conds),
        observed_generation: mhc.metadata.generation,
    };
    let api: Api<MachineHealthCheck> = r.api(&ns);
    apply_status(&api, &*mhc, &status).await?;
    Ok(Action::await_change())
}
