//! The KubeadmControlPlane controller: the cluster's certificates and admin kubeconfig in
//! Cluster API's layout, one control-plane Machine per replica (each with its KubeadmConfig
//! and an infrastructure machine cloned from the template), scaling and rolling updates one
//! machine at a time once the control plane is stable, and the status `kubectl get kcp`
//! shows.

use super::certificate_expiry;
use super::certs;
use super::merge_patch;
use super::objects::{clone_template, owner_ref, random_suffix, CloneSpec, CLONED_FROM_NAME};
use super::{apply_status, ensure_finalizer, paused, remove_finalizer, Core, Error, Reconciler};
use crate::capi::core::{
    Cluster, ContractRef, ControlPlaneInitialization, KubeadmConfig, KubeadmControlPlane,
    KubeadmControlPlaneStatus, Machine, MachineSpec, VersionCount,
};
use crate::capi::{CLUSTER_NAME_LABEL, CONTROL_PLANE_LABEL, CONTROL_PLANE_NAME_LABEL};
use chrono::{DateTime, Utc};
use infrasim_controller_runtime::conditions::{self, Condition};
use infrasim_controller_runtime::reconcile::{Cleanup, Next, Reconcile};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::runtime::reflector::ObjectRef;
use kube::ResourceExt;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

pub const FINALIZER: &str = "kubeadm.controlplane.cluster.x-k8s.io";
/// The pre-terminate hook on every control-plane Machine: the control plane removes the
/// machine's etcd member before the machine goes.
pub const CLEANUP_HOOK: &str = "pre-terminate.delete.hook.machine.cluster.x-k8s.io/kcp-cleanup";

pub(super) async fn run(core: Arc<Core>) {
    let informers = core.informers.clone();
    let controller = super::controller_for::<KubeadmControlPlane>(&core)
        .owns_shared_stream(infrasim_controller_runtime::triggers::filtered(
            &informers.of::<Machine>(),
            crate::capi::triggers::machine_summary,
        ))
        .watches_shared_stream(
            infrasim_controller_runtime::triggers::filtered(
                &informers.of::<Cluster>(),
                crate::capi::triggers::cluster_gates,
            ),
            |c| {
                let ns = c.namespace().unwrap_or_default();
                c.spec
                    .control_plane_ref
                    .as_ref()
                    .filter(|r| r.kind == "KubeadmControlPlane")
                    .map(|r| ObjectRef::new(&r.name).within(&ns))
            },
        )
        // A fault on its cluster (an etcd alarm, a certificate) changes what it reads there.
        .reconcile_on(super::fault_changes::woken(
            &core.ctx.cloud,
            informers.clone(),
        ));
    let ctx = core.ctx.clone();
    infrasim_controller_runtime::reconcile::run(&ctx, controller, Arc::new(Reconciler::new(core)))
        .await;
}

/// The control plane's Machines, oldest first.
async fn machines(
    r: &Reconciler<KubeadmControlPlane>,
    kcp: &KubeadmControlPlane,
    cluster: &str,
) -> Result<Vec<Machine>, Error> {
    let ns = kcp.namespace().unwrap_or_default();
    let selector = format!(
        "{CLUSTER_NAME_LABEL}={cluster},{CONTROL_PLANE_NAME_LABEL}={}",
        kcp.name_any()
    );
    let mut list = r
        .api::<Machine>(&ns)
        .list(&ListParams::default().labels(&selector))
        .await?
        .items;
    list.sort_by_key(|m| {
        (
            m.metadata.creation_timestamp.clone().map(|t| t.0),
            m.name_any(),
        )
    });
    Ok(list)
}

/// The Cluster that owns a control plane (its owner reference of kind Cluster).
fn owner_cluster(kcp: &KubeadmControlPlane) -> Option<String> {
    kcp.owner_references()
        .iter()
        .find(|o| o.kind == "Cluster")
        .map(|o| o.name.clone())
}

/// The field manager this controller writes under: the stand-in's and its own name (see
/// [`infrasim_controller_runtime::writes`]).
const MANAGER: &str = "infrasim-capi-core/kcp";

/// A control plane is claimed (its [`FINALIZER`] added) only once its Cluster owns it and
/// exists, so the runner holds no finalizer of its own (see [`Reconcile::FINALIZER`]): the
/// cleanup removes it once the control-plane Machines are gone.
impl Reconcile<KubeadmControlPlane> for Reconciler<KubeadmControlPlane> {
    type Error = Error;

    async fn apply(&self, kcp: Arc<KubeadmControlPlane>) -> Result<Next, Error> {
        let _running = infrasim_controller_runtime::metrics::reconciled("KubeadmControlPlane");
        apply(&kcp, self).await
    }

    async fn cleanup(&self, kcp: Arc<KubeadmControlPlane>) -> Result<Cleanup, Error> {
        let _running = infrasim_controller_runtime::metrics::reconciled("KubeadmControlPlane");
        let Some(cluster_name) = owner_cluster(&kcp) else {
            return Ok(Cleanup::Done);
        };
        let api: Api<KubeadmControlPlane> = self.api(&kcp.namespace().unwrap_or_default());
        delete(&kcp, self, &api, &cluster_name).await
    }
}

