//! The Machine controller: owns the Machine's bootstrap config and infrastructure machine,
//! copies what they report (bootstrap data, provider ID, addresses, failure domain), finds the
//! Machine's Node in the workload cluster by provider ID, and on deletion drains the Node,
//! waits for deletion hooks, deletes the infrastructure machine and the bootstrap config, then
//! the Node.

use super::certificate_expiry;
use super::merge_patch;
use super::objects::{adopt, contract_flag, owner_ref};
use super::{apply_status, paused, Core, Error, Reconciler};
use crate::capi::core::{
    Cluster, Machine, MachineAddress, MachineInitialization, MachineStatus, NodeRef,
};
use crate::capi::core::{KubeadmControlPlane, MachineDeployment};
use crate::capi::infra::types::{DevMachine, InMemoryMachine};
use crate::capi::standin::objects::RefError;
use crate::capi::triggers::{cluster_gates, control_plane_rollout, deployment_rollout};
use crate::capi::{CONTROL_PLANE_NAME_LABEL, DEPLOYMENT_NAME_LABEL, MACHINE_FINALIZER};
use infrasim_controller_runtime::conditions::{self, Condition};
use infrasim_controller_runtime::index::{label_key, label_keys, Index};
use infrasim_controller_runtime::reconcile::{Cleanup, Next, Reconcile};
use infrasim_controller_runtime::triggers::filtered;
use infrasim_kube_api::values::At;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, DeleteParams, DynamicObject, EvictParams, ListParams, Patch, PatchParams};
use kube::runtime::reflector::ObjectRef;
use kube::ResourceExt;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::Arc;

pub const FINALIZER: &str = MACHINE_FINALIZER;
const PRE_DRAIN_HOOK: &str = "pre-drain.delete.hook.machine.cluster.x-k8s.io";
const PRE_TERMINATE_HOOK: &str = "pre-terminate.delete.hook.machine.cluster.x-k8s.io";

pub(super) async fn run(core: Arc<Core>) {
    let informers = core.informers.clone();
    let index = Index::new(machine_keys);
    let controller =
        infrasim_controller_runtime::triggers::controller(&informers.of(), Some(&index))
            .owns_shared_stream(infrasim_controller_runtime::triggers::every_change(
                &informers.of::<DevMachine>(),
            ))
            .owns_shared_stream(infrasim_controller_runtime::triggers::every_change(
                &informers.of::<InMemoryMachine>(),
            ))
            .owns_shared_stream(infrasim_controller_runtime::triggers::every_change(
                &informers.of::<crate::capi::core::KubeadmConfig>(),
            ))
            .watches_shared_stream(filtered(&informers.of::<Cluster>(), cluster_gates), {
                let index = index.clone();
                move |c| {
                    let ns = c.namespace().unwrap_or_default();
                    index.lookup(&ns, &cluster_key(&c.name_any()))
                }
            })
            // A control plane or deployment rolling out makes its Machines out of date.
            .watches_shared_stream(
                filtered(
                    &informers.of::<KubeadmControlPlane>(),
                    control_plane_rollout,
                ),
                {
                    let index = index.clone();
                    move |k| {
                        let ns = k.namespace().unwrap_or_default();
                        let key = label_key(CONTROL_PLANE_NAME_LABEL, &k.name_any());
                        index.lookup(&ns, &key)
                    }
                },
            )
            .watches_shared_stream(
                filtered(&informers.of::<MachineDeployment>(), deployment_rollout),
                {
                    let index = index.clone();
                    move |md| {
                        let ns = md.namespace().unwrap_or_default();
                        let key = label_key(DEPLOYMENT_NAME_LABEL, &md.name_any());
                        index.lookup(&ns, &key)
                    }
                },
            )
            // Its health check's verdict counts towards its Ready.
            .watches_shared_stream(
                filtered(
                    &informers.of::<Machine>(),
                    crate::capi::triggers::health_verdict,
                ),
                |m| Some(ObjectRef::from_obj(&*m)),
            )
            // The conditions its readiness gates name count towards its Ready.
            .watches_shared_stream(
                filtered(
                    &informers.of::<Machine>(),
                    crate::capi::triggers::readiness_gates,
                ),
                |m| Some(ObjectRef::from_obj(&*m)),
            )
            // Its Node's conditions make its NodeHealthy.
            .reconcile_on(node_changes(&core, index))
            // Any other provider's machine (a VSphereMachine) wakes its Machine.
            .reconcile_on(core.external.machines());
    let ctx = core.ctx.clone();
    infrasim_controller_runtime::reconcile::run(&ctx, controller, Arc::new(Reconciler::new(core)))
        .await;
}

