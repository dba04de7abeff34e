//! A Cluster's topology made real from its ClusterClass: the infrastructure cluster and the
//! control plane (with its machines' infrastructure template) cloned from the class's
//! templates, and in the same pass (as Cluster API's topology controller does) one
//! MachineDeployment per topology entry with its own copies of the bootstrap and
//! infrastructure templates, and the class's health checks. Replica and version changes flow
//! down (the control plane first, the workers once it runs the new version). Objects are made
//! from the class's templates as its patches leave them (see [`super::blueprint`]); a patch
//! or variable that fails is the `TopologyReconciled` condition's reason, and nothing is made.

use super::blueprint::{self, Blueprint, Existing};
use super::desired::{control_plane_clone, infrastructure_clone, owned_labels, TOPOLOGY_MANAGER};
use super::merge_patch;
use super::objects::{apply_template_clone, copy_template, covers, owner_ref};
use super::{Error, Reconciler};
use crate::capi::core::{
    Cluster, ClusterClass, ContractRef, KubeadmControlPlane, MachineDeployment,
    MachineDeploymentClass, MachineDeploymentTopology, MachineHealthCheck, TemplateRef, Topology,
};
use crate::capi::{CLUSTER_NAME_LABEL, CONTROL_PLANE_LABEL};
use infrasim_controller_runtime::conditions::Condition;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, PostParams};
use kube::ResourceExt;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::Arc;

pub use crate::capi::{
    TOPOLOGY_DEPLOYMENT_LABEL as DEPLOYMENT_LABEL, TOPOLOGY_OWNED_LABEL as OWNED_LABEL,
};

fn contract(t: &TemplateRef) -> ContractRef {
    ContractRef {
        api_group: t
            .api_version
            .split_once('/')
            .map(|(g, _)| g)
            .unwrap_or("")
            .to_string(),
        kind: t.kind.clone(),
        name: t.name.clone(),
    }
}

/// Reconciles the topology; the returned condition is the Cluster's `TopologyReconciled`.
/// `c` gets the references set on the Cluster meanwhile.
pub(super) async fn reconcile(
    c: &mut Cluster,
    r: &Reconciler<Cluster>,
) -> Result<Condition, Error> {
    let ns = c.namespace().unwrap_or_default();
    let Some(topology) = c.spec.topology.clone() else {
        return Ok(Condition::new(
            "TopologyReconciled",
            true,
            "ReconcileSucceeded",
            "",
        ));
    };
    let class_ns = topology
        .class_ref
        .namespace
        .clone()
        .unwrap_or_else(|| ns.clone());
    // From the shared cache (the Cluster controller watches classes, so a change to one
    // brings its Clusters back); a class the cache has not seen yet is asked for.
    let class = r
        .core
        .informers
        .get::<ClusterClass>(&class_ns, &topology.class_ref.name)
        .await?;
    let Some(class) = class else {
        let why = format!(
            "ClusterClass {class_ns}/{} not found",
            topology.class_ref.name
        );
        return Ok(reconcile_failed(why));
    };
    let failed = |e: Error| reconcile_failed(e.to_string());
    let wanted = topology
        .workers
        .as_ref()
        .map(|w| w.machine_deployments.clone())
        .unwrap_or_default();
    let existing = existing_deployments(c, r).await?;
    let bp = match plan(c, r, &class, &wanted, &existing).await {
        Ok(bp) => bp,
        Err(e) => return Ok(failed(e)),
    };
    if let Err(e) = infrastructure(c, r, bp.as_ref()).await {
        return Ok(failed(e));
    }
    if let Some(bp) = &bp {
        let kcp = control_plane_of(c, r).await?;
        if let Err(e) = super::rollout::roll_out(c, r, bp, kcp.as_deref(), &existing).await {
            return Ok(failed(e));
        }
    }
    // A control plane this pass makes (the Cluster had no reference to one when it was read)
    // holds no worker back.
    let cp_was_there = c.spec.control_plane_ref.is_some();
    if let Err(e) = control_plane(c, r, &class, bp.as_ref()).await {
        return Ok(failed(e));
    }
    let kcp = control_plane_of(c, r).await?;
    let cp = progress(kcp.as_deref().filter(|_| cp_was_there), &topology.version);
    let mut pending = Vec::new();
    let made = Deployments {
        class: &class,
        wanted: &wanted,
        existing: &existing,
        blueprint: bp.as_ref(),
    };
    if let Err(e) = machine_deployments(c, r, &made, &cp, &mut pending).await {
        return Ok(failed(e));
    }
    if let Err(e) = health_checks(c, r, &class, kcp.as_deref()).await {
        return Ok(failed(e));
    }
    Ok(condition(&topology.version, &cp, pending))
}

