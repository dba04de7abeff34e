//! Whether one Machine passes its MachineHealthCheck, decided as upstream's controller decides
//! it: the remediate-machine annotation, then (once the cluster's infrastructure is ready and,
//! for workers, its control plane initialized) the Machine's own conditions, a deleted Node,
//! a Node that never came, and the Node's conditions, each held for its timeout. Pure: the
//! caller reads the objects and the injected clock.

use crate::capi::core::{Cluster, Machine};
use crate::capi::infra::timing::go_duration;
use chrono::{DateTime, Duration, Utc};
use infrasim_controller_runtime::conditions::{self, Condition};
use k8s_openapi::api::core::v1::Node;
use serde::Deserialize;
use serde_json::Value;

/// Marks a Machine for remediation whatever its health.
pub const REMEDIATE_ANNOTATION: &str = "cluster.x-k8s.io/remediate-machine";
/// Keeps a Machine out of health checks.
pub const SKIP_ANNOTATION: &str = "cluster.x-k8s.io/skip-remediation";
/// How long a Machine may go without a Node when the check does not say.
const DEFAULT_NODE_STARTUP_SECONDS: i64 = 600;

/// `spec.checks` of a v1beta2 MachineHealthCheck.
#[derive(Deserialize, Debug, Default, Clone, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Checks {
    pub node_startup_timeout_seconds: Option<i64>,
    #[serde(default)]
    pub unhealthy_node_conditions: Vec<UnhealthyCondition>,
    #[serde(default)]
    pub unhealthy_machine_conditions: Vec<UnhealthyCondition>,
}

/// A condition type and status that, held for `timeoutSeconds`, makes a target unhealthy.
#[derive(Deserialize, Debug, Default, Clone, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct UnhealthyCondition {
    #[serde(rename = "type")]
    pub type_: String,
    pub status: String,
    #[serde(default)]
    pub timeout_seconds: i64,
}

impl Checks {
    /// The checks of a spec's `checks` field; a malformed one is an error for the caller to
    /// report rather than a check silently skipped.
    pub fn from_spec(checks: Option<&Value>) -> Result<Checks, String> {
        match checks {
            None => Ok(Checks::default()),
            Some(v) => Checks::deserialize(v).map_err(|e| format!("spec.checks: {e}")),
        }
    }

    fn node_startup_timeout(&self) -> Option<Duration> {
        match self
            .node_startup_timeout_seconds
            .unwrap_or(DEFAULT_NODE_STARTUP_SECONDS)
        {
            0 => None,
            s => Some(Duration::seconds(s)),
        }
    }
}

/// What the workload cluster says of the Machine's Node.
#[derive(Debug, Clone)]
pub enum NodeSeen {
    /// The Machine has no `status.nodeRef` yet.
    NotYet,
    Found(Box<Node>),
    /// The Machine names a Node the cluster no longer has.
    Deleted(String),
}

/// The outcome of one target's check.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Passes: `HealthCheckSucceeded` True.
    Healthy,
    /// Fails: `HealthCheckSucceeded` False with this reason and message.
    Unhealthy { reason: String, message: String },
    /// Not decided yet; look again at this time, if one is known.
    Pending(Option<DateTime<Utc>>),
}

/// Checks one target. `now` is the injected clock's.
pub fn check(
    machine: &Machine,
    node: &NodeSeen,
    cluster: &Cluster,
    checks: &Checks,
    now: DateTime<Utc>,
) -> Verdict {
    if machine.annotations_contain(REMEDIATE_ANNOTATION) {
        return Verdict::Unhealthy {
            reason: "HasRemediateAnnotation".into(),
            message: "Health check failed: marked for remediation via cluster.x-k8s.io/remediate-machine annotation".into(),
        };
    }
    let cluster_conds = cluster
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default();
    let initialized = conditions::find(&cluster_conds, "ControlPlaneInitialized");
    let infra_ready = conditions::find(&cluster_conds, "InfrastructureReady");
    if !cluster.control_plane_initialized() && !machine.is_control_plane() {
        return Verdict::Pending(None);
    }
    if !infra_ready.is_some_and(Condition::is_true) && !cluster.infrastructure_provisioned() {
        return Verdict::Pending(None);
    }
    let machine_conds = machine
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default();
    let mut checker = Checker {
        checks,
        now,
        next: Vec::new(),
    };
    let machine_failures = checker.failures(
        &machine_conds,
        &checks.unhealthy_machine_conditions,
        "Machine",
    );
    let (node_reason, node_failures) =
        checker.node_failures(machine, node, &machine_conds, initialized, infra_ready);
    checker.verdict(machine, node, machine_failures, node_reason, node_failures)
}

