//! The infrastructure machine reconciler: waits for the cluster's infrastructure, the
//! bootstrap data and (workers) an initialized control plane, then walks the machine's steps
//! on the injected clock (see [`super::timing`]) and makes each one real in the workload
//! cluster: the Node, the etcd and API server static pods, the endpoint opening with the first
//! API server. Deleting the machine removes what it brought.

use super::boot;
use super::timing::{self, Facts, Gate, Timings};
use super::{
    apply_status, cloud_key, owner_named, paused_message, release_claim, report_paused,
    when_claimed, Error, InfraMachine, InfraStatus, Reconciler,
};
use crate::capi::core::{Cluster, Machine, MachineAddress};
use chrono::{DateTime, Utc};
use infrasim_cloud::{CertAndKey, ClusterShape, SuppliedPki, API_SERVER_PHASE};
use infrasim_controller_runtime::conditions::{self, Condition};
use infrasim_controller_runtime::reconcile::{Cleanup, Next, Reconcile};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, Patch, PatchParams};
use kube::{Resource, ResourceExt};
use serde_json::json;
use std::sync::Arc;

/// The annotation upstream's in-memory provider puts on a Machine once it is fully
/// bootstrapped: its steps are not timed again (after a restart, say).
pub const BOOTSTRAPPED_ANNOTATION: &str =
    "machine.inmemory.infrastructure.cluster.x-k8s.io/bootstrapped";

/// The field manager this controller writes status under, for both spellings of its kind:
/// the provider's and its own name (see [`infrasim_controller_runtime::writes`]).
const MANAGER: &str = "infrasim-in-memory-provider/machine";

/// The infrastructure machine controller of kind `K`.
pub struct MachineReconciler<K: InfraMachine>(pub(super) Reconciler<K>);

/// An infrastructure machine is claimed (its finalizer added) only once a Machine owns it,
/// so the runner holds no finalizer of its own (see [`Reconcile::FINALIZER`]): the cleanup
/// removes it.
impl<K: InfraMachine> Reconcile<K> for MachineReconciler<K> {
    type Error = Error;

    async fn apply(&self, obj: Arc<K>) -> Result<Next, Error> {
        let r = &self.0;
        if !hosted_here(r, &*obj) {
            return Ok(Next::AwaitChange);
        }
        when_claimed(r, obj, "Machine", |obj, api| async move {
            apply(obj, r, &api).await
        })
        .await
    }

    /// The machine leaves its workload cluster, then the finalizer goes.
    async fn cleanup(&self, obj: Arc<K>) -> Result<Cleanup, Error> {
        let r = &self.0;
        if !hosted_here(r, &*obj) {
            // Its host takes it out of the workload cluster and lets it go.
            return Ok(Cleanup::Pending(Next::AwaitChange));
        }
        release_claim(r, obj, |obj| remove(obj, r)).await
    }
}

/// The cloud key of the workload cluster an infrastructure machine belongs to, by the
/// cluster-name label Cluster API puts on it (none before it does).
pub(super) fn machine_key<K: InfraMachine>(obj: &K) -> Option<String> {
    let ns = obj.namespace().unwrap_or_default();
    obj.labels()
        .get(crate::capi::CLUSTER_NAME_LABEL)
        .map(|cluster| cloud_key(cluster, &ns))
}

/// Whether this process hosts the workload cluster `obj` belongs to (see
/// [`infrasim_controller_runtime::shards`]); a machine not labelled yet waits for the label.
fn hosted_here<K: InfraMachine>(r: &Reconciler<K>, obj: &K) -> bool {
    match machine_key(obj) {
        Some(key) => r.ctx.shards.hosts(&key),
        None => r.ctx.shards.count().is_none(),
    }
}

/// The Machine and Cluster an infrastructure machine belongs to.
struct Owners {
    machine: Arc<Machine>,
    cluster: Arc<Cluster>,
}

async fn owners<K: InfraMachine>(obj: &K, r: &Reconciler<K>) -> Result<Option<Owners>, Error> {
    let ns = obj.namespace().unwrap_or_default();
    let Some(machine_name) = owner_named(obj, "Machine") else {
        return Ok(None);
    };
    let Some(machine) = r.informers.get::<Machine>(&ns, &machine_name).await? else {
        return Ok(None);
    };
    let Some(cluster) = r
        .informers
        .get::<Cluster>(&ns, &machine.spec.cluster_name)
        .await?
    else {
        return Ok(None);
    };
    Ok(Some(Owners { machine, cluster }))
}

