//! The MachineSet controller: keeps `spec.replicas` Machines of its template, each with a
//! bootstrap config and an infrastructure machine cloned from the template's templates;
//! removes the excess (deletion order `Random`, `Newest` or `Oldest`, machines marked for
//! deletion first).

use super::delete_if_present;
use super::healthcheck::targets::REMEDIATE_ANNOTATION;
use super::objects::{clone_template, owner_ref, random_suffix, CloneSpec};
use super::remediation::{self, OWNER_MANAGER};
use super::{apply_status, in_place, paused, Core, Error, Reconciler};
use crate::capi::core::{
    Cluster, ContractRef, Machine, MachineDeployment, MachineSet, MachineSpec, ReplicaStatus,
};
use crate::capi::{CLUSTER_NAME_LABEL, DEPLOYMENT_NAME_LABEL, MACHINE_FINALIZER, SET_NAME_LABEL};
use infrasim_controller_runtime::conditions::{self, Condition};
use infrasim_controller_runtime::reconcile::{Cleanup, Next, Reconcile};
use kube::api::{Api, DeleteParams, ListParams};
use kube::ResourceExt;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::Arc;

pub const FINALIZER: &str = "cluster.x-k8s.io/machineset";
const DELETE_MACHINE_ANNOTATION: &str = "cluster.x-k8s.io/delete-machine";

pub(super) async fn run(core: Arc<Core>) {
    let machines = core.informers.of::<Machine>();
    let controller = super::controller_for::<MachineSet>(&core).owns_shared_stream(
        infrasim_controller_runtime::triggers::filtered(
            &machines,
            crate::capi::triggers::machine_summary,
        ),
    );
    let ctx = core.ctx.clone();
    infrasim_controller_runtime::reconcile::run(&ctx, controller, Arc::new(Reconciler::new(core)))
        .await;
}

/// The Machines a set controls, oldest first.
pub(super) async fn owned_machines(
    api: &Api<Machine>,
    ms: &MachineSet,
) -> Result<Vec<Machine>, kube::Error> {
    let selector = format!("{CLUSTER_NAME_LABEL}={}", ms.spec.cluster_name);
    let uid = ms.uid().unwrap_or_default();
    let mut list: Vec<Machine> = api
        .list(&ListParams::default().labels(&selector))
        .await?
        .items
        .into_iter()
        .filter(|m| {
            m.owner_references()
                .iter()
                .any(|o| o.uid == uid && o.controller == Some(true))
        })
        .collect();
    list.sort_by_key(|m| {
        (
            m.metadata.creation_timestamp.clone().map(|t| t.0),
            m.name_any(),
        )
    });
    Ok(list)
}

/// The field manager this controller writes under: the stand-in's and its own name (see
/// [`infrasim_controller_runtime::writes`]).
const MANAGER: &str = "infrasim-capi-core/machineset";

/// Every MachineSet holds [`FINALIZER`] from its first reconcile: its Machines go before it
/// does.
impl Reconcile<MachineSet> for Reconciler<MachineSet> {
    type Error = Error;
    const FINALIZER: Option<&'static str> = Some(FINALIZER);

    async fn apply(&self, ms: Arc<MachineSet>) -> Result<Next, Error> {
        let _running = infrasim_controller_runtime::metrics::reconciled("MachineSet");
        apply(&ms, self).await
    }

    /// Its Machines are deleted; it is done once none is left.
    async fn cleanup(&self, ms: Arc<MachineSet>) -> Result<Cleanup, Error> {
        let _running = infrasim_controller_runtime::metrics::reconciled("MachineSet");
        let machines_api: Api<Machine> = self.api(&ms.namespace().unwrap_or_default());
        let machines = owned_machines(&machines_api, &ms).await?;
        for m in machines
            .iter()
            .filter(|m| m.metadata.deletion_timestamp.is_none())
        {
            machines_api
                .delete(&m.name_any(), &DeleteParams::default())
                .await?;
        }
        Ok(if machines.is_empty() {
            Cleanup::Done
        } else {
            Cleanup::Pending(Next::AwaitChange)
        })
    }
}