/// `TopologyReconciled` false, for `why`.
fn reconcile_failed(why: String) -> Condition {
    Condition::new("TopologyReconciled", false, "ReconcileFailed", why)
}

/// The Cluster's control plane, when it references one the cache (or the API) has.
async fn control_plane_of(
    c: &Cluster,
    r: &Reconciler<Cluster>,
) -> Result<Option<Arc<KubeadmControlPlane>>, Error> {
    let Some(cp) = &c.spec.control_plane_ref else {
        return Ok(None);
    };
    let ns = c.namespace().unwrap_or_default();
    Ok(r.core
        .informers
        .get::<KubeadmControlPlane>(&ns, &cp.name)
        .await?)
}

/// The topology's MachineDeployments as they are (by the topology's labels).
async fn existing_deployments(
    c: &Cluster,
    r: &Reconciler<Cluster>,
) -> Result<Vec<MachineDeployment>, Error> {
    let api: Api<MachineDeployment> = r.api(&c.namespace().unwrap_or_default());
    let selector = format!("{CLUSTER_NAME_LABEL}={},{OWNED_LABEL}", c.name_any());
    Ok(api
        .list(&ListParams::default().labels(&selector))
        .await?
        .items)
}

/// The blueprint, when this pass has something to make: the infrastructure cluster, the
/// control plane or a MachineDeployment the topology names and nothing made yet.
async fn plan(
    c: &Cluster,
    r: &Reconciler<Cluster>,
    class: &ClusterClass,
    wanted: &[MachineDeploymentTopology],
    existing: &[MachineDeployment],
) -> Result<Option<Blueprint>, Error> {
    let md_missing = wanted.iter().any(|w| {
        !existing
            .iter()
            .any(|e| e.labels().get(DEPLOYMENT_LABEL) == Some(&w.name))
    });
    // With patches, what the objects should say can change after they were made (a
    // variable changed): the blueprint is built each time (see `super::rollout`).
    let patched = class.spec.patches.as_ref().is_some_and(|p| !p.is_empty());
    if c.spec.infrastructure_ref.is_some()
        && c.spec.control_plane_ref.is_some()
        && !md_missing
        && !patched
    {
        return Ok(None);
    }
    let kcp = control_plane_of(c, r).await?;
    let have = Existing {
        control_plane: kcp.as_deref(),
        deployments: existing,
    };
    blueprint::build(c, r, class, wanted, &have).await.map(Some)
}

/// What the MachineDeployments step works from.
struct Deployments<'a> {
    class: &'a ClusterClass,
    wanted: &'a [MachineDeploymentTopology],
    existing: &'a [MachineDeployment],
    blueprint: Option<&'a Blueprint>,
}

/// The blueprint a step that makes something needs; `plan` builds one whenever there is.
fn needed(bp: Option<&Blueprint>) -> Result<&Blueprint, Error> {
    bp.ok_or_else(|| Error::Invalid("the topology's blueprint was not built".into()))
}

