//! Cluster API's in-memory infrastructure provider: one implementation behind two spellings
//! of its kinds (the seed's `InMemory*` and upstream's `Dev*` with the in-memory backend).
//!
//! The cluster reconciler reserves a control-plane endpoint on the simulated cloud; the
//! machine reconciler walks each machine's steps (VM, Node, etcd, API server) on the injected
//! clock and makes them real in the cloud's workload cluster, which it creates on the first
//! machine with the certificate authorities Cluster API keeps in the cluster's secrets.
//!
//! Each reconciler writes status under a field manager of its own,
//! `infrasim-in-memory-provider/cluster` and `/machine` (a `MANAGER` beside each), the same
//! for both spellings: a kind is only ever written by one of them.

pub mod boot;
mod cluster;
mod machine;
pub(crate) use machine::ensure_cloud_cluster;
pub mod timing;
pub mod types;
pub mod v1beta1;

use crate::capi::core::{ApiEndpoint, FailureDomain, MachineAddress};
use crate::capi::paused_message;
use crate::capi::triggers::{cluster_gates, machine_spec};
use infrasim_controller_runtime::conditions::{self, Condition};
use infrasim_controller_runtime::context::Context;
use infrasim_controller_runtime::index::{label_key, label_keys, Index};
use infrasim_controller_runtime::informers::Informers;
use infrasim_controller_runtime::reconcile::{Cleanup, Next};
use infrasim_controller_runtime::triggers::filtered;
use kube::api::Api;
use kube::core::NamespaceResourceScope;
use kube::{Resource, ResourceExt};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{json, Value};
use std::fmt::Debug;
use std::future::Future;
use std::marker::PhantomData;
use std::sync::Arc;
use types::*;

/// Why a reconcile failed (it is retried).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Kube(#[from] kube::Error),
    #[error(transparent)]
    Cloud(#[from] infrasim_cloud::CloudError),
    #[error("{0}")]
    Finalizer(String),
}

/// What the provider's reconcilers need of an object, whichever its spelling.
pub trait InfraObject:
    Resource<DynamicType = (), Scope = NamespaceResourceScope>
    + Clone
    + Debug
    + Serialize
    + DeserializeOwned
    + kube::core::object::HasStatus<Status: Serialize>
    + Send
    + Sync
    + 'static
{
    /// The finalizer this kind carries while the cloud holds something for it.
    const FINALIZER: &'static str;
    /// Why the object cannot be simulated (a docker backend), if it cannot.
    fn unsupported(&self) -> Option<String>;
    /// The v1beta2 conditions it has.
    fn current_conditions(&self) -> Vec<Condition>;
    /// The status to apply, in this spelling.
    fn status_for(view: &InfraStatus) -> Value;
}

/// An infrastructure cluster.
pub trait InfraCluster: InfraObject {
    fn endpoint(&self) -> Option<&ApiEndpoint>;
    fn failure_domains(&self) -> Vec<FailureDomain>;
}

/// An infrastructure machine.
pub trait InfraMachine: InfraObject {
    fn provider_id(&self) -> Option<&str>;
    fn behaviour(&self) -> Option<&MachineBehaviour>;
}

/// The provider's status of an object, before it is spelled out for its kind.
#[derive(Debug, Clone, Default)]
pub struct InfraStatus {
    pub provisioned: bool,
    /// v1beta2 conditions (Ready first, Paused last).
    pub conditions: Vec<Condition>,
    pub failure_domains: Option<Vec<FailureDomain>>,
    pub addresses: Option<Vec<MachineAddress>>,
    pub failure_domain: Option<String>,
}

/// The fields both spellings put in status the same way.
fn common_status(view: &InfraStatus) -> Value {
    let mut status = json!({
        "ready": view.provisioned,
        "initialization": {"provisioned": view.provisioned},
    });
    if let Some(fd) = &view.failure_domains {
        status["failureDomains"] = json!(fd);
    }
    if let Some(a) = &view.addresses {
        status["addresses"] = json!(a);
    }
    if let Some(fd) = &view.failure_domain {
        status["failureDomain"] = json!(fd);
    }
    status
}

