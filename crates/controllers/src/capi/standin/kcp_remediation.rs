//! KubeadmControlPlane's remediation of control-plane Machines that failed their health
//! check, one at a time and never at the cost of etcd's quorum, as upstream's control plane
//! does it: the Machine goes (its etcd member first, through the pre-terminate hook), and the
//! control plane's scale-up makes its replacement, annotated with what it replaces.

use super::delete_if_present;
use super::merge_patch;
use super::remediation::{self, OWNER_MANAGER};
use super::{Error, Reconciler};
use crate::capi::core::{KubeadmControlPlane, Machine};
use infrasim_controller_runtime::conditions;
use kube::api::Api;
use kube::ResourceExt;
use serde_json::json;

/// On the control plane while one of its Machines is being replaced.
pub const IN_PROGRESS_ANNOTATION: &str = "controlplane.cluster.x-k8s.io/remediation-in-progress";
/// On the replacement: the remediation it comes from.
pub const FOR_ANNOTATION: &str = "controlplane.cluster.x-k8s.io/remediation-for";

/// Clears remediation marks of Machines that recovered, ends a remediation whose replacement
/// exists, and remediates one Machine if it safely can. Returns whether it deleted one.
pub async fn remediate(
    kcp: &KubeadmControlPlane,
    r: &Reconciler<KubeadmControlPlane>,
    machines: &[Machine],
    initialized: bool,
) -> Result<bool, Error> {
    let ns = kcp.namespace().unwrap_or_default();
    let api: Api<Machine> = r.api(&ns);
    let now = r.core.ctx.now();
    for m in machines.iter().filter(|m| remediation::recovered(m)) {
        remediation::set(&api, m, OWNER_MANAGER, vec![], now).await?;
    }
    let mut in_progress = kcp.annotations().get(IN_PROGRESS_ANNOTATION).cloned();
    if let Some(data) = &in_progress {
        let since = serde_json::from_str::<serde_json::Value>(data)
            .ok()
            .and_then(|d| {
                d.get("timestamp")
                    .and_then(|t| t.as_str())
                    .and_then(conditions::parse_time)
            });
        // The replacement carries the remediation's data; a Machine made since counts too,
        // as upstream counts it (within the second, only the annotation tells).
        let replaced = machines.iter().any(|m| {
            if m.annotations().get(FOR_ANNOTATION) == Some(data) {
                return true;
            }
            let created = m
                .metadata
                .creation_timestamp
                .as_ref()
                .and_then(|t| conditions::parse_time(&t.0.to_string()));
            matches!((created, since), (Some(c), Some(s)) if c > s)
        });
        if replaced {
            set_in_progress(r, kcp, None).await?;
            in_progress = None;
        }
    }
    let mut waiting: Vec<&Machine> = machines
        .iter()
        .filter(|m| remediation::to_remediate(m))
        .collect();
    // Marked by hand first, then the oldest (`machines` is oldest first).
    waiting.sort_by_key(|m| {
        !m.annotations()
            .contains_key(super::healthcheck::targets::REMEDIATE_ANNOTATION)
    });
    let Some(victim) = waiting.first().copied() else {
        return Ok(false);
    };
    if in_progress.is_some() {
        return Ok(false);
    }
    if let Some((reason, why)) = blocked(machines, victim, initialized) {
        let c = remediation::owner_condition(reason, why);
        remediation::set(&api, victim, OWNER_MANAGER, vec![c], now).await?;
        return Ok(false);
    }
    let deleting = remediation::owner_condition("MachineDeleting", "Machine is deleting");
    remediation::set(&api, victim, OWNER_MANAGER, vec![deleting], now).await?;
    let data = json!({"machine": victim.name_any(), "timestamp": conditions::timestamp(now), "retryCount": 0});
    set_in_progress(r, kcp, Some(data.to_string())).await?;
    delete_if_present(&api, &victim.name_any()).await?;
    r.core
        .ctx
        .event(
            kcp,
            false,
            "ScalingDown",
            format!(
                "deleting control-plane Machine {} (remediating unhealthy Machine)",
                victim.name_any()
            ),
        )
        .await;
    Ok(true)
}

