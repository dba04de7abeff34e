//! Cluster API's admission webhooks, as part of the embedded core: the defaulting and
//! validating webhooks of Cluster API v1.11 (core, kubeadm bootstrap, kubeadm control
//! plane) and of the in-cluster IPAM provider (its pools, at `v1alpha2`; see `ipam.rs`),
//! served in the controllers' process behind the webhook Services upstream uses and
//! registered with the webhook configurations upstream installs, so the engine calls them on
//! its one admission path, in the order kube-apiserver does (mutating webhooks before schema
//! validation: a MachineDeployment written without `spec.selector` gets one before the schema
//! would ask for it).
//!
//! They run on `v1beta2` objects, as upstream's v1.11 webhooks do: a `v1beta1` request reaches
//! them converted (`matchPolicy: Equivalent`) and its answer is converted back. With
//! `--capi-core=external` none of this is installed: Cluster API's own webhooks decide.
//!
//! One file per kind holds its defaults and checks; `rules` those several kinds share;
//! `field` the errors' wording; `review` the AdmissionReview's request and response.

mod class_variables;
mod cluster;
mod cluster_class;
pub mod field;
mod health_check;
mod ipam;
mod kubeadm_config;
mod kubeadm_control_plane;
mod machine;
mod machine_deployment;
mod machine_set;
mod patches;
pub mod review;
mod rules;
mod variables;

use crate::capi::conversion::Converter;
use futures::future::BoxFuture;
use infrasim_kube_api::webhook::InProcessWebhook;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use kube::core::GroupVersionKind;
use review::{Operation, Review, Verdict};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

/// The webhook Services of Cluster API's three providers: (namespace, name).
pub const CORE_SERVICE: (&str, &str) = ("capi-system", "capi-webhook-service");
pub const BOOTSTRAP_SERVICE: (&str, &str) = (
    "capi-kubeadm-bootstrap-system",
    "capi-kubeadm-bootstrap-webhook-service",
);
pub const CONTROL_PLANE_SERVICE: (&str, &str) = (
    "capi-kubeadm-control-plane-system",
    "capi-kubeadm-control-plane-webhook-service",
);
/// CAPV's webhook Service: its kinds' conversion, for the CAPV stand-in (see
/// [`crate::capv`]).
pub const CAPV_SERVICE: (&str, &str) = ("capv-system", "capv-webhook-service");
/// The in-cluster IPAM provider's webhook Service (see [`crate::capi::ipam`]).
pub const IPAM_SERVICE: (&str, &str) = (
    "capi-ipam-in-cluster-system",
    "capi-ipam-in-cluster-webhook-service",
);

/// The label that marks the webhook configurations this process installs (and removes
/// when Cluster API's own core takes over).
const MANAGED_BY: (&str, &str) = ("app.kubernetes.io/managed-by", "infrasim");
/// The field manager the webhook configurations are applied under: the stand-in's name and
/// this module's, as every writer's of the family (see [`infrasim_controller_runtime::writes`]).
const FIELD_MANAGER: &str = "infrasim-capi-core/admission";

/// How long the Cluster webhook waits for a ClusterClass to appear, polling, as upstream's.
const CLASS_WAIT: Duration = Duration::from_secs(2);
const CLASS_POLL: Duration = Duration::from_millis(200);

/// What a webhook is, for the configurations and the router.
struct Hook {
    service: (&'static str, &'static str),
    group: &'static str,
    kind: &'static str,
    resource: &'static str,
    mutating: bool,
    operations: &'static [&'static str],
    /// The version it is registered for: Cluster API's are at v1beta2, the IPAM pools'
    /// at v1alpha2.
    version: &'static str,
}

const CREATE_UPDATE: &[&str] = &["CREATE", "UPDATE"];
const WITH_DELETE: &[&str] = &["CREATE", "UPDATE", "DELETE"];
const CORE: &str = "cluster.x-k8s.io";
const BOOTSTRAP: &str = "bootstrap.cluster.x-k8s.io";
const CONTROL_PLANE: &str = "controlplane.cluster.x-k8s.io";
const IPAM: &str = "ipam.cluster.x-k8s.io";