/// Certificates, kubeconfig and Machines, once the owning Cluster exists; then the status.
async fn apply(
    kcp: &KubeadmControlPlane,
    r: &Reconciler<KubeadmControlPlane>,
) -> Result<Next, Error> {
    let ns = kcp.namespace().unwrap_or_default();
    let api: Api<KubeadmControlPlane> = r.api(&ns);
    let Some(cluster_name) = owner_cluster(kcp) else {
        return Ok(Next::AwaitChange);
    };
    let Some(cluster) = r.core.informers.get::<Cluster>(&ns, &cluster_name).await? else {
        return Ok(Next::AwaitChange);
    };
    if ensure_finalizer(&r.core.ctx.client, kcp, FINALIZER).await? {
        return Ok(Next::AwaitChange);
    }
    let now = r.core.ctx.now();
    let mut status = kcp.status.clone().unwrap_or_default();
    let mut conds = status.conditions.take().unwrap_or_default();
    if conditions::set_paused(&mut conds, paused(kcp, cluster.paused()), now) {
        status.conditions = Some(conds);
        apply_status(&api, kcp, MANAGER, &status).await?;
        return Ok(Next::AwaitChange);
    }
    let machines = machines(r, kcp, &cluster_name).await?;
    let mut initialized = status
        .initialization
        .as_ref()
        .and_then(|i| i.control_plane_initialized)
        .unwrap_or(false);
    let outcome = provision(kcp, r, &cluster, &machines, &mut initialized, &mut conds).await?;
    let status = compute_status(kcp, r, &cluster_name, &machines, initialized, conds).await?;
    apply_status(&api, kcp, MANAGER, &status).await?;
    Ok(outcome)
}

/// Certificates, kubeconfig, initialization, then at most one machine created or deleted.
async fn provision(
    kcp: &KubeadmControlPlane,
    r: &Reconciler<KubeadmControlPlane>,
    cluster: &Cluster,
    machines: &[Machine],
    initialized: &mut bool,
    conds: &mut Vec<Condition>,
) -> Result<Next, Error> {
    let now = r.core.ctx.now();
    let ns = kcp.namespace().unwrap_or_default();
    if !cluster.infrastructure_provisioned() {
        let why = "Waiting for Cluster status.infrastructureReady to be true";
        components_not_inspected(conds, why, now);
        return Ok(Next::AwaitChange);
    }
    let secrets: Api<Secret> = r.api(&ns);
    let owner = owner_ref(kcp, true);
    let named = cluster
        .spec
        .control_plane_endpoint
        .as_ref()
        .map(|e| format!("{}:{}", e.host, e.port))
        .unwrap_or_default();
    let found = r.core.certificates.get(&ns, &cluster.name_any(), &named);
    let ca = match found.clone() {
        Some(ca) => Some(ca),
        None => {
            certs::lookup_or_generate(&secrets, &cluster.name_any(), &owner, !*initialized).await?
        }
    };
    let Some(ca) = ca else {
        // Another reconcile is creating them (a 409), or they are gone under an initialized
        // control plane (not made again: its nodes trust the old ones). Secrets are not among
        // this controller's triggers, so it looks again shortly rather than waiting on one.
        set_certificates_available(conds, false, now);
        return Ok(Next::After(Duration::from_millis(500)));
    };
    set_certificates_available(conds, true, now);
    let Some(endpoint) = cluster
        .spec
        .control_plane_endpoint
        .clone()
        .filter(|e| e.is_valid())
    else {
        let why = "Waiting for Cluster spec.controlPlaneEndpoint to be set";
        components_not_inspected(conds, why, now);
        return Ok(Next::AwaitChange);
    };
    if found.is_none() {
        certs::ensure_kubeconfig(
            &secrets,
            &cluster.name_any(),
            &ca,
            &endpoint.host,
            endpoint.port,
            &owner,
        )
        .await?;
        r.core
            .certificates
            .remember(&ns, &cluster.name_any(), ca, &named);
    }
    if !*initialized && machines.iter().any(|m| m.spec.provider_id.is_some()) {
        *initialized = kubeadm_config_exists(r, cluster).await;
    }
    release_cleanup_hooks(r, machines).await?;
    if super::kcp_remediation::remediate(kcp, r, machines, *initialized).await? {
        return Ok(Next::AwaitChange);
    }
    let recheck =
        super::component_health::update(r, cluster, machines, *initialized, conds, now).await?;
    certificate_expiry::discover(r, &ns, &cluster.name_any(), machines).await?;
    sync_machines(kcp, r, cluster, machines).await?;
    let next = scale(kcp, r, cluster, machines, *initialized).await?;
    Ok(super::component_health::sooner(next, recheck, now))
}

/// Marks etcd and the control-plane components as not inspected, for `why`: the cluster is
/// not far enough along for their health to mean anything.
fn components_not_inspected(conds: &mut Vec<Condition>, why: &str, now: DateTime<Utc>) {
    conditions::set(
        conds,
        Condition::unknown("EtcdClusterHealthy", "InspectionFailed", why),
        now,
    );
    conditions::set(
        conds,
        Condition::unknown("ControlPlaneComponentsHealthy", "InspectionFailed", why),
        now,
    );
}

/// `CertificatesAvailable`: true once the cluster's certificates exist, false while they
/// are being created.
fn set_certificates_available(conds: &mut Vec<Condition>, available: bool, now: DateTime<Utc>) {
    let condition = if available {
        Condition::new("CertificatesAvailable", true, "Available", "")
    } else {
        Condition::new(
            "CertificatesAvailable",
            false,
            "NotAvailable",
            "the cluster certificates are being created",
        )
    };
    conditions::set(conds, condition, now);
}