async fn apply<K: InfraMachine>(
    obj: Arc<K>,
    r: &Reconciler<K>,
    api: &Api<K>,
) -> Result<Next, Error> {
    let Some(Owners { machine, cluster }) = owners(&*obj, r).await? else {
        return Ok(Next::AwaitChange);
    };
    let now = r.ctx.now();
    let previous = obj.current_conditions();
    let conds = previous.clone();
    if let Some(why) = paused_message(&*obj, cluster.paused()) {
        report_paused(api, &*obj, MANAGER, why, now).await?;
        return Ok(Next::AwaitChange);
    }
    if let Some(why) = obj.unsupported() {
        return refuse(&*obj, r, api, conds, "UnsupportedBackend", why).await;
    }
    let timings = match Timings::parse(obj.behaviour()) {
        Ok(t) => t,
        Err(why) => return refuse(&*obj, r, api, conds, "InternalError", why).await,
    };
    let control_plane = machine.is_control_plane();
    let gate = gate(&*obj, r, &machine, &cluster).await?;
    let key = cloud_key(
        &cluster.name_any(),
        &machine.namespace().unwrap_or_default(),
    );
    let booted = conditions::is_true(&previous, timing::NODE);
    let fault = r.ctx.cloud.faults(&key).boot;
    let boot = boot::decide(api, &*obj, fault, booted, now).await?;
    let plan = timing::plan(&Facts {
        now,
        control_plane,
        gate,
        bootstrapped: machine.annotations().contains_key(BOOTSTRAPPED_ANNOTATION),
        timings,
        boot,
        seed: obj.uid().as_deref().unwrap_or(""),
        previous: &previous,
    });
    let version = machine.spec.version.clone();
    // Make real what the plan says is done (a step done before is left as it is).
    let steps = done_steps(&plan.conditions);
    if let Err(e) = make_real(
        r,
        &cluster,
        &key,
        &obj.name_any(),
        control_plane,
        version.as_deref(),
        &steps,
    )
    .await
    {
        // The cloud cannot do the step (its endpoint's port is taken, say): tell the user,
        // keep the conditions as they were, and try again later.
        let why = format!("the simulated cloud could not provision the machine: {e}");
        refuse(&*obj, r, api, previous, "InternalError", why).await?;
        return Ok(Next::After(std::time::Duration::from_secs(10)));
    }
    announce(&*obj, r, &previous, &plan.conditions).await;
    if plan.provisioned && obj.provider_id().is_none() {
        let patch = json!({"spec": {"providerID": provider_id(&*obj)}});
        api.patch(
            &obj.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await?;
    }
    if plan.complete && !machine.annotations().contains_key(BOOTSTRAPPED_ANNOTATION) {
        mark_bootstrapped(&r.ctx.client, &machine).await?;
    }
    let view = status_view(
        &*obj,
        r,
        &machine,
        &key,
        plan.provisioned,
        plan.conditions,
        control_plane,
        now,
    );
    apply_status(api, &obj, MANAGER, &view).await?;
    // The next step's deadline on the injected clock, if the plan has one.
    Ok(plan.next.map_or(Next::AwaitChange, Next::At))
}

/// The cloud steps whose conditions the plan has true, in the order the cloud makes them.
fn done_steps(planned: &[Condition]) -> Vec<usize> {
    [
        (timing::VM, 0),
        (timing::NODE, 1),
        (timing::ETCD, 2),
        (timing::API_SERVER, API_SERVER_PHASE),
    ]
    .into_iter()
    .filter(|(ty, _)| conditions::is_true(planned, ty))
    .map(|(_, step)| step)
    .collect()
}

/// Annotates the Machine as fully bootstrapped, so its steps are not timed again.
async fn mark_bootstrapped(client: &kube::Client, machine: &Machine) -> Result<(), Error> {
    let machines: Api<Machine> =
        Api::namespaced(client.clone(), &machine.namespace().unwrap_or_default());
    let patch = json!({"metadata": {"annotations": {BOOTSTRAPPED_ANNOTATION: ""}}});
    machines
        .patch(
            &machine.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await?;
    Ok(())
}

/// Does the cloud steps the plan says are done (a step done before is left as it is),
/// creating the workload cluster first if needed.
async fn make_real<K: InfraMachine>(
    r: &Reconciler<K>,
    cluster: &Cluster,
    key: &str,
    machine: &str,
    control_plane: bool,
    version: Option<&str>,
    steps: &[usize],
) -> Result<(), Error> {
    if steps.is_empty() {
        return Ok(());
    }
    ensure_cloud_cluster(&r.ctx, cluster, key, version).await?;
    for step in steps {
        r.ctx
            .cloud
            .run_machine_step(key, machine, control_plane, version, *step)
            .await?;
    }
    Ok(())
}

/// The provider ID of a machine: `in-memory://<name>`, as its Node carries it.
pub fn provider_id<K: Resource>(obj: &K) -> String {
    format!("in-memory://{}", obj.meta().name.as_deref().unwrap_or(""))
}

/// What the machine's VM is waiting for, or when it started.
async fn gate<K: InfraMachine>(
    obj: &K,
    r: &Reconciler<K>,
    machine: &Machine,
    cluster: &Cluster,
) -> Result<Gate, Error> {
    if !cluster.infrastructure_provisioned() {
        return Ok(Gate::ClusterInfrastructure);
    }
    let Some(secret_name) = machine.spec.bootstrap.data_secret_name.as_deref() else {
        return Ok(
            if !machine.is_control_plane() && !cluster.control_plane_initialized() {
                Gate::ControlPlaneInitialized
            } else {
                Gate::BootstrapData
            },
        );
    };
    // The VM starts when the bootstrap data is there (the time is in the API: the secret's
    // creation), and not before the infrastructure machine itself existed.
    let created = |t: Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>| {
        t.and_then(|t| conditions::parse_time(&t.0.to_string()))
    };
    let secrets: Api<Secret> = Api::namespaced(
        r.ctx.client.clone(),
        &machine.namespace().unwrap_or_default(),
    );
    let data_at = secrets
        .get_opt(secret_name)
        .await?
        .and_then(|s| created(s.metadata.creation_timestamp.as_ref()));
    let own = created(obj.meta().creation_timestamp.as_ref());
    let start = [data_at, own]
        .into_iter()
        .flatten()
        .max()
        .unwrap_or_else(|| r.ctx.now());
    Ok(Gate::Open(start))
}

/// Creates the workload cluster behind the Cluster's endpoint, if it does not exist yet,
/// trusting the certificate authorities Cluster API keeps in the cluster's secrets.
pub(crate) async fn ensure_cloud_cluster(
    ctx: &infrasim_controller_runtime::context::Context,
    cluster: &Cluster,
    key: &str,
    version: Option<&str>,
) -> Result<(), Error> {
    let cloud = &ctx.cloud;
    if cloud.has_cluster(key) {
        return Ok(());
    }
    let port = super::wanted_port(ctx, cluster.spec.control_plane_endpoint.as_ref());
    cloud.reserve_endpoint(key, port).await?;
    let ns = cluster.namespace().unwrap_or_default();
    let name = cluster.name_any();
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), &ns);
    let pair = |purpose: &'static str| {
        let secrets = secrets.clone();
        let name = name.clone();
        async move {
            let secret = secrets.get_opt(&format!("{name}-{purpose}")).await?;
            let field = |s: &Secret, k: &str| {
                s.data
                    .as_ref()
                    .and_then(|d| d.get(k))
                    .and_then(|b| String::from_utf8(b.0.clone()).ok())
            };
            Ok::<_, kube::Error>(secret.and_then(|s| {
                Some(CertAndKey {
                    cert_pem: field(&s, "tls.crt")?,
                    key_pem: field(&s, "tls.key")?,
                })
            }))
        }
    };
    let pki = SuppliedPki {
        ca: pair("ca").await?,
        etcd_ca: pair("etcd").await?,
        front_proxy_ca: pair("proxy").await?,
        service_account_key: pair("sa").await?.map(|p| p.key_pem),
    };
    let shape = ClusterShape {
        name: key.to_string(),
        control_planes: 0,
        workers: 0,
        kubernetes_version: version.unwrap_or("v1.31.0").to_string(),
        cluster_name: Some(name.clone()),
        pki,
        ..ClusterShape::default()
    };
    match cloud.create_cluster(shape).await {
        Ok(_) | Err(infrasim_cloud::CloudError::Exists(_)) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// An Event for every step that came up in this reconcile.
async fn announce<K: InfraMachine>(
    obj: &K,
    r: &Reconciler<K>,
    before: &[Condition],
    after: &[Condition],
) {
    for c in after.iter().filter(|c| c.is_true()) {
        if !conditions::is_true(before, &c.type_) {
            let what = match c.type_.as_str() {
                timing::VM => "the VM is up",
                timing::NODE => "the Node joined the cluster",
                timing::ETCD => "the etcd member started",
                _ => "the API server serves",
            };
            r.ctx
                .event(obj, false, &c.type_, format!("{}: {what}", obj.name_any()))
                .await;
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn status_view<K: InfraMachine>(
    obj: &K,
    r: &Reconciler<K>,
    machine: &Machine,
    key: &str,
    provisioned: bool,
    mut conds: Vec<Condition>,
    control_plane: bool,
    now: DateTime<Utc>,
) -> InfraStatus {
    let inputs: Vec<&str> = if control_plane {
        vec![timing::VM, timing::NODE, timing::ETCD, timing::API_SERVER]
    } else {
        vec![timing::VM, timing::NODE]
    };
    let ready = {
        let found: Vec<&Condition> = inputs
            .iter()
            .filter_map(|t| conditions::find(&conds, t))
            .collect();
        conditions::summary("Ready", &found, ("NotReady", "ReadyUnknown", "Ready"))
    };
    // The plan holds the step conditions only: the summaries start from what the object
    // has, so their transition times move only when their status does (a restart or a
    // resync once rewrote both with the time of the reconcile).
    let current = obj.current_conditions();
    for summary in ["Ready", "Paused"] {
        if let Some(c) = conditions::find(&current, summary) {
            if conditions::find(&conds, summary).is_none() {
                conds.push(c.clone());
            }
        }
    }
    conditions::set(&mut conds, ready, now);
    conditions::set_paused(&mut conds, None, now);
    conditions::sort(&mut conds);
    let addresses = provisioned
        .then(|| r.ctx.cloud.machine_address(key, &obj.name_any()))
        .flatten()
        .map(|ip| {
            vec![
                MachineAddress {
                    type_: "InternalIP".into(),
                    address: ip,
                },
                MachineAddress {
                    type_: "Hostname".into(),
                    address: obj.name_any(),
                },
            ]
        });
    InfraStatus {
        provisioned,
        conditions: conds,
        addresses,
        failure_domain: machine.spec.failure_domain.clone().filter(|_| provisioned),
        ..InfraStatus::default()
    }
}

/// Reports why the machine cannot be provisioned, once as an Event and in its conditions.
async fn refuse<K: InfraMachine>(
    obj: &K,
    r: &Reconciler<K>,
    api: &Api<K>,
    mut conds: Vec<Condition>,
    reason: &str,
    why: String,
) -> Result<Next, Error> {
    let now = r.ctx.now();
    if conditions::find(&conds, timing::VM).is_none_or(|c| c.reason != reason) {
        r.ctx.event(obj, true, reason, why.clone()).await;
    }
    conditions::set(
        &mut conds,
        Condition::new(timing::VM, false, reason, why.clone()),
        now,
    );
    conditions::set(
        &mut conds,
        Condition::new(
            "Ready",
            false,
            "NotReady",
            format!("* VMProvisioned: {why}"),
        ),
        now,
    );
    conditions::set_paused(&mut conds, None, now);
    conditions::sort(&mut conds);
    let view = InfraStatus {
        conditions: conds,
        ..InfraStatus::default()
    };
    apply_status(api, obj, MANAGER, &view).await?;
    Ok(Next::AwaitChange)
}

/// Takes the machine out of its workload cluster (its Node and static pods), if the cloud
/// has it.
async fn remove<K: InfraMachine>(obj: Arc<K>, r: &Reconciler<K>) -> Result<(), Error> {
    let ns = obj.namespace().unwrap_or_default();
    let cluster = match obj.labels().get(crate::capi::CLUSTER_NAME_LABEL) {
        Some(c) => Some(c.clone()),
        None => owners(&*obj, r).await?.map(|o| o.cluster.name_any()),
    };
    if let Some(cluster) = cluster {
        if r.ctx
            .cloud
            .remove_machine(&cloud_key(&cluster, &ns), &obj.name_any())
            .await?
        {
            r.ctx
                .event(
                    &*obj,
                    false,
                    "MachineRemoved",
                    format!("{}: its Node and static pods are gone", obj.name_any()),
                )
                .await;
        }
    }
    Ok(())
}
