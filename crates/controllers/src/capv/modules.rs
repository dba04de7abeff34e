//! Cluster modules, the anti-affinity groups CAPV keeps a cluster's machines in (its
//! `NodeAntiAffinity` feature): one module per KubeadmControlPlane and per MachineDeployment
//! of the cluster whose machines are cloned from a VSphereMachineTemplate on the cluster's
//! vCenter, made in the compute cluster that owns the template's resource pool and recorded
//! in the VSphereCluster's `spec.clusterModules`; a module whose owner is gone is deleted.
//! `ClusterModulesReady` reports it (`InvalidVCenterVersion` before vCenter 7). Each VSphereVM
//! joins its owner's module once its VM exists and leaves it before the VM is destroyed (see
//! [`super::vm`]).

use super::types::VSphereCluster;
use super::{Error, Reconciler};
use crate::capi::core::{KubeadmControlPlane, Machine, MachineDeployment};
use crate::capi::{CLUSTER_NAME_LABEL, CONTROL_PLANE_LABEL};
use infrasim_controller_runtime::conditions::Condition;
use infrasim_controller_runtime::vcenters::VCenter;
use infrasim_vim_client::Moref;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use kube::ResourceExt;
use serde_json::{json, Value};

const CONDITION: &str = "ClusterModulesReady";
/// The field manager of `spec.clusterModules`.
const MANAGER: &str = "infrasim-capv/modules";
const TEMPLATE_KIND: &str = "VSphereMachineTemplate";

/// Whether a cluster gets modules: the stand-in's `NodeAntiAffinity` gate (off by default,
/// as CAPV's) and the cluster's own `spec.disableClusterModule`.
pub(super) fn wanted(r: &Reconciler, c: &VSphereCluster) -> bool {
    r.node_anti_affinity && c.spec.rest.get("disableClusterModule") != Some(&json!(true))
}

/// A KubeadmControlPlane or MachineDeployment whose machines a module keeps apart.
#[derive(Debug, Clone, PartialEq)]
struct Owner {
    name: String,
    control_plane: bool,
    /// The VSphereMachineTemplate its machines are cloned from.
    template: String,
}

/// One entry of `spec.clusterModules`.
fn entry(owner: &Owner, module: &str) -> Value {
    json!({"controlPlane": owner.control_plane, "targetObjectName": owner.name, "moduleUUID": module})
}

/// Brings the cluster's modules in line with its control plane and MachineDeployments; the
/// condition to report.
pub(super) async fn reconcile(
    r: &Reconciler,
    c: &VSphereCluster,
    vc: &VCenter,
    version: &str,
) -> Result<Condition, Error> {
    let major: u32 = version
        .split('.')
        .next()
        .and_then(|m| m.parse().ok())
        .unwrap_or(0);
    if major < 7 {
        return Ok(Condition::new(
            CONDITION,
            false,
            "InvalidVCenterVersion",
            format!("vCenter version {version} does not support cluster modules"),
        ));
    }
    let owners = owners(r, c).await?;
    let recorded: Vec<Value> = c
        .spec
        .rest
        .get("clusterModules")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut kept = Vec::new();
    let mut errors = Vec::new();
    for module in &recorded {
        let id = module["moduleUUID"].as_str().unwrap_or("");
        let target = module["targetObjectName"].as_str().unwrap_or("");
        let control_plane = module["controlPlane"].as_bool().unwrap_or(false);
        match owners
            .iter()
            .find(|o| o.name == target && o.control_plane == control_plane)
        {
            None => {
                if let Err(e) = vc.client.delete_cluster_module(id).await {
                    tracing::warn!(module = id, "deleting a cluster module: {e}");
                }
            }
            Some(owner) => match vc.client.cluster_module_members(id).await {
                Ok(Some(_)) => kept.push(entry(owner, id)),
                Ok(None) => {}
                Err(e) => {
                    errors.push(format!("{}: {e}", owner.name));
                    kept.push(entry(owner, id));
                }
            },
        }
    }
    for owner in &owners {
        let has = |m: &Value| {
            m["targetObjectName"] == json!(owner.name)
                && m["controlPlane"] == json!(owner.control_plane)
        };
        if kept.iter().any(has) {
            continue;
        }
        match create(r, c, vc, owner).await {
            Ok(Some(id)) => kept.push(entry(owner, &id)),
            Ok(None) => {}
            Err(e) => errors.push(format!("{}: {e}", owner.name)),
        }
    }
    if kept != recorded {
        write(r, c, kept).await?;
    }
    Ok(match errors.is_empty() {
        true => Condition::new(CONDITION, true, "Ready", ""),
        false => Condition::new(
            CONDITION,
            false,
            "NotReady",
            format!(
                "failed to create cluster modules for: {}",
                errors.join(", ")
            ),
        ),
    })
}