/// Every webhook, as Cluster API v1.11 registers them (and the in-cluster IPAM provider its
/// pools').
const HOOKS: &[Hook] = &[
    hook(
        CORE_SERVICE,
        CORE,
        "Cluster",
        "clusters",
        true,
        CREATE_UPDATE,
    ),
    hook(
        CORE_SERVICE,
        CORE,
        "Cluster",
        "clusters",
        false,
        WITH_DELETE,
    ),
    hook(
        CORE_SERVICE,
        CORE,
        "ClusterClass",
        "clusterclasses",
        false,
        WITH_DELETE,
    ),
    hook(
        CORE_SERVICE,
        CORE,
        "Machine",
        "machines",
        true,
        CREATE_UPDATE,
    ),
    hook(
        CORE_SERVICE,
        CORE,
        "Machine",
        "machines",
        false,
        CREATE_UPDATE,
    ),
    hook(
        CORE_SERVICE,
        CORE,
        "MachineDeployment",
        "machinedeployments",
        true,
        CREATE_UPDATE,
    ),
    hook(
        CORE_SERVICE,
        CORE,
        "MachineDeployment",
        "machinedeployments",
        false,
        CREATE_UPDATE,
    ),
    hook(
        CORE_SERVICE,
        CORE,
        "MachineSet",
        "machinesets",
        true,
        CREATE_UPDATE,
    ),
    hook(
        CORE_SERVICE,
        CORE,
        "MachineSet",
        "machinesets",
        false,
        CREATE_UPDATE,
    ),
    hook(
        CORE_SERVICE,
        CORE,
        "MachineHealthCheck",
        "machinehealthchecks",
        true,
        CREATE_UPDATE,
    ),
    hook(
        CORE_SERVICE,
        CORE,
        "MachineHealthCheck",
        "machinehealthchecks",
        false,
        CREATE_UPDATE,
    ),
    hook(
        BOOTSTRAP_SERVICE,
        BOOTSTRAP,
        "KubeadmConfig",
        "kubeadmconfigs",
        false,
        CREATE_UPDATE,
    ),
    hook(
        BOOTSTRAP_SERVICE,
        BOOTSTRAP,
        "KubeadmConfigTemplate",
        "kubeadmconfigtemplates",
        false,
        CREATE_UPDATE,
    ),
    hook(
        CONTROL_PLANE_SERVICE,
        CONTROL_PLANE,
        "KubeadmControlPlane",
        "kubeadmcontrolplanes",
        true,
        CREATE_UPDATE,
    ),
    hook(
        CONTROL_PLANE_SERVICE,
        CONTROL_PLANE,
        "KubeadmControlPlane",
        "kubeadmcontrolplanes",
        false,
        CREATE_UPDATE,
    ),
    hook(
        CONTROL_PLANE_SERVICE,
        CONTROL_PLANE,
        "KubeadmControlPlaneTemplate",
        "kubeadmcontrolplanetemplates",
        false,
        CREATE_UPDATE,
    ),
    hook(
        CORE_SERVICE,
        IPAM,
        "IPAddress",
        "ipaddresses",
        false,
        WITH_DELETE,
    ),
    Hook {
        version: "v1alpha2",
        ..hook(
            IPAM_SERVICE,
            IPAM,
            "InClusterIPPool",
            "inclusterippools",
            false,
            WITH_DELETE,
        )
    },
    Hook {
        version: "v1alpha2",
        ..hook(
            IPAM_SERVICE,
            IPAM,
            "GlobalInClusterIPPool",
            "globalinclusterippools",
            false,
            WITH_DELETE,
        )
    },
];

const fn hook(
    service: (&'static str, &'static str),
    group: &'static str,
    kind: &'static str,
    resource: &'static str,
    mutating: bool,
    operations: &'static [&'static str],
) -> Hook {
    Hook {
        service,
        group,
        kind,
        resource,
        mutating,
        operations,
        version: "v1beta2",
    }
}

impl Hook {
    /// Upstream's path: `/mutate-cluster-x-k8s-io-v1beta2-machinedeployment`.
    fn path(&self) -> String {
        format!(
            "/{}-{}-{}-{}",
            if self.mutating { "mutate" } else { "validate" },
            self.group.replace('.', "-"),
            self.version,
            self.kind.to_ascii_lowercase()
        )
    }