/// The seed's layout: v1beta1 conditions in `conditions`, v1beta2 ones in `v1beta2`. The
/// CRDs claim the v1beta2 contract too, which asks for `Paused` in `status.conditions`: it is
/// there as well, as Cluster API writes it (reason `Paused` with the why, or `NotPaused`).
fn seed_status(view: &InfraStatus) -> Value {
    let mut status = common_status(view);
    let mut old = conditions::to_v1beta1(&view.conditions);
    if let Some(p) = conditions::find(&view.conditions, "Paused") {
        old.push(conditions::V1Beta1Condition {
            type_: p.type_.clone(),
            status: p.status.clone(),
            severity: String::new(),
            last_transition_time: p.last_transition_time.clone(),
            reason: p.reason.clone(),
            message: p.message.clone(),
        });
    }
    status["conditions"] = json!(old);
    status["v1beta2"] = json!({"conditions": view.conditions});
    status
}

/// Upstream's v1beta2 layout: v1beta2 conditions, v1beta1 ones under `deprecated`.
fn dev_status(view: &InfraStatus) -> Value {
    let mut status = common_status(view);
    status["conditions"] = json!(view.conditions);
    status["deprecated"] =
        json!({"v1beta1": {"conditions": conditions::to_v1beta1(&view.conditions)}});
    status
}

/// The status `obj` has now, as the provider's view of it: what a reconcile that changes
/// one condition (a pause) writes back, so that nothing else it reported goes.
fn current_view<K: InfraObject>(obj: &K) -> InfraStatus {
    let status = serde_json::to_value(obj.status()).unwrap_or(Value::Null);
    let field = |name: &str| status.get(name).filter(|v| !v.is_null()).cloned();
    let provisioned = status
        .pointer("/initialization/provisioned")
        .or_else(|| status.get("ready"))
        .and_then(Value::as_bool)
        .unwrap_or(false);
    InfraStatus {
        provisioned,
        conditions: obj.current_conditions(),
        failure_domains: field("failureDomains").and_then(|v| serde_json::from_value(v).ok()),
        addresses: field("addresses").and_then(|v| serde_json::from_value(v).ok()),
        failure_domain: field("failureDomain").and_then(|v| serde_json::from_value(v).ok()),
    }
}

