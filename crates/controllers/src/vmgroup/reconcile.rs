//! One VmGroup made true on its vCenter: the VMs it owns are found by a custom field (so a
//! restarted controller finds them again), missing ones are cloned under names derived from
//! the group and an index (so a clone retried after a crash meets its own VM, adopts it and
//! never makes a second), extra ones go newest first, and a VM of the wrong shape is
//! reconfigured one at a time.

use super::placement::Resolved;
use super::types::{VmGroup, VmStatus};
use super::vcenters::VCenter;
use super::{Error, Reconciler, FINALIZER};
use infrasim_vim_client::{ops, CloneSpec, Moref, ObjectContent, TaskState};
use kube::api::Api;
use kube::ResourceExt;
use std::sync::Arc;
use std::time::Duration;

/// How long a reconcile waits for one vCenter task.
const TASK_LIMIT: Duration = Duration::from_secs(120);

/// How old a clone in flight gets before its task is read.
pub(super) const PENDING_CHECK: Duration = Duration::from_secs(5);

/// How long a reconcile waits for the first listing of a vCenter's VMs.
const SYNC_LIMIT: Duration = Duration::from_secs(30);

/// What the vCenter holds for one group.
pub(super) struct Observed {
    pub vc: Arc<VCenter>,
    /// The group's VMs by index.
    pub owned: Vec<(usize, ObjectContent)>,
    pub template: Option<ObjectContent>,
    /// VMs named as the group would name its own but not marked as anyone's.
    pub unmarked: Vec<(usize, ObjectContent)>,
}

/// `ns/name`: the owner mark of a group's VMs.
pub(super) fn owner_of(group: &VmGroup) -> String {
    format!(
        "{}/{}",
        group.namespace().unwrap_or_default(),
        group.name_any()
    )
}

/// The name of a group's VM `index`: `<namespace>-<group>-<index>`, within vCenter's 80
/// characters (a longer prefix is cut and made unique again with a hash of the whole).
pub(super) fn vm_name(group: &VmGroup, index: usize) -> String {
    let prefix = format!(
        "{}-{}",
        group.namespace().unwrap_or_default(),
        group.name_any()
    );
    let suffix = format!("-{index}");
    if prefix.len() + suffix.len() <= 80 {
        return format!("{prefix}{suffix}");
    }
    let digest = ring::digest::digest(&ring::digest::SHA256, prefix.as_bytes());
    let hash: String = digest.as_ref()[..4]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let mut keep = 80 - suffix.len() - hash.len() - 1;
    while !prefix.is_char_boundary(keep) {
        keep -= 1;
    }
    format!("{}-{hash}{suffix}", &prefix[..keep])
}

/// The index in a name [`vm_name`] made for `group`.
pub(super) fn index_of(group: &VmGroup, name: &str) -> Option<usize> {
    let (prefix, index) = name.rsplit_once('-')?;
    let index: usize = index.parse().ok()?;
    (vm_name(group, index) == name && !prefix.is_empty()).then_some(index)
}