    /// Upstream's name: `default.machinedeployment.cluster.x-k8s.io`.
    fn name(&self) -> String {
        format!(
            "{}.{}.{}",
            if self.mutating {
                "default"
            } else {
                "validation"
            },
            self.kind.to_ascii_lowercase(),
            self.group
        )
    }

    fn webhook(&self, reach: &Reach) -> Value {
        webhook_entry(
            &self.name(),
            reach.client_config(self.service, &self.path()),
            json!([{"apiGroups": [self.group], "apiVersions": [self.version],
                    "operations": self.operations, "resources": [self.resource]}]),
        )
    }
}

/// How the plane reaches these webhook servers: through the Services this process stands
/// behind inside its own engine, or at a URL this process serves over HTTPS, for a plane
/// elsewhere (`infrasim controller --webhook-listen`).
#[derive(Debug, Clone, Default, PartialEq)]
pub enum Reach {
    #[default]
    InProcess,
    /// `base` (`https://host:port`) and the CA bundle (base64 of the PEM) that trusts it.
    Url { base: String, ca_bundle: String },
}

impl Reach {
    /// A webhook's `clientConfig` for the Service `service` and `path`.
    pub fn client_config(&self, service: (&str, &str), path: &str) -> Value {
        match self {
            Reach::InProcess => {
                json!({"service": {"namespace": service.0, "name": service.1, "path": path}})
            }
            Reach::Url { base, ca_bundle } => {
                json!({"url": format!("{base}{path}"), "caBundle": ca_bundle})
            }
        }
    }
}

fn webhook_entry(name: &str, client_config: Value, rules: Value) -> Value {
    json!({
        "name": name,
        "clientConfig": client_config,
        "rules": rules,
        "admissionReviewVersions": ["v1", "v1beta1"],
        "sideEffects": "None", "failurePolicy": "Fail", "matchPolicy": "Equivalent",
    })
}

/// The KubeadmControlPlane scale subresource's webhook.
const SCALE_PATH: &str =
    "/validate-scale-controlplane-cluster-x-k8s-io-v1beta2-kubeadmcontrolplane";

/// The webhook configurations Cluster API's providers install, named as upstream names them,
/// reached as `reach` says.
pub fn configurations(reach: &Reach) -> Vec<Value> {
    let mut out = Vec::new();
    for (service, prefix) in [
        (CORE_SERVICE, "capi"),
        (BOOTSTRAP_SERVICE, "capi-kubeadm-bootstrap"),
        (CONTROL_PLANE_SERVICE, "capi-kubeadm-control-plane"),
        (IPAM_SERVICE, "capi-ipam-in-cluster"),
    ] {
        for mutating in [true, false] {
            let mut hooks: Vec<Value> = HOOKS
                .iter()
                .filter(|h| h.service == service && h.mutating == mutating)
                .map(|h| h.webhook(reach))
                .collect();
            if service == CONTROL_PLANE_SERVICE && !mutating {
                hooks.push(webhook_entry(
                    "validation-scale.kubeadmcontrolplane.controlplane.cluster.x-k8s.io",
                    reach.client_config(service, SCALE_PATH),
                    json!([{"apiGroups": [CONTROL_PLANE], "apiVersions": ["v1beta2"],
                            "operations": ["UPDATE"], "resources": ["kubeadmcontrolplanes/scale"]}]),
                ));
            }
            if hooks.is_empty() {
                continue;
            }
            let (kind, word) = if mutating {
                ("MutatingWebhookConfiguration", "mutating")
            } else {
                ("ValidatingWebhookConfiguration", "validating")
            };
            out.push(json!({
                "apiVersion": "admissionregistration.k8s.io/v1", "kind": kind,
                "metadata": {"name": format!("{prefix}-{word}-webhook-configuration"),
                             "labels": {MANAGED_BY.0: MANAGED_BY.1}},
                "webhooks": hooks,
            }));
        }
    }
    out
}

fn config_api(client: &kube::Client, kind: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("admissionregistration.k8s.io", "v1", kind);
    let plural = format!("{}s", kind.to_ascii_lowercase());
    Api::all_with(
        client.clone(),
        &ApiResource::from_gvk_with_plural(&gvk, &plural),
    )
}