/// The Machines whose Node changed, from the stand-in's cluster cache.
fn node_changes(
    core: &Core,
    index: Index<Machine>,
) -> impl futures::Stream<Item = ObjectRef<Machine>> + Send + 'static {
    use futures::StreamExt;
    futures::stream::unfold(core.nodes.subscribe(), |mut rx| async move {
        rx.recv().await.map(|c| (c, rx))
    })
    .flat_map(move |c| futures::stream::iter(woken_by(&index, &c)))
}

/// The Machines a Node's change concerns: the one whose nodeRef names it, and the one whose
/// provider ID it carries (a Machine still waiting for its Node has no nodeRef); every
/// Machine of the cluster when changes may have been missed.
fn woken_by(index: &Index<Machine>, c: &super::nodes::NodeChange) -> Vec<ObjectRef<Machine>> {
    let mut woken = match c.node.is_empty() {
        true => index.lookup(&c.namespace, &cluster_key(&c.cluster)),
        false => index.lookup(&c.namespace, &node_key(&c.cluster, &c.node)),
    };
    if !c.provider_id.is_empty() {
        for m in index.lookup(&c.namespace, &provider_key(&c.cluster, &c.provider_id)) {
            if !woken.contains(&m) {
                woken.push(m);
            }
        }
    }
    woken
}

/// The index key of the Machine whose infrastructure reports `provider_id` in `cluster`.
fn provider_key(cluster: &str, provider_id: &str) -> String {
    format!("providerID={cluster}/{provider_id}")
}

/// The index key of the Machine whose Node is `node` in cluster `cluster`.
fn node_key(cluster: &str, node: &str) -> String {
    format!("node={cluster}/{node}")
}

/// The index key of the Machines of a Cluster (`spec.clusterName`, which every Machine has,
/// rather than the label, which a hand-written Machine may lack).
fn cluster_key(cluster: &str) -> String {
    format!("spec.clusterName={cluster}")
}

/// What a Machine is found by when a related object changes: its Cluster, its control plane,
/// its MachineDeployment.
fn machine_keys(m: &Machine) -> Vec<String> {
    let mut keys = label_keys(m, &[CONTROL_PLANE_NAME_LABEL, DEPLOYMENT_NAME_LABEL]);
    keys.push(cluster_key(&m.spec.cluster_name));
    if let Some(node) = m.status.as_ref().and_then(|s| s.node_ref.as_ref()) {
        keys.push(node_key(&m.spec.cluster_name, &node.name));
    }
    if let Some(id) = m.spec.provider_id.as_deref().filter(|id| !id.is_empty()) {
        keys.push(provider_key(&m.spec.cluster_name, id));
    }
    keys
}

/// The field manager this controller writes under: the stand-in's and its own name (see
/// [`infrasim_controller_runtime::writes`]).
const MANAGER: &str = "infrasim-capi-core/machine";

/// Every Machine holds [`FINALIZER`] from its first reconcile: its Node is drained and its
/// infrastructure and bootstrap config go before it does.
impl Reconcile<Machine> for Reconciler<Machine> {
    type Error = Error;
    const FINALIZER: Option<&'static str> = Some(FINALIZER);

    async fn apply(&self, m: Arc<Machine>) -> Result<Next, Error> {
        let _running = infrasim_controller_runtime::metrics::reconciled("Machine");
        apply(&m, self).await
    }

    async fn cleanup(&self, m: Arc<Machine>) -> Result<Cleanup, Error> {
        let _running = infrasim_controller_runtime::metrics::reconciled("Machine");
        let ns = m.namespace().unwrap_or_default();
        let api: Api<Machine> = self.api(&ns);
        let cluster = self
            .core
            .informers
            .get::<Cluster>(&ns, &m.spec.cluster_name)
            .await?;
        delete(&m, self, &api, cluster.as_deref()).await
    }
}

