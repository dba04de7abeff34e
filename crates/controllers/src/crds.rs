//! The CustomResourceDefinitions the controllers serve, generated from their Rust types (the
//! one source of the YAML in `deploy/`), and their installation into a management plane.

use crate::capi::admission::Reach;
use crate::capi::conversion::PATH;
use crate::capi::{core, infra::types as infra};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceConversion, CustomResourceDefinition,
};
use kube::api::{Api, Patch, PatchParams};
use kube::CustomResourceExt;
use std::time::Duration;

/// The in-memory provider's CRDs (both spellings, and their templates); with `v1beta1`, the
/// Dev kinds are served in v1beta1 too, converted by the webhook `capi::conversion` serves
/// for the provider (only a plane that reaches it can serve them: this process's engine).
pub fn provider(v1beta1: bool) -> Vec<CustomResourceDefinition> {
    provider_reached(v1beta1.then_some(&Reach::InProcess))
}

/// [`provider`], v1beta1 served (when `reach` is given) by the conversion webhook reached as
/// `reach` says.
pub fn provider_reached(reach: Option<&Reach>) -> Vec<CustomResourceDefinition> {
    use crate::capi::conversion::{PROVIDER_SERVICE_NAME, PROVIDER_SERVICE_NAMESPACE};
    use crate::capi::infra::v1beta1 as old;
    let service = (PROVIDER_SERVICE_NAMESPACE, PROVIDER_SERVICE_NAME);
    let both = |hub: CustomResourceDefinition, spoke: CustomResourceDefinition| match reach {
        Some(reach) => with_v1beta1(hub, spoke, reach.client_config(service, PATH)),
        None => hub,
    };
    vec![
        infra::InMemoryCluster::crd(),
        infra::InMemoryMachine::crd(),
        infra::InMemoryClusterTemplate::crd(),
        infra::InMemoryMachineTemplate::crd(),
        both(infra::DevCluster::crd(), old::DevCluster::crd()),
        both(infra::DevMachine::crd(), old::DevMachine::crd()),
        both(
            infra::DevClusterTemplate::crd(),
            old::DevClusterTemplate::crd(),
        ),
        both(
            infra::DevMachineTemplate::crd(),
            old::DevMachineTemplate::crd(),
        ),
    ]
}

/// The Fault controller's kind.
pub fn faults() -> Vec<CustomResourceDefinition> {
    vec![crate::faults::types::Fault::crd()]
}

/// The VmGroup controller's kind.
pub fn vmgroup() -> Vec<CustomResourceDefinition> {
    vec![crate::vmgroup::types::VmGroup::crd()]
}

/// Marks a CRD installed only where the plane lacks one of its name: metal3's own
/// BareMetalHost CRD, where metal3 runs, is kept as it is.
pub const ONLY_IF_ABSENT: &str = "infrasim.dev/only-if-absent";

/// The SIPCluster and ViNO controllers' kinds, and metal3's BareMetalHost (only if absent).
pub fn sip() -> Vec<CustomResourceDefinition> {
    use crate::sip::types::{BareMetalHost, SIPCluster};
    use crate::vino::types::{IPPool, Vino};
    let mut hosts = BareMetalHost::crd();
    hosts
        .metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(ONLY_IF_ABSENT.into(), "true".into());
    vec![SIPCluster::crd(), Vino::crd(), IPPool::crd(), hosts]
}

/// The in-cluster IPAM provider's pools (see [`crate::capi::ipam`]).
pub fn ipam_in_cluster() -> Vec<CustomResourceDefinition> {
    use crate::capi::ipam::types::{GlobalInClusterIPPool, InClusterIPPool};
    vec![InClusterIPPool::crd(), GlobalInClusterIPPool::crd()]
}

/// The vcsim controller's kinds.
pub fn vcsim() -> Vec<CustomResourceDefinition> {
    use crate::vcsim::types::{
        ControlPlaneEndpoint, EnvVar, VCenterSimulator, VMOperatorDependencies,
    };
    vec![
        spec_optional(VCenterSimulator::crd()),
        spec_optional(ControlPlaneEndpoint::crd()),
        spec_optional(EnvVar::crd()),
        spec_optional(VMOperatorDependencies::crd()),
    ]
}

