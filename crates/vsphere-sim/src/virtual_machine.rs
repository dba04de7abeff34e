//! VirtualMachine: power operations, guest simulation (tools, IP and MAC per NIC), reconfigure,
//! clone, template marking, destroy.

use crate::call::arg_moref;
use crate::call::Call;
use crate::fault::Fault;
use crate::inventory::vm::{create_vm, VmPlacement};
use crate::objects::{is_a, ManagedObject};
use crate::soap::Element;
use crate::state::timeline::{Operation, Scheduled, VmOp};
use crate::state::State;
use crate::task;
use crate::value::{string_array, Data, Moref, Val};
use chrono::{DateTime, Utc};

/// A power state's name, borrowed when it is one of vSphere's (every VM holds several).
fn power_name(ps: &str) -> crate::value::Name {
    match ps {
        "poweredOn" => "poweredOn".into(),
        "poweredOff" => "poweredOff".into(),
        "suspended" => "suspended".into(),
        other => other.to_string().into(),
    }
}

fn enum_val(ty: &'static str, v: impl Into<crate::value::Name>) -> Val {
    Val::Enum(ty, v.into())
}

pub(crate) fn dispatch(
    state: &mut State,
    call: &mut Call<'_>,
    this: &Moref,
    method: &str,
    args: &Element,
) -> Option<Result<String, Fault>> {
    if let Some(op) = task_op(this, method, args) {
        return Some(op.map(|op| task::start(state, call, this, method, args, Operation::Vm(op))));
    }
    let vm = this;
    Some(match method {
        "CloneVM_Task" => clone_vm(state, call, vm, args),
        "ShutdownGuest" => require_tools(state, vm).map(|_| {
            // The guest shuts down at once: vCenter logs the guest's shutdown, then the
            // power-off it leads to.
            announce(state, call, "VmGuestShutdownEvent", vm, |name| {
                format!("Guest OS shut down for {name}")
            });
            set_power(state, vm, "poweredOff", call.now);
            announce(state, call, "VmPoweredOffEvent", vm, |name| {
                format!("{name} is powered off")
            });
            String::new()
        }),
        "StandbyGuest" => require_tools(state, vm).map(|_| {
            set_power(state, vm, "poweredOff", call.now);
            String::new()
        }),
        "RebootGuest" => require_tools(state, vm).map(|_| {
            set_power(state, vm, "poweredOn", call.now);
            schedule_guest(state, call, vm);
            String::new()
        }),
        "MarkAsTemplate" => {
            if power_state(state, vm) != "poweredOff" {
                return Some(Err(invalid_power_state(
                    &power_state(state, vm),
                    "poweredOff",
                )));
            }
            set_template(state, vm, true);
            Ok(String::new())
        }
        "MarkAsVirtualMachine" => arg_moref(args, "pool").map(|pool| {
            set_template(state, vm, false);
            if let Some(o) = state.inventory.get_mut(vm) {
                o.set("resourcePool", pool.clone());
            }
            String::new()
        }),
        _ => return None,
    })
}

/// The operation of a method that runs as a task of its own (power, reconfigure, customize,
/// upgrade): `None` for any other method, a fault for one without its spec.
fn task_op(vm: &Moref, method: &str, args: &Element) -> Option<Result<VmOp, Fault>> {
    let vm = vm.clone();
    let spec = || {
        args.child("spec")
            .cloned()
            .ok_or_else(|| Fault::invalid_argument("spec"))
    };
    Some(match method {
        "PowerOnVM_Task" => Ok(VmOp::PowerOn(vm)),
        "PowerOffVM_Task" => Ok(VmOp::PowerOff(vm)),
        "ResetVM_Task" => Ok(VmOp::Reset(vm)),
        "SuspendVM_Task" => Ok(VmOp::Suspend(vm)),
        "ReconfigVM_Task" => spec().map(|spec| VmOp::Reconfigure(vm, spec)),
        "CustomizeVM_Task" => spec().map(|spec| VmOp::Customize(vm, spec)),
        "UpgradeVM_Task" => {
            let version = args.text_of("version").map(str::to_string);
            Ok(VmOp::Upgrade(vm, version))
        }
        _ => return None,
    })
}

fn require_tools(state: &State, vm: &Moref) -> Result<(), Fault> {
    let running = state
        .inventory
        .get(vm)
        .and_then(|o| o.path("guest.toolsRunningStatus"))
        .and_then(Val::as_str)
        == Some("guestToolsRunning");
    if running {
        Ok(())
    } else {
        Err(Fault::new_pub("ToolsUnavailable", "Cannot complete operation because VMware Tools is not running in this virtual machine."))
    }
}

pub(crate) fn invalid_power_state(existing: &str, requested: &str) -> Fault {
    let mut f = Fault::new_pub(
        "InvalidPowerState",
        format!(
            "The attempted operation cannot be performed in the current state ({}).",
            human(existing)
        ),
    );
    f.fields = f
        .fields
        .with(
            "requestedState",
            enum_val("VirtualMachinePowerState", power_name(requested)),
        )
        .with(
            "existingState",
            enum_val("VirtualMachinePowerState", power_name(existing)),
        );
    f
}

fn human(state: &str) -> &str {
    match state {
        "poweredOn" => "Powered on",
        "poweredOff" => "Powered off",
        "suspended" => "Suspended",
        other => other,
    }
}

pub(crate) fn power_state(state: &State, vm: &Moref) -> String {
    state
        .inventory
        .get(vm)
        .and_then(|o| o.path("runtime.powerState"))
        .and_then(Val::as_str)
        .unwrap_or("poweredOff")
        .to_string()
}

