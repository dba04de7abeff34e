//! The health of each control-plane Machine's components as upstream's KubeadmControlPlane
//! reads it from the workload cluster and writes it on the Machine: `APIServerPodHealthy`,
//! `ControllerManagerPodHealthy`, `SchedulerPodHealthy` and `EtcdPodHealthy` from the static
//! pods on the machine's Node, `EtcdMemberHealthy` from its etcd member; and what the control
//! plane's own `ControlPlaneComponentsHealthy` and `EtcdClusterHealthy` make of them (one
//! block per group of Machines saying the same, as upstream aggregates them).
//!
//! The verdicts are pure functions of what was read (the Node, the pods, the etcd membership),
//! so each of upstream's cases is tested here; [`update`] reads (a hosted cluster in place,
//! another through its kubeconfig) and writes. A cluster hosted elsewhere has no etcd member
//! read: its `EtcdClusterHealthy` says healthy once the control plane is initialized.

use super::nodes::NodeReader;
use super::{owned_conditions, Error, Reconciler};
use crate::capi::core::{Cluster, KubeadmControlPlane, Machine};
use crate::capi::infra::cloud_key;
use chrono::{DateTime, Utc};
use infrasim_controller_runtime::conditions::{self, Condition};
use infrasim_controller_runtime::reconcile::Next;
use infrasim_etcd_sim::pb::etcdserverpb::AlarmType;
use infrasim_etcd_sim::MembershipImage;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::Api;
use kube::ResourceExt;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// The static pods kubeadm runs on a control-plane node, each with the Machine condition
/// that reports it.
pub const STATIC_PODS: [(&str, &str); 4] = [
    ("kube-apiserver", "APIServerPodHealthy"),
    ("kube-controller-manager", "ControllerManagerPodHealthy"),
    ("kube-scheduler", "SchedulerPodHealthy"),
    ("etcd", "EtcdPodHealthy"),
];

/// The condition of a Machine's etcd member.
pub const ETCD_MEMBER: &str = "EtcdMemberHealthy";

/// The conditions of the static pods, in [`STATIC_PODS`]' order.
fn pod_types() -> [&'static str; 4] {
    STATIC_PODS.map(|(_, t)| t)
}

/// Every Machine condition the control plane writes.
pub fn conditions_written() -> [&'static str; 5] {
    let [a, b, c, d] = pod_types();
    [a, b, c, d, ETCD_MEMBER]
}

const INSPECTION_FAILED: &str = "InspectionFailed";

/// Every static pod's condition Unknown, for `why`.
fn pods_unknown(why: &str) -> Vec<Condition> {
    (pod_types().iter())
        .map(|t| Condition::unknown(t, INSPECTION_FAILED, why))
        .collect()
}

/// What is said of every condition of a Machine that cannot be inspected yet or any more
/// (no Node, being deleted), or `None` when it can be.
fn uninspectable(m: &Machine, types: &[&str]) -> Option<Vec<Condition>> {
    let all = |c: &dyn Fn(&str) -> Condition| Some(types.iter().map(|t| c(t)).collect());
    if m.metadata.deletion_timestamp.is_some() {
        return all(&|t| Condition::new(t, false, "Deleting", "Machine is deleting"));
    }
    if m.status
        .as_ref()
        .and_then(|s| s.node_ref.as_ref())
        .is_some()
    {
        return None;
    }
    let why = match &m.spec.provider_id {
        Some(id) => format!("Waiting for a Node with spec.providerID {id} to exist"),
        None => format!(
            "Waiting for {} to report spec.providerID",
            m.spec.infrastructure_ref.kind
        ),
    };
    all(&|t| Condition::unknown(t, INSPECTION_FAILED, why.clone()))
}

/// The field manager the control plane writes its Machines' conditions under.
const MANAGER: &str = "infrasim-capi-core/kcp";

/// How soon the control plane looks again while a Machine's components are not all healthy.
/// Nothing in the management plane changes when a static pod comes up, and following every
/// cluster's pods to be woken by them cost a tenth more CPU at 1,000 clusters (each pod's
/// step a write to the Machine, and a wake-up of everything that follows Machines); polling
/// only the control planes that wait costs nothing once they are healthy.
pub const RECHECK: Duration = Duration::from_secs(5);