/// Bootstrap config, infrastructure machine and Node, then the Machine's status.
async fn apply(m: &Machine, r: &Reconciler<Machine>) -> Result<Next, Error> {
    let ns = m.namespace().unwrap_or_default();
    let api: Api<Machine> = r.api(&ns);
    let Some(cluster) = r
        .core
        .informers
        .get::<Cluster>(&ns, &m.spec.cluster_name)
        .await?
    else {
        return Ok(Next::AwaitChange);
    };
    let now = r.core.ctx.now();
    let mut conds = super::remediation::machines_own(
        m.status
            .as_ref()
            .and_then(|s| s.conditions.clone())
            .unwrap_or_default(),
    );
    if let Some(why) = paused(m, cluster.paused()) {
        conditions::set(
            &mut conds,
            Condition::new("Paused", true, "Paused", why),
            now,
        );
        let status = MachineStatus {
            conditions: Some(conds),
            ..m.status.clone().unwrap_or_default()
        };
        apply_status(&api, m, MANAGER, &status).await?;
        return Ok(Next::AwaitChange);
    }
    if m.labels().get(crate::capi::CLUSTER_NAME_LABEL) != Some(&m.spec.cluster_name) {
        let patch =
            json!({"metadata": {"labels": {crate::capi::CLUSTER_NAME_LABEL: m.spec.cluster_name}}});
        merge_patch(&api, &m.name_any(), &patch).await?;
    }
    let bootstrap = bootstrap(m, r, &ns).await?;
    let infra = infrastructure(m, r, &ns).await?;
    // The status observes the spec as this reconcile leaves it, copied fields included:
    // observing the generation before them would take one more write to catch up.
    let generation = spec_updates(m, &api, &bootstrap, &infra)
        .await?
        .or(m.metadata.generation);
    let node = if infra.provider_id.is_some() && cluster.control_plane_initialized() {
        node(m, r, &cluster, infra.provider_id.as_deref().unwrap_or("")).await
    } else {
        NodeState::waiting(if infra.provider_id.is_none() {
            "Waiting for the infrastructure machine to report spec.providerID".to_string()
        } else {
            "Waiting for Cluster control plane to be initialized".to_string()
        })
    };
    if node.unreachable
        && m.status
            .as_ref()
            .and_then(|s| s.node_ref.as_ref())
            .is_none()
    {
        // The cached Machine may be older than our last write, which may have named its
        // Node: a status built on it would drop the nodeRef (server-side apply removes what
        // the manager no longer sets). Ask again later and write nothing meanwhile.
        return Ok(Next::After(super::RECONNECT_AFTER));
    }
    let status = status(m, r, conds, &bootstrap, &infra, &node, generation).await;
    apply_status(&api, m, MANAGER, &status).await?;
    if node.unreachable {
        return Ok(Next::After(super::RECONNECT_AFTER));
    }
    // Its UpToDate changes by time alone when its certificates near their expiry.
    let due = super::up_to_date::due_next(m, r).await;
    Ok(due.map_or(Next::AwaitChange, Next::At))
}

/// What the bootstrap config says.
struct BootstrapState {
    data_secret_name: Option<String>,
    condition: Condition,
    /// When the machine's certificates expire, as the control plane wrote on the config (or
    /// the Machine's own annotation says).
    certificates_expiry: Option<String>,
}

async fn bootstrap(
    m: &Machine,
    r: &Reconciler<Machine>,
    ns: &str,
) -> Result<BootstrapState, Error> {
    if let Some(name) = &m.spec.bootstrap.data_secret_name {
        if m.spec.bootstrap.config_ref.is_none() {
            return Ok(BootstrapState {
                data_secret_name: Some(name.clone()),
                condition: Condition::new("BootstrapConfigReady", true, "DataSecretProvided", ""),
                certificates_expiry: certificate_expiry::of_machine(m, None),
            });
        }
    }
    let Some(config_ref) = &m.spec.bootstrap.config_ref else {
        return Ok(BootstrapState {
            data_secret_name: None,
            condition: Condition::new(
                "BootstrapConfigReady",
                false,
                "NotReady",
                "no bootstrap config or data secret",
            ),
            certificates_expiry: certificate_expiry::of_machine(m, None),
        });
    };
    let api = r.core.resolver.api(&r.client(), ns, config_ref).await?;
    let Some(config) = r.core.read(ns, config_ref).await? else {
        return Ok(BootstrapState {
            data_secret_name: m.spec.bootstrap.data_secret_name.clone(),
            condition: Condition::new(
                "BootstrapConfigReady",
                false,
                "ObjectDoesNotExist",
                format!("{} does not exist", config_ref.kind),
            ),
            certificates_expiry: certificate_expiry::of_machine(m, None),
        });
    };
    let labels = BTreeMap::from([(
        crate::capi::CLUSTER_NAME_LABEL.to_string(),
        m.spec.cluster_name.clone(),
    )]);
    adopt(
        &api,
        &config,
        &owner_ref(m, true),
        &labels,
        &["MachineSet", "KubeadmControlPlane"],
    )
    .await?;
    let created = contract_flag(&config, "dataSecretCreated", "ready");
    let data = created
        .then(|| {
            config
                .data
                .at("/status/dataSecretName")
                .and_then(Value::as_str)
                .map(str::to_string)
        })
        .flatten()
        .or_else(|| m.spec.bootstrap.data_secret_name.clone());
    Ok(BootstrapState {
        condition: mirror(
            &config,
            "BootstrapConfigReady",
            created,
            &config_ref.kind,
            "status.initialization.dataSecretCreated",
        ),
        data_secret_name: data,
        certificates_expiry: certificate_expiry::of_machine(m, Some(config.annotations())),
    })
}