fn data_mut<'a>(o: &'a mut crate::objects::ManagedObject, prop: &str) -> Option<&'a mut Data> {
    o.props.get_mut(prop).and_then(Val::data_mut)
}

fn nested_mut<'a>(d: &'a mut Data, name: &str) -> Option<&'a mut Data> {
    d.data_mut(name)
}

/// Sets the power state everywhere it shows, and the guest state that follows from it.
pub(crate) fn set_power(state: &mut State, vm: &Moref, ps: &str, now: DateTime<Utc>) {
    let Some(o) = state.inventory.get_mut(vm) else {
        return;
    };
    let ps_val = enum_val("VirtualMachinePowerState", power_name(ps));
    if let Some(rt) = data_mut(o, "runtime") {
        rt.set("powerState", ps_val.clone());
        if ps == "poweredOn" {
            rt.set("bootTime", now);
        }
    }
    if let Some(rt) = data_mut(o, "summary").and_then(|s| nested_mut(s, "runtime")) {
        rt.set("powerState", ps_val);
        if ps == "poweredOn" {
            rt.set("bootTime", now);
        }
    }
    if ps != "poweredOn" {
        guest_down(o);
    }
    share_runtime(&mut state.inventory, vm);
}

/// Moves a VM to another host of its cluster (a DRS migration): its runtime says so, and
/// the hosts' VM lists.
pub(crate) fn move_to_host(state: &mut State, vm: &Moref, to: &Moref) {
    let Some(o) = state.inventory.get_mut(vm) else {
        return;
    };
    let from = o.path("runtime.host").and_then(Val::as_mor).cloned();
    if let Some(rt) = data_mut(o, "runtime") {
        rt.set("host", to.clone());
    }
    if let Some(rt) = data_mut(o, "summary").and_then(|s| nested_mut(s, "runtime")) {
        rt.set("host", to.clone());
    }
    if let Some(h) = from.and_then(|f| state.inventory.get_mut(&f)) {
        if let Some(Val::Array(_, vms)) = h.props.get_mut("vm") {
            vms.retain(|v| v.as_mor() != Some(vm));
        }
    }
    if let Some(h) = state.inventory.get_mut(to) {
        h.push_mor("vm", vm.clone());
    }
    share_runtime(&mut state.inventory, vm);
}

/// Makes `summary.runtime` the same object as `runtime` again when they are equal (a VM is
/// built with one object for both, and each change above copied it apart), and that object
/// one VMs of the same host and power share (see [`crate::objects::Inventory::reuse`]).
fn share_runtime(inventory: &mut crate::objects::Inventory, vm: &Moref) {
    let Some(o) = inventory.get(vm) else {
        return;
    };
    let Some(runtime) = o.props.get("runtime").cloned() else {
        return;
    };
    if o.path("summary.runtime") != Some(&runtime) {
        return;
    }
    let runtime = inventory.reuse("runtime", runtime);
    if let Some(o) = inventory.get_mut(vm) {
        o.set("runtime", runtime.clone());
        if let Some(summary) = data_mut(o, "summary") {
            summary.set("runtime", runtime);
        }
    }
}

fn guest_down(o: &mut crate::objects::ManagedObject) {
    if let Some(g) = data_mut(o, "guest") {
        g.set("toolsRunningStatus", "guestToolsNotRunning");
        g.set("guestState", "notRunning");
        g.set("guestStateChangeSupported", false);
        g.retain(|n, _| n != "ipAddress" && n != "hostName");
        g.set("net", Val::Array("GuestNicInfo", vec![]));
    }
    if let Some(g) = data_mut(o, "summary").and_then(|s| nested_mut(s, "guest")) {
        g.set("toolsRunningStatus", "guestToolsNotRunning");
        g.retain(|n, _| n != "ipAddress" && n != "hostName");
    }
}

pub(crate) fn set_template(state: &mut State, vm: &Moref, template: bool) {
    let Some(o) = state.inventory.get_mut(vm) else {
        return;
    };
    if let Some(c) = data_mut(o, "config") {
        c.set("template", template);
    }
    if let Some(c) = data_mut(o, "summary").and_then(|s| nested_mut(s, "config")) {
        c.set("template", template);
    }
}

/// Schedules the guest coming up after the configured boot delay.
fn schedule_guest(state: &mut State, call: &Call<'_>, vm: &Moref) {
    let boot = state.guests.boot(&vm.value);
    let at = call.now + chrono::Duration::from_std(call.config.guest_delay).unwrap_or_default();
    state.timeline.schedule(
        at,
        Scheduled::GuestReady {
            vm: vm.clone(),
            boot,
        },
    );
}

/// After a restart (see `persist`): the guests of powered-on VMs that had not come up when
/// the process died boot again, `delay` from `now`, as the timeline that would have brought
/// them up died with the process.
pub(crate) fn resume_guests(state: &mut State, now: DateTime<Utc>, delay: std::time::Duration) {
    let booting: Vec<Moref> = state
        .inventory
        .iter()
        .filter(|o| o.moref.ty == "VirtualMachine")
        .filter(|o| o.path("runtime.powerState").and_then(Val::as_str) == Some("poweredOn"))
        .filter(|o| {
            o.path("guest.toolsRunningStatus").and_then(Val::as_str) != Some("guestToolsRunning")
        })
        .map(|o| o.moref.clone())
        .collect();
    let at = now + chrono::Duration::from_std(delay).unwrap_or_default();
    for vm in booting {
        let boot = state.guests.boot(&vm.value);
        state.inventory.touch(&vm.value);
        state
            .timeline
            .schedule(at, Scheduled::GuestReady { vm, boot });
    }
}