/// Cluster API Provider vSphere's kinds (govmomi mode), for a plane without CAPV (embedded
/// mode), so the vcsim flow can be driven without it: CAPV's own CRDs replace these where it
/// is installed. Served at v1beta2 (stored) and v1beta1 like CAPV's; `spec` and `status` keep
/// whatever is written (the controller reads a few fields, `capv`'s types), and the two
/// versions convert by apiVersion alone (`None`), which is exact for the fields read here.
pub fn capv() -> Vec<CustomResourceDefinition> {
    capv_reached(None)
}

/// [`capv`], with v1beta1 converted (when `reach` is given) by the conversion webhook of
/// CAPV's Service, reached as `reach` says (else served by apiVersion alone).
pub fn capv_reached(reach: Option<&Reach>) -> Vec<CustomResourceDefinition> {
    let capv = Kept {
        group: "infrastructure.cluster.x-k8s.io",
        versions: &["v1beta2", "v1beta1"],
        deprecated: &["v1beta1"],
        labels: &[
            ("cluster.x-k8s.io/provider", "infrastructure-vsphere"),
            ("cluster.x-k8s.io/v1beta2", "v1beta2"),
            ("cluster.x-k8s.io/v1beta1", "v1beta1"),
        ],
    };
    [
        ("VSphereCluster", "vsphereclusters", true),
        ("VSphereClusterTemplate", "vsphereclustertemplates", true),
        ("VSphereMachine", "vspheremachines", true),
        ("VSphereMachineTemplate", "vspheremachinetemplates", true),
        ("VSphereVM", "vspherevms", true),
        ("VSphereClusterIdentity", "vsphereclusteridentities", false),
        ("VSphereFailureDomain", "vspherefailuredomains", false),
        ("VSphereDeploymentZone", "vspheredeploymentzones", false),
    ]
    .into_iter()
    .map(|(kind, plural, namespaced)| {
        let mut crd = capv.crd(kind, plural, namespaced, &[]);
        if let Some(reach) = reach {
            let service = crate::capi::admission::CAPV_SERVICE;
            crd.spec.conversion = Some(webhook_conversion(reach.client_config(service, PATH)));
        }
        crd
    })
    .collect()
}

/// CAPV's supervisor-mode kinds (`vmware.infrastructure.cluster.x-k8s.io`), as [`capv`]'s.
pub fn capv_supervisor() -> Vec<CustomResourceDefinition> {
    capv_supervisor_reached(None)
}

/// [`capv_supervisor`], with v1beta1 converted (when `reach` is given) by the conversion
/// webhook of CAPV's Service, as [`capv_reached`].
pub fn capv_supervisor_reached(reach: Option<&Reach>) -> Vec<CustomResourceDefinition> {
    let kept = Kept {
        group: crate::capi::SUPERVISOR_GROUP,
        versions: &["v1beta2", "v1beta1"],
        deprecated: &["v1beta1"],
        labels: &[
            ("cluster.x-k8s.io/provider", "infrastructure-vsphere"),
            ("cluster.x-k8s.io/v1beta2", "v1beta2"),
            ("cluster.x-k8s.io/v1beta1", "v1beta1"),
        ],
    };
    [
        ("VSphereCluster", "vsphereclusters"),
        ("VSphereClusterTemplate", "vsphereclustertemplates"),
        ("VSphereMachine", "vspheremachines"),
        ("VSphereMachineTemplate", "vspheremachinetemplates"),
        ("ProviderServiceAccount", "providerserviceaccounts"),
    ]
    .into_iter()
    .map(|(kind, plural)| {
        let mut crd = kept.crd(kind, plural, true, &[]);
        // Upstream deprecates both versions of this one.
        if kind == "ProviderServiceAccount" {
            for v in &mut crd.spec.versions {
                v.deprecated = Some(true);
            }
        }
        if let Some(reach) = reach {
            let service = crate::capi::admission::CAPV_SERVICE;
            crd.spec.conversion = Some(webhook_conversion(reach.client_config(service, PATH)));
        }
        crd
    })
    .collect()
}

