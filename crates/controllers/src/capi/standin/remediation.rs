//! The Machine conditions of health checking and remediation, and who writes them.
//!
//! `HealthCheckSucceeded` is the MachineHealthCheck's; `OwnerRemediated` is set False by the
//! health check to hand a failed Machine to its owner (a MachineSet or a
//! KubeadmControlPlane), which then says what it does with it and removes the condition once
//! the Machine is healthy again. Each is written by server-side apply under a field manager
//! of its own, holding that one condition item of the `map`-typed conditions list, so neither
//! the Machine controller's status writes nor each other's remove it: `HealthCheckSucceeded`
//! under the health check controller's (`infrasim-capi-core/healthcheck`), `OwnerRemediated`
//! under [`OWNER_MANAGER`].

use super::Error;
use crate::capi::core::Machine;
use chrono::{DateTime, Utc};
use infrasim_controller_runtime::conditions::{self, Condition};
use kube::api::Api;

/// Writes `OwnerRemediated`, for the three controllers that set it: the health check (False,
/// to hand a Machine over), the MachineSet and the KubeadmControlPlane (what they do with it,
/// and its removal once the Machine is healthy). They share this one manager, unlike
/// everything else each controller writes, because they write the same condition item: with
/// a manager each, the health check's forced apply and the owner's would each own the item,
/// and the owner's apply without it (to remove it) would leave it to the health check's
/// manager, so it would never go. It keeps the name it had when managers were per family,
/// for the same reason: a Machine kept in a durable store from before holds the item under
/// that name, and a new name could never remove it.
pub const OWNER_MANAGER: &str = "infrasim-capi-remediation";
/// The Machine conditions the Machine controller leaves to the managers above.
const REMEDIATION_CONDITIONS: [&str; 3] = [
    "HealthCheckSucceeded",
    "OwnerRemediated",
    "ExternallyRemediated",
];

/// Whether the Machine controller leaves condition `type_` to others: the managers above, and
/// the control plane's view of its Machines' components (see [`super::component_health`]).
pub fn not_the_machines(type_: &str) -> bool {
    REMEDIATION_CONDITIONS.contains(&type_)
        || super::component_health::conditions_written().contains(&type_)
}

/// The Machine's conditions without those [`not_the_machines`].
pub fn machines_own(conds: Vec<Condition>) -> Vec<Condition> {
    conds
        .into_iter()
        .filter(|c| !not_the_machines(&c.type_))
        .collect()
}

fn condition<'a>(m: &'a Machine, type_: &str) -> Option<&'a Condition> {
    m.status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .and_then(|c| conditions::find(c, type_))
}

/// Failed its health check and waits for (or is in) its owner's remediation.
pub fn to_remediate(m: &Machine) -> bool {
    m.metadata.deletion_timestamp.is_none()
        && condition(m, "HealthCheckSucceeded").is_some_and(|c| c.status == "False")
        && condition(m, "OwnerRemediated").is_some_and(|c| c.status == "False")
}

/// Healthy again while still marked for remediation: the owner clears the mark.
pub fn recovered(m: &Machine) -> bool {
    m.metadata.deletion_timestamp.is_none()
        && condition(m, "HealthCheckSucceeded").is_some_and(Condition::is_true)
        && condition(m, "OwnerRemediated").is_some_and(|c| c.status == "False")
}

/// The `OwnerRemediated` condition's reason, if the Machine has one.
pub fn owner_reason(m: &Machine) -> Option<&str> {
    condition(m, "OwnerRemediated").map(|c| c.reason.as_str())
}

/// Sets (or with `None`, removes) `manager`'s conditions on `m`'s status: `wanted` replaces
/// what that manager held. `manager` is [`OWNER_MANAGER`] for `OwnerRemediated`, else the
/// health check controller's, for `HealthCheckSucceeded` and `ExternallyRemediated`.
/// Nothing is written when the Machine already shows them.
pub async fn set(
    api: &Api<Machine>,
    m: &Machine,
    manager: &str,
    wanted: Vec<Condition>,
    now: DateTime<Utc>,
) -> Result<(), Error> {
    let mine: &[&str] = if manager == OWNER_MANAGER {
        &["OwnerRemediated"]
    } else {
        &["HealthCheckSucceeded", "ExternallyRemediated"]
    };
    super::owned_conditions::set_owned(api, m, manager, mine, wanted, now).await
}

/// `OwnerRemediated` False with `reason` and `message`.
pub fn owner_condition(reason: &str, message: impl Into<String>) -> Condition {
    Condition::new("OwnerRemediated", false, reason, message)
}