/// The guest is up: tools running, an IP per NIC from its network's pool.
pub(crate) fn guest_ready(state: &mut State, vm: &Moref, boot: u64) {
    if !state.guests.is_latest_boot(&vm.value, boot) || power_state(state, vm) != "poweredOn" {
        return;
    }
    let nics: Vec<(i32, String, Moref, String)> = state
        .inventory
        .get(vm)
        .and_then(|o| o.path("config.hardware.device"))
        .map(|d| match d {
            Val::Array(_, items) => items
                .iter()
                .filter_map(|dev| {
                    let mac = dev.path("macAddress")?.as_str()?.to_string();
                    let key = match dev.path("key") {
                        Some(Val::Int(k)) => *k,
                        _ => 0,
                    };
                    let network = crate::devices::nic_network(dev)?;
                    // guest.net names the port group, standard or distributed.
                    let name = match dev.path("backing.deviceName") {
                        Some(Val::Str(name)) => name.clone(),
                        _ => state.inventory.get(&network)?.name().to_string(),
                    };
                    Some((key, mac, network, name))
                })
                .collect(),
            _ => Vec::new(),
        })
        .unwrap_or_default();
    // A NIC the guest's cloud-init configures statically reports those addresses.
    let statics = crate::cloud_init::static_addresses(
        state
            .inventory
            .get(vm)
            .and_then(|o| o.path("config.extraConfig")),
    );
    let mut nets = Vec::new();
    let mut first_ip = None;
    for (i, (key, mac, network, name)) in nics.into_iter().enumerate() {
        let ips = match statics.get(&mac.to_ascii_lowercase()) {
            Some(ips) => ips.clone(),
            None => vec![state.guests.ip_for(&vm.value, i, &network)],
        };
        if let Some(ip) = ips.first() {
            first_ip.get_or_insert_with(|| ip.clone());
        }
        nets.push(Val::from(
            Data::new("GuestNicInfo")
                .with("network", name.as_str())
                .with("ipAddress", string_array(ips))
                .with("macAddress", mac.as_str())
                .with("connected", true)
                .with("deviceConfigId", key),
        ));
    }
    let Some(o) = state.inventory.get_mut(vm) else {
        return;
    };
    let host_name = o.name().to_string();
    if let Some(g) = data_mut(o, "guest") {
        g.set(
            "toolsStatus",
            enum_val("VirtualMachineToolsStatus", "toolsOk"),
        );
        g.set("toolsRunningStatus", "guestToolsRunning");
        g.set("guestState", "running");
        // What a guest whose tools run reports (a ShutdownGuest or RebootGuest is taken).
        g.set("guestStateChangeSupported", true);
        g.set("hostName", host_name.as_str());
        if let Some(ip) = &first_ip {
            g.set("ipAddress", ip.as_str());
        }
        g.set("net", Val::Array("GuestNicInfo", nets));
    }
    if let Some(g) = data_mut(o, "summary").and_then(|s| nested_mut(s, "guest")) {
        g.set(
            "toolsStatus",
            enum_val("VirtualMachineToolsStatus", "toolsOk"),
        );
        g.set("toolsRunningStatus", "guestToolsRunning");
        g.set("hostName", host_name.as_str());
        if let Some(ip) = &first_ip {
            g.set("ipAddress", ip.as_str());
        }
    }
}

/// Runs a VM operation for its task.
pub(crate) fn run(state: &mut State, call: &Call<'_>, op: VmOp) -> Result<Option<Val>, Fault> {
    match op {
        VmOp::PowerOn(vm) => power_on(state, call, &vm)?,
        VmOp::PowerOff(vm) => power_off(state, call, &vm)?,
        VmOp::Reset(vm) => reset(state, call, &vm)?,
        VmOp::Suspend(vm) => suspend(state, call, &vm)?,
        VmOp::Reconfigure(vm, spec) => {
            reconfigure(state, &vm, &spec)?;
            announce(state, call, "VmReconfiguredEvent", &vm, |name| {
                format!("Reconfigured {name}")
            });
        }
        VmOp::Customize(vm, spec) => customize(state, call, &vm, &spec)?,
        VmOp::Upgrade(vm, version) => upgrade(state, &vm, version)?,
        VmOp::Clone {
            source,
            folder,
            name,
            spec,
        } => {
            let vm = clone_now(state, call, &source, &folder, &name, &spec)?;
            let source_name = vm_name(state, &source);
            emit(
                state,
                call,
                "VmClonedEvent",
                &vm,
                format!("Clone of {source_name} completed"),
            );
            return Ok(Some(Val::Mor(vm)));
        }
    }
    Ok(None)
}

/// Emits event `ty` about `vm`, its message made from the VM's name.
fn announce(
    state: &mut State,
    call: &Call<'_>,
    ty: &'static str,
    vm: &Moref,
    message: impl FnOnce(&str) -> String,
) {
    let name = vm_name(state, vm);
    emit(state, call, ty, vm, message(&name));
}

fn power_on(state: &mut State, call: &Call<'_>, vm: &Moref) -> Result<(), Fault> {
    let ps = power_state(state, vm);
    if ps == "poweredOn" {
        return Err(invalid_power_state(&ps, "poweredOn"));
    }
    if is_template(state, vm) {
        return Err(Fault::new_pub(
            "InvalidState",
            "The operation is not allowed in the current state of a template.",
        ));
    }
    set_power(state, vm, "poweredOn", call.now);
    schedule_guest(state, call, vm);
    announce(state, call, "VmPoweredOnEvent", vm, |name| {
        format!("{name} is powered on")
    });
    Ok(())
}

