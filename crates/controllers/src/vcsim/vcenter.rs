//! The VCenterSimulator reconciler: starts a simulator of the object's model (on the cloud's
//! advertised address, on its recorded port when it has one, so a restarted controller comes
//! back where clients look), adds the VM templates and failure-domain tags CAPV expects, and
//! reports where it serves and how to log in. Deleting the object stops the simulator and
//! frees its port.

use super::simulators::{key, Serving};
use super::types::{VCenterSimulator, VCenterSimulatorModel, VCenterSimulatorStatus};
use super::{Error, Reconciler};
use infrasim_controller_runtime::conditions::{self, Condition};
use infrasim_controller_runtime::reconcile::{Cleanup, Next, Reconcile};
use infrasim_vsphere_sim::authorization::{SimUser, SystemRole};
use infrasim_vsphere_sim::persist::Keeper;
use infrasim_vsphere_sim::{
    sample_ovf, Flavor, Instance, LibraryItemSpec, Model, SimConfig, TagSpec, TemplateSpec,
};
use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;
use kube::ResourceExt;
use serde_json::json;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// The finalizer a VCenterSimulator carries while its simulator runs (upstream's name).
pub const FINALIZER: &str = "vcenter.vcsim.infrastructure.cluster.x-k8s.io";

/// The Kubernetes versions templates are made for when the model names none: those CAPV's
/// cluster classes use (its vcsim helpers' list).
pub const DEFAULT_KUBERNETES_VERSIONS: &[&str] = &[
    "v1.28.0", "v1.29.0", "v1.30.0", "v1.31.0", "v1.32.0", "v1.33.0", "v1.34.0", "v1.35.0",
    "v1.36.0",
];

/// The Ubuntu releases a template is named for (`ubuntu-2204-kube-v1.33.0`): each version
/// gets both, so whichever name a cluster class or an EnvVar picks exists.
pub const TEMPLATE_RELEASES: &[&str] = &["2204", "2404"];

/// The storage policy every simulator has (vSAN's default, as vcsim has it).
pub const STORAGE_POLICY: &str = "vSAN Default Storage Policy";

/// The content library every simulator has (upstream's supervisor setup's name).
pub const LIBRARY: &str = "vcsim";

/// The largest inventory a VCenterSimulator may ask for, per field: bounds what one object
/// can make this process allocate.
const MODEL_LIMIT: i32 = 10_000;

/// The field manager this controller writes under, the family's and its own name (see
/// [`infrasim_controller_runtime::writes`]).
const MANAGER: &str = "infrasim-vcsim-controller/vcenter";

impl Reconcile<VCenterSimulator> for Reconciler {
    type Error = Error;
    const FINALIZER: Option<&'static str> = Some(FINALIZER);

    async fn apply(&self, obj: Arc<VCenterSimulator>) -> Result<Next, Error> {
        serve(&obj, self).await
    }

    /// The simulator stops and its port is freed.
    async fn cleanup(&self, obj: Arc<VCenterSimulator>) -> Result<Cleanup, Error> {
        let key = key(&obj.namespace().unwrap_or_default(), &obj.name_any());
        if self.simulators.stop(&key).await {
            let why = "the simulator stopped and its port is free".to_string();
            self.ctx.event(&*obj, false, "Stopped", why).await;
        }
        self.ctx.cloud.forget_simulator(&key);
        Ok(Cleanup::Done)
    }
}

async fn serve(obj: &VCenterSimulator, r: &Reconciler) -> Result<Next, Error> {
    let ns = obj.namespace().unwrap_or_default();
    let api: Api<VCenterSimulator> = Api::namespaced(r.ctx.client.clone(), &ns);
    let key = key(&ns, &obj.name_any());
    let serving = match r.simulators.serving(&key) {
        Some(serving) => serving,
        None => match start(obj, r, &key).await {
            Ok(serving) => serving,
            Err(failure) => return failed(obj, r, &api, failure).await,
        },
    };
    super::faults::reconcile(obj, r).await;
    let status = VCenterSimulatorStatus {
        host: serving.addr.to_string(),
        username: serving.username,
        password: serving.password,
        thumbprint: serving.thumbprint,
        conditions: Some(ready(obj, r, Condition::new("Ready", true, "Serving", ""))),
    };
    apply_status(&api, obj, &status).await?;
    Ok(Next::AwaitChange)
}

/// Why a simulator could not start: a model it cannot make (until the spec changes), or a
/// port it cannot have (for now).
enum Failure {
    InvalidModel(String),
    Unavailable(String),
}

