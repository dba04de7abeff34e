//! The VSphereCluster reconciler: logs in to the cluster's vCenter with its credentials (see
//! [`super::credentials`]) and reports it as CAPV does, `VCenterAvailable` and `Ready`
//! conditions, `status.vCenterVersion` and `status.initialization.provisioned`, which
//! Cluster API's core waits for before it lets the cluster's machines be made, and keeps
//! the cluster's modules (see [`super::modules`]) where anti-affinity is on. A deleted
//! VSphereCluster waits for its cluster's VSphereMachines to go first, then deletes them.

use super::types::{VSphereCluster, VSphereMachine};
use super::{modules, Error, Reconciler};
use crate::capi::core::{Cluster, KubeadmControlPlane, MachineDeployment};
use crate::capi::triggers::cluster_gates;
use infrasim_controller_runtime::conditions::Condition;
use infrasim_controller_runtime::informers::Informers;
use infrasim_controller_runtime::reconcile::{Cleanup, Next, Reconcile};
use infrasim_controller_runtime::triggers::{every_change, filtered};
use infrasim_controller_runtime::vcenters::VCenter;
use infrasim_controller_runtime::Controller;
use kube::runtime::reflector::ObjectRef;
use kube::ResourceExt;
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

/// CAPV's finalizer on a VSphereCluster.
pub const FINALIZER: &str = "vspherecluster.infrastructure.cluster.x-k8s.io";

const MANAGER: &str = "infrasim-capv/cluster";

/// How long a login may take before the vCenter counts as unreachable.
const LOGIN_LIMIT: Duration = Duration::from_secs(30);

/// The VSphereCluster controller: a VSphereMachine's change (its deletion above all) wakes
/// the VSphereCluster of its cluster, as a control plane's or MachineDeployment's arrival,
/// departure or change of machine template does (its cluster module).
pub(super) fn controller(informers: &Informers) -> Controller<VSphereCluster> {
    let clusters = informers.of::<VSphereCluster>();
    let store = clusters.store();
    let of_cluster = move |obj: &dyn ResourceLabels| -> Vec<ObjectRef<VSphereCluster>> {
        let ns = obj.ns();
        let cluster = obj.cluster();
        store
            .state()
            .iter()
            .filter(|c| c.namespace().as_deref() == Some(ns.as_str()))
            .filter(|c| cluster_name(c).as_deref() == Some(cluster.as_str()))
            .map(|c| ObjectRef::from_obj(&**c))
            .collect()
    };
    let (by_machine, by_kcp, by_md) = (of_cluster.clone(), of_cluster.clone(), of_cluster);
    infrasim_controller_runtime::triggers::controller(&clusters, None)
        .watches_shared_stream(every_change(&informers.of::<VSphereMachine>()), move |m| {
            by_machine(&*m)
        })
        .watches_shared_stream(
            filtered(&informers.of::<KubeadmControlPlane>(), |k| {
                Some(hash(&(
                    &k.spec.machine_template.spec.infrastructure_ref.name,
                    k.metadata.deletion_timestamp.is_some(),
                )))
            }),
            move |k| by_kcp(&*k),
        )
        .watches_shared_stream(filtered(&informers.of::<Cluster>(), cluster_gates), |c| {
            c.spec
                .infrastructure_ref
                .as_ref()
                .filter(|r| r.kind == "VSphereCluster" && r.api_group == super::types::GROUP)
                .map(|r| ObjectRef::new(&r.name).within(&c.namespace().unwrap_or_default()))
        })
        .watches_shared_stream(
            filtered(&informers.of::<MachineDeployment>(), |md| {
                Some(hash(&(
                    &md.spec.template.spec.infrastructure_ref.name,
                    md.metadata.deletion_timestamp.is_some(),
                )))
            }),
            move |md| by_md(&*md),
        )
        // A zone it may select reporting (or changing its labels): its failure domains.
        .watches_shared_stream(
            filtered(
                &informers.of::<super::types::VSphereDeploymentZone>(),
                super::zones::zone_report,
            ),
            super::zones::clusters_on_server(informers),
        )
}

