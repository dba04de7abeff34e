//! Fault injection, a first-class feature as in govmomi's simulator: rules that make a named
//! method fail with a chosen vim25 fault, or take longer, on one object, on every object of a
//! type, or on any object. A test sets them through [`Simulator::inject`] or, against
//! `infrasim vcsim`, in a rules file the command re-reads when it changes (`--faults FILE`).
//!
//! A `*_Task` method that is made to fail returns its Task, which then ends in error with the
//! fault, as vCenter reports a failed operation; any other method answers with a SOAP fault.
//!
//! [`Simulator::inject`]: crate::simulator::Simulator::inject

use crate::fault::Fault;
use crate::value::Moref;
use serde_json::Value;
use std::time::Duration;

/// The faults a rule may name (vim25 types, each with the message vCenter gives it).
const FAULTS: &[(&str, &str)] = &[
    (
        "SystemError",
        "A general system error occurred: injected fault",
    ),
    (
        "InvalidState",
        "The operation is not allowed in the current state.",
    ),
    (
        "InvalidPowerState",
        "The attempted operation cannot be performed in the current state.",
    ),
    (
        "TaskInProgress",
        "The operation is not allowed in the current state.",
    ),
    ("ResourceInUse", "The resource is in use."),
    (
        "InsufficientResourcesFault",
        "Insufficient resources to satisfy configured failover level for vSphere HA.",
    ),
    (
        "HostCommunication",
        "An error occurred communicating with the remote host.",
    ),
    ("HostNotConnected", "The host is not connected."),
    ("Timedout", "Operation timed out."),
    (
        "NoPermission",
        "Permission to perform this operation was denied.",
    ),
    ("NotAuthenticated", "The session is not authenticated."),
    ("DuplicateName", "The name already exists."),
    (
        "InvalidArgument",
        "A specified parameter was not correct: injected fault",
    ),
    (
        "NotSupported",
        "The operation is not supported on the object.",
    ),
    (
        "NotFound",
        "The object or item referred to could not be found.",
    ),
    ("RequestCanceled", "The task was canceled by a user."),
    (
        "NoDiskSpace",
        "There is not enough space on the file system for the selected operation.",
    ),
    ("FileNotFound", "File was not found"),
    ("InvalidDatastore", "The datastore is not valid."),
];

/// Which objects a rule applies to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    Any,
    /// Every object of a managed-object type (`VirtualMachine`).
    Type(String),
    /// One object.
    Object(Moref),
}

/// One rule: calls of `method` (or of any method, `*`) on `target` wait `delay`, then fail
/// with `fault` if one is named; it applies to the next `times` calls, or until removed.
#[derive(Debug, Clone, PartialEq)]
pub struct Injection {
    pub method: String,
    pub target: Target,
    pub fault: Option<Fault>,
    pub delay: Duration,
    pub times: Option<u32>,
}

impl Injection {
    /// A rule making `method` on `target` fail with the vim25 fault `fault_type` (one of
    /// the known types; `None` for any other).
    pub fn fail(method: &str, target: Target, fault_type: &str) -> Option<Injection> {
        Some(Injection {
            method: method.to_string(),
            target,
            fault: Some(fault_of(fault_type, None)?),
            delay: Duration::ZERO,
            times: None,
        })
    }

    /// A rule making `method` on `target` take `delay` longer.
    pub fn delay(method: &str, target: Target, delay: Duration) -> Injection {
        Injection {
            method: method.to_string(),
            target,
            fault: None,
            delay,
            times: None,
        }
    }

    fn matches(&self, method: &str, this: Option<&Moref>) -> bool {
        (self.method == "*" || self.method == method)
            && match (&self.target, this) {
                (Target::Any, _) => true,
                (Target::Type(ty), Some(m)) => &m.ty == ty,
                (Target::Object(o), Some(m)) => o == m,
                _ => false,
            }
    }

    /// The rules of a rules file: a JSON array of `{"method", "type"?, "object"?, "fault"?,
    /// "message"?, "delayMs"?, "times"?}` (`object` is a reference value, `vm-42`, and needs
    /// `type`).
    pub fn parse_rules(text: &str) -> Result<Vec<Injection>, String> {
        let rules: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
        let rules = rules.as_array().ok_or("the rules are not a JSON array")?;
        rules
            .iter()
            .enumerate()
            .map(|(i, r)| rule(r).map_err(|e| format!("rule {i}: {e}")))
            .collect()
    }
}

