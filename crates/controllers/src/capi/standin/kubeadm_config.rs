//! The KubeadmConfig controller (Cluster API's kubeadm bootstrap provider): writes each
//! Machine's bootstrap data secret once the cluster's infrastructure is ready. One control-
//! plane machine initializes the cluster (`kubeadm init`, serialized by the `<cluster>-lock`
//! ConfigMap); every other machine joins, so it waits for the control plane to be
//! initialized.

use super::certs::SECRET_TYPE;
use super::objects::owner_ref;
use super::{apply_status, paused, Core, Error, Reconciler};
use crate::capi::core::{
    BootstrapInitialization, Cluster, KubeadmConfig, KubeadmConfigStatus, Machine,
};
use crate::capi::CLUSTER_NAME_LABEL;
use infrasim_controller_runtime::conditions::{self, Condition};
use infrasim_controller_runtime::index::{label_key, label_keys, Index};
use infrasim_controller_runtime::reconcile::{Cleanup, Next, Reconcile};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, PostParams};
use kube::runtime::reflector::ObjectRef;
use kube::ResourceExt;
use serde_json::{json, Value};
use std::sync::Arc;

pub(super) async fn run(core: Arc<Core>) {
    let informers = core.informers.clone();
    let by_cluster = Index::new(|c: &KubeadmConfig| label_keys(c, &[CLUSTER_NAME_LABEL]));
    let controller =
        infrasim_controller_runtime::triggers::controller(&informers.of(), Some(&by_cluster))
            .watches_shared_stream(
                infrasim_controller_runtime::triggers::filtered(
                    &informers.of::<Machine>(),
                    crate::capi::triggers::machine_spec,
                ),
                |m| {
                    let ns = m.namespace().unwrap_or_default();
                    m.spec
                        .bootstrap
                        .config_ref
                        .as_ref()
                        .filter(|r| r.kind == "KubeadmConfig")
                        .map(|r| ObjectRef::new(&r.name).within(&ns))
                },
            )
            // The control plane's initialization lets the joining machines go.
            .watches_shared_stream(
                infrasim_controller_runtime::triggers::filtered(
                    &informers.of::<Cluster>(),
                    crate::capi::triggers::cluster_gates,
                ),
                move |c| {
                    let ns = c.namespace().unwrap_or_default();
                    by_cluster.lookup(&ns, &label_key(CLUSTER_NAME_LABEL, &c.name_any()))
                },
            );
    let ctx = core.ctx.clone();
    infrasim_controller_runtime::reconcile::run(&ctx, controller, Arc::new(Reconciler::new(core)))
        .await;
}

/// The Machine a config belongs to (its owner reference of kind Machine).
fn owner_machine(config: &KubeadmConfig) -> Option<String> {
    config
        .owner_references()
        .iter()
        .find(|o| o.kind == "Machine")
        .map(|o| o.name.clone())
}

/// The field manager this controller writes under: the stand-in's and its own name (see
/// [`infrasim_controller_runtime::writes`]).
const MANAGER: &str = "infrasim-capi-core/kubeadm_config";

/// A config keeps nothing that outlives it (its data secret is owned by it): no finalizer,
/// nothing to clean up.
impl Reconcile<KubeadmConfig> for Reconciler<KubeadmConfig> {
    type Error = Error;

    async fn apply(&self, config: Arc<KubeadmConfig>) -> Result<Next, Error> {
        let _running = infrasim_controller_runtime::metrics::reconciled("KubeadmConfig");
        apply(&config, self).await
    }

    async fn cleanup(&self, _: Arc<KubeadmConfig>) -> Result<Cleanup, Error> {
        let _running = infrasim_controller_runtime::metrics::reconciled("KubeadmConfig");
        Ok(Cleanup::Done)
    }
}

/// The bootstrap data, once the cluster may take the machine; then the config's status.
async fn apply(config: &KubeadmConfig, r: &Reconciler<KubeadmConfig>) -> Result<Next, Error> {
    let ns = config.namespace().unwrap_or_default();
    let Some(machine_name) = owner_machine(config) else {
        return Ok(Next::AwaitChange);
    };
    let Some(machine) = r.core.informers.get::<Machine>(&ns, &machine_name).await? else {
        return Ok(Next::AwaitChange);
    };
    let Some(cluster) = r
        .core
        .informers
        .get::<Cluster>(&ns, &machine.spec.cluster_name)
        .await?
    else {
        return Ok(Next::AwaitChange);
    };
    let api: Api<KubeadmConfig> = r.api(&ns);
    let now = r.core.ctx.now();
    let mut status = config.status.clone().unwrap_or_default();
    let mut conds = status.conditions.take().unwrap_or_default();
    if conditions::set_paused(&mut conds, paused(config, cluster.paused()), now) {
        status.conditions = Some(conds);
        apply_status(&api, config, MANAGER, &status).await?;
        return Ok(Next::AwaitChange);
    }
    let written = status
        .initialization
        .as_ref()
        .and_then(|i| i.data_secret_created)
        .unwrap_or(false);
    let wait = if written {
        None
    } else if !cluster.infrastructure_provisioned() {
        Some("Waiting for Cluster status.infrastructureReady to be true")
    } else if !cluster.control_plane_initialized()
        && !may_init(config, &machine, r, &cluster).await?
    {
        Some("Waiting for Cluster control plane to be initialized")
    } else {
        None
    };
    let name = config.name_any();
    if let Some(why) = wait {
        conditions::set(
            &mut conds,
            Condition::new("DataSecretAvailable", false, "NotAvailable", why),
            now,
        );
    } else if !written {
        write_data(r, config, &machine, &cluster).await?;
        status.data_secret_name = Some(name.clone());
        status.initialization = Some(BootstrapInitialization {
            data_secret_created: Some(true),
        });
        conditions::set(
            &mut conds,
            Condition::new("DataSecretAvailable", true, "Available", ""),
            now,
        );
        r.core
            .ctx
            .event(
                config,
                false,
                "DataSecretCreated",
                format!("bootstrap data written to Secret {name}"),
            )
            .await;
    }
    summarize(config, &mut status, conds, now);
    apply_status(&api, config, MANAGER, &status).await?;
    Ok(Next::AwaitChange)
}

