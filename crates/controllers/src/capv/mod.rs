//! A stand-in for Cluster API Provider vSphere (govmomi mode), so CAPV's own templates make
//! VMs without CAPV, which is a Go program: a `VSphereCluster` logs in to its vCenter, a
//! `VSphereMachine` gets the `VSphereVM` CAPV would make for it, and a `VSphereVM` becomes a
//! VM: cloned from its template with its bootstrap data in `guestinfo.userdata`, given its
//! cloud-init metadata, powered on, and watched until the guest reports an address. The vcsim
//! family's VM bootstrap then boots the VM into the workload cluster behind the cluster's
//! endpoint, as it does under the real CAPV.
//!
//! Each reconciler writes under a field manager of its own, `infrasim-capv/<its file>`.
//! It runs only with the embedded Cluster API core: where real Cluster API (and so the real
//! CAPV) manages the plane, it is off (`--capi-core=external`).

mod cluster;
pub mod credentials;
mod identity;
mod ip_claims;
mod machine;
mod modules;
mod power_off;
pub mod state_metrics;
mod storage_policy;
mod supervisor;
pub mod types;
mod vm;
mod zones;

use futures::StreamExt;
use infrasim_controller_runtime::context::Context;
use infrasim_controller_runtime::informers::Informers;
use infrasim_controller_runtime::reconcile;
use infrasim_controller_runtime::vcenters::{Change, VCenters, Watching};
use kube::runtime::reflector::ObjectRef;
use kube::ResourceExt;
use std::sync::Arc;
use types::{VSphereMachine, VSphereVM};

