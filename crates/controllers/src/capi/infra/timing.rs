//! When an in-memory machine's steps are done: a pure function of the time, the machine's
//! gates and timings, and the conditions it already has, so a reconcile after a restart
//! picks up where the last one left off (the start of each step is in the API object: the
//! bootstrap data's creation for the VM, the previous condition's transition for the rest).
//!
//! As upstream's in-memory backend: the VM starts once the cluster infrastructure is ready
//! and the bootstrap data exists (workers also wait for the control plane to be initialized);
//! the Node follows the VM; etcd and the API server (control planes only) both follow the
//! Node, each after its own startup duration plus jitter.

use crate::capi::infra::boot::Boot;
use crate::capi::infra::types::{MachineBehaviour, StepBehaviour};
use chrono::{DateTime, Utc};
use infrasim_controller_runtime::conditions::{self, Condition};
use std::hash::{Hash, Hasher};
use std::time::Duration;

pub const VM: &str = "VMProvisioned";
pub const NODE: &str = "NodeProvisioned";
pub const ETCD: &str = "EtcdProvisioned";
pub const API_SERVER: &str = "APIServerProvisioned";

/// What the machine waits for before its VM starts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Gate {
    /// The Cluster's infrastructure is not provisioned yet.
    ClusterInfrastructure,
    /// A worker waits for the control plane to be initialized.
    ControlPlaneInitialized,
    /// The Machine has no bootstrap data yet.
    BootstrapData,
    /// Nothing: the VM started at this time.
    Open(DateTime<Utc>),
}

/// One step's timing, parsed.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct StepTiming {
    pub startup: Duration,
    pub jitter: f64,
}

/// The four steps' timings.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Timings {
    pub vm: StepTiming,
    pub node: StepTiming,
    pub etcd: StepTiming,
    pub api_server: StepTiming,
}

/// Parses a Go duration (`10s`, `1m30s`, `1.5h`, `250ms`, `0`).
pub fn parse_go_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    if s == "0" || s.is_empty() {
        return Ok(Duration::ZERO);
    }
    let mut total = 0f64;
    let mut rest = s;
    while !rest.is_empty() {
        let split = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(|| format!("missing unit in duration {s:?}"))?;
        let number: f64 = rest[..split]
            .parse()
            .map_err(|_| format!("invalid duration {s:?}"))?;
        rest = &rest[split..];
        let unit_end = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let seconds = match &rest[..unit_end] {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            unit => return Err(format!("unknown unit {unit:?} in duration {s:?}")),
        };
        total += number * seconds;
        rest = &rest[unit_end..];
    }
    Duration::try_from_secs_f64(total).map_err(|_| format!("duration {s:?} is out of range"))
}

/// A duration as Go's `time.Duration.String()` writes whole seconds: `5m0s`, `1h0m0s`, `30s`.
pub fn go_duration(d: chrono::Duration) -> String {
    let s = d.num_seconds();
    match (s / 3600, (s % 3600) / 60, s % 60) {
        (0, 0, sec) => format!("{sec}s"),
        (0, m, sec) => format!("{m}m{sec}s"),
        (h, m, sec) => format!("{h}h{m}m{sec}s"),
    }
}

fn step(b: Option<&StepBehaviour>, what: &str) -> Result<StepTiming, String> {
    let Some(p) = b.and_then(|b| b.provisioning.as_ref()) else {
        return Ok(StepTiming::default());
    };
    let startup = parse_go_duration(&p.startup_duration)
        .map_err(|e| format!("{what} startupDuration: {e}"))?;
    let jitter = match p.startup_jitter.as_deref() {
        None | Some("") => 0.0,
        Some(j) => j
            .trim()
            .parse::<f64>()
            .map_err(|_| format!("{what} startupJitter: {j:?} is not a number"))?,
    };
    Ok(StepTiming { startup, jitter })
}

