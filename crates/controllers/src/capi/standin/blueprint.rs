//! What a topology Cluster's objects are made from (upstream's cluster blueprint and the
//! start of its desired state): the ClusterClass's templates for this Cluster, the names of
//! the objects the topology has or will make, and the class's patches applied to those
//! templates with the Cluster's variables and the builtins those names give.
//!
//! It is built when the topology has something to make; an error in a patch or a variable
//! fails the build, so nothing is made from a half-patched template.

use super::objects::random_suffix;
use super::patches::variables::{self, Variables};
use super::patches::{self, Holder, Item};
use super::{Error, Reconciler};
use crate::capi::core::{
    Cluster, ClusterClass, KubeadmControlPlane, MachineDeployment, MachineDeploymentTopology,
    TemplateRef,
};
use crate::capi::CLUSTER_NAME_LABEL;
use crate::capi::TOPOLOGY_DEPLOYMENT_LABEL as DEPLOYMENT_LABEL;
use kube::api::DynamicObject;
use kube::ResourceExt;
use serde_json::Value;
use std::collections::{BTreeMap, HashSet};

/// The names of a topology MachineDeployment and of its two templates' copies.
#[derive(Debug, Clone)]
pub(super) struct DeploymentNames {
    pub deployment: String,
    pub bootstrap: String,
    pub infrastructure: String,
}

/// The class's templates, patched, and the names of what is made from them.
pub(super) struct Blueprint {
    pub infrastructure: DynamicObject,
    pub control_plane: DynamicObject,
    pub control_plane_name: String,
    /// The control plane machines' template and its copy's name, if the class has one.
    pub control_plane_machines: Option<(DynamicObject, String)>,
    /// By topology name: the bootstrap and infrastructure templates, and the names.
    pub deployments: BTreeMap<String, (DynamicObject, DynamicObject, DeploymentNames)>,
}

/// What exists already, so builtins carry the names upstream would give them.
pub(super) struct Existing<'a> {
    pub control_plane: Option<&'a KubeadmControlPlane>,
    pub deployments: &'a [MachineDeployment],
}

/// Reads the templates, names what is to be made and applies the class's patches. An
/// error from a patch is `Error::Invalid` with upstream's words.
pub(super) async fn build(
    c: &Cluster,
    r: &Reconciler<Cluster>,
    class: &ClusterClass,
    wanted: &[MachineDeploymentTopology],
    existing: &Existing<'_>,
) -> Result<Blueprint, Error> {
    let ns = c.namespace().unwrap_or_default();
    let cluster = c.name_any();
    let fresh = |prefix: &str| format!("{prefix}-{}", random_suffix());
    let control_plane_name = existing
        .control_plane
        .map(|k| k.name_any())
        .unwrap_or_else(|| fresh(&cluster));
    let machines_name = existing
        .control_plane
        .and_then(|k| {
            serde_json::to_value(&k.spec)
                .ok()?
                .pointer("/machineTemplate/spec/infrastructureRef/name")?
                .as_str()
                .map(str::to_string)
        })
        .unwrap_or_else(|| fresh(&cluster));
    let mut items = vec![
        Item {
            holder: Holder::InfrastructureCluster,
            template: fetch(r, &ns, &class.spec.infrastructure.template_ref).await?,
            variables: Variables::new(),
        },
        Item {
            holder: Holder::ControlPlane,
            template: fetch(r, &ns, &class.spec.control_plane.template_ref).await?,
            variables: Variables::new(),
        },
    ];
    if let Some(infra) = &class.spec.control_plane.machine_infrastructure {
        items.push(Item {
            holder: Holder::ControlPlaneMachines,
            template: fetch(r, &ns, &infra.template_ref).await?,
            variables: Variables::new(),
        });
    }
    let mut names = BTreeMap::new();
    for md in wanted {
        let md_class = class
            .spec
            .workers
            .as_ref()
            .and_then(|w| w.machine_deployments.iter().find(|m| m.class == md.class))
            .ok_or_else(|| {
                Error::Invalid(format!(
                    "MachineDeploymentClass {} not found in ClusterClass {}",
                    md.class,
                    class.name_any()
                ))
            })?;
        let found = existing
            .deployments
            .iter()
            .find(|e| e.labels().get(DEPLOYMENT_LABEL) == Some(&md.name));
        names.insert(md.name.clone(), deployment_names(&cluster, md, found));
        for (template, holder) in [
            (
                &md_class.bootstrap.template_ref,
                Holder::DeploymentBootstrap(md.name.clone()),
            ),
            (
                &md_class.infrastructure.template_ref,
                Holder::DeploymentInfrastructure(md.name.clone()),
            ),
        ] {
            items.push(Item {
                holder,
                template: fetch(r, &ns, template).await?,
                variables: Variables::new(),
            });
        }
    }
    let context = Context {
        c,
        class,
        existing,
        control_plane_name: &control_plane_name,
        machines_name: &machines_name,
        names: &names,
    };
    let global = context.set_variables(&mut items);
    let patches = class.spec.patches.clone().unwrap_or_default();
    patches::apply(&patches, &global, &mut items).map_err(|e| {
        Error::Invalid(format!(
            "error computing the desired state of the Cluster topology: failed to apply patches: {e}"
        ))
    })?;
    assemble(items, names, control_plane_name, machines_name)
}

