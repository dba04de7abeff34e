//! The vCenter tasks a group's reconcile starts, followed without waiting on any: each is
//! remembered with what its VM shows once it is done (a [`Goal`]); the watch's copy showing
//! it settles the task, and the task itself is read only when the copy is slow to show it, to
//! learn whether it failed. So a reconcile never blocks on vCenter, however slow its tasks
//! (a real vCenter takes seconds to power a VM off), and a scale-down of many VMs runs their
//! tasks side by side.

use super::observed::{has_shape, index_of, Observed, Shape, PENDING_CHECK};
use super::types::VmGroup;
use super::Error;
use chrono::{DateTime, TimeDelta, Utc};
use infrasim_controller_runtime::vcenters::{Goal, Pending};
use infrasim_vim_client::{Moref, ObjectContent, TaskState};

/// Faults that say a power task found the VM where it was going, or busy with another task
/// (a clone that powers it on itself): nothing to do, the watch reports how it ends.
const NOTHING_TO_DO: &[&str] = &["InvalidPowerState", "TaskInProgress"];

/// Starts `method` (`PowerOnVM_Task`, `PowerOffVM_Task`, `Destroy_Task`) on `vm` for `goal`.
pub(super) async fn start(
    o: &Observed,
    vm: &ObjectContent,
    method: &str,
    goal: Goal,
) -> Result<(), Error> {
    match o.vc.client.start(method, &vm.obj).await {
        Ok(task) => {
            o.vc.start_pending(vm.text("name"), task, goal);
            Ok(())
        }
        Err(e) if e.fault_kind().is_some_and(|k| NOTHING_TO_DO.contains(&k)) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Starts giving `vm` the group's CPUs and memory.
pub(super) async fn reshape(o: &Observed, vm: &ObjectContent, shape: Shape) -> Result<(), Error> {
    let asked =
        o.vc.client
            .reconfigure(&vm.obj, Some(shape.cpus), Some(shape.memory_mb))
            .await;
    match asked {
        Ok(task) => {
            o.vc.start_pending(vm.text("name"), task, Goal::Shaped);
            Ok(())
        }
        // Refused at once (not by its task): remembered the same way, the VM not left off.
        Err(e) if e.fault_kind().is_some() => {
            let shape = (shape.cpus, shape.memory_mb);
            o.vc.refuse(vm.text("name"), shape, e.to_string());
            if vm.text("runtime.powerState") != "poweredOn" {
                start(o, vm, "PowerOnVM_Task", Goal::On).await?;
            }
            Err(e.into())
        }
        Err(e) => Err(e.into()),
    }
}

/// Whether the copy of a VM (`None`: there is none) shows `goal` reached.
fn reached(goal: Goal, vm: Option<&ObjectContent>, shape: Shape) -> bool {
    let power = || vm.map(|vm| vm.text("runtime.powerState"));
    match goal {
        Goal::Made => vm.is_some(),
        Goal::Gone => vm.is_none(),
        Goal::Grouped => false,
        Goal::Off => power() == Some("poweredOff"),
        Goal::On => power() == Some("poweredOn"),
        Goal::Shaped => vm.is_some_and(|vm| has_shape(vm, shape)),
    }
}

/// Settles the group's tasks whose change the copy shows and reads those slow to show it;
/// how many are still in flight. A failed task is forgotten, so the next reconcile tries
/// again, and returned as the error (a VM whose reshape failed is powered on again first).
pub(super) async fn follow(o: &Observed, group: &VmGroup, shape: Shape) -> Result<usize, Error> {
    let mut in_flight = 0;
    let mut failed = Vec::new();
    let vms = o.by_name();
    for (name, pending) in o.vc.pending_where(|name| index_of(group, name).is_some()) {
        let vm = vms.get(name.as_str()).copied();
        if reached(pending.goal, vm, shape) {
            o.vc.settle(&name);
            continue;
        }
        if o.vc.age(&pending) < PENDING_CHECK {
            in_flight += 1;
            continue;
        }
        match o.vc.client.task_state(&pending.task).await {
            Ok(TaskState::Queued | TaskState::Running) => {
                o.vc.checked(&name);
                in_flight += 1;
            }
            Ok(TaskState::Success(made)) => {
                o.vc.settle(&name);
                catch_up(o, vm, made, pending.goal).await?;
            }
            Ok(TaskState::Error { kind, .. }) if NOTHING_TO_DO.contains(&kind.as_str()) => {
                o.vc.settle(&name);
            }
            Ok(TaskState::Error { message, .. }) => {
                o.vc.settle(&name);
                if pending.goal == Goal::Shaped {
                    // Not tried again for this shape; the VM is not left off.
                    o.vc.refuse(&name, (shape.cpus, shape.memory_mb), message.clone());
                    if let Some(vm) = vm {
                        start(o, vm, "PowerOnVM_Task", Goal::On).await?;
                    }
                }
                failed.push(format!("{} {name}: {message}", doing(pending.goal)));
            }
            // The vCenter forgot the task (it restarted): what the copy shows decides anew.
            Err(e) if e.fault_kind() == Some("ManagedObjectNotFound") => o.vc.settle(&name),
            Err(e) => return Err(e.into()),
        }
    }
    if failed.is_empty() {
        Ok(in_flight)
    } else {
        Err(Error::VCenter(failed.join("; ")))
    }
}

/// When to look at the group again while it has work in flight: the watch reports each
/// task's change, and a task whose change is late is read `PENDING_CHECK` after it started
/// (or was last read). That is a deadline on the injected clock, not a poll.
pub(super) fn look_again(o: &Observed, group: &VmGroup, now: DateTime<Utc>) -> DateTime<Utc> {
    let pending = o.vc.pending_where(|name| index_of(group, name).is_some());
    read_deadline(pending.iter().map(|(_, p)| p), now)
}

/// The earliest time one of `pending` is due to be read. With none remembered (vCenter
/// answered that it had nothing to do: the VM was busy with another task, whose change the
/// watch reports), `PENDING_CHECK` from `now`, as for a task started now.
fn read_deadline<'a>(
    pending: impl IntoIterator<Item = &'a Pending>,
    now: DateTime<Utc>,
) -> DateTime<Utc> {
    let wait = TimeDelta::from_std(PENDING_CHECK).unwrap_or(TimeDelta::MAX);
    let due = |since: DateTime<Utc>| {
        since
            .checked_add_signed(wait)
            .unwrap_or(DateTime::<Utc>::MAX_UTC)
    };
    pending
        .into_iter()
        .map(|p| due(p.since))
        .min()
        .unwrap_or_else(|| due(now))
}

/// A task ended well and the watch has not said so yet: the copy of its VM is read again,
/// so the next step does not repeat this one.
async fn catch_up(
    o: &Observed,
    vm: Option<&ObjectContent>,
    made: Option<Moref>,
    goal: Goal,
) -> Result<(), Error> {
    match (goal, vm, made) {
        (Goal::Gone, Some(vm), _) => o.vc.forget(&vm.obj),
        (Goal::Made, _, Some(made)) => o.vc.refresh(&made).await?,
        (_, Some(vm), _) => o.vc.refresh(&vm.obj).await?,
        _ => {}
    }
    Ok(())
}

fn doing(goal: Goal) -> &'static str {
    match goal {
        Goal::Made => "cloning",
        Goal::Off => "powering off",
        Goal::Gone => "destroying",
        Goal::Grouped => "adding to a VM group",
        Goal::Shaped => "reconfiguring",
        Goal::On => "powering on",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use infrasim_vim_client::Val;

    fn vm(power: &str, cpus: i64, memory_mb: i64) -> ObjectContent {
        let text = |s: String| Val::Text(s);
        ObjectContent {
            obj: Moref::new("VirtualMachine", "vm-1"),
            props: vec![
                ("runtime.powerState".into(), text(power.into())),
                ("config.hardware.numCPU".into(), text(cpus.to_string())),
                (
                    "config.hardware.memoryMB".into(),
                    text(memory_mb.to_string()),
                ),
            ],
        }
    }

    #[test]
    fn the_group_is_looked_at_again_when_its_first_late_task_is_due_to_be_read() {
        let t = |s: i64| DateTime::<Utc>::from_timestamp(1_900_000_000 + s, 0).unwrap();
        let pending = |since| Pending {
            task: Moref::new("Task", "task-1"),
            goal: Goal::On,
            since,
        };
        let check = TimeDelta::from_std(PENDING_CHECK).unwrap();
        let tasks = [pending(t(10)), pending(t(3)), pending(t(7))];
        assert_eq!(read_deadline(&tasks, t(12)), t(3) + check);
        // A task read meanwhile (its `since` moved on) is read again a whole wait later.
        assert_eq!(read_deadline(&[pending(t(12))], t(12)), t(12) + check);
        assert_eq!(read_deadline([], t(20)), t(20) + check);
    }

    #[test]
    fn a_goal_is_reached_when_the_copy_shows_it() {
        let shape = Shape {
            cpus: 2,
            memory_mb: 1024,
        };
        let off = vm("poweredOff", 2, 1024);
        let on_small = vm("poweredOn", 1, 1024);
        assert!(reached(Goal::Made, Some(&off), shape));
        assert!(!reached(Goal::Made, None, shape));
        assert!(reached(Goal::Gone, None, shape));
        assert!(!reached(Goal::Gone, Some(&off), shape));
        assert!(reached(Goal::Off, Some(&off), shape));
        assert!(!reached(Goal::On, Some(&off), shape));
        assert!(reached(Goal::On, Some(&on_small), shape));
        assert!(reached(Goal::Shaped, Some(&off), shape));
        assert!(!reached(Goal::Shaped, Some(&on_small), shape));
    }
}
