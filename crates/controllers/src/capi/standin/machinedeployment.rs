//! The MachineDeployment controller: one MachineSet per template, rolled from the old ones to
//! the new one within `maxSurge` and `maxUnavailable` (`RollingUpdate`, the default) or as the
//! user deletes old machines (`OnDelete`), and replica counts summed over the sets.

use super::machineset::{replica_status, selector_string};
use super::merge_patch;
use super::objects::{owner_ref, random_suffix, with_owner};
use super::{apply_status, in_place, paused, Core, Error, Reconciler};
use crate::capi::core::{
    Cluster, Machine, MachineDeployment, MachineSet, MachineSpec, ObjectMetaTemplate, ReplicaStatus,
};
use crate::capi::CLUSTER_NAME_LABEL;
use crate::capi::DEPLOYMENT_NAME_LABEL;
use infrasim_controller_runtime::conditions::{self, Condition};
use infrasim_controller_runtime::reconcile::{Cleanup, Next, Reconcile};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use kube::ResourceExt;
use serde_json::json;
use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

pub const FINALIZER: &str = "cluster.x-k8s.io/machinedeployment";
const TEMPLATE_HASH_LABEL: &str = "machine-template-hash";
/// The replicas a deployment wanted when it wrote the set (upstream's annotation).
const DESIRED_REPLICAS: &str = "machinedeployment.clusters.x-k8s.io/desired-replicas";

pub(super) async fn run(core: Arc<Core>) {
    let informers = core.informers.clone();
    let controller = super::controller_for::<MachineDeployment>(&core).owns_shared_stream(
        infrasim_controller_runtime::triggers::every_change(&informers.of::<MachineSet>()),
    );
    let ctx = core.ctx.clone();
    infrasim_controller_runtime::reconcile::run(&ctx, controller, Arc::new(Reconciler::new(core)))
        .await;
}

/// What makes two Machine templates the same rollout: version, bootstrap, infrastructure and
/// failure domain (other fields are changed in place).
pub(super) fn rollout_key(spec: &MachineSpec) -> String {
    json!([
        spec.version,
        spec.bootstrap,
        spec.infrastructure_ref,
        spec.failure_domain
    ])
    .to_string()
}

fn count(v: &Option<IntOrString>, total: i32, default: i32, round_up: bool) -> i32 {
    match v {
        Some(IntOrString::Int(n)) => *n,
        Some(IntOrString::String(s)) => {
            let p: i32 = s.trim_end_matches('%').parse().unwrap_or(0);
            if round_up {
                (p * total + 99) / 100
            } else {
                p * total / 100
            }
        }
        None => default,
    }
}

/// The sets a deployment controls, oldest first.
async fn owned_sets(
    api: &Api<MachineSet>,
    md: &MachineDeployment,
) -> Result<Vec<MachineSet>, kube::Error> {
    let uid = md.uid().unwrap_or_default();
    let selector = format!("{CLUSTER_NAME_LABEL}={}", md.spec.cluster_name);
    let mut sets: Vec<MachineSet> = api
        .list(&ListParams::default().labels(&selector))
        .await?
        .items
        .into_iter()
        .filter(|s| {
            s.owner_references()
                .iter()
                .any(|o| o.uid == uid && o.controller == Some(true))
        })
        .collect();
    sets.sort_by_key(|s| {
        (
            s.metadata.creation_timestamp.clone().map(|t| t.0),
            s.name_any(),
        )
    });
    Ok(sets)
}

/// The field manager this controller writes under: the stand-in's and its own name (see
/// [`infrasim_controller_runtime::writes`]).
const MANAGER: &str = "infrasim-capi-core/machinedeployment";

/// Every MachineDeployment holds [`FINALIZER`] from its first reconcile: its MachineSets go
/// before it does.
impl Reconcile<MachineDeployment> for Reconciler<MachineDeployment> {
    type Error = Error;
    const FINALIZER: Option<&'static str> = Some(FINALIZER);

    async fn apply(&self, md: Arc<MachineDeployment>) -> Result<Next, Error> {
        let _running = infrasim_controller_runtime::metrics::reconciled("MachineDeployment");
        apply(&md, self).await
    }

    /// Its MachineSets are deleted; it is done once none is left.
    async fn cleanup(&self, md: Arc<MachineDeployment>) -> Result<Cleanup, Error> {
        let _running = infrasim_controller_runtime::metrics::reconciled("MachineDeployment");
        let sets_api: Api<MachineSet> = self.api(&md.namespace().unwrap_or_default());
        let sets = owned_sets(&sets_api, &md).await?;
        for s in sets
            .iter()
            .filter(|s| s.metadata.deletion_timestamp.is_none())
        {
            sets_api
                .delete(&s.name_any(), &DeleteParams::default())
                .await?;
        }
        Ok(if sets.is_empty() {
            Cleanup::Done
        } else {
            Cleanup::Pending(Next::AwaitChange)
        })
    }
}