/// Why a reconcile failed (it is retried with backoff).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Kube(#[from] kube::Error),
    #[error("the vCenter: {0}")]
    Vim(#[from] infrasim_vim_client::Error),
    /// Reported in a condition already; failed so the runner backs off.
    #[error("{0}")]
    Reported(String),
    #[error("an object that does not decode: {0}")]
    Json(#[from] serde_json::Error),
}

/// What the CAPV reconcilers share.
pub struct Reconciler {
    pub ctx: Context,
    pub informers: Arc<Informers>,
    /// One session per vCenter, with its VMs watched.
    pub vcenters: VCenters,
    /// The manager's own credentials, for clusters with no `identityRef`.
    pub defaults: credentials::Defaults,
    /// CAPV's `NodeAntiAffinity` feature gate: cluster modules for the clusters' machines.
    pub node_anti_affinity: bool,
    /// Clients of the workload clusters (CAPV's cluster cache), for what it writes there.
    pub workloads: crate::capi::standin::workload::WorkloadClients,
}

/// What the stand-in reads of its VMs (CAPV finds its VMs by name and BIOS UUID).
const WATCHING: Watching = Watching {
    paths: &[
        "name",
        "config.uuid",
        "runtime.powerState",
        "guest.net",
        "guest.ipAddress",
        // Where the bootstrap data and cloud-init metadata are: a reconfiguration of the
        // metadata shows here, so nothing waits on its task.
        "config.extraConfig",
    ],
    owner_field: None,
};

/// Runs the CAPV stand-in's controllers until the process ends, with `defaults` as the
/// manager's own credentials and CAPV's `NodeAntiAffinity` gate as `node_anti_affinity`.
pub async fn run(
    ctx: Context,
    informers: Arc<Informers>,
    defaults: credentials::Defaults,
    node_anti_affinity: bool,
) {
    let (vcenters, vm_changes) = VCenters::new(ctx.clock.clone(), WATCHING);
    let r = Arc::new(Reconciler {
        ctx: ctx.clone(),
        informers: informers.clone(),
        vcenters,
        defaults,
        node_anti_affinity,
        workloads: Default::default(),
    });
    let clusters = cluster::controller(&informers);
    let machines = machine::controller(&informers);
    let supervisor_clusters = supervisor::cluster::controller(&informers, &ctx.client);
    let supervisor_machines = supervisor::machine::controller(&informers);
    let vms = vm::controller(&informers).reconcile_on(vms_changed(&informers, vm_changes));
    let identities = identity::controller(&informers);
    let zones = zones::controller(&informers);
    futures::join!(
        reconcile::run(&ctx, identities, r.clone()),
        reconcile::run(&ctx, zones, r.clone()),
        reconcile::run(&ctx, clusters, r.clone()),
        reconcile::run(&ctx, machines, r.clone()),
        reconcile::run(&ctx, vms, r.clone()),
        reconcile::run(&ctx, supervisor_clusters, r.clone()),
        reconcile::run(&ctx, supervisor_machines, r.clone()),
    );
}

/// CAPV's conditions as its v1beta1 API names them (`status.deprecated.v1beta1.conditions`
/// of a v1beta2 object): `VMProvisioned` for v1beta2's `VirtualMachineProvisioned`, and
/// the failure domains' older names.
fn v1beta1_conditions(
    conditions: &[infrasim_controller_runtime::conditions::Condition],
) -> Vec<infrasim_controller_runtime::conditions::V1Beta1Condition> {
    let mut old = infrasim_controller_runtime::conditions::to_v1beta1(conditions);
    for c in &mut old {
        let renamed = match c.type_.as_str() {
            "VirtualMachineProvisioned" => "VMProvisioned",
            "IPAddressClaimsFulfilled" => "IPAddressClaimed",
            "FailureDomainsReady" => "FailureDomainsAvailable",
            "PlacementConstraintReady" => "PlacementConstraintMet",
            "FailureDomainValidated" => "VSphereFailureDomainValidated",
            _ => continue,
        };
        c.type_ = renamed.into();
    }
    old
}

/// Writes a CAPV object's status as `manager`: `set` among the conditions it has (`before`,
/// its status as read), `Ready` as their summary (False with the first one that is not
/// True), upstream's v1beta1 copy of them, and the `extra` status fields.
async fn write_status<K>(
    r: &Reconciler,
    obj: &K,
    before: Option<&std::collections::BTreeMap<String, serde_json::Value>>,
    manager: &str,
    set: Vec<infrasim_controller_runtime::conditions::Condition>,
    extra: serde_json::Value,
) -> Result<(), Error>
where
    K: kube::Resource<DynamicType = (), Scope: infrasim_controller_runtime::informers::Scoped>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    use infrasim_controller_runtime::conditions::{self, Condition};
    let now = r.ctx.now();
    let mut conds: Vec<Condition> = before
        .and_then(|s| s.get("conditions"))
        .and_then(|v| serde_json::from_value(v.clone()).ok())
        .unwrap_or_default();
    // Every write but the one that pauses says the object is not paused (as CAPV's always
    // carry `Paused`).
    if !set.iter().any(|c| c.type_ == "Paused") {
        conditions::set(
            &mut conds,
            Condition::new("Paused", false, "NotPaused", ""),
            now,
        );
    }
    for c in set {
        conditions::set(&mut conds, c, now);
    }
    let not_ready = conds
        .iter()
        .find(|c| !matches!(c.type_.as_str(), "Ready" | "Paused") && c.status != "True")
        .map(|c| c.message.clone());
    let ready = match not_ready {
        None => Condition::new("Ready", true, "Ready", ""),
        Some(why) => Condition::new("Ready", false, "NotReady", why),
    };
    conditions::set(&mut conds, ready, now);
    let mut status = serde_json::json!({
        "conditions": conds,
        "deprecated": {"v1beta1": {"conditions": v1beta1_conditions(&conds)}},
    });
    if let (serde_json::Value::Object(extra), Some(s)) = (extra, status.as_object_mut()) {
        s.extend(extra);
    }
    let name = obj.name_any();
    use infrasim_controller_runtime::informers::Scoped;
    let ns = obj.namespace();
    let api: kube::Api<K> = K::Scope::api(r.ctx.client.clone(), ns.as_deref());
    let body = serde_json::json!({
        "apiVersion": K::api_version(&()),
        "kind": K::kind(&()),
        "metadata": {"name": name},
        "status": status,
    });
    infrasim_controller_runtime::writes::apply_status(&api, &name, manager, &body).await?;
    Ok(())
}

