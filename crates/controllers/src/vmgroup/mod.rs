//! The VmGroup controller (the Code Connect VM operator, done as production software): a
//! `VmGroup` asks for N VMs of one shape from one template; the controller makes the vCenter
//! its Secret names (a simulator of ours or a real one) match, and reports what is there.

mod observed;
mod reconcile;
mod tasks;
pub mod types;
pub(crate) mod vcenters;

use futures::StreamExt;
use infrasim_controller_runtime::conditions::{self, Condition};
use infrasim_controller_runtime::context::Context;
use infrasim_controller_runtime::informers::Informers;
use infrasim_controller_runtime::reconcile::{Cleanup, Next, Reconcile};
pub use infrasim_controller_runtime::vcenters::VCenters;
use kube::api::Api;
use kube::runtime::reflector::ObjectRef;
use kube::ResourceExt;
use observed::Observed;
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;
use types::{VmGroup, VmGroupStatus};

/// The field manager the VmGroup controller writes status under: the family's name and its
/// kind, as every controller's (see [`infrasim_controller_runtime::writes`]).
const MANAGER: &str = "infrasim-vmgroup-controller/vmgroup";
/// Holds a deleted group until its VMs are gone.
pub const FINALIZER: &str = "vm.codeconnect.vmworld.com/vms";
/// The VM custom field that names a VM's group (`namespace/name`).
pub const OWNER_FIELD: &str = "vm.codeconnect.vmworld.com/vmgroup";