/// Writes only the `Paused` condition (True, with `why`) into the status `obj` has, as
/// Cluster API's `EnsurePausedCondition` patches only that condition.
async fn report_paused<K: InfraObject>(
    api: &Api<K>,
    obj: &K,
    manager: &str,
    why: String,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<(), Error> {
    let mut view = current_view(obj);
    conditions::set_paused(&mut view.conditions, Some(why), now);
    conditions::sort(&mut view.conditions);
    apply_status(api, obj, manager, &view).await
}

fn docker_refused(kind: &str) -> String {
    format!(
        "only the in-memory backend is simulated: this {kind} asks for the docker backend \
         (spec.backend.docker), which needs a Docker engine; use spec.backend.inMemory"
    )
}

/// `InfraObject` for the seed's spelling (`InMemory*`, v1alpha1): conditions under
/// `status.v1beta2`, and no other backend to refuse. (A macro: the two kinds' statuses are
/// types of their own with the same fields.)
macro_rules! seed_spelling {
    ($kind:ty, $finalizer:literal) => {
        impl InfraObject for $kind {
            const FINALIZER: &'static str = $finalizer;
            fn unsupported(&self) -> Option<String> {
                None
            }
            fn current_conditions(&self) -> Vec<Condition> {
                self.status
                    .as_ref()
                    .and_then(|s| s.v1beta2.as_ref())
                    .and_then(|v| v.conditions.clone())
                    .unwrap_or_default()
            }
            fn status_for(view: &InfraStatus) -> Value {
                seed_status(view)
            }
        }
    };
}

/// `InfraObject` for upstream's spelling (`Dev*`, v1beta2): conditions at the top of the
/// status, and the docker backend refused.
macro_rules! dev_spelling {
    ($kind:ident, $finalizer:literal) => {
        impl InfraObject for $kind {
            const FINALIZER: &'static str = $finalizer;
            fn unsupported(&self) -> Option<String> {
                (self.spec.backend.in_memory.is_none()).then(|| docker_refused(stringify!($kind)))
            }
            fn current_conditions(&self) -> Vec<Condition> {
                self.status
                    .as_ref()
                    .and_then(|s| s.conditions.clone())
                    .unwrap_or_default()
            }
            fn status_for(view: &InfraStatus) -> Value {
                dev_status(view)
            }
        }
    };
}

seed_spelling!(
    InMemoryCluster,
    "inmemorycluster.infrastructure.cluster.x-k8s.io"
);
seed_spelling!(
    InMemoryMachine,
    "inmemorymachine.infrastructure.cluster.x-k8s.io"
);
dev_spelling!(DevCluster, "devcluster.infrastructure.cluster.x-k8s.io");
dev_spelling!(DevMachine, "devmachine.infrastructure.cluster.x-k8s.io");

impl InfraCluster for InMemoryCluster {
    fn endpoint(&self) -> Option<&ApiEndpoint> {
        self.spec.control_plane_endpoint.as_ref()
    }
    fn failure_domains(&self) -> Vec<FailureDomain> {
        self.spec.failure_domains.clone().unwrap_or_default()
    }
}

impl InfraCluster for DevCluster {
    fn endpoint(&self) -> Option<&ApiEndpoint> {
        self.spec.control_plane_endpoint.as_ref()
    }
    fn failure_domains(&self) -> Vec<FailureDomain> {
        self.spec
            .backend
            .in_memory
            .as_ref()
            .and_then(|m| m.failure_domains.clone())
            .unwrap_or_default()
    }
}

impl InfraMachine for InMemoryMachine {
    fn provider_id(&self) -> Option<&str> {
        self.spec.provider_id.as_deref()
    }
    fn behaviour(&self) -> Option<&MachineBehaviour> {
        self.spec.behaviour.as_ref()
    }
}

impl InfraMachine for DevMachine {
    fn provider_id(&self) -> Option<&str> {
        self.spec.provider_id.as_deref()
    }
    fn behaviour(&self) -> Option<&MachineBehaviour> {
        self.spec.backend.in_memory.as_ref()
    }
}

/// The kind's name for the metrics (`'static`, as the counters keep it).
fn infra_kind<K: InfraObject>() -> &'static str {
    match K::FINALIZER {
        f if f.starts_with("inmemorycluster") => "InMemoryCluster",
        f if f.starts_with("inmemorymachine") => "InMemoryMachine",
        f if f.starts_with("devcluster") => "DevCluster",
        _ => "DevMachine",
    }
}

/// The key of a Cluster's workload cluster in the cloud: `<cluster>.<namespace>`, which is
/// also a DNS name (the cluster's name on a shared SNI listener).
pub fn cloud_key(cluster: &str, namespace: &str) -> String {
    format!("{cluster}.{namespace}")
}
/// The port to serve a cluster's recorded `endpoint` on: its own (a cluster coming back
/// after a restart keeps its endpoint), or none (the lowest free one) when there is none or,
/// in a sharded fleet, when this process cannot serve it (the cluster was taken over from a
/// process on another range or machine, and its endpoint moves here). Unsharded, an endpoint
/// outside the range is reported, not moved: a user may have set it.
pub(crate) fn wanted_port(ctx: &Context, endpoint: Option<&ApiEndpoint>) -> Option<u16> {
    let endpoint = endpoint.filter(|e| e.port > 0 && e.port <= i32::from(u16::MAX))?;
    let port = endpoint.port as u16;
    let movable = ctx.shards.count().is_some() && !ctx.cloud.can_serve(&endpoint.host, port);
    (!movable).then_some(port)
}