/// Remediation, then as many Machines as the spec asks for; then the set's status.
async fn apply(ms: &MachineSet, r: &Reconciler<MachineSet>) -> Result<Next, Error> {
    let ns = ms.namespace().unwrap_or_default();
    let api: Api<MachineSet> = r.api(&ns);
    let machines_api: Api<Machine> = r.api(&ns);
    let machines = owned_machines(&machines_api, ms).await?;
    let cluster = r
        .core
        .informers
        .get::<Cluster>(&ns, &ms.spec.cluster_name)
        .await?;
    let now = r.core.ctx.now();
    let mut status = ms.status.clone().unwrap_or_default();
    let mut conds = status.conditions.take().unwrap_or_default();
    if conditions::set_paused(
        &mut conds,
        paused(ms, cluster.as_deref().is_some_and(Cluster::paused)),
        now,
    ) {
        status.conditions = Some(conds);
        apply_status(&api, ms, MANAGER, &status).await?;
        return Ok(Next::AwaitChange);
    }
    let desired = ms.spec.replicas.unwrap_or(1).max(0) as usize;
    let remediated = remediate(ms, r, &machines).await?;
    let active: Vec<&Machine> = machines
        .iter()
        .filter(|m| m.metadata.deletion_timestamp.is_none())
        .filter(|m| !remediated.contains(&m.name_any()))
        .collect();
    if active.len() < desired {
        for _ in active.len()..desired {
            create_machine(ms, r).await?;
        }
    } else if active.len() > desired {
        for m in pick_for_deletion(ms, &active, active.len() - desired) {
            machines_api
                .delete(&m.name_any(), &DeleteParams::default())
                .await?;
            r.core
                .ctx
                .event(
                    ms,
                    false,
                    "SuccessfulDelete",
                    format!("Deleted Machine {}", m.name_any()),
                )
                .await;
        }
    }
    sync_machines(ms, r, &machines).await?;
    let status = replica_status(
        &ms.spec.selector,
        &machines,
        desired as i32,
        conds,
        now,
        ms.metadata.generation,
        ms.status.as_ref().and_then(|s| s.deprecated.as_ref()),
    );
    apply_status(&api, ms, MANAGER, &status).await?;
    Ok(Next::AwaitChange)
}

/// Owner remediation, as upstream's MachineSet does it: a Machine healthy again loses its
/// `OwnerRemediated` condition; Machines that failed their health check and wait for their
/// owner are deleted (the set then makes new ones), no more at once than the
/// MachineDeployment's `spec.remediation.maxInFlight`. Returns the names of those deleted.
async fn remediate(
    ms: &MachineSet,
    r: &Reconciler<MachineSet>,
    machines: &[Machine],
) -> Result<Vec<String>, Error> {
    let ns = ms.namespace().unwrap_or_default();
    let api: Api<Machine> = r.api(&ns);
    let now = r.core.ctx.now();
    for m in machines.iter().filter(|m| remediation::recovered(m)) {
        remediation::set(&api, m, OWNER_MANAGER, vec![], now).await?;
    }
    let mut waiting: Vec<&Machine> = machines
        .iter()
        .filter(|m| remediation::to_remediate(m))
        .collect();
    if waiting.is_empty() {
        return Ok(Vec::new());
    }
    // Marked by hand first, then the oldest (`machines` is oldest first).
    waiting.sort_by_key(|m| !m.annotations().contains_key(REMEDIATE_ANNOTATION));
    let (limit, shown) = max_in_flight(ms, r).await;
    let in_flight = machines
        .iter()
        .filter(|m| m.metadata.deletion_timestamp.is_some())
        .filter(|m| remediation::owner_reason(m) == Some("MachineDeleting"))
        .count();
    let room = limit.map_or(usize::MAX, |l| l.saturating_sub(in_flight));
    let deferred = remediation::owner_condition(
        "RemediationDeferred",
        format!("Waiting because there are already too many remediations in progress (spec.strategy.remediation.maxInFlight is {shown})"),
    );
    let mut deleted = Vec::new();
    for (i, m) in waiting.into_iter().enumerate() {
        if i >= room {
            remediation::set(&api, m, OWNER_MANAGER, vec![deferred.clone()], now).await?;
            continue;
        }
        let deleting = remediation::owner_condition("MachineDeleting", "Machine is deleting");
        remediation::set(&api, m, OWNER_MANAGER, vec![deleting], now).await?;
        delete_if_present(&api, &m.name_any()).await?;
        r.core
            .ctx
            .event(
                ms,
                false,
                "SuccessfulDelete",
                format!(
                    "Deleted Machine {} (remediating unhealthy Machine)",
                    m.name_any()
                ),
            )
            .await;
        deleted.push(m.name_any());
    }
    Ok(deleted)
}

