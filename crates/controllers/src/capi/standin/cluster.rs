//! The Cluster controller: builds a topology Cluster from its ClusterClass (see
//! [`super::topology`]), owns the infrastructure cluster and the control plane, copies what
//! they report (endpoint, failure domains, initialization, replica counts), sums the workers,
//! and keeps the phase and the conditions Cluster API users wait on (`Available`,
//! `InfrastructureReady`, `ControlPlaneInitialized`, `ControlPlaneAvailable`, …). Deletion
//! goes workers, control plane, infrastructure, then the Cluster.

use super::merge_patch;
use super::objects::{adopt, contract_flag, owner_ref};
use super::topology::DEPLOYMENT_LABEL;
use super::{apply_status, paused, Core, Error, Reconciler};
use crate::capi::core::{
    ApiEndpoint, Cluster, ClusterClass, ClusterInitialization, ClusterStatus, FailureDomain,
    KubeadmControlPlane, Machine, MachineDeployment, MachineSet, ReplicaCounts,
};
use crate::capi::infra::types::{DevCluster, InMemoryCluster};
use crate::capi::CLUSTER_NAME_LABEL;
use infrasim_controller_runtime::conditions::{self, Condition};
use infrasim_controller_runtime::reconcile::{Cleanup, Next, Reconcile};
use infrasim_kube_api::values::At;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams};
use kube::runtime::reflector::ObjectRef;
use kube::ResourceExt;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::Arc;

pub const FINALIZER: &str = "cluster.cluster.x-k8s.io";
/// How long a successful probe of the workload cluster stands.
const PROBE_INTERVAL_SECONDS: i64 = 10;

pub(super) async fn run(core: Arc<Core>) {
    use infrasim_controller_runtime::triggers::every_change;
    let informers = &core.informers;
    let controller = super::controller_for::<Cluster>(&core);
    let store = controller.store();
    let classes = informers.of::<ClusterClass>();
    let controller = controller
        .owns_shared_stream(every_change(&informers.of::<DevCluster>()))
        .owns_shared_stream(every_change(&informers.of::<InMemoryCluster>()))
        .owns_shared_stream(every_change(&informers.of::<KubeadmControlPlane>()))
        .owns_shared_stream(every_change(&informers.of::<MachineDeployment>()))
        .watches_shared_stream(every_change(&classes), move |class| {
            let ns = class.namespace().unwrap_or_default();
            let name = class.name_any();
            store
                .state()
                .into_iter()
                .filter(|c| {
                    c.spec.topology.as_ref().is_some_and(|t| {
                        t.class_ref.name == name
                            && t.class_ref
                                .namespace
                                .as_deref()
                                .unwrap_or(c.namespace().as_deref().unwrap_or(""))
                                == ns
                    })
                })
                .map(|c| ObjectRef::from_obj(&*c))
                .collect::<Vec<_>>()
        })
        // Any other provider's cluster (a VSphereCluster) wakes its Cluster.
        .reconcile_on(core.external.clusters());
    let ctx = core.ctx.clone();
    infrasim_controller_runtime::reconcile::run(&ctx, controller, Arc::new(Reconciler::new(core)))
        .await;
}

/// The field manager this controller writes under: the stand-in's and its own name (see
/// [`infrasim_controller_runtime::writes`]).
const MANAGER: &str = "infrasim-capi-core/cluster";

/// Every Cluster holds [`FINALIZER`] from its first reconcile: its workers, control plane
/// and infrastructure go before it does.
impl Reconcile<Cluster> for Reconciler<Cluster> {
    type Error = Error;
    const FINALIZER: Option<&'static str> = Some(FINALIZER);

    async fn apply(&self, c: Arc<Cluster>) -> Result<Next, Error> {
        let _running = infrasim_controller_runtime::metrics::reconciled("Cluster");
        apply(&c, self).await
    }

    async fn cleanup(&self, c: Arc<Cluster>) -> Result<Cleanup, Error> {
        let _running = infrasim_controller_runtime::metrics::reconciled("Cluster");
        let api: Api<Cluster> = self.api(&c.namespace().unwrap_or_default());
        delete(&c, self, &api).await
    }
}