/// Installs the webhook configurations (server-side apply, so a restart changes nothing).
pub async fn install(client: &kube::Client, reach: &Reach) -> Result<(), kube::Error> {
    for config in configurations(reach) {
        let kind = config["kind"].as_str().unwrap_or_default().to_string();
        let name = config["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        config_api(client, &kind)
            .patch(
                &name,
                &PatchParams::apply(FIELD_MANAGER).force(),
                &Patch::Apply(&config),
            )
            .await?;
    }
    Ok(())
}

/// Removes the configurations this process installed (Cluster API's own core decides now);
/// configurations Cluster API installed are left alone.
pub async fn uninstall(client: &kube::Client) -> Result<(), kube::Error> {
    for kind in [
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
    ] {
        let api = config_api(client, kind);
        let ours = ListParams::default().labels(&format!("{}={}", MANAGED_BY.0, MANAGED_BY.1));
        for config in api.list(&ours).await?.items {
            let name = config.metadata.name.unwrap_or_default();
            if configurations(&Reach::InProcess)
                .iter()
                .any(|c| c["metadata"]["name"] == name)
            {
                api.delete(&name, &DeleteParams::default()).await?;
            }
        }
    }
    Ok(())
}

/// Cluster API's webhook servers in this process: the conversion webhook at `/convert`, and,
/// with the embedded core, the admission webhooks.
pub struct CoreWebhooks {
    converter: Arc<Converter>,
    client: kube::Client,
    admission: bool,
}

impl CoreWebhooks {
    /// The webhook servers, reading what they need through `client`; admission webhooks
    /// answer only when `admission` (the embedded core), conversion always.
    pub fn new(client: kube::Client, admission: bool) -> Arc<Self> {
        Arc::new(CoreWebhooks {
            converter: Arc::new(Converter::new(client.clone())),
            client,
            admission,
        })
    }
}

/// Serves Cluster API's webhook Services in `server`'s process: conversion always, admission
/// when `admission` (the embedded core).
pub fn serve_in(server: &infrasim_kube_api::ApiServer, client: kube::Client, admission: bool) {
    let hooks = CoreWebhooks::new(client, admission);
    use crate::capi::conversion::{PROVIDER_SERVICE_NAME, PROVIDER_SERVICE_NAMESPACE};
    server.serve_webhook_in_process(
        PROVIDER_SERVICE_NAMESPACE,
        PROVIDER_SERVICE_NAME,
        hooks.clone(),
    );
    if admission {
        for (namespace, name) in [
            CORE_SERVICE,
            BOOTSTRAP_SERVICE,
            CONTROL_PLANE_SERVICE,
            IPAM_SERVICE,
            CAPV_SERVICE,
        ] {
            server.serve_webhook_in_process(namespace, name, hooks.clone());
        }
    }
}

impl InProcessWebhook for CoreWebhooks {
    fn review(&self, path: &str, body: Value) -> BoxFuture<'static, Result<Value, String>> {
        if path == crate::capi::conversion::PATH {
            return self.converter.review(path, body);
        }
        let client = self.client.clone();
        let admission = self.admission;
        let path = path.to_string();
        Box::pin(async move {
            if !admission {
                return Err(format!(
                    "the server could not find the requested resource: {path}"
                ));
            }
            let request = &body["request"];
            let review = Review::from_request(request)?;
            let name = review.object_name();
            let (verdict, after) = decide(&client, &path, &review).await?;
            let response = review::response(
                &request["uid"],
                &name,
                verdict,
                &review.object,
                after.as_ref(),
            );
            Ok(
                json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}),
            )
        })
    }
}