/// vm-operator's kinds that supervisor mode reads and writes (`vmoperator.vmware.com`), for a
/// plane without vm-operator: served at v1alpha2 to v1alpha6 (stored, as vm-operator 9.2
/// stores them), kept as written like [`capv`]'s.
pub fn vm_operator() -> Vec<CustomResourceDefinition> {
    let vmop = Kept {
        group: "vmoperator.vmware.com",
        versions: &["v1alpha6", "v1alpha5", "v1alpha4", "v1alpha3", "v1alpha2"],
        deprecated: &[],
        labels: &[],
    };
    let short: [(&str, &str, bool, &[&str]); 6] = [
        ("VirtualMachine", "virtualmachines", true, &["vm"]),
        (
            "VirtualMachineClass",
            "virtualmachineclasses",
            true,
            &["vmclass"],
        ),
        (
            "VirtualMachineImage",
            "virtualmachineimages",
            true,
            &["vmi", "vmimage"],
        ),
        (
            "ClusterVirtualMachineImage",
            "clustervirtualmachineimages",
            false,
            &["cvmi", "cvmimage", "clustervmi", "clustervmimage"],
        ),
        (
            "VirtualMachineService",
            "virtualmachineservices",
            true,
            &["vmservice"],
        ),
        (
            "VirtualMachineSetResourcePolicy",
            "virtualmachinesetresourcepolicies",
            true,
            &[],
        ),
    ];
    short
        .into_iter()
        .map(|(kind, plural, namespaced, short)| vmop.crd(kind, plural, namespaced, short))
        .collect()
}

/// CRDs of another project's kinds whose `spec` and `status` are kept as written, served in
/// `versions` (the first stored; they convert by apiVersion alone).
struct Kept {
    group: &'static str,
    versions: &'static [&'static str],
    /// The versions upstream marks deprecated.
    deprecated: &'static [&'static str],
    labels: &'static [(&'static str, &'static str)],
}

impl Kept {
    fn crd(
        &self,
        kind: &str,
        plural: &str,
        namespaced: bool,
        short: &[&str],
    ) -> CustomResourceDefinition {
        let version = |name: &str, storage: bool| {
            serde_json::json!({
                "name": name, "served": true, "storage": storage,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "properties": {
                        "apiVersion": {"type": "string"},
                        "kind": {"type": "string"},
                        "metadata": {"type": "object"},
                        "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                        "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                    },
                }},
            })
        };
        let versions: Vec<_> = self
            .versions
            .iter()
            .enumerate()
            .map(|(i, v)| version(v, i == 0))
            .collect();
        let labels: serde_json::Map<String, serde_json::Value> = self
            .labels
            .iter()
            .map(|(k, v)| (k.to_string(), serde_json::json!(v)))
            .collect();
        let crd = serde_json::json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": format!("{plural}.{}", self.group), "labels": labels},
            "spec": {
                "group": self.group,
                "names": {"kind": kind, "listKind": format!("{kind}List"), "plural": plural,
                          "singular": kind.to_lowercase(), "shortNames": short},
                "scope": if namespaced { "Namespaced" } else { "Cluster" },
                "versions": versions,
            },
        });
        let mut crd: CustomResourceDefinition = serde_json::from_value(crd).unwrap_or_default();
        if short.is_empty() {
            crd.spec.names.short_names = None;
        }
        for v in &mut crd.spec.versions {
            if self.deprecated.contains(&v.name.as_str()) {
                v.deprecated = Some(true);
            }
        }
        if self.group.ends_with("infrastructure.cluster.x-k8s.io") {
            crd.spec.names.categories = Some(vec!["cluster-api".to_string()]);
        }
        crd
    }
}

/// Lets objects leave `spec` out, as upstream's `omitempty` specs do (CAPV's `vcsim.sh`
/// creates a ControlPlaneEndpoint with no spec at all): kube-derive marks it required, and
/// its typed readers need one, so the API server defaults it to `{}` instead.
fn spec_optional(mut crd: CustomResourceDefinition) -> CustomResourceDefinition {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::JSON;
    for version in &mut crd.spec.versions {
        let Some(root) = version
            .schema
            .as_mut()
            .and_then(|s| s.open_api_v3_schema.as_mut())
        else {
            continue;
        };
        if let Some(required) = root.required.as_mut() {
            required.retain(|f| f != "spec");
        }
        if let Some(spec) = root.properties.as_mut().and_then(|p| p.get_mut("spec")) {
            spec.default = Some(JSON(serde_json::json!({})));
        }
    }
    crd
}