/// Topology, infrastructure, control plane and workers, then the Cluster's status.
async fn apply(c: &Cluster, r: &Reconciler<Cluster>) -> Result<Next, Error> {
    let ns = c.namespace().unwrap_or_default();
    let api: Api<Cluster> = r.api(&ns);
    let now = r.core.ctx.now();
    let mut status = c.status.clone().unwrap_or_default();
    let mut conds = status.conditions.take().unwrap_or_default();
    let why = paused(c, c.paused());
    if conditions::set_paused(&mut conds, why.clone(), now) {
        // The topology controller says it does nothing meanwhile (with the Cluster's why).
        if let (Some(why), Some(_)) = (why, &c.spec.topology) {
            conditions::set(
                &mut conds,
                Condition::new("TopologyReconciled", false, "Paused", why),
                now,
            );
        }
        conditions::sort(&mut conds);
        status.conditions = Some(conds);
        apply_status(&api, c, MANAGER, &status).await?;
        return Ok(Next::AwaitChange);
    }
    let mut cluster = c.clone();
    if cluster.spec.topology.is_some() {
        // What the topology creates hangs on the Cluster's references: read them as they
        // are now, not as the cache last saw them.
        cluster = api.get(&c.name_any()).await?;
        let topology = super::topology::reconcile(&mut cluster, r).await?;
        conditions::set(&mut conds, topology, now);
    }
    let infra = infrastructure(&cluster, r).await?;
    let cp = control_plane(&cluster, r).await?;
    copy_endpoint(&cluster, &api, &infra, &cp).await?;
    let workers = workers(&cluster, r).await?;
    let initialized = cp.initialized || status_flag(&cluster, |i| i.control_plane_initialized);
    let probe = probe(&cluster, r, initialized).await;
    let unreachable = probe.status == "False" && probe.reason == "ProbeFailed" && initialized;
    let status = compose(&cluster, r, conds, &infra, &cp, &workers, probe).await;
    apply_status(&api, &cluster, MANAGER, &status).await?;
    if unreachable {
        return Ok(Next::After(super::RECONNECT_AFTER));
    }
    Ok(Next::AwaitChange)
}

fn status_flag(c: &Cluster, f: fn(&ClusterInitialization) -> Option<bool>) -> bool {
    c.status
        .as_ref()
        .and_then(|s| s.initialization.as_ref())
        .and_then(f)
        .unwrap_or(false)
}

/// What the infrastructure cluster says.
struct InfraState {
    provisioned: bool,
    endpoint: Option<ApiEndpoint>,
    failure_domains: Option<Vec<FailureDomain>>,
    condition: Condition,
}

/// Owns the infrastructure cluster and reads it.
async fn infrastructure(c: &Cluster, r: &Reconciler<Cluster>) -> Result<InfraState, Error> {
    let Some(infra_ref) = &c.spec.infrastructure_ref else {
        let waiting = c.spec.topology.is_some();
        return Ok(InfraState {
            provisioned: !waiting,
            endpoint: None,
            failure_domains: None,
            condition: if waiting {
                Condition::new(
                    "InfrastructureReady",
                    false,
                    "ObjectDoesNotExist",
                    "Waiting for cluster topology to be reconciled",
                )
            } else {
                Condition::new("InfrastructureReady", true, "Ready", "")
            },
        });
    };
    let ns = c.namespace().unwrap_or_default();
    let api = r.core.resolver.api(&r.client(), &ns, infra_ref).await?;
    let Some(obj) = r.core.read(&ns, infra_ref).await? else {
        let was = status_flag(c, |i| i.infrastructure_provisioned);
        let (reason, message) = if was {
            (
                "ObjectDeleted",
                format!(
                    "{} has been deleted while the cluster still exists",
                    infra_ref.kind
                ),
            )
        } else {
            (
                "ObjectDoesNotExist",
                format!("{} does not exist", infra_ref.kind),
            )
        };
        return Ok(InfraState {
            provisioned: false,
            endpoint: None,
            failure_domains: None,
            condition: Condition::new("InfrastructureReady", false, reason, message),
        });
    };
    adopt_referenced(c, &api, &obj).await?;
    let provisioned = contract_flag(&obj, "provisioned", "ready");
    let endpoint: Option<ApiEndpoint> = obj
        .data
        .at("/spec/controlPlaneEndpoint")
        .and_then(|e| serde_json::from_value(e.clone()).ok());
    Ok(InfraState {
        provisioned,
        endpoint: endpoint.filter(ApiEndpoint::is_valid),
        failure_domains: failure_domains(&obj),
        condition: mirror(
            &obj,
            "InfrastructureReady",
            provisioned,
            &infra_ref.kind,
            "status.initialization.provisioned",
            ("Ready", "NotReady"),
        ),
    })
}