/// The verdict of the webhook at `path`, and for a defaulting one the object it made.
async fn decide(
    client: &kube::Client,
    path: &str,
    review: &Review,
) -> Result<(Verdict, Option<Value>), String> {
    if path == SCALE_PATH {
        return Ok((scale(client, review).await, None));
    }
    let hook = HOOKS
        .iter()
        .find(|h| h.path() == path)
        .ok_or_else(|| format!("the server could not find the requested resource: {path}"))?;
    if hook.mutating {
        let mut object = review.object.clone();
        let defaulted = match hook.kind {
            "Cluster" => default_cluster(client, review, &mut object).await,
            "Machine" => machine::default(review, &mut object),
            "MachineDeployment" => machine_deployment::default(review, &mut object),
            "MachineSet" => machine_set::default(review, &mut object),
            "MachineHealthCheck" => health_check::default(review, &mut object),
            _ => kubeadm_control_plane::default(review, &mut object),
        };
        return Ok(match defaulted {
            Ok(()) => (Verdict::allowed(), Some(object)),
            Err(verdict) => (verdict, None),
        });
    }
    let verdict = match hook.kind {
        "Cluster" => validate_cluster(client, review).await,
        "ClusterClass" => validate_cluster_class(client, review).await,
        "Machine" => machine::validate(review),
        "MachineDeployment" => machine_deployment::validate(review),
        "MachineSet" => machine_set::validate(review),
        "MachineHealthCheck" => health_check::validate(review),
        "KubeadmConfig" => kubeadm_config::validate_config(review),
        "KubeadmConfigTemplate" => kubeadm_config::validate_template(review),
        "KubeadmControlPlaneTemplate" => kubeadm_control_plane::validate_template(review),
        "IPAddress" => ipam::validate_address(client, review).await,
        kind @ ("InClusterIPPool" | "GlobalInClusterIPPool") => {
            ipam::validate_pool(client, kind, review).await
        }
        _ => kubeadm_control_plane::validate(review),
    };
    Ok((verdict, None))
}

fn dynamic(
    client: &kube::Client,
    group: &str,
    kind: &str,
    plural: &str,
    namespace: Option<&str>,
) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk(group, "v1beta2", kind);
    let resource = ApiResource::from_gvk_with_plural(&gvk, plural);
    match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
        None => Api::all_with(client.clone(), &resource),
    }
}

fn value_of(object: DynamicObject) -> Value {
    serde_json::to_value(object).unwrap_or(Value::Null)
}

/// The ClusterClass a topology Cluster names, waited for up to two seconds, as upstream
/// waits, so a class applied with its Cluster is found (`None`: not there, or no class named).
async fn find_class(
    client: &kube::Client,
    cluster: &Value,
    namespace: &str,
) -> Result<Option<Value>, kube::Error> {
    let class_name = rules::text(cluster, "/spec/topology/classRef/name").to_string();
    if class_name.is_empty() {
        return Ok(None);
    }
    let namespace = cluster
        .pointer("/spec/topology/classRef/namespace")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .unwrap_or(namespace)
        .to_string();
    let api = dynamic(
        client,
        CORE,
        "ClusterClass",
        "clusterclasses",
        Some(&namespace),
    );
    let deadline = tokio::time::Instant::now() + CLASS_WAIT;
    loop {
        match api.get_opt(&class_name).await? {
            Some(found) => return Ok(Some(value_of(found))),
            None if tokio::time::Instant::now() < deadline => tokio::time::sleep(CLASS_POLL).await,
            None => return Ok(None),
        }
    }
}

/// The Cluster's defaults: its own, then its topology's variables from its ClusterClass
/// (done here, in the defaulting webhook, as upstream does; a class not there yet leaves
/// them as they are).
async fn default_cluster(
    client: &kube::Client,
    review: &Review,
    object: &mut Value,
) -> Result<(), Verdict> {
    cluster::default(review, object)?;
    if object.pointer("/spec/topology").is_none() {
        return Ok(());
    }
    let class = find_class(client, object, &review.namespace)
        .await
        .map_err(|e| Verdict::Denied {
            code: 500,
            message: format!(
                "Cluster {} can't be defaulted. ClusterClass {} can not be retrieved: {e}",
                review.object_name(),
                rules::text(object, "/spec/topology/classRef/name")
            ),
        })?;
    let Some(class) = class else { return Ok(()) };
    let errors = variables::default_and_check(object, &class);
    match errors.is_empty() {
        true => Ok(()),
        false => Err(Verdict::of(CORE, "Cluster", errors)),
    }
}