/// Reports `obj` paused, if it or its `cluster` is (Cluster API's `Paused` condition, with
/// its words), and says so: a paused object is left alone until that changes.
async fn paused<K>(
    r: &Reconciler,
    obj: &K,
    before: Option<&std::collections::BTreeMap<String, serde_json::Value>>,
    manager: &str,
    cluster: Option<&crate::capi::core::Cluster>,
) -> Result<bool, Error>
where
    K: kube::Resource<DynamicType = (), Scope: infrasim_controller_runtime::informers::Scoped>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    let Some(why) = crate::capi::paused_message(obj, cluster.is_some_and(|c| c.paused())) else {
        return Ok(false);
    };
    let paused =
        infrasim_controller_runtime::conditions::Condition::new("Paused", true, "Paused", why);
    write_status(r, obj, before, manager, vec![paused], serde_json::json!({})).await?;
    Ok(true)
}

/// The VSphereVMs whose VM changed in a vCenter: CAPV names a VM after its VSphereVM.
fn vms_changed(
    informers: &Informers,
    changes: tokio::sync::mpsc::UnboundedReceiver<Change>,
) -> impl futures::Stream<Item = ObjectRef<VSphereVM>> {
    let store = informers.of::<VSphereVM>().store();
    futures::stream::unfold(changes, |mut changes| async move {
        changes.recv().await.map(|change| (change, changes))
    })
    .flat_map(move |change| {
        let named: Vec<_> = store
            .state()
            .iter()
            .filter(|vm| vm.name_any() == change.name)
            .map(|vm| ObjectRef::from_obj(&**vm))
            .collect();
        futures::stream::iter(named)
    })
}

/// The objects of kind `K` of a Cluster (by Cluster API's cluster-name label), for a watch
/// that wakes them when their Cluster changes (a pause, its infrastructure provisioned).
fn of_cluster<K: infrasim_controller_runtime::informers::Watched>(
    informers: &Informers,
) -> impl Fn(Arc<crate::capi::core::Cluster>) -> Vec<ObjectRef<K>> + Send + Sync + 'static {
    let store = informers.of::<K>().store();
    move |c| {
        let ns = c.namespace().unwrap_or_default();
        let name = c.name_any();
        store
            .state()
            .iter()
            .filter(|o| o.namespace().as_deref() == Some(ns.as_str()))
            .filter(|o| o.labels().get(crate::capi::CLUSTER_NAME_LABEL) == Some(&name))
            .map(|o| ObjectRef::from_obj(&**o))
            .collect()
    }
}

/// The Machine among `owners` (an infrastructure machine's owners) and its Cluster, from the
/// cache; `None` until both are there (their arrival wakes the caller).
async fn machine_and_cluster(
    informers: &Informers,
    namespace: &str,
    owners: &[k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference],
) -> Result<
    Option<(
        Arc<crate::capi::core::Machine>,
        Arc<crate::capi::core::Cluster>,
    )>,
    Error,
> {
    let Some(name) = types::owner_named(owners, "Machine", "cluster.x-k8s.io") else {
        return Ok(None);
    };
    let Some(machine) = informers
        .get::<crate::capi::core::Machine>(namespace, &name)
        .await?
    else {
        return Ok(None);
    };
    let cluster = informers
        .get::<crate::capi::core::Cluster>(namespace, &machine.spec.cluster_name)
        .await?;
    Ok(cluster.map(|c| (machine, c)))
}

/// The VSphereMachines of the cluster `c` (by Cluster API's cluster-name label).
fn machines_of_cluster(
    informers: &Informers,
    namespace: &str,
    cluster: &str,
) -> Vec<Arc<VSphereMachine>> {
    informers
        .of::<VSphereMachine>()
        .store()
        .state()
        .into_iter()
        .filter(|m| {
            m.namespace().as_deref() == Some(namespace)
                && m.labels()
                    .get(crate::capi::CLUSTER_NAME_LABEL)
                    .map(String::as_str)
                    == Some(cluster)
        })
        .collect()
}