async fn failed(
    obj: &VCenterSimulator,
    r: &Reconciler,
    api: &Api<VCenterSimulator>,
    failure: Failure,
) -> Result<Next, Error> {
    let (reason, why, next) = match failure {
        Failure::InvalidModel(why) => ("InvalidModel", why, Next::AwaitChange),
        // A retry, not a poll: the port is held by another program (or the address is not
        // ours to bind), which tells nobody here when it lets go.
        Failure::Unavailable(why) => ("Unavailable", why, Next::After(Duration::from_secs(10))),
    };
    let previous = obj.status.as_ref().and_then(|s| s.conditions.as_deref());
    if previous
        .and_then(|c| conditions::find(c, "Ready"))
        .is_none_or(|c| c.message != why)
    {
        r.ctx.event(obj, true, reason, why.clone()).await;
    }
    let status = VCenterSimulatorStatus {
        conditions: Some(ready(obj, r, Condition::new("Ready", false, reason, why))),
        ..obj.status.clone().unwrap_or_default()
    };
    apply_status(api, obj, &status).await?;
    Ok(next)
}

fn ready(obj: &VCenterSimulator, r: &Reconciler, next: Condition) -> Vec<Condition> {
    let mut conds = obj
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default();
    conditions::set(&mut conds, next, r.ctx.now());
    conds
}

async fn apply_status(
    api: &Api<VCenterSimulator>,
    obj: &VCenterSimulator,
    status: &VCenterSimulatorStatus,
) -> Result<(), kube::Error> {
    let body = json!({
        "apiVersion": "vcsim.infrastructure.cluster.x-k8s.io/v1alpha1",
        "kind": "VCenterSimulator",
        "status": status,
    });
    infrasim_controller_runtime::writes::apply_status(api, &obj.name_any(), MANAGER, &body).await
}

/// Starts the object's simulator and makes its templates and tags.
async fn start(obj: &VCenterSimulator, r: &Reconciler, key: &str) -> Result<Serving, Failure> {
    let model = obj.spec.model.clone().unwrap_or_default();
    let mut config = sim_config(&model).map_err(Failure::InvalidModel)?;
    config.users = users(obj, r).await?;
    let previous = obj.status.clone().unwrap_or_default();
    config.username = if previous.username.is_empty() {
        "administrator@vsphere.local".to_string()
    } else {
        previous.username.clone()
    };
    // The credentials a restarted controller had handed out stay valid.
    config.password = if previous.password.is_empty() {
        password()
    } else {
        previous.password.clone()
    };
    let ip = r.ctx.cloud.advertise_address();
    let port = previous
        .host
        .parse::<SocketAddr>()
        .map(|a| a.port())
        .unwrap_or(0);
    let clock = r.ctx.clock.clone();
    // Kept in the plane's durable store (not under --ephemeral): a restarted plane brings the
    // simulator back as it was, rather than a new one of its model.
    let keeper = r.ctx.cloud.simulator_group(key).map(Keeper::new);
    let restarted = keeper.as_ref().is_some_and(Keeper::holds_a_simulator);
    let begin = |listen: SocketAddr| match &keeper {
        Some(k) => Instance::start_kept(config.clone(), listen, clock.clone(), None, k.clone()),
        None => Instance::start(config.clone(), listen, clock.clone()),
    };
    let instance = match begin(SocketAddr::new(ip, port)).await {
        Ok(i) => i,
        // Its old port is taken: a new one (clients read the status again).
        Err(_) if port != 0 => begin(SocketAddr::new(ip, 0))
            .await
            .map_err(|e| Failure::Unavailable(format!("the simulator cannot serve: {e}")))?,
        Err(e) => {
            return Err(Failure::Unavailable(format!(
                "the simulator cannot serve: {e}"
            )))
        }
    };
    // A simulator brought back has its templates, tags and library already (and maybe more
    // or fewer: what its clients made of them since).
    if !restarted {
        let (provisioned, durable) =
            infrasim_store::durability::scope(async { provision(&instance, &model) }).await;
        provisioned.map_err(Failure::InvalidModel)?;
        durable
            .wait()
            .await
            .map_err(|e| Failure::Unavailable(format!("the simulator cannot be kept: {e}")))?;
    }
    if let Some(metrics) = &r.ctx.metrics {
        instance.simulator().report_to(metrics.vsphere(), key);
    }
    let addr = instance.addr();
    r.simulators.insert(key, instance);
    let why = format!("serving the vSphere API at https://{addr}/sdk");
    r.ctx.event(obj, false, "Started", why).await;
    r.simulators
        .serving(key)
        .ok_or_else(|| Failure::Unavailable("the simulator stopped".into()))
}