/// What the vCenter holds for `group`, from the copy its watch keeps (no call).
pub(super) async fn observe(vc: Arc<VCenter>, group: &VmGroup) -> Result<Observed, Error> {
    let mine = |vm: &ObjectContent| {
        let name = vm.text("name");
        name == group.spec.template || index_of(group, name).is_some()
    };
    let vms = vc.select(SYNC_LIMIT, mine).await.map_err(Error::VCenter)?;
    let owner = owner_of(group);
    let owner_key = vc.owner_key;
    let mut observed = Observed {
        vc,
        owned: Vec::new(),
        template: None,
        unmarked: Vec::new(),
    };
    for vm in vms {
        let mark = ops::custom_value(&vm, owner_key).unwrap_or("");
        let index = index_of(group, vm.text("name"));
        match (mark == owner, index) {
            (true, Some(i)) => observed.owned.push((i, vm)),
            (false, Some(i)) if mark.is_empty() => observed.unmarked.push((i, vm)),
            _ if vm.text("name") == group.spec.template => {
                // A template beats a VM of the same name.
                let is_template = vm.text("config.template") == "true";
                if observed.template.is_none() || is_template {
                    observed.template = Some(vm);
                }
            }
            _ => {}
        }
    }
    observed.owned.sort_by_key(|(i, _)| *i);
    Ok(observed)
}

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
    for (index, vm) in std::mem::take(&mut o.unmarked) {
        o.vc.client
            .set_custom_field(&vm.obj, o.vc.owner_key, &owner)
            .await?;
        o.vc.settle(vm.text("name"));
        o.vc.note_marked(made_vm(&vm.obj, group, index, memory_mb), &owner);
        o.owned.push((index, vm));
        progress.marked += 1;
    }
    o.owned.sort_by_key(|(i, _)| *i);
    for index in missing(o, group) {
        let name = vm_name(group, index);
        if let Some((task, since)) = o.vc.pending(&name) {
            if since.elapsed() < PENDING_CHECK || still_running(o, &name, &task).await? {
                progress.in_flight += 1;
                continue;
            }
        }
        let Some((template, place)) = source else {
            continue;
        };
        let spec = clone_spec(group, place, index, memory_mb);
        let task = o.vc.client.clone_vm(&template.obj, &spec).await?;
        o.vc.start_pending(&name, task);
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

/// Whether a scale-up may start a clone: a missing VM has no clone in flight, or one late
/// enough for its task to be read. Only then is the placement looked up.
pub(super) fn may_clone(o: &Observed, group: &VmGroup) -> bool {
    missing(o, group)
        .into_iter()
        .any(|i| match o.vc.pending(&vm_name(group, i)) {
            None => true,
            Some((_, since)) => since.elapsed() >= PENDING_CHECK,
        })
}

/// Whether the clone making `name` still runs; a failed one is reported (and forgotten, so
/// the next reconcile tries again).
async fn still_running(o: &Observed, name: &str, task: &Moref) -> Result<bool, Error> {
    match o.vc.client.task_state(task).await {
        Ok(TaskState::Queued | TaskState::Running) => Ok(true),
        Ok(TaskState::Success(_)) => {
            // Done, and its VM not reported yet: wait for the watch a while longer.
            o.vc.start_pending(name, task.clone());
            Ok(true)
        }
        Ok(TaskState::Error { message: why, .. }) => {
            o.vc.settle(name);
            Err(Error::VCenter(format!("cloning {name}: {why}")))
        }
        // The vCenter forgot the task (it restarted): start again.
        Err(e) if e.fault_kind() == Some("ManagedObjectNotFound") => {
            o.vc.settle(name);
            Ok(false)
        }
        Err(e) => Err(e.into()),
    }
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
    }
}

/// Removes the VMs beyond `replicas`, newest (highest index) first. The VMs removed.
pub(super) async fn scale_down(o: &mut Observed, replicas: usize) -> Result<usize, Error> {
    let mut removed = 0;
    while o.owned.len() > replicas {
        let Some((_, vm)) = o.owned.pop() else { break };
        remove_vm(&o.vc, &vm.obj, vm.text("runtime.powerState")).await?;
        removed += 1;
    }
    Ok(removed)
}

/// Powers a VM off (if it is on) and destroys it.
pub(super) async fn remove_vm(vc: &VCenter, vm: &Moref, power: &str) -> Result<(), Error> {
    let client = &vc.client;
    if power == "poweredOn" {
        let task = client.start("PowerOffVM_Task", vm).await?;
        client.wait(&task, TASK_LIMIT).await?;
    }
    let task = client.start("Destroy_Task", vm).await?;
    client.wait(&task, TASK_LIMIT).await?;
    vc.forget(vm);
    Ok(())
}

/// The first VM whose CPUs or memory differ from the spec.
pub(super) fn misshapen<'a>(
    o: &'a Observed,
    group: &VmGroup,
    memory_mb: i64,
) -> Option<&'a ObjectContent> {
    o.owned.iter().map(|(_, vm)| vm).find(|vm| {
        vm.text("config.hardware.numCPU") != group.spec.cpu.to_string()
            || vm.text("config.hardware.memoryMB") != memory_mb.to_string()
    })
}

/// Mends one VM, so a reconcile never holds many vCenter tasks at once: the first VM whose CPUs
/// or memory differ from the spec is reconfigured, or else the first VM that is not running is
/// powered on (a VM someone powered off, or one a crash left off mid power-cycle). Whether one
/// was.
pub(super) async fn mend_one(o: &Observed, group: &VmGroup, memory_mb: i64) -> Result<bool, Error> {
    if let Some(vm) = misshapen(o, group, memory_mb) {
        reshape(o, vm, group.spec.cpu, memory_mb).await?;
        return Ok(true);
    }
    let stopped = o.owned.iter().map(|(_, vm)| vm).find(|vm| {
        matches!(vm.text("runtime.powerState"), "poweredOff" | "suspended")
            && o.vc.pending(vm.text("name")).is_none()
    });
    let Some(vm) = stopped else {
        return Ok(false);
    };
    // Left as it was (on already, or busy): the watch reports the change, no need to hurry.
    if !power_on(o, &vm.obj).await? {
        return Ok(false);
    }
    o.vc.refresh(&vm.obj).await?;
    Ok(true)
}