/// A condition mirroring the referenced object's `Ready`, or its contract flag.
fn mirror(obj: &DynamicObject, ty: &str, flag: bool, kind: &str, path: &str) -> Condition {
    let ready = obj
        .data
        .at("/status/conditions")
        .and_then(|c| serde_json::from_value::<Vec<Condition>>(c.clone()).ok())
        .and_then(|c| conditions::find(&c, "Ready").cloned());
    match ready {
        Some(c) => Condition {
            type_: ty.into(),
            reason: if c.is_true() {
                "Ready".into()
            } else {
                "NotReady".into()
            },
            message: c.message.clone(),
            ..Condition::new(ty, c.is_true(), "", "")
        },
        None if flag => Condition::new(ty, true, "Ready", ""),
        None => Condition::new(ty, false, "NotReady", format!("{kind} {path} is false")),
    }
}

/// What the infrastructure machine says.
struct InfraState {
    provisioned: bool,
    provider_id: Option<String>,
    addresses: Option<Vec<MachineAddress>>,
    failure_domain: Option<String>,
    condition: Condition,
}

async fn infrastructure(
    m: &Machine,
    r: &Reconciler<Machine>,
    ns: &str,
) -> Result<InfraState, Error> {
    let infra_ref = &m.spec.infrastructure_ref;
    let api = r.core.resolver.api(&r.client(), ns, infra_ref).await?;
    let Some(infra) = r.core.read(ns, infra_ref).await? else {
        return Ok(InfraState {
            provisioned: false,
            provider_id: m.spec.provider_id.clone(),
            addresses: None,
            failure_domain: None,
            condition: Condition::new(
                "InfrastructureReady",
                false,
                "ObjectDoesNotExist",
                format!("{} does not exist", infra_ref.kind),
            ),
        });
    };
    let labels = BTreeMap::from([(
        crate::capi::CLUSTER_NAME_LABEL.to_string(),
        m.spec.cluster_name.clone(),
    )]);
    adopt(
        &api,
        &infra,
        &owner_ref(m, true),
        &labels,
        &["MachineSet", "KubeadmControlPlane"],
    )
    .await?;
    let provider_id = infra
        .data
        .at("/spec/providerID")
        .and_then(Value::as_str)
        .map(str::to_string);
    // The core waits for the provider ID before it counts the machine as provisioned.
    let provisioned = contract_flag(&infra, "provisioned", "ready") && provider_id.is_some();
    Ok(InfraState {
        provisioned,
        addresses: infra
            .data
            .at("/status/addresses")
            .and_then(|a| serde_json::from_value(a.clone()).ok()),
        failure_domain: infra
            .data
            .at("/status/failureDomain")
            .or_else(|| infra.data.at("/spec/failureDomain"))
            .and_then(Value::as_str)
            .map(str::to_string),
        condition: mirror(
            &infra,
            "InfrastructureReady",
            provisioned,
            &infra_ref.kind,
            "status.initialization.provisioned",
        ),
        provider_id: provider_id.filter(|_| provisioned),
    })
}

/// Copies the bootstrap data secret name and the provider ID into the Machine's spec; the
/// Machine's generation after, if it wrote.
async fn spec_updates(
    m: &Machine,
    api: &Api<Machine>,
    b: &BootstrapState,
    i: &InfraState,
) -> Result<Option<i64>, Error> {
    let mut spec = serde_json::Map::new();
    if b.data_secret_name.is_some() && m.spec.bootstrap.data_secret_name != b.data_secret_name {
        spec.insert(
            "bootstrap".into(),
            json!({"dataSecretName": b.data_secret_name}),
        );
    }
    if i.provider_id.is_some() && m.spec.provider_id != i.provider_id {
        spec.insert("providerID".into(), json!(i.provider_id));
    }
    if spec.is_empty() {
        return Ok(None);
    }
    let patched = merge_patch(api, &m.name_any(), &json!({"spec": spec})).await?;
    Ok(patched.metadata.generation)
}

/// What the workload cluster says of the Machine's Node.
struct NodeState {
    node_ref: Option<NodeRef>,
    node_info: Option<Value>,
    ready: Condition,
    healthy: Condition,
    /// The workload cluster could not be asked: look again later, since no event will say
    /// when it answers again.
    unreachable: bool,
}

impl NodeState {
    fn waiting(why: String) -> Self {
        NodeState {
            node_ref: None,
            node_info: None,
            ready: Condition::unknown("NodeReady", "InspectionFailed", why.clone()),
            healthy: Condition::unknown("NodeHealthy", "InspectionFailed", why),
            unreachable: false,
        }
    }

    fn unreachable(why: String) -> Self {
        let mut s = NodeState::waiting(why);
        s.ready.reason = "ConnectionDown".into();
        s.healthy.reason = "ConnectionDown".into();
        s.unreachable = true;
        s
    }
}