/// Where the control plane is on its way to the topology's version: whether workers may be
/// made or moved to it now. As Cluster API's topology controller judges it, a control plane
/// not made yet (the first pass, which makes it) holds nothing back, so the
/// MachineDeployments are made in the same pass; one that exists holds them back while it
/// reports no version (no machine yet) or runs, or is to run, another version. `kcp` is
/// `None` for a control plane this pass made.
struct ControlPlaneProgress {
    kind: String,
    provisioning: bool,
    upgrading: bool,
}

impl ControlPlaneProgress {
    fn stable(&self) -> bool {
        !self.provisioning && !self.upgrading
    }
}

fn progress(kcp: Option<&KubeadmControlPlane>, version: &str) -> ControlPlaneProgress {
    let Some(kcp) = kcp else {
        return ControlPlaneProgress {
            kind: "KubeadmControlPlane".into(),
            provisioning: false,
            upgrading: false,
        };
    };
    let status = kcp.status.as_ref();
    let current = status.and_then(|s| s.version.clone()).or_else(|| {
        status
            .and_then(|s| s.versions.as_ref())
            .and_then(|v| v.first())
            .map(|v| v.version.clone())
    });
    ControlPlaneProgress {
        kind: "KubeadmControlPlane".into(),
        provisioning: current.is_none(),
        upgrading: current.is_some_and(|current| current != version || kcp.spec.version != version),
    }
}

fn condition(version: &str, cp: &ControlPlaneProgress, pending: Vec<String>) -> Condition {
    if cp.upgrading || !pending.is_empty() {
        // Cluster API's message: the target, then one indented line per part held back.
        let mut message = format!("Cluster is upgrading to {version}");
        if cp.upgrading {
            message.push_str(&format!("\n  * {} upgrading to version {version}", cp.kind));
        }
        for line in &pending {
            message.push_str(&format!("\n  * {line}"));
        }
        return Condition::new("TopologyReconciled", false, "ClusterUpgrading", message);
    }
    Condition::new("TopologyReconciled", true, "ReconcileSucceeded", "")
}

/// Sets `field` (`infrastructureRef` or `controlPlaneRef`) on the Cluster.
async fn set_ref(
    c: &mut Cluster,
    r: &Reconciler<Cluster>,
    field: &str,
    reference: &ContractRef,
) -> Result<(), Error> {
    let api: Api<Cluster> = r.api(&c.namespace().unwrap_or_default());
    let mut labels = owned_labels(c);
    labels.extend(c.labels().clone());
    let patch = json!({"metadata": {"labels": labels}, "spec": {field: reference}});
    *c = merge_patch(&api, &c.name_any(), &patch).await?;
    Ok(())
}

/// An object of the kind `template_ref` makes that this Cluster's topology made before (its
/// labels, and the Cluster as its controller): a reconcile that read the Cluster before the
/// reference to it was written must find it, not make a second one.
async fn made_before(
    c: &Cluster,
    r: &Reconciler<Cluster>,
    template_ref: &TemplateRef,
) -> Result<Option<ContractRef>, Error> {
    let ns = c.namespace().unwrap_or_default();
    let kind = template_ref
        .kind
        .strip_suffix("Template")
        .unwrap_or(&template_ref.kind);
    let made = TemplateRef {
        kind: kind.to_string(),
        ..template_ref.clone()
    };
    let selector = format!("{CLUSTER_NAME_LABEL}={},{OWNED_LABEL}", c.name_any());
    let uid = c.uid().unwrap_or_default();
    let mut found: Vec<_> = r
        .core
        .resolver
        .template_api(&r.client(), &ns, &made)
        .await?
        .list(&ListParams::default().labels(&selector))
        .await?
        .items
        .into_iter()
        .filter(|o| {
            o.owner_references()
                .iter()
                .any(|x| x.uid == uid && x.controller == Some(true))
        })
        .collect();
    found.sort_by_key(|o| o.metadata.creation_timestamp.clone().map(|t| t.0));
    Ok(found.first().map(|o| ContractRef {
        api_group: contract(&made).api_group,
        kind: kind.to_string(),
        name: o.name_any(),
    }))
}