/// The Cluster API core kinds the stand-in serves (and the kubeadm providers' kinds); with
/// `v1beta1`, they are served in v1beta1 too, converted by the webhook `capi::conversion`
/// serves (only a plane that reaches it can serve them: this process's embedded engine).
pub fn core(v1beta1: bool) -> Vec<CustomResourceDefinition> {
    core_reached(v1beta1.then_some(&Reach::InProcess))
}

/// [`core`], v1beta1 served (when `reach` is given) by the conversion webhooks reached as
/// `reach` says.
pub fn core_reached(reach: Option<&Reach>) -> Vec<CustomResourceDefinition> {
    use crate::capi::admission::{BOOTSTRAP_SERVICE, CONTROL_PLANE_SERVICE, CORE_SERVICE};
    use core::v1beta1 as old;
    // Each provider's kinds are converted by its own webhook Service, as upstream's are.
    let with = |service: (&'static str, &'static str)| {
        move |hub: CustomResourceDefinition, spoke: CustomResourceDefinition| match reach {
            Some(reach) => with_v1beta1(hub, spoke, reach.client_config(service, PATH)),
            None => hub,
        }
    };
    let (both, control_plane, bootstrap) = (
        with(CORE_SERVICE),
        with(CONTROL_PLANE_SERVICE),
        with(BOOTSTRAP_SERVICE),
    );
    vec![
        both(core::Cluster::crd(), old::Cluster::crd()),
        both(core::ClusterClass::crd(), old::ClusterClass::crd()),
        both(core::Machine::crd(), old::Machine::crd()),
        both(core::MachineSet::crd(), old::MachineSet::crd()),
        both(
            core::MachineDeployment::crd(),
            old::MachineDeployment::crd(),
        ),
        both(
            core::MachineHealthCheck::crd(),
            old::MachineHealthCheck::crd(),
        ),
        control_plane(
            core::KubeadmControlPlane::crd(),
            old::KubeadmControlPlane::crd(),
        ),
        control_plane(
            core::KubeadmControlPlaneTemplate::crd(),
            old::KubeadmControlPlaneTemplate::crd(),
        ),
        bootstrap(core::KubeadmConfig::crd(), old::KubeadmConfig::crd()),
        both(
            core::ClusterResourceSet::crd(),
            old::ClusterResourceSet::crd(),
        ),
        both(
            core::ClusterResourceSetBinding::crd(),
            old::ClusterResourceSetBinding::crd(),
        ),
        both(core::IPAddressClaim::crd(), old::IPAddressClaim::crd()),
        both(core::IPAddress::crd(), old::IPAddress::crd()),
        bootstrap(
            core::KubeadmConfigTemplate::crd(),
            old::KubeadmConfigTemplate::crd(),
        ),
    ]
}

/// `hub` (v1beta2, stored) with `spoke`'s v1beta1 beside it, deprecated as upstream marks it,
/// converted by the webhook `service` (namespace, name). A provider's CRD (one with a v1beta2
/// contract label) names v1beta1 as its version of the v1beta1 contract.
fn with_v1beta1(
    hub: CustomResourceDefinition,
    spoke: CustomResourceDefinition,
    client_config: serde_json::Value,
) -> CustomResourceDefinition {
    let mut crd = match kube::core::crd::merge_crds(vec![spoke, hub.clone()], "v1beta2") {
        Ok(merged) => merged,
        // Both come from this crate's types; a mismatch is a bug, served as v1beta2 alone.
        Err(e) => {
            tracing::error!(crd = ?hub.metadata.name, error = %e, "v1beta1 not served");
            return hub;
        }
    };
    // The merge keeps the first one's metadata: the hub's labels are the CRD's.
    crd.metadata = hub.metadata.clone();
    if let Some(labels) = crd.metadata.labels.as_mut() {
        if labels.contains_key("cluster.x-k8s.io/v1beta2") {
            labels.insert("cluster.x-k8s.io/v1beta1".into(), "v1beta1".into());
        }
    }
    // Upstream lists the versions oldest first.
    crd.spec.versions.sort_by(|a, b| a.name.cmp(&b.name));
    for version in &mut crd.spec.versions {
        if version.name == "v1beta1" {
            version.deprecated = Some(true);
        }
    }
    crd.spec.conversion = Some(webhook_conversion(client_config));
    crd
}

