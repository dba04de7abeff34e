//! How a machine boots under the simulation's boot faults (`MachineNeverBoots`,
//! `MachineBootsLate`): decided once, the first time a fault in force on its cluster meets a
//! machine that has not booted yet, and written on the machine's object
//! ([`BOOT_ANNOTATION`]). The object then says it for good: a machine that never boots does
//! not boot after the fault is gone, nor after a restart, and another reader (a test, an
//! operator) sees why it is stuck.

use chrono::{DateTime, Utc};
use infrasim_cloud::BootFault;
use infrasim_controller_runtime::conditions;
use kube::api::{Api, Patch, PatchParams};
use kube::{Resource, ResourceExt};
use serde::de::DeserializeOwned;
use serde_json::json;
use std::fmt::Debug;

/// On an infrastructure machine (or a VSphereVM): `never`, or the time (RFC 3339) its
/// operating system boots at, at the earliest.
pub const BOOT_ANNOTATION: &str = "sim.infrasim.dev/boot";

/// How a machine boots.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Boot {
    /// As its timings say.
    #[default]
    Normal,
    /// Not before this time.
    NotBefore(DateTime<Utc>),
    /// Never: its VM runs, its Node never registers.
    Never,
}

impl Boot {
    /// The boot an annotation's value says; `None` for a value this does not write.
    pub fn parse(value: &str) -> Option<Boot> {
        match value {
            "never" => Some(Boot::Never),
            time => conditions::parse_time(time).map(Boot::NotBefore),
        }
    }

    fn annotation(self) -> Option<String> {
        match self {
            Boot::Normal => None,
            Boot::NotBefore(at) => Some(conditions::timestamp(at)),
            Boot::Never => Some("never".into()),
        }
    }

    /// What a fault does to a machine it meets at `now`.
    pub fn under(fault: Option<BootFault>, now: DateTime<Utc>) -> Boot {
        match fault {
            None => Boot::Normal,
            Some(BootFault::Never) => Boot::Never,
            Some(BootFault::Late(delay)) => chrono::Duration::from_std(delay)
                .ok()
                .and_then(|d| now.checked_add_signed(d))
                .map_or(Boot::Never, Boot::NotBefore),
        }
    }
}

/// The boot of machine `obj`: what its annotation says, or, for a machine that has not
/// `booted` and that a boot `fault` meets now, what the fault makes of it (written on the
/// object first, so it holds from then on).
pub async fn decide<K>(
    api: &Api<K>,
    obj: &K,
    fault: Option<BootFault>,
    booted: bool,
    now: DateTime<Utc>,
) -> Result<Boot, kube::Error>
where
    K: Resource<DynamicType = ()> + Clone + Debug + DeserializeOwned,
{
    if let Some(value) = obj.annotations().get(BOOT_ANNOTATION) {
        return Ok(Boot::parse(value).unwrap_or_else(|| {
            tracing::warn!(
                machine = obj.name_any(),
                "{BOOT_ANNOTATION}: {value:?} is not `never` or a time; booting as usual"
            );
            Boot::Normal
        }));
    }
    if booted {
        return Ok(Boot::Normal);
    }
    let boot = Boot::under(fault, now);
    if let Some(value) = boot.annotation() {
        tracing::info!(
            machine = obj.name_any(),
            boot = value,
            "a boot fault holds the machine"
        );
        let patch = json!({"metadata": {"annotations": {BOOT_ANNOTATION: value}}});
        api.patch(
            &obj.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await?;
    }
    Ok(boot)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_fault_and_the_annotation_say_the_same_boot() {
        let now = conditions::parse_time("2026-11-30T12:00:00Z").expect("time");
        assert_eq!(Boot::under(None, now), Boot::Normal);
        let never = Boot::under(Some(BootFault::Never), now);
        assert_eq!(never, Boot::Never);
        let late = Boot::under(Some(BootFault::Late(Duration::from_secs(90))), now);
        assert_eq!(late, Boot::NotBefore(now + chrono::Duration::seconds(90)));
        for boot in [never, late] {
            let written = boot.annotation().expect("written down");
            assert_eq!(Boot::parse(&written), Some(boot));
        }
        assert_eq!(Boot::Normal.annotation(), None);
        assert_eq!(Boot::parse("soon"), None);
    }
}
