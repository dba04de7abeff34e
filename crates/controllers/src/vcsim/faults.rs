//! Fault injection on a running VCenterSimulator, switched at run time: the annotation
//! [`ANNOTATION`] holds the rules, in the format of `infrasim vcsim --faults` (a JSON array
//! of `{method, type?, object?, fault?, message?, delayMs?, times?}`). The VCenterSimulator
//! reconciler puts them in force when the annotation changes and takes them all back when it
//! is removed, so a test or a chaos run drives a vCenter's failures with `kubectl annotate`.
//!
//! An annotation rather than a spec field: the spec is upstream's (CAPV's vcsim API), which
//! has no such field, and a CAPV manifest applied unchanged must stay valid.

use super::simulators::key;
use super::types::VCenterSimulator;
use super::Reconciler;
use infrasim_vsphere_sim::fault_injection::Injection;
use kube::ResourceExt;

/// The annotation holding a simulator's fault injection rules.
pub const ANNOTATION: &str = "sim.infrasim.dev/vsphere-faults";

/// What to do about the rules `obj` names now.
#[derive(Debug, PartialEq)]
enum Outcome {
    /// They are those already in force (or there are none, as before).
    Unchanged,
    /// Put these in force (none: take every rule back).
    Apply(Vec<Injection>),
    /// The annotation does not hold rules; the rules in force stay.
    Invalid(String),
}

fn outcome(changed: bool, rules: &str) -> Outcome {
    if !changed {
        return Outcome::Unchanged;
    }
    if rules.trim().is_empty() {
        return Outcome::Apply(Vec::new());
    }
    match Injection::parse_rules(rules) {
        Ok(rules) => Outcome::Apply(rules),
        Err(why) => Outcome::Invalid(why),
    }
}

/// Puts the rules of `obj`'s annotation in force on its simulator when they changed, and says
/// so in an event (a Warning naming the problem when they cannot be read).
pub(super) async fn reconcile(obj: &VCenterSimulator, r: &Reconciler) {
    let key = key(&obj.namespace().unwrap_or_default(), &obj.name_any());
    let Some(sim) = r.simulators.simulator(&key) else {
        return;
    };
    let rules = obj.annotations().get(ANNOTATION).map_or("", String::as_str);
    match outcome(r.simulators.faults_changed(&key, rules), rules) {
        Outcome::Unchanged => {}
        Outcome::Apply(rules) if rules.is_empty() => {
            sim.set_injections(rules);
            let why = "no fault injection rule is in force".to_string();
            r.ctx.event(obj, false, "FaultsCleared", why).await;
        }
        Outcome::Apply(rules) => {
            sim.set_injections(rules);
            let n = sim.injections_in_force();
            let why = format!(
                "fault injection rules in force: {} failing calls, {} delaying them",
                n.faults, n.delays
            );
            r.ctx.event(obj, false, "FaultsInjected", why).await;
        }
        Outcome::Invalid(why) => {
            let why = format!("{ANNOTATION} holds no rules ({why}); the rules in force stay");
            r.ctx.event(obj, true, "InvalidFaults", why).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_changed_rules_are_put_in_force_and_an_empty_annotation_takes_them_back() {
        let rules = r#"[{"method": "PowerOnVM_Task", "fault": "InvalidState", "times": 1}]"#;
        assert_eq!(outcome(false, rules), Outcome::Unchanged);
        match outcome(true, rules) {
            Outcome::Apply(r) => assert_eq!(r.len(), 1),
            other => panic!("{other:?}"),
        }
        assert_eq!(outcome(true, " "), Outcome::Apply(Vec::new()));
        match outcome(true, r#"[{"method": "X", "fault": "Nope"}]"#) {
            Outcome::Invalid(why) => assert!(why.contains("unknown fault"), "{why}"),
            other => panic!("{other:?}"),
        }
        assert!(matches!(outcome(true, "{"), Outcome::Invalid(_)));
    }
}