/// One target's check under way: what every rule reads, and the times at which conditions
/// not yet held for their timeouts would fail, so a pending verdict says when to look again.
struct Checker<'a> {
    checks: &'a Checks,
    now: DateTime<Utc>,
    next: Vec<DateTime<Utc>>,
}

impl Checker<'_> {
    /// Why `found` fails `c` on `on` (a Machine or a Node), if it has held past its timeout;
    /// a match not yet held that long is noted as a time to look again.
    fn held(
        &mut self,
        found: Option<&Condition>,
        c: &UnhealthyCondition,
        on: &str,
    ) -> Option<String> {
        let found = found.filter(|f| f.status == c.status)?;
        let timeout = Duration::seconds(c.timeout_seconds.max(0));
        let since = found.since().unwrap_or(self.now);
        if since + timeout < self.now {
            return Some(format!(
                "Condition {} on {on} is reporting status {} with reason {} for more than {}",
                c.type_,
                c.status,
                found.reason,
                go_duration(timeout)
            ));
        }
        self.next.push(since + timeout + Duration::seconds(1));
        None
    }

    /// The failures among `conds` of every unhealthy condition the check lists for `on`.
    fn failures(
        &mut self,
        conds: &[Condition],
        unhealthy: &[UnhealthyCondition],
        on: &str,
    ) -> Vec<String> {
        unhealthy
            .iter()
            .filter_map(|c| self.held(conditions::find(conds, &c.type_), c, on))
            .collect()
    }

    /// The Node's failures and the reason they carry: deleted, never started within the
    /// startup timeout, or holding an unhealthy condition.
    fn node_failures(
        &mut self,
        machine: &Machine,
        node: &NodeSeen,
        machine_conds: &[Condition],
        initialized: Option<&Condition>,
        infra_ready: Option<&Condition>,
    ) -> (&'static str, Vec<String>) {
        match node {
            NodeSeen::Deleted(name) => {
                ("NodeDeleted", vec![format!("Node {name} has been deleted")])
            }
            NodeSeen::NotYet => match self.checks.node_startup_timeout() {
                None => ("", Vec::new()),
                Some(timeout) => {
                    let since = startup_since(machine, machine_conds, initialized, infra_ready);
                    if since + timeout < self.now {
                        let why =
                            format!("Node failed to report startup in {}", go_duration(timeout));
                        ("NodeStartupTimeout", vec![why])
                    } else {
                        self.next.push(since + timeout + Duration::seconds(1));
                        ("", Vec::new())
                    }
                }
            },
            NodeSeen::Found(n) => {
                let node_conds = node_conditions(n);
                let checks = self.checks;
                let failures =
                    self.failures(&node_conds, &checks.unhealthy_node_conditions, "Node");
                ("UnhealthyNode", failures)
            }
        }
    }

    /// The verdict from the failures found: unhealthy if any, else healthy only for a live
    /// Machine with a Node and nothing left to wait for, else pending until the next deadline.
    fn verdict(
        self,
        machine: &Machine,
        node: &NodeSeen,
        machine_failures: Vec<String>,
        node_reason: &str,
        node_failures: Vec<String>,
    ) -> Verdict {
        let next = self.next;
        if machine_failures.is_empty() && node_failures.is_empty() {
            return match node {
                NodeSeen::Found(_) if machine.metadata.deletion_timestamp.is_none() => {
                    if next.is_empty() {
                        Verdict::Healthy
                    } else {
                        Verdict::Pending(next.into_iter().min())
                    }
                }
                _ => Verdict::Pending(next.into_iter().min()),
            };
        }
        let reason = if machine_failures.is_empty() {
            node_reason
        } else {
            "UnhealthyMachine"
        };
        let lines: Vec<String> = machine_failures
            .iter()
            .chain(node_failures.iter())
            .map(|m| format!("  * {m}"))
            .collect();
        Verdict::Unhealthy {
            reason: reason.into(),
            message: format!("Health check failed:\n{}", lines.join("\n")),
        }
    }
}