fn power_off(state: &mut State, call: &Call<'_>, vm: &Moref) -> Result<(), Fault> {
    let ps = power_state(state, vm);
    if ps == "poweredOff" {
        return Err(invalid_power_state(&ps, "poweredOff"));
    }
    set_power(state, vm, "poweredOff", call.now);
    announce(state, call, "VmPoweredOffEvent", vm, |name| {
        format!("{name} is powered off")
    });
    Ok(())
}

/// A reset: still powered on, its guest down and booting again.
fn reset(state: &mut State, call: &Call<'_>, vm: &Moref) -> Result<(), Fault> {
    let ps = power_state(state, vm);
    if ps != "poweredOn" {
        return Err(invalid_power_state(&ps, "poweredOn"));
    }
    set_power(state, vm, "poweredOn", call.now);
    if let Some(o) = state.inventory.get_mut(vm) {
        guest_down(o);
    }
    schedule_guest(state, call, vm);
    Ok(())
}

fn suspend(state: &mut State, call: &Call<'_>, vm: &Moref) -> Result<(), Fault> {
    let ps = power_state(state, vm);
    if ps != "poweredOn" {
        return Err(invalid_power_state(&ps, "poweredOn"));
    }
    set_power(state, vm, "suspended", call.now);
    announce(state, call, "VmSuspendedEvent", vm, |name| {
        format!("{name} is suspended")
    });
    Ok(())
}

/// A guest customization of a powered-off VM: the first NIC's fixed address, applied when
/// the guest next comes up.
fn customize(state: &mut State, call: &Call<'_>, vm: &Moref, spec: &Element) -> Result<(), Fault> {
    let ps = power_state(state, vm);
    if ps != "poweredOff" {
        return Err(invalid_power_state(&ps, "poweredOff"));
    }
    let fixed = spec
        .children_named("nicSettingMap")
        .next()
        .and_then(|m| m.child("adapter"))
        .and_then(|a| a.child("ip"))
        .filter(|ip| ip.xsi_type.as_deref() == Some("CustomizationFixedIp"))
        .and_then(|ip| ip.text_of("ipAddress"))
        .map(|s| s.trim().to_string());
    state.guests.set_fixed_ip(&vm.value, fixed);
    announce(state, call, "CustomizationStartedEvent", vm, |name| {
        format!("Started customization of VM {name}")
    });
    Ok(())
}

/// A hardware version upgrade of a powered-off VM (to the newest, `vmx-21`, when none is
/// named).
fn upgrade(state: &mut State, vm: &Moref, version: Option<String>) -> Result<(), Fault> {
    let ps = power_state(state, vm);
    if ps != "poweredOff" {
        return Err(invalid_power_state(&ps, "poweredOff"));
    }
    if let Some(c) = state
        .inventory
        .get_mut(vm)
        .and_then(|o| data_mut(o, "config"))
    {
        c.set("version", version.unwrap_or_else(|| "vmx-21".into()));
    }
    Ok(())
}

fn vm_name(state: &State, vm: &Moref) -> String {
    state
        .inventory
        .get(vm)
        .map(|o| o.name().to_string())
        .unwrap_or_default()
}

fn emit(state: &mut State, call: &Call<'_>, ty: &'static str, vm: &Moref, message: String) {
    crate::event_manager::emit(state, call, ty, Some(vm), message);
}

fn is_template(state: &State, vm: &Moref) -> bool {
    matches!(
        state
            .inventory
            .get(vm)
            .and_then(|o| o.path("config.template")),
        Some(Val::Bool(true))
    )
}

fn set_hardware(
    state: &mut State,
    vm: &Moref,
    field: &'static str,
    summary_field: Option<&'static str>,
    value: i32,
) {
    let Some(o) = state.inventory.get_mut(vm) else {
        return;
    };
    if let Some(h) = data_mut(o, "config").and_then(|c| nested_mut(c, "hardware")) {
        h.set(field, value);
    }
    if let (Some(summary_field), Some(c)) = (
        summary_field,
        data_mut(o, "summary").and_then(|s| nested_mut(s, "config")),
    ) {
        c.set(summary_field, value);
    }
}

/// Applies a VirtualMachineConfigSpec.
/// The checks of a whole reconfiguration spec, made before any of it applies: vCenter
/// refuses a spec with one bad value and leaves the VM as it was.
fn validate_spec(spec: &Element) -> Result<(), Fault> {
    for field in ["numCPUs", "numCoresPerSocket", "memoryMB"] {
        if let Some(text) = spec.text_of(field) {
            match text.trim().parse::<i32>() {
                Ok(n) if n >= 1 => {}
                _ => return Err(Fault::invalid_argument(&format!("spec.{field}"))),
            }
        }
    }
    for change in spec.children_named("deviceChange") {
        let operation = change.text_of("operation").unwrap_or("").trim();
        // No operation is allowed (the change is then ignored); an unknown one is not.
        if !matches!(operation, "" | "add" | "remove" | "edit") {
            return Err(Fault::invalid_argument("spec.deviceChange.operation"));
        }
    }
    Ok(())
}