/// Adopts `obj`, the infrastructure cluster or control plane `c` references: owned by the
/// Cluster (as its controller when a topology made it) and labelled with its name.
async fn adopt_referenced(
    c: &Cluster,
    api: &Api<DynamicObject>,
    obj: &DynamicObject,
) -> Result<(), Error> {
    let labels = BTreeMap::from([(CLUSTER_NAME_LABEL.to_string(), c.name_any())]);
    adopt(
        api,
        obj,
        &owner_ref(c, c.spec.topology.is_some()),
        &labels,
        &[],
    )
    .await?;
    Ok(())
}

/// `status.failureDomains` of an infrastructure cluster: a list (v1beta2) or a map (v1beta1).
fn failure_domains(obj: &DynamicObject) -> Option<Vec<FailureDomain>> {
    let v = obj.data.at("/status/failureDomains")?;
    let mut list: Vec<FailureDomain> = match v {
        Value::Array(_) => serde_json::from_value(v.clone()).ok()?,
        Value::Object(m) => m
            .iter()
            .map(|(name, fd)| FailureDomain {
                name: name.clone(),
                control_plane: fd.get("controlPlane").and_then(Value::as_bool),
                attributes: fd
                    .get("attributes")
                    .and_then(|a| serde_json::from_value(a.clone()).ok())
                    .unwrap_or_default(),
            })
            .collect(),
        _ => return None,
    };
    for fd in &mut list {
        fd.control_plane.get_or_insert(false);
    }
    list.sort_by(|a, b| a.name.cmp(&b.name));
    Some(list)
}

/// A condition mirroring `source` (`Ready` or `Available`) of a referenced object: its
/// status, reason, message and transition time copied (a True one without a reason gets the
/// `good` reason), or, when it reports no such condition, its contract flag. The v1beta2
/// conditions are read where the object keeps them (`status.v1beta2.conditions` of a
/// v1beta1-era object), else `status.conditions`.
fn mirror(
    obj: &DynamicObject,
    ty: &str,
    flag: bool,
    kind: &str,
    path: &str,
    source: (&str, &str),
) -> Condition {
    let (good, bad) = source;
    let found = obj
        .data
        .at("/status/v1beta2/conditions")
        .or_else(|| obj.data.at("/status/conditions"))
        .and_then(|c| serde_json::from_value::<Vec<Condition>>(c.clone()).ok())
        .and_then(|c| conditions::find(&c, good).cloned());
    match found {
        Some(s) => Condition {
            type_: ty.to_string(),
            reason: match (s.reason.is_empty(), s.status.as_str()) {
                (false, _) => s.reason,
                (true, "True") => good.to_string(),
                (true, _) => bad.to_string(),
            },
            observed_generation: None,
            ..s
        },
        None if flag => Condition::new(ty, true, good, ""),
        None => Condition::new(ty, false, bad, format!("{kind} {path} is false")),
    }
}

/// What the control plane says.
struct ControlPlaneState {
    initialized: bool,
    /// Why it cannot be told whether the control plane is initialized (no object to ask).
    unknown: Option<String>,
    endpoint: Option<ApiEndpoint>,
    counts: Option<ReplicaCounts>,
    available: Condition,
}