/// The spec's users, their credentials read from their Secrets.
async fn users(obj: &VCenterSimulator, r: &Reconciler) -> Result<Vec<SimUser>, Failure> {
    let ns = obj.namespace().unwrap_or_default();
    let secrets: Api<Secret> = Api::namespaced(r.ctx.client.clone(), &ns);
    let mut out = Vec::new();
    for (i, user) in obj.spec.users.iter().flatten().enumerate() {
        let role: SystemRole = user
            .role
            .parse()
            .map_err(|e| Failure::InvalidModel(format!("spec.users[{i}].role: {e}")))?;
        // A Secret not there yet is waited for (a retry), as a port in use is.
        let secret = secrets.get_opt(&user.secret_name).await.ok().flatten();
        let field = |key: &str| {
            secret
                .as_ref()
                .and_then(|s| s.data.as_ref())
                .and_then(|d| d.get(key))
                .and_then(|v| String::from_utf8(v.0.clone()).ok())
        };
        let (Some(name), Some(password)) = (field("username"), field("password")) else {
            return Err(Failure::Unavailable(format!(
                "spec.users[{i}]: Secret {ns}/{} with username and password not found",
                user.secret_name
            )));
        };
        out.push(SimUser {
            name,
            password,
            role,
        });
    }
    Ok(out)
}

/// A random password for a simulator a controller starts (secure by default: no fixed
/// credentials).
pub(crate) fn password() -> String {
    use rand::distr::{Alphanumeric, SampleString};
    Alphanumeric.sample_string(&mut rand::rng(), 20)
}

/// The simulator configuration of a model, or why the model is refused.
pub(super) fn sim_config(model: &VCenterSimulatorModel) -> Result<SimConfig, String> {
    let count = |name: &str, value: Option<i32>, default: i32| -> Result<usize, String> {
        let n = value.unwrap_or(default);
        if !(0..=MODEL_LIMIT).contains(&n) {
            return Err(format!(
                "spec.model.{name} is {n}: it must be between 0 and {MODEL_LIMIT}"
            ));
        }
        Ok(n as usize)
    };
    let version = model.vsphere_version.as_deref().unwrap_or("7.0.0");
    let flavor = match version.trim_start_matches('v').split('.').next() {
        Some("7") => Flavor::VCenter7,
        Some("8") => Flavor::VCenter8,
        _ => {
            return Err(format!(
                "spec.model.vsphereVersion {version:?} is not simulated: 7.x or 8.x"
            ))
        }
    };
    let datacenter = count("datacenter", model.datacenter, 1)?;
    if datacenter == 0 {
        return Err("spec.model.datacenter must be at least 1".into());
    }
    let sim_model = Model {
        datacenters: datacenter,
        clusters: count("cluster", model.cluster, 1)?,
        hosts_per_cluster: count("clusterHost", model.cluster_host, 3)?,
        standalone_hosts: 1,
        vms: count("vms", model.vms, 2)?,
        datastores: count("datastore", model.datastore, 1)?.max(1),
        pools: count("pool", model.pool, 0)?,
        portgroups: count("portgroups", model.portgroups, 1)?,
        folders: count("folders", model.folders, 0)?.min(datacenter),
        esx: false,
    };
    for v in kubernetes_versions(model) {
        if v.is_empty()
            || !v
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || ".-+".contains(c))
        {
            return Err(format!(
                "spec.model.kubernetesVersions: {v:?} cannot name a template"
            ));
        }
    }
    Ok(SimConfig {
        flavor,
        model: sim_model,
        ..SimConfig::default()
    })
}

/// The Kubernetes versions the model's templates are made for.
pub(super) fn kubernetes_versions(model: &VCenterSimulatorModel) -> Vec<String> {
    match &model.kubernetes_versions {
        Some(versions) => versions.clone(),
        None => DEFAULT_KUBERNETES_VERSIONS
            .iter()
            .map(|v| v.to_string())
            .collect(),
    }
}

/// The template names made for `version`.
pub(super) fn template_names(version: &str) -> impl Iterator<Item = String> + '_ {
    TEMPLATE_RELEASES
        .iter()
        .map(move |release| format!("ubuntu-{release}-kube-{version}"))
}

/// In every datacenter: the templates, a `k8s-region` tag named as the datacenter on it, and
/// on each of its clusters a `k8s-zone` tag named as the cluster (what CAPV's failure domain
/// tests look up); and the content library `vcsim` with the templates as OVF items.
fn provision(instance: &Instance, model: &VCenterSimulatorModel) -> Result<(), String> {
    let sim = instance.simulator();
    let config = sim.config().model.clone();
    let versions = kubernetes_versions(model);
    for d in 0..config.datacenters {
        let dc_name = format!("DC{d}");
        let dc = sim
            .find_named("Datacenter", &dc_name, None)
            .ok_or_else(|| format!("datacenter {dc_name} was not generated"))?;
        let region = TagSpec {
            category: "k8s-region".into(),
            associable_types: vec!["Datacenter".into()],
            tag: dc_name.clone(),
        };
        sim.attach_tag(&region, &dc).map_err(|e| e.to_string())?;
        for c in 0..config.clusters {
            let cluster_name = format!("{dc_name}_C{c}");
            let Some(cluster) = sim.find_named("ClusterComputeResource", &cluster_name, Some(&dc))
            else {
                continue;
            };
            let zone = TagSpec {
                category: "k8s-zone".into(),
                associable_types: vec![],
                tag: cluster_name,
            };
            sim.attach_tag(&zone, &cluster).map_err(|e| e.to_string())?;
        }
        if config.clusters == 0 {
            continue;
        }
        for version in &versions {
            for name in template_names(version) {
                sim.create_template(&TemplateSpec::new(&name, &dc_name))
                    .map_err(|e| format!("template {name}: {e}"))?;
            }
        }
    }
    library(instance, &versions)
}