fn deployment_names(
    cluster: &str,
    md: &MachineDeploymentTopology,
    found: Option<&MachineDeployment>,
) -> DeploymentNames {
    let fresh = || format!("{cluster}-{}-{}", md.name, random_suffix());
    let spec = found.map(|f| &f.spec.template.spec);
    DeploymentNames {
        deployment: found.map(|f| f.name_any()).unwrap_or_else(fresh),
        bootstrap: spec
            .and_then(|s| s.bootstrap.config_ref.as_ref().map(|r| r.name.clone()))
            .unwrap_or_else(fresh),
        infrastructure: spec
            .map(|s| s.infrastructure_ref.name.clone())
            .unwrap_or_else(fresh),
    }
}

/// The object `template_ref` names, read through the resolver so a contract's kind is found
/// under its real resource; a template that is not there is the ClusterClass's error.
pub(super) async fn get_template(
    r: &Reconciler<Cluster>,
    ns: &str,
    template_ref: &TemplateRef,
) -> Result<DynamicObject, Error> {
    r.core
        .resolver
        .template_api(&r.client(), ns, template_ref)
        .await?
        .get_opt(&template_ref.name)
        .await?
        .ok_or_else(|| {
            Error::Invalid(format!(
                "{} {} not found",
                template_ref.kind, template_ref.name
            ))
        })
}

/// The template as the patches see it: without the bookkeeping upstream leaves out.
async fn fetch(r: &Reconciler<Cluster>, ns: &str, t: &TemplateRef) -> Result<Value, Error> {
    let object = get_template(r, ns, t).await?;
    let mut value = serde_json::to_value(&object).map_err(kube::Error::SerdeError)?;
    if let Some(meta) = value.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("managedFields");
        if let Some(a) = meta.get_mut("annotations").and_then(Value::as_object_mut) {
            a.remove("kubectl.kubernetes.io/last-applied-configuration");
        }
    }
    Ok(value)
}

fn assemble(
    items: Vec<Item>,
    mut names: BTreeMap<String, DeploymentNames>,
    control_plane_name: String,
    machines_name: String,
) -> Result<Blueprint, Error> {
    let object = |v: Value| -> Result<DynamicObject, Error> {
        serde_json::from_value(v).map_err(|e| Error::Kube(kube::Error::SerdeError(e)))
    };
    let (mut infrastructure, mut control_plane, mut machines) = (None, None, None);
    let mut bootstrap = BTreeMap::new();
    let mut deployments = BTreeMap::new();
    for item in items {
        match item.holder {
            Holder::InfrastructureCluster => infrastructure = Some(object(item.template)?),
            Holder::ControlPlane => control_plane = Some(object(item.template)?),
            Holder::ControlPlaneMachines => {
                machines = Some((object(item.template)?, machines_name.clone()))
            }
            Holder::DeploymentBootstrap(name) => {
                bootstrap.insert(name, object(item.template)?);
            }
            Holder::DeploymentInfrastructure(name) => {
                let (Some(b), Some(n)) = (bootstrap.remove(&name), names.remove(&name)) else {
                    continue;
                };
                deployments.insert(name, (b, object(item.template)?, n));
            }
        }
    }
    let missing = || Error::Invalid("the ClusterClass's templates could not be read".into());
    Ok(Blueprint {
        infrastructure: infrastructure.ok_or_else(missing)?,
        control_plane: control_plane.ok_or_else(missing)?,
        control_plane_name,
        control_plane_machines: machines,
        deployments,
    })
}

/// What the variables are computed from.
struct Context<'a> {
    c: &'a Cluster,
    class: &'a ClusterClass,
    existing: &'a Existing<'a>,
    control_plane_name: &'a str,
    machines_name: &'a str,
    names: &'a BTreeMap<String, DeploymentNames>,
}

impl Context<'_> {
    /// Sets each item's variables and returns the Cluster's (global) ones.
    fn set_variables(&self, items: &mut [Item]) -> Variables {
        let defined: HashSet<String> = self
            .class
            .spec
            .variables
            .iter()
            .flatten()
            .filter_map(|v| v.get("name")?.as_str().map(str::to_string))
            .collect();
        let topology = self.c.spec.topology.clone().unwrap_or_default();
        let global = variables::with_builtin(
            variables::values(
                serde_json::to_value(&topology.variables).ok().as_ref(),
                &defined,
            ),
            "cluster",
            self.cluster_builtin(),
        );
        let cp_overrides = topology
            .control_plane
            .as_ref()
            .and_then(|t| t.rest.get("variables"))
            .and_then(|v| v.get("overrides"));
        let cp = variables::with_builtin(
            variables::values(cp_overrides, &defined),
            "controlPlane",
            self.control_plane_builtin(),
        );
        let wanted = topology
            .workers
            .map(|w| w.machine_deployments)
            .unwrap_or_default();
        for item in items.iter_mut() {
            item.variables = match &item.holder {
                Holder::InfrastructureCluster => Variables::new(),
                Holder::ControlPlane | Holder::ControlPlaneMachines => cp.clone(),
                Holder::DeploymentBootstrap(name) | Holder::DeploymentInfrastructure(name) => {
                    let Some(md) = wanted.iter().find(|m| &m.name == name) else {
                        continue;
                    };
                    let overrides = md.rest.get("variables").and_then(|v| v.get("overrides"));
                    variables::with_builtin(
                        variables::values(overrides, &defined),
                        "machineDeployment",
                        self.deployment_builtin(md),
                    )
                }
            };
        }
        global
    }
}

mod builtins;