async fn node(
    m: &Machine,
    r: &Reconciler<Machine>,
    cluster: &Cluster,
    provider_id: &str,
) -> NodeState {
    let ns = cluster.namespace().unwrap_or_default();
    // Read as upstream's Machine controller reads Nodes, from the cluster cache (see
    // `super::nodes`), which for a cluster this process hosts is its store.
    let nodes = match r
        .core
        .nodes
        .reader(&r.core.workloads, &r.client(), &ns, &cluster.name_any())
        .await
    {
        Ok(reader) => reader,
        Err(e) => return NodeState::unreachable(e.to_string()),
    };
    // Followed before the read, not once a Node is found: a Node that joins after this read
    // wakes the Machine through the cache. Following only after a Node was found left a
    // worker whose Node joined between its read and its cluster's first Node waiting for
    // good (`bench capv` stalled a cluster or more in most runs).
    if !nodes.is_remote() {
        r.core.nodes.follow(&ns, &cluster.name_any());
    }
    // The node named after the machine is the usual answer; any node may carry the ID.
    let by_name = m
        .status
        .as_ref()
        .and_then(|s| s.node_ref.as_ref())
        .map(|n| n.name.clone())
        .or_else(|| provider_id.rsplit('/').next().map(str::to_string));
    let mut found = None;
    if let Some(name) = by_name {
        match nodes.get(&name).await {
            Ok(Some(n)) => {
                if n.spec.as_ref().and_then(|s| s.provider_id.as_deref()) == Some(provider_id) {
                    found = Some(n);
                }
            }
            Ok(None) => {}
            Err(e) => return NodeState::unreachable(e.to_string()),
        }
    }
    if found.is_none() {
        match nodes.list().await {
            Ok(list) => {
                found = list.into_iter().find(|n| {
                    n.spec.as_ref().and_then(|s| s.provider_id.as_deref()) == Some(provider_id)
                });
            }
            Err(e) => return NodeState::unreachable(e.to_string()),
        }
    }
    let Some(node) = found else {
        return NodeState::waiting(format!(
            "Waiting for a Node with spec.providerID {provider_id} to exist"
        ));
    };
    node_state(&node)
}

fn node_state(node: &Node) -> NodeState {
    let status = node.status.clone().unwrap_or_default();
    let conds = status.conditions.clone().unwrap_or_default();
    let get = |t: &str| conds.iter().find(|c| c.type_ == t);
    let ready = match get("Ready") {
        Some(c) if c.status == "True" => Condition::new("NodeReady", true, "NodeReady", ""),
        Some(c) => Condition {
            status: c.status.clone(),
            ..Condition::new(
                "NodeReady",
                false,
                "NodeNotReady",
                format!("* Node.Ready: {}", c.message.clone().unwrap_or_default()),
            )
        },
        None => Condition::unknown(
            "NodeReady",
            "NodeReadyUnknown",
            "* Node.Ready: Condition not yet reported",
        ),
    };
    let pressure: Vec<String> = ["MemoryPressure", "DiskPressure", "PIDPressure"]
        .into_iter()
        .filter(|t| get(t).is_some_and(|c| c.status == "True"))
        .map(|t| format!("* Node.{t}: True"))
        .collect();
    let healthy = if ready.is_true() && pressure.is_empty() {
        Condition::new("NodeHealthy", true, "NodeHealthy", "")
    } else {
        let mut why = pressure;
        if !ready.is_true() {
            why.insert(0, ready.message.clone());
        }
        Condition::new("NodeHealthy", false, "NodeNotHealthy", why.join("\n"))
    };
    NodeState {
        node_ref: Some(NodeRef {
            name: node.name_any(),
        }),
        node_info: status.node_info.and_then(|i| serde_json::to_value(i).ok()),
        ready,
        healthy,
        unreachable: false,
    }
}

/// The conditions `spec.readinessGates` names, as the Ready summary counts them (upstream's
/// Machine controller adds them to its summary): one nobody has reported yet is Unknown
/// (`NotYetReported`), and under a gate of `Negative` polarity its condition's True is the
/// issue.
fn readiness_gates(m: &Machine) -> Vec<Condition> {
    let current = m
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default();
    let negative = |ty: &str| {
        m.spec.readiness_gates.iter().flatten().any(|g| {
            g.get("conditionType").and_then(Value::as_str) == Some(ty)
                && g.get("polarity").and_then(Value::as_str) == Some("Negative")
        })
    };
    crate::capi::triggers::gate_types(m)
        .into_iter()
        .map(|ty| match conditions::find(&current, &ty) {
            None => Condition::unknown(&ty, "NotYetReported", "Condition not yet reported"),
            Some(c) if negative(&ty) => {
                let mut flipped = c.clone();
                flipped.status = match c.status.as_str() {
                    "True" => "False".into(),
                    "False" => "True".into(),
                    other => other.into(),
                };
                flipped
            }
            Some(c) => c.clone(),
        })
        .collect()
}

