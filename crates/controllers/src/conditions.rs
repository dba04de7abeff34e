//! Conditions with Cluster API's semantics.
//!
//! Two shapes live side by side in Cluster API objects: `metav1.Condition` (the v1beta2
//! conditions, in `status.conditions` of v1beta2 kinds) and Cluster API's older condition with
//! a `severity` (v1beta1, kept under `status.deprecated.v1beta1.conditions`, or in
//! `status.conditions` of v1beta1-era kinds such as the seed's InMemoryMachine). Controllers
//! compute the v1beta2 list and derive the other from it, so both readers see the same story.

use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `metav1.Condition`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    #[serde(default)]
    pub reason: String,
    #[serde(default)]
    pub message: String,
    /// RFC 3339; changes only when `status` changes.
    #[serde(default)]
    pub last_transition_time: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// Cluster API's v1beta1 condition.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct V1Beta1Condition {
    #[serde(rename = "type")]
    pub type_: String,
    pub status: String,
    /// `Error`, `Warning` or `Info` when the condition is False; empty otherwise.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub severity: String,
    #[serde(default)]
    pub last_transition_time: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
}

/// Formats a time the way Kubernetes writes `metav1.Time` (seconds, `Z`).
pub fn timestamp(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// Parses a `metav1.Time`.
pub fn parse_time(s: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(s)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

impl Condition {
    pub fn new(type_: &str, status: bool, reason: &str, message: impl Into<String>) -> Self {
        Condition {
            type_: type_.to_string(),
            status: if status { "True" } else { "False" }.to_string(),
            reason: reason.to_string(),
            message: message.into(),
            ..Condition::default()
        }
    }

    pub fn unknown(type_: &str, reason: &str, message: impl Into<String>) -> Self {
        Condition {
            status: "Unknown".into(),
            ..Condition::new(type_, false, reason, message)
        }
    }

    pub fn is_true(&self) -> bool {
        self.status == "True"
    }

    /// When the condition last changed status.
    pub fn since(&self) -> Option<DateTime<Utc>> {
        parse_time(&self.last_transition_time)
    }
}

/// Finds a condition by type.
pub fn find<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// Whether the condition `type_` is True.
pub fn is_true(conditions: &[Condition], type_: &str) -> bool {
    find(conditions, type_).is_some_and(Condition::is_true)
}

/// Sets `next` in `conditions`: `lastTransitionTime` moves to `now` only when the status
/// changes (as `meta.SetStatusCondition` and Cluster API's `conditions.Set` do).
pub fn set(conditions: &mut Vec<Condition>, mut next: Condition, now: DateTime<Utc>) {
    match conditions.iter_mut().find(|c| c.type_ == next.type_) {
        Some(current) => {
            next.last_transition_time =
                if current.status == next.status && !current.last_transition_time.is_empty() {
                    current.last_transition_time.clone()
                } else {
                    timestamp(now)
                };
            *current = next;
        }
        None => {
            next.last_transition_time = timestamp(now);
            conditions.push(next);
        }
    }
}

/// Cluster API's summary of `inputs` into one condition (such as `Ready`): False when any
/// input is False, else Unknown when any is Unknown, else True; the message lists the
/// inputs that are not True, one `* Type: message` line each.
pub fn summary(
    type_: &str,
    inputs: &[&Condition],
    (bad, unknown, good): (&str, &str, &str),
) -> Condition {
    let issues: Vec<&&Condition> = inputs.iter().filter(|c| c.status == "False").collect();
    let unknowns: Vec<&&Condition> = inputs.iter().filter(|c| c.status == "Unknown").collect();
    let line = |c: &&&Condition| {
        let text = if c.message.is_empty() {
            &c.reason
        } else {
            &c.message
        };
        format!("* {}: {}", c.type_, text)
    };
    if !issues.is_empty() {
        let message: Vec<String> = issues.iter().map(line).collect();
        Condition::new(type_, false, bad, message.join("\n"))
    } else if !unknowns.is_empty() {
        let message: Vec<String> = unknowns.iter().map(line).collect();
        Condition::unknown(type_, unknown, message.join("\n"))
    } else {
        Condition::new(type_, true, good, "")
    }
}

/// The order Cluster API sorts conditions in: summaries first, then the conditions of the
/// object's parts, `Paused` and `Deleting` last; any other type (readiness gates, a
/// provider's own steps) before those two, in the order given.
const ORDER: [&str; 36] = [
    "Available",
    "Ready",
    "UpToDate",
    "RemoteConnectionProbe",
    "BootstrapConfigReady",
    "InfrastructureReady",
    "ControlPlaneInitialized",
    "ControlPlaneAvailable",
    "WorkersAvailable",
    "CertificatesAvailable",
    "Initialized",
    "EtcdClusterHealthy",
    "ControlPlaneComponentsHealthy",
    "NodeHealthy",
    "NodeReady",
    "NodeKubeadmLabelsAndTaintsSet",
    "EtcdPodHealthy",
    "EtcdMemberHealthy",
    "APIServerPodHealthy",
    "ControllerManagerPodHealthy",
    "SchedulerPodHealthy",
    "HealthCheckSucceeded",
    "OwnerRemediated",
    "TopologyReconciled",
    "Updating",
    "RollingOut",
    "Remediating",
    "ScalingDown",
    "ScalingUp",
    "MachinesReady",
    "ControlPlaneMachinesReady",
    "WorkerMachinesReady",
    "MachinesUpToDate",
    "ControlPlaneMachinesUpToDate",
    "WorkerMachinesUpToDate",
    "DataSecretAvailable",
];

/// Sorts conditions in Cluster API's order (see [`ORDER`]).
pub fn sort(conditions: &mut [Condition]) {
    let rank = |t: &str| match t {
        "Paused" => 1001,
        "Deleting" => 1002,
        t => ORDER.iter().position(|o| *o == t).unwrap_or(1000),
    };
    conditions.sort_by_key(|c| rank(&c.type_));
}

/// The v1beta1 form of a list of v1beta2 conditions: False ones get severity `Info` (a step
/// still in progress, as the in-memory provider reports its waits).
pub fn to_v1beta1(conditions: &[Condition]) -> Vec<V1Beta1Condition> {
    conditions
        .iter()
        .filter(|c| c.type_ != "Paused")
        .map(|c| V1Beta1Condition {
            type_: c.type_.clone(),
            status: c.status.clone(),
            severity: if c.is_true() {
                String::new()
            } else {
                "Info".into()
            },
            last_transition_time: c.last_transition_time.clone(),
            reason: if c.is_true() {
                String::new()
            } else {
                c.reason.clone()
            },
            message: if c.is_true() {
                String::new()
            } else {
                c.message.clone()
            },
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    #[test]
    fn transition_time_moves_only_with_the_status() {
        let mut list = Vec::new();
        set(
            &mut list,
            Condition::new("VMProvisioned", false, "WaitingForBootstrapData", ""),
            at("2030-01-01T00:00:00Z"),
        );
        set(
            &mut list,
            Condition::new("VMProvisioned", false, "WaitingForStartupTimeout", ""),
            at("2030-01-01T00:00:05Z"),
        );
        assert_eq!(list[0].last_transition_time, "2030-01-01T00:00:00Z");
        assert_eq!(list[0].reason, "WaitingForStartupTimeout");
        set(
            &mut list,
            Condition::new("VMProvisioned", true, "Provisioned", ""),
            at("2030-01-01T00:00:09Z"),
        );
        assert_eq!(list[0].last_transition_time, "2030-01-01T00:00:09Z");
        assert_eq!(list[0].since(), Some(at("2030-01-01T00:00:09Z")));
    }

    #[test]
    fn summaries_report_issues_before_unknowns() {
        let vm = Condition::new("VMProvisioned", true, "Provisioned", "");
        let node = Condition::new("NodeProvisioned", false, "WaitingForStartupTimeout", "");
        let etcd = Condition::unknown("EtcdProvisioned", "Unknown", "no word yet");
        let names = ("NotReady", "ReadyUnknown", "Ready");
        let s = summary("Ready", &[&vm, &node, &etcd], names);
        assert_eq!(
            (s.status.as_str(), s.reason.as_str()),
            ("False", "NotReady")
        );
        assert_eq!(s.message, "* NodeProvisioned: WaitingForStartupTimeout");
        let s = summary("Ready", &[&vm, &etcd], names);
        assert_eq!(s.status, "Unknown");
        assert_eq!(s.message, "* EtcdProvisioned: no word yet");
        assert!(summary("Ready", &[&vm], names).is_true());
    }

    #[test]
    fn v1beta1_conditions_carry_severity_for_waits() {
        let list = vec![
            Condition::new("Ready", false, "NotReady", "x"),
            Condition::new("VMProvisioned", true, "Provisioned", ""),
            Condition::new("Paused", false, "NotPaused", ""),
        ];
        let old = to_v1beta1(&list);
        assert_eq!(old.len(), 2);
        assert_eq!(old[0].severity, "Info");
        assert_eq!(old[1].severity, "");
        assert_eq!(old[1].reason, "");
    }
}