/// Claims `obj` for this controller once a Cluster API object of kind `owner` owns it (an
/// infrastructure object is reserved for nothing before): the API to write it through when
/// its work may go on, `None` when it is not owned yet or the finalizer was just added (that
/// write's own event brings the next reconcile).
async fn claimed<K: InfraObject>(
    r: &Reconciler<K>,
    obj: &K,
    owner: &str,
) -> Result<Option<Api<K>>, Error> {
    if owner_named(obj, owner).is_none() {
        return Ok(None);
    }
    let api: Api<K> = Api::namespaced(r.ctx.client.clone(), &obj.namespace().unwrap_or_default());
    if infrasim_controller_runtime::finalizers::ensure(&r.ctx.client, obj, K::FINALIZER).await? {
        return Ok(None);
    }
    Ok(Some(api))
}

/// The apply of both infrastructure reconcilers: `work` runs once `obj` is claimed for an
/// owner of kind `owner`, with the API to write it through.
async fn when_claimed<K, F>(
    r: &Reconciler<K>,
    obj: Arc<K>,
    owner: &str,
    work: impl FnOnce(Arc<K>, Api<K>) -> F,
) -> Result<Next, Error>
where
    K: InfraObject,
    F: Future<Output = Result<Next, Error>>,
{
    let _running = infrasim_controller_runtime::metrics::reconciled(infra_kind::<K>());
    match claimed(r, &*obj, owner).await? {
        Some(api) => work(obj, api).await,
        None => Ok(Next::AwaitChange),
    }
}

/// The cleanup of both infrastructure reconcilers: what `take_down` removes goes first, then
/// the finalizer. An object never claimed reserved nothing, so it has nothing to take down.
async fn release_claim<K, F>(
    r: &Reconciler<K>,
    obj: Arc<K>,
    take_down: impl FnOnce(Arc<K>) -> F,
) -> Result<Cleanup, Error>
where
    K: InfraObject,
    F: Future<Output = Result<(), Error>>,
{
    let _running = infrasim_controller_runtime::metrics::reconciled(infra_kind::<K>());
    if obj.finalizers().iter().any(|f| f == K::FINALIZER) {
        take_down(obj.clone()).await?;
        infrasim_controller_runtime::finalizers::remove(&r.ctx.client, &*obj, K::FINALIZER).await?;
    }
    Ok(Cleanup::Done)
}

/// The name of the Cluster that owns `obj` (its owner reference of kind Cluster).
fn owner_named<K: Resource>(obj: &K, kind: &str) -> Option<String> {
    obj.owner_references()
        .iter()
        .find(|o| o.kind == kind && o.api_version.starts_with("cluster.x-k8s.io/"))
        .map(|o| o.name.clone())
}

/// Applies `view` as the object's status (server-side apply under the calling reconciler's
/// `manager`, so it takes only the status fields the provider owns and never a stale copy of
/// anything else), unless the object already has exactly that status.
async fn apply_status<K: InfraObject>(
    api: &Api<K>,
    obj: &K,
    manager: &str,
    view: &InfraStatus,
) -> Result<(), Error> {
    let wanted = K::status_for(view);
    // Only the status is encoded to compare, not the whole object.
    let current = serde_json::to_value(obj.status()).map_err(kube::Error::SerdeError)?;
    if current == wanted {
        return Ok(());
    }
    let body = json!({
        "apiVersion": K::api_version(&()),
        "kind": K::kind(&()),
        "status": wanted,
    });
    infrasim_controller_runtime::writes::apply_status(api, &obj.name_any(), manager, &body).await?;
    Ok(())
}

