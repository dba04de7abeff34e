//! An embedded stand-in for Cluster API's core controllers, so `infrasim up` makes clusters
//! from Cluster API objects without the real (Go) controllers: Cluster (with topology from a
//! ClusterClass), Machine, MachineSet, MachineDeployment, MachineHealthCheck (status),
//! KubeadmControlPlane and KubeadmConfig, doing what upstream's do at the level a provider
//! and a user can observe. When real Cluster API manages the plane it is switched off
//! (`--capi-core=external`); it never fights them.
//!
//! Each controller is a runtime `Controller` (kube-runtime's with its work queue) over the typed kind (see
//! [`crate::capi::core`]), reading referenced provider objects by contract (see [`objects`])
//! and workload clusters through their kubeconfig secrets (see [`workload`]).
//!
//! Each controller writes under a field manager of its own, `infrasim-capi-core/<its file>`
//! (a `MANAGER` beside its reconciler), but for the Machines' `OwnerRemediated` condition,
//! which three of them share (see [`remediation::OWNER_MANAGER`]).

mod blueprint;
pub mod certificate_expiry;
pub mod certs;
mod cluster;
mod cluster_class;
mod component_health;
mod desired;
pub mod etcd;
mod external;
mod fault_changes;
mod healthcheck;
mod in_place;
mod kcp;
mod kcp_remediation;
mod kubeadm_config;
mod machine;
mod machinedeployment;
mod machineset;
pub mod nodes;
pub mod objects;
mod owned_conditions;
mod patches;
mod remediation;
mod resource_set;
mod rollout;
mod topology;
mod up_to_date;
mod v1beta1;
pub mod workload;

use crate::capi::index::ByCluster;
use crate::capi::paused_message as paused;
use infrasim_controller_runtime::context::Context;
use kube::api::{Api, ListParams};
use kube::{Resource, ResourceExt};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::json;
use std::fmt::Debug;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