/// Conversion by the webhook at `client_config` (a Service's port 443, as upstream's).
fn webhook_conversion(client_config: serde_json::Value) -> CustomResourceConversion {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
        WebhookClientConfig, WebhookConversion,
    };
    let mut client_config: WebhookClientConfig =
        serde_json::from_value(client_config).unwrap_or_default();
    if let Some(service) = client_config.service.as_mut() {
        service.port = Some(443);
    }
    CustomResourceConversion {
        strategy: "Webhook".into(),
        webhook: Some(WebhookConversion {
            client_config: Some(client_config),
            conversion_review_versions: vec!["v1".into()],
        }),
    }
}

/// Every CRD, as YAML documents separated by `---`.
pub fn to_yaml(crds: &[CustomResourceDefinition]) -> Result<String, serde_yaml::Error> {
    let mut out = String::new();
    for crd in crds {
        out.push_str("---\n");
        out.push_str(&serde_yaml::to_string(crd)?);
    }
    Ok(out)
}

/// Why CRDs could not be installed.
#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    #[error("applying CRD {name}: {source}")]
    Apply { name: String, source: kube::Error },
    #[error("CRD {0} did not become Established")]
    NotEstablished(String),
}

/// Applies `crds` (server-side, as their owner) and waits until each is Established.
pub async fn install(
    client: &kube::Client,
    crds: &[CustomResourceDefinition],
) -> Result<(), InstallError> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in crds {
        let name = crd.metadata.name.clone().unwrap_or_default();
        if another_owns(&api, crd).await {
            tracing::info!(crd = %name, "kept the plane's own definition");
            continue;
        }
        api.patch(
            &name,
            &PatchParams::apply("infrasim-crds").force(),
            &Patch::Apply(crd),
        )
        .await
        .map_err(|source| InstallError::Apply {
            name: name.clone(),
            source,
        })?;
    }
    for crd in crds {
        let name = crd.metadata.name.clone().unwrap_or_default();
        let mut established = false;
        for _ in 0..200 {
            let current = api.get_opt(&name).await.ok().flatten();
            established = current
                .and_then(|c| c.status)
                .and_then(|s| s.conditions)
                .unwrap_or_default()
                .iter()
                .any(|c| c.type_ == "Established" && c.status == "True");
            if established {
                break;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        if !established {
            return Err(InstallError::NotEstablished(name));
        }
    }
    Ok(())
}

/// Whether `crd` is installed only where absent and the plane has another definition of it
/// (one without our mark).
async fn another_owns(api: &Api<CustomResourceDefinition>, crd: &CustomResourceDefinition) -> bool {
    let marked = |c: &CustomResourceDefinition| {
        c.metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(ONLY_IF_ABSENT))
    };
    if !marked(crd) {
        return false;
    }
    let name = crd.metadata.name.clone().unwrap_or_default();
    matches!(api.get_opt(&name).await, Ok(Some(existing)) if !marked(&existing))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    /// Upstream's names of every CRD served here (docs/upstream/crd-names-and-layout.md):
    /// CRD name, singular, short names. RBAC rules and `kubectl get` written against upstream
    /// use them.
    const UPSTREAM: &[(&str, &str, &[&str])] = &[
        ("clusters.cluster.x-k8s.io", "cluster", &["cl"]),
        ("clusterclasses.cluster.x-k8s.io", "clusterclass", &["cc"]),
        ("machines.cluster.x-k8s.io", "machine", &["ma"]),
        ("machinesets.cluster.x-k8s.io", "machineset", &["ms"]),
        (
            "machinedeployments.cluster.x-k8s.io",
            "machinedeployment",
            &["md"],
        ),
        (
            "machinehealthchecks.cluster.x-k8s.io",
            "machinehealthcheck",
            &["mhc", "mhcs"],
        ),
        (
            "kubeadmcontrolplanes.controlplane.cluster.x-k8s.io",
            "kubeadmcontrolplane",
            &["kcp"],
        ),
        (
            "kubeadmcontrolplanetemplates.controlplane.cluster.x-k8s.io",
            "kubeadmcontrolplanetemplate",
            &[],
        ),
        (
            "kubeadmconfigs.bootstrap.cluster.x-k8s.io",
            "kubeadmconfig",
            &[],
        ),
        (
            "kubeadmconfigtemplates.bootstrap.cluster.x-k8s.io",
            "kubeadmconfigtemplate",
            &[],
        ),
        (
            "inmemoryclusters.infrastructure.cluster.x-k8s.io",
            "inmemorycluster",
            &[],
        ),
        (
            "inmemorymachines.infrastructure.cluster.x-k8s.io",
            "inmemorymachine",
            &[],
        ),
        (
            "devclusters.infrastructure.cluster.x-k8s.io",
            "devcluster",
            &[],
        ),
        (
            "devmachines.infrastructure.cluster.x-k8s.io",
            "devmachine",
            &[],
        ),
        (
            "vsphereclusters.infrastructure.cluster.x-k8s.io",
            "vspherecluster",
            &[],
        ),
        (
            "vsphereclusteridentities.infrastructure.cluster.x-k8s.io",
            "vsphereclusteridentity",
            &[],
        ),
        (
            "vcentersimulators.vcsim.infrastructure.cluster.x-k8s.io",
            "vcentersimulator",
            &[],
        ),
        (
            "controlplaneendpoints.vcsim.infrastructure.cluster.x-k8s.io",
            "controlplaneendpoint",
            &[],
        ),
        (
            "envvars.vcsim.infrastructure.cluster.x-k8s.io",
            "envvar",
            &[],
        ),
        (
            "vmoperatordependencies.vcsim.infrastructure.cluster.x-k8s.io",
            "vmoperatordependencies",
            &[],
        ),
        (
            "virtualmachines.vmoperator.vmware.com",
            "virtualmachine",
            &["vm"],
        ),
        (
            "virtualmachineclasses.vmoperator.vmware.com",
            "virtualmachineclass",
            &["vmclass"],
        ),
        (
            "virtualmachineimages.vmoperator.vmware.com",
            "virtualmachineimage",
            &["vmi", "vmimage"],
        ),
        (
            "clustervirtualmachineimages.vmoperator.vmware.com",
            "clustervirtualmachineimage",
            &["cvmi", "cvmimage", "clustervmi", "clustervmimage"],
        ),
        (
            "virtualmachineservices.vmoperator.vmware.com",
            "virtualmachineservice",
            &["vmservice"],
        ),
        (
            "baremetalhosts.metal3.io",
            "baremetalhost",
            &["bmh", "bmhost"],
        ),
        ("sipclusters.airship.airshipit.org", "sipcluster", &[]),
        ("vinoes.airship.airshipit.org", "vino", &[]),
        ("vmgroups.vm.codeconnect.vmworld.com", "vmgroup", &["vg"]),
    ];

    #[test]
    fn every_crd_is_named_as_upstream_names_it() {
        let served: Vec<CustomResourceDefinition> = [
            core(true),
            provider(true),
            vcsim(),
            capv(),
            capv_supervisor(),
            vm_operator(),
            sip(),
            vmgroup(),
        ]
        .concat();
        for (name, singular, short) in UPSTREAM {
            let crd = served
                .iter()
                .find(|c| c.metadata.name.as_deref() == Some(*name))
                .unwrap_or_else(|| panic!("{name} is not served under upstream's name"));
            let names = &crd.spec.names;
            assert_eq!(
                format!("{}.{}", names.plural, crd.spec.group),
                *name,
                "plural"
            );
            assert_eq!(names.singular.as_deref(), Some(*singular), "{name}");
            let ours: Vec<&str> = names
                .short_names
                .iter()
                .flatten()
                .map(String::as_str)
                .collect();
            assert_eq!(ours, *short, "{name}");
        }
    }

    /// kube-apiserver refuses a schema node with both `properties` and
    /// `additionalProperties`; every node must have a type unless it preserves unknown fields.
    fn structural(v: &Value, path: &str, problems: &mut Vec<String>) {
        let Some(o) = v.as_object() else { return };
        if o.contains_key("properties") && o.contains_key("additionalProperties") {
            problems.push(format!("{path}: properties and additionalProperties"));
        }
        if !o.contains_key("type")
            && !o.contains_key("x-kubernetes-preserve-unknown-fields")
            && !o.contains_key("x-kubernetes-int-or-string")
        {
            problems.push(format!("{path}: no type"));
        }
        for (k, child) in o
            .get("properties")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
        {
            structural(child, &format!("{path}.{k}"), problems);
        }
        if let Some(items) = o.get("items") {
            structural(items, &format!("{path}[]"), problems);
        }
        if let Some(Value::Object(_)) = o.get("additionalProperties") {
            structural(&o["additionalProperties"], &format!("{path}{{}}"), problems);
        }
    }

    #[test]
    fn every_crd_is_structural_and_labelled() {
        for crd in provider(false)
            .into_iter()
            .chain(provider(true))
            .chain(core(true))
            .chain(vcsim())
            .chain(capv())
            .chain(capv_supervisor())
            .chain(vm_operator())
        {
            let name = crd.metadata.name.clone().unwrap_or_default();
            let v = serde_json::to_value(&crd).unwrap();
            for version in v["spec"]["versions"].as_array().unwrap() {
                let schema = &version["schema"]["openAPIV3Schema"];
                let mut problems = Vec::new();
                structural(schema, &name, &mut problems);
                assert!(problems.is_empty(), "{problems:#?}");
            }
            if crd.spec.group == "infrastructure.cluster.x-k8s.io" {
                let labels = crd.metadata.labels.clone().unwrap_or_default();
                let versions = &crd.spec.versions;
                let stored = versions.iter().find(|v| v.storage).map(|v| v.name.clone());
                assert_eq!(
                    labels.get("cluster.x-k8s.io/v1beta2"),
                    stored.as_ref(),
                    "{name}"
                );
                // The v1beta1 contract's version is v1beta1 where that is served.
                let v1beta1 = match versions.iter().any(|v| v.name == "v1beta1") {
                    true => Some("v1beta1".to_string()),
                    false => stored,
                };
                assert_eq!(
                    labels.get("cluster.x-k8s.io/v1beta1"),
                    v1beta1.as_ref(),
                    "{name}"
                );
                let provider = match crd.spec.names.kind.starts_with("VSphere") {
                    true => "infrastructure-vsphere",
                    false => "infrastructure-in-memory",
                };
                assert_eq!(
                    labels.get("cluster.x-k8s.io/provider").map(String::as_str),
                    Some(provider)
                );
                assert_eq!(
                    crd.spec.names.categories.as_deref(),
                    Some(&["cluster-api".to_string()][..])
                );
            }
        }
    }

    #[test]
    fn cluster_is_served_in_v1beta1_beside_the_stored_v1beta2() {
        let clusters = core(true).remove(0);
        let versions: Vec<_> = clusters
            .spec
            .versions
            .iter()
            .map(|v| (v.name.as_str(), v.served, v.storage, v.deprecated))
            .collect();
        assert_eq!(
            versions,
            [
                ("v1beta1", true, false, Some(true)),
                ("v1beta2", true, true, None)
            ]
        );
        let conversion = serde_json::to_value(&clusters.spec.conversion).unwrap();
        assert_eq!(conversion["strategy"], "Webhook");
        assert_eq!(
            conversion["webhook"]["clientConfig"]["service"]["name"],
            "capi-webhook-service"
        );
        assert_eq!(core(false).remove(0).spec.versions.len(), 1);
    }

    #[test]
    fn capvs_kinds_are_served_in_both_versions_with_their_scope() {
        let crds = capv();
        assert_eq!(crds.len(), 8);
        for crd in &crds {
            let name = crd.metadata.name.as_deref().unwrap_or_default();
            assert!(name.ends_with(".infrastructure.cluster.x-k8s.io"), "{name}");
            let versions: Vec<(&str, bool)> = crd
                .spec
                .versions
                .iter()
                .map(|v| (v.name.as_str(), v.storage))
                .collect();
            assert_eq!(versions, [("v1beta2", true), ("v1beta1", false)], "{name}");
        }
        let scope = |kind: &str| {
            crds.iter()
                .find(|c| c.spec.names.kind == kind)
                .map(|c| c.spec.scope.clone())
        };
        assert_eq!(scope("VSphereVM").as_deref(), Some("Namespaced"));
        assert_eq!(scope("VSphereFailureDomain").as_deref(), Some("Cluster"));
    }
}