async fn control_plane(c: &Cluster, r: &Reconciler<Cluster>) -> Result<ControlPlaneState, Error> {
    let missing = |reason: &str, message: String| ControlPlaneState {
        initialized: false,
        unknown: Some(message.clone()),
        endpoint: None,
        counts: None,
        available: Condition::new("ControlPlaneAvailable", false, reason, message),
    };
    let Some(cp_ref) = &c.spec.control_plane_ref else {
        let why = if c.spec.topology.is_some() {
            "Waiting for cluster topology to be reconciled"
        } else {
            "Waiting for a control plane"
        };
        return Ok(missing("ObjectDoesNotExist", why.into()));
    };
    let ns = c.namespace().unwrap_or_default();
    let api = r.core.resolver.api(&r.client(), &ns, cp_ref).await?;
    let Some(obj) = r.core.read(&ns, cp_ref).await? else {
        return Ok(missing(
            "ObjectDoesNotExist",
            format!("{} does not exist", cp_ref.kind),
        ));
    };
    adopt_referenced(c, &api, &obj).await?;
    let initialized = contract_flag(&obj, "controlPlaneInitialized", "initialized");
    let int = |p: &str| obj.data.at(p).and_then(Value::as_i64).map(|n| n as i32);
    Ok(ControlPlaneState {
        initialized,
        unknown: None,
        endpoint: obj
            .data
            .at("/spec/controlPlaneEndpoint")
            .and_then(|e| serde_json::from_value::<ApiEndpoint>(e.clone()).ok())
            .filter(ApiEndpoint::is_valid),
        counts: Some(ReplicaCounts {
            desired_replicas: int("/spec/replicas"),
            replicas: int("/status/replicas"),
            ready_replicas: int("/status/readyReplicas"),
            available_replicas: int("/status/availableReplicas"),
            up_to_date_replicas: int("/status/upToDateReplicas").or(int("/status/updatedReplicas")),
        }),
        available: mirror(
            &obj,
            "ControlPlaneAvailable",
            initialized,
            &cp_ref.kind,
            "status.initialization.controlPlaneInitialized",
            ("Available", "NotAvailable"),
        ),
    })
}

/// The endpoint, copied once: from the infrastructure cluster, or else the control plane.
async fn copy_endpoint(
    c: &Cluster,
    api: &Api<Cluster>,
    infra: &InfraState,
    cp: &ControlPlaneState,
) -> Result<(), Error> {
    if c.spec
        .control_plane_endpoint
        .as_ref()
        .is_some_and(ApiEndpoint::is_valid)
    {
        return Ok(());
    }
    let from = if infra.provisioned {
        infra.endpoint.clone()
    } else {
        None
    }
    .or_else(|| cp.endpoint.clone());
    if let Some(e) = from {
        let patch = json!({"spec": {"controlPlaneEndpoint": {"host": e.host, "port": e.port}}});
        merge_patch(api, &c.name_any(), &patch).await?;
    }
    Ok(())
}

/// The workers: MachineDeployments' counts, and whether they are available.
struct WorkersState {
    counts: ReplicaCounts,
    condition: Condition,
}

async fn workers(c: &Cluster, r: &Reconciler<Cluster>) -> Result<WorkersState, Error> {
    let ns = c.namespace().unwrap_or_default();
    let core = &r.core;
    let mut mds = core
        .in_cluster(&core.deployments, &ns, &c.name_any())
        .await?;
    if declared_missing(c, &mds) {
        // The topology made it a moment ago and the cache has not seen it yet: ask.
        let selector = format!("{CLUSTER_NAME_LABEL}={}", c.name_any());
        let listed = r
            .api::<MachineDeployment>(&ns)
            .list(&ListParams::default().labels(&selector))
            .await?;
        mds = listed.items.into_iter().map(Arc::new).collect();
    }
    let mut counts = ReplicaCounts::default();
    let add = |a: &mut Option<i32>, b: Option<i32>| *a = Some(a.unwrap_or(0) + b.unwrap_or(0));
    let mut each = Vec::new();
    for md in mds.iter().filter(|m| m.spec.cluster_name == c.name_any()) {
        let s = md.status.clone().unwrap_or_default();
        add(
            &mut counts.desired_replicas,
            Some(md.spec.replicas.unwrap_or(1)),
        );
        add(&mut counts.replicas, s.replicas);
        add(&mut counts.ready_replicas, s.ready_replicas);
        add(&mut counts.available_replicas, s.available_replicas);
        add(&mut counts.up_to_date_replicas, s.up_to_date_replicas);
        let available = s
            .conditions
            .as_deref()
            .and_then(|c| conditions::find(c, "Available").cloned())
            .unwrap_or_else(|| {
                Condition::unknown("Available", "NotYetReported", "Condition not yet reported")
            });
        each.push((md.name_any(), available));
    }
    let condition = if each.is_empty() {
        Condition::new("WorkersAvailable", true, "NoWorkers", "")
    } else {
        conditions::aggregate(
            "WorkersAvailable",
            "MachineDeployment",
            &each,
            ("NotAvailable", "AvailableUnknown", "Available"),
        )
    };
    Ok(WorkersState { counts, condition })
}

