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
