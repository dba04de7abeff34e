//! The supervisor VSphereCluster reconciler, as CAPV's: the cluster's
//! VirtualMachineSetResourcePolicy (named after the Cluster, with its resource pool, folder
//! and the control plane's and workers' cluster module groups) with `ResourcePolicyReady`,
//! `NetworkReady` (the dummy provider has nothing to make), the control plane endpoint
//! copied from the Cluster where it names one, and `initialization.provisioned` once there is
//! an endpoint. Once the workload cluster answers, its ProviderServiceAccounts and the
//! supervisor's service discovery are reconciled with it (CAPV runs them as controllers of
//! their own; here they share this one's status write, so no two writers race over the
//! conditions that make `Ready`).

use super::super::types::owner_named;
use super::super::types::supervisor::{ProviderServiceAccount, VSphereCluster};
use super::super::{Error, Reconciler};
use super::service_accounts::Outcome;
use super::service_discovery::{self, Outcome as Discovery, CLUSTER_INFO, LB_SERVICE};
use super::VMOPERATOR_API;
use crate::capi::core::Cluster;
use crate::capi::triggers::cluster_gates;
use infrasim_controller_runtime::conditions::Condition;
use infrasim_controller_runtime::informers::Informers;
use infrasim_controller_runtime::reconcile::{Next, Reconcile};
use infrasim_controller_runtime::triggers::filtered;
use infrasim_controller_runtime::Controller;
use k8s_openapi::api::core::v1::{ConfigMap, Service};
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};
use serde_json::{json, Value};
use std::sync::Arc;

/// CAPV's finalizer on a supervisor VSphereCluster.
pub const FINALIZER: &str = "vspherecluster.vmware.infrastructure.cluster.x-k8s.io";

const MANAGER: &str = "infrasim-capv/supervisor-cluster";

/// How long before a token Secret the plane has not filled is looked at again.
const TOKEN_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// The controller: the Cluster's changes (its endpoint, its control plane coming up) and its
/// ProviderServiceAccounts wake its VSphereCluster; the supervisor's load balancer Service
/// and `cluster-info` (one object each, watched by name) wake every VSphereCluster, as their
/// address goes into every workload cluster.
pub(in crate::capv) fn controller(
    informers: &Informers,
    client: &kube::Client,
) -> Controller<VSphereCluster> {
    let every = informers.of::<VSphereCluster>().store();
    let all = move || {
        every
            .state()
            .iter()
            .map(|c| ObjectRef::from_obj(&**c))
            .collect::<Vec<_>>()
    };
    let everyone = all.clone();
    infrasim_controller_runtime::triggers::controller(&informers.of::<VSphereCluster>(), None)
        .watches_stream(named::<Service>(client, LB_SERVICE), move |_| all())
        .watches_stream(named::<ConfigMap>(client, CLUSTER_INFO), move |_| {
            everyone()
        })
        .watches_shared_stream(
            infrasim_controller_runtime::triggers::every_change(
                &informers.of::<ProviderServiceAccount>(),
            ),
            |a| {
                let cluster = a.spec.cluster_ref.as_ref()?.name.clone();
                Some(ObjectRef::new(&cluster).within(&a.namespace().unwrap_or_default()))
            },
        )
        .watches_shared_stream(filtered(&informers.of::<Cluster>(), cluster_gates), |c| {
            c.spec
                .infrastructure_ref
                .as_ref()
                .filter(|r| r.kind == "VSphereCluster" && r.api_group == VSphereCluster::group(&()))
                .map(|r| ObjectRef::new(&r.name).within(&c.namespace().unwrap_or_default()))
        })
}

/// The changes of one object, watched by its name.
fn named<K>(
    client: &kube::Client,
    (namespace, name): (&str, &str),
) -> impl futures::Stream<Item = Result<K, kube::runtime::watcher::Error>> + Send + 'static
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + 'static,
{
    use kube::runtime::{watcher, WatchStreamExt};
    let api = Api::<K>::namespaced(client.clone(), namespace);
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    watcher(api, config).default_backoff().touched_objects()
}

impl Reconcile<VSphereCluster> for Reconciler {
    type Error = Error;
    const FINALIZER: Option<&'static str> = Some(FINALIZER);