/// The changes vCenter makes to a running VM only with hot plug: more CPUs with
/// `cpuHotAddEnabled`, fewer with `cpuHotRemoveEnabled`, more memory with
/// `memoryHotAddEnabled`; less memory, another cores-per-socket, or the hot-plug switches
/// themselves only when it is off. Anything else is refused with InvalidPowerState, the
/// fault a real vCenter answers, so a client that forgets to power-cycle finds out here.
fn check_hot_changes(o: &crate::objects::ManagedObject, spec: &Element) -> Result<(), Fault> {
    let power = o
        .path("runtime.powerState")
        .and_then(Val::as_str)
        .unwrap_or("poweredOff");
    if power != "poweredOn" {
        return Ok(());
    }
    let now = |path: &str| match o.path(path) {
        Some(Val::Int(n)) => i64::from(*n),
        Some(Val::Long(n)) => *n,
        _ => 0,
    };
    let enabled = |flag: &str| matches!(o.path(&format!("config.{flag}")), Some(Val::Bool(true)));
    let asked = |field: &str| {
        spec.text_of(field)
            .and_then(|t| t.trim().parse::<i64>().ok())
    };
    let refused = || Err(invalid_power_state(power, "poweredOff"));
    if let Some(n) = asked("numCPUs") {
        let cpus = now("config.hardware.numCPU");
        if (n > cpus && !enabled("cpuHotAddEnabled"))
            || (n < cpus && !enabled("cpuHotRemoveEnabled"))
        {
            return refused();
        }
    }
    if asked("numCoresPerSocket").is_some_and(|n| n != now("config.hardware.numCoresPerSocket")) {
        return refused();
    }
    if let Some(n) = asked("memoryMB") {
        let memory = now("config.hardware.memoryMB");
        if n < memory || (n > memory && !enabled("memoryHotAddEnabled")) {
            return refused();
        }
    }
    for flag in [
        "cpuHotAddEnabled",
        "cpuHotRemoveEnabled",
        "memoryHotAddEnabled",
    ] {
        if let Some(want) = spec.text_of(flag) {
            if (want.trim() == "true") != enabled(flag) {
                return refused();
            }
        }
    }
    Ok(())
}

/// Every distributed port group the spec's NIC backings name by `portgroupKey` exists (its key
/// is its managed object id, so this is a lookup, not a scan of the inventory).
fn check_portgroups(state: &State, spec: &Element) -> Result<(), Fault> {
    for change in spec.children_named("deviceChange") {
        let key = change
            .child("device")
            .and_then(|d| d.child("backing"))
            .and_then(|b| b.child("port"))
            .and_then(|p| p.text_of("portgroupKey"));
        let Some(key) = key else { continue };
        let pg = Moref::new("DistributedVirtualPortgroup", key.trim());
        if state.inventory.get(&pg).is_none() {
            return Err(Fault::invalid_argument(
                "spec.deviceChange.device.backing.port.portgroupKey",
            ));
        }
    }
    Ok(())
}

/// The distinct networks of a VM's NICs, in device order.
fn nic_networks(o: &crate::objects::ManagedObject) -> Vec<Val> {
    let mut networks: Vec<Moref> = Vec::new();
    if let Some(Val::Array(_, devices)) = o.path("config.hardware.device") {
        for d in devices {
            if let Some(n) = crate::devices::nic_network(d) {
                if !networks.contains(&n) {
                    networks.push(n);
                }
            }
        }
    }
    networks.into_iter().map(Val::Mor).collect()
}

pub(crate) fn reconfigure(state: &mut State, vm: &Moref, spec: &Element) -> Result<(), Fault> {
    validate_spec(spec)?;
    let Some(o) = state.inventory.get(vm) else {
        return Err(Fault::not_found(vm));
    };
    check_hot_changes(o, spec)?;
    check_portgroups(state, spec)?;
    state.profiles.apply(vm, spec.children_named("vmProfile"));
    for change in spec.children_named("deviceChange") {
        // A disk's own policy, as a device change names it (by the device's key).
        if let Some(key) = change.child("device").and_then(|d| d.text_of("key")) {
            state
                .profiles
                .apply_disk(vm, key, change.children_named("profile"));
        }
    }
    resize(state, vm, spec);
    let Some(o) = state.inventory.get_mut(vm) else {
        return Err(Fault::not_found(vm));
    };
    set_config_fields(o, spec);
    set_extra_config(o, spec);
    let before: Vec<Moref> = o.props.get("network").map(Val::morefs).unwrap_or_default();
    let changed_nics = change_devices(o, spec);
    // The VM's `network` is its NICs' networks, as vCenter keeps it, and each network's
    // `vm` lists the VMs with a NIC on it.
    if changed_nics {
        let networks = nic_networks(o);
        if !networks.is_empty() {
            o.set("network", Val::Array("ManagedObjectReference", networks));
        }
        follow_networks(state, vm, &before);
        assign_ports(state, vm);
    }
    Ok(())
}

/// Gives each NIC on a distributed port group without a port one, as vCenter connects it:
/// the port group's next port key (its `portKeys` grow by one) and a connection cookie.
fn assign_ports(state: &mut State, vm: &Moref) {
    let wanting: Vec<(usize, String)> = state
        .inventory
        .get(vm)
        .and_then(|o| o.path("config.hardware.device"))
        .map(|d| match d {
            Val::Array(_, devices) => devices
                .iter()
                .enumerate()
                .filter(|(_, d)| d.path("backing.port.portKey").is_none())
                .filter_map(|(i, d)| {
                    let pg = d.path("backing.port.portgroupKey").and_then(Val::as_str)?;
                    Some((i, pg.to_string()))
                })
                .collect(),
            _ => Vec::new(),
        })
        .unwrap_or_default();
    for (index, portgroup) in wanting {
        let pg = Moref::new("DistributedVirtualPortgroup", &portgroup);
        let Some(p) = state.inventory.get_mut(&pg) else {
            continue;
        };
        let taken = p.props.get("portKeys").map_or(0, |k| match k {
            Val::Array(_, keys) => keys.len(),
            _ => 0,
        });
        let key = taken.to_string();
        match p.props.get_mut("portKeys") {
            Some(Val::Array(_, keys)) => keys.push(Val::Str(key.clone())),
            _ => p.set("portKeys", crate::value::string_array([key.clone()])),
        }
        let cookie = (uuid::Uuid::new_v4().as_u128() as u32 >> 1) as i32;
        let Some(o) = state.inventory.get_mut(vm) else {
            return;
        };
        let port = data_mut(o, "config")
            .and_then(|c| nested_mut(c, "hardware"))
            .and_then(|h| match h.get_mut("device") {
                Some(Val::Array(_, devices)) => devices.get_mut(index),
                _ => None,
            })
            .and_then(Val::data_mut)
            .and_then(|d| d.data_mut("backing"))
            .and_then(|b| b.data_mut("port"));
        if let Some(port) = port {
            port.set("portKey", key);
            port.set("connectionCookie", cookie);
        }
    }
}

