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

/// Sets Cluster API's `Paused` condition: True with `why` (reason `Paused`) when the object or
/// its Cluster is paused, False (`NotPaused`) otherwise. Returns whether it is paused: a paused
/// object's reconciler writes that and does nothing else.
pub fn set_paused(
    conditions: &mut Vec<Condition>,
    why: Option<String>,
    now: DateTime<Utc>,
) -> bool {
    let paused = why.is_some();
    let condition = match why {
        Some(why) => Condition::new("Paused", true, "Paused", why),
        None => Condition::new("Paused", false, "NotPaused", ""),
    };
    set(conditions, condition, now);
    paused
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

/// How a condition weighs in a summary or an aggregate (Cluster API's merge priorities).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Weight {
    Issue,
    Unknown,
    Info,
}

/// The weight of a condition of positive polarity (True is fine) or negative (True is an
/// issue, as `Deleting`).
pub fn weight(c: &Condition, negative: bool) -> Weight {
    match (c.status.as_str(), negative) {
        ("True", false) | ("False", true) => Weight::Info,
        ("False", false) | ("True", true) => Weight::Issue,
        _ => Weight::Unknown,
    }
}

fn text(c: &Condition) -> &str {
    if c.message.is_empty() {
        &c.reason
    } else {
        &c.message
    }
}

/// One line of a summary's message, `* <label>: <text>`; a text of several lines, or one
/// that is itself a bullet, goes on lines of its own indented under the label (its plain
/// lines made bullets, its bullets nested under them).
fn item(label: &str, text: &str) -> String {
    let bulleted = |l: &str| l.trim_start().starts_with("* ");
    let lines: Vec<&str> = text.lines().collect();
    if lines.len() <= 1 && !bulleted(text) {
        return format!("* {label}: {text}");
    }
    let all = lines.iter().all(|l| bulleted(l));
    let mut out = format!("* {label}:");
    for line in lines {
        out.push('\n');
        match (all, bulleted(line)) {
            (true, _) => out.push_str(&format!("  {line}")),
            (false, true) => out.push_str(&format!("    {}", line.trim_start())),
            (false, false) => out.push_str(&format!("  * {line}")),
        }
    }
    out
}

fn verdict(type_: &str, worst: Weight, (bad, unknown, good): (&str, &str, &str)) -> Condition {
    match worst {
        Weight::Issue => Condition::new(type_, false, bad, ""),
        Weight::Unknown => Condition::unknown(type_, unknown, ""),
        Weight::Info => Condition::new(type_, true, good, ""),
    }
}

/// Cluster API's summary of weighed inputs (a Cluster's `Available`): False when any is an
/// issue, else Unknown when any is unknown, else True. The message has one line per input in
/// order: the issues and unknowns when the result is not True, else the inputs that have a
/// message.
pub fn weighed_summary(
    type_: &str,
    inputs: &[(&Condition, Weight)],
    reasons: (&str, &str, &str),
) -> Condition {
    let worst = inputs.iter().map(|(_, w)| *w).min().unwrap_or(Weight::Info);
    let lines: Vec<String> = inputs
        .iter()
        .filter(|(c, w)| match worst {
            Weight::Info => !c.message.is_empty(),
            _ => *w != Weight::Info,
        })
        .map(|(c, _)| item(&c.type_, text(c)))
        .collect();
    Condition {
        message: lines.join("\n"),
        ..verdict(type_, worst, reasons)
    }
}

