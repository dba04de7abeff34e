//! The MachineHealthCheck controller: checks the Machines a health check selects (see
//! [`targets`]), reports how many are healthy, and when remediation is allowed
//! (`spec.remediation.triggerIf`) marks the failed ones for their owner (`OwnerRemediated`
//! False), or hands them to an external remediation (`spec.remediation.templateRef`). The
//! owners do the rest (see [`super::remediation`]). Node changes reach it through the
//! stand-in's [`super::nodes::NodeCache`]; timeouts through the injected clock.

mod external;
pub mod targets;

use super::remediation::{self, OWNER_MANAGER};
use super::{apply_status, paused, Core, Error, Reconciler};
use crate::capi::core::{Cluster, Machine, MachineHealthCheck, MachineHealthCheckStatus};
use crate::capi::triggers::{cluster_gates, machine_health};
use infrasim_controller_runtime::conditions::{self, Condition};
use infrasim_controller_runtime::index::Index;
use infrasim_controller_runtime::reconcile::{Cleanup, Next, Reconcile};
use infrasim_controller_runtime::triggers::filtered;
use infrasim_kube_api::selectors::LabelSelector;
use kube::api::Api;
use kube::ResourceExt;
use std::sync::Arc;
use std::time::Duration;
use targets::{NodeSeen, Verdict};

/// How often a check whose cluster is not hosted here reads its Nodes again (no Node
/// changes reach it from there).
const POLL_ELSEWHERE: Duration = Duration::from_secs(30);

pub(super) async fn run(core: Arc<Core>) {
    let informers = core.informers.clone();
    let by_cluster = Index::new(|h: &MachineHealthCheck| vec![h.spec.cluster_name.clone()]);
    let node_changes = {
        let by_cluster = by_cluster.clone();
        let changes = core.nodes.subscribe();
        futures::stream::unfold(
            changes,
            |mut rx| async move { rx.recv().await.map(|c| (c, rx)) },
        )
        .flat_map(move |c| futures::stream::iter(by_cluster.lookup(&c.namespace, &c.cluster)))
    };
    let controller =
        infrasim_controller_runtime::triggers::controller(&informers.of(), Some(&by_cluster))
            .watches_shared_stream(filtered(&informers.of::<Machine>(), machine_health), {
                let by_cluster = by_cluster.clone();
                move |m| {
                    let ns = m.namespace().unwrap_or_default();
                    by_cluster.lookup(&ns, &m.spec.cluster_name)
                }
            })
            .watches_shared_stream(
                filtered(&informers.of::<Cluster>(), cluster_gates),
                move |c| {
                    let ns = c.namespace().unwrap_or_default();
                    by_cluster.lookup(&ns, &c.name_any())
                },
            )
            .reconcile_on(node_changes);
    let ctx = core.ctx.clone();
    infrasim_controller_runtime::reconcile::run(&ctx, controller, Arc::new(Reconciler::new(core)))
        .await;
}

use futures::StreamExt;

/// One checked target.
struct Checked {
    machine: Machine,
    verdict: Verdict,
}

/// The field manager this controller writes under: the stand-in's and its own name (see
/// [`infrasim_controller_runtime::writes`]).
/// It writes the Machines' `HealthCheckSucceeded` conditions under it too (see
/// [`super::remediation`]), never `OwnerRemediated`.
const MANAGER: &str = "infrasim-capi-core/healthcheck";

/// A health check keeps nothing that outlives it: no finalizer, nothing to clean up.
impl Reconcile<MachineHealthCheck> for Reconciler<MachineHealthCheck> {
    type Error = Error;

    async fn apply(&self, mhc: Arc<MachineHealthCheck>) -> Result<Next, Error> {
        let _running = infrasim_controller_runtime::metrics::reconciled("MachineHealthCheck");
        apply(&mhc, self).await
    }

    async fn cleanup(&self, _: Arc<MachineHealthCheck>) -> Result<Cleanup, Error> {
        let _running = infrasim_controller_runtime::metrics::reconciled("MachineHealthCheck");
        Ok(Cleanup::Done)
    }
}

