//! The simulator's VMs as the machines of its Redfish service (`/redfish/v1` on the
//! simulator's own port): what sushy-tools does for libvirt's domains, done for a vCenter's
//! VMs. A system is a VM (templates are not machines), named by its BIOS UUID
//! (`config.uuid`) or its name; its hardware is the VM's (CPUs, memory, NICs with their
//! MACs, disks); a reset powers the VM through the same code as `PowerOnVM_Task` and its
//! kin, so vCenter clients see the power change and its events; and what the BMC keeps for
//! the machine (boot override, inserted media, BIOS settings) is kept in the VM's
//! `config.extraConfig` under [`RECORD_KEY`], where pyvmomi and govc can read it too.

use crate::engine::Engine;
use crate::objects::ManagedObject;
use crate::state::timeline::VmOp;
use crate::value::{Data, Moref, Val};
use infrasim_redfish::{Disk, Hardware, Machines, Nic, Power, PowerOp, Record};

/// The extraConfig key holding a VM's BMC record (JSON).
pub const RECORD_KEY: &str = "infrasim.bmc";

/// The VMs of one simulator (its engine, which holds its state), as machines.
pub(crate) struct Vms<'a>(pub &'a Engine);

impl Machines for Vms<'_> {
    fn list(&self) -> Vec<Hardware> {
        let mut all: Vec<Hardware> = self.0.with_current_inventory(|inv| {
            inv.iter().filter(|o| is_machine(o)).map(hardware).collect()
        });
        all.sort_by(|a, b| a.name.cmp(&b.name).then_with(|| a.uuid.cmp(&b.uuid)));
        all
    }

    fn find(&self, id: &str) -> Option<Hardware> {
        self.0.with_current_inventory(|inv| {
            let by_uuid = inv
                .iter()
                .find(|o| is_machine(o) && uuid_of(o).eq_ignore_ascii_case(id));
            by_uuid
                .or_else(|| inv.iter().find(|o| is_machine(o) && o.name() == id))
                .map(hardware)
        })
    }

    fn power(&self, id: &str, op: PowerOp) -> Result<(), String> {
        self.0.with_state(|state, call| {
            let vm = find_vm(&state.inventory, id)?;
            let on = crate::virtual_machine::power_state(state, &vm) == "poweredOn";
            let op = match (op, on) {
                (PowerOp::On, false) => VmOp::PowerOn(vm),
                (PowerOp::Off | PowerOp::Shutdown, true) => VmOp::PowerOff(vm),
                (PowerOp::Restart, true) => VmOp::Reset(vm),
                (PowerOp::Restart, false) => VmOp::PowerOn(vm),
                _ => return Ok(()),
            };
            crate::virtual_machine::run(state, call, op)
                .map(|_| ())
                .map_err(|f| f.message)
        })
    }

    fn keep(&self, id: &str, record: &Record) -> Result<(), String> {
        let text = serde_json::to_string(record).map_err(|e| e.to_string())?;
        self.0.with_state(|state, _| {
            let vm = find_vm(&state.inventory, id)?;
            let o = state
                .inventory
                .get_mut(&vm)
                .ok_or_else(|| format!("the VM of {id} is gone"))?;
            crate::virtual_machine::set_extra_option(o, RECORD_KEY, &text);
            Ok(())
        })
    }
}

fn is_machine(o: &ManagedObject) -> bool {
    o.moref.ty == "VirtualMachine" && !matches!(o.path("config.template"), Some(Val::Bool(true)))
}

fn uuid_of(o: &ManagedObject) -> &str {
    o.path("config.uuid").and_then(Val::as_str).unwrap_or("")
}

fn find_vm(inv: &crate::objects::Inventory, id: &str) -> Result<Moref, String> {
    inv.iter()
        .find(|o| is_machine(o) && uuid_of(o).eq_ignore_ascii_case(id))
        .map(|o| o.moref.clone())
        .ok_or_else(|| format!("no VM has the UUID {id}"))
}

fn number(v: Option<&Val>) -> Option<i64> {
    match v? {
        Val::Int(n) => Some(i64::from(*n)),
        Val::Long(n) => Some(*n),
        Val::Any(inner) => number(Some(inner)),
        _ => None,
    }
}