/// What the controller watches of its vCenters' VMs: what a group's reconcile reads, and
/// the mark that names a VM's group.
const WATCHING: infrasim_controller_runtime::vcenters::Watching =
    infrasim_controller_runtime::vcenters::Watching {
        paths: &[
            "name",
            "config.template",
            "customValue",
            "runtime.powerState",
            "guest.ipAddress",
            "config.hardware.numCPU",
            "config.hardware.memoryMB",
            "parent",
            "resourcePool",
        ],
        owner_field: Some(OWNER_FIELD),
    };

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Kube(#[from] kube::Error),
    #[error("the vCenter: {0}")]
    Vim(#[from] infrasim_vim_client::Error),
    #[error("the vCenter: {0}")]
    VCenter(String),
}

pub struct Reconciler {
    pub ctx: Context,
    pub vcenters: VCenters,
}

/// Runs the VmGroup controller until the process ends. With `simulators` (the vcsim
/// controller's kinds are served), a VCenterSimulator's change wakes the groups naming it.
pub async fn run(ctx: Context, informers: Arc<Informers>, simulators: bool) {
    let (vcenters, changes) = VCenters::new(ctx.clock.clone(), WATCHING);
    let r = Arc::new(Reconciler {
        ctx: ctx.clone(),
        vcenters,
    });
    tokio::spawn(sweep_idle_vcenters(Arc::downgrade(&r), ctx.clock.clone()));
    let groups = informers.of::<VmGroup>();
    // A VM's change wakes the group that owns it, and the groups waiting for it as their
    // template: the vCenter's change notification, not a poll.
    let woken = {
        let store = groups.store();
        stream_of(changes).flat_map(move |change| {
            let refs: Vec<ObjectRef<VmGroup>> = store
                .state()
                .iter()
                .filter(|g| match change.owner.as_deref() {
                    Some(owner) => owner == observed::owner_of(g),
                    // A template that appeared, or a clone of the group's to be marked.
                    None => {
                        g.spec.template == change.name
                            || observed::index_of(g, &change.name).is_some()
                    }
                })
                .map(|g| ObjectRef::from_obj(&**g))
                .collect();
            futures::stream::iter(refs)
        })
    };
    let controller =
        infrasim_controller_runtime::triggers::controller(&groups, None).reconcile_on(woken);
    let controller = if simulators {
        let store = groups.store();
        controller.watches_shared_stream(
            infrasim_controller_runtime::triggers::every_change(
                &informers.of::<crate::vcsim::types::VCenterSimulator>(),
            ),
            move |sim| {
                store
                    .state()
                    .iter()
                    .filter(|g| g.namespace() == sim.namespace())
                    .filter(|g| {
                        let named = g
                            .spec
                            .vcenter_ref
                            .as_ref()
                            .and_then(|r| r.simulator.as_ref());
                        named == Some(&sim.name_any())
                    })
                    .map(|g| ObjectRef::from_obj(&**g))
                    .collect::<Vec<_>>()
            },
        )
    } else {
        controller
    };
    infrasim_controller_runtime::reconcile::run(&ctx, controller, r).await;
}

/// How long a vCenter goes unasked before its session ends: longer than the [`BACKSTOP`]
/// requeue, so a vCenter any group still names is never dropped.
const IDLE_VCENTER: Duration = Duration::from_secs(900);

/// Ends the sessions of vCenters no group asks for any more, every minute of the injected
/// clock.
async fn sweep_idle_vcenters(r: std::sync::Weak<Reconciler>, clock: infrasim_clock::SharedClock) {
    loop {
        clock.sleep(Duration::from_secs(60)).await;
        let Some(r) = r.upgrade() else { return };
        let ended = r.vcenters.sweep(IDLE_VCENTER).await;
        if ended > 0 {
            tracing::info!(ended, "logged out of vCenters no VmGroup names any more");
        }
    }
}

/// The changes as a stream.
fn stream_of(
    mut changes: tokio::sync::mpsc::UnboundedReceiver<
        infrasim_controller_runtime::vcenters::Change,
    >,
) -> impl futures::Stream<Item = infrasim_controller_runtime::vcenters::Change> {
    futures::stream::poll_fn(move |cx| changes.poll_recv(cx))
}

impl Reconcile<VmGroup> for Reconciler {
    type Error = Error;
    const FINALIZER: Option<&'static str> = Some(FINALIZER);

    async fn apply(&self, group: Arc<VmGroup>) -> Result<Next, Error> {
        apply(&group, self).await
    }

    /// The group's VMs go first; their changes wake it as they go, and a late task is read
    /// at its deadline.
    async fn cleanup(&self, group: Arc<VmGroup>) -> Result<Cleanup, Error> {
        reconcile::finalize(&group, self).await
    }
}

async fn apply(group: &VmGroup, r: &Reconciler) -> Result<Next, Error> {
    let api: Api<VmGroup> =
        Api::namespaced(r.ctx.client.clone(), &group.namespace().unwrap_or_default());
    let mut status = group.status.clone().unwrap_or_default();
    let memory_mb = match group.spec.memory_mb() {
        Ok(m) => m,
        Err(why) => {
            set(
                r,
                &mut status,
                Condition::new("Ready", false, "InvalidSpec", why),
            );
            write_status(&api, group, status).await?;
            return Ok(Next::AwaitChange);
        }
    };
    let observed = match connect(r, group).await {
        Ok(o) => o,
        Err(why) => {
            set(
                r,
                &mut status,
                Condition::new("VCenterReachable", false, "Unreachable", &why),
            );
            set(
                r,
                &mut status,
                Condition::new("Ready", false, "VCenterUnreachable", why),
            );
            write_status(&api, group, status).await?;
            // A retry, not a poll: the vCenter is outside the plane (down, unreachable, or
            // refusing the credentials) and tells nobody here when it is back. (Credentials
            // from a missing Secret are looked for again with it: Secrets are read, not
            // watched, as the deployed controller may only get them.)
            return Ok(Next::After(VCENTER_RETRY));
        }
    };
    set(
        r,
        &mut status,
        Condition::new("VCenterReachable", true, "Connected", ""),
    );
    converge(r, &api, group, observed, status, memory_mb).await
}

/// How soon an unreachable vCenter is tried again.
const VCENTER_RETRY: Duration = Duration::from_secs(30);

/// The vCenter's view of the group, or why it cannot be had.
async fn connect(r: &Reconciler, group: &VmGroup) -> Result<Observed, String> {
    let credentials = vcenters::credentials(&r.ctx.client, group).await?;
    let server = credentials.server.clone();
    let vc = r
        .vcenters
        .get(credentials)
        .await
        .map_err(|e| format!("{server}: {e}"))?;
    observed::observe(vc, group)
        .await
        .map_err(|e| format!("{server}: {e}"))
}

/// One step towards the spec, then the status as the vCenter now has it.
async fn converge(
    r: &Reconciler,
    api: &Api<VmGroup>,
    group: &VmGroup,
    mut o: Observed,
    mut status: VmGroupStatus,
    memory_mb: i64,
) -> Result<Next, Error> {
    let replicas = usize::try_from(group.spec.replicas.max(0)).unwrap_or(0);
    let shape = observed::Shape {
        cpus: group.spec.cpu,
        memory_mb,
    };
    let following = tasks::follow(&o, group, shape).await?;
    let removing = reconcile::scale_down(&o, replicas).await?;
    let template = o.template.clone();
    let short = o.owned.len() < replicas;
    template_found(r, group, &mut status, template.is_some(), short).await;
    let place = match (&template, reconcile::may_clone(&o, group)) {
        (Some(t), true) => placed(r, group, &mut status, &o, t).await,
        _ => None,
    };
    let source = template.as_ref().zip(place.as_ref());
    let progress = reconcile::scale_up(&mut o, group, source, memory_mb).await?;
    let mending =
        removing == 0 && progress.marked == 0 && reconcile::mend_one(&o, replicas, shape).await?;
    let vms = reconcile::vm_statuses(&o);
    let ready = vms
        .iter()
        .filter(|v| v.power_state == "poweredOn" && v.ip.is_some())
        .count();
    // Reshaping goes one VM at a time: the group is not done until every VM has the shape.
    let shaped = reconcile::shaped(&o, replicas, shape);
    let done = ready == replicas && vms.len() == replicas && shaped;
    status.replicas = vms.len() as i64;
    status.ready_replicas = ready as i64;
    status.vms = vms;
    status.observed_generation = group.metadata.generation;
    let cloning = progress.started + progress.in_flight;
    let mut message = format!("{ready} of {replicas} VMs ready");
    if cloning > 0 {
        message.push_str(&format!(", {cloning} being cloned"));
    }
    if removing > 0 {
        message.push_str(&format!(", {removing} being removed"));
    }
    for refusal in reconcile::refusals(&o, replicas, shape) {
        message.push_str(&format!("; the vCenter refused the new shape to {refusal}"));
    }
    let reason = if done { "Ready" } else { "Waiting" };
    set(
        r,
        &mut status,
        Condition::new("Progressing", !done, "Scaling", message.clone()),
    );
    set(
        r,
        &mut status,
        Condition::new("Ready", done, reason, message),
    );
    write_status(api, group, status).await?;
    // The vCenter's changes (a VM made, powered or gone, a guest's IP) wake the group.
    Ok(if progress.marked > 0 {
        // VMs just marked may be extras to remove or VMs to mend: the next step goes on at
        // once.
        Next::At(r.ctx.now())
    } else if following + removing + cloning > 0 || mending {
        // Tasks in flight: a late one is read at its deadline.
        Next::At(tasks::look_again(&o, group, r.ctx.now()))
    } else {
        // A backstop behind the vCenter's watch, not a poll: what nothing watches is read
        // again (the Secret's credentials, the placement's folder, pool and network), and
        // the look keeps the vCenter in use, so the sweep does not end the session (and with
        // it the watch) of a vCenter a settled group still names (see IDLE_VCENTER).
        Next::After(BACKSTOP)
    })
}

/// How long a settled group goes between looks when nothing wakes it (see `converge`).
const BACKSTOP: Duration = Duration::from_secs(300);

/// Where the clones go, with the PlacementFound condition (and an Event when not found).
async fn placed(
    r: &Reconciler,
    group: &VmGroup,
    status: &mut VmGroupStatus,
    o: &Observed,
    template: &infrasim_vim_client::ObjectContent,
) -> Option<infrasim_controller_runtime::placement::Resolved> {
    let spec = group.spec.placement.as_ref();
    match infrasim_controller_runtime::placement::resolve(&o.vc.client, spec, template).await {
        Ok(place) => {
            set(
                r,
                status,
                Condition::new("PlacementFound", true, "Found", ""),
            );
            Some(place)
        }
        Err(why) => {
            r.ctx
                .event(group, true, "PlacementNotFound", why.clone())
                .await;
            set(
                r,
                status,
                Condition::new("PlacementFound", false, "NotFound", why),
            );
            None
        }
    }
}

/// The TemplateFound condition (and an Event when VMs are wanted and it is missing).
async fn template_found(
    r: &Reconciler,
    group: &VmGroup,
    status: &mut VmGroupStatus,
    found: bool,
    wanted: bool,
) {
    if found {
        set(
            r,
            status,
            Condition::new("TemplateFound", true, "Found", ""),
        );
        return;
    }
    let why = format!(
        "no VM or template named {:?} on the vCenter",
        group.spec.template
    );
    if wanted {
        r.ctx
            .event(group, true, "TemplateNotFound", why.clone())
            .await;
    }
    set(
        r,
        status,
        Condition::new("TemplateFound", false, "NotFound", why),
    );
}

fn set(r: &Reconciler, status: &mut VmGroupStatus, c: Condition) {
    conditions::set(&mut status.conditions, c, r.ctx.now());
}

async fn write_status(
    api: &Api<VmGroup>,
    group: &VmGroup,
    status: VmGroupStatus,
) -> Result<(), Error> {
    if group.status.as_ref() == Some(&status) {
        return Ok(());
    }
    let body = json!({
        "apiVersion": "vm.codeconnect.vmworld.com/v1alpha1",
        "kind": "VmGroup",
        "status": status,
    });
    infrasim_controller_runtime::writes::apply_status(api, &group.name_any(), MANAGER, &body)
        .await?;
    Ok(())
}
