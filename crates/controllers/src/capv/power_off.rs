//! How a VSphereVM's VM is powered off before it is destroyed, as CAPV does by
//! `spec.powerOffMode`: `hard` (the default) powers it off at once; `soft` asks the guest to
//! shut down (ShutdownGuest) and waits for it as long as it takes; `trySoft` asks the guest,
//! then powers it off after `spec.guestSoftPowerOffTimeoutSeconds` (five minutes by
//! default), or at once when the guest cannot be asked (its tools not running, or no guest
//! state change supported). Progress is CAPV's `GuestSoftPowerOffSucceeded` condition:
//! False `InProgress` once asked, False `Failed` when `soft` cannot ask (then it waits), True
//! `Succeeded` once the VM is off.
//!
//! Nothing polls: the VM's power state is watched by the session's copy (its change wakes
//! the VSphereVM), and `trySoft`'s timeout is a deadline on the injected clock.

use super::types::VSphereVM;
use super::Error;
use chrono::{DateTime, Utc};
use infrasim_controller_runtime::conditions::Condition;
use infrasim_controller_runtime::reconcile::Next;
use infrasim_vim_client::{Client, Moref};
use kube::ResourceExt;
use std::time::Duration;

/// CAPV's condition for a guest asked to shut down.
pub const CONDITION: &str = "GuestSoftPowerOffSucceeded";

/// CAPV's default wait before `trySoft` powers the VM off.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5 * 60);

/// What to do with a VM that is powered on and about to be destroyed.
#[derive(Debug, PartialEq)]
pub(super) enum PowerOff {
    /// Power it off now (PowerOffVM_Task).
    Hard,
    /// The guest is shutting down (or cannot be asked, in `soft` mode): look again then.
    Wait(Next),
}

/// What to do with `vm`'s running VM `obj` at `now`, and the condition to report, if any.
pub(super) async fn decide(
    client: &Client,
    vm: &VSphereVM,
    obj: &Moref,
    now: DateTime<Utc>,
) -> Result<(PowerOff, Option<Condition>), Error> {
    let try_soft = match vm.spec.text("powerOffMode") {
        Some("soft") => false,
        Some("trySoft") => true,
        _ => return Ok((PowerOff::Hard, None)),
    };
    if let Some(asked) = asked_at(vm) {
        return Ok((after_asking(try_soft, asked, timeout(vm), now), None));
    }
    let guest = client
        .properties(
            obj,
            &[
                "guest.toolsRunningStatus",
                "guest.guestStateChangeSupported",
            ],
        )
        .await?;
    let who = format!("{}/{}", vm.namespace().unwrap_or_default(), vm.name_any());
    let cannot = if guest.text("guest.toolsRunningStatus") != "guestToolsRunning" {
        Some(format!("VMware Tools not installed on VM {who}"))
    } else if guest.text("guest.guestStateChangeSupported") != "true" {
        Some(format!(
            "Unable to trigger soft power off because guest state change is not supported on \
             VM {who}."
        ))
    } else {
        None
    };
    if let Some(why) = cannot {
        return Ok(match try_soft {
            true => (PowerOff::Hard, None),
            // `soft` waits for good: somebody else may power the VM off.
            false => (
                PowerOff::Wait(Next::AwaitChange),
                Some(Condition::new(CONDITION, false, "Failed", why)),
            ),
        });
    }
    client.invoke("ShutdownGuest", obj).await?;
    let asked = Condition::new(
        CONDITION,
        false,
        "InProgress",
        format!("guest soft power off initiated on VM {who}"),
    );
    Ok((after_asking(try_soft, now, timeout(vm), now), Some(asked)))
}

/// Once the guest was asked at `asked`: wait for it (a power-state change wakes the VM), and
/// in `trySoft` mode power it off once `timeout` has passed.
fn after_asking(
    try_soft: bool,
    asked: DateTime<Utc>,
    timeout: Duration,
    now: DateTime<Utc>,
) -> PowerOff {
    if !try_soft || timeout.is_zero() {
        return PowerOff::Wait(Next::AwaitChange);
    }
    let deadline = asked + chrono::Duration::from_std(timeout).unwrap_or(chrono::Duration::MAX);
    match now >= deadline {
        true => PowerOff::Hard,
        false => PowerOff::Wait(Next::At(deadline)),
    }
}

/// When the guest was asked to shut down: the condition's transition time.
fn asked_at(vm: &VSphereVM) -> Option<DateTime<Utc>> {
    let conditions = vm.status.as_ref()?.rest.get("conditions")?.as_array()?;
    let asked = conditions.iter().find(|c| c["type"] == CONDITION)?;
    let at = asked["lastTransitionTime"].as_str()?;
    DateTime::parse_from_rfc3339(at)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

/// `spec.guestSoftPowerOffTimeoutSeconds`, CAPV's default when unset or zero.
fn timeout(vm: &VSphereVM) -> Duration {
    match vm.spec.number("guestSoftPowerOffTimeoutSeconds") {
        Some(s) if s > 0 => Duration::from_secs(s.unsigned_abs()),
        _ => DEFAULT_TIMEOUT,
    }
}

/// The condition once the VM is off, if its guest was asked to shut down.
pub(super) fn succeeded(vm: &VSphereVM) -> Option<Condition> {
    asked_at(vm).map(|_| Condition::new(CONDITION, true, "Succeeded", ""))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    #[test]
    fn try_soft_powers_off_once_its_timeout_has_passed() {
        let asked = at("2026-11-29T10:00:00Z");
        let minute = Duration::from_secs(60);
        assert_eq!(
            after_asking(true, asked, minute, at("2026-11-29T10:00:30Z")),
            PowerOff::Wait(Next::At(at("2026-11-29T10:01:00Z")))
        );
        assert_eq!(
            after_asking(true, asked, minute, at("2026-11-29T10:01:00Z")),
            PowerOff::Hard
        );
        // `soft` waits for good.
        assert_eq!(
            after_asking(false, asked, minute, at("2026-11-29T11:00:00Z")),
            PowerOff::Wait(Next::AwaitChange)
        );
    }

    #[test]
    fn the_timeout_is_the_specs_or_five_minutes() {
        let mut vm = VSphereVM::new("vm", Default::default());
        assert_eq!(timeout(&vm), DEFAULT_TIMEOUT);
        vm.spec
            .rest
            .insert("guestSoftPowerOffTimeoutSeconds".into(), 20.into());
        assert_eq!(timeout(&vm), Duration::from_secs(20));
        assert!(asked_at(&vm).is_none() && succeeded(&vm).is_none());
    }
}