/// Reads the components of every Machine of the control plane, writes their conditions on
/// the Machines that have a Node, and sets the control plane's
/// `ControlPlaneComponentsHealthy` and `EtcdClusterHealthy` in `conds` (both unknown until the
/// control plane is initialized). Answers when to look again: [`RECHECK`] while a Machine
/// with a Node reports a component not healthy.
pub(super) async fn update(
    r: &Reconciler<KubeadmControlPlane>,
    cluster: &Cluster,
    machines: &[Machine],
    initialized: bool,
    conds: &mut Vec<Condition>,
    now: DateTime<Utc>,
) -> Result<Option<Duration>, Error> {
    if !initialized {
        let why = "Waiting for the control plane to be initialized";
        for t in ["EtcdClusterHealthy", "ControlPlaneComponentsHealthy"] {
            conditions::set(conds, Condition::unknown(t, INSPECTION_FAILED, why), now);
        }
        return Ok(None);
    }
    let ns = cluster.namespace().unwrap_or_default();
    let name = cluster.name_any();
    let (workloads, client) = (&r.core.workloads, r.client());
    let reader = r.core.nodes.reader(workloads, &client, &ns, &name).await;
    let etcd = r.core.ctx.cloud.etcd(&cloud_key(&name, &ns));
    // A cluster hosted here is read in place; one hosted by another process (a sharded
    // fleet's) through its endpoint, and only when a Machine has a Node to report on (a
    // Machine without one is not inspected, so the connection would be for nothing).
    let inspected = machines.iter().any(|m| {
        m.status
            .as_ref()
            .and_then(|s| s.node_ref.as_ref())
            .is_some()
    });
    let membership = match &etcd {
        Some(e) => Ok(e.membership()),
        None if inspected => super::etcd::membership(&client, &ns, &name)
            .await
            .map_err(|e| e.to_string()),
        None => Err("no Machine has a Node yet".to_string()),
    };
    let api: Api<Machine> = r.api(&ns);
    let written = conditions_written();
    let mut seen = Vec::new();
    let mut waiting = false;
    for m in machines {
        let mut wanted = match &reader {
            Ok(reader) => read_pods(m, reader).await,
            Err(e) => pods_unknown(&format!("Failed to get the Node hosting the Pod: {e}")),
        };
        let node = m.status.as_ref().and_then(|s| s.node_ref.as_ref());
        let down = node.is_some_and(|n| etcd.as_ref().is_some_and(|e| e.member_down(&n.name)));
        wanted.push(match &membership {
            Ok(membership) => etcd_member_condition(m, membership, down),
            Err(why) => etcd_member_unread(m, why),
        });
        // A Machine without a Node gets its conditions once it has one: upstream writes
        // "Waiting for a Node" first, two writes more per machine for what its phase says.
        if m.status
            .as_ref()
            .and_then(|s| s.node_ref.as_ref())
            .is_some()
        {
            owned_conditions::set_owned(&api, m, MANAGER, &written, wanted.clone(), now).await?;
            let deleting = m.metadata.deletion_timestamp.is_some();
            waiting |= !deleting && !wanted.iter().all(Condition::is_true);
        }
        seen.push((m, wanted));
    }
    let components = aggregate(
        "ControlPlaneComponentsHealthy",
        &pod_types(),
        &seen,
        "control plane",
    );
    conditions::set(conds, components, now);
    let etcd_health = aggregate("EtcdClusterHealthy", &[ETCD_MEMBER], &seen, "etcd member");
    conditions::set(conds, etcd_health, now);
    Ok(waiting.then_some(RECHECK))
}

/// `next`, or sooner: `recheck` from `now` if that comes first.
pub(super) fn sooner(next: Next, recheck: Option<Duration>, now: DateTime<Utc>) -> Next {
    let Some(recheck) = recheck else {
        return next;
    };
    match next {
        Next::AwaitChange => Next::After(recheck),
        Next::After(d) => Next::After(d.min(recheck)),
        Next::At(t) => {
            let again = chrono::Duration::from_std(recheck).map(|d| now + d);
            Next::At(again.map_or(t, |again| t.min(again)))
        }
    }
}

/// The static pods' conditions of Machine `m`, read through `reader`.
async fn read_pods(m: &Machine, reader: &NodeReader) -> Vec<Condition> {
    let Some(node) = m.status.as_ref().and_then(|s| s.node_ref.as_ref()) else {
        return pod_conditions(m, None, |_| None);
    };
    let found = match reader.get(&node.name).await {
        Ok(found) => found,
        Err(e) => return pods_unknown(&format!("Failed to get the Node hosting the Pod: {e}")),
    };
    let mut pods = BTreeMap::new();
    for (component, _) in STATIC_PODS {
        let name = format!("{component}-{}", node.name);
        if let Ok(Some(pod)) = reader.system_pod(&name).await {
            pods.insert(name, pod);
        }
    }
    pod_conditions(m, found.as_ref(), |name| pods.get(name).cloned())
}