/// The content library `vcsim` on the first datastore of `DC0`, with an OVF item per template
/// name (what vm-operator's images and a library deployment use, as upstream's supervisor
/// setup names them).
fn library(instance: &Instance, versions: &[String]) -> Result<(), String> {
    let sim = instance.simulator();
    let datastore = sim
        .find_named("Datacenter", "DC0", None)
        .and_then(|dc| sim.find_named("Datastore", "LocalDS_0", Some(&dc)))
        .and_then(|ds| sim.inventory_path(&ds))
        .ok_or("datastore LocalDS_0 of DC0 was not generated")?;
    for version in versions {
        for name in template_names(version) {
            let ovf = sample_ovf(&name, 2, 4096);
            let spec = LibraryItemSpec {
                library: LIBRARY.to_string(),
                datastore: datastore.clone(),
                item: name.clone(),
                item_type: "ovf".to_string(),
                files: vec![(format!("{name}.ovf"), ovf.into())],
            };
            sim.add_library_item(&spec)
                .map_err(|e| format!("library item {name}: {e}"))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_model_is_upstreams_vpx_at_vcenter_7() {
        let config = sim_config(&VCenterSimulatorModel::default()).unwrap();
        assert_eq!(config.flavor, Flavor::VCenter7);
        assert_eq!(config.model.datacenters, 1);
        assert_eq!(config.model.clusters, 1);
        assert_eq!(config.model.hosts_per_cluster, 3);
        assert_eq!(config.model.datastores, 1);
        assert_eq!(config.model.pools, 0);
    }

    #[test]
    fn models_beyond_reach_are_refused_with_the_field() {
        let bad = |m: VCenterSimulatorModel| sim_config(&m).unwrap_err();
        let why = bad(VCenterSimulatorModel {
            vsphere_version: Some("6.5".into()),
            ..Default::default()
        });
        assert!(why.contains("vsphereVersion"), "{why}");
        let why = bad(VCenterSimulatorModel {
            cluster_host: Some(-1),
            ..Default::default()
        });
        assert!(why.contains("clusterHost"), "{why}");
        let why = bad(VCenterSimulatorModel {
            vms: Some(MODEL_LIMIT + 1),
            ..Default::default()
        });
        assert!(why.contains("vms"), "{why}");
        let why = bad(VCenterSimulatorModel {
            kubernetes_versions: Some(vec!["v1.33.0/../x".into()]),
            ..Default::default()
        });
        assert!(why.contains("kubernetesVersions"), "{why}");
        assert_eq!(
            sim_config(&VCenterSimulatorModel {
                vsphere_version: Some("8.0.3".into()),
                ..Default::default()
            })
            .unwrap()
            .flavor,
            Flavor::VCenter8
        );
    }

    #[test]
    fn every_version_gets_both_ubuntu_templates() {
        let names: Vec<String> = template_names("v1.33.0").collect();
        assert_eq!(
            names,
            ["ubuntu-2204-kube-v1.33.0", "ubuntu-2404-kube-v1.33.0"]
        );
    }

    #[tokio::test]
    async fn a_simulator_is_provisioned_with_templates_and_tags() {
        let model = VCenterSimulatorModel {
            datacenter: Some(2),
            kubernetes_versions: Some(vec!["v1.33.0".into()]),
            ..Default::default()
        };
        let config = sim_config(&model).unwrap();
        let clock = infrasim_clock::SystemClock::shared();
        let instance = Instance::start(config, "127.0.0.1:0".parse().unwrap(), clock)
            .await
            .unwrap();
        provision(&instance, &model).unwrap();
        let sim = instance.simulator();
        for dc in ["DC0", "DC1"] {
            for name in template_names("v1.33.0") {
                assert!(
                    sim.find_by_path(&format!("/{dc}/vm/{name}")).is_some(),
                    "{dc}/{name}"
                );
            }
        }
        // Provisioning again (a restarted reconcile) adds nothing and fails nothing.
        provision(&instance, &model).unwrap();
        instance.stop().await.unwrap();
    }
}