/// The per-kind controller state: the shared context and caches, for the kind `K` it
/// reconciles (wrapped by [`cluster::ClusterReconciler`] or [`machine::MachineReconciler`],
/// which implement [`infrasim_controller_runtime::reconcile::Reconcile`]). Its deadlines and retries are
/// the runner's.
pub struct Reconciler<K: Resource<DynamicType = ()>> {
    pub ctx: Context,
    /// The process's caches, which the owners (Machines, Clusters) are read from.
    pub informers: Arc<Informers>,
    kind: PhantomData<fn() -> K>,
}

impl<K: Resource<DynamicType = ()>> Reconciler<K> {
    fn new(ctx: Context, informers: Arc<Informers>) -> Self {
        Reconciler {
            ctx,
            informers,
            kind: PhantomData,
        }
    }
}

/// Runs the provider's four controllers until the process ends, on the process's informers.
pub async fn run(ctx: Context, informers: Arc<Informers>) {
    futures::join!(
        run_clusters::<InMemoryCluster>(ctx.clone(), &informers),
        run_clusters::<DevCluster>(ctx.clone(), &informers),
        run_machines::<InMemoryMachine>(ctx.clone(), &informers),
        run_machines::<DevMachine>(ctx.clone(), &informers),
    );
}

async fn run_clusters<K: InfraCluster>(ctx: Context, informers: &Arc<Informers>) {
    let clusters = informers.of::<crate::capi::core::Cluster>();
    let controller = infrasim_controller_runtime::triggers::controller(&informers.of::<K>(), None)
        .watches_shared_stream(filtered(&clusters, cluster_gates), |c| {
            let ns = c.namespace().unwrap_or_default();
            c.spec
                .infrastructure_ref
                .as_ref()
                .filter(|r| r.kind == K::kind(&()))
                .map(|r| kube::runtime::reflector::ObjectRef::new(&r.name).within(&ns))
        });
    // Shards this process takes over bring their clusters' objects round again.
    let controller = controller.reconcile_on(
        ctx.shards
            .taken(informers.of::<K>().store(), cluster::cluster_key::<K>),
    );
    let r = cluster::ClusterReconciler(Reconciler::new(ctx.clone(), informers.clone()));
    infrasim_controller_runtime::reconcile::run(&ctx, controller, Arc::new(r)).await;
}

async fn run_machines<K: InfraMachine>(ctx: Context, informers: &Arc<Informers>) {
    let machines = informers.of::<crate::capi::core::Machine>();
    let clusters = informers.of::<crate::capi::core::Cluster>();
    let by_cluster = Index::new(|m: &K| label_keys(m, &[crate::capi::CLUSTER_NAME_LABEL]));
    let controller =
        infrasim_controller_runtime::triggers::controller(&informers.of::<K>(), Some(&by_cluster))
            .watches_shared_stream(filtered(&machines, machine_spec), |m| {
                let ns = m.namespace().unwrap_or_default();
                let r = &m.spec.infrastructure_ref;
                (r.kind == K::kind(&()))
                    .then(|| kube::runtime::reflector::ObjectRef::new(&r.name).within(&ns))
            })
            // A cluster's infrastructure or control plane coming up opens its machines' gates.
            .watches_shared_stream(filtered(&clusters, cluster_gates), move |c| {
                let ns = c.namespace().unwrap_or_default();
                by_cluster.lookup(
                    &ns,
                    &label_key(crate::capi::CLUSTER_NAME_LABEL, &c.name_any()),
                )
            });
    let controller = controller.reconcile_on(
        ctx.shards
            .taken(informers.of::<K>().store(), machine::machine_key::<K>),
    );
    let r = machine::MachineReconciler(Reconciler::new(ctx.clone(), informers.clone()));
    infrasim_controller_runtime::reconcile::run(&ctx, controller, Arc::new(r)).await;
}