impl Timings {
    /// Reads a machine's `behaviour`; steps it does not mention take no time.
    pub fn parse(b: Option<&MachineBehaviour>) -> Result<Timings, String> {
        let Some(b) = b else {
            return Ok(Timings::default());
        };
        Ok(Timings {
            vm: step(b.vm.as_ref(), "vm")?,
            node: step(b.node.as_ref(), "node")?,
            etcd: step(b.etcd.as_ref(), "etcd")?,
            api_server: step(b.api_server.as_ref(), "apiServer")?,
        })
    }
}

/// `startup + f·jitter·startup`, with `f` in [0, 1) drawn from the machine's uid and the
/// step: the same on every reconcile and after a restart, different between machines.
fn duration(t: StepTiming, seed: &str, step: &str) -> chrono::Duration {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (seed, step).hash(&mut h);
    let f = (h.finish() >> 11) as f64 / (1u64 << 53) as f64;
    let d = t.startup.mul_f64(1.0 + t.jitter.max(0.0) * f);
    chrono::Duration::from_std(d).unwrap_or(chrono::Duration::MAX)
}

/// The outcome of one evaluation.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// The step conditions (without `Ready` and `Paused`), transition times kept.
    pub conditions: Vec<Condition>,
    /// The VM is up: the machine is provisioned as the contract means it.
    pub provisioned: bool,
    /// Every step is done.
    pub complete: bool,
    /// When to look again (the next step's deadline).
    pub next: Option<DateTime<Utc>>,
}

/// The inputs of [`plan`].
pub struct Facts<'a> {
    pub now: DateTime<Utc>,
    pub control_plane: bool,
    pub gate: Gate,
    /// The Machine says it was bootstrapped before: steps are done at once (as upstream,
    /// after a restart).
    pub bootstrapped: bool,
    pub timings: Timings,
    /// Whether a boot fault holds the Node back (see [`super::boot`]).
    pub boot: Boot,
    /// What makes the jitter of this machine its own (its uid).
    pub seed: &'a str,
    pub previous: &'a [Condition],
}

/// Evaluates the steps in order at `facts.now`.
pub fn plan(facts: &Facts<'_>) -> Plan {
    let mut steps = Steps {
        facts,
        conds: facts
            .previous
            .iter()
            .filter(|c| [VM, NODE, ETCD, API_SERVER].contains(&c.type_.as_str()))
            .cloned()
            .collect(),
        next: None,
    };
    let later: &[&str] = if facts.control_plane {
        &[NODE, ETCD, API_SERVER]
    } else {
        &[NODE]
    };
    let vm_start = match facts.gate {
        Gate::Open(at) => at,
        gate => {
            let reason = match gate {
                Gate::ClusterInfrastructure => "WaitingForClusterInfrastructureReady",
                Gate::ControlPlaneInitialized => "WaitingForControlPlaneInitialized",
                _ => "WaitingForBootstrapData",
            };
            if !conditions::is_true(&steps.conds, VM) {
                steps.set(Condition::new(VM, false, reason, ""));
                steps.waiting_for(later, "WaitingForVMProvisioned");
                return steps.into_plan(false, false);
            }
            // Already provisioned: the gates no longer matter.
            facts.now
        }
    };
    if !steps.due(VM, vm_start, facts.timings.vm) {
        steps.waiting_for(later, "WaitingForVMProvisioned");
        return steps.into_plan(false, false);
    }
    let vm_done = steps.since(VM);
    let node = match facts.boot {
        // The VM runs, its operating system never comes up: nothing to wait for.
        Boot::Never if !conditions::is_true(&steps.conds, NODE) => {
            let why = "the machine does not boot (a MachineNeverBoots fault)";
            steps.set(Condition::new(NODE, false, "WaitingForStartupTimeout", why));
            false
        }
        Boot::NotBefore(at) => steps.due(NODE, vm_done.max(at), facts.timings.node),
        _ => steps.due(NODE, vm_done, facts.timings.node),
    };
    let mut complete = node;
    if facts.control_plane {
        if node {
            let node_done = steps.since(NODE);
            let etcd = steps.due(ETCD, node_done, facts.timings.etcd);
            let api = steps.due(API_SERVER, node_done, facts.timings.api_server);
            complete = etcd && api;
        } else {
            steps.waiting_for(&[ETCD, API_SERVER], "WaitingForNodeProvisioned");
        }
    }
    steps.into_plan(true, complete)
}