async fn infrastructure(
    c: &mut Cluster,
    r: &Reconciler<Cluster>,
    bp: Option<&Blueprint>,
) -> Result<(), Error> {
    if c.spec.infrastructure_ref.is_some() {
        return Ok(());
    }
    let ns = c.namespace().unwrap_or_default();
    let bp = needed(bp)?;
    let template = &bp.infrastructure;
    let template_ref = template_ref_of(template);
    if let Some(existing) = made_before(c, r, &template_ref).await? {
        return set_ref(c, r, "infrastructureRef", &existing).await;
    }
    let name = format!("{}-{}", c.name_any(), super::objects::random_suffix());
    let created = apply_template_clone(
        &r.client(),
        &ns,
        template,
        infrastructure_clone(c, &name),
        TOPOLOGY_MANAGER,
        None,
    )
    .await?;
    set_ref(c, r, "infrastructureRef", &created).await
}

/// The reference to a template read from the API (its own apiVersion, kind and name).
fn template_ref_of(template: &DynamicObject) -> TemplateRef {
    let types = template.types.clone().unwrap_or_default();
    TemplateRef {
        api_version: types.api_version,
        kind: types.kind,
        name: template.name_any(),
    }
}

async fn control_plane(
    c: &mut Cluster,
    r: &Reconciler<Cluster>,
    class: &ClusterClass,
    bp: Option<&Blueprint>,
) -> Result<(), Error> {
    let ns = c.namespace().unwrap_or_default();
    let topology = c.spec.topology.clone().unwrap_or_default();
    let replicas = topology.control_plane.as_ref().and_then(|cp| cp.replicas);
    if let Some(cp_ref) = c.spec.control_plane_ref.clone() {
        return flow_down(r, &ns, &cp_ref, &topology.version, replicas).await;
    }
    if let Some(existing) = made_before(c, r, &class.spec.control_plane.template_ref).await? {
        return set_ref(c, r, "controlPlaneRef", &existing).await;
    }
    let bp = needed(bp)?;
    let labels = owned_labels(c);
    let machine_template =
        control_plane_machine_template(c, r, class, bp, &topology, &labels).await?;
    let created = apply_template_clone(
        &r.client(),
        &ns,
        &bp.control_plane,
        control_plane_clone(c, &bp.control_plane_name, machine_template),
        TOPOLOGY_MANAGER,
        None,
    )
    .await?;
    set_ref(c, r, "controlPlaneRef", &created).await
}

/// Patches the existing control plane with the topology's version and replicas where they
/// differ, so changes to the Cluster's topology reach it.
async fn flow_down(
    r: &Reconciler<Cluster>,
    ns: &str,
    cp_ref: &ContractRef,
    version: &str,
    replicas: Option<i32>,
) -> Result<(), Error> {
    // Replicas and version flow down.
    let api: Api<KubeadmControlPlane> = r.api(ns);
    // From the cache: a copy a moment old only repeats a patch of the same values.
    let Some(kcp) = r
        .core
        .informers
        .get::<KubeadmControlPlane>(ns, &cp_ref.name)
        .await?
    else {
        return Ok(());
    };
    let mut spec = serde_json::Map::new();
    if kcp.spec.version != version {
        spec.insert("version".into(), json!(version));
    }
    if replicas.is_some() && kcp.spec.replicas != replicas {
        spec.insert("replicas".into(), json!(replicas));
    }
    if !spec.is_empty() {
        merge_patch(&api, &cp_ref.name, &json!({"spec": spec})).await?;
    }
    Ok(())
}

