//! Where a host is in metal3's provisioning state machine, and what the operator does next:
//! `registering` (the BMC's credentials checked) → `inspecting` (the agent booted, the
//! hardware read) → `preparing` → `available`; an image makes it `provisioning` →
//! `provisioned`, its removal `deprovisioning` → `available`; `externally provisioned`
//! hosts and stable ones have their power follow `spec.online`. States someone else set
//! (an error state a test wrote) are left alone.

use crate::sip::types::BareMetalHost;
use kube::ResourceExt;

/// The annotation that turns inspection off (`inspect.metal3.io: disabled`).
pub const INSPECT: &str = "inspect.metal3.io";

/// What the operator does with a host now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Nothing until the host changes.
    Idle,
    /// No BMC to reach: the host is `unmanaged`.
    Unmanage,
    Register,
    Inspect,
    Prepare,
    Provision,
    Deprovision,
    /// The host was provisioned by someone else: it becomes `externally provisioned`.
    Adopt,
    /// A stable state: power as `spec.online` says.
    Power,
}

impl Step {
    /// The `errorType` a failure of this step is reported as.
    pub fn error_type(self) -> &'static str {
        match self {
            Step::Register | Step::Unmanage | Step::Idle => "registration error",
            Step::Inspect => "inspection error",
            Step::Prepare => "preparation error",
            Step::Provision | Step::Deprovision => "provisioning error",
            Step::Adopt | Step::Power => "power management error",
        }
    }
}

/// The host's provisioning state.
pub fn state(host: &BareMetalHost) -> &str {
    host.status
        .as_ref()
        .and_then(|s| s.provisioning.as_ref())
        .map(|p| p.state.as_str())
        .unwrap_or("")
}

/// Whether the host names a BMC and its credentials.
pub fn has_bmc(host: &BareMetalHost) -> bool {
    host.spec
        .bmc
        .as_ref()
        .is_some_and(|b| !b.address.is_empty() && !b.credentials_name.is_empty())
}

fn inspection_disabled(host: &BareMetalHost) -> bool {
    host.annotations().get(INSPECT).map(String::as_str) == Some("disabled")
}

/// What follows registration.
pub fn after_registering(host: &BareMetalHost) -> &'static str {
    if host.spec.externally_provisioned == Some(true) {
        "externally provisioned"
    } else if inspection_disabled(host) {
        "preparing"
    } else {
        "inspecting"
    }
}

/// What the operator does with `host` now.
pub fn step(host: &BareMetalHost) -> Step {
    let imaged = host.spec.image.as_ref().is_some_and(|i| !i.url.is_empty());
    let external = host.spec.externally_provisioned == Some(true);
    match state(host) {
        "" | "unmanaged" if !has_bmc(host) => {
            if state(host).is_empty() {
                Step::Unmanage
            } else {
                Step::Idle
            }
        }
        "" | "unmanaged" | "registering" => Step::Register,
        "inspecting" => Step::Inspect,
        "preparing" => Step::Prepare,
        "available" | "ready" if external => Step::Adopt,
        "available" | "ready" if imaged => Step::Provision,
        "available" | "ready" => Step::Power,
        "provisioning" => Step::Provision,
        "provisioned" if !imaged => Step::Deprovision,
        "provisioned" | "externally provisioned" => Step::Power,
        "deprovisioning" => Step::Deprovision,
        _ => Step::Idle,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sip::types::{
        BareMetalHostSpec, BareMetalHostStatus, BmcDetails, HostImage, Provisioning,
    };

    fn host(state: &str, bmc: bool, image: bool) -> BareMetalHost {
        let mut h = BareMetalHost::new(
            "h",
            BareMetalHostSpec {
                bmc: bmc.then(|| BmcDetails {
                    address: "redfish://b/redfish/v1/Systems/1".into(),
                    credentials_name: "c".into(),
                    ..Default::default()
                }),
                image: image.then(|| HostImage {
                    url: "http://i/img.qcow2".into(),
                    ..Default::default()
                }),
                ..Default::default()
            },
        );
        h.status = Some(BareMetalHostStatus {
            provisioning: Some(Provisioning {
                state: state.into(),
                ..Default::default()
            }),
            ..Default::default()
        });
        h
    }

    #[test]
    fn hosts_walk_metal3s_states() {
        assert_eq!(step(&host("", false, false)), Step::Unmanage);
        assert_eq!(step(&host("unmanaged", false, false)), Step::Idle);
        assert_eq!(step(&host("unmanaged", true, false)), Step::Register);
        assert_eq!(step(&host("", true, false)), Step::Register);
        assert_eq!(step(&host("inspecting", true, false)), Step::Inspect);
        assert_eq!(step(&host("preparing", true, false)), Step::Prepare);
        assert_eq!(step(&host("available", true, false)), Step::Power);
        assert_eq!(step(&host("available", true, true)), Step::Provision);
        assert_eq!(step(&host("provisioned", true, true)), Step::Power);
        assert_eq!(step(&host("provisioned", true, false)), Step::Deprovision);
        assert_eq!(
            step(&host("deprovisioning", true, false)),
            Step::Deprovision
        );
        assert_eq!(step(&host("provisioning error", true, false)), Step::Idle);
        let mut external = host("available", true, false);
        external.spec.externally_provisioned = Some(true);
        assert_eq!(step(&external), Step::Adopt);
        assert_eq!(after_registering(&external), "externally provisioned");
        let mut uninspected = host("registering", true, false);
        uninspected
            .annotations_mut()
            .insert(INSPECT.into(), "disabled".into());
        assert_eq!(after_registering(&uninspected), "preparing");
        assert_eq!(
            after_registering(&host("registering", true, false)),
            "inspecting"
        );
    }
}