/// The MachineSet of the current template, the rollout off the old ones; then the status.
async fn apply(md: &MachineDeployment, r: &Reconciler<MachineDeployment>) -> Result<Next, Error> {
    let ns = md.namespace().unwrap_or_default();
    let api: Api<MachineDeployment> = r.api(&ns);
    let sets_api: Api<MachineSet> = r.api(&ns);
    let sets = owned_sets(&sets_api, md).await?;
    let Some(cluster) = r
        .core
        .informers
        .get::<Cluster>(&ns, &md.spec.cluster_name)
        .await?
    else {
        return Ok(Next::AwaitChange);
    };
    adopt_by_cluster(&api, md, &cluster).await?;
    let now = r.core.ctx.now();
    let mut status = md.status.clone().unwrap_or_default();
    let mut conds = status.conditions.take().unwrap_or_default();
    if conditions::set_paused(
        &mut conds,
        paused(md, cluster.paused() || md.spec.paused.unwrap_or(false)),
        now,
    ) {
        status.conditions = Some(conds);
        apply_status(&api, md, MANAGER, &status).await?;
        return Ok(Next::AwaitChange);
    }
    let key = rollout_key(&md.spec.template.spec);
    let new = match sets
        .iter()
        .find(|s| rollout_key(&s.spec.template.spec) == key)
    {
        Some(s) => s.clone(),
        None => create_set(md, r, sets.is_empty()).await?,
    };
    let old: Vec<&MachineSet> = sets.iter().filter(|s| s.uid() != new.uid()).collect();
    sync_set(md, &sets_api, &new).await?;
    roll(md, &sets_api, &new, &old).await?;
    let status = deployment_status(md, r, &sets, conds).await?;
    apply_status(&api, md, MANAGER, &status).await?;
    Ok(Next::AwaitChange)
}

/// A deployment belongs to its Cluster (and carries its label), as the core makes it.
async fn adopt_by_cluster(
    api: &Api<MachineDeployment>,
    md: &MachineDeployment,
    cluster: &Cluster,
) -> Result<(), Error> {
    let owners = with_owner(md.owner_references(), &owner_ref(cluster, false));
    let labelled = md.labels().get(CLUSTER_NAME_LABEL) == Some(&cluster.name_any());
    if owners.is_none() && labelled {
        return Ok(());
    }
    let mut patch = json!({"metadata": {"labels": {CLUSTER_NAME_LABEL: cluster.name_any()}}});
    if let Some(o) = owners {
        patch["metadata"]["ownerReferences"] = json!(o);
    }
    merge_patch(api, &md.name_any(), &patch).await?;
    Ok(())
}

/// A new MachineSet for the deployment's current template.
async fn create_set(
    md: &MachineDeployment,
    r: &Reconciler<MachineDeployment>,
    first: bool,
) -> Result<MachineSet, Error> {
    let ns = md.namespace().unwrap_or_default();
    let suffix = random_suffix();
    let name = format!("{}-{suffix}", md.name_any());
    let mut h = std::collections::hash_map::DefaultHasher::new();
    rollout_key(&md.spec.template.spec).hash(&mut h);
    let hash = format!("{}-{suffix}", h.finish() as u32);
    let desired = md.spec.replicas.unwrap_or(1);
    let mut template = md.spec.template.clone();
    let mut meta = template.metadata.take().unwrap_or_default();
    meta.labels.insert(TEMPLATE_HASH_LABEL.into(), hash.clone());
    meta.labels
        .insert(DEPLOYMENT_NAME_LABEL.into(), md.name_any());
    meta.labels
        .insert(CLUSTER_NAME_LABEL.into(), md.spec.cluster_name.clone());
    template.metadata = Some(meta.clone());
    let mut selector = md.spec.selector.clone();
    selector
        .match_labels
        .get_or_insert_with(Default::default)
        .insert(TEMPLATE_HASH_LABEL.into(), hash);
    let set = json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineSet",
        "metadata": {"name": name, "namespace": ns, "labels": meta.labels,
                     "annotations": set_annotations(md, &desired.to_string()),
                     "ownerReferences": [owner_ref(md, true)]},
        "spec": {"clusterName": md.spec.cluster_name, "replicas": if first { desired } else { 0 },
                 "selector": selector, "template": template, "deletion": md.spec.deletion},
    });
    // Made with an apply under this controller's manager, which then owns what it
    // propagates in place (see `sync_set`).
    let created = r
        .api::<MachineSet>(&ns)
        .patch(
            &name,
            &PatchParams::apply(MANAGER).force(),
            &Patch::Apply(&set),
        )
        .await?;
    r.core
        .ctx
        .event(
            md,
            false,
            "SuccessfulCreate",
            format!("Created MachineSet {name}"),
        )
        .await;
    Ok(created)
}

