//! One VmGroup made true on its vCenter: the VMs it owns are found by a custom field (so a
//! restarted controller finds them again), missing ones are cloned under names derived from
//! the group and an index (so a clone retried after a crash meets its own VM, adopts it and
//! never makes a second), extra ones go newest first, and a VM of the wrong shape is
//! reconfigured one at a time.

use super::observed::{has_shape, observe, owner_of, vm_name, Observed, Shape};
use super::tasks;
use super::types::{VmGroup, VmStatus};
use super::{Error, Reconciler, FINALIZER};
use infrasim_controller_runtime::placement::Resolved;
use infrasim_controller_runtime::reconcile::{Cleanup, Next};
use infrasim_controller_runtime::vcenters::Goal;
use infrasim_vim_client::{CloneSpec, Moref, ObjectContent};
use kube::ResourceExt;

/// What one scale-up step did.
#[derive(Debug, Default)]
pub(super) struct Progress {
    /// VMs of the group's names marked as its own (its clones, once the watch reported them,
    /// or VMs a crash left unmarked).
    pub marked: usize,
    /// Clones started.
    pub started: usize,
    /// Clones still running.
    pub in_flight: usize,
}

/// Marks the group's unmarked VMs, then starts the clones that are missing, lowest index
/// first, without waiting on their tasks: the watch reports each new VM, which wakes the
/// group to mark it. A clone's task is read only when its VM is slow to appear, to learn
/// whether it failed.
pub(super) async fn scale_up(
    o: &mut Observed,
    group: &VmGroup,
    source: Option<(&ObjectContent, &Resolved)>,
    memory_mb: i64,
) -> Result<Progress, Error> {
    let owner = owner_of(group);
    let mut progress = Progress::default();
    // The controller's vCenters all define the owner field (see `WATCHING`).
    let owner_key = o.vc.owner_key.unwrap_or_default();
    for (index, vm) in std::mem::take(&mut o.unmarked) {
        o.vc.client
            .set_custom_field(&vm.obj, owner_key, &owner)
            .await?;
        o.vc.settle(vm.text("name"));
        o.vc.note_marked(made_vm(&vm.obj, group, index, memory_mb), &owner);
        o.owned.push((index, vm));
        progress.marked += 1;
    }
    o.owned.sort_by_key(|(i, _)| *i);
    for index in missing(o, group) {
        let name = vm_name(group, index);
        // A clone in flight (its task read by `tasks::follow` when it is late).
        if o.vc.pending(&name).is_some() {
            progress.in_flight += 1;
            continue;
        }
        let Some((template, place)) = source else {
            continue;
        };
        let spec = clone_spec(group, place, index, memory_mb);
        let task = o.vc.client.clone_vm(&template.obj, &spec).await?;
        o.vc.start_pending(&name, task, Goal::Made);
        progress.started += 1;
    }
    Ok(progress)
}

/// The indexes the group lacks, lowest first (VMs of its names not marked yet count as had:
/// they are about to be).
fn missing(o: &Observed, group: &VmGroup) -> Vec<usize> {
    let want = usize::try_from(group.spec.replicas.max(0)).unwrap_or(0);
    let have: std::collections::BTreeSet<usize> =
        o.owned.iter().chain(&o.unmarked).map(|(i, _)| *i).collect();
    (0..)
        .filter(|i| !have.contains(i))
        .take(want.saturating_sub(have.len()))
        .collect()
}

/// Whether a scale-up may start a clone: a missing VM has no clone in flight. Only then is
/// the placement looked up.
pub(super) fn may_clone(o: &Observed, group: &VmGroup) -> bool {
    missing(o, group)
        .into_iter()
        .any(|i| o.vc.pending(&vm_name(group, i)).is_none())
}

/// What the controller knows of a VM it just made and powered on (until the watch says more).
fn made_vm(vm: &Moref, group: &VmGroup, index: usize, memory_mb: i64) -> ObjectContent {
    let text = |s: String| infrasim_vim_client::Val::Text(s);
    ObjectContent {
        obj: vm.clone(),
        props: vec![
            ("name".into(), text(vm_name(group, index))),
            ("runtime.powerState".into(), text("poweredOn".into())),
            (
                "config.hardware.numCPU".into(),
                text(group.spec.cpu.to_string()),
            ),
            (
                "config.hardware.memoryMB".into(),
                text(memory_mb.to_string()),
            ),
        ],
    }
}

fn clone_spec(group: &VmGroup, place: &Resolved, index: usize, memory_mb: i64) -> CloneSpec {
    CloneSpec {
        name: vm_name(group, index),
        folder: place.folder.clone(),
        pool: place.pool.clone(),
        datastore: place.datastore.clone(),
        cpus: Some(group.spec.cpu),
        memory_mb: Some(memory_mb),
        power_on: true,
        device_change: place.device_change.clone(),
        extra_config: Vec::new(),
    }
}

/// Starts removing the VMs beyond `replicas`, the newest (highest indexes), all at once and
/// without waiting: each is powered off, then destroyed once the watch shows it off. How many
/// are being removed.
pub(super) async fn scale_down(o: &Observed, replicas: usize) -> Result<usize, Error> {
    let extras = o.owned.get(replicas..).unwrap_or_default();
    for (_, vm) in extras.iter().rev() {
        if o.vc.pending(vm.text("name")).is_some() {
            continue;
        }
        if vm.text("runtime.powerState") == "poweredOff" {
            tasks::start(o, vm, "Destroy_Task", Goal::Gone).await?;
        } else {
            tasks::start(o, vm, "PowerOffVM_Task", Goal::Off).await?;
        }
    }
    Ok(extras.len())
}