/// The owning MachineDeployment's `spec.remediation.maxInFlight`, scaled to its replicas
/// (rounded up), and as written; no limit without one.
async fn max_in_flight(ms: &MachineSet, r: &Reconciler<MachineSet>) -> (Option<usize>, String) {
    let ns = ms.namespace().unwrap_or_default();
    let Some(owner) = ms
        .owner_references()
        .iter()
        .find(|o| o.kind == "MachineDeployment")
    else {
        return (None, String::new());
    };
    let Ok(Some(md)) = r
        .core
        .informers
        .get::<MachineDeployment>(&ns, &owner.name)
        .await
    else {
        return (None, String::new());
    };
    let replicas = md.spec.replicas.unwrap_or(1).max(0) as i64;
    match md
        .spec
        .remediation
        .as_ref()
        .and_then(|r| r.get("maxInFlight"))
    {
        Some(serde_json::Value::Number(n)) => {
            (n.as_i64().map(|n| n.max(0) as usize), n.to_string())
        }
        Some(serde_json::Value::String(s)) => {
            let percent = s.trim_end_matches('%').parse::<i64>().ok();
            let scaled = percent.map(|p| ((p * replicas + 99) / 100).max(0) as usize);
            (scaled, s.clone())
        }
        _ => (None, String::new()),
    }
}

/// The machines to delete: marked ones first, then not ready ones, then by the set's order.
fn pick_for_deletion<'a>(ms: &MachineSet, active: &[&'a Machine], n: usize) -> Vec<&'a Machine> {
    let order = ms
        .spec
        .deletion
        .as_ref()
        .and_then(|d| d.order.clone())
        .unwrap_or_default();
    let ready = |m: &Machine| {
        m.status
            .as_ref()
            .and_then(|s| s.conditions.as_deref())
            .is_some_and(|c| conditions::is_true(c, "Ready"))
    };
    let mut ranked: Vec<(u8, usize, &Machine)> = active
        .iter()
        .enumerate()
        .map(|(age, m)| {
            let class = if m.annotations().contains_key(DELETE_MACHINE_ANNOTATION) {
                0
            } else if !ready(m) {
                1
            } else {
                2
            };
            // `active` is oldest first.
            let rank = match order.as_str() {
                "Oldest" => age,
                "Newest" => usize::MAX - age,
                _ => rand::random_range(0..usize::MAX),
            };
            (class, rank, *m)
        })
        .collect();
    ranked.sort_by_key(|(class, rank, _)| (*class, *rank));
    ranked.into_iter().take(n).map(|(_, _, m)| m).collect()
}

/// The labels and annotations the set's Machines (and their infrastructure machines and
/// bootstrap configs) carry: its template's, with the cluster's, the set's and its
/// deployment's names.
fn machine_metadata(ms: &MachineSet) -> (BTreeMap<String, String>, BTreeMap<String, String>) {
    let meta = ms.spec.template.metadata.clone().unwrap_or_default();
    let mut labels = meta.labels;
    labels.insert(CLUSTER_NAME_LABEL.into(), ms.spec.cluster_name.clone());
    labels.insert(SET_NAME_LABEL.into(), ms.name_any());
    if let Some(md) = ms.labels().get(DEPLOYMENT_NAME_LABEL) {
        labels.insert(DEPLOYMENT_NAME_LABEL.into(), md.clone());
    }
    (labels, meta.annotations)
}