async fn status(
    m: &Machine,
    r: &Reconciler<Machine>,
    mut conds: Vec<Condition>,
    b: &BootstrapState,
    i: &InfraState,
    n: &NodeState,
    observed_generation: Option<i64>,
) -> MachineStatus {
    let now = r.core.ctx.now();
    for c in [&b.condition, &i.condition, &n.ready, &n.healthy] {
        conditions::set(&mut conds, c.clone(), now);
    }
    conditions::set(
        &mut conds,
        Condition::new("Deleting", false, "NotDeleting", ""),
        now,
    );
    conditions::set_paused(&mut conds, None, now);
    // The health check's verdict counts towards Ready once there is one, as upstream's
    // Machine summarizes it.
    let health_check = m
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .and_then(|c| conditions::find(c, "HealthCheckSucceeded"))
        .cloned();
    let gates = readiness_gates(m);
    let inputs: Vec<&Condition> = [&b.condition, &i.condition, &n.healthy]
        .into_iter()
        .chain(health_check.as_ref())
        .chain(gates.iter())
        .collect();
    let ready = conditions::summary("Ready", &inputs, ("NotReady", "ReadyUnknown", "Ready"));
    let available = if ready.is_true() {
        Condition::new("Available", true, "Available", "")
    } else {
        Condition::new(
            "Available",
            false,
            "NotReady",
            "* Ready: the Machine is not ready",
        )
    };
    conditions::set(&mut conds, ready, now);
    conditions::set(&mut conds, available, now);
    if let Some(up) = super::up_to_date::of_machine(m, r).await {
        conditions::set(&mut conds, up, now);
    }
    conditions::sort(&mut conds);
    let previous = m.status.clone().unwrap_or_default();
    let deprecated = super::v1beta1::deprecated(
        &super::v1beta1::MACHINE,
        &conds,
        serde_json::Value::Null,
        previous.deprecated.as_ref(),
        now,
    );
    // A Node once found stays the Machine's Node while its cluster cannot be asked.
    let node_ref = n.node_ref.clone().or(previous.node_ref.clone());
    let phase = if node_ref.is_some() && i.provisioned {
        "Running"
    } else if m.spec.provider_id.is_some() || i.provider_id.is_some() {
        "Provisioned"
    } else if b.data_secret_name.is_some() {
        "Provisioning"
    } else {
        "Pending"
    };
    let last_updated = if previous.phase.as_deref() == Some(phase) {
        previous.last_updated.clone()
    } else {
        Some(conditions::timestamp(now))
    };
    MachineStatus {
        phase: Some(phase.into()),
        node_ref,
        node_info: n.node_info.clone().or(previous.node_info),
        addresses: i.addresses.clone(),
        failure_domain: i
            .failure_domain
            .clone()
            .or_else(|| m.spec.failure_domain.clone()),
        initialization: Some(MachineInitialization {
            bootstrap_data_secret_created: Some(b.data_secret_name.is_some()),
            infrastructure_provisioned: Some(i.provisioned),
        }),
        last_updated,
        certificates_expiry_date: b.certificates_expiry.clone(),
        conditions: Some(conds),
        observed_generation,
        deletion: None,
        deprecated: Some(deprecated),
    }
}