/// Brings the `vm` lists of the networks a VM was on (`before`) and is on now (its
/// `network`) in line: off those it left, onto those it joined.
fn follow_networks(state: &mut State, vm: &Moref, before: &[Moref]) {
    let now: Vec<Moref> = state
        .inventory
        .get(vm)
        .and_then(|o| o.props.get("network"))
        .map(Val::morefs)
        .unwrap_or_default();
    for left in before.iter().filter(|n| !now.contains(n)) {
        if let Some(Val::Array(_, vms)) = state
            .inventory
            .get_mut(left)
            .and_then(|n| n.props.get_mut("vm"))
        {
            vms.retain(|v| v.as_mor() != Some(vm));
        }
    }
    // Only the networks joined are looked through (a network's list may hold thousands of
    // VMs: a clone, which stays on the network it was placed on, must not copy or scan it).
    for joined in now.iter().filter(|n| !before.contains(n)) {
        let listed = state
            .inventory
            .get(joined)
            .and_then(|n| n.props.get("vm"))
            .is_some_and(|l| l.mor_refs().into_iter().any(|m| m == vm));
        if !listed {
            if let Some(n) = state.inventory.get_mut(joined) {
                n.push_mor("vm", vm.clone());
            }
        }
    }
}

/// A reconfiguration's CPUs, cores per socket and memory (each in the hardware and, where
/// it has one, the summary).
fn resize(state: &mut State, vm: &Moref, spec: &Element) {
    let int = |name: &str| {
        spec.text_of(name)
            .and_then(|t| t.trim().parse::<i32>().ok())
    };
    if let Some(n) = int("numCPUs") {
        set_hardware(state, vm, "numCPU", Some("numCpu"), n);
    }
    if let Some(n) = int("numCoresPerSocket") {
        set_hardware(state, vm, "numCoresPerSocket", None, n);
    }
    if let Some(n) = int("memoryMB") {
        set_hardware(state, vm, "memoryMB", Some("memorySizeMB"), n);
    }
}

/// A reconfiguration's plain config fields: the annotation, the hot-add flags, and the
/// identity (UUIDs, guest ID; also in the summary's config).
fn set_config_fields(o: &mut ManagedObject, spec: &Element) {
    if let Some(annotation) = spec.text_of("annotation") {
        if let Some(c) = data_mut(o, "config") {
            c.set("annotation", annotation);
        }
    }
    for flag in [
        "cpuHotAddEnabled",
        "cpuHotRemoveEnabled",
        "memoryHotAddEnabled",
    ] {
        if let Some(on) = spec.text_of(flag) {
            if let Some(c) = data_mut(o, "config") {
                c.set(flag, on.trim() == "true");
            }
        }
    }
    for (field, summary) in [
        ("instanceUuid", "instanceUuid"),
        ("uuid", "uuid"),
        ("guestId", "guestId"),
    ] {
        if let Some(v) = spec.text_of(field).map(str::trim).filter(|v| !v.is_empty()) {
            if let Some(c) = data_mut(o, "config") {
                c.set(field, v);
            }
            if let Some(c) = data_mut(o, "summary").and_then(|s| nested_mut(s, "config")) {
                c.set(summary, v);
            }
        }
    }
}

/// A reconfiguration's extraConfig: sets keys, or (with an empty value) removes them.
fn set_extra_config(o: &mut ManagedObject, spec: &Element) {
    for option in spec.children_named("extraConfig") {
        set_extra_option(
            o,
            option.text_of("key").unwrap_or(""),
            option.text_of("value").unwrap_or(""),
        );
    }
}

/// Sets `key` in the VM's extraConfig to `value`, or removes it when `value` is empty (as a
/// reconfiguration does).
pub(crate) fn set_extra_option(o: &mut ManagedObject, key: &str, value: &str) {
    let Some(c) = data_mut(o, "config") else {
        return;
    };
    let mut current: Vec<Val> = match c.get("extraConfig") {
        Some(Val::Array(_, items)) => items.clone(),
        _ => Vec::new(),
    };
    current.retain(|v| v.path("key").and_then(Val::as_str) != Some(key));
    if !value.is_empty() {
        current.push(Val::from(
            Data::new("OptionValue")
                .with("key", key)
                .with("value", crate::value::any(value)),
        ));
    }
    c.set("extraConfig", Val::Array("OptionValue", current));
}

/// A device's key, when it has one.
fn device_key(v: &Val) -> Option<i32> {
    match v.path("key") {
        Some(Val::Int(k)) => Some(*k),
        _ => None,
    }
}