/// Why vCenter refused `vm` the group's shape, if it did (the shape is not tried again).
pub(super) fn refusal(o: &Observed, vm: &ObjectContent, shape: Shape) -> Option<String> {
    o.vc.refusal(vm.text("name"), (shape.cpus, shape.memory_mb))
}

/// The VMs the group keeps that vCenter refused its shape, and why.
pub(super) fn refusals(o: &Observed, replicas: usize, shape: Shape) -> Vec<String> {
    o.kept(replicas)
        .iter()
        .filter(|(_, vm)| !has_shape(vm, shape))
        .filter_map(|(_, vm)| Some(format!("{}: {}", vm.text("name"), refusal(o, vm, shape)?)))
        .collect()
}

/// Whether every VM the group keeps has its shape.
pub(super) fn shaped(o: &Observed, replicas: usize, shape: Shape) -> bool {
    o.kept(replicas).iter().all(|(_, vm)| has_shape(vm, shape))
}

/// Starts mending one kept VM, so VMs change one at a time: the first VM of the wrong shape
/// is reconfigured (a running one only when its hot-plug switches take the change, as vCenter
/// requires; otherwise it is powered off first, reconfigured once off, and powered on again
/// by the next step), or else the first VM that is not running is powered on (one someone
/// powered off, or one between the steps of a power cycle). Whether one was started.
pub(super) async fn mend_one(o: &Observed, replicas: usize, shape: Shape) -> Result<bool, Error> {
    let kept = o.kept(replicas);
    if kept
        .iter()
        .any(|(_, vm)| o.vc.pending(vm.text("name")).is_some())
    {
        return Ok(false);
    }
    let vms = || kept.iter().map(|(_, vm)| vm);
    let refused = |vm: &ObjectContent| refusal(o, vm, shape).is_some();
    if let Some(vm) = vms().find(|vm| !has_shape(vm, shape) && !refused(vm)) {
        let running = vm.text("runtime.powerState") == "poweredOn";
        if running && !hot_pluggable(o, &vm.obj, shape).await? {
            tasks::start(o, vm, "PowerOffVM_Task", Goal::Off).await?;
        } else {
            tasks::reshape(o, vm, shape).await?;
        }
        return Ok(true);
    }
    match vms().find(|vm| vm.text("runtime.powerState") != "poweredOn") {
        Some(vm) => {
            tasks::start(o, vm, "PowerOnVM_Task", Goal::On).await?;
            Ok(true)
        }
        None => Ok(false),
    }
}

/// Whether a running VM takes `shape` while on: more CPUs need CPU hot add, fewer need CPU
/// hot remove, more memory needs memory hot add, and less memory is never taken.
async fn hot_pluggable(o: &Observed, vm: &Moref, shape: Shape) -> Result<bool, Error> {
    const PATHS: &[&str] = &[
        "config.hardware.numCPU",
        "config.hardware.memoryMB",
        "config.cpuHotAddEnabled",
        "config.cpuHotRemoveEnabled",
        "config.memoryHotAddEnabled",
    ];
    let now = o.vc.client.properties(vm, PATHS).await?;
    let int = |path: &str| now.text(path).parse::<i64>().unwrap_or(0);
    let on = |path: &str| now.text(path) == "true";
    let (cpus, memory) = (int(PATHS[0]), int(PATHS[1]));
    let cpus_ok = shape.cpus == cpus
        || (shape.cpus > cpus && on(PATHS[2]))
        || (shape.cpus < cpus && on(PATHS[3]));
    let memory_ok = shape.memory_mb == memory || (shape.memory_mb > memory && on(PATHS[4]));
    Ok(cpus_ok && memory_ok)
}

/// The status lines of the owned VMs.
pub(super) fn vm_statuses(o: &Observed) -> Vec<VmStatus> {
    o.owned
        .iter()
        .map(|(_, vm)| VmStatus {
            name: vm.text("name").to_string(),
            mo_ref: vm.obj.value.clone(),
            power_state: vm.text("runtime.powerState").to_string(),
            ip: Some(vm.text("guest.ipAddress").to_string()).filter(|ip| !ip.is_empty()),
        })
        .collect()
}

/// A deleted group: its VMs go, then its finalizer. Pending while its VMs are being removed:
/// their changes wake it, and a task whose change is late is read at its deadline.
pub(super) async fn finalize(group: &VmGroup, r: &Reconciler) -> Result<Cleanup, Error> {
    if !group.finalizers().iter().any(|f| f == FINALIZER) {
        return Ok(Cleanup::Done);
    }
    match super::vcenters::credentials(&r.ctx.client, group).await {
        Ok(credentials) => {
            let vc = r.vcenters.get(credentials).await?;
            let o = observe(vc, group).await?;
            let shape = Shape {
                cpus: group.spec.cpu,
                memory_mb: group.spec.memory_mb().unwrap_or(0),
            };
            tasks::follow(&o, group, shape).await?;
            if scale_down(&o, 0).await? > 0 {
                let at = tasks::look_again(&o, group, r.ctx.now());
                return Ok(Cleanup::Pending(Next::At(at)));
            }
        }
        // Nothing says where the VMs are any more: the group cannot wait for ever.
        Err(why) => {
            let note = format!("the VMs were not deleted: {why}");
            r.ctx.event(group, true, "VMsLeft", note).await;
        }
    }
    infrasim_controller_runtime::finalizers::remove(&r.ctx.client, group, FINALIZER).await?;
    Ok(Cleanup::Done)
}