/// A set's annotations: the deployment's own (as upstream copies them, but kubectl's record
/// of its last apply) and the replicas the deployment wanted when it was written.
fn set_annotations(md: &MachineDeployment, desired_replicas: &str) -> BTreeMap<String, String> {
    let mut annotations: BTreeMap<String, String> = md
        .annotations()
        .iter()
        .filter(|(k, _)| k.as_str() != "kubectl.kubernetes.io/last-applied-configuration")
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    annotations.insert(DESIRED_REPLICAS.into(), desired_replicas.into());
    annotations
}

/// In-place propagation to the deployment's current MachineSet, as upstream's
/// `computeDesiredMachineSet` does for an existing set: the template's labels and
/// annotations (into the set's labels and its own template), the deployment's annotations,
/// the template's readiness gates, deletion timeouts and `minReadySeconds`, and the
/// deletion order. Everything else stays as the set has it; the set passes the rest on to
/// its Machines (see `machineset::sync_machines`).
async fn sync_set(
    md: &MachineDeployment,
    api: &Api<MachineSet>,
    set: &MachineSet,
) -> Result<(), Error> {
    let wanted = md.spec.template.metadata.clone().unwrap_or_default();
    let mut labels = wanted.labels;
    if let Some(hash) = set.labels().get(TEMPLATE_HASH_LABEL) {
        labels.insert(TEMPLATE_HASH_LABEL.into(), hash.clone());
    }
    labels.insert(DEPLOYMENT_NAME_LABEL.into(), md.name_any());
    labels.insert(CLUSTER_NAME_LABEL.into(), md.spec.cluster_name.clone());
    let replicas = set
        .annotations()
        .get(DESIRED_REPLICAS)
        .cloned()
        .unwrap_or_default();
    let annotations = set_annotations(md, &replicas);
    let mut spec = set.spec.clone();
    spec.template.metadata = Some(ObjectMetaTemplate {
        labels: labels.clone(),
        annotations: wanted.annotations,
    });
    let from = &md.spec.template.spec;
    spec.template.spec.readiness_gates = from.readiness_gates.clone();
    spec.template.spec.deletion = from.deletion.clone();
    spec.template.spec.min_ready_seconds = from.min_ready_seconds;
    spec.deletion = md.spec.deletion.clone();
    if spec == set.spec && in_place::metadata_current(&set.metadata, MANAGER, &labels, &annotations)
    {
        return Ok(());
    }
    let body = json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineSet",
        "metadata": {"name": set.name_any(), "labels": labels, "annotations": annotations,
                     "ownerReferences": [owner_ref(md, true)]},
        "spec": spec,
    });
    in_place::apply(api, &set.name_any(), MANAGER, &body).await
}

/// Moves replicas from the old sets to the new one.
async fn roll(
    md: &MachineDeployment,
    api: &Api<MachineSet>,
    new: &MachineSet,
    old: &[&MachineSet],
) -> Result<(), Error> {
    let desired = md.spec.replicas.unwrap_or(1);
    let strategy = md.spec.rollout.as_ref().and_then(|r| r.strategy.clone());
    let on_delete = strategy.as_ref().is_some_and(|s| s.type_ == "OnDelete");
    let rolling = strategy.and_then(|s| s.rolling_update).unwrap_or_default();
    let surge = count(&rolling.max_surge, desired, 1, true);
    let unavailable = count(&rolling.max_unavailable, desired, 0, false);
    let spec = |s: &MachineSet| s.spec.replicas.unwrap_or(0);
    let status = |s: &MachineSet, f: fn(&ReplicaStatus) -> Option<i32>| {
        s.status.as_ref().and_then(f).unwrap_or(0)
    };
    let old_spec: i32 = old.iter().map(|s| spec(s)).sum();
    let mut target_new = spec(new);
    if on_delete {
        let old_current: i32 = old.iter().map(|s| status(s, |st| st.replicas)).sum();
        target_new = (desired - old_current).max(0);
    } else if old.is_empty() {
        target_new = desired;
    } else {
        let room =
            desired + surge.max(if unavailable == 0 { 1 } else { 0 }) - (target_new + old_spec);
        target_new = (target_new + room.max(0)).min(desired);
    }
    set_replicas(api, new, target_new).await?;
    if on_delete {
        return Ok(());
    }
    // Old replicas go only as far as availability allows.
    let available: i32 = std::iter::once(new)
        .chain(old.iter().copied())
        .map(|s| status(s, |st| st.available_replicas))
        .sum();
    let min_available = desired - unavailable;
    let mut removable = (available - min_available).max(0);
    for s in old {
        let unready = (spec(s) - status(s, |st| st.available_replicas)).max(0);
        let cut = (unready + removable).min(spec(s));
        removable -= (cut - unready).max(0);
        let next = spec(s) - cut;
        if next == 0 && status(s, |st| st.replicas) == 0 {
            api.delete(&s.name_any(), &DeleteParams::default()).await?;
        } else {
            set_replicas(api, s, next).await?;
        }
    }
    Ok(())
}