/// Checks the targets, marks them, and reports what it found in the check's status.
async fn apply(
    mhc: &MachineHealthCheck,
    r: &Reconciler<MachineHealthCheck>,
) -> Result<Next, Error> {
    let ns = mhc.namespace().unwrap_or_default();
    let api: Api<MachineHealthCheck> = r.api(&ns);
    let Some(cluster) = r
        .core
        .informers
        .get::<Cluster>(&ns, &mhc.spec.cluster_name)
        .await?
    else {
        return Ok(Next::AwaitChange);
    };
    let now = r.core.ctx.now();
    let mut conds = mhc
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default();
    let paused_why = paused(mhc, cluster.paused());
    conditions::set(
        &mut conds,
        match &paused_why {
            Some(why) => Condition::new("Paused", true, "Paused", why.clone()),
            None => Condition::new("Paused", false, "NotPaused", ""),
        },
        now,
    );
    if paused_why.is_some() {
        let status = MachineHealthCheckStatus {
            conditions: Some(conds),
            ..mhc.status.clone().unwrap_or_default()
        };
        apply_status(&api, mhc, MANAGER, &status).await?;
        return Ok(Next::AwaitChange);
    }
    let checks = match targets::Checks::from_spec(mhc.spec.checks.as_ref()) {
        Ok(c) => c,
        Err(why) => return report_invalid(&api, mhc, conds, why, now).await,
    };
    let (checked, elsewhere) = check_targets(mhc, r, &cluster, &checks).await?;
    let total = checked.len() as i32;
    let healthy = checked
        .iter()
        .filter(|c| c.verdict == Verdict::Healthy)
        .count() as i32;
    let (allowed, count) =
        match targets::remediation_allowed(mhc.spec.remediation.as_ref(), total, total - healthy) {
            Ok(a) => a,
            Err(why) => return report_invalid(&api, mhc, conds, why, now).await,
        };
    let unhealthy = checked
        .iter()
        .filter(|c| matches!(c.verdict, Verdict::Unhealthy { .. }))
        .count();
    let allowance = allowance(mhc, r, allowed, total, unhealthy).await;
    conditions::set(&mut conds, allowance, now);
    mark_targets(mhc, r, &cluster, &checked, allowed).await?;
    conditions::sort(&mut conds);
    let mut names: Vec<String> = checked.iter().map(|c| c.machine.name_any()).collect();
    names.sort();
    let deprecated = super::v1beta1::deprecated(
        &super::v1beta1::MACHINE_HEALTH_CHECK,
        &conds,
        serde_json::Value::Null,
        mhc.status.as_ref().and_then(|s| s.deprecated.as_ref()),
        now,
    );
    let status = MachineHealthCheckStatus {
        expected_machines: Some(total),
        current_healthy: Some(healthy),
        remediations_allowed: Some(if allowed { count.max(0) } else { 0 }),
        targets: Some(names),
        conditions: Some(conds),
        observed_generation: mhc.metadata.generation,
        deprecated: Some(deprecated),
    };
    apply_status(&api, mhc, MANAGER, &status).await?;
    let next = checked
        .iter()
        .filter_map(|c| match c.verdict {
            Verdict::Pending(at) => at,
            _ => None,
        })
        .min();
    Ok(soonest(next, elsewhere, r.core.ctx.now()))
}

/// The check's `RemediationAllowed`; when remediation is restricted while machines are
/// unhealthy, said in an event too.
async fn allowance(
    mhc: &MachineHealthCheck,
    r: &Reconciler<MachineHealthCheck>,
    allowed: bool,
    total: i32,
    unhealthy: usize,
) -> Condition {
    if allowed {
        return Condition::new("RemediationAllowed", true, "RemediationAllowed", "");
    }
    let message = restricted_message(mhc, total, unhealthy);
    if unhealthy > 0 {
        r.core
            .ctx
            .event(mhc, true, "RemediationRestricted", message.clone())
            .await;
    }
    Condition::new("RemediationAllowed", false, "TooManyUnhealthy", message)
}