/// What [`plan`] works on: the step conditions as they stand so far, and the earliest
/// deadline of a step still waiting.
struct Steps<'f, 'a> {
    facts: &'f Facts<'a>,
    conds: Vec<Condition>,
    next: Option<DateTime<Utc>>,
}

impl Steps<'_, '_> {
    fn set(&mut self, c: Condition) {
        conditions::set(&mut self.conds, c, self.facts.now);
    }

    /// Each of `types` not yet true, false for `reason`.
    fn waiting_for(&mut self, types: &[&str], reason: &str) {
        for t in types {
            if !conditions::is_true(&self.conds, t) {
                self.set(Condition::new(t, false, reason, ""));
            }
        }
    }

    /// One step: done when its start plus its duration has passed.
    fn due(&mut self, ty: &str, start: DateTime<Utc>, t: StepTiming) -> bool {
        if conditions::is_true(&self.conds, ty) {
            return true;
        }
        let deadline = start + duration(t, self.facts.seed, ty);
        if self.facts.bootstrapped || self.facts.now >= deadline {
            self.set(Condition::new(ty, true, "Provisioned", ""));
            true
        } else {
            self.set(Condition::new(ty, false, "WaitingForStartupTimeout", ""));
            self.next = Some(self.next.map_or(deadline, |n| n.min(deadline)));
            false
        }
    }

    /// Since when the step `ty` has had its condition's status (now, when that is unknown).
    fn since(&self, ty: &str) -> DateTime<Utc> {
        conditions::find(&self.conds, ty)
            .and_then(Condition::since)
            .unwrap_or(self.facts.now)
    }

    fn into_plan(self, provisioned: bool, complete: bool) -> Plan {
        Plan {
            conditions: self.conds,
            provisioned,
            complete,
            next: self.next,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capi::infra::types::Provisioning;

    fn at(s: u32) -> DateTime<Utc> {
        "2030-01-01T00:00:00Z".parse::<DateTime<Utc>>().unwrap()
            + chrono::Duration::seconds(s as i64)
    }

    fn secs(n: u64) -> StepTiming {
        StepTiming {
            startup: Duration::from_secs(n),
            jitter: 0.0,
        }
    }

    fn facts<'a>(now: u32, gate: Gate, previous: &'a [Condition]) -> Facts<'a> {
        Facts {
            now: at(now),
            control_plane: true,
            gate,
            bootstrapped: false,
            timings: Timings {
                vm: secs(10),
                node: secs(2),
                etcd: secs(3),
                api_server: secs(1),
            },
            boot: Boot::Normal,
            seed: "uid",
            previous,
        }
    }

    fn status(p: &Plan, ty: &str) -> (String, String) {
        let c = conditions::find(&p.conditions, ty).unwrap();
        (c.status.clone(), c.reason.clone())
    }

