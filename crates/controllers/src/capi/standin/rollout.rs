//! A topology's objects brought in line with its blueprint after they were made, as Cluster
//! API's topology controller keeps them: when the class's patches give another result (a
//! variable changed, or the class), the infrastructure cluster's and the control plane's
//! specs are patched in place, and a template copy whose spec changed is replaced by a new
//! copy under a new name that its control plane or MachineDeployment then points at, which
//! rolls the machines made from it (templates are never changed in place).
//!
//! The infrastructure cluster and the control plane are applied whole, as they were made,
//! by server-side apply under the topology's field manager (`capi-topology`), so a field the
//! blueprint set and no longer sets goes, and fields others set (a provider's endpoint) stay.
//! A template copy (also applied by `capi-topology`) is replaced when it no longer says what
//! the blueprint says, or says something the topology set in it and the blueprint dropped.

use super::blueprint::Blueprint;
use super::desired::{control_plane_clone, infrastructure_clone, TOPOLOGY_MANAGER};
use super::merge_patch;
use super::objects::{apply_template_clone, copy_template};
use super::objects::{owner_ref, random_suffix};
use super::{Error, Reconciler};
use crate::capi::core::{Cluster, ContractRef, KubeadmControlPlane, MachineDeployment};
use crate::capi::TOPOLOGY_DEPLOYMENT_LABEL as DEPLOYMENT_LABEL;
use kube::api::{Api, DynamicObject};
use kube::ResourceExt;
use serde_json::json;
use std::collections::BTreeMap;

/// Brings the made objects in line with `bp` (see the module's doc).
pub(super) async fn roll_out(
    c: &Cluster,
    r: &Reconciler<Cluster>,
    bp: &Blueprint,
    kcp: Option<&KubeadmControlPlane>,
    deployments: &[MachineDeployment],
) -> Result<(), Error> {
    let ns = c.namespace().unwrap_or_default();
    if let Some(infra) = &c.spec.infrastructure_ref {
        if let Some(current) = r.core.read(&ns, infra).await? {
            let clone = infrastructure_clone(c, &infra.name);
            let (client, manager) = (r.client(), TOPOLOGY_MANAGER);
            let template = &bp.infrastructure;
            let current = Some((&current, &r.core.in_line));
            apply_template_clone(&client, &ns, template, clone, manager, current).await?;
        }
    }
    if let Some(kcp) = kcp {
        control_plane(c, r, bp, kcp).await?;
    }
    for md in deployments {
        let Some(name) = md.labels().get(DEPLOYMENT_LABEL) else {
            continue;
        };
        let Some((bootstrap, infra, _)) = bp.deployments.get(name) else {
            continue;
        };
        let spec = &md.spec.template.spec;
        let mut changed = serde_json::Map::new();
        if let Some(config) = &spec.bootstrap.config_ref {
            if let Some(copy) = replaced(c, r, config, bootstrap, md).await? {
                changed.insert("bootstrap".into(), json!({"configRef": {"name": copy}}));
            }
        }
        if let Some(copy) = replaced(c, r, &spec.infrastructure_ref, infra, md).await? {
            changed.insert("infrastructureRef".into(), json!({"name": copy}));
        }
        if !changed.is_empty() {
            let api: Api<MachineDeployment> = r.api(&ns);
            let patch = json!({"spec": {"template": {"spec": changed}}});
            merge_patch(&api, &md.name_any(), &patch).await?;
        }
    }
    Ok(())
}

/// The control plane applied again from its patched template with the topology's version
/// and replicas, and its machines' template replaced when the patched one differs.
async fn control_plane(
    c: &Cluster,
    r: &Reconciler<Cluster>,
    bp: &Blueprint,
    kcp: &KubeadmControlPlane,
) -> Result<(), Error> {
    let ns = c.namespace().unwrap_or_default();
    // The machine template as it stands (what the topology made, with what others added).
    let reference = ContractRef {
        api_group: "controlplane.cluster.x-k8s.io".into(),
        kind: "KubeadmControlPlane".into(),
        name: kcp.name_any(),
    };
    let Some(current) = r.core.read(&ns, &reference).await? else {
        return Ok(());
    };
    let mut machine_template = current
        .data
        .pointer("/spec/machineTemplate")
        .cloned()
        .unwrap_or(json!({}));
    if let Some((template, _)) = &bp.control_plane_machines {
        let infra = &kcp.spec.machine_template.spec.infrastructure_ref;
        if let Some(copy) = replaced(c, r, infra, template, kcp).await? {
            machine_template["spec"]["infrastructureRef"]["name"] = json!(copy);
        }
    }
    let name = kcp.name_any();
    let clone = control_plane_clone(c, &name, machine_template);
    let (client, manager) = (r.client(), TOPOLOGY_MANAGER);
    apply_template_clone(
        &client,
        &ns,
        &bp.control_plane,
        clone,
        manager,
        Some((&current, &r.core.in_line)),
    )
    .await?;
    Ok(())
}

/// The API of the object `reference` names.
async fn api_of(
    r: &Reconciler<Cluster>,
    ns: &str,
    reference: &ContractRef,
) -> Result<Api<DynamicObject>, Error> {
    let resource = r
        .core
        .resolver
        .resolve(&r.client(), &reference.api_group, &reference.kind)
        .await?;
    Ok(Api::namespaced_with(r.client(), ns, &resource))
}

/// A new copy of `template` when the copy `current` names no longer says what it does; the
/// new copy's name. The copy keeps the old one's labels and owner.
async fn replaced<K: kube::Resource<DynamicType = ()>>(
    c: &Cluster,
    r: &Reconciler<Cluster>,
    current: &ContractRef,
    template: &DynamicObject,
    holder: &K,
) -> Result<Option<String>, Error> {
    let ns = c.namespace().unwrap_or_default();
    let Some(copy) = r.core.read(&ns, current).await? else {
        return Ok(None);
    };
    let desired = template.data.get("spec").cloned().unwrap_or(json!({}));
    // Unchanged when the copy says all the template says and the topology set nothing in it
    // that the template no longer says.
    let api = api_of(r, &ns, current).await?;
    if r.core
        .in_line
        .check(&copy, &api, TOPOLOGY_MANAGER, &desired)
        .await?
    {
        return Ok(None);
    }
    let labels: BTreeMap<String, String> = copy.labels().clone();
    let prefix = holder.meta().name.clone().unwrap_or_else(|| c.name_any());
    let name = format!("{prefix}-{}", random_suffix());
    let made = copy_template(
        &r.client(),
        &ns,
        template,
        &name,
        &labels,
        owner_ref(c, false),
        TOPOLOGY_MANAGER,
    )
    .await?;
    tracing::info!(cluster = %c.name_any(), old = %current.name, new = %made.name, "the class's template changed; rolling to a new copy");
    Ok(Some(made.name))
}