/// The cluster's control planes and MachineDeployments (by Cluster API's cluster-name
/// label) whose machines come from a VSphereMachineTemplate.
async fn owners(r: &Reconciler, c: &VSphereCluster) -> Result<Vec<Owner>, Error> {
    let ns = c.namespace().unwrap_or_default();
    let Some(cluster) = c.labels().get(CLUSTER_NAME_LABEL).cloned() else {
        return Ok(Vec::new());
    };
    let of_cluster = |labels: &std::collections::BTreeMap<String, String>| {
        labels.get(CLUSTER_NAME_LABEL) == Some(&cluster)
    };
    let mut owners = Vec::new();
    for kcp in r.informers.of::<KubeadmControlPlane>().store().state() {
        let infra = &kcp.spec.machine_template.spec.infrastructure_ref;
        if kcp.namespace().as_deref() == Some(&ns)
            && of_cluster(kcp.labels())
            && infra.kind == TEMPLATE_KIND
        {
            owners.push(Owner {
                name: kcp.name_any(),
                control_plane: true,
                template: infra.name.clone(),
            });
        }
    }
    for md in r.informers.of::<MachineDeployment>().store().state() {
        let infra = &md.spec.template.spec.infrastructure_ref;
        if md.namespace().as_deref() == Some(&ns)
            && of_cluster(md.labels())
            && infra.kind == TEMPLATE_KIND
        {
            owners.push(Owner {
                name: md.name_any(),
                control_plane: false,
                template: infra.name.clone(),
            });
        }
    }
    owners.retain(|o| !o.name.is_empty());
    Ok(owners)
}

/// Makes the owner's module in the compute cluster of its template's resource pool; `None`
/// when CAPV makes none (the template is on another vCenter, or its pool is not in a cluster).
async fn create(
    r: &Reconciler,
    c: &VSphereCluster,
    vc: &VCenter,
    owner: &Owner,
) -> Result<Option<String>, Error> {
    let ns = c.namespace().unwrap_or_default();
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(super::types::GROUP, "v1beta2", TEMPLATE_KIND),
        "vspheremachinetemplates",
    );
    let api: Api<DynamicObject> = Api::namespaced_with(r.ctx.client.clone(), &ns, &resource);
    let Some(template) = api.get_opt(&owner.template).await? else {
        return Ok(None);
    };
    let spec = template
        .data
        .pointer("/spec/template/spec")
        .cloned()
        .unwrap_or(json!({}));
    let server = spec["server"].as_str().unwrap_or("");
    if !server.is_empty() && server != c.spec.server {
        return Ok(None);
    }
    let Some(cluster) = compute_cluster(vc, spec["resourcePool"].as_str().unwrap_or("")).await?
    else {
        return Ok(None);
    };
    Ok(Some(vc.client.create_cluster_module(&cluster).await?))
}

