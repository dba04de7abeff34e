//! Task and TaskManager: asynchronous operations that move queued → running → success or
//! error, visible through PropertyCollector and WaitForUpdatesEx.
//!
//! A task-returning method validates its target, creates the Task, and schedules the
//! operation on the simulator's timeline at `now + delay`. The operation runs (and the task
//! completes) when a request arrives at or after that time, or when a WaitForUpdatesEx sleeping
//! until then wakes up. With a zero delay it runs before the method returns.
//!
//! The timeline (`state::timeline`) holds what is scheduled; the registry
//! (`handlers::run_due`, reached through `Call::run_due`) takes what is due from it and
//! routes each entry to the module that does the work.

use crate::call::Call;
use crate::fault::Fault;
use crate::objects::ManagedObject;
use crate::state::timeline::{Operation, Scheduled};
use crate::state::State;
use crate::value::{mor_array, write_element, Data, Moref, Val};
use chrono::{DateTime, Utc};

/// How many tasks the simulator remembers.
const MAX_TASKS: usize = 1000;

fn enum_state(s: &'static str) -> Val {
    Val::Enum("TaskInfoState", s.into())
}

/// Creates a Task for `method` (its WSDL name) called on `this` with `args`, and schedules
/// `op`. The TaskInfo names the method and the entity it applies to as vCenter does (see
/// `task_kind`).
pub(crate) fn start(
    state: &mut State,
    call: &Call<'_>,
    this: &Moref,
    method: &str,
    args: &crate::soap::Element,
    op: Operation,
) -> String {
    let value = state.inventory.next_value("task");
    let task = Moref::new("Task", &value);
    let description_id = crate::task_kind::description_id(&this.ty, method);
    let mut info = Data::new("TaskInfo")
        .with("key", value.as_str())
        .with("task", task.clone())
        .with("name", method)
        .with("descriptionId", description_id.as_str());
    if let Some(entity) = crate::task_kind::entity(state, this, args) {
        let entity_name = state
            .inventory
            .get(&entity)
            .map(|o| o.name().to_string())
            .unwrap_or_default();
        info = info
            .with("entity", entity)
            .with("entityName", entity_name.as_str());
    }
    let info = info
        .with("state", enum_state("queued"))
        .with("cancelled", false)
        .with("cancelable", false)
        .with(
            "reason",
            Data::new("TaskReasonUser").with("userName", call.config.username.as_str()),
        )
        .with("queueTime", call.now)
        .with("eventChainId", state.timeline.next_chain_id() as i32);
    let mut t = ManagedObject::new("Task", &value);
    t.set("info", info);
    state.inventory.insert(t);
    // Completed tasks are kept for a while, then forgotten, as vCenter ages them out; the
    // bound keeps a long-running simulator's memory flat.
    let mut expired = Vec::new();
    let task_manager = crate::objects::refs::task_manager(state.inventory.esx());
    if let Some(tm) = state.inventory.get_mut(&task_manager) {
        tm.push_mor("recentTask", task.clone());
        if let Some(Val::Array(_, items)) = tm.props.get_mut("recentTask") {
            while items.len() > MAX_TASKS {
                if let Val::Mor(old) = items.remove(0) {
                    expired.push(old);
                }
            }
        }
    }
    for old in expired {
        state.inventory.remove(&old);
    }
    let delay = call.config.task_delay;
    let half = chrono::Duration::from_std(delay / 2).unwrap_or_default();
    let full = chrono::Duration::from_std(delay).unwrap_or_default();
    let timeline = &mut state.timeline;
    timeline.schedule(call.now + half, Scheduled::Start { task: task.clone() });
    timeline.schedule(
        call.now + full,
        Scheduled::Run {
            task: task.clone(),
            op: Box::new(op),
        },
    );
    call.run_due(state);
    let mut out = String::new();
    write_element(&mut out, "returnval", &Val::Mor(task), false);
    out
}

fn info_mut<'a>(state: &'a mut State, task: &Moref) -> Option<&'a mut Data> {
    state
        .inventory
        .get_mut(task)?
        .props
        .get_mut("info")
        .and_then(Val::data_mut)
}

/// Marks a task running.
pub(crate) fn mark_running(state: &mut State, task: &Moref, now: DateTime<Utc>) {
    if let Some(info) = info_mut(state, task) {
        if info.get("state").and_then(Val::as_str) == Some("queued") {
            info.set("state", enum_state("running"));
            info.set("startTime", now);
            info.set("progress", 0i32);
        }
    }
}

/// Completes a task with the operation's outcome.
pub(crate) fn complete(
    state: &mut State,
    task: &Moref,
    outcome: Result<Option<Val>, Fault>,
    now: DateTime<Utc>,
) {
    mark_running(state, task, now);
    let Some(info) = info_mut(state, task) else {
        return;
    };
    info.set("progress", 100i32);
    info.set("completeTime", now);
    match outcome {
        Ok(result) => {
            let declared = info
                .get("name")
                .and_then(Val::as_str)
                .and_then(crate::task_kind::kind);
            if let Some(k) =
                declared.filter(|k| !crate::task_kind::conforms(k.returns, result.as_ref()))
            {
                // A simulator bug, not the client's: say so, and answer what there is.
                tracing::warn!(
                    method = k.wsdl,
                    ?result,
                    "a task's result is not of its declared type"
                );
            }
            info.set("state", enum_state("success"));
            if let Some(r) = result {
                info.set("result", crate::value::any(r));
            }
        }
        Err(fault) => {
            info.set("state", enum_state("error"));
            let mut detail = fault.fields.clone();
            detail.ty = fault.ty.into();
            info.set(
                "error",
                Data::new("LocalizedMethodFault")
                    .with("fault", detail)
                    .with("localizedMessage", fault.message.as_str()),
            );
        }
    }
}

/// Installs the TaskManager.
pub(crate) fn install(inv: &mut crate::objects::Inventory) {
    let m = crate::objects::refs::task_manager(inv.esx());
    let mut tm = ManagedObject::new(&m.ty, &m.value);
    tm.set("recentTask", mor_array([]));
    inv.insert(tm);
}

/// Ends in error every task a restart interrupted (queued or running when the simulator
/// stopped): what was scheduled for them died with the process, as a vCenter's in-flight
/// tasks do when it restarts, and a client waiting on one is told rather than left waiting.
pub(crate) fn end_interrupted(state: &mut State, now: DateTime<Utc>) {
    let interrupted: Vec<Moref> = state
        .inventory
        .iter()
        .filter(|o| o.moref.ty == "Task")
        .filter(|o| {
            matches!(
                o.path("info.state").and_then(Val::as_str),
                Some("queued" | "running")
            )
        })
        .map(|o| o.moref.clone())
        .collect();
    for task in interrupted {
        let fault = Fault::system_error("the vCenter restarted before the task ended");
        complete(state, &task, Err(fault), now);
    }
}