/// Cluster API's aggregate of one condition over objects of `kind` (each MachineDeployment's
/// `Available` into a Cluster's `WorkersAvailable`): its status as [`weighed_summary`]'s;
/// its message names the objects that share a text together, at most three lines of them
/// (`* MachineDeployment a: …`, `* MachineDeployments a, b, c, ... (2 more): …`), and counts
/// the rest (`And 2 MachineDeployments with other issues`).
pub fn aggregate(
    type_: &str,
    kind: &str,
    objects: &[(String, Condition)],
    reasons: (&str, &str, &str),
) -> Condition {
    let worst = objects
        .iter()
        .map(|(_, c)| weight(c, false))
        .min()
        .unwrap_or(Weight::Info);
    let mut shown: Vec<(Weight, &str, &str)> = objects
        .iter()
        .filter(|(_, c)| match worst {
            Weight::Info => !c.message.is_empty(),
            _ => weight(c, false) != Weight::Info,
        })
        .map(|(name, c)| (weight(c, false), name.as_str(), text(c)))
        .collect();
    shown.sort();
    let mut groups: Vec<(Weight, &str, Vec<&str>)> = Vec::new();
    for (w, name, t) in shown {
        match groups.iter_mut().find(|g| g.0 == w && g.1 == t) {
            Some(g) => g.2.push(name),
            None => groups.push((w, t, vec![name])),
        }
    }
    let plural = |n: usize| {
        if n == 1 {
            kind.to_string()
        } else {
            format!("{kind}s")
        }
    };
    let mut lines: Vec<String> = groups
        .iter()
        .take(3)
        .map(|(_, t, names)| {
            let label = match names.len() {
                1 => format!("{kind} {}", names[0]),
                2 | 3 => format!("{kind}s {}", names.join(", ")),
                n => format!("{kind}s {}, ... ({} more)", names[..3].join(", "), n - 3),
            };
            item(&label, t)
        })
        .collect();
    for (w, what) in [
        (Weight::Issue, "with other issues"),
        (Weight::Unknown, "with status unknown"),
        (Weight::Info, "with additional info"),
    ] {
        let n: usize = groups
            .iter()
            .skip(3)
            .filter(|g| g.0 == w)
            .map(|g| g.2.len())
            .sum();
        if n > 0 {
            lines.push(format!("And {n} {} {what}", plural(n)));
        }
    }
    Condition {
        message: lines.join("\n"),
        ..verdict(type_, worst, reasons)
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

/// One v1beta1 condition an object still writes, mirrored from a v1beta2 one: its v1beta1
/// type, the v1beta2 type it follows, and its severity when False (`Error`, `Warning`,
/// `Info`).
pub struct Mirror(pub &'static str, pub &'static str, pub &'static str);

/// The v1beta1 conditions upstream's controllers still write beside the v1beta2 ones (under
/// `status.deprecated.v1beta1`, what v1beta1 readers see as `status.conditions`): each mirror
/// whose v1beta2 condition exists, and `Ready` summarizing the `ready_of` ones as upstream's
/// v1beta1 `SetSummary` does: False with the reason, severity and message of the most severe
/// False input (the first in `ready_of` order among equals), else Unknown if any is, else
/// True. Mirrors keep their v1beta2 transition times; `Ready` keeps `previous`'s while its
/// status holds. Sorted as upstream sorts them: `Ready` first, then by type.
pub fn v1beta1_conditions(
    v1beta2: &[&Condition],
    mirrors: &[Mirror],
    ready_of: &[&str],
    previous: &[V1Beta1Condition],
    now: DateTime<Utc>,
) -> Vec<V1Beta1Condition> {
    let mut out: Vec<V1Beta1Condition> = mirrors
        .iter()
        .filter_map(|Mirror(old, new, severity)| {
            let c = v1beta2.iter().find(|c| c.type_ == *new)?;
            let (severity, reason, message) = match c.status.as_str() {
                "True" => (String::new(), String::new(), String::new()),
                "False" => (severity.to_string(), c.reason.clone(), c.message.clone()),
                _ => (String::new(), c.reason.clone(), c.message.clone()),
            };
            // A condition made up for v1beta1 alone has no time of its own: it keeps the one
            // it had while its status holds.
            let since = match c.last_transition_time.is_empty() {
                false => c.last_transition_time.clone(),
                true => previous
                    .iter()
                    .find(|p| p.type_ == *old && p.status == c.status)
                    .map(|p| p.last_transition_time.clone())
                    .unwrap_or_else(|| timestamp(now)),
            };
            Some(V1Beta1Condition {
                type_: old.to_string(),
                status: c.status.clone(),
                severity,
                last_transition_time: since,
                reason,
                message,
            })
        })
        .collect();
    // A kind with nothing to summarize (a MachineHealthCheck) has no v1beta1 Ready.
    if !ready_of.is_empty() {
        let mut ready = v1beta1_summary(&out, ready_of);
        ready.last_transition_time = match previous.iter().find(|c| c.type_ == "Ready") {
            Some(p) if p.status == ready.status && !p.last_transition_time.is_empty() => {
                p.last_transition_time.clone()
            }
            _ => timestamp(now),
        };
        out.push(ready);
    }
    out.sort_by(|a, b| (a.type_ != "Ready", &a.type_).cmp(&(b.type_ != "Ready", &b.type_)));
    out
}

/// v1beta1's `Ready` over the `inputs` of `conditions` that exist (no time set).
fn v1beta1_summary(conditions: &[V1Beta1Condition], inputs: &[&str]) -> V1Beta1Condition {
    let rank = |severity: &str| match severity {
        "Error" => 0,
        "Warning" => 1,
        _ => 2,
    };
    let present: Vec<&V1Beta1Condition> = inputs
        .iter()
        .filter_map(|t| conditions.iter().find(|c| c.type_ == *t))
        .collect();
    let worst = present
        .iter()
        .filter(|c| c.status == "False")
        .min_by_key(|c| rank(&c.severity))
        .or_else(|| present.iter().find(|c| c.status == "Unknown"));
    match worst {
        Some(c) => V1Beta1Condition {
            type_: "Ready".into(),
            status: c.status.clone(),
            severity: c.severity.clone(),
            last_transition_time: String::new(),
            reason: c.reason.clone(),
            message: c.message.clone(),
        },
        None => V1Beta1Condition {
            type_: "Ready".into(),
            status: "True".into(),
            ..V1Beta1Condition::default()
        },
    }
}

/// The v1beta1 conditions an object's `status.deprecated` holds (`[]` if none).
pub fn deprecated_v1beta1(deprecated: Option<&serde_json::Value>) -> Vec<V1Beta1Condition> {
    // Read in place: the status is the caller's to keep.
    deprecated
        .and_then(|d| d.pointer("/v1beta1/conditions"))
        .and_then(|c| Vec::<V1Beta1Condition>::deserialize(c).ok())
        .unwrap_or_default()
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
    fn weighed_summaries_keep_info_out_unless_all_is_fine() {
        let probe = Condition::new("RemoteConnectionProbe", true, "ProbeSucceeded", "");
        let workers = Condition::new(
            "WorkersAvailable",
            false,
            "NotAvailable",
            "* MachineDeployment md-0: 0 available replicas, at least 1 required",
        );
        let topology = Condition::new(
            "TopologyReconciled",
            false,
            "ClusterUpgrading",
            "Cluster is upgrading to v1.32.0\n  * MachineDeployment md-0 upgrade deferred",
        );
        let names = ("NotAvailable", "AvailableUnknown", "Available");
        let s = weighed_summary(
            "Available",
            &[
                (&probe, Weight::Info),
                (&workers, Weight::Issue),
                (&topology, Weight::Info),
            ],
            names,
        );
        assert_eq!(
            (s.status.as_str(), s.reason.as_str()),
            ("False", "NotAvailable")
        );
        assert_eq!(
            s.message,
            "* WorkersAvailable:\n  * MachineDeployment md-0: 0 available replicas, at least 1 required"
        );
        let s = weighed_summary(
            "Available",
            &[(&probe, Weight::Info), (&topology, Weight::Info)],
            names,
        );
        assert_eq!(
            (s.status.as_str(), s.reason.as_str()),
            ("True", "Available")
        );
        assert_eq!(
            s.message,
            "* TopologyReconciled:\n  * Cluster is upgrading to v1.32.0\n    * MachineDeployment md-0 upgrade deferred"
        );
    }

    #[test]
    fn aggregates_name_objects_that_share_a_message_together() {
        let not = |m: &str| Condition::new("Available", false, "NotAvailable", m);
        let objects: Vec<(String, Condition)> = [
            ("a", not("0 available replicas")),
            ("b", not("0 available replicas")),
            ("c", Condition::new("Available", true, "Available", "")),
            (
                "d",
                Condition::unknown("Available", "NotYetReported", "Condition not yet reported"),
            ),
            ("e", not("1 available replicas")),
            ("f", not("2 available replicas")),
        ]
        .into_iter()
        .map(|(n, c)| (n.to_string(), c))
        .collect();
        let names = ("NotAvailable", "AvailableUnknown", "Available");
        let a = aggregate("WorkersAvailable", "MachineDeployment", &objects, names);
        assert_eq!(
            (a.status.as_str(), a.reason.as_str()),
            ("False", "NotAvailable")
        );
        assert_eq!(
            a.message,
            "* MachineDeployments a, b: 0 available replicas\n\
             * MachineDeployment e: 1 available replicas\n\
             * MachineDeployment f: 2 available replicas\n\
             And 1 MachineDeployment with status unknown"
        );
        let a = aggregate(
            "WorkersAvailable",
            "MachineDeployment",
            &objects[2..4],
            names,
        );
        assert_eq!(
            (a.status.as_str(), a.message.as_str()),
            (
                "Unknown",
                "* MachineDeployment d: Condition not yet reported"
            )
        );
        let a = aggregate(
            "WorkersAvailable",
            "MachineDeployment",
            &objects[2..3],
            names,
        );
        assert_eq!((a.status.as_str(), a.message.as_str()), ("True", ""));
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

    #[test]
    fn v1beta1_conditions_mirror_and_summarize_as_upstream() {
        let mut v1beta2 = Vec::new();
        let t0 = at("2026-01-01T00:00:00Z");
        set(
            &mut v1beta2,
            Condition::new("InfrastructureReady", true, "Ready", ""),
            t0,
        );
        let waiting = Condition::new("ControlPlaneAvailable", false, "NotAvailable", "waiting");
        set(&mut v1beta2, waiting, t0);
        let mirrors = [
            Mirror("InfrastructureReady", "InfrastructureReady", "Info"),
            Mirror("ControlPlaneReady", "ControlPlaneAvailable", "Warning"),
            Mirror("TopologyReconciled", "TopologyReconciled", "Info"),
        ];
        let ready_of = ["ControlPlaneReady", "InfrastructureReady"];
        let t1 = at("2026-01-01T00:01:00Z");
        let old = v1beta1_conditions(&refs(&v1beta2), &mirrors, &ready_of, &[], t1);
        let types: Vec<&str> = old.iter().map(|c| c.type_.as_str()).collect();
        // Ready first, then by type; a mirror without its v1beta2 condition is left out.
        assert_eq!(types, ["Ready", "ControlPlaneReady", "InfrastructureReady"]);
        assert_eq!(
            (
                old[0].status.as_str(),
                old[0].severity.as_str(),
                old[0].reason.as_str()
            ),
            ("False", "Warning", "NotAvailable")
        );
        assert_eq!(old[0].message, "waiting");
        assert_eq!(old[0].last_transition_time, "2026-01-01T00:01:00Z");
        assert_eq!(old[2].severity, "");
        assert_eq!(old[2].last_transition_time, "2026-01-01T00:00:00Z");
        // Ready keeps its time while its status holds, and moves when it changes.
        let again = v1beta1_conditions(
            &refs(&v1beta2),
            &mirrors,
            &ready_of,
            &old,
            at("2026-01-01T00:02:00Z"),
        );
        assert_eq!(again[0].last_transition_time, "2026-01-01T00:01:00Z");
        set(
            &mut v1beta2,
            Condition::new("ControlPlaneAvailable", true, "Available", ""),
            t1,
        );
        let up = v1beta1_conditions(
            &refs(&v1beta2),
            &mirrors,
            &ready_of,
            &again,
            at("2026-01-01T00:03:00Z"),
        );
        assert_eq!((up[0].status.as_str(), up[0].reason.as_str()), ("True", ""));
        assert_eq!(up[0].last_transition_time, "2026-01-01T00:03:00Z");
    }

    fn refs(v: &[Condition]) -> Vec<&Condition> {
        v.iter().collect()
    }
}