/// The Machine the set wants under `name`, as upstream's `computeDesiredMachine`: from the
/// template, with `spec`'s references, version and failure domain (a new Machine's, or an
/// existing one's: changing those is a rollout, never done in place).
fn desired_machine(ms: &MachineSet, name: &str, spec: &MachineSpec) -> Result<Value, Error> {
    let (labels, annotations) = machine_metadata(ms);
    let template = &ms.spec.template.spec;
    let mut wanted = MachineSpec {
        cluster_name: ms.spec.cluster_name.clone(),
        bootstrap: spec.bootstrap.clone(),
        infrastructure_ref: spec.infrastructure_ref.clone(),
        version: spec.version.clone(),
        failure_domain: spec.failure_domain.clone(),
        provider_id: None,
        ..template.clone()
    };
    wanted.deletion = Some(in_place::defaulted_deletion(wanted.deletion));
    if wanted.bootstrap.config_ref.is_some() {
        // Set by the Machine controller from the config's status: not the set's to own.
        wanted.bootstrap.data_secret_name = None;
    }
    let spec = serde_json::to_value(&wanted).map_err(kube::Error::SerdeError)?;
    Ok(json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
        "metadata": {"name": name, "namespace": ms.namespace(), "labels": labels,
                     "annotations": annotations, "ownerReferences": [owner_ref(ms, true)],
                     "finalizers": [MACHINE_FINALIZER]},
        "spec": spec,
    }))
}

/// Creates one Machine of the set, with its bootstrap config and infrastructure machine.
/// The Machine is made with an apply under the set's field manager, which then owns what
/// it propagates in place (see [`super::in_place`]).
async fn create_machine(ms: &MachineSet, r: &Reconciler<MachineSet>) -> Result<(), Error> {
    let ns = ms.namespace().unwrap_or_default();
    let name = format!("{}-{}", ms.name_any(), random_suffix());
    let template = &ms.spec.template;
    let (labels, annotations) = machine_metadata(ms);
    let mut spec = template.spec.clone();
    spec.infrastructure_ref = clone_from(
        r,
        &ns,
        &template.spec.infrastructure_ref,
        &name,
        &labels,
        &annotations,
        ms,
    )
    .await?;
    if let Some(config) = &template.spec.bootstrap.config_ref {
        spec.bootstrap.config_ref =
            Some(clone_from(r, &ns, config, &name, &labels, &annotations, ms).await?);
    }
    let machine = desired_machine(ms, &name, &spec)?;
    in_place::apply(&r.api::<Machine>(&ns), &name, MANAGER, &machine).await?;
    r.core
        .ctx
        .event(
            ms,
            false,
            "SuccessfulCreate",
            format!("Created Machine {name}"),
        )
        .await;
    Ok(())
}

/// In-place propagation to the set's Machines not being deleted: their labels,
/// annotations, readiness gates, deletion timeouts and `minReadySeconds` follow the
/// template, and the labels and annotations of their infrastructure machines and bootstrap
/// configs with them. A Machine already as wanted costs nothing.
async fn sync_machines(
    ms: &MachineSet,
    r: &Reconciler<MachineSet>,
    machines: &[Machine],
) -> Result<(), Error> {
    let ns = ms.namespace().unwrap_or_default();
    let (labels, annotations) = machine_metadata(ms);
    let propagation = in_place::Propagation {
        manager: MANAGER,
        labels: &labels,
        external_annotations: &annotations,
        spec_fields: &["readinessGates", "deletion", "minReadySeconds"],
    };
    let api = r.api::<Machine>(&ns);
    for m in machines
        .iter()
        .filter(|m| m.metadata.deletion_timestamp.is_none())
    {
        let desired = desired_machine(ms, &m.name_any(), &m.spec)?;
        propagation
            .sync(&r.core, &api, m, &desired, &annotations)
            .await?;
    }
    Ok(())
}

/// Clones the object a template reference of the set's template points at.
async fn clone_from(
    r: &Reconciler<MachineSet>,
    ns: &str,
    template_ref: &ContractRef,
    name: &str,
    labels: &BTreeMap<String, String>,
    annotations: &BTreeMap<String, String>,
    ms: &MachineSet,
) -> Result<ContractRef, Error> {
    let template = r
        .core
        .resolver
        .get(&r.client(), ns, template_ref)
        .await?
        .ok_or_else(|| {
            Error::Invalid(format!(
                "{} {} does not exist",
                template_ref.kind, template_ref.name
            ))
        })?;
    Ok(clone_template(
        &r.client(),
        ns,
        &template,
        CloneSpec {
            name,
            labels: labels.clone(),
            annotations: annotations.clone(),
            owner: Some(owner_ref(ms, false)),
            spec_overrides: None,
        },
    )
    .await?)
}