/// Whether the workload cluster has kubeadm's ConfigMap: `kubeadm init` finished.
async fn kubeadm_config_exists(r: &Reconciler<KubeadmControlPlane>, cluster: &Cluster) -> bool {
    let Ok(client) = r.core.workloads.of(&r.client(), cluster).await else {
        return false;
    };
    let cms: Api<ConfigMap> = Api::namespaced(client, "kube-system");
    matches!(cms.get_opt("kubeadm-config").await, Ok(Some(_)))
}

/// Lets deleting machines go once they wait on the control plane's pre-terminate hook, after
/// removing their etcd member (and moving etcd's leadership off it) through the cluster's
/// etcd API, as upstream's control plane does.
async fn release_cleanup_hooks(
    r: &Reconciler<KubeadmControlPlane>,
    machines: &[Machine],
) -> Result<(), Error> {
    for m in machines
        .iter()
        .filter(|m| m.metadata.deletion_timestamp.is_some())
    {
        let waiting = m
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_deref())
            .and_then(|c| conditions::find(c, "Deleting").cloned())
            .is_some_and(|c| c.reason == "WaitingForPreTerminateHook");
        if waiting && m.annotations().contains_key(CLEANUP_HOOK) {
            let ns = m.namespace().unwrap_or_default();
            if let Some(node) = m.status.as_ref().and_then(|s| s.node_ref.as_ref()) {
                super::etcd::remove_member(&r.client(), &ns, &m.spec.cluster_name, &node.name)
                    .await?;
            }
            let api: Api<Machine> = r.api(&ns);
            let patch = json!({"metadata": {"annotations": {CLEANUP_HOOK: null}}});
            merge_patch(&api, &m.name_any(), &patch).await?;
        }
    }
    Ok(())
}

/// Why a machine needs replacing at `now`, if it does: its certificates expire soon or
/// `rollout.after` has passed (see [`certificate_expiry::due`]), another version, an
/// infrastructure machine cloned from another template, or a KubeadmConfig (`config`, its
/// spec) that no longer says what the control plane's `kubeadmConfigSpec` does (its init and
/// join configurations aside: a machine has one of them).
pub(super) fn outdated(
    kcp: &KubeadmControlPlane,
    m: &Machine,
    infra_template_of_machine: Option<&str>,
    config: Option<&serde_json::Value>,
    now: DateTime<Utc>,
) -> Option<String> {
    if let Some(why) = certificate_expiry::due(kcp, m, now) {
        return Some(why);
    }
    if m.spec.version.as_deref() != Some(kcp.spec.version.as_str()) {
        return Some(format!(
            "* Version {}, {} required",
            m.spec.version.as_deref().unwrap_or("(none)"),
            kcp.spec.version
        ));
    }
    let wanted = &kcp.spec.machine_template.spec.infrastructure_ref.name;
    if infra_template_of_machine.is_some_and(|t| t != wanted) {
        return Some(format!(
            "* {} is not up-to-date",
            m.spec.infrastructure_ref.kind
        ));
    }
    let mut spec = kcp.spec.kubeadm_config_spec.clone().unwrap_or(json!({}));
    if let Some(o) = spec.as_object_mut() {
        o.remove("initConfiguration");
        o.remove("joinConfiguration");
    }
    match config {
        Some(config) if !super::objects::covers(Some(config), &spec) => {
            Some("* KubeadmConfig is not up-to-date".into())
        }
        _ => None,
    }
}

/// The spec of the KubeadmConfig a machine was bootstrapped with, from the cache.
pub(super) async fn config_spec(
    r: &Reconciler<impl kube::Resource<DynamicType = ()>>,
    m: &Machine,
) -> Option<serde_json::Value> {
    let config = m.spec.bootstrap.config_ref.as_ref()?;
    let ns = m.namespace().unwrap_or_default();
    let found = r
        .core
        .informers
        .get::<KubeadmConfig>(&ns, &config.name)
        .await
        .ok()??;
    serde_json::to_value(&found.spec).ok()
}

/// The template a machine's infrastructure machine was cloned from.
pub(super) async fn infra_template(
    r: &Reconciler<impl kube::Resource<DynamicType = ()>>,
    m: &Machine,
) -> Option<String> {
    let ns = m.namespace().unwrap_or_default();
    let obj = r.core.read(&ns, &m.spec.infrastructure_ref).await.ok()??;
    obj.annotations().get(CLONED_FROM_NAME).cloned()
}

fn max_surge(kcp: &KubeadmControlPlane, replicas: i32) -> i32 {
    let surge = kcp
        .spec
        .rollout
        .as_ref()
        .and_then(|r| r.strategy.as_ref())
        .and_then(|s| s.rolling_update.as_ref())
        .and_then(|u| u.max_surge.clone());
    match surge {
        Some(IntOrString::Int(n)) => n,
        Some(IntOrString::String(s)) => {
            let p: i32 = s.trim_end_matches('%').parse().unwrap_or(100);
            (p * replicas + 99) / 100
        }
        None => 1,
    }
}