    #[test]
    fn go_durations() {
        assert_eq!(parse_go_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_go_duration("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_go_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_go_duration("1.5h"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_go_duration("0"), Ok(Duration::ZERO));
        assert!(parse_go_duration("10").is_err());
        assert!(parse_go_duration("10x").is_err());
        assert!(parse_go_duration("99999999999999999999999h").is_err());
        let b = MachineBehaviour {
            vm: Some(StepBehaviour {
                provisioning: Some(Provisioning {
                    startup_duration: "2s".into(),
                    startup_jitter: Some("0.2".into()),
                }),
            }),
            ..Default::default()
        };
        let t = Timings::parse(Some(&b)).unwrap();
        assert_eq!(t.vm.startup, Duration::from_secs(2));
        assert_eq!(t.vm.jitter, 0.2);
        assert_eq!(t.node, StepTiming::default());
    }

    #[test]
    fn steps_follow_each_other_with_their_own_durations() {
        let waiting = plan(&facts(0, Gate::BootstrapData, &[]));
        assert_eq!(
            status(&waiting, VM),
            ("False".into(), "WaitingForBootstrapData".into())
        );
        assert_eq!(status(&waiting, API_SERVER).1, "WaitingForVMProvisioned");
        assert!(!waiting.provisioned);

        let booting = plan(&facts(5, Gate::Open(at(4)), &waiting.conditions));
        assert_eq!(status(&booting, VM).1, "WaitingForStartupTimeout");
        assert_eq!(booting.next, Some(at(14)));

        let vm = plan(&facts(14, Gate::Open(at(4)), &booting.conditions));
        assert_eq!(status(&vm, VM).0, "True");
        assert!(vm.provisioned && !vm.complete);
        assert_eq!(vm.next, Some(at(16)), "the node follows the VM");

        let node = plan(&facts(16, Gate::Open(at(4)), &vm.conditions));
        assert_eq!(status(&node, NODE).0, "True");
        // The API server (1 s) comes before etcd (3 s), both after the node.
        assert_eq!(node.next, Some(at(17)));
        let api = plan(&facts(17, Gate::Open(at(4)), &node.conditions));
        assert_eq!(status(&api, API_SERVER).0, "True");
        assert_eq!(status(&api, ETCD).1, "WaitingForStartupTimeout");
        assert_eq!(api.next, Some(at(19)));
        let all = plan(&facts(19, Gate::Open(at(4)), &api.conditions));
        assert!(all.complete);
        assert_eq!(all.next, None);
    }

    #[test]
    fn a_bootstrapped_machine_is_done_at_once_and_workers_stop_at_the_node() {
        let mut f = facts(0, Gate::Open(at(0)), &[]);
        f.bootstrapped = true;
        assert!(plan(&f).complete);
        let mut w = facts(0, Gate::ControlPlaneInitialized, &[]);
        w.control_plane = false;
        let p = plan(&w);
        assert_eq!(status(&p, VM).1, "WaitingForControlPlaneInitialized");
        assert!(conditions::find(&p.conditions, ETCD).is_none());
    }

    #[test]
    fn a_boot_fault_holds_the_node_back_late_or_for_good() {
        let vm = plan(&facts(14, Gate::Open(at(4)), &[]));
        assert_eq!(status(&vm, VM).0, "True");
        let mut never = facts(1000, Gate::Open(at(4)), &vm.conditions);
        never.boot = Boot::Never;
        let stuck = plan(&never);
        assert!(
            stuck.provisioned,
            "the VM runs: the machine has a provider ID"
        );
        assert!(!stuck.complete);
        assert_eq!(stuck.next, None, "nothing to wait for");
        assert_eq!(
            status(&stuck, NODE),
            ("False".into(), "WaitingForStartupTimeout".into())
        );
        assert_eq!(status(&stuck, ETCD).1, "WaitingForNodeProvisioned");

        // Late: the node's two seconds start when the boot may, not when the VM was done.
        let mut late = facts(16, Gate::Open(at(4)), &vm.conditions);
        late.boot = Boot::NotBefore(at(60));
        let waiting = plan(&late);
        assert_eq!(status(&waiting, NODE).0, "False");
        assert_eq!(waiting.next, Some(at(62)));
        late.now = at(62);
        assert_eq!(status(&plan(&late), NODE).0, "True");
    }

    #[test]
    fn jitter_is_stable_per_machine_and_bounded() {
        let t = StepTiming {
            startup: Duration::from_secs(10),
            jitter: 0.5,
        };
        let a = duration(t, "uid-a", VM);
        assert_eq!(a, duration(t, "uid-a", VM));
        let all: Vec<chrono::Duration> = (0..50)
            .map(|i| duration(t, &format!("uid-{i}"), VM))
            .collect();
        assert!(all
            .iter()
            .all(|d| d.num_milliseconds() >= 10_000 && d.num_milliseconds() < 15_000));
        assert!(all.iter().any(|d| *d != a), "machines differ");
    }
}