/// The static pods' conditions of Machine `m`, whose Node is `node` (`None`: not found), each
/// pod read by `pod` (by name, in `kube-system`).
pub fn pod_conditions(
    m: &Machine,
    node: Option<&Node>,
    pod: impl Fn(&str) -> Option<Pod>,
) -> Vec<Condition> {
    if let Some(said) = uninspectable(m, &pod_types()) {
        return said;
    }
    let node_name = m
        .status
        .as_ref()
        .and_then(|s| s.node_ref.as_ref())
        .map(|n| n.name.clone())
        .unwrap_or_default();
    let Some(node) = node else {
        return pods_unknown(&format!("Node {node_name} does not exist"));
    };
    if unreachable(node) {
        return pods_unknown(&format!("Node {node_name} is unreachable"));
    }
    if node_ready(node).as_deref() == Some("Unknown") {
        return pods_unknown("Node Ready condition is Unknown, Pod data might be stale");
    }
    (STATIC_PODS.iter())
        .map(|(component, t)| pod_condition(t, pod(&format!("{component}-{node_name}")).as_ref()))
        .collect()
}

fn unreachable(node: &Node) -> bool {
    (node.spec.as_ref().and_then(|s| s.taints.as_ref()))
        .into_iter()
        .flatten()
        .any(|t| t.key == "node.kubernetes.io/unreachable" && t.effect == "NoExecute")
}

fn node_ready(node: &Node) -> Option<String> {
    (node.status.as_ref().and_then(|s| s.conditions.as_ref()))
        .into_iter()
        .flatten()
        .find(|c| c.type_ == "Ready")
        .map(|c| c.status.clone())
}

/// The condition `t` of one static pod, by its phase, conditions and containers.
fn pod_condition(t: &str, pod: Option<&Pod>) -> Condition {
    let Some(pod) = pod else {
        return Condition::new(t, false, "DoesNotExist", "Pod does not exist");
    };
    let status = pod.status.clone().unwrap_or_default();
    let pod_condition = |ty: &str| {
        (status.conditions.iter().flatten())
            .find(|c| c.type_ == ty)
            .map(|c| c.status.as_str())
            .unwrap_or("Unknown")
            .to_string()
    };
    let provisioning = |why: &str| Condition::new(t, false, "Provisioning", why);
    let terminated = "All the containers have been terminated";
    match status.phase.as_deref().unwrap_or("") {
        "Pending" if pod_condition("PodScheduled") != "True" => {
            provisioning("Waiting to be scheduled")
        }
        "Pending" if pod_condition("Initialized") != "True" => {
            provisioning("Running init containers")
        }
        "Pending" => provisioning(""),
        "Running" if pod_condition("Ready") == "True" => Condition::new(t, true, "Running", ""),
        "Running" => running_not_ready(t, &status),
        "Succeeded" | "Failed" => Condition::new(t, false, "Failed", terminated),
        _ => Condition::unknown(t, INSPECTION_FAILED, "Pod is reporting Unknown status"),
    }
}

/// A running pod that is not Ready: its containers say why, if they do.
fn running_not_ready(t: &str, status: &k8s_openapi::api::core::v1::PodStatus) -> Condition {
    let containers = status.container_statuses.iter().flatten();
    let crashed = containers.clone().any(|c| {
        (c.last_state.as_ref().and_then(|s| s.terminated.as_ref()))
            .is_some_and(|t| t.exit_code != 0)
    });
    let waiting: Vec<String> = (containers.clone())
        .filter_map(|c| c.state.as_ref()?.waiting.as_ref()?.reason.clone())
        .collect();
    if !waiting.is_empty() {
        let reason = if crashed { "Failed" } else { "Provisioning" };
        return Condition::new(t, false, reason, waiting.join(", "));
    }
    let terminated: Vec<String> = containers
        .filter_map(|c| c.state.as_ref()?.terminated.as_ref()?.reason.clone())
        .collect();
    if !terminated.is_empty() {
        return Condition::new(t, false, "Failed", terminated.join(", "));
    }
    Condition::new(
        t,
        false,
        "Provisioning",
        "Waiting for startup or readiness probes",
    )
}