fn rule(r: &Value) -> Result<Injection, String> {
    let text = |k: &str| r.get(k).and_then(Value::as_str);
    let method = text("method").ok_or("no method")?.to_string();
    let target = match (text("type"), text("object")) {
        (None, None) => Target::Any,
        (Some(ty), None) => Target::Type(ty.to_string()),
        (Some(ty), Some(value)) => Target::Object(Moref::new(ty, value)),
        (None, Some(_)) => return Err("an object needs its type".into()),
    };
    let fault = match text("fault") {
        None => None,
        Some(name) => Some(fault_of(name, text("message")).ok_or_else(|| {
            let known: Vec<&str> = FAULTS.iter().map(|(n, _)| *n).collect();
            format!("unknown fault {name:?} (known: {})", known.join(", "))
        })?),
    };
    let delay = Duration::from_millis(r.get("delayMs").and_then(Value::as_u64).unwrap_or(0));
    let times = r
        .get("times")
        .and_then(Value::as_u64)
        .map(|t| t.min(u32::MAX as u64) as u32);
    if fault.is_none() && delay.is_zero() {
        return Err("neither a fault nor a delay".into());
    }
    Ok(Injection {
        method,
        target,
        fault,
        delay,
        times,
    })
}

/// The fault of a known type, with its usual message or `message`.
fn fault_of(name: &str, message: Option<&str>) -> Option<Fault> {
    let (ty, default) = FAULTS.iter().find(|(n, _)| *n == name)?;
    Some(Fault::new_pub(ty, message.unwrap_or(default)))
}

/// How many rules are in force, by what they do.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct InForce {
    /// Rules that fail the calls they match (after any delay).
    pub faults: usize,
    /// Rules that only delay them.
    pub delays: usize,
}

/// A simulator's rules, in the order they were added (the first matching one applies).
#[derive(Debug, Default)]
pub(crate) struct Injections {
    rules: Vec<Injection>,
}

impl Injections {
    pub fn add(&mut self, rule: Injection) {
        self.rules.push(rule);
    }

    pub fn replace(&mut self, rules: Vec<Injection>) {
        self.rules = rules;
    }

    /// The rules in force: how many fail calls, and how many only delay them.
    pub fn in_force(&self) -> InForce {
        let faults = self.rules.iter().filter(|r| r.fault.is_some()).count();
        InForce {
            faults,
            delays: self.rules.len() - faults,
        }
    }

    /// What a call of `method` on `this` is in for (delay, fault), counting it against the
    /// matching rule's `times`.
    pub fn take(
        &mut self,
        method: &str,
        this: Option<&Moref>,
    ) -> Option<(Duration, Option<Fault>)> {
        let i = self.rules.iter().position(|r| r.matches(method, this))?;
        let rule = &mut self.rules[i];
        let hit = (rule.delay, rule.fault.clone());
        if let Some(times) = rule.times.as_mut() {
            *times = times.saturating_sub(1);
            if *times == 0 {
                self.rules.remove(i);
            }
        }
        Some(hit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_files_name_known_faults_and_their_targets() {
        let rules = Injection::parse_rules(
            r#"[{"method": "PowerOnVM_Task", "type": "VirtualMachine", "object": "vm-42", "fault": "InvalidState", "times": 1},
                {"method": "*", "type": "HostSystem", "delayMs": 250}]"#,
        )
        .unwrap();
        assert_eq!(
            rules[0].target,
            Target::Object(Moref::new("VirtualMachine", "vm-42"))
        );
        assert_eq!(rules[0].fault.as_ref().unwrap().ty, "InvalidState");
        assert_eq!(rules[1].delay, Duration::from_millis(250));
        let err = Injection::parse_rules(r#"[{"method": "X", "fault": "Nope"}]"#).unwrap_err();
        assert!(err.contains("unknown fault \"Nope\""), "{err}");
        assert!(Injection::parse_rules(r#"[{"method": "X"}]"#).is_err());
    }

    #[test]
    fn the_first_matching_rule_applies_for_its_number_of_times() {
        let mut all = Injections::default();
        let vm = Moref::new("VirtualMachine", "vm-1");
        all.add(Injection {
            times: Some(1),
            ..Injection::fail("PowerOnVM_Task", Target::Object(vm.clone()), "SystemError").unwrap()
        });
        all.add(Injection::delay(
            "PowerOnVM_Task",
            Target::Type("VirtualMachine".into()),
            Duration::from_millis(5),
        ));
        let first = all.take("PowerOnVM_Task", Some(&vm)).unwrap();
        assert!(first.1.is_some());
        let second = all.take("PowerOnVM_Task", Some(&vm)).unwrap();
        assert_eq!((second.0, second.1), (Duration::from_millis(5), None));
        assert!(all.take("PowerOffVM_Task", Some(&vm)).is_none());
        // The failing rule was used up; the delay stays in force.
        assert_eq!(
            all.in_force(),
            InForce {
                faults: 0,
                delays: 1
            }
        );
    }
}