/// The control plane's `machineTemplate`: the class's and the topology's machine metadata,
/// and a copy of the class's machine infrastructure template if it names one.
async fn control_plane_machine_template(
    c: &Cluster,
    r: &Reconciler<Cluster>,
    class: &ClusterClass,
    bp: &Blueprint,
    topology: &Topology,
    labels: &BTreeMap<String, String>,
) -> Result<Value, Error> {
    let ns = c.namespace().unwrap_or_default();
    // The control plane's machines get the class's and the topology's metadata.
    let mut machine_labels = labels.clone();
    let mut machine_annotations = BTreeMap::new();
    for meta in [
        class.spec.control_plane.metadata.clone(),
        topology
            .control_plane
            .as_ref()
            .and_then(|t| t.metadata.clone()),
    ]
    .into_iter()
    .flatten()
    {
        machine_labels.extend(meta.labels);
        machine_annotations.extend(meta.annotations);
    }
    let mut machine_template =
        json!({"metadata": {"labels": machine_labels, "annotations": machine_annotations}});
    if let Some((source, name)) = &bp.control_plane_machines {
        let owner = owner_ref(c, false);
        let copy = copy_template(
            &r.client(),
            &ns,
            source,
            name,
            labels,
            owner,
            TOPOLOGY_MANAGER,
        )
        .await?;
        machine_template["spec"] = json!({"infrastructureRef": contract(&copy)});
    }
    Ok(machine_template)
}

/// One MachineDeployment per topology entry; entries removed from the topology go.
async fn machine_deployments(
    c: &Cluster,
    r: &Reconciler<Cluster>,
    made: &Deployments<'_>,
    cp: &ControlPlaneProgress,
    pending: &mut Vec<String>,
) -> Result<(), Error> {
    let ns = c.namespace().unwrap_or_default();
    let api: Api<MachineDeployment> = r.api(&ns);
    let (wanted, existing) = (made.wanted, made.existing);
    let version = c
        .spec
        .topology
        .as_ref()
        .map(|t| t.version.clone())
        .unwrap_or_default();
    for md in wanted {
        let current = existing
            .iter()
            .find(|e| e.labels().get(DEPLOYMENT_LABEL) == Some(&md.name));
        match current {
            None if cp.stable() => create_md(c, r, made.class, needed(made.blueprint)?, md).await?,
            None => pending.push(format!(
                "MachineDeployment {} creation deferred while control plane upgrade is in progress",
                md.name
            )),
            Some(current) => {
                let mut spec = serde_json::Map::new();
                if md.replicas.is_some() && current.spec.replicas != md.replicas {
                    spec.insert("replicas".into(), json!(md.replicas));
                }
                let (policy, _) = md_policy(md);
                let have = serde_json::to_value(&current.spec).unwrap_or_default();
                for (key, wanted) in policy {
                    if !covers(have.get(&key), &wanted) {
                        spec.insert(key, wanted);
                    }
                }
                if current.spec.template.spec.version.as_deref() != Some(version.as_str()) {
                    if cp.stable() {
                        spec.insert("template".into(), json!({"spec": {"version": version}}));
                    } else {
                        pending.push(format!(
                            "MachineDeployment {} upgrade deferred while control plane upgrade is in progress",
                            md.name
                        ));
                    }
                }
                if !spec.is_empty() {
                    merge_patch(&api, &current.name_any(), &json!({"spec": spec})).await?;
                }
            }
        }
    }
    for gone in existing.iter().filter(|e| {
        e.metadata.deletion_timestamp.is_none()
            && !wanted
                .iter()
                .any(|w| e.labels().get(DEPLOYMENT_LABEL) == Some(&w.name))
    }) {
        api.delete(&gone.name_any(), &DeleteParams::default())
            .await?;
    }
    Ok(())
}