/// At most one machine created or deleted, when the control plane is stable.
async fn scale(
    kcp: &KubeadmControlPlane,
    r: &Reconciler<KubeadmControlPlane>,
    cluster: &Cluster,
    machines: &[Machine],
    initialized: bool,
) -> Result<Next, Error> {
    let replicas = kcp.spec.replicas.unwrap_or(1);
    let active: Vec<&Machine> = machines
        .iter()
        .filter(|m| m.metadata.deletion_timestamp.is_none())
        .collect();
    if machines.is_empty() {
        create_machine(kcp, r, cluster, machines, true).await?;
        return Ok(Next::AwaitChange);
    }
    let ready = |m: &Machine| {
        m.status
            .as_ref()
            .and_then(|s| s.conditions.as_deref())
            .is_some_and(|c| conditions::is_true(c, "Ready"))
    };
    let stable = initialized && active.len() == machines.len() && active.iter().all(|m| ready(m));
    if !stable {
        return Ok(Next::AwaitChange);
    }
    let now = r.core.ctx.now();
    let mut outdated_machines = Vec::new();
    for m in &active {
        let template = infra_template(r, m).await;
        let config = config_spec(r, m).await;
        if outdated(kcp, m, template.as_deref(), config.as_ref(), now).is_some() {
            outdated_machines.push(*m);
        }
    }
    // A machine that falls due by time alone (its certificates, `rollout.after`) wakes the
    // control plane when it does: nothing else changes then.
    let due_next = (active.iter())
        .filter_map(|m| certificate_expiry::due_next(kcp, m, now))
        .min();
    let count = active.len() as i32;
    if !outdated_machines.is_empty() {
        if count < replicas + max_surge(kcp, replicas) {
            create_machine(kcp, r, cluster, machines, false).await?;
        } else {
            delete_one(kcp, r, cluster, &outdated_machines).await?;
        }
    } else if count < replicas {
        create_machine(kcp, r, cluster, machines, false).await?;
    } else if count > replicas {
        delete_one(kcp, r, cluster, &active).await?;
    }
    Ok(due_next.map_or(Next::AwaitChange, Next::At))
}

/// The control-plane failure domains, if the cluster offers any.
fn failure_domains(cluster: &Cluster) -> Vec<String> {
    cluster
        .status
        .as_ref()
        .and_then(|s| s.failure_domains.clone())
        .unwrap_or_default()
        .into_iter()
        .filter(|f| f.control_plane.unwrap_or(false))
        .map(|f| f.name)
        .collect()
}

fn count_in(machines: &[&Machine], fd: &str) -> usize {
    machines
        .iter()
        .filter(|m| m.spec.failure_domain.as_deref() == Some(fd))
        .count()
}

/// Deletes the oldest machine in the failure domain that has the most of `candidates`.
async fn delete_one(
    kcp: &KubeadmControlPlane,
    r: &Reconciler<KubeadmControlPlane>,
    cluster: &Cluster,
    candidates: &[&Machine],
) -> Result<(), Error> {
    let fds = failure_domains(cluster);
    let busiest = fds
        .iter()
        .max_by_key(|fd| count_in(candidates, fd))
        .cloned();
    let victim = candidates
        .iter()
        .find(|m| busiest.is_none() || m.spec.failure_domain == busiest)
        .or_else(|| candidates.first())
        .copied();
    let Some(victim) = victim else { return Ok(()) };
    let api: Api<Machine> = r.api(&kcp.namespace().unwrap_or_default());
    api.delete(&victim.name_any(), &DeleteParams::default())
        .await?;
    r.core
        .ctx
        .event(
            kcp,
            false,
            "ScalingDown",
            format!("deleting control-plane Machine {}", victim.name_any()),
        )
        .await;
    Ok(())
}

/// Creates one control-plane Machine with its KubeadmConfig and infrastructure machine.
async fn create_machine(
    kcp: &KubeadmControlPlane,
    r: &Reconciler<KubeadmControlPlane>,
    cluster: &Cluster,
    machines: &[Machine],
    init: bool,
) -> Result<(), Error> {
    let new = NewMachine::new(kcp, cluster, init);
    let fd = emptiest_failure_domain(cluster, machines);
    let infra = new.clone_infrastructure(r).await?;
    create_ignoring_conflict(&r.api::<KubeadmConfig>(&new.ns), &new.kubeadm_config()?).await?;
    let machine = new.machine(infra, fd)?;
    // Made with an apply under this controller's manager, which then owns what it
    // propagates in place (see `sync_machines`).
    super::in_place::apply(&r.api::<Machine>(&new.ns), &new.name, MANAGER, &machine).await?;
    let verb = if init {
        "initializing the control plane with"
    } else {
        "adding"
    };
    let name = &new.name;
    r.core
        .ctx
        .event(kcp, false, "ScalingUp", format!("{verb} Machine {name}"))
        .await;
    Ok(())
}

/// Where a new machine goes, so machines spread across the cluster's failure domains.
fn emptiest_failure_domain(cluster: &Cluster, machines: &[Machine]) -> Option<String> {
    // The failure domain with the fewest machines.
    let all: Vec<&Machine> = machines
        .iter()
        .filter(|m| m.metadata.deletion_timestamp.is_none())
        .collect();
    failure_domains(cluster)
        .into_iter()
        .min_by_key(|fd| count_in(&all, fd))
}

/// One control-plane Machine about to be made: the name and metadata that its
/// infrastructure machine, KubeadmConfig and Machine share.
struct NewMachine<'a> {
    kcp: &'a KubeadmControlPlane,
    cluster: &'a Cluster,
    /// Whether it runs `kubeadm init` (the first machine) rather than joining.
    init: bool,
    ns: String,
    name: String,
    labels: BTreeMap<String, String>,
    /// The machine template's annotations.
    annotations: BTreeMap<String, String>,
}

