//! What the service needs of the machines behind it: the [`Machines`] a backend implements,
//! the [`Hardware`] it reports per machine, and the [`Record`] a BMC keeps for its machine
//! (kept *with* the machine by the backend, so it lives and dies with it and survives what
//! the machine survives).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The machines a Redfish service answers for.
pub trait Machines: Send + Sync {
    /// Every machine, in a stable order.
    fn list(&self) -> Vec<Hardware>;
    /// The machine `id` names: its UUID (the Redfish `Id`) or, as sushy-tools allows, its name.
    fn find(&self, id: &str) -> Option<Hardware>;
    /// Powers the machine with UUID `id`; why not, when it cannot.
    fn power(&self, id: &str, op: PowerOp) -> Result<(), String>;
    /// Keeps `record` with the machine with UUID `id`.
    fn keep(&self, id: &str, record: &Record) -> Result<(), String>;
}

/// A machine as its BMC sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct Hardware {
    /// The machine's UUID (its SMBIOS UUID), which is also its Redfish `Id`.
    pub uuid: String,
    pub name: String,
    pub power: Power,
    pub cpus: u32,
    pub cores_per_socket: u32,
    pub memory_mib: u64,
    pub nics: Vec<Nic>,
    pub disks: Vec<Disk>,
    /// The guest's host name, once it reports one.
    pub host_name: Option<String>,
    pub record: Record,
}

impl Hardware {
    /// Processors (sockets): the CPUs grouped by cores per socket, at least one.
    pub fn sockets(&self) -> u32 {
        let per = self.cores_per_socket.max(1);
        self.cpus.div_ceil(per).max(1)
    }

    /// The cores of socket `i` (the last one gets what is left).
    pub fn cores_of(&self, i: u32) -> u32 {
        let per = self.cores_per_socket.max(1).min(self.cpus.max(1));
        let before = per * i;
        self.cpus.saturating_sub(before).min(per)
    }
}

/// A network adapter.
#[derive(Debug, Clone, PartialEq)]
pub struct Nic {
    pub mac: String,
    pub label: String,
    pub connected: bool,
}

/// A disk.
#[derive(Debug, Clone, PartialEq)]
pub struct Disk {
    pub label: String,
    pub capacity_bytes: u64,
}

/// Power as Redfish's `PowerState` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Power {
    On,
    Off,
    /// A suspended VM.
    Paused,
}

impl Power {
    pub fn as_str(self) -> &'static str {
        match self {
            Power::On => "On",
            Power::Off => "Off",
            Power::Paused => "Paused",
        }
    }
}

/// What the service asks of a machine's power.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PowerOp {
    On,
    Off,
    /// An orderly shutdown through the guest where it can take one.
    Shutdown,
    /// A reset of a running machine: still on, booting again.
    Restart,
}

/// What a BMC keeps for its machine, kept by the backend with the machine.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Record {
    pub boot: BootOverride,
    /// Inserted media by virtual media device (`Cd`, `Floppy`).
    pub media: BTreeMap<String, Media>,
    /// BIOS attributes that differ from the defaults.
    pub bios: BTreeMap<String, serde_json::Value>,
    /// BIOS settings to apply at the next boot.
    pub bios_pending: BTreeMap<String, serde_json::Value>,
    pub secure_boot_enable: bool,
    /// Whether the running boot was made with secure boot on.
    pub secure_boot_current: bool,
    /// What the machine booted from last, if it booted under this BMC.
    pub last_boot: Option<LastBoot>,
}

/// `Boot`'s override properties.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct BootOverride {
    /// `BootSourceOverrideTarget`: `None`, `Pxe`, `Cd`, `Hdd`, `Floppy`, `UefiHttp`, `BiosSetup`.
    pub target: String,
    /// `BootSourceOverrideEnabled`: `Disabled`, `Once`, `Continuous`.
    pub enabled: String,
    /// `BootSourceOverrideMode`: `UEFI` or `Legacy`.
    pub mode: String,
    pub http_boot_uri: Option<String>,
}

impl Default for BootOverride {
    fn default() -> Self {
        BootOverride {
            target: "None".into(),
            enabled: "Disabled".into(),
            mode: "UEFI".into(),
            http_boot_uri: None,
        }
    }
}

/// An image on a virtual media device.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Media {
    pub image: String,
    pub inserted: bool,
    pub write_protected: bool,
    pub transfer_protocol: Option<String>,
    pub user_name: Option<String>,
}

/// A boot, as the BMC saw it start.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct LastBoot {
    /// The boot source it used (`Hdd` when nothing overrode it).
    pub source: String,
    /// The image it booted: the inserted media's URL for `Cd`/`Floppy`, the HTTP boot URI for
    /// `UefiHttp`; none for the others.
    pub image: Option<String>,
    /// When (RFC 3339).
    pub at: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hw(cpus: u32, per: u32) -> Hardware {
        Hardware {
            uuid: "u".into(),
            name: "n".into(),
            power: Power::Off,
            cpus,
            cores_per_socket: per,
            memory_mib: 1024,
            nics: vec![],
            disks: vec![],
            host_name: None,
            record: Record::default(),
        }
    }

    #[test]
    fn sockets_hold_every_cpu_once() {
        for (cpus, per) in [(1, 1), (4, 2), (5, 2), (8, 8), (3, 0), (2, 4)] {
            let h = hw(cpus, per);
            let total: u32 = (0..h.sockets()).map(|i| h.cores_of(i)).sum();
            assert_eq!(total, cpus, "{cpus} CPUs at {per} per socket");
            assert!((0..h.sockets()).all(|i| h.cores_of(i) > 0));
        }
    }

    #[test]
    fn a_record_reads_back_what_it_wrote_and_defaults_what_is_missing() {
        let mut r = Record::default();
        r.boot.target = "Cd".into();
        r.media.insert(
            "Cd".into(),
            Media {
                image: "http://x/a.iso".into(),
                inserted: true,
                ..Default::default()
            },
        );
        let text = serde_json::to_string(&r).unwrap();
        assert_eq!(serde_json::from_str::<Record>(&text).unwrap(), r);
        let empty: Record = serde_json::from_str("{}").unwrap();
        assert_eq!(empty.boot.mode, "UEFI");
        assert_eq!(empty.boot.enabled, "Disabled");
    }
}