    async fn apply(&self, c: Arc<VSphereCluster>) -> Result<Next, Error> {
        let ns = c.namespace().unwrap_or_default();
        let Some(cluster) = owner_named(c.owner_references(), "Cluster", "cluster.x-k8s.io")
            .or_else(|| c.labels().get(crate::capi::CLUSTER_NAME_LABEL).cloned())
        else {
            return Ok(Next::AwaitChange);
        };
        let Some(cluster) = self.informers.get::<Cluster>(&ns, &cluster).await? else {
            return Ok(Next::AwaitChange);
        };
        let before = c.status.as_ref().map(|s| &s.rest);
        if super::super::paused(self, &*c, before, MANAGER, Some(&cluster)).await? {
            return Ok(Next::AwaitChange);
        }
        let policy = match resource_policy(self, &c, &cluster).await {
            Ok(()) => Condition::new("ResourcePolicyReady", true, "Ready", ""),
            Err(e) => Condition::new("ResourcePolicyReady", false, "NotReady", e.to_string()),
        };
        let network = Condition::new("NetworkReady", true, "Ready", "");
        let endpoint = endpoint(self, &c, &cluster).await?;
        let mut extra = json!({});
        if endpoint.is_some() {
            extra["initialization"] = json!({"provisioned": true});
        }
        let mut set = vec![policy, network];
        let mut next = Next::AwaitChange;
        match super::service_accounts::reconcile(self, &c, &cluster).await {
            Outcome::Reported(accounts) => set.push(accounts),
            // The plane's tokens controller fills it on its own time (at once in the
            // embedded plane): a deadline, since Secrets are not watched here.
            Outcome::WaitingForToken => next = Next::After(TOKEN_WAIT),
            // The Cluster's control plane coming up wakes this again.
            Outcome::Unreachable => {}
        }
        if let Discovery::Reported(found) = service_discovery::reconcile(self, &cluster).await {
            set.push(found);
        }
        super::super::write_status(self, &*c, before, MANAGER, set, extra).await?;
        Ok(next)
    }
}

/// The VirtualMachineSetResourcePolicy CAPV makes for the cluster (owned by the
/// VSphereCluster, so it goes with it).
async fn resource_policy(
    r: &Reconciler,
    c: &VSphereCluster,
    cluster: &Cluster,
) -> Result<(), Error> {
    let ns = c.namespace().unwrap_or_default();
    let name = cluster.name_any();
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(
            "vmoperator.vmware.com",
            "v1alpha6",
            "VirtualMachineSetResourcePolicy",
        ),
        "virtualmachinesetresourcepolicies",
    );
    let api: Api<DynamicObject> = Api::namespaced_with(r.ctx.client.clone(), &ns, &resource);
    let owner = json!({"apiVersion": VSphereCluster::api_version(&()), "kind": "VSphereCluster",
                       "name": c.name_any(), "uid": c.uid().unwrap_or_default()});
    let body = json!({
        "apiVersion": VMOPERATOR_API, "kind": "VirtualMachineSetResourcePolicy",
        "metadata": {"name": name, "ownerReferences": [owner]},
        "spec": {"resourcePool": {"name": name}, "folder": name,
                 "clusterModuleGroups": ["control-plane-group", "workers-group"]},
    });
    infrasim_controller_runtime::writes::apply(&api, &name, MANAGER, &body).await?;
    Ok(())
}

/// The control plane endpoint: the VSphereCluster's own, else the Cluster's (copied into the
/// VSphereCluster's spec, as CAPV copies it); `None` while neither names one.
async fn endpoint(
    r: &Reconciler,
    c: &VSphereCluster,
    cluster: &Cluster,
) -> Result<Option<Value>, Error> {
    let set = |v: Option<&Value>| {
        v.filter(|e| e["host"].as_str().is_some_and(|h| !h.is_empty()))
            .cloned()
    };
    if let Some(own) = set(c.spec.rest.get("controlPlaneEndpoint")) {
        return Ok(Some(own));
    }
    let Some(theirs) = set(cluster
        .spec
        .control_plane_endpoint
        .as_ref()
        .map(|e| json!(e))
        .as_ref())
    else {
        return Ok(None);
    };
    let api: Api<VSphereCluster> =
        Api::namespaced(r.ctx.client.clone(), &c.namespace().unwrap_or_default());
    let body = json!({"apiVersion": VSphereCluster::api_version(&()), "kind": "VSphereCluster",
                      "metadata": {"name": c.name_any()}, "spec": {"controlPlaneEndpoint": theirs}});
    infrasim_controller_runtime::writes::apply(&api, &c.name_any(), MANAGER, &body).await?;
    Ok(Some(theirs))
}