/// Why `victim` cannot be remediated now, as upstream's control plane says it (reason and
/// message of its `OwnerRemediated` condition), if it cannot.
fn blocked(
    machines: &[Machine],
    victim: &Machine,
    initialized: bool,
) -> Option<(&'static str, String)> {
    if !initialized {
        // The first control-plane Machine failing to come up is replaced, as upstream does.
        return None;
    }
    if machines.len() <= 1 {
        return Some((
            "CannotBeRemediated",
            "KubeadmControlPlane can't remediate if current replicas are less or equal to 1".into(),
        ));
    }
    let ready = |m: &Machine| {
        m.status
            .as_ref()
            .and_then(|s| s.conditions.as_deref())
            .is_some_and(|c| conditions::is_true(c, "Ready"))
    };
    let others = || machines.iter().filter(|m| m.uid() != victim.uid());
    if others().any(|m| m.metadata.deletion_timestamp.is_some()) {
        return Some((
            "RemediationDeferred",
            "KubeadmControlPlane waiting for control plane Machine deletion to complete before triggering remediation".into(),
        ));
    }
    if others().any(|m| !ready(m) && !remediation::to_remediate(m)) {
        return Some((
            "RemediationDeferred",
            "KubeadmControlPlane waiting for control plane Machine provisioning to complete before triggering remediation".into(),
        ));
    }
    // etcd keeps its quorum without the victim: a majority of the members left are healthy.
    let left = machines.len() - 1;
    let healthy_left = others().filter(|m| ready(m)).count();
    if healthy_left < left / 2 + 1 {
        return Some((
            "CannotBeRemediated",
            "KubeadmControlPlane can't remediate this Machine because this could result in loosing Kubernetes control plane components or in etcd quorum loss".into(),
        ));
    }
    None
}

async fn set_in_progress(
    r: &Reconciler<KubeadmControlPlane>,
    kcp: &KubeadmControlPlane,
    value: Option<String>,
) -> Result<(), Error> {
    let api: Api<KubeadmControlPlane> = r.api(&kcp.namespace().unwrap_or_default());
    let patch = json!({"metadata": {"annotations": {IN_PROGRESS_ANNOTATION: value}}});
    merge_patch(&api, &kcp.name_any(), &patch).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn machine(name: &str, ready: bool, failed: bool) -> Machine {
        let mut conds = vec![
            json!({"type": "Ready", "status": if ready {"True"} else {"False"}, "reason": "r", "lastTransitionTime": "2026-01-01T00:00:00Z"}),
        ];
        if failed {
            conds.push(json!({"type": "HealthCheckSucceeded", "status": "False", "reason": "UnhealthyNode", "lastTransitionTime": "2026-01-01T00:00:00Z"}));
            conds.push(json!({"type": "OwnerRemediated", "status": "False", "reason": "WaitingForRemediation", "lastTransitionTime": "2026-01-01T00:00:00Z"}));
        }
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "ns", "uid": name},
            "spec": {"clusterName": "c", "bootstrap": {}, "infrastructureRef": {"apiGroup": "g", "kind": "K", "name": name}},
            "status": {"conditions": conds},
        }))
        .unwrap()
    }

    #[test]
    fn remediation_keeps_etcd_quorum_and_waits_for_the_others() {
        let three = [
            machine("a", false, true),
            machine("b", true, false),
            machine("c", true, false),
        ];
        assert_eq!(blocked(&three, &three[0], true), None);
        // Two of three failed: removing one would leave one healthy member of two.
        let two_bad = [
            machine("a", false, true),
            machine("b", false, true),
            machine("c", true, false),
        ];
        assert_eq!(
            blocked(&two_bad, &two_bad[0], true).map(|b| b.0),
            Some("CannotBeRemediated")
        );
        let alone = [machine("a", false, true)];
        assert_eq!(
            blocked(&alone, &alone[0], true).map(|b| b.0),
            Some("CannotBeRemediated")
        );
        assert_eq!(
            blocked(&alone, &alone[0], false),
            None,
            "a first machine that never came up is replaced"
        );
        let provisioning = [
            machine("a", false, true),
            machine("b", false, false),
            machine("c", true, false),
        ];
        assert_eq!(
            blocked(&provisioning, &provisioning[0], true).map(|b| b.0),
            Some("RemediationDeferred")
        );
    }
}