/// A reconfiguration's deviceChange: edits of disk capacity, NICs added and removed.
/// Whether any change reached the hardware (the VM's networks are then derived again).
fn change_devices(o: &mut ManagedObject, spec: &Element) -> bool {
    let mut changed = false;
    for change in spec.children_named("deviceChange") {
        let operation = change.text_of("operation").unwrap_or("").trim().to_string();
        let Some(device) = change.child("device") else {
            continue;
        };
        let key = device
            .text_of("key")
            .and_then(|k| k.trim().parse::<i32>().ok());
        let Some(hw) = data_mut(o, "config").and_then(|c| nested_mut(c, "hardware")) else {
            continue;
        };
        let mut devices: Vec<Val> = match hw.get("device") {
            Some(Val::Array(_, items)) => items.clone(),
            _ => Vec::new(),
        };
        match operation.as_str() {
            "edit" => {
                for d in devices.iter_mut().filter(|d| device_key(d) == key) {
                    if let Some(dd) = d.data_mut() {
                        resize_disk(dd, device);
                    }
                }
            }
            "remove" => devices.retain(|d| device_key(d) != key),
            "add" => {
                if let Some(nic) = new_nic(&devices, device) {
                    devices.push(nic);
                }
            }
            _ => {}
        }
        hw.set("device", Val::Array("VirtualDevice", devices));
        changed = true;
    }
    changed
}

/// An edited device's capacity, as the edit gives it.
fn resize_disk(disk: &mut Data, edit: &Element) {
    for field in ["capacityInKB", "capacityInBytes"] {
        if let Some(n) = edit
            .text_of(field)
            .and_then(|t| t.trim().parse::<i64>().ok())
        {
            disk.set(field, n);
        }
    }
}

/// The NIC an added device describes, keyed after the VM's last NIC (`devices`), on the
/// port group or network its backing names; `None` for a device that is no NIC.
fn new_nic(devices: &[Val], device: &Element) -> Option<Val> {
    let ty = device
        .xsi_type
        .clone()
        .unwrap_or_else(|| "VirtualDevice".into());
    let is_nic = ty.starts_with("Virtual")
        && device.child("backing").is_some()
        && (ty.contains("Vmxnet") || ty.contains("E1000") || ty.contains("Ethernet"));
    if !is_nic {
        return None;
    }
    let key = devices
        .iter()
        .filter_map(device_key)
        .filter(|k| (4000..5000).contains(k))
        .max()
        .map_or(crate::devices::FIRST_NIC_KEY, |k| k + 1);
    let backing = device.child("backing");
    let port = backing.and_then(|b| b.child("port"));
    let network = backing
        .and_then(|b| b.child("network"))
        .and_then(Element::moref);
    let on = match port.and_then(|p| p.text_of("portgroupKey")) {
        Some(key) => crate::devices::NicBacking::Portgroup {
            switch_uuid: port
                .and_then(|p| p.text_of("switchUuid"))
                .unwrap_or("")
                .trim(),
            portgroup_key: key.trim(),
        },
        None => crate::devices::NicBacking::Network {
            network: network.as_ref(),
            device_name: backing.and_then(|b| b.text_of("deviceName")).unwrap_or(""),
        },
    };
    let given = device
        .text_of("macAddress")
        .map(str::trim)
        .filter(|m| !m.is_empty());
    let mac = given.map_or_else(crate::devices::generated_mac, str::to_string);
    // As the spec says, or `manual` for a MAC the client chose (vCenter's rule).
    let address_type = device
        .text_of("addressType")
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .unwrap_or(if given.is_some() {
            "manual"
        } else {
            "generated"
        })
        .to_string();
    let ty: crate::value::Name = if ty == "VirtualEthernetCard" {
        "VirtualVmxnet3".into()
    } else {
        ty.into()
    };
    let nic = crate::devices::ethernet_card(ty, key, on, &mac).with("addressType", address_type);
    Some(Val::from(nic))
}

fn clone_vm(
    state: &mut State,
    call: &mut Call<'_>,
    source: &Moref,
    args: &Element,
) -> Result<String, Fault> {
    let folder = arg_moref(args, "folder")?;
    let name = args.text_of("name").unwrap_or("").trim().to_string();
    let spec = args
        .child("spec")
        .cloned()
        .ok_or_else(|| Fault::invalid_argument("spec"))?;
    if name.is_empty() {
        return Err(Fault::invalid_argument("name"));
    }
    match state.inventory.by_value(&folder.value) {
        Some(f) if f.moref.ty == "Folder" => {}
        _ => return Err(Fault::not_found(&folder)),
    }
    Ok(task::start(
        state,
        call,
        source,
        "CloneVM_Task",
        args,
        Operation::Vm(VmOp::Clone {
            source: source.clone(),
            folder,
            name,
            spec,
        }),
    ))
}

fn clone_now(
    state: &mut State,
    call: &Call<'_>,
    source: &Moref,
    folder: &Moref,
    name: &str,
    spec: &Element,
) -> Result<Moref, Fault> {
    let src = clone_source(state, source, spec)?;
    if state.inventory.child_named(folder, name).is_some() {
        return Err(crate::fault::duplicate_name(name, folder));
    }
    let at = clone_placement(state, &src, folder, spec)?;
    let vm = create_vm(&mut state.inventory, name, &at, call.now);
    copy_source_config(state, &vm, &src);
    // The clone's NICs are its source's: its networks list it, not only the placement's.
    follow_networks(state, &vm, std::slice::from_ref(&at.network));
    set_power(state, &vm, "poweredOff", call.now);
    if let Some(location) = spec.child("location") {
        state
            .profiles
            .apply(&vm, location.children_named("profile"));
        // Each disk locator's policies, by the disk's key (a clone keeps its source's keys).
        for disk in location.children_named("disk") {
            if let Some(id) = disk.text_of("diskId") {
                state
                    .profiles
                    .apply_disk(&vm, id, disk.children_named("profile"));
            }
        }
    }
    if let Some(config) = spec.child("config") {
        reconfigure(state, &vm, config)?;
    }
    if spec.flag("template").unwrap_or(false) {
        set_template(state, &vm, true);
    } else if spec.flag("powerOn").unwrap_or(false) {
        set_power(state, &vm, "poweredOn", call.now);
        schedule_guest(state, call, &vm);
    }
    state.inventory.reshare(&vm);
    Ok(vm)
}