/// Why a reconcile failed (it is retried).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Kube(#[from] kube::Error),
    #[error(transparent)]
    Ref(#[from] objects::RefError),
    #[error(transparent)]
    Cert(#[from] certs::CertError),
    #[error(transparent)]
    Workload(#[from] workload::WorkloadError),
    #[error(transparent)]
    Etcd(#[from] etcd::EtcdError),
    #[error("{0}")]
    Invalid(String),
}

/// What the stand-in's controllers share.
pub struct Core {
    pub ctx: Context,
    /// The process's watches, one per kind, that every controller here subscribes to.
    pub informers: Arc<infrasim_controller_runtime::informers::Informers>,
    pub resolver: objects::Resolver,
    /// The watches of provider kinds the core's references name (Cluster API's external
    /// tracker): their changes wake the Machines and Clusters that own them.
    pub external: external::Tracker,
    pub workloads: workload::WorkloadClients,
    /// The workload clusters' Nodes, and their changes (Cluster API's cluster cache).
    pub nodes: nodes::NodeCache,
    /// When each cluster last answered a probe (by Cluster uid): a cluster that answered
    /// recently is not asked again on every reconcile, as Cluster API's cluster cache probes
    /// on an interval.
    pub probed: std::sync::Mutex<std::collections::HashMap<String, chrono::DateTime<chrono::Utc>>>,
    /// The clusters whose certificate secrets were found complete a moment ago.
    pub certificates: certs::Found,
    /// Machines and MachineDeployments by cluster, for the controllers that only read them.
    pub machines: ByCluster<crate::capi::core::Machine>,
    pub deployments: ByCluster<crate::capi::core::MachineDeployment>,
    /// The topology's objects last found in line with the class (see [`objects::InLine`]).
    pub in_line: objects::InLine,
}

impl Core {
    /// The object a contract reference points at, from the process's caches where one holds
    /// its kind (see [`infrasim_controller_runtime::informers::Informers::get_untyped`]).
    pub async fn read(
        &self,
        namespace: &str,
        r: &crate::capi::core::ContractRef,
    ) -> Result<Option<kube::api::DynamicObject>, objects::RefError> {
        let resource = self
            .resolver
            .resolve(&self.ctx.client, &r.api_group, &r.kind)
            .await?;
        self.external.track(&resource);
        Ok(self
            .informers
            .get_untyped(&resource, namespace, &r.name)
            .await?)
    }

    /// The objects of `cluster` in `namespace` that `by` indexes, from the shared cache once
    /// it is filled, else listed by the cluster-name label.
    pub async fn in_cluster<K: infrasim_controller_runtime::informers::Watched>(
        &self,
        by: &ByCluster<K>,
        namespace: &str,
        cluster: &str,
    ) -> Result<Vec<Arc<K>>, kube::Error> {
        if let Some(found) = by.of(namespace, cluster) {
            return Ok(found);
        }
        use infrasim_controller_runtime::informers::Scoped;
        let api: Api<K> = K::Scope::api(self.ctx.client.clone(), Some(namespace));
        let selector = format!("{}={cluster}", crate::capi::CLUSTER_NAME_LABEL);
        let listed = api.list(&ListParams::default().labels(&selector)).await?;
        Ok(listed.items.into_iter().map(Arc::new).collect())
    }
}

/// One controller's state: the shared core, for the kind `K` it reconciles (each kind's
/// file implements [`infrasim_controller_runtime::reconcile::Reconcile`] for its own). Its deadlines and
/// retries are the runner's.
pub struct Reconciler<K: Resource<DynamicType = ()>> {
    pub core: Arc<Core>,
    kind: PhantomData<fn() -> K>,
}

impl<K: Resource<DynamicType = ()>> Reconciler<K> {
    fn new(core: Arc<Core>) -> Self {
        Reconciler {
            core,
            kind: PhantomData,
        }
    }

    fn client(&self) -> kube::Client {
        self.core.ctx.client.clone()
    }

    fn api<T>(&self, namespace: &str) -> Api<T>
    where
        T: Resource<DynamicType = (), Scope = kube::core::NamespaceResourceScope>,
    {
        Api::namespaced(self.client(), namespace)
    }
}

/// How soon a workload cluster that did not answer is asked again, as Cluster API's cluster
/// cache probes an unreachable cluster every 10 s: no event will say when it answers.
const RECONNECT_AFTER: Duration = Duration::from_secs(10);

pub(crate) use infrasim_controller_runtime::finalizers::{
    ensure as ensure_finalizer, remove as remove_finalizer,
};

/// Merge-patches the object `name` of `api` with `patch` (the stand-in's writes of a few
/// fields it alone sets), returning the object as patched.
async fn merge_patch<K>(
    api: &Api<K>,
    name: &str,
    patch: &serde_json::Value,
) -> Result<K, kube::Error>
where
    K: Clone + DeserializeOwned + Debug,
{
    api.patch(
        name,
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(patch),
    )
    .await
}

/// Deletes the object `name` of `api`; one already gone is no error.
async fn delete_if_present<K>(api: &Api<K>, name: &str) -> Result<(), kube::Error>
where
    K: Clone + DeserializeOwned + Debug,
{
    match api.delete(name, &kube::api::DeleteParams::default()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        Err(e) => Err(e),
    }
}

/// Applies `status` to `obj` under `manager`, the calling controller's (server-side apply:
/// only that controller's own status fields, never a stale copy of anything else), unless
/// `obj` already has it: most reconciles find nothing new, and a write they need not make is
/// one nobody else has to wake for.
async fn apply_status<K, S>(
    api: &Api<K>,
    obj: &K,
    manager: &str,
    status: &S,
) -> Result<(), kube::Error>
where
    K: Resource<DynamicType = ()>
        + Clone
        + DeserializeOwned
        + Serialize
        + Debug
        + kube::core::object::HasStatus<Status: Serialize>,
    S: Serialize,
{
    let wanted = serde_json::to_value(status).map_err(kube::Error::SerdeError)?;
    // Only the status is compared, so only the status is encoded (not the whole object and
    // its managedFields, on every reconcile).
    let mut current = serde_json::to_value(obj.status()).map_err(kube::Error::SerdeError)?;
    // Conditions other managers hold (a health check's on a Machine) are not this write's.
    if let Some(conds) = current
        .pointer_mut("/conditions")
        .and_then(serde_json::Value::as_array_mut)
    {
        conds.retain(|c| {
            !c.get("type")
                .and_then(serde_json::Value::as_str)
                .is_some_and(remediation::not_the_machines)
        });
    }
    if current == wanted {
        return Ok(());
    }
    let body = json!({"apiVersion": K::api_version(&()), "kind": K::kind(&()), "status": wanted});
    match infrasim_controller_runtime::writes::apply_status(api, &obj.name_any(), manager, &body)
        .await
    {
        Ok(_) => Ok(()),
        // Gone meanwhile (its finalizer was the last): nothing to report on.
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        Err(e) => Err(e),
    }
}

/// A controller of kind `K` woken by changes of its objects' spec and metadata (not of the
/// status it writes itself).
fn controller_for<K: infrasim_controller_runtime::informers::Watched>(
    core: &Core,
) -> infrasim_controller_runtime::Controller<K> {
    infrasim_controller_runtime::triggers::controller(&core.informers.of::<K>(), None)
}

/// Runs the stand-in's controllers until the process ends.
pub async fn run(ctx: Context, informers: Arc<infrasim_controller_runtime::informers::Informers>) {
    let nodes = nodes::NodeCache::new(ctx.cloud.clone());
    let machines = ByCluster::new(informers.of());
    let deployments = ByCluster::new(informers.of());
    let core = Arc::new(Core {
        ctx,
        external: external::Tracker::new(informers.clone()),
        informers,
        certificates: certs::Found::default(),
        machines,
        deployments,
        in_line: Default::default(),
        resolver: objects::Resolver::default(),
        workloads: workload::WorkloadClients::default(),
        nodes,
        probed: Default::default(),
    });
    futures::join!(
        cluster::run(core.clone()),
        cluster_class::run(core.clone()),
        machine::run(core.clone()),
        kubeadm_config::run(core.clone()),
        kcp::run(core.clone()),
        machineset::run(core.clone()),
        machinedeployment::run(core.clone()),
        healthcheck::run(core.clone()),
        resource_set::run(core.clone()),
        resource_set::run_bindings(core.clone()),
    );
}