/// The config's `Ready` (from its data secret and certificates), its v1beta1 view and the
/// generation it observed, into `status`.
fn summarize(
    config: &KubeadmConfig,
    status: &mut KubeadmConfigStatus,
    mut conds: Vec<Condition>,
    now: chrono::DateTime<chrono::Utc>,
) {
    conditions::set(
        &mut conds,
        Condition::new("CertificatesAvailable", true, "Available", ""),
        now,
    );
    let inputs: Vec<Condition> = ["DataSecretAvailable", "CertificatesAvailable"]
        .iter()
        .filter_map(|t| conditions::find(&conds, t).cloned())
        .collect();
    let refs: Vec<&Condition> = inputs.iter().collect();
    conditions::set(
        &mut conds,
        conditions::summary("Ready", &refs, ("NotReady", "ReadyUnknown", "Ready")),
        now,
    );
    conditions::sort(&mut conds);
    status.deprecated = Some(super::v1beta1::deprecated(
        &super::v1beta1::KUBEADM_CONFIG,
        &conds,
        serde_json::Value::Null,
        config.status.as_ref().and_then(|s| s.deprecated.as_ref()),
        now,
    ));
    status.conditions = Some(conds);
    status.observed_generation = config.metadata.generation;
}

/// Whether this machine may run `kubeadm init`: a control-plane machine whose config inits
/// (it has an `initConfiguration`, or no `joinConfiguration`), holding the cluster's init lock.
async fn may_init(
    config: &KubeadmConfig,
    machine: &Machine,
    r: &Reconciler<KubeadmConfig>,
    cluster: &Cluster,
) -> Result<bool, Error> {
    let fields = &config.spec.fields;
    let inits =
        fields.contains_key("initConfiguration") || !fields.contains_key("joinConfiguration");
    if !machine.is_control_plane() || !inits {
        return Ok(false);
    }
    let ns = cluster.namespace().unwrap_or_default();
    let locks: Api<ConfigMap> = r.api(&ns);
    let lock_name = format!("{}-lock", cluster.name_any());
    let lock: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": lock_name, "ownerReferences": [owner_ref(cluster, false)]},
        "data": {"lock-information": json!({"machineName": machine.name_any()}).to_string()},
    }))
    .map_err(kube::Error::SerdeError)?;
    match locks.create(&PostParams::default(), &lock).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(e)) if e.code == 409 => {
            let holder = locks
                .get_opt(&lock_name)
                .await?
                .and_then(|l| l.data)
                .and_then(|d| d.get("lock-information").cloned())
                .and_then(|i| serde_json::from_str::<Value>(&i).ok())
                .and_then(|i| i["machineName"].as_str().map(str::to_string));
            Ok(holder.as_deref() == Some(machine.name_any().as_str()))
        }
        Err(e) => Err(e.into()),
    }
}

/// The bootstrap data: what cloud-init would run on the machine (nothing runs it here; it
/// names the kubeadm step and carries the config's files, as real bootstrap data would).
async fn write_data(
    r: &Reconciler<KubeadmConfig>,
    config: &KubeadmConfig,
    machine: &Machine,
    cluster: &Cluster,
) -> Result<(), Error> {
    let ns = config.namespace().unwrap_or_default();
    let step = if config.spec.fields.contains_key("joinConfiguration")
        && cluster.control_plane_initialized()
    {
        "kubeadm join --config /run/kubeadm/kubeadm-join-config.yaml"
    } else {
        "kubeadm init --config /run/kubeadm/kubeadm.yaml"
    };
    let spec_yaml = serde_yaml::to_string(&config.spec.fields).unwrap_or_default();
    let value = format!(
        "## template: jinja\n#cloud-config\n# Machine {machine} of Cluster {cluster} (simulated by infrasim)\nwrite_files:\n- path: /run/kubeadm/kubeadm-config.yaml\n  owner: root:root\n  permissions: '0640'\n  content: |\n{spec}runcmd:\n  - '{step}'\n",
        machine = machine.name_any(),
        cluster = cluster.name_any(),
        spec = spec_yaml.lines().map(|l| format!("    {l}\n")).collect::<String>(),
    );
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": config.name_any(), "namespace": ns,
                     "labels": {crate::capi::CLUSTER_NAME_LABEL: cluster.name_any()},
                     "ownerReferences": [owner_ref(config, true)]},
        "type": SECRET_TYPE,
        "stringData": {"value": value, "format": "cloud-config"},
    }))
    .map_err(kube::Error::SerdeError)?;
    let secrets: Api<Secret> = r.api(&ns);
    match secrets.create(&PostParams::default(), &secret).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
        Err(e) => Err(e.into()),
    }
}