async fn set_replicas(api: &Api<MachineSet>, s: &MachineSet, n: i32) -> Result<(), Error> {
    if s.spec.replicas == Some(n) {
        return Ok(());
    }
    let patch = json!({"spec": {"replicas": n}});
    merge_patch(api, &s.name_any(), &patch).await?;
    Ok(())
}

async fn deployment_status(
    md: &MachineDeployment,
    r: &Reconciler<MachineDeployment>,
    sets: &[MachineSet],
    conds: Vec<infrasim_controller_runtime::conditions::Condition>,
) -> Result<ReplicaStatus, Error> {
    let ns = md.namespace().unwrap_or_default();
    // The sets' Machines, read from the shared cache: this only counts them.
    let core = &r.core;
    let sets: std::collections::HashSet<String> = sets.iter().filter_map(|s| s.uid()).collect();
    let machines: Vec<Machine> = core
        .in_cluster(&core.machines, &ns, &md.spec.cluster_name)
        .await?
        .iter()
        .filter(|m| {
            m.owner_references()
                .iter()
                .any(|o| o.controller == Some(true) && sets.contains(&o.uid))
        })
        .map(|m| (**m).clone())
        .collect();
    let desired = md.spec.replicas.unwrap_or(1);
    let now = r.core.ctx.now();
    let mut status = replica_status(
        &md.spec.selector,
        &machines,
        desired,
        conds,
        now,
        md.metadata.generation,
        None,
    );
    status.selector = Some(selector_string(&md.spec.selector));
    let rolling = md
        .spec
        .rollout
        .as_ref()
        .and_then(|r| r.strategy.clone())
        .and_then(|s| s.rolling_update)
        .unwrap_or_default();
    let min_available = desired - count(&rolling.max_unavailable, desired, 0, false);
    let available = status.available_replicas.unwrap_or(0);
    let mut conds = status.conditions.take().unwrap_or_default();
    let avail = if available >= min_available {
        Condition::new("Available", true, "Available", "")
    } else {
        Condition::new("Available", false, "NotAvailable", format!("{available} available replicas, at least {min_available} required (spec.strategy.rollout.maxUnavailable is {}, spec.replicas is {desired})", desired - min_available))
    };
    conditions::set(&mut conds, avail, now);
    let up = status.up_to_date_replicas.unwrap_or(0);
    let rolling_out = up < status.replicas.unwrap_or(0);
    conditions::set(
        &mut conds,
        Condition::new(
            "RollingOut",
            rolling_out,
            if rolling_out {
                "RollingOut"
            } else {
                "NotRollingOut"
            },
            "",
        ),
        now,
    );
    conditions::sort(&mut conds);
    let counters = serde_json::json!({
        "readyReplicas": status.ready_replicas.unwrap_or(0),
        "availableReplicas": available,
        "updatedReplicas": up,
        "unavailableReplicas": (desired - available).max(0),
    });
    status.deprecated = Some(super::v1beta1::deprecated(
        &super::v1beta1::MACHINE_DEPLOYMENT,
        &conds,
        counters,
        md.status.as_ref().and_then(|s| s.deprecated.as_ref()),
        now,
    ));
    status.conditions = Some(conds);
    let current = status.replicas.unwrap_or(0);
    status.phase = Some(
        if desired == current {
            "Running"
        } else if desired < current {
            "ScalingDown"
        } else {
            "ScalingUp"
        }
        .into(),
    );
    Ok(status)
}