/// The time a Node's startup timeout runs from: the latest of the Machine's creation, the
/// cluster's infrastructure becoming ready and its control plane initialized, and the
/// Machine's infrastructure becoming ready.
fn startup_since(
    machine: &Machine,
    machine_conds: &[Condition],
    initialized: Option<&Condition>,
    infra_ready: Option<&Condition>,
) -> DateTime<Utc> {
    let created = machine
        .metadata
        .creation_timestamp
        .as_ref()
        .and_then(|t| conditions::parse_time(&t.0.to_string()))
        .unwrap_or_default();
    [
        initialized,
        infra_ready,
        conditions::find(machine_conds, "InfrastructureReady"),
    ]
    .into_iter()
    .flatten()
    .filter(|c| c.is_true())
    .filter_map(Condition::since)
    .fold(created, DateTime::max)
}

/// A Node's conditions in the shape [`conditions::find`] reads.
fn node_conditions(node: &Node) -> Vec<Condition> {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .map(|c| Condition {
            type_: c.type_.clone(),
            status: c.status.clone(),
            reason: c.reason.clone().unwrap_or_default(),
            message: c.message.clone().unwrap_or_default(),
            last_transition_time: c
                .last_transition_time
                .as_ref()
                .map(|t| t.0.to_string())
                .unwrap_or_default(),
            observed_generation: None,
        })
        .collect()
}

/// `spec.remediation.triggerIf`: whether remediation may go on with `unhealthy` of `total`
/// targets unhealthy (or not yet started), and how many more remediations it allows.
pub fn remediation_allowed(
    remediation: Option<&Value>,
    total: i32,
    unhealthy: i32,
) -> Result<(bool, i32), String> {
    let trigger = remediation.and_then(|r| r.get("triggerIf"));
    if let Some(range) = trigger
        .and_then(|t| t.get("unhealthyInRange"))
        .and_then(Value::as_str)
        .filter(|r| !r.is_empty())
    {
        let (min, max) = parse_range(range)?;
        return Ok((unhealthy >= min && unhealthy <= max, max - unhealthy));
    }
    let max = match trigger.and_then(|t| t.get("unhealthyLessThanOrEqualTo")) {
        None => total,
        Some(Value::Number(n)) => n.as_i64().unwrap_or(0) as i32,
        Some(Value::String(s)) => {
            let percent: i64 = s
                .strip_suffix('%')
                .and_then(|p| p.parse().ok())
                .ok_or_else(|| format!("invalid value for IntOrString: invalid value {s:?}"))?;
            // Rounded down, as Cluster API scales it.
            (percent * total as i64 / 100) as i32
        }
        Some(other) => return Err(format!("invalid unhealthyLessThanOrEqualTo {other}")),
    };
    Ok((unhealthy <= max, max - unhealthy))
}

/// `[3-5]` as (3, 5).
fn parse_range(range: &str) -> Result<(i32, i32), String> {
    let bad = || format!("invalid unhealthyInRange {range:?}");
    let inner = range
        .strip_prefix('[')
        .and_then(|r| r.strip_suffix(']'))
        .ok_or_else(bad)?;
    let (min, max) = inner.split_once('-').ok_or_else(bad)?;
    let (min, max): (i32, i32) = (
        min.parse().map_err(|_| bad())?,
        max.parse().map_err(|_| bad())?,
    );
    if max < min {
        return Err(format!(
            "max value {max} cannot be less than min value {min} for unhealthyRange"
        ));
    }
    Ok((min, max))
}

trait Annotated {
    fn annotations_contain(&self, key: &str) -> bool;
}