/// A VM as a machine.
fn hardware(o: &ManagedObject) -> Hardware {
    let count = |path: &str| number(o.path(path)).unwrap_or(1).max(1) as u32;
    let devices: &[Val] = match o.path("config.hardware.device") {
        Some(Val::Array(_, items)) => items,
        _ => &[],
    };
    let devices: Vec<&Data> = devices.iter().filter_map(Val::as_data).collect();
    let label = |d: &Data| {
        d.get("deviceInfo")
            .and_then(|i| i.path("label"))
            .and_then(Val::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let nics = devices
        .iter()
        .filter_map(|d| {
            let mac = d.get("macAddress").and_then(Val::as_str)?;
            let connected = !matches!(
                d.get("connectable").and_then(|c| c.path("connected")),
                Some(Val::Bool(false))
            );
            Some(Nic {
                mac: mac.to_string(),
                label: label(d),
                connected,
            })
        })
        .collect();
    let disks = devices
        .iter()
        .filter(|d| d.ty == "VirtualDisk")
        .map(|d| Disk {
            label: label(d),
            capacity_bytes: number(d.get("capacityInBytes"))
                .or_else(|| number(d.get("capacityInKB")).map(|kb| kb * 1024))
                .unwrap_or(0)
                .max(0) as u64,
        })
        .collect();
    Hardware {
        uuid: uuid_of(o).to_string(),
        name: o.name().to_string(),
        power: match o.path("runtime.powerState").and_then(Val::as_str) {
            Some("poweredOn") => Power::On,
            Some("suspended") => Power::Paused,
            _ => Power::Off,
        },
        cpus: count("config.hardware.numCPU"),
        cores_per_socket: count("config.hardware.numCoresPerSocket"),
        memory_mib: number(o.path("config.hardware.memoryMB"))
            .unwrap_or(0)
            .max(0) as u64,
        nics,
        disks,
        host_name: o
            .path("guest.hostName")
            .and_then(Val::as_str)
            .filter(|h| !h.is_empty())
            .map(str::to_string),
        record: record_of(o),
    }
}

/// The BMC record kept in the VM's extraConfig (an empty one where there is none, or where
/// someone wrote something unreadable under the key).
fn record_of(o: &ManagedObject) -> Record {
    let Some(Val::Array(_, options)) = o.path("config.extraConfig") else {
        return Record::default();
    };
    options
        .iter()
        .find(|v| v.path("key").and_then(Val::as_str) == Some(RECORD_KEY))
        .and_then(|v| v.path("value"))
        .and_then(Val::as_str)
        .and_then(|text| serde_json::from_str(text).ok())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SimConfig;
    use infrasim_clock::SystemClock;

    #[test]
    fn vms_are_machines_with_their_hardware_and_their_power() {
        let engine = Engine::new(SimConfig::default(), SystemClock::shared());
        let vms = Vms(&engine);
        let all = vms.list();
        assert_eq!(all.len(), 4);
        let first = &all[0];
        assert_eq!(first.nics.len(), 1);
        assert_eq!(first.disks[0].capacity_bytes, 10_737_418_240);
        assert_eq!(vms.find(&first.name).unwrap().uuid, first.uuid);
        assert_eq!(
            vms.find(&first.uuid.to_uppercase()).unwrap().name,
            first.name
        );
        let was = first.power;
        vms.power(&first.uuid, PowerOp::Off).unwrap();
        assert_eq!(vms.find(&first.uuid).unwrap().power, Power::Off);
        vms.power(&first.uuid, PowerOp::On).unwrap();
        assert_eq!(vms.find(&first.uuid).unwrap().power, Power::On);
        assert!(was == Power::On || was == Power::Off);
        let mut r = Record::default();
        r.boot.target = "Pxe".into();
        vms.keep(&first.uuid, &r).unwrap();
        assert_eq!(vms.find(&first.uuid).unwrap().record, r);
        assert!(vms.power("nope", PowerOp::On).is_err());
    }
}