/// Whether a MachineDeployment the Cluster's topology declares is not among `mds`.
fn declared_missing(c: &Cluster, mds: &[Arc<MachineDeployment>]) -> bool {
    let declared = c
        .spec
        .topology
        .as_ref()
        .and_then(|t| t.workers.as_ref())
        .map(|w| w.machine_deployments.as_slice())
        .unwrap_or_default();
    declared.iter().any(|d| {
        !mds.iter()
            .any(|m| m.labels().get(DEPLOYMENT_LABEL) == Some(&d.name))
    })
}

/// Whether the workload cluster answers through its kubeconfig.
async fn probe(c: &Cluster, r: &Reconciler<Cluster>, initialized: bool) -> Condition {
    if !initialized {
        return Condition::new(
            "RemoteConnectionProbe",
            false,
            "ProbeFailed",
            "Remote connection not established yet",
        );
    }
    let uid = c.uid().unwrap_or_default();
    let now = r.core.ctx.now();
    let last = r
        .core
        .probed
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get(&uid)
        .copied();
    if last.is_some_and(|t| now - t < chrono::Duration::seconds(PROBE_INTERVAL_SECONDS)) {
        return Condition::new("RemoteConnectionProbe", true, "ProbeSucceeded", "");
    }
    match r.core.workloads.of(&r.client(), c).await {
        Ok(client) => match client.apiserver_version().await {
            Ok(_) => {
                r.core
                    .probed
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(uid, now);
                Condition::new("RemoteConnectionProbe", true, "ProbeSucceeded", "")
            }
            Err(e) => Condition::new("RemoteConnectionProbe", false, "ProbeFailed", e.to_string()),
        },
        Err(e) => Condition::new("RemoteConnectionProbe", false, "ProbeFailed", e.to_string()),
    }
}

async fn compose(
    c: &Cluster,
    r: &Reconciler<Cluster>,
    mut conds: Vec<Condition>,
    infra: &InfraState,
    cp: &ControlPlaneState,
    workers: &WorkersState,
    probe: Condition,
) -> ClusterStatus {
    let now = r.core.ctx.now();
    let previous = c.status.clone().unwrap_or_default();
    let infra_done = infra.provisioned || status_flag(c, |i| i.infrastructure_provisioned);
    let cp_done = cp.initialized || status_flag(c, |i| i.control_plane_initialized);
    let initialized = match (cp_done, &cp.unknown) {
        (true, _) => Condition::new("ControlPlaneInitialized", true, "Initialized", ""),
        (false, Some(why)) => {
            Condition::unknown("ControlPlaneInitialized", "ObjectDoesNotExist", why.clone())
        }
        (false, None) => Condition::new(
            "ControlPlaneInitialized",
            false,
            "NotInitialized",
            "Control plane not yet initialized",
        ),
    };
    for cond in [
        &infra.condition,
        &initialized,
        &cp.available,
        &workers.condition,
        &probe,
        &Condition::new("Deleting", false, "NotDeleting", ""),
    ] {
        set_copied(&mut conds, cond.clone(), now);
    }
    let gates = availability_gates(c, r).await;
    let summary = available(c, &conds, &gates);
    conditions::set(&mut conds, summary, now);
    conditions::sort(&mut conds);
    let deprecated = super::v1beta1::deprecated(
        &super::v1beta1::CLUSTER,
        &conds,
        Value::Null,
        previous.deprecated.as_ref(),
        now,
    );
    let phase = phase(c, r, infra_done, infra).await;
    ClusterStatus {
        phase: Some(phase.into()),
        initialization: Some(ClusterInitialization {
            infrastructure_provisioned: Some(infra_done),
            control_plane_initialized: Some(cp_done),
        }),
        control_plane: cp.counts.clone(),
        workers: Some(workers.counts.clone()),
        failure_domains: infra.failure_domains.clone().or(previous.failure_domains),
        conditions: Some(conds),
        observed_generation: c.metadata.generation,
        deprecated: Some(deprecated),
    }
}

/// Sets `next`, keeping a transition time it brings (one mirrored from its source).
fn set_copied(conds: &mut Vec<Condition>, next: Condition, now: chrono::DateTime<chrono::Utc>) {
    let since = next.last_transition_time.clone();
    let ty = next.type_.clone();
    conditions::set(conds, next, now);
    if let Some(c) = conds.iter_mut().find(|c| c.type_ == ty) {
        if !since.is_empty() {
            c.last_transition_time = since;
        }
    }
}