/// What a clone is made from: the source VM, with a snapshot's configuration for a linked
/// clone (which starts from the snapshot, not the VM's current configuration).
fn clone_source(state: &State, source: &Moref, spec: &Element) -> Result<ManagedObject, Fault> {
    let mut src = state
        .inventory
        .get(source)
        .cloned()
        .ok_or_else(|| Fault::not_found(source))?;
    if let Some(snapshot) = spec.child("snapshot").and_then(Element::moref) {
        let snap = state
            .inventory
            .get(&snapshot)
            .ok_or_else(|| Fault::not_found(&snapshot))?;
        if snap.props.get("vm").and_then(Val::as_mor) != Some(source) {
            return Err(Fault::invalid_argument("spec.snapshot"));
        }
        if let Some(config) = snap.props.get("config").cloned() {
            src.set("config", config);
        }
    }
    Ok(src)
}

/// Where a clone goes: the spec's location (pool, host, datastore), else the source's pool,
/// a host of the pool's owner (the source's own when it is one), the source's first
/// datastore; on the source's first network.
fn clone_placement(
    state: &State,
    src: &ManagedObject,
    folder: &Moref,
    spec: &Element,
) -> Result<VmPlacement, Fault> {
    let location = spec.child("location");
    let loc = |n: &str| location.and_then(|l| l.child(n)).and_then(Element::moref);
    let pool = loc("pool").or_else(|| src.props.get("resourcePool").and_then(Val::as_mor).cloned());
    let Some(pool) = pool else {
        return Err(Fault::invalid_argument("spec.location.pool"));
    };
    if !state
        .inventory
        .by_value(&pool.value)
        .is_some_and(|p| is_a(&p.moref.ty, "ResourcePool"))
    {
        return Err(Fault::not_found(&pool));
    }
    let host = match loc("host") {
        Some(h) => h,
        None => pool_host(state, src, &pool)?,
    };
    let datastore = loc("datastore")
        .or_else(|| {
            src.props
                .get("datastore")
                .map(Val::morefs)
                .and_then(|d| d.first().cloned())
        })
        .ok_or_else(|| Fault::invalid_argument("spec.location.datastore"))?;
    if state.inventory.by_value(&datastore.value).is_none() {
        return Err(Fault::not_found(&datastore));
    }
    let network = src
        .props
        .get("network")
        .map(Val::morefs)
        .and_then(|n| n.first().cloned())
        .ok_or_else(|| Fault::invalid_argument("source network"))?;
    Ok(VmPlacement {
        host,
        pool,
        folder: folder.clone(),
        datastore,
        network,
    })
}

/// The host of a clone the spec places in `pool` alone: the source's host when the pool's
/// owner has it, else the owner's first host.
fn pool_host(state: &State, src: &ManagedObject, pool: &Moref) -> Result<Moref, Fault> {
    let owner = state
        .inventory
        .get(pool)
        .and_then(|p| p.props.get("owner"))
        .and_then(Val::as_mor)
        .cloned();
    let src_host = src.path("runtime.host").and_then(Val::as_mor).cloned();
    let owner_hosts = owner
        .and_then(|o| {
            state
                .inventory
                .by_value(&o.value)
                .and_then(|o| o.props.get("host"))
                .map(Val::morefs)
        })
        .unwrap_or_default();
    match src_host {
        Some(h) if owner_hosts.contains(&h) => Ok(h),
        _ => owner_hosts
            .first()
            .cloned()
            .ok_or_else(|| Fault::invalid_argument("spec.location.host")),
    }
}

/// What a new clone `vm` takes from its source: the guest, extraConfig and virtual
/// hardware sizes; a fresh instance UUID and BIOS UUID (a spec's own are set after, by its
/// reconfiguration).
fn copy_source_config(state: &mut State, vm: &Moref, src: &ManagedObject) {
    let fresh = uuid::Uuid::new_v4().to_string();
    let fresh_bios = uuid::Uuid::new_v4().to_string();
    let copy = |path: &str| src.path(path).cloned();
    if let Some(o) = state.inventory.get_mut(vm) {
        if let Some(c) = data_mut(o, "config") {
            c.set("instanceUuid", fresh.as_str());
            c.set("uuid", fresh_bios.as_str());
            for f in ["guestId", "guestFullName"] {
                if let Some(v) = copy(&format!("config.{f}")) {
                    c.set(f, v);
                }
            }
            if let Some(v) = copy("config.extraConfig") {
                c.set("extraConfig", v);
            }
        }
        if let Some(c) = data_mut(o, "summary").and_then(|s| nested_mut(s, "config")) {
            c.set("instanceUuid", fresh.as_str());
            c.set("uuid", fresh_bios.as_str());
        }
    }
    for (hw, summary) in [
        ("numCPU", Some("numCpu")),
        ("memoryMB", Some("memorySizeMB")),
        ("numCoresPerSocket", None),
    ] {
        if let Some(Val::Int(n)) = copy(&format!("config.hardware.{hw}")) {
            set_hardware(state, vm, hw, summary, n);
        }
    }
}
