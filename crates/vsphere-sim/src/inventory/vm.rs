//! A virtual machine as the generator builds it and CreateVM_Task and clones start from:
//! powered on, with one CPU, 32 MB, a paravirtual SCSI controller, a thin disk and a VMXNET3
//! NIC, the parts equal in every VM shared (see [`Inventory::reuse`]).

use super::build::{enum_val, link, Placement};
use crate::objects::{uuid_for, Inventory, ManagedObject};
use crate::value::{mor_array, Data, Moref, Val};
use chrono::{DateTime, Utc};

/// Where a VM is created: its host, resource pool, folder, datastore and network.
#[derive(Debug, Clone)]
pub struct VmPlacement {
    pub host: Moref,
    pub pool: Moref,
    pub folder: Moref,
    pub datastore: Moref,
    pub network: Moref,
}

/// The virtual hardware of a generated VM: a paravirtual SCSI controller, a disk on the
/// datastore and a VMXNET3 NIC on the network (the parts equal in every VM shared).
fn vm_hardware(
    inv: &mut Inventory,
    name: &str,
    at: &VmPlacement,
    ds_name: &str,
    net_name: &str,
) -> Data {
    let (datastore, network) = (&at.datastore, &at.network);
    let mac = {
        let u = uuid_for(name, "mac");
        format!("00:50:56:{}:{}:{}", &u[0..2], &u[2..4], &u[4..6])
    };
    let disk = Data::new("VirtualDisk")
        .with("key", 204i32)
        .with(
            "deviceInfo",
            inv.reuse(
                "disk.deviceInfo",
                Data::new("Description")
                    .with("label", "Hard disk 1")
                    .with("summary", "10,485,760 KB"),
            ),
        )
        .with(
            "backing",
            Data::new("VirtualDiskFlatVer2BackingInfo")
                .with("fileName", format!("[{ds_name}] {name}/{name}.vmdk"))
                .with("datastore", datastore.clone())
                .with("diskMode", "persistent")
                .with("thinProvisioned", true),
        )
        .with("controllerKey", 202i32)
        .with("unitNumber", 0i32)
        .with("capacityInKB", 10_485_760i64)
        .with("capacityInBytes", 10_737_418_240i64);
    let on = crate::devices::NicBacking::Network {
        network: Some(network),
        device_name: net_name,
    };
    let mut nic =
        crate::devices::ethernet_card("VirtualVmxnet3", crate::devices::FIRST_NIC_KEY, on, &mac);
    inv.reuse_field("nic.deviceInfo", &mut nic, "deviceInfo");
    inv.reuse_field("nic.backing", &mut nic, "backing");
    let controller = Data::new("ParaVirtualSCSIController")
        .with("key", 202i32)
        .with(
            "deviceInfo",
            Data::new("Description")
                .with("label", "SCSI controller 0")
                .with("summary", "VMware paravirtual SCSI"),
        )
        .with("controllerKey", 100i32)
        .with("unitNumber", 3i32)
        .with("busNumber", 0i32)
        .with("device", Val::Array("int", vec![Val::Int(204)]))
        .with(
            "sharedBus",
            Val::Enum("VirtualSCSISharing", "noSharing".into()),
        );
    Data::new("VirtualHardware")
        .with("numCPU", 1i32)
        .with("numCoresPerSocket", 1i32)
        .with("memoryMB", 32i32)
        .with("virtualICH7MPresent", false)
        .with("virtualSMCPresent", false)
        .with(
            "device",
            Val::Array(
                "VirtualDevice",
                vec![
                    inv.reuse("controller", controller),
                    Val::from(disk),
                    Val::from(nic),
                ],
            ),
        )
}

/// What tells one generated VM from another in its summary.
struct VmIds<'a> {
    vm: &'a Moref,
    name: &'a str,
    vmx: &'a str,
    uuid: &'a str,
    instance_uuid: &'a str,
}

/// A generated VM's summary (its runtime the very object of the VM's `runtime`).
fn vm_summary(inv: &mut Inventory, ids: &VmIds<'_>, runtime: &Val) -> Data {
    let VmIds {
        vm,
        name,
        vmx,
        uuid,
        instance_uuid,
    } = *ids;
    Data::new("VirtualMachineSummary")
        .with("vm", vm.clone())
        .with("runtime", runtime.clone())
        .with(
            "guest",
            inv.reuse(
                "summary.guest",
                Data::new("VirtualMachineGuestSummary")
                    .with(
                        "toolsStatus",
                        enum_val("VirtualMachineToolsStatus", "toolsNotInstalled"),
                    )
                    .with("toolsRunningStatus", "guestToolsNotRunning"),
            ),
        )
        .with(
            "config",
            Data::new("VirtualMachineConfigSummary")
                .with("name", name)
                .with("template", false)
                .with("vmPathName", vmx)
                .with("memorySizeMB", 32i32)
                .with("numCpu", 1i32)
                .with("numEthernetCards", 1i32)
                .with("numVirtualDisks", 1i32)
                .with("uuid", uuid)
                .with("instanceUuid", instance_uuid)
                .with("guestId", "otherGuest")
                .with("guestFullName", "Other (32-bit)"),
        )
        .with(
            "quickStats",
            inv.reuse("quickStats", Data::new("VirtualMachineQuickStats")),
        )
        .with("overallStatus", enum_val("ManagedEntityStatus", "green"))
}