async fn create_md(
    c: &Cluster,
    r: &Reconciler<Cluster>,
    class: &ClusterClass,
    bp: &Blueprint,
    md: &MachineDeploymentTopology,
) -> Result<(), Error> {
    let ns = c.namespace().unwrap_or_default();
    let (bootstrap_template, infra_template, names) =
        bp.deployments.get(&md.name).ok_or_else(|| {
            Error::Invalid(format!(
                "MachineDeploymentClass {} not found in ClusterClass {}",
                md.class,
                c.spec
                    .topology
                    .as_ref()
                    .map(|t| t.class_ref.name.clone())
                    .unwrap_or_default()
            ))
        })?;
    let md_class: Option<&MachineDeploymentClass> = class
        .spec
        .workers
        .as_ref()
        .and_then(|w| w.machine_deployments.iter().find(|m| m.class == md.class));
    let mut labels = owned_labels(c);
    labels.insert(DEPLOYMENT_LABEL.into(), md.name.clone());
    let client = r.client();
    let bootstrap = copy_template(
        &client,
        &ns,
        bootstrap_template,
        &names.bootstrap,
        &labels,
        owner_ref(c, false),
        TOPOLOGY_MANAGER,
    )
    .await?;
    let infra = copy_template(
        &client,
        &ns,
        infra_template,
        &names.infrastructure,
        &labels,
        owner_ref(c, false),
        TOPOLOGY_MANAGER,
    )
    .await?;
    let mut template_labels = labels.clone();
    let mut template_annotations = BTreeMap::new();
    for meta in [
        md_class.and_then(|m| m.metadata.clone()),
        md.metadata.clone(),
    ]
    .into_iter()
    .flatten()
    {
        template_labels.extend(meta.labels);
        template_annotations.extend(meta.annotations);
    }
    let version = c.spec.topology.as_ref().map(|t| t.version.clone());
    let (policy, machine_policy) = md_policy(md);
    let mut object = json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineDeployment",
        "metadata": {"name": names.deployment, "namespace": ns,
                     "labels": labels, "ownerReferences": [owner_ref(c, false)]},
        "spec": {
            "clusterName": c.name_any(), "replicas": md.replicas.unwrap_or(1),
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": template_labels, "annotations": template_annotations},
                         "spec": {"clusterName": c.name_any(), "version": version,
                                  "bootstrap": {"configRef": contract(&bootstrap)},
                                  "infrastructureRef": contract(&infra),
                                  "failureDomain": md.failure_domain}},
        },
    });
    if let Some(spec) = object["spec"].as_object_mut() {
        spec.extend(policy);
    }
    if let Some(spec) = object["spec"]["template"]["spec"].as_object_mut() {
        spec.extend(machine_policy);
    }
    let object: MachineDeployment =
        serde_json::from_value(object).map_err(kube::Error::SerdeError)?;
    r.api::<MachineDeployment>(&ns)
        .create(&PostParams::default(), &object)
        .await?;
    Ok(())
}

/// What a topology's MachineDeployment says of how it rolls out and shrinks, as fields of
/// the MachineDeployment's spec (`rollout.strategy`, `deletion.order`), and of its Machines
/// (the node deletion timeouts, `minReadySeconds`) as fields of their template's spec.
fn md_policy(
    md: &MachineDeploymentTopology,
) -> (
    serde_json::Map<String, Value>,
    serde_json::Map<String, Value>,
) {
    let (mut spec, mut machine) = (serde_json::Map::new(), serde_json::Map::new());
    if let Some(strategy) = md.rest.get("rollout").and_then(|r| r.get("strategy")) {
        spec.insert("rollout".into(), json!({"strategy": strategy}));
    }
    if let Some(deletion) = md.rest.get("deletion").and_then(Value::as_object) {
        if let Some(order) = deletion.get("order") {
            spec.insert("deletion".into(), json!({"order": order}));
        }
        let timeouts: serde_json::Map<String, Value> = deletion
            .iter()
            .filter(|(k, _)| k.as_str() != "order")
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if !timeouts.is_empty() {
            machine.insert("deletion".into(), Value::Object(timeouts));
        }
    }
    if let Some(min_ready) = md.rest.get("minReadySeconds") {
        machine.insert("minReadySeconds".into(), min_ready.clone());
    }
    (spec, machine)
}