/// Replica counts and conditions of a set of machines.
pub(super) fn replica_status(
    selector: &k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector,
    machines: &[Machine],
    desired: i32,
    mut conds: Vec<Condition>,
    now: chrono::DateTime<chrono::Utc>,
    generation: Option<i64>,
    previous: Option<&serde_json::Value>,
) -> ReplicaStatus {
    let count = |t: &str| machines.iter().filter(|m| has_true(m, t)).count() as i32;
    let (ready, available, up_to_date) = (count("Ready"), count("Available"), count("UpToDate"));
    let total = machines.len() as i32;
    conditions::set(
        &mut conds,
        aggregate("MachinesReady", ready, total, "Ready", "NotReady"),
        now,
    );
    conditions::set(
        &mut conds,
        aggregate(
            "MachinesUpToDate",
            up_to_date,
            total,
            "UpToDate",
            "NotUpToDate",
        ),
        now,
    );
    for scaling in scaling_conditions(total, desired) {
        conditions::set(&mut conds, scaling, now);
    }
    conditions::set(
        &mut conds,
        Condition::new("Deleting", false, "NotDeleting", ""),
        now,
    );
    conditions::sort(&mut conds);
    // The counters of v1beta1's meaning, which v1beta1 readers see at the top of the status
    // (upstream keeps them here while it serves v1beta1), and the v1beta1 conditions.
    let counters = serde_json::json!({
        "readyReplicas": ready, "availableReplicas": available, "fullyLabeledReplicas": total,
    });
    let deprecated = super::v1beta1::deprecated(
        &super::v1beta1::MACHINE_SET,
        &conds,
        counters,
        previous,
        now,
    );
    ReplicaStatus {
        replicas: Some(total),
        ready_replicas: Some(ready),
        available_replicas: Some(available),
        up_to_date_replicas: Some(up_to_date),
        selector: Some(selector_string(selector)),
        phase: None,
        conditions: Some(conds),
        observed_generation: generation,
        deprecated: Some(deprecated),
    }
}

/// Whether the Machine has condition `t` true.
fn has_true(m: &Machine, t: &str) -> bool {
    m.status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .is_some_and(|c| conditions::is_true(c, t))
}

/// A condition over all `total` machines: true (`good`) when all `n` of them are, else false
/// (`bad`) saying how many are not; true when there are none.
fn aggregate(ty: &str, n: i32, total: i32, good: &str, bad: &str) -> Condition {
    if total == 0 {
        Condition::new(ty, true, "NoReplicas", "")
    } else if n == total {
        Condition::new(ty, true, good, "")
    } else {
        Condition::new(ty, false, bad, format!("{} of {total} Machines", total - n))
    }
}

/// `ScalingUp` and `ScalingDown`, from how far `total` machines are from `desired`.
fn scaling_conditions(total: i32, desired: i32) -> [Condition; 2] {
    let up = total < desired;
    let down = total > desired;
    [
        Condition::new(
            "ScalingUp",
            up,
            if up { "ScalingUp" } else { "NotScalingUp" },
            if up {
                format!("Scaling up from {total} to {desired} replicas")
            } else {
                String::new()
            },
        ),
        Condition::new(
            "ScalingDown",
            down,
            if down {
                "ScalingDown"
            } else {
                "NotScalingDown"
            },
            if down {
                format!("Scaling down from {total} to {desired} replicas")
            } else {
                String::new()
            },
        ),
    ]
}

/// A label selector as the scale subresource shows it (`a=b,c in (d)`).
pub(super) fn selector_string(
    s: &k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector,
) -> String {
    let mut parts: Vec<String> = s
        .match_labels
        .clone()
        .unwrap_or_default()
        .into_iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    for e in s.match_expressions.clone().unwrap_or_default() {
        let values = e.values.unwrap_or_default().join(",");
        parts.push(match e.operator.as_str() {
            "In" => format!("{} in ({values})", e.key),
            "NotIn" => format!("{} notin ({values})", e.key),
            "Exists" => e.key.clone(),
            _ => format!("!{}", e.key),
        });
    }
    parts.join(",")
}