fn hash(v: &impl std::hash::Hash) -> u64 {
    use std::hash::Hasher;
    let mut h = std::collections::hash_map::DefaultHasher::new();
    v.hash(&mut h);
    h.finish()
}

/// An object of a cluster: its namespace and its cluster-name label.
trait ResourceLabels {
    fn ns(&self) -> String;
    fn cluster(&self) -> String;
}

impl<K: kube::Resource> ResourceLabels for K {
    fn ns(&self) -> String {
        self.namespace().unwrap_or_default()
    }
    fn cluster(&self) -> String {
        self.labels()
            .get(crate::capi::CLUSTER_NAME_LABEL)
            .cloned()
            .unwrap_or_default()
    }
}

/// The name of the Cluster a VSphereCluster belongs to: its owner, else its label.
fn cluster_name(c: &VSphereCluster) -> Option<String> {
    super::types::owner_named(c.owner_references(), "Cluster", "cluster.x-k8s.io")
        .or_else(|| c.labels().get(crate::capi::CLUSTER_NAME_LABEL).cloned())
}

impl Reconcile<VSphereCluster> for Reconciler {
    type Error = Error;
    const FINALIZER: Option<&'static str> = Some(FINALIZER);

    async fn apply(&self, c: Arc<VSphereCluster>) -> Result<Next, Error> {
        let ns = c.namespace().unwrap_or_default();
        let cluster = match cluster_name(&c) {
            Some(name) => self.informers.get::<Cluster>(&ns, &name).await?,
            None => None,
        };
        let before = c.status.as_ref().map(|s| &s.rest);
        if super::paused(self, &*c, before, MANAGER, cluster.as_deref()).await? {
            return Ok(Next::AwaitChange);
        }
        // Its failure domains first: CAPV goes no further until every zone has reported.
        let domains = super::zones::for_cluster(&self.informers, &c);
        let mut found = Vec::new();
        if let Some(d) = &domains {
            found.extend(d.condition.clone());
            if !d.settled {
                write_status(self, &c, found, None, domains).await?;
                return Ok(Next::AwaitChange);
            }
        }
        let login = match self.claim_identity_secret(&c).await {
            Err(why) => Err(why),
            Ok(()) => {
                let login = tokio::time::timeout(LOGIN_LIMIT, self.log_in(&c)).await;
                login.unwrap_or_else(|_| Err(format!("no answer in {LOGIN_LIMIT:?}")))
            }
        };
        let (mut set, version) = match login {
            Ok((vc, version)) => {
                let mut set = vec![Condition::new("VCenterAvailable", true, "Available", "")];
                if modules::wanted(self, &c) {
                    set.push(modules::reconcile(self, &c, &vc, &version).await?);
                }
                (set, Some(version))
            }
            Err(why) => (
                vec![Condition::new(
                    "VCenterAvailable",
                    false,
                    "VCenterUnreachable",
                    why,
                )],
                None,
            ),
        };
        let provisioned = version.is_some();
        set.extend(found);
        write_status(self, &c, set, version, domains).await?;
        if provisioned {
            Ok(Next::AwaitChange)
        } else {
            Err(Error::Reported(format!(
                "VSphereCluster {}: the vCenter is unavailable",
                c.name_any()
            )))
        }
    }