/// The phase, with the Event Cluster API emits when it changes.
async fn phase(
    c: &Cluster,
    r: &Reconciler<Cluster>,
    infra_done: bool,
    infra: &InfraState,
) -> &'static str {
    let endpoint_set = c
        .spec
        .control_plane_endpoint
        .as_ref()
        .is_some_and(ApiEndpoint::is_valid)
        || infra.endpoint.is_some();
    let phase = if infra_done && endpoint_set {
        "Provisioned"
    } else if c.spec.infrastructure_ref.is_some() || c.spec.control_plane_ref.is_some() {
        "Provisioning"
    } else {
        "Pending"
    };
    let previous = c.status.as_ref().and_then(|s| s.phase.as_deref());
    if previous != Some(phase) {
        r.core
            .ctx
            .event(
                c,
                false,
                phase,
                format!("Cluster {} is {phase}", c.name_any()),
            )
            .await;
    }
    phase
}

/// The condition types of the Cluster's availability gates (the ClusterClass's when the
/// Cluster names none), each with whether its polarity is negative.
async fn availability_gates(c: &Cluster, r: &Reconciler<Cluster>) -> Vec<(String, bool)> {
    let mut gates = c.spec.availability_gates.clone();
    if gates.is_none() {
        if let Some(t) = &c.spec.topology {
            let ns = t
                .class_ref
                .namespace
                .clone()
                .unwrap_or_else(|| c.namespace().unwrap_or_default());
            let class = r
                .core
                .informers
                .get::<ClusterClass>(&ns, &t.class_ref.name)
                .await
                .ok()
                .flatten();
            gates = class
                .and_then(|k| k.spec.rest.get("availabilityGates").cloned())
                .and_then(|v| serde_json::from_value(v).ok());
        }
    }
    gates
        .unwrap_or_default()
        .iter()
        .filter_map(|g| {
            let ty = g.get("conditionType")?.as_str()?.to_string();
            Some((
                ty,
                g.get("polarity").and_then(Value::as_str) == Some("Negative"),
            ))
        })
        .collect()
}

/// The Cluster's `Available`, summarizing as Cluster API does: `Deleting` (an issue when
/// True), `RemoteConnectionProbe`, `InfrastructureReady`, `ControlPlaneAvailable`,
/// `WorkersAvailable`, `TopologyReconciled` (a topology Cluster's; False only counts when the
/// reconcile failed), then the availability gates. A missing one is Unknown.
fn available(c: &Cluster, conds: &[Condition], gates: &[(String, bool)]) -> Condition {
    use conditions::{weight, Weight};
    let deleting = c.metadata.deletion_timestamp.is_some();
    let mut wanted: Vec<(String, bool)> = [
        "Deleting",
        "RemoteConnectionProbe",
        "InfrastructureReady",
        "ControlPlaneAvailable",
        "WorkersAvailable",
    ]
    .iter()
    .map(|t| (t.to_string(), *t == "Deleting"))
    .collect();
    let topology = c.spec.topology.is_some();
    if topology || conditions::find(conds, "TopologyReconciled").is_some() {
        wanted.push(("TopologyReconciled".into(), false));
    }
    wanted.extend(gates.iter().cloned());
    let inputs: Vec<(Condition, Weight)> = wanted
        .iter()
        .map(|(ty, negative)| {
            let c = conditions::find(conds, ty).cloned().unwrap_or_else(|| {
                Condition::unknown(ty, "NotYetReported", "Condition not yet reported")
            });
            let mut w = weight(&c, *negative);
            let counted = ["ReconcileFailed", "ClusterClassNotReconciled"];
            if ty == "TopologyReconciled"
                && c.status == "False"
                && !counted.contains(&c.reason.as_str())
            {
                w = Weight::Info;
            }
            let gone = ["ObjectDeleted", "ObjectDoesNotExist"].contains(&c.reason.as_str());
            if deleting
                && gone
                && ["InfrastructureReady", "ControlPlaneAvailable"].contains(&ty.as_str())
            {
                w = Weight::Info;
            }
            (c, w)
        })
        .collect();
    let refs: Vec<(&Condition, Weight)> = inputs.iter().map(|(c, w)| (c, *w)).collect();
    conditions::weighed_summary(
        "Available",
        &refs,
        ("NotAvailable", "AvailableUnknown", "Available"),
    )
}