impl Annotated for Machine {
    fn annotations_contain(&self, key: &str) -> bool {
        self.metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(key))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn t(s: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_700_000_000 + s, 0).unwrap()
    }

    fn cluster(ready: bool) -> Cluster {
        serde_json::from_value(json!({
            "metadata": {"name": "c", "namespace": "ns"},
            "spec": {},
            "status": {"initialization": {"infrastructureProvisioned": ready, "controlPlaneInitialized": ready},
                       "conditions": [
                {"type": "InfrastructureReady", "status": if ready {"True"} else {"False"}, "reason": "r", "message": "", "lastTransitionTime": conditions::timestamp(t(0))},
                {"type": "ControlPlaneInitialized", "status": if ready {"True"} else {"False"}, "reason": "r", "message": "", "lastTransitionTime": conditions::timestamp(t(0))}]}
        }))
        .unwrap()
    }

    fn machine(annotations: Value) -> Machine {
        serde_json::from_value(json!({
            "metadata": {"name": "m", "namespace": "ns", "creationTimestamp": conditions::timestamp(t(0)), "annotations": annotations},
            "spec": {"clusterName": "c", "bootstrap": {}, "infrastructureRef": {"apiGroup": "g", "kind": "K", "name": "m"}},
        }))
        .unwrap()
    }

    fn node(ready: &str, since: i64) -> NodeSeen {
        NodeSeen::Found(Box::new(serde_json::from_value(json!({
            "metadata": {"name": "n"},
            "status": {"conditions": [{"type": "Ready", "status": ready, "reason": "KubeletNotReady",
                                       "lastTransitionTime": conditions::timestamp(t(since))}]}
        })).unwrap()))
    }

    fn checks() -> Checks {
        Checks::from_spec(Some(&json!({"nodeStartupTimeoutSeconds": 60,
            "unhealthyNodeConditions": [{"type": "Ready", "status": "False", "timeoutSeconds": 300}]})))
        .unwrap()
    }

    #[test]
    fn a_node_condition_fails_the_check_once_held_past_its_timeout() {
        let (m, c) = (machine(json!({})), cluster(true));
        assert_eq!(
            check(&m, &node("True", 0), &c, &checks(), t(1000)),
            Verdict::Healthy
        );
        // NotReady since 100: pending until 100 + 300 (+1 s, as upstream requeues).
        assert_eq!(
            check(&m, &node("False", 100), &c, &checks(), t(200)),
            Verdict::Pending(Some(t(401)))
        );
        let Verdict::Unhealthy { reason, message } =
            check(&m, &node("False", 100), &c, &checks(), t(401))
        else {
            panic!("expected unhealthy")
        };
        assert_eq!(reason, "UnhealthyNode");
        assert_eq!(
            message,
            "Health check failed:\n  * Condition Ready on Node is reporting status False with reason KubeletNotReady for more than 5m0s"
        );
    }

    #[test]
    fn a_machine_without_a_node_fails_after_the_startup_timeout() {
        let (m, c) = (machine(json!({})), cluster(true));
        assert_eq!(
            check(&m, &NodeSeen::NotYet, &c, &checks(), t(30)),
            Verdict::Pending(Some(t(61)))
        );
        let Verdict::Unhealthy { reason, .. } = check(&m, &NodeSeen::NotYet, &c, &checks(), t(61))
        else {
            panic!("expected unhealthy")
        };
        assert_eq!(reason, "NodeStartupTimeout");
        let deleted = check(&m, &NodeSeen::Deleted("n".into()), &c, &checks(), t(1));
        assert!(matches!(deleted, Verdict::Unhealthy { reason, .. } if reason == "NodeDeleted"));
    }

    #[test]
    fn workers_wait_for_the_cluster_and_the_annotation_overrides_everything() {
        let c = cluster(false);
        assert_eq!(
            check(
                &machine(json!({})),
                &node("False", 0),
                &c,
                &checks(),
                t(10_000)
            ),
            Verdict::Pending(None)
        );
        let marked = machine(json!({REMEDIATE_ANNOTATION: ""}));
        assert!(matches!(
            check(&marked, &node("True", 0), &c, &checks(), t(0)),
            Verdict::Unhealthy { reason, .. } if reason == "HasRemediateAnnotation"
        ));
    }

    #[test]
    fn trigger_if_limits_remediation() {
        assert_eq!(remediation_allowed(None, 3, 3), Ok((true, 0)));
        let at_most = |v: Value| json!({"triggerIf": {"unhealthyLessThanOrEqualTo": v}});
        assert_eq!(
            remediation_allowed(Some(&at_most(json!(1))), 3, 2),
            Ok((false, -1))
        );
        assert_eq!(
            remediation_allowed(Some(&at_most(json!("40%"))), 5, 2),
            Ok((true, 0))
        );
        let range = json!({"triggerIf": {"unhealthyInRange": "[2-4]"}});
        assert_eq!(remediation_allowed(Some(&range), 6, 1), Ok((false, 3)));
        assert_eq!(remediation_allowed(Some(&range), 6, 3), Ok((true, 1)));
        assert!(remediation_allowed(Some(&at_most(json!("x"))), 5, 2).is_err());
    }

    #[test]
    fn durations_print_as_go_prints_them() {
        assert_eq!(go_duration(Duration::seconds(300)), "5m0s");
        assert_eq!(go_duration(Duration::seconds(3600)), "1h0m0s");
        assert_eq!(go_duration(Duration::seconds(45)), "45s");
    }
}