/// The Cluster's checks, then those against its ClusterClass.
async fn validate_cluster(client: &kube::Client, review: &Review) -> Verdict {
    if review.operation == Operation::Delete {
        return Verdict::allowed();
    }
    let mut errors = cluster::validate(review);
    let mut class = None;
    if errors.iter().all(|e| e.path != "spec.topology.class") {
        match find_class(client, &review.object, &review.namespace).await {
            Ok(found) => class = found,
            Err(e) => {
                errors.push(field::FieldError::internal(
                    "spec.topology.class",
                    e.to_string(),
                ));
                return Verdict::of(CORE, "Cluster", errors);
            }
        }
    }
    let warnings = cluster::against_class(review, class.as_ref(), &mut errors);
    Verdict::of(CORE, "Cluster", errors).with_warnings(warnings)
}

/// The ClusterClass's checks, knowing which Clusters use it.
async fn validate_cluster_class(client: &kube::Client, review: &Review) -> Verdict {
    let name = review.object_name();
    let clusters = dynamic(client, CORE, "Cluster", "clusters", None);
    let users = match clusters.list(&ListParams::default()).await {
        Ok(list) => list
            .items
            .into_iter()
            .filter_map(|c| {
                let value = value_of(c);
                let used = cluster_class::classes_used(&value, &review.namespace, &name)?;
                let id = format!(
                    "{}/{}",
                    rules::text(&value, "/metadata/namespace"),
                    rules::text(&value, "/metadata/name")
                );
                Some((id, used))
            })
            .collect::<Vec<_>>(),
        Err(e) => {
            return Verdict::Denied {
                code: 500,
                message: format!("failed to list Clusters: {e}"),
            }
        }
    };
    cluster_class::validate(review, &users)
}

/// The scale subresource's webhook reads the control plane it scales.
async fn scale(client: &kube::Client, review: &Review) -> Verdict {
    let replicas = review
        .object
        .pointer("/spec/replicas")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let api = dynamic(
        client,
        CONTROL_PLANE,
        "KubeadmControlPlane",
        "kubeadmcontrolplanes",
        Some(&review.namespace),
    );
    match api.get(&review.name).await {
        Ok(kcp) => kubeadm_control_plane::validate_scale(replicas, &value_of(kcp)),
        Err(e) => Verdict::Denied {
            code: 500,
            message: format!(
                "failed to get KubeadmControlPlane {}/{}: {e}",
                review.namespace, review.name
            ),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configurations_are_named_and_routed_as_upstream_registers_them() {
        let configs = configurations(&Reach::InProcess);
        let names: Vec<&str> = configs
            .iter()
            .filter_map(|c| c["metadata"]["name"].as_str())
            .collect();
        assert_eq!(
            names,
            [
                "capi-mutating-webhook-configuration",
                "capi-validating-webhook-configuration",
                "capi-kubeadm-bootstrap-validating-webhook-configuration",
                "capi-kubeadm-control-plane-mutating-webhook-configuration",
                "capi-kubeadm-control-plane-validating-webhook-configuration",
                "capi-ipam-in-cluster-validating-webhook-configuration",
            ]
        );
        let pools = &configs[5]["webhooks"][0];
        assert_eq!(
            pools["clientConfig"]["service"]["path"],
            "/validate-ipam-cluster-x-k8s-io-v1alpha2-inclusterippool"
        );
        assert_eq!(pools["rules"][0]["apiVersions"], json!(["v1alpha2"]));
        let md = &configs[0]["webhooks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|w| w["name"] == "default.machinedeployment.cluster.x-k8s.io")
            .unwrap()
            .clone();
        assert_eq!(
            md["clientConfig"]["service"]["path"],
            "/mutate-cluster-x-k8s-io-v1beta2-machinedeployment"
        );
        assert_eq!(
            md["clientConfig"]["service"]["name"],
            "capi-webhook-service"
        );
        assert_eq!(md["matchPolicy"], "Equivalent");
        let scale = configs[4]["webhooks"]
            .as_array()
            .unwrap()
            .last()
            .unwrap()
            .clone();
        assert_eq!(
            scale["rules"][0]["resources"],
            json!(["kubeadmcontrolplanes/scale"])
        );
    }
}