/// When to look again: at the first target's pending deadline, or after [`POLL_ELSEWHERE`]
/// when a Node was read from elsewhere (no event says when it changes), whichever comes
/// first (the runner keeps one deadline per object).
fn soonest(
    deadline: Option<chrono::DateTime<chrono::Utc>>,
    elsewhere: bool,
    now: chrono::DateTime<chrono::Utc>,
) -> Next {
    let poll = chrono::Duration::from_std(POLL_ELSEWHERE).unwrap_or(chrono::Duration::MAX);
    match (deadline, elsewhere) {
        (Some(at), true) if now.checked_add_signed(poll).is_none_or(|p| at <= p) => Next::At(at),
        (_, true) => Next::After(POLL_ELSEWHERE),
        (Some(at), false) => Next::At(at),
        (None, false) => Next::AwaitChange,
    }
}

/// The message of a `RemediationAllowed` False condition, in upstream's words.
fn restricted_message(mhc: &MachineHealthCheck, total: i32, unhealthy: usize) -> String {
    let trigger = mhc
        .spec
        .remediation
        .as_ref()
        .and_then(|r| r.get("triggerIf"));
    match trigger
        .and_then(|t| t.get("unhealthyInRange"))
        .and_then(|v| v.as_str())
    {
        Some(range) => format!("Remediation is not allowed, the number of not started or unhealthy machines does not fall within the range (total: {total}, unhealthy: {unhealthy}, unhealthyRange: {range})"),
        None => {
            let max = trigger
                .and_then(|t| t.get("unhealthyLessThanOrEqualTo"))
                .map(|v| v.as_str().map(str::to_string).unwrap_or_else(|| v.to_string()))
                .unwrap_or_else(|| "100%".into());
            format!("Remediation is not allowed, the number of not started or unhealthy machines exceeds maxUnhealthy (total: {total}, unhealthy: {unhealthy}, maxUnhealthy: {max})")
        }
    }
}