/// The compute cluster owning the resource pool at `path` (the first cluster's, as the
/// default pool is, when there is no path); `None` for a pool of a standalone host.
async fn compute_cluster(vc: &VCenter, path: &str) -> Result<Option<Moref>, Error> {
    let pool = match path {
        "" => None,
        p => vc.client.find_by_inventory_path(p).await?,
    };
    let owner = match pool {
        Some(pool) => vc
            .client
            .properties(&pool, &["owner"])
            .await?
            .prop("owner")
            .and_then(|o| o.moref())
            .cloned(),
        None => vc
            .client
            .list("ClusterComputeResource", &["name"])
            .await?
            .first()
            .map(|c| c.obj.clone()),
    };
    Ok(owner.filter(|o| o.ty == "ClusterComputeResource"))
}

/// Records the modules in `spec.clusterModules` (CAPV keeps them in the spec).
async fn write(r: &Reconciler, c: &VSphereCluster, modules: Vec<Value>) -> Result<(), Error> {
    let api: Api<VSphereCluster> =
        Api::namespaced(r.ctx.client.clone(), &c.namespace().unwrap_or_default());
    let body = json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "VSphereCluster",
        "metadata": {"name": c.name_any()},
        "spec": {"clusterModules": modules},
    });
    infrasim_controller_runtime::writes::apply(&api, &c.name_any(), MANAGER, &body).await?;
    Ok(())
}

/// The module a machine's VM belongs to: its control plane's or its MachineDeployment's,
/// as the VSphereCluster records them.
pub(super) fn of_machine(c: &VSphereCluster, machine: &Machine) -> Option<String> {
    let (name, control_plane) = if machine.labels().contains_key(CONTROL_PLANE_LABEL) {
        let kcp = machine
            .owner_references()
            .iter()
            .find(|o| o.kind == "KubeadmControlPlane")
            .map(|o| o.name.clone())?;
        (kcp, true)
    } else {
        (
            machine
                .labels()
                .get("cluster.x-k8s.io/deployment-name")
                .cloned()?,
            false,
        )
    };
    c.spec
        .rest
        .get("clusterModules")?
        .as_array()?
        .iter()
        .find(|m| {
            m["targetObjectName"] == json!(name)
                && m["controlPlane"].as_bool().unwrap_or(false) == control_plane
        })
        .and_then(|m| m["moduleUUID"].as_str())
        .map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster(modules: Value) -> VSphereCluster {
        serde_json::from_value(
            json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2",
            "kind": "VSphereCluster", "metadata": {"name": "c1"},
            "spec": {"server": "s", "clusterModules": modules}}),
        )
        .expect("a VSphereCluster")
    }

    fn machine(labels: Value, owner: &str) -> Machine {
        serde_json::from_value(json!({"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
            "metadata": {"name": "m", "labels": labels, "ownerReferences": [
                {"apiVersion": "x/v1", "kind": owner, "name": "o1", "uid": "u"}]},
            "spec": {"clusterName": "c1", "bootstrap": {}, "infrastructureRef": {"apiGroup": "g", "kind": "k", "name": "n"}}}))
        .expect("a Machine")
    }

    #[test]
    fn a_machine_belongs_to_its_control_planes_or_deployments_module() {
        let c = cluster(json!([
            {"controlPlane": true, "targetObjectName": "o1", "moduleUUID": "cp"},
            {"controlPlane": false, "targetObjectName": "md-a", "moduleUUID": "md"}]));
        let cp = machine(json!({CONTROL_PLANE_LABEL: ""}), "KubeadmControlPlane");
        assert_eq!(of_machine(&c, &cp), Some("cp".into()));
        let worker = machine(
            json!({"cluster.x-k8s.io/deployment-name": "md-a"}),
            "MachineSet",
        );
        assert_eq!(of_machine(&c, &worker), Some("md".into()));
        let other = machine(
            json!({"cluster.x-k8s.io/deployment-name": "md-b"}),
            "MachineSet",
        );
        assert_eq!(of_machine(&c, &other), None);
    }
}
