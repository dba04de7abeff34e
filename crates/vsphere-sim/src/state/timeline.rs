//! The timeline: work due at a given time (task steps, guests coming up), and the
//! operations tasks perform, as data.
//!
//! `task` creates tasks and schedules their operations here; the registry
//! (`handlers::run_due`) takes what is due and routes each operation to the module that does
//! its work. Operations are plain data so that this module, and `task`, need none of those
//! modules.

use crate::fault::Fault;
use crate::soap::Element;
use crate::value::{Moref, Val};
use chrono::{DateTime, Utc};

/// Snapshot operations tasks run.
#[derive(Debug, Clone)]
pub(crate) enum SnapOp {
    Create {
        vm: Moref,
        name: String,
        description: String,
    },
    RevertToCurrent {
        vm: Moref,
    },
    RevertTo {
        snapshot: Moref,
    },
    Remove {
        snapshot: Moref,
        remove_children: bool,
    },
    RemoveAll {
        vm: Moref,
    },
}

/// The VM operations tasks run.
#[derive(Debug, Clone)]
pub(crate) enum VmOp {
    PowerOn(Moref),
    PowerOff(Moref),
    Reset(Moref),
    Suspend(Moref),
    Reconfigure(Moref, Element),
    Customize(Moref, Element),
    Upgrade(Moref, Option<String>),
    Clone {
        source: Moref,
        folder: Moref,
        name: String,
        spec: Element,
    },
}

/// An operation a task performs when it runs.
#[derive(Debug, Clone)]
pub(crate) enum Operation {
    Vm(VmOp),
    Rename {
        entity: Moref,
        name: String,
    },
    Destroy {
        entity: Moref,
    },
    Snapshot(SnapOp),
    MoveInto {
        folder: Moref,
        list: Vec<Moref>,
    },
    /// ReconfigureComputeResource_Task on a cluster.
    ReconfigureCluster {
        cluster: Moref,
        spec: Element,
        modify: bool,
    },
    CreateVm {
        folder: Moref,
        config: Element,
        pool: Moref,
        host: Option<Moref>,
    },
    /// An injected failure: the task ends in error with the fault.
    Fail(Fault),
    /// An outcome computed when the task was created (a datastore search): the task
    /// completes with it.
    Done(Option<Val>),
}

/// Something the timeline does at a given time.
#[derive(Debug, Clone)]
pub(crate) enum Scheduled {
    /// Start a queued task.
    Start { task: Moref },
    /// Run a task's operation and complete it.
    Run { task: Moref, op: Box<Operation> },
    /// A powered-on VM's guest comes up: tools running, IP addresses.
    GuestReady { vm: Moref, boot: u64 },
}

impl Scheduled {
    /// Whether doing this changes `vm`.
    fn changes(&self, vm: &Moref) -> bool {
        match self {
            Scheduled::Start { .. } => false,
            Scheduled::GuestReady { vm: m, .. } => m == vm,
            Scheduled::Run { op, .. } => match &**op {
                Operation::Vm(op) => op.target() == Some(vm),
                Operation::Rename { entity, .. } | Operation::Destroy { entity } => entity == vm,
                Operation::MoveInto { list, .. } => list.contains(vm),
                Operation::Snapshot(_)
                | Operation::CreateVm { .. }
                | Operation::ReconfigureCluster { .. }
                | Operation::Fail(_)
                | Operation::Done(_) => false,
            },
        }
    }
}

impl VmOp {
    /// The VM the operation changes (a clone changes none: it makes another).
    fn target(&self) -> Option<&Moref> {
        match self {
            VmOp::PowerOn(vm)
            | VmOp::PowerOff(vm)
            | VmOp::Reset(vm)
            | VmOp::Suspend(vm)
            | VmOp::Reconfigure(vm, _)
            | VmOp::Customize(vm, _)
            | VmOp::Upgrade(vm, _) => Some(vm),
            VmOp::Clone { .. } => None,
        }
    }
}

/// Work due at a time: task steps, guests coming up; and the task event chain ids.
#[derive(Debug, Default)]
pub(crate) struct Timeline {
    /// Ordered by (time, sequence) when taken, so entries due at once run as scheduled.
    entries: Vec<(DateTime<Utc>, u64, Scheduled)>,
    seq: u64,
    chain: u64,
}

impl Timeline {
    pub(crate) fn schedule(&mut self, at: DateTime<Utc>, what: Scheduled) {
        self.seq += 1;
        self.entries.push((at, self.seq, what));
    }

    pub(crate) fn next_chain_id(&mut self) -> u64 {
        self.chain += 1;
        self.chain
    }

    /// The earliest scheduled time, if any.
    pub(crate) fn next_due(&self) -> Option<DateTime<Utc>> {
        self.entries.iter().map(|(t, _, _)| *t).min()
    }

    /// The earliest time something scheduled changes `vm`: a task's operation on it (not
    /// one that only reads it, as a clone of it does) or its guest coming up.
    pub(crate) fn next_due_for(&self, vm: &Moref) -> Option<DateTime<Utc>> {
        self.entries
            .iter()
            .filter(|(_, _, what)| what.changes(vm))
            .map(|(t, _, _)| *t)
            .min()
    }

    /// Removes and returns the earliest entry due by `now`, if any.
    pub(crate) fn take_due(&mut self, now: DateTime<Utc>) -> Option<Scheduled> {
        let i = self
            .entries
            .iter()
            .enumerate()
            .filter(|(_, (t, _, _))| *t <= now)
            .min_by_key(|(_, (t, seq, _))| (*t, *seq))
            .map(|(i, _)| i)?;
        Some(self.entries.remove(i).2)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_vms_next_change_is_the_earliest_entry_that_changes_it() {
        let t = |s: i64| DateTime::<Utc>::from_timestamp(1_900_000_000 + s, 0).unwrap();
        let vm = Moref::new("VirtualMachine", "vm-1");
        let other = Moref::new("VirtualMachine", "vm-2");
        let task = Moref::new("Task", "task-1");
        let run = |op: Operation| Scheduled::Run {
            task: task.clone(),
            op: Box::new(op),
        };
        let mut timeline = Timeline::default();
        timeline.schedule(t(1), Scheduled::Start { task: task.clone() });
        timeline.schedule(t(2), run(Operation::Vm(VmOp::PowerOn(other.clone()))));
        timeline.schedule(
            t(3),
            run(Operation::Vm(VmOp::Clone {
                source: vm.clone(),
                folder: other.clone(),
                name: "copy".into(),
                spec: Element::default(),
            })),
        );
        assert_eq!(
            timeline.next_due_for(&vm),
            None,
            "a clone only reads its source"
        );
        timeline.schedule(
            t(9),
            Scheduled::GuestReady {
                vm: vm.clone(),
                boot: 1,
            },
        );
        timeline.schedule(t(5), run(Operation::Vm(VmOp::PowerOn(vm.clone()))));
        assert_eq!(timeline.next_due_for(&vm), Some(t(5)));
        assert_eq!(timeline.next_due_for(&other), Some(t(2)));
    }
}