/// The deletion: pre-drain hooks, drain, pre-terminate hooks, the infrastructure machine,
/// the bootstrap config, the Node (then the runner removes the finalizer).
async fn delete(
    m: &Machine,
    r: &Reconciler<Machine>,
    api: &Api<Machine>,
    cluster: Option<&Cluster>,
) -> Result<Cleanup, Error> {
    let ns = m.namespace().unwrap_or_default();
    let cluster_deleting = cluster.is_none_or(|c| c.metadata.deletion_timestamp.is_some());
    let hook = |prefix: &str| m.annotations().keys().any(|k| k.starts_with(prefix));
    if hook(PRE_DRAIN_HOOK) {
        return deleting(
            m,
            r,
            api,
            "WaitingForPreDrainHook",
            "Waiting for pre-drain hooks to succeed",
        )
        .await;
    }
    if let (Some(cluster), false) = (cluster, cluster_deleting) {
        if let Some(node) = m.status.as_ref().and_then(|s| s.node_ref.as_ref()) {
            if let Some(left) = drain(r, cluster, &node.name).await? {
                return deleting(m, r, api, "DrainingNode", &left).await;
            }
        }
    }
    if hook(PRE_TERMINATE_HOOK) {
        return deleting(
            m,
            r,
            api,
            "WaitingForPreTerminateHook",
            "Waiting for pre-terminate hooks to succeed",
        )
        .await;
    }
    let infra_ref = m.spec.infrastructure_ref.clone();
    if delete_referenced(r, &ns, &infra_ref).await? {
        let why = format!("Waiting for {} to be deleted", infra_ref.kind);
        return deleting(m, r, api, "WaitingForInfrastructureDeletion", &why).await;
    }
    if let Some(config_ref) = m.spec.bootstrap.config_ref.clone() {
        if delete_referenced(r, &ns, &config_ref).await? {
            let why = format!("Waiting for {} to be deleted", config_ref.kind);
            return deleting(m, r, api, "WaitingForBootstrapDeletion", &why).await;
        }
    }
    if let (Some(cluster), false) = (cluster, cluster_deleting) {
        if let Some(node) = m.status.as_ref().and_then(|s| s.node_ref.as_ref()) {
            if let Ok(client) = r.core.workloads.of(&r.client(), cluster).await {
                let nodes: Api<Node> = Api::all(client);
                match nodes.delete(&node.name, &DeleteParams::default()).await {
                    Ok(_) => {}
                    Err(kube::Error::Api(e)) if e.code == 404 => {}
                    Err(e) => tracing::warn!(node = %node.name, error = %e, "deleting the node"),
                }
            }
        }
    }
    Ok(Cleanup::Done)
}

/// Deletes a referenced object; `true` while it still exists.
async fn delete_referenced(
    r: &Reconciler<Machine>,
    ns: &str,
    reference: &crate::capi::core::ContractRef,
) -> Result<bool, Error> {
    let api = match r.core.resolver.api(&r.client(), ns, reference).await {
        Ok(api) => api,
        // A kind no longer served has nothing left to wait for.
        Err(RefError::Kube(kube::Error::Api(e))) if e.code == 404 => return Ok(false),
        Err(e) => return Err(e.into()),
    };
    match api.get_opt(&reference.name).await? {
        None => Ok(false),
        Some(obj) => {
            if obj.metadata.deletion_timestamp.is_none() {
                match api.delete(&reference.name, &DeleteParams::default()).await {
                    Ok(_) => {}
                    Err(kube::Error::Api(e)) if e.code == 404 => return Ok(false),
                    Err(e) => return Err(e.into()),
                }
            }
            Ok(true)
        }
    }
}

/// Cordons the Node and evicts its pods (not DaemonSet pods, not static pods); the pods still
/// there, described, or `None` once drained.
async fn drain(
    r: &Reconciler<Machine>,
    cluster: &Cluster,
    node: &str,
) -> Result<Option<String>, Error> {
    let Ok(client) = r.core.workloads.of(&r.client(), cluster).await else {
        return Ok(None);
    };
    let nodes: Api<Node> = Api::all(client.clone());
    let cordon = json!({"spec": {"unschedulable": true}});
    match nodes
        .patch(node, &PatchParams::default(), &Patch::Strategic(&cordon))
        .await
    {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 404 => return Ok(None),
        Err(e) => return Err(e.into()),
    }
    let pods: Api<Pod> = Api::all(client.clone());
    let on_node = pods
        .list(&ListParams::default().fields(&format!("spec.nodeName={node}")))
        .await?;
    let evictable: Vec<Pod> = on_node
        .items
        .into_iter()
        .filter(|p| {
            let daemon = p.owner_references().iter().any(|o| o.kind == "DaemonSet");
            let mirror = p.annotations().contains_key("kubernetes.io/config.mirror")
                || p.labels().get("tier").map(String::as_str) == Some("control-plane");
            !daemon && !mirror && p.metadata.deletion_timestamp.is_none()
        })
        .collect();
    let mut blocked = Vec::new();
    for p in &evictable {
        let api: Api<Pod> = Api::namespaced(client.clone(), &p.namespace().unwrap_or_default());
        match api.evict(&p.name_any(), &EvictParams::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(kube::Error::Api(e)) if e.code == 429 => blocked.push(format!(
                "{}/{}",
                p.namespace().unwrap_or_default(),
                p.name_any()
            )),
            Err(e) => return Err(e.into()),
        }
    }
    if blocked.is_empty() {
        Ok(None)
    } else {
        Ok(Some(format!(
            "Drain not completed yet: evictions blocked by PodDisruptionBudgets for {}",
            blocked.join(", ")
        )))
    }
}