/// The class's health checks: one for the control plane, one per MachineDeployment that has
/// one, named after what they watch.
async fn health_checks(
    c: &Cluster,
    r: &Reconciler<Cluster>,
    class: &ClusterClass,
    kcp: Option<&KubeadmControlPlane>,
) -> Result<(), Error> {
    let ns = c.namespace().unwrap_or_default();
    let mut wanted: Vec<(String, BTreeMap<String, String>, Value)> = Vec::new();
    if let (Some(check), Some(kcp)) = (&class.spec.control_plane.health_check, kcp) {
        let selector = BTreeMap::from([
            (CLUSTER_NAME_LABEL.to_string(), c.name_any()),
            (CONTROL_PLANE_LABEL.to_string(), String::new()),
        ]);
        wanted.push((kcp.name_any(), selector, check.clone()));
    }
    // Read from the shared cache: a MachineDeployment made a moment ago and not there yet
    // brings the Cluster back when it is (the Cluster owns it), and its check is made then.
    let core = &r.core;
    let mds = core
        .in_cluster(&core.deployments, &ns, &c.name_any())
        .await?;
    for md in mds
        .iter()
        .filter(|md| md.labels().contains_key(OWNED_LABEL))
    {
        let topology_name = md
            .labels()
            .get(DEPLOYMENT_LABEL)
            .cloned()
            .unwrap_or_default();
        let class_name = c
            .spec
            .topology
            .as_ref()
            .and_then(|t| t.workers.as_ref())
            .and_then(|w| {
                w.machine_deployments
                    .iter()
                    .find(|m| m.name == topology_name)
            })
            .map(|m| m.class.clone());
        let check = class
            .spec
            .workers
            .as_ref()
            .and_then(|w| {
                w.machine_deployments
                    .iter()
                    .find(|m| Some(&m.class) == class_name.as_ref())
            })
            .and_then(|m| m.health_check.clone());
        if let Some(check) = check {
            let labels = md.spec.selector.match_labels.clone().unwrap_or_default();
            wanted.push((md.name_any(), labels, check));
        }
    }
    let api: Api<MachineHealthCheck> = r.api(&ns);
    for (name, selector, check) in wanted {
        if core
            .informers
            .get::<MachineHealthCheck>(&ns, &name)
            .await?
            .is_some()
        {
            continue;
        }
        let mut spec = json!({"clusterName": c.name_any(), "selector": {"matchLabels": selector}});
        if let Some(checks) = check.get("checks") {
            spec["checks"] = checks.clone();
        }
        if let Some(remediation) = check.get("remediation") {
            spec["remediation"] = remediation.clone();
        }
        let mhc: MachineHealthCheck = serde_json::from_value(json!({
            "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineHealthCheck",
            "metadata": {"name": name, "namespace": ns, "labels": owned_labels(c), "ownerReferences": [owner_ref(c, false)]},
            "spec": spec,
        }))
        .map_err(kube::Error::SerdeError)?;
        match api.create(&PostParams::default(), &mhc).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 409 => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_policy_already_in_place_needs_no_patch() {
        let have = json!({"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}}, "after": "x"});
        assert!(covers(
            Some(&have),
            &json!({"strategy": {"type": "RollingUpdate"}})
        ));
        assert!(!covers(
            Some(&have),
            &json!({"strategy": {"rollingUpdate": {"maxSurge": 2}}})
        ));
        assert!(!covers(None, &json!({"order": "Oldest"})));
        // A list's items may carry defaults; another length or value is a change.
        let files = json!({"files": [{"path": "/a", "content": "x", "encoding": "base64"}]});
        assert!(covers(
            Some(&files),
            &json!({"files": [{"path": "/a", "content": "x"}]})
        ));
        assert!(!covers(
            Some(&files),
            &json!({"files": [{"path": "/a", "content": "y"}]})
        ));
        assert!(!covers(Some(&files), &json!({"files": []})));
    }
}