impl<'a> NewMachine<'a> {
    /// A fresh name, and the machine template's labels with the cluster's and control plane's.
    fn new(kcp: &'a KubeadmControlPlane, cluster: &'a Cluster, init: bool) -> Self {
        let ns = kcp.namespace().unwrap_or_default();
        let name = format!("{}-{}", kcp.name_any(), random_suffix());
        let meta = kcp
            .spec
            .machine_template
            .metadata
            .clone()
            .unwrap_or_default();
        let labels = machine_labels(kcp, &cluster.name_any());
        NewMachine {
            kcp,
            cluster,
            init,
            ns,
            name,
            labels,
            annotations: meta.annotations,
        }
    }

    /// Clones the machine template's infrastructure template into the machine's own
    /// infrastructure machine.
    async fn clone_infrastructure(
        &self,
        r: &Reconciler<KubeadmControlPlane>,
    ) -> Result<ContractRef, Error> {
        let template_ref = &self.kcp.spec.machine_template.spec.infrastructure_ref;
        let template = r
            .core
            .resolver
            .get(&r.client(), &self.ns, template_ref)
            .await?
            .ok_or_else(|| {
                Error::Invalid(format!(
                    "{} {} does not exist",
                    template_ref.kind, template_ref.name
                ))
            })?;
        let infra = clone_template(
            &r.client(),
            &self.ns,
            &template,
            CloneSpec {
                name: &self.name,
                labels: self.labels.clone(),
                annotations: self.annotations.clone(),
                owner: Some(owner_ref(self.kcp, false)),
                spec_overrides: None,
            },
        )
        .await?;
        Ok(infra)
    }

    /// The machine's KubeadmConfig: the control plane's config spec with only the init or
    /// only the (control-plane) join configuration.
    fn kubeadm_config(&self) -> Result<KubeadmConfig, Error> {
        let (kcp, name, ns) = (self.kcp, &self.name, &self.ns);
        let mut spec = kcp.spec.kubeadm_config_spec.clone().unwrap_or(json!({}));
        if let Some(o) = spec.as_object_mut() {
            if self.init {
                o.remove("joinConfiguration");
            } else {
                o.remove("initConfiguration");
                let join = o.entry("joinConfiguration").or_insert(json!({}));
                if join.get("controlPlane").is_none() {
                    join["controlPlane"] = json!({});
                }
            }
        }
        let config: KubeadmConfig = serde_json::from_value(json!({
            "apiVersion": "bootstrap.cluster.x-k8s.io/v1beta2", "kind": "KubeadmConfig",
            "metadata": {"name": name, "namespace": ns, "labels": self.labels, "annotations": self.annotations,
                         "ownerReferences": [owner_ref(kcp, false)]},
            "spec": spec,
        }))
        .map_err(kube::Error::SerdeError)?;
        Ok(config)
    }

    /// The Machine itself, with the cleanup hook and any remediation in progress carried
    /// over from the control plane.
    fn machine(&self, infra: ContractRef, fd: Option<String>) -> Result<Value, Error> {
        let mut annotations: BTreeMap<String, String> = self.annotations.clone();
        annotations.insert(CLEANUP_HOOK.into(), String::new());
        if let Some(data) = self
            .kcp
            .annotations()
            .get(super::kcp_remediation::IN_PROGRESS_ANNOTATION)
        {
            annotations.insert(super::kcp_remediation::FOR_ANNOTATION.into(), data.clone());
        }
        let spec = MachineSpec {
            cluster_name: self.cluster.name_any(),
            version: Some(self.kcp.spec.version.clone()),
            bootstrap: crate::capi::core::Bootstrap {
                config_ref: Some(ContractRef {
                    api_group: "bootstrap.cluster.x-k8s.io".into(),
                    kind: "KubeadmConfig".into(),
                    name: self.name.clone(),
                }),
                data_secret_name: None,
            },
            infrastructure_ref: infra,
            failure_domain: fd,
            ..MachineSpec::default()
        };
        desired_machine(self.kcp, &self.name, &self.labels, &annotations, &spec)
    }
}

/// The Machine a control plane wants under `name`, as upstream's `ComputeDesiredMachine`:
/// `spec`'s references, version and failure domain (a new Machine's, or an existing one's:
/// changing those is a rollout), with what is propagated in place from the machine
/// template: labels and annotations (given), readiness gates and deletion timeouts.
fn desired_machine(
    kcp: &KubeadmControlPlane,
    name: &str,
    labels: &BTreeMap<String, String>,
    annotations: &BTreeMap<String, String>,
    spec: &MachineSpec,
) -> Result<Value, Error> {
    let template = &kcp.spec.machine_template.spec.rest;
    let wanted = MachineSpec {
        cluster_name: spec.cluster_name.clone(),
        version: spec.version.clone(),
        bootstrap: crate::capi::core::Bootstrap {
            config_ref: spec.bootstrap.config_ref.clone(),
            data_secret_name: None,
        },
        infrastructure_ref: spec.infrastructure_ref.clone(),
        failure_domain: spec.failure_domain.clone(),
        readiness_gates: Some(readiness_gates(kcp)),
        deletion: Some(super::in_place::defaulted_deletion(
            template.get("deletion").cloned(),
        )),
        ..MachineSpec::default()
    };
    let spec = serde_json::to_value(&wanted).map_err(kube::Error::SerdeError)?;
    Ok(json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
        "metadata": {"name": name, "namespace": kcp.namespace(), "labels": labels,
                     "annotations": annotations, "ownerReferences": [owner_ref(kcp, true)]},
        "spec": spec,
    }))
}