/// Gives a VM the group's CPUs and memory. A running VM is changed in place where its hot-plug
/// switches allow the change, as vCenter requires; otherwise it is powered off, changed and
/// powered on again.
async fn reshape(o: &Observed, vm: &ObjectContent, cpus: i64, memory_mb: i64) -> Result<(), Error> {
    let client = &o.vc.client;
    let running = vm.text("runtime.powerState") == "poweredOn";
    let cycle = running && !hot_pluggable(o, &vm.obj, cpus, memory_mb).await?;
    if cycle {
        let task = client.start("PowerOffVM_Task", &vm.obj).await?;
        client.wait(&task, TASK_LIMIT).await?;
    }
    let task = client
        .reconfigure(&vm.obj, Some(cpus), Some(memory_mb))
        .await?;
    let changed = client.wait(&task, TASK_LIMIT).await;
    // Back on even when the change failed: a group's VMs are not left off by its controller.
    if cycle {
        power_on(o, &vm.obj).await?;
    }
    changed?;
    o.vc.refresh(&vm.obj).await?;
    Ok(())
}

/// Whether a running VM takes the change to `cpus` and `memory_mb` while on: more CPUs need
/// CPU hot add, fewer need CPU hot remove, more memory needs memory hot add, and less memory
/// is never taken.
async fn hot_pluggable(o: &Observed, vm: &Moref, cpus: i64, memory_mb: i64) -> Result<bool, Error> {
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
    let (have_cpus, have_memory) = (int(PATHS[0]), int(PATHS[1]));
    let cpus_ok = cpus == have_cpus
        || (cpus > have_cpus && on(PATHS[2]))
        || (cpus < have_cpus && on(PATHS[3]));
    let memory_ok = memory_mb == have_memory || (memory_mb > have_memory && on(PATHS[4]));
    Ok(cpus_ok && memory_ok)
}

/// Powers a VM on; whether it did. One already on, or busy with another task (a clone that
/// powers it on itself), is left as it is: the watch reports how that ends.
async fn power_on(o: &Observed, vm: &Moref) -> Result<bool, Error> {
    let client = &o.vc.client;
    let task = client.start("PowerOnVM_Task", vm).await?;
    match client.wait(&task, TASK_LIMIT).await {
        Ok(_) => Ok(true),
        Err(e) if matches!(e.fault_kind(), Some("InvalidPowerState" | "TaskInProgress")) => {
            Ok(false)
        }
        Err(e) => Err(e.into()),
    }
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

/// A deleted group: its VMs go, then its finalizer.
pub(super) async fn finalize(group: &VmGroup, r: &Reconciler) -> Result<(), Error> {
    if !group.finalizers().iter().any(|f| f == FINALIZER) {
        return Ok(());
    }
    let api: Api<VmGroup> =
        Api::namespaced(r.ctx.client.clone(), &group.namespace().unwrap_or_default());
    match super::vcenters::credentials(&r.ctx.client, group).await {
        Ok(credentials) => {
            let vc = r.vcenters.get(credentials).await?;
            let mut o = observe(vc, group).await?;
            scale_down(&mut o, 0).await?;
        }
        // Nothing says where the VMs are any more: the group cannot wait for ever.
        Err(why) => {
            let note = format!("the VMs were not deleted: {why}");
            r.ctx.event(group, true, "VMsLeft", note).await;
        }
    }
    crate::finalizers::remove(&api, group, FINALIZER).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(ns: &str, name: &str) -> VmGroup {
        let mut g = VmGroup::new(name, Default::default());
        g.metadata.namespace = Some(ns.into());
        g
    }

    #[test]
    fn names_carry_namespace_group_and_index_within_80_characters() {
        let g = group("default", "vg-1");
        assert_eq!(vm_name(&g, 3), "default-vg-1-3");
        assert_eq!(index_of(&g, "default-vg-1-3"), Some(3));
        assert_eq!(index_of(&g, "default-vg-1-x"), None);
        assert_eq!(
            index_of(&group("default", "vg"), "default-vg-1-3"),
            None,
            "another group's"
        );
        let long = group("team", &"g".repeat(120));
        let name = vm_name(&long, 12);
        assert_eq!(name.len(), 80);
        assert_eq!(index_of(&long, &name), Some(12));
        assert_ne!(
            vm_name(&group("team", &"g".repeat(121)), 12),
            name,
            "the hash tells them apart"
        );
    }
}