    async fn cleanup(&self, c: Arc<VSphereCluster>) -> Result<Cleanup, Error> {
        let ns = c.namespace().unwrap_or_default();
        let Some(cluster) = cluster_name(&c) else {
            return Ok(Cleanup::Done);
        };
        let left = super::machines_of_cluster(&self.informers, &ns, &cluster).len();
        if left > 0 {
            tracing::debug!(cluster, left, "the VSphereCluster waits for its machines");
            return Ok(Cleanup::Pending(Next::AwaitChange));
        }
        // Its modules go with it (best effort: a vCenter gone takes them along).
        let recorded = c
            .spec
            .rest
            .get("clusterModules")
            .and_then(|m| m.as_array())
            .cloned();
        if let (Some(recorded), Ok((vc, _))) = (recorded, self.log_in(&c).await) {
            delete_modules(&vc, recorded).await;
        }
        // A Secret identity goes with the cluster that claimed it, as CAPV deletes it.
        if let Some(identity) = c.spec.identity_ref.as_ref().filter(|i| i.kind == "Secret") {
            let secrets: kube::Api<k8s_openapi::api::core::v1::Secret> =
                kube::Api::namespaced(self.ctx.client.clone(), &ns);
            super::identity::release_secret(&secrets, &identity.name).await?;
        }
        Ok(Cleanup::Done)
    }
}

/// Deletes the cluster modules recorded in a VSphereCluster's spec (best effort: a vCenter
/// gone takes them along).
async fn delete_modules(vc: &VCenter, recorded: Vec<serde_json::Value>) {
    for m in recorded {
        let module = m["moduleUUID"].as_str().unwrap_or("");
        if let Err(e) = vc.client.delete_cluster_module(module).await {
            tracing::warn!("deleting a cluster module: {e}");
        }
    }
}

impl Reconciler {
    /// A Secret identity is claimed by its cluster, as CAPV claims it: the VSphereCluster
    /// as its owner and CAPV's finalizer on it; one another cluster or identity owns
    /// already is refused.
    async fn claim_identity_secret(&self, c: &VSphereCluster) -> Result<(), String> {
        let Some(identity) = c.spec.identity_ref.as_ref().filter(|i| i.kind == "Secret") else {
            return Ok(());
        };
        let ns = c.namespace().unwrap_or_default();
        let secrets: kube::Api<k8s_openapi::api::core::v1::Secret> =
            kube::Api::namespaced(self.ctx.client.clone(), &ns);
        let secret = secrets
            .get_opt(&identity.name)
            .await
            .map_err(|e| e.to_string())?
            .ok_or_else(|| format!("secrets \"{}\" not found", identity.name))?;
        let owner = crate::capi::standin::objects::owner_ref(c, false);
        super::identity::claim(&secrets, &secret, owner)
            .await
            .map_err(|e| match e {
                super::identity::Claim::InUse => format!(
                    "another cluster has set the OwnerRef for Secret {ns}/{}",
                    identity.name
                ),
                super::identity::Claim::Failed(e) => e.to_string(),
            })
    }

    /// Logs in to the cluster's vCenter (a session shared with its VMs); it and its version.
    async fn log_in(&self, c: &VSphereCluster) -> Result<(Arc<VCenter>, String), String> {
        if c.spec.server.is_empty() {
            return Err("spec.server is empty".into());
        }
        let credentials = super::credentials::for_cluster(
            &self.ctx.client,
            &self.defaults,
            Some(c),
            &c.spec.server,
            &c.spec.thumbprint,
        )
        .await?;
        let vc = self
            .vcenters
            .get(credentials)
            .await
            .map_err(|e| e.to_string())?;
        let version = vc.client.content().api_version.clone();
        Ok((vc, version))
    }
}

/// Writes the conditions CAPV writes, whether the cluster is provisioned, and its failure
/// domains.
async fn write_status(
    r: &Reconciler,
    c: &VSphereCluster,
    set: Vec<Condition>,
    version: Option<String>,
    domains: Option<super::zones::ClusterDomains>,
) -> Result<(), Error> {
    let mut extra = json!({});
    if let Some(d) = domains {
        extra["failureDomains"] = json!(d.listed);
    }
    if set.first().is_some_and(Condition::is_true) {
        extra["initialization"] = json!({"provisioned": true});
    }
    if let Some(version) = version {
        extra["vCenterVersion"] = json!(version);
    }
    let before = c.status.as_ref().map(|s| &s.rest);
    super::write_status(r, c, before, MANAGER, set, extra).await
}