/// The labels a control plane's Machines (and their infrastructure machines and
/// KubeadmConfigs) carry: the machine template's, with the cluster's and control plane's.
fn machine_labels(kcp: &KubeadmControlPlane, cluster: &str) -> BTreeMap<String, String> {
    let meta = kcp
        .spec
        .machine_template
        .metadata
        .clone()
        .unwrap_or_default();
    let mut labels = meta.labels;
    labels.insert(CLUSTER_NAME_LABEL.into(), cluster.to_string());
    labels.insert(CONTROL_PLANE_LABEL.into(), String::new());
    labels.insert(CONTROL_PLANE_NAME_LABEL.into(), kcp.name_any());
    labels
}

/// In-place propagation to the control plane's Machines not being deleted: labels,
/// annotations, readiness gates and deletion timeouts follow the machine template, and the
/// labels and annotations of their infrastructure machines and KubeadmConfigs with them.
/// The annotations this controller sets itself (the cleanup hook, a remediation's record)
/// stay as each Machine has them.
async fn sync_machines(
    kcp: &KubeadmControlPlane,
    r: &Reconciler<KubeadmControlPlane>,
    cluster: &Cluster,
    machines: &[Machine],
) -> Result<(), Error> {
    let ns = kcp.namespace().unwrap_or_default();
    let labels = machine_labels(kcp, &cluster.name_any());
    let template_annotations = (kcp.spec.machine_template.metadata.clone())
        .unwrap_or_default()
        .annotations;
    let propagation = super::in_place::Propagation {
        manager: MANAGER,
        labels: &labels,
        external_annotations: &template_annotations,
        spec_fields: &["readinessGates", "deletion"],
    };
    let api = r.api::<Machine>(&ns);
    for m in machines
        .iter()
        .filter(|m| m.metadata.deletion_timestamp.is_none())
    {
        let mut annotations = template_annotations.clone();
        for own in [CLEANUP_HOOK, super::kcp_remediation::FOR_ANNOTATION] {
            if let Some(v) = m.annotations().get(own) {
                annotations.insert(own.to_string(), v.clone());
            }
        }
        let desired = desired_machine(kcp, &m.name_any(), &labels, &annotations, &m.spec)?;
        propagation
            .sync(&r.core, &api, m, &desired, &annotations)
            .await?;
    }
    Ok(())
}

/// The readiness gates of a control plane's Machines, as upstream's control plane sets
/// them: the conditions it reports of the machine's control plane components (the etcd ones
/// only for an etcd it manages, not an external one), then the machine template's own, so a
/// Machine is Ready only once its API server, controller manager, scheduler and etcd are.
fn readiness_gates(kcp: &KubeadmControlPlane) -> Vec<Value> {
    let external_etcd = kcp
        .spec
        .kubeadm_config_spec
        .as_ref()
        .and_then(|s| s.pointer("/clusterConfiguration/etcd/external"))
        .is_some();
    let components = super::component_health::conditions_written()
        .into_iter()
        .filter(|ty| !(external_etcd && ty.starts_with("Etcd")))
        .map(|ty| json!({"conditionType": ty}));
    let template = kcp
        .spec
        .machine_template
        .spec
        .rest
        .get("readinessGates")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    // The components' first, then the template's; a condition named twice keeps its first.
    let mut gates: Vec<Value> = Vec::new();
    for gate in components.chain(template) {
        let ty = gate.get("conditionType").cloned();
        if !gates.iter().any(|g| g.get("conditionType") == ty.as_ref()) {
            gates.push(gate);
        }
    }
    gates
}