/// `EtcdMemberHealthy` of Machine `m`, from its cluster's etcd `membership` and whether its
/// member is `down` (its etcd does not answer).
pub fn etcd_member_condition(m: &Machine, membership: &MembershipImage, down: bool) -> Condition {
    if let Some(mut said) = uninspectable(m, &[ETCD_MEMBER]) {
        return said.remove(0);
    }
    let machine = m.name_any();
    let node = (m.status.as_ref().and_then(|s| s.node_ref.as_ref()))
        .map(|n| n.name.clone())
        .unwrap_or_default();
    let not_healthy = |why: String| Condition::new(ETCD_MEMBER, false, "NotHealthy", why);
    if down {
        return not_healthy(format!(
            "Failed to connect to the etcd Pod on the {node} Node: connection refused"
        ));
    }
    let Some(member) = membership.members.iter().find(|m| m.name == node) else {
        let names: Vec<&str> = membership.members.iter().map(|m| m.name.as_str()).collect();
        return not_healthy(format!(
            "Etcd reports the cluster is composed by [{}], but the etcd member hosted on Machine {machine} ({node}) is not included",
            names.join(" ")
        ));
    };
    let alarms: Vec<&str> = (membership.alarms.iter())
        .filter(|(id, _)| *id == member.id)
        .filter_map(|(_, alarm)| AlarmType::try_from(*alarm).ok())
        .filter(|alarm| *alarm != AlarmType::None)
        .map(|alarm| alarm.as_str_name())
        .collect();
    if !alarms.is_empty() {
        return not_healthy(format!("Etcd reports alarms: {}", alarms.join(", ")));
    }
    Condition::new(ETCD_MEMBER, true, "Healthy", "")
}

/// `EtcdMemberHealthy` of Machine `m` when its cluster's etcd could not be asked (`why`).
fn etcd_member_unread(m: &Machine, why: &str) -> Condition {
    if let Some(mut said) = uninspectable(m, &[ETCD_MEMBER]) {
        return said.remove(0);
    }
    Condition::unknown(
        ETCD_MEMBER,
        INSPECTION_FAILED,
        format!("Failed to get the etcd members: {why}"),
    )
}

/// The control plane's condition `type_` summing up the Machines' conditions `types` (each
/// Machine given with its conditions): False naming the Machines that report a problem,
/// Unknown when some cannot be inspected, True when all is well. `note` names what is summed
/// ("control plane", "etcd member") when no Machine reports anything.
pub fn aggregate(
    type_: &str,
    types: &[&str],
    machines: &[(&Machine, Vec<Condition>)],
    note: &str,
) -> Condition {
    let (mut errors, mut unknown, mut fine) = (false, false, false);
    let mut by_message: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (m, conds) in machines {
        let mut lines = Vec::new();
        let mut count = 0;
        let mut messages = BTreeSet::new();
        for c in types.iter().filter_map(|t| conditions::find(conds, t)) {
            count += 1;
            messages.insert(c.message.clone());
            let line = || {
                let said = match c.message.is_empty() {
                    true => format!("condition is {}", c.status),
                    false => c.message.clone(),
                };
                format!("  * {}: {said}", c.type_)
            };
            match c.status.as_str() {
                "True" => fine = true,
                "False" => {
                    errors = true;
                    lines.push(line());
                }
                // A machine without a provider ID is still coming up: not a problem yet.
                _ if m.spec.provider_id.is_none() => fine = true,
                _ => {
                    unknown = true;
                    lines.push(line());
                }
            }
        }
        if lines.is_empty() {
            continue;
        }
        let message = match (count > 1, messages.len() == 1) {
            (true, true) => format!(
                "  * Control plane components: {}",
                messages.into_iter().next().unwrap_or_default()
            ),
            _ => lines.join("\n"),
        };
        by_message.entry(message).or_default().push(m.name_any());
    }
    let message = blocks(by_message);
    if errors {
        Condition::new(type_, false, "NotHealthy", message)
    } else if unknown {
        Condition::unknown(type_, "HealthUnknown", message)
    } else if fine {
        Condition::new(type_, true, "Healthy", "")
    } else {
        let why = format!("No Machines reporting {note} status");
        Condition::unknown(type_, "HealthUnknown", why)
    }
}