/// A health check whose spec cannot be read: said in its `RemediationAllowed` condition
/// rather than retried for ever.
async fn report_invalid(
    api: &Api<MachineHealthCheck>,
    mhc: &MachineHealthCheck,
    mut conds: Vec<Condition>,
    why: String,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<Next, Error> {
    conditions::set(
        &mut conds,
        Condition::unknown("RemediationAllowed", "InternalError", why),
        now,
    );
    conditions::sort(&mut conds);
    let status = MachineHealthCheckStatus {
        conditions: Some(conds),
        ..mhc.status.clone().unwrap_or_default()
    };
    apply_status(api, mhc, MANAGER, &status).await?;
    Ok(Next::AwaitChange)
}

/// The check's targets (its selector's Machines of its cluster, but those paused or marked
/// to skip remediation), each checked; and whether any Node was read from a cluster this
/// process does not host.
async fn check_targets(
    mhc: &MachineHealthCheck,
    r: &Reconciler<MachineHealthCheck>,
    cluster: &Cluster,
    checks: &targets::Checks,
) -> Result<(Vec<Checked>, bool), Error> {
    let ns = mhc.namespace().unwrap_or_default();
    let selector = super::machineset::selector_string(&mhc.spec.selector);
    let selector = LabelSelector::parse(&selector).map_err(Error::Invalid)?;
    let core = &r.core;
    let machines: Vec<Machine> = core
        .in_cluster(&core.machines, &ns, &mhc.spec.cluster_name)
        .await?
        .iter()
        .filter(|m| selector.matches(m.labels()))
        .map(|m| (**m).clone())
        .collect();
    let now = r.core.ctx.now();
    let mut checked = Vec::new();
    let mut elsewhere = false;
    for m in machines.into_iter().filter(|m| {
        m.spec.cluster_name == mhc.spec.cluster_name
            && !m.annotations().contains_key(crate::capi::PAUSED_ANNOTATION)
            && !m.annotations().contains_key(targets::SKIP_ANNOTATION)
    }) {
        let (node, remote) = node_seen(r, &ns, &mhc.spec.cluster_name, &m).await?;
        elsewhere |= remote;
        let verdict = targets::check(&m, &node, cluster, checks, now);
        checked.push(Checked {
            machine: m,
            verdict,
        });
    }
    if !checked.is_empty() {
        r.core.nodes.follow(&ns, &mhc.spec.cluster_name);
    }
    Ok((checked, elsewhere))
}

/// The Machine's Node as its cluster has it, and whether it was read through the cluster's
/// endpoint (a cluster this process does not host).
async fn node_seen(
    r: &Reconciler<MachineHealthCheck>,
    ns: &str,
    cluster: &str,
    m: &Machine,
) -> Result<(NodeSeen, bool), Error> {
    let Some(name) = m
        .status
        .as_ref()
        .and_then(|s| s.node_ref.as_ref())
        .map(|n| n.name.clone())
    else {
        return Ok((NodeSeen::NotYet, false));
    };
    let reader = r
        .core
        .nodes
        .reader(&r.core.workloads, &r.client(), ns, cluster)
        .await?;
    let found = reader.get(&name).await?;
    let remote = reader.is_remote();
    Ok((
        match found {
            Some(n) => NodeSeen::Found(Box::new(n)),
            None => NodeSeen::Deleted(name),
        },
        remote,
    ))
}

/// Writes each target's `HealthCheckSucceeded`; when remediation is allowed, hands the failed
/// ones over (`OwnerRemediated`, or an external remediation request), and withdraws external
/// requests for Machines that recovered.
async fn mark_targets(
    mhc: &MachineHealthCheck,
    r: &Reconciler<MachineHealthCheck>,
    cluster: &Cluster,
    checked: &[Checked],
    allowed: bool,
) -> Result<(), Error> {
    let ns = mhc.namespace().unwrap_or_default();
    let api: Api<Machine> = r.api(&ns);
    let now = r.core.ctx.now();
    let template = external::template_ref(mhc);
    for Checked {
        machine: m,
        verdict,
    } in checked
    {
        match verdict {
            Verdict::Pending(_) => {}
            Verdict::Healthy => {
                let ok = Condition::new("HealthCheckSucceeded", true, "HealthCheckSucceeded", "");
                remediation::set(&api, m, MANAGER, vec![ok], now).await?;
                if let Some(t) = &template {
                    external::withdraw(r, m, t).await?;
                }
            }
            Verdict::Unhealthy { reason, message } => {
                let failed = Condition::new("HealthCheckSucceeded", false, reason, message.clone());
                let mut mine = vec![failed];
                let hand_over =
                    allowed && !cluster.paused() && m.metadata.deletion_timestamp.is_none();
                if hand_over && template.is_some() {
                    mine.push(Condition::new(
                        "ExternallyRemediated",
                        false,
                        "WaitingForRemediation",
                        "Waiting for remediation",
                    ));
                }
                remediation::set(&api, m, MANAGER, mine, now).await?;
                if !hand_over {
                    continue;
                }
                match &template {
                    Some(t) => external::request(r, m, t).await?,
                    None if remediation::owner_reason(m).is_none()
                        || m.status
                            .as_ref()
                            .and_then(|s| s.conditions.as_deref())
                            .is_some_and(|c| conditions::is_true(c, "OwnerRemediated")) =>
                    {
                        let waiting = remediation::owner_condition(
                            "WaitingForRemediation",
                            "Waiting for remediation",
                        );
                        remediation::set(&api, m, OWNER_MANAGER, vec![waiting], now).await?;
                    }
                    None => {}
                }
                r.core
                    .ctx
                    .event(
                        m,
                        false,
                        "MachineMarkedUnhealthy",
                        format!(
                            "Machine {ns}/{} has been marked as unhealthy by {ns}/{}",
                            m.name_any(),
                            mhc.name_any()
                        ),
                    )
                    .await;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{TimeZone, Utc};

    #[test]
    fn the_earlier_of_a_deadline_and_the_poll_is_kept() {
        let now = Utc.with_ymd_and_hms(2026, 1, 1, 10, 0, 0).unwrap();
        let soon = now + chrono::Duration::seconds(5);
        let late = now + chrono::Duration::seconds(60);
        assert_eq!(soonest(None, false, now), Next::AwaitChange);
        assert_eq!(soonest(Some(late), false, now), Next::At(late));
        assert_eq!(soonest(None, true, now), Next::After(POLL_ELSEWHERE));
        assert_eq!(soonest(Some(soon), true, now), Next::At(soon));
        assert_eq!(soonest(Some(late), true, now), Next::After(POLL_ELSEWHERE));
    }
}