/// Creates a powered-on VM named `name` at `at`.
pub fn create_vm(inv: &mut Inventory, name: &str, at: &VmPlacement, now: DateTime<Utc>) -> Moref {
    let VmPlacement {
        host,
        pool,
        folder,
        datastore,
        network,
    } = at;
    let value = inv.next_value("vm");
    let m = Moref::new("VirtualMachine", &value);
    let ds_name = inv
        .get(datastore)
        .map(|d| d.name().to_string())
        .unwrap_or_default();
    let net_name = inv
        .get(network)
        .map(|d| d.name().to_string())
        .unwrap_or_default();
    let uuid = uuid_for(name, "bios");
    let instance_uuid = uuid_for(name, "instance");
    let vmx = format!("[{ds_name}] {name}/{name}.vmx");
    let hardware = vm_hardware(inv, name, at, &ds_name, &net_name);
    let config = Data::new("VirtualMachineConfigInfo")
        .with("changeVersion", now.to_rfc3339())
        .with("modified", now)
        .with("name", name)
        .with("guestFullName", "Other (32-bit)")
        .with("version", "vmx-13")
        .with("uuid", uuid.as_str())
        .with("createDate", now)
        .with("instanceUuid", instance_uuid.as_str())
        .with("template", false)
        .with("cpuHotAddEnabled", false)
        .with("cpuHotRemoveEnabled", false)
        .with("memoryHotAddEnabled", false)
        .with("guestId", "otherGuest")
        .with("alternateGuestName", "")
        .with(
            "files",
            Data::new("VirtualMachineFileInfo").with("vmPathName", vmx.as_str()),
        )
        .with("hardware", hardware)
        .with("extraConfig", Val::Array("OptionValue", vec![]));
    let runtime = Data::new("VirtualMachineRuntimeInfo")
        .with("host", host.clone())
        .with(
            "connectionState",
            enum_val("VirtualMachineConnectionState", "connected"),
        )
        .with(
            "powerState",
            enum_val("VirtualMachinePowerState", "poweredOn"),
        )
        .with("bootTime", now)
        .with("maxCpuUsage", 2294i32)
        .with("maxMemoryUsage", 32i32);
    // One object for both (and for VMs of the same host and time): they change together.
    let runtime = inv.reuse("runtime", runtime);
    let guest = Data::new("GuestInfo")
        .with(
            "toolsStatus",
            enum_val("VirtualMachineToolsStatus", "toolsNotInstalled"),
        )
        .with("toolsRunningStatus", "guestToolsNotRunning")
        .with("guestState", "notRunning")
        .with("net", Val::Array("GuestNicInfo", vec![]));
    let guest = inv.reuse("guest", guest);
    let ids = VmIds {
        vm: &m,
        name,
        vmx: &vmx,
        uuid: &uuid,
        instance_uuid: &instance_uuid,
    };
    let summary = vm_summary(inv, &ids, &runtime);
    let mut vm = ManagedObject::new("VirtualMachine", &value);
    vm.set("name", name);
    vm.set("parent", folder.clone());
    vm.set("resourcePool", pool.clone());
    vm.set("runtime", runtime);
    vm.set("summary", summary);
    vm.set("config", config);
    vm.set("guest", guest);
    vm.set("datastore", mor_array([datastore.clone()]));
    vm.set("network", mor_array([network.clone()]));
    vm.set("overallStatus", enum_val("ManagedEntityStatus", "green"));
    inv.insert(vm);
    link(inv, folder, "childEntity", &m);
    link(inv, pool, "vm", &m);
    link(inv, host, "vm", &m);
    link(inv, datastore, "vm", &m);
    link(inv, network, "vm", &m);
    m
}

/// One of the model's VMs, named `name`, on `host` in `pool`, on the first datastore and the
/// VM Network.
pub(super) fn generated_vm(
    inv: &mut Inventory,
    name: &str,
    place: &Placement,
    host: &Moref,
    pool: &Moref,
    now: DateTime<Utc>,
) -> Moref {
    let at = VmPlacement {
        host: host.clone(),
        pool: pool.clone(),
        folder: place.vm_folder.clone(),
        datastore: place.datastores[0].clone(),
        network: place.network.clone(),
    };
    create_vm(inv, name, &at, now)
}
