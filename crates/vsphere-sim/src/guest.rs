//! The guests of VirtualMachines: which boot of each VM is the latest (so a guest coming up
//! from before a reset is ignored), the fixed addresses customization asked for, and the
//! addresses handed out per network. `virtual_machine` runs power operations and guests
//! coming up; this is the state it keeps between them.

use crate::value::Moref;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::net::Ipv4Addr;

#[derive(Debug, Default)]
pub(crate) struct Guests {
    boot_count: u64,
    /// The latest boot of each VM.
    boots: HashMap<String, u64>,
    /// Fixed IPs from CustomizeVM_Task, applied at the next power-on.
    fixed_ips: HashMap<String, String>,
    /// Addresses handed out, per (VM, NIC index), and the next free host number per network.
    ips: HashMap<(String, usize), String>,
    ip_next: HashMap<String, u32>,
    /// Each network's place in the address plan (its second octet), in order of first use.
    network_index: HashMap<String, u32>,
}

impl Guests {
    /// Records a new boot of `vm`; returns its number, for `is_latest_boot`.
    pub(crate) fn boot(&mut self, vm: &str) -> u64 {
        self.boot_count += 1;
        self.boots.insert(vm.to_string(), self.boot_count);
        self.boot_count
    }

    pub(crate) fn is_latest_boot(&self, vm: &str, boot: u64) -> bool {
        self.boots.get(vm) == Some(&boot)
    }

    /// Sets (or with `None` clears) the first NIC's fixed address.
    pub(crate) fn set_fixed_ip(&mut self, vm: &str, ip: Option<String>) {
        match ip {
            Some(ip) => self.fixed_ips.insert(vm.to_string(), ip),
            None => self.fixed_ips.remove(vm),
        };
    }

    /// The IP of a VM's NIC: the first NIC's fixed address if customization set one, else
    /// one stable across reboots and unique within its network.
    pub(crate) fn ip_for(&mut self, vm: &str, nic: usize, network: &Moref) -> String {
        if nic == 0 {
            if let Some(fixed) = self.fixed_ips.get(vm) {
                return fixed.clone();
            }
        }
        if let Some(ip) = self.ips.get(&(vm.to_string(), nic)) {
            return ip.clone();
        }
        let count = self.network_index.len() as u32;
        let index = *self
            .network_index
            .entry(network.value.clone())
            .or_insert(count);
        let n = self.ip_next.entry(network.value.clone()).or_insert(0);
        let ip = allocate_ip(index, *n);
        *n += 1;
        self.ips.insert((vm.to_string(), nic), ip.clone());
        ip
    }
}

/// How many NICs a VM may have (vSphere's limit), which bounds the lookups of a VM's
/// addresses.
const MAX_NICS: usize = 10;

/// What is kept of one VM's guest across a restart (see `persist`).
#[derive(Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct GuestRecord {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    boot: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    fixed_ip: Option<String>,
    /// (NIC index, address).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    ips: Vec<(usize, String)>,
}

/// The address plan's counters, kept with the simulator's own record.
#[derive(Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct GuestCounters {
    boot_count: u64,
    ip_next: HashMap<String, u32>,
    network_index: HashMap<String, u32>,
}

impl Guests {
    /// What is kept of `vm`'s guest, `None` when nothing is.
    pub(crate) fn record(&self, vm: &str) -> Option<GuestRecord> {
        let ips = (0..MAX_NICS)
            .filter_map(|nic| Some((nic, self.ips.get(&(vm.to_string(), nic))?.clone())))
            .collect();
        let record = GuestRecord {
            boot: self.boots.get(vm).copied(),
            fixed_ip: self.fixed_ips.get(vm).cloned(),
            ips,
        };
        (record != GuestRecord::default()).then_some(record)
    }

    /// Takes back what was kept of `vm`'s guest.
    pub(crate) fn restore(&mut self, vm: &str, record: GuestRecord) {
        if let Some(boot) = record.boot {
            self.boots.insert(vm.to_string(), boot);
        }
        if let Some(ip) = record.fixed_ip {
            self.fixed_ips.insert(vm.to_string(), ip);
        }
        for (nic, ip) in record.ips {
            self.ips.insert((vm.to_string(), nic), ip);
        }
    }

    pub(crate) fn counters(&self) -> GuestCounters {
        GuestCounters {
            boot_count: self.boot_count,
            ip_next: self.ip_next.clone(),
            network_index: self.network_index.clone(),
        }
    }

    pub(crate) fn restore_counters(&mut self, c: GuestCounters) {
        self.boot_count = c.boot_count;
        self.ip_next = c.ip_next;
        self.network_index = c.network_index;
    }
}

/// A per-network IP pool: `10.<network>.<n / 250>.<n % 250 + 2>`, stable per VM and NIC.
fn allocate_ip(network_index: u32, n: u32) -> String {
    let base = u32::from(Ipv4Addr::new(10, 0, 0, 0)) + ((network_index % 256) << 16);
    Ipv4Addr::from(base + (n / 250) * 256 + n % 250 + 2).to_string()
}