/// One block per message, the Machines that say it first named ("* Machines a, b:"), the
/// message said by the most Machines first.
fn blocks(by_message: BTreeMap<String, Vec<String>>) -> String {
    let mut blocks: Vec<(String, Vec<String>)> = by_message.into_iter().collect();
    for (_, names) in &mut blocks {
        names.sort();
    }
    blocks.sort_by(|(_, a), (_, b)| {
        b.len()
            .cmp(&a.len())
            .then_with(|| a.join(",").cmp(&b.join(",")))
    });
    (blocks.into_iter())
        .map(|(message, names)| {
            let noun = if names.len() > 1 {
                "Machines"
            } else {
                "Machine"
            };
            format!("* {noun} {}:\n{message}", list(&names, 3))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// At most `max` names, then how many more.
fn list(names: &[String], max: usize) -> String {
    let shown = names[..names.len().min(max)].join(", ");
    match names.len() > max {
        true => format!("{shown}, ... ({} more)", names.len() - max),
        false => shown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use infrasim_etcd_sim::Member;
    use serde_json::json;

    fn machine(name: &str, node: Option<&str>) -> Machine {
        let mut m: Machine = serde_json::from_value(json!({
            "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
            "metadata": {"name": name, "namespace": "ns"},
            "spec": {"clusterName": "c", "bootstrap": {}, "providerID": format!("in-memory://{name}"),
                     "infrastructureRef": {"apiGroup": "x", "kind": "DevMachine", "name": name}},
        }))
        .expect("a machine");
        if let Some(node) = node {
            m.status = serde_json::from_value(json!({"nodeRef": {"name": node}})).ok();
        }
        m
    }

    fn node(ready: &str, unreachable: bool) -> Node {
        let taints = match unreachable {
            true => json!([{"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}]),
            false => json!([]),
        };
        serde_json::from_value(json!({
            "metadata": {"name": "n1"}, "spec": {"taints": taints},
            "status": {"conditions": [{"type": "Ready", "status": ready}]},
        }))
        .expect("a node")
    }

    fn pod(phase: &str, ready: &str, waiting: Option<&str>) -> Pod {
        let state = match waiting {
            Some(reason) => json!({"waiting": {"reason": reason}}),
            None => json!({"running": {}}),
        };
        serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "kube-system"},
            "status": {"phase": phase, "conditions": [
                {"type": "PodScheduled", "status": "True"}, {"type": "Initialized", "status": "True"},
                {"type": "Ready", "status": ready}],
                "containerStatuses": [{"name": "c", "image": "i", "imageID": "", "ready": ready == "True",
                                       "restartCount": 0, "state": state}]},
        }))
        .expect("a pod")
    }

    fn said(conds: &[Condition]) -> Vec<(String, String, String, String)> {
        (conds.iter())
            .map(|c| {
                (
                    c.type_.clone(),
                    c.status.clone(),
                    c.reason.clone(),
                    c.message.clone(),
                )
            })
            .collect()
    }

    #[test]
    fn each_static_pod_is_read_on_a_healthy_node() {
        let m = machine("m1", Some("n1"));
        let conds = pod_conditions(&m, Some(&node("True", false)), |name| match name {
            "kube-apiserver-n1" | "etcd-n1" => Some(pod("Running", "True", None)),
            "kube-scheduler-n1" => Some(pod("Running", "False", Some("CrashLoopBackOff"))),
            _ => None,
        });
        assert_eq!(
            said(&conds),
            vec![
                (
                    "APIServerPodHealthy".into(),
                    "True".into(),
                    "Running".into(),
                    "".into()
                ),
                (
                    "ControllerManagerPodHealthy".into(),
                    "False".into(),
                    "DoesNotExist".into(),
                    "Pod does not exist".into()
                ),
                (
                    "SchedulerPodHealthy".into(),
                    "False".into(),
                    "Provisioning".into(),
                    "CrashLoopBackOff".into()
                ),
                (
                    "EtcdPodHealthy".into(),
                    "True".into(),
                    "Running".into(),
                    "".into()
                ),
            ]
        );
        let starting = pod_conditions(&m, Some(&node("True", false)), |_| {
            Some(pod("Running", "False", None))
        });
        assert_eq!(
            starting[0].message,
            "Waiting for startup or readiness probes"
        );
    }

    #[test]
    fn a_node_that_cannot_be_trusted_makes_every_pod_unknown() {
        let m = machine("m1", Some("n1"));
        let healthy = |_: &str| Some(pod("Running", "True", None));
        let unreachable = pod_conditions(&m, Some(&node("Unknown", true)), healthy);
        assert!(unreachable
            .iter()
            .all(|c| c.status == "Unknown" && c.message == "Node n1 is unreachable"));
        let stale = pod_conditions(&m, Some(&node("Unknown", false)), healthy);
        assert_eq!(
            stale[0].message,
            "Node Ready condition is Unknown, Pod data might be stale"
        );
        let gone = pod_conditions(&m, None, healthy);
        assert_eq!(gone[3].message, "Node n1 does not exist");
        let waiting = pod_conditions(&machine("m2", None), None, healthy);
        assert_eq!(
            waiting[0].message,
            "Waiting for a Node with spec.providerID in-memory://m2 to exist"
        );
    }

    fn member(id: u64, name: &str) -> Member {
        Member {
            id,
            name: name.into(),
            peer_urls: Vec::new(),
            client_urls: Vec::new(),
            is_learner: false,
        }
    }

    #[test]
    fn an_etcd_member_is_healthy_alarmed_down_or_missing() {
        let membership = MembershipImage {
            members: vec![member(1, "n1"), member(2, "n2")],
            alarms: vec![(2, AlarmType::Nospace as i32)],
            ..MembershipImage::default()
        };
        let check = |m: &str, node: &str, down: bool| {
            let c = etcd_member_condition(&machine(m, Some(node)), &membership, down);
            (c.status, c.message)
        };
        assert_eq!(check("m1", "n1", false), ("True".into(), "".into()));
        assert_eq!(
            check("m2", "n2", false),
            ("False".into(), "Etcd reports alarms: NOSPACE".into())
        );
        assert_eq!(
            check("m1", "n1", true).1,
            "Failed to connect to the etcd Pod on the n1 Node: connection refused"
        );
        assert_eq!(
            check("m3", "n3", false).1,
            "Etcd reports the cluster is composed by [n1 n2], but the etcd member hosted on Machine m3 (n3) is not included"
        );
    }

    #[test]
    fn a_recheck_comes_before_what_the_control_plane_waits_for_otherwise() {
        let now = Utc::now();
        assert_eq!(sooner(Next::AwaitChange, None, now), Next::AwaitChange);
        assert_eq!(
            sooner(Next::AwaitChange, Some(RECHECK), now),
            Next::After(RECHECK)
        );
        let later = now + chrono::Duration::days(1);
        assert_eq!(
            sooner(Next::At(later), Some(RECHECK), now),
            Next::At(now + chrono::Duration::seconds(5))
        );
        let soon = Duration::from_secs(1);
        assert_eq!(
            sooner(Next::After(soon), Some(RECHECK), now),
            Next::After(soon)
        );
    }

    #[test]
    fn the_control_plane_names_the_machines_that_report_problems_grouped_by_what_they_say() {
        let ok = |t: &str| Condition::new(t, true, "Running", "");
        let missing = |t: &str| Condition::new(t, false, "DoesNotExist", "Pod does not exist");
        let (m1, m2, m3) = (
            machine("m1", Some("n1")),
            machine("m2", Some("n2")),
            machine("m3", Some("n3")),
        );
        let types = ["APIServerPodHealthy", "SchedulerPodHealthy"];
        let all_ok = vec![ok(types[0]), ok(types[1])];
        let healthy = aggregate(
            "ControlPlaneComponentsHealthy",
            &types,
            &[(&m1, all_ok.clone())],
            "control plane",
        );
        assert_eq!(
            (healthy.status.as_str(), healthy.reason.as_str()),
            ("True", "Healthy")
        );

        let machines = [
            (&m1, vec![missing(types[0]), missing(types[1])]),
            (&m2, vec![ok(types[0]), missing(types[1])]),
            (&m3, vec![missing(types[0]), missing(types[1])]),
        ];
        let c = aggregate(
            "ControlPlaneComponentsHealthy",
            &types,
            &machines,
            "control plane",
        );
        assert_eq!(
            (c.status.as_str(), c.reason.as_str()),
            ("False", "NotHealthy")
        );
        assert_eq!(
            c.message,
            "* Machines m1, m3:\n  * Control plane components: Pod does not exist\n\
             * Machine m2:\n  * SchedulerPodHealthy: Pod does not exist"
        );
        let none = aggregate("EtcdClusterHealthy", &[ETCD_MEMBER], &[], "etcd member");
        assert_eq!(none.message, "No Machines reporting etcd member status");
        assert_eq!(
            list(&["a", "b", "c", "d", "e"].map(String::from), 3),
            "a, b, c, ... (2 more)"
        );
    }
}