/// Reports a deletion step in the Machine's status.
async fn deleting(
    m: &Machine,
    r: &Reconciler<Machine>,
    api: &Api<Machine>,
    reason: &str,
    message: &str,
) -> Result<Cleanup, Error> {
    let now = r.core.ctx.now();
    let mut status = m.status.clone().unwrap_or_default();
    let mut conds = super::remediation::machines_own(status.conditions.take().unwrap_or_default());
    conditions::set(
        &mut conds,
        Condition::new("Deleting", true, reason, message),
        now,
    );
    conditions::sort(&mut conds);
    status.conditions = Some(conds);
    status.phase = Some("Deleting".into());
    apply_status(api, m, MANAGER, &status).await?;
    if reason == "DrainingNode" {
        // An eviction a budget refused is tried again shortly (on the injected clock).
        return Ok(Cleanup::Pending(Next::At(
            now + chrono::Duration::seconds(5),
        )));
    }
    Ok(Cleanup::Pending(Next::AwaitChange))
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::runtime::watcher;

    #[test]
    fn readiness_gates_count_their_conditions_by_polarity_and_unreported_ones_as_unknown() {
        let m: Machine = serde_json::from_value(serde_json::json!({
            "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
            "metadata": {"name": "m", "namespace": "ns"},
            "spec": {"clusterName": "c1", "bootstrap": {},
                     "infrastructureRef": {"apiGroup": "x", "kind": "X", "name": "m"},
                     "readinessGates": [{"conditionType": "APIServerPodHealthy"},
                                        {"conditionType": "Degraded", "polarity": "Negative"},
                                        {"conditionType": "EtcdMemberHealthy"}]},
            "status": {"conditions": [
                {"type": "APIServerPodHealthy", "status": "True", "reason": "Running",
                 "lastTransitionTime": "2026-12-01T00:00:00Z"},
                {"type": "Degraded", "status": "False", "reason": "NotDegraded",
                 "lastTransitionTime": "2026-12-01T00:00:00Z"}]},
        }))
        .expect("a Machine");
        let gates = readiness_gates(&m);
        let seen: Vec<(&str, &str, &str)> = gates
            .iter()
            .map(|c| (c.type_.as_str(), c.status.as_str(), c.reason.as_str()))
            .collect();
        assert_eq!(
            seen,
            [
                ("APIServerPodHealthy", "True", "Running"),
                ("Degraded", "True", "NotDegraded"),
                ("EtcdMemberHealthy", "Unknown", "NotYetReported"),
            ]
        );
        let inputs: Vec<&Condition> = gates.iter().collect();
        let ready = conditions::summary("Ready", &inputs, ("NotReady", "ReadyUnknown", "Ready"));
        assert_eq!(ready.status, "Unknown");
        assert_eq!(
            ready.message,
            "* EtcdMemberHealthy: Condition not yet reported"
        );
    }

    fn machine(name: &str, provider_id: Option<&str>, node: Option<&str>) -> Machine {
        let mut m: Machine = serde_json::from_value(serde_json::json!({
            "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
            "metadata": {"name": name, "namespace": "ns"},
            "spec": {"clusterName": "c1", "bootstrap": {},
                     "infrastructureRef": {"apiGroup": "x", "kind": "X", "name": name}},
        }))
        .expect("a Machine");
        m.spec.provider_id = provider_id.map(str::to_string);
        if let Some(node) = node {
            m.status = Some(
                serde_json::from_value(serde_json::json!({"nodeRef": {"name": node}}))
                    .expect("a status"),
            );
        }
        m
    }

    fn change(node: &str, provider_id: &str) -> crate::capi::standin::nodes::NodeChange {
        crate::capi::standin::nodes::NodeChange {
            namespace: "ns".into(),
            cluster: "c1".into(),
            node: node.into(),
            provider_id: provider_id.into(),
        }
    }

    fn names(refs: Vec<ObjectRef<Machine>>) -> Vec<String> {
        let mut names: Vec<String> = refs.into_iter().map(|r| r.name).collect();
        names.sort();
        names
    }

    #[test]
    fn a_node_wakes_the_machine_waiting_for_it_by_provider_id() {
        let index = Index::new(machine_keys);
        for m in [
            machine("waiting", Some("vsphere://a"), None),
            machine("running", Some("vsphere://b"), Some("node-b")),
            machine("unprovisioned", None, None),
        ] {
            index.observe(&watcher::Event::Apply(Arc::new(m)));
        }
        // A Node that joined with the waiting Machine's provider ID, under another name.
        assert_eq!(
            names(woken_by(&index, &change("vm-a", "vsphere://a"))),
            ["waiting"]
        );
        // A known Node changing: its Machine by nodeRef (once, though the ID matches too).
        assert_eq!(
            names(woken_by(&index, &change("node-b", "vsphere://b"))),
            ["running"]
        );
        // Missed changes: every Machine of the cluster.
        assert_eq!(
            names(woken_by(&index, &change("", ""))),
            ["running", "unprovisioned", "waiting"]
        );
    }
}