async fn create_ignoring_conflict<K>(api: &Api<K>, obj: &K) -> Result<(), Error>
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + serde::Serialize
        + std::fmt::Debug,
{
    match api.create(&PostParams::default(), obj).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Replica counts, versions and conditions.
async fn compute_status(
    kcp: &KubeadmControlPlane,
    r: &Reconciler<KubeadmControlPlane>,
    cluster: &str,
    machines: &[Machine],
    initialized: bool,
    mut conds: Vec<Condition>,
) -> Result<KubeadmControlPlaneStatus, Error> {
    let now = r.core.ctx.now();
    let cond_of = |m: &Machine, t: &str| {
        m.status
            .as_ref()
            .and_then(|s| s.conditions.as_deref())
            .is_some_and(|c| conditions::is_true(c, t))
    };
    let count = |t: &str| machines.iter().filter(|m| cond_of(m, t)).count() as i32;
    let (ready, available, up_to_date) = (count("Ready"), count("Available"), count("UpToDate"));
    let replicas = kcp.spec.replicas.unwrap_or(1);
    let versions = machine_versions(machines);
    for c in availability(initialized, ready, machines.len() as i32) {
        conditions::set(&mut conds, c, now);
    }
    for c in machine_conditions(machines, ready, up_to_date, replicas) {
        conditions::set(&mut conds, c, now);
    }
    conditions::sort(&mut conds);
    let deprecated = super::v1beta1::deprecated(
        &super::v1beta1::CONTROL_PLANE,
        &conds,
        v1beta1_counters(machines.len() as i32, ready, up_to_date),
        kcp.status.as_ref().and_then(|s| s.deprecated.as_ref()),
        now,
    );
    Ok(KubeadmControlPlaneStatus {
        replicas: Some(machines.len() as i32),
        ready_replicas: Some(ready),
        available_replicas: Some(available),
        up_to_date_replicas: Some(up_to_date),
        selector: Some(format!(
            "{CLUSTER_NAME_LABEL}={cluster},{CONTROL_PLANE_LABEL}"
        )),
        version: versions.first().map(|v| v.version.clone()),
        versions: Some(versions).filter(|v| !v.is_empty()),
        initialization: Some(ControlPlaneInitialization {
            control_plane_initialized: Some(initialized),
        }),
        conditions: Some(conds),
        observed_generation: kcp.metadata.generation,
        deprecated: Some(deprecated),
    })
}

/// How many machines run each Kubernetes version (the kubelet's when its Node reported it,
/// else the machine's spec), oldest first.
fn machine_versions(machines: &[Machine]) -> Vec<VersionCount> {
    let mut versions: BTreeMap<String, i32> = BTreeMap::new();
    for m in machines {
        let v = m
            .status
            .as_ref()
            .and_then(|s| s.node_info.as_ref())
            .and_then(|i| i.get("kubeletVersion"))
            .and_then(Value::as_str)
            .map(str::to_string)
            .or_else(|| m.spec.version.clone())
            .unwrap_or_default();
        *versions.entry(v).or_default() += 1;
    }
    let mut versions: Vec<VersionCount> = versions
        .into_iter()
        .map(|(version, replicas)| VersionCount { version, replicas })
        .collect();
    versions.sort_by_key(|v| version_key(&v.version));
    versions
}

/// `Available` (once initialized, while a majority of the `total` machines, etcd's quorum,
/// is ready) and `Initialized`.
fn availability(initialized: bool, ready: i32, total: i32) -> [Condition; 2] {
    let available = if !initialized {
        Condition::new(
            "Available",
            false,
            "NotAvailable",
            "Control plane not yet initialized",
        )
    } else if ready > total / 2 {
        Condition::new("Available", true, "Available", "")
    } else {
        Condition::new(
            "Available",
            false,
            "NotAvailable",
            format!("{ready} of {total} machines ready: etcd has no quorum"),
        )
    };
    let init = if initialized {
        Condition::new("Initialized", true, "Initialized", "")
    } else {
        Condition::new(
            "Initialized",
            false,
            "NotInitialized",
            "Control plane not yet initialized",
        )
    };
    [available, init]
}

/// The conditions summing up the machines: `MachinesReady`, `MachinesUpToDate`,
/// `RollingOut`, `ScalingUp`, `ScalingDown` (towards `replicas`) and `Deleting`.
fn machine_conditions(
    machines: &[Machine],
    ready: i32,
    up_to_date: i32,
    replicas: i32,
) -> Vec<Condition> {
    let total = machines.len() as i32;
    let aggregate = |ty: &str, have: i32, good: &str, bad: &str| {
        if machines.is_empty() {
            Condition::new(ty, true, "NoReplicas", "")
        } else if have == total {
            Condition::new(ty, true, good, "")
        } else {
            Condition::new(
                ty,
                false,
                bad,
                format!("{} of {total} Machines", total - have),
            )
        }
    };
    let rolling = up_to_date < total;
    let current = machines
        .iter()
        .filter(|m| m.metadata.deletion_timestamp.is_none())
        .count() as i32;
    let (up, down) = (current < replicas, total > replicas);
    let scaling = |ty: &str, on: bool, message: String| {
        let reason = if on {
            ty.to_string()
        } else {
            format!("Not{ty}")
        };
        Condition::new(ty, on, &reason, if on { message } else { String::new() })
    };
    vec![
        aggregate("MachinesReady", ready, "Ready", "NotReady"),
        aggregate("MachinesUpToDate", up_to_date, "UpToDate", "NotUpToDate"),
        Condition::new(
            "RollingOut",
            rolling,
            if rolling {
                "RollingOut"
            } else {
                "NotRollingOut"
            },
            "",
        ),
        scaling(
            "ScalingUp",
            up,
            format!("Scaling up from {current} to {replicas} replicas"),
        ),
        scaling(
            "ScalingDown",
            down,
            format!("Scaling down from {total} to {replicas} replicas"),
        ),
        Condition::new("Deleting", false, "NotDeleting", ""),
    ]
}

/// The counters of v1beta1's meaning upstream still keeps under `deprecated.v1beta1` (what a
/// v1beta1 reader sees at the top of the status, and its `ready` derives from): machines
/// ready, machines with the desired spec, and the rest unavailable.
fn v1beta1_counters(machines: i32, ready: i32, up_to_date: i32) -> Value {
    json!({
        "readyReplicas": ready,
        "updatedReplicas": up_to_date,
        "unavailableReplicas": machines - ready,
    })
}

/// Orders versions as semver (`v1.9.0` before `v1.10.0`).
pub fn version_key(v: &str) -> Vec<u64> {
    v.trim_start_matches('v')
        .split(['.', '-', '+'])
        .map(|p| p.parse().unwrap_or(0))
        .collect()
}

/// Deletion: wait for the workers, then delete every control-plane machine at once.
async fn delete(
    kcp: &KubeadmControlPlane,
    r: &Reconciler<KubeadmControlPlane>,
    api: &Api<KubeadmControlPlane>,
    cluster: &str,
) -> Result<Cleanup, Error> {
    if !kcp.finalizers().iter().any(|f| f == FINALIZER) {
        return Ok(Cleanup::Done);
    }
    let ns = kcp.namespace().unwrap_or_default();
    let all = r
        .api::<Machine>(&ns)
        .list(&ListParams::default().labels(&format!("{CLUSTER_NAME_LABEL}={cluster}")))
        .await?
        .items;
    let workers = all.iter().filter(|m| !m.is_control_plane()).count();
    let now = r.core.ctx.now();
    let (reason, message) = if workers > 0 {
        (
            "WaitingForWorkersDeletion",
            format!("Waiting for {workers} worker Machines to be deleted"),
        )
    } else {
        let mine = machines(r, kcp, cluster).await?;
        if mine.is_empty() {
            remove_finalizer(&r.core.ctx.client, kcp, FINALIZER).await?;
            return Ok(Cleanup::Done);
        }
        for m in &mine {
            let mapi: Api<Machine> = r.api(&ns);
            if m.annotations().contains_key(CLEANUP_HOOK) {
                let patch = json!({"metadata": {"annotations": {CLEANUP_HOOK: null}}});
                merge_patch(&mapi, &m.name_any(), &patch).await?;
            }
            if m.metadata.deletion_timestamp.is_none() {
                mapi.delete(&m.name_any(), &DeleteParams::default()).await?;
            }
        }
        (
            "WaitingForMachineDeletion",
            format!(
                "Waiting for {} control-plane Machines to be deleted",
                mine.len()
            ),
        )
    };
    let mut status = kcp.status.clone().unwrap_or_default();
    let mut conds = status.conditions.take().unwrap_or_default();
    conditions::set(
        &mut conds,
        Condition::new("Deleting", true, reason, message),
        now,
    );
    conditions::sort(&mut conds);
    status.conditions = Some(conds);
    apply_status(api, kcp, MANAGER, &status).await?;
    Ok(Cleanup::Pending(Next::AwaitChange))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kcp(files: Value) -> KubeadmControlPlane {
        serde_json::from_value(json!({
            "apiVersion": "controlplane.cluster.x-k8s.io/v1beta2", "kind": "KubeadmControlPlane",
            "metadata": {"name": "cp"},
            "spec": {"version": "v1.31.2", "replicas": 1,
                     "machineTemplate": {"spec": {"infrastructureRef": {"apiGroup": "g", "kind": "K", "name": "t1"}}},
                     "kubeadmConfigSpec": {"files": files, "initConfiguration": {"nodeRegistration": {}}}},
        }))
        .expect("a KubeadmControlPlane")
    }

    fn machine() -> Machine {
        serde_json::from_value(json!({
            "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine", "metadata": {"name": "m"},
            "spec": {"clusterName": "c", "version": "v1.31.2", "bootstrap": {},
                     "infrastructureRef": {"apiGroup": "g", "kind": "K", "name": "m"}},
        }))
        .expect("a Machine")
    }

    #[test]
    fn readiness_gates_are_the_components_then_the_templates_each_once() {
        let mut cp = kcp(json!([]));
        cp.spec.machine_template.spec.rest.insert(
            "readinessGates".into(),
            json!([{"conditionType": "Mine"}, {"conditionType": "SchedulerPodHealthy", "polarity": "Negative"}]),
        );
        let types: Vec<String> = readiness_gates(&cp)
            .iter()
            .map(|g| g["conditionType"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(
            types,
            [
                "APIServerPodHealthy",
                "ControllerManagerPodHealthy",
                "SchedulerPodHealthy",
                "EtcdPodHealthy",
                "EtcdMemberHealthy",
                "Mine"
            ]
        );
        // An external etcd: no etcd gates.
        cp.spec.kubeadm_config_spec =
            Some(json!({"clusterConfiguration": {"etcd": {"external": {}}}}));
        assert!(readiness_gates(&cp)
            .iter()
            .all(|g| !g["conditionType"].as_str().unwrap().starts_with("Etcd")));
    }

    #[test]
    fn a_machine_whose_kubeadm_config_says_something_else_is_outdated() {
        let files = json!([{"path": "/etc/banner", "content": "hello"}]);
        // The machine's config: the control plane's, with its join configuration and a
        // default the server added.
        let config = json!({"files": [{"path": "/etc/banner", "content": "hello", "owner": "root"}],
                            "joinConfiguration": {"controlPlane": {}}});
        assert_eq!(
            outdated(
                &kcp(files),
                &machine(),
                Some("t1"),
                Some(&config),
                Utc::now()
            ),
            None
        );
        let changed = json!([{"path": "/etc/banner", "content": "bonjour"}]);
        assert_eq!(
            outdated(
                &kcp(changed.clone()),
                &machine(),
                Some("t1"),
                Some(&config),
                Utc::now()
            )
            .as_deref(),
            Some("* KubeadmConfig is not up-to-date")
        );
        assert!(
            outdated(&kcp(changed), &machine(), Some("t0"), None, Utc::now())
                .is_some_and(|why| why.contains("not up-to-date"))
        );
    }
}