/// Deletion: workers first, then the control plane, then the infrastructure cluster (the
/// runner then removes the finalizer).
async fn delete(
    c: &Cluster,
    r: &Reconciler<Cluster>,
    api: &Api<Cluster>,
) -> Result<Cleanup, Error> {
    let ns = c.namespace().unwrap_or_default();
    let selector = ListParams::default().labels(&format!("{CLUSTER_NAME_LABEL}={}", c.name_any()));
    let mds = r.api::<MachineDeployment>(&ns).list(&selector).await?.items;
    for md in mds
        .iter()
        .filter(|m| m.metadata.deletion_timestamp.is_none())
    {
        r.api::<MachineDeployment>(&ns)
            .delete(&md.name_any(), &DeleteParams::default())
            .await?;
    }
    let sets = r.api::<MachineSet>(&ns).list(&selector).await?.items;
    for s in sets.iter().filter(|s| {
        s.metadata.deletion_timestamp.is_none()
            && !s
                .owner_references()
                .iter()
                .any(|o| o.kind == "MachineDeployment")
    }) {
        r.api::<MachineSet>(&ns)
            .delete(&s.name_any(), &DeleteParams::default())
            .await?;
    }
    let machines = r.api::<Machine>(&ns).list(&selector).await?.items;
    let workers: Vec<&Machine> = machines.iter().filter(|m| !m.is_control_plane()).collect();
    for m in workers
        .iter()
        .filter(|m| m.metadata.deletion_timestamp.is_none() && m.owner_references().is_empty())
    {
        r.api::<Machine>(&ns)
            .delete(&m.name_any(), &DeleteParams::default())
            .await?;
    }
    if !mds.is_empty() || !workers.is_empty() {
        let why = format!(
            "Waiting for {} MachineDeployments and {} worker Machines to be deleted",
            mds.len(),
            workers.len()
        );
        return deleting(c, r, api, "WaitingForWorkersDeletion", why).await;
    }
    for (reference, reason) in [
        (
            c.spec.control_plane_ref.clone(),
            "WaitingForControlPlaneDeletion",
        ),
        (
            c.spec.infrastructure_ref.clone(),
            "WaitingForInfrastructureDeletion",
        ),
    ] {
        let Some(reference) = reference else { continue };
        let Ok(obj_api) = r.core.resolver.api(&r.client(), &ns, &reference).await else {
            continue;
        };
        if let Some(obj) = obj_api.get_opt(&reference.name).await? {
            if obj.metadata.deletion_timestamp.is_none() {
                obj_api
                    .delete(&reference.name, &DeleteParams::default())
                    .await?;
            }
            return deleting(
                c,
                r,
                api,
                reason,
                format!("Waiting for {} to be deleted", reference.kind),
            )
            .await;
        }
    }
    r.core.workloads.forget(&ns, &c.name_any());
    r.core.certificates.forget(&ns, &c.name_any());
    r.core
        .probed
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .remove(&c.uid().unwrap_or_default());
    r.core
        .ctx
        .event(
            c,
            false,
            "Deleted",
            format!("Cluster {} has been deleted", c.name_any()),
        )
        .await;
    Ok(Cleanup::Done)
}

/// Reports a deletion step in the Cluster's status; the cleanup waits for what it deletes.
async fn deleting(
    c: &Cluster,
    r: &Reconciler<Cluster>,
    api: &Api<Cluster>,
    reason: &str,
    message: String,
) -> Result<Cleanup, Error> {
    let now = r.core.ctx.now();
    let mut status = c.status.clone().unwrap_or_default();
    let mut conds = status.conditions.take().unwrap_or_default();
    conditions::set(
        &mut conds,
        Condition::new("Deleting", true, reason, message),
        now,
    );
    let gates = availability_gates(c, r).await;
    let summary = available(c, &conds, &gates);
    conditions::set(&mut conds, summary, now);
    conditions::sort(&mut conds);
    status.conditions = Some(conds);
    status.phase = Some("Deleting".into());
    apply_status(api, c, MANAGER, &status).await?;
    Ok(Cleanup::Pending(Next::AwaitChange))
}
