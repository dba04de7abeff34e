//! The VMOperatorDependencies reconciler (supervisor mode): makes what vm-operator needs to
//! run against a simulated vCenter, as upstream's test framework does, each object created
//! when missing and left as it is otherwise:
//! - per storage class: the StorageClass with the policy's ID (`storagePolicyID`, as PBM's
//!   `ProfileIDByName` answers it) and the ResourceQuota that lets the namespace use it;
//! - vm-operator's credentials Secrets and provider ConfigMap in its namespace;
//! - the VirtualMachineClasses;
//! - the content library items in the simulator, and a VirtualMachineImage per item with the
//!   status vm-operator would give it (Ready, its library item's ID).
//!
//! With `vCenterSimulatorRef` the vCenter, library and classes default as upstream's
//! `SetVCenterFromVCenterSimulator` makes them. The simulator must run in this process: the
//! policy IDs and library items are read and made through it.

use super::simulators::key;
use super::types::{
    ContentLibraryItemConfig, ContentLibraryItemFile, StorageClassSpec, VCenterSimulator,
    VCenterSpec, VMOperatorDependencies, VirtualMachineClassSpec,
};
use super::vcenter::{kubernetes_versions, template_names, LIBRARY};
use super::{Error, Reconciler};
use infrasim_controller_runtime::conditions::{self, Condition};
use infrasim_controller_runtime::reconcile::{Next, Reconcile};
use infrasim_vsphere_sim::{sample_ovf, LibraryItemSpec, Simulator};
use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use kube::ResourceExt;
use serde_json::{json, Value};
use std::sync::Arc;

/// vm-operator's namespace when the object names none.
pub const OPERATOR_NAMESPACE: &str = "vmware-system-vmop";
/// vm-operator's provider ConfigMap.
pub const PROVIDER_CONFIG: &str = "vsphere.provider.config.vmoperator.vmware.com";
/// The credentials Secrets (before and from vm-operator 1.9).
pub const CREDENTIALS: [&str; 2] = [
    "vsphere.provider.credentials.vmoperator.vmware.com",
    "wcp-vmop-sa-vc-auth",
];
/// The version vm-operator's objects are written in.
const VMOP_VERSION: &str = "vmoperator.vmware.com/v1alpha6";

/// The dependencies to make, defaults applied.
pub(super) struct Wanted {
    pub operator_namespace: String,
    pub vcenter: VCenterSpec,
    pub storage_classes: Vec<StorageClassSpec>,
    pub vm_classes: Vec<VirtualMachineClassSpec>,
}

impl VMOperatorDependencies {
    /// `(namespace, name)` of the VCenterSimulator it names, its namespace defaulting to
    /// the object's.
    pub fn simulator_ref(&self) -> Option<(String, String)> {
        let r = self.spec.vcenter_simulator_ref.as_ref()?;
        let ns = match r.namespace.is_empty() {
            true => self.namespace().unwrap_or_default(),
            false => r.namespace.clone(),
        };
        Some((ns, r.name.clone()))
    }
}

/// The field manager this controller writes under, the family's and its own name (see
/// [`infrasim_controller_runtime::writes`]).
const MANAGER: &str = "infrasim-vcsim-controller/vmoperator";

impl Reconcile<VMOperatorDependencies> for Reconciler {
    type Error = Error;

    async fn apply(&self, obj: Arc<VMOperatorDependencies>) -> Result<Next, Error> {
        set_up(&obj, self).await
    }
}

async fn set_up(obj: &VMOperatorDependencies, r: &Reconciler) -> Result<Next, Error> {
    let ns = obj.namespace().unwrap_or_default();
    let api: Api<VMOperatorDependencies> = Api::namespaced(r.ctx.client.clone(), &ns);
    let simulator = match obj.simulator_ref() {
        Some((sim_ns, sim_name)) => {
            match r
                .informers
                .get::<VCenterSimulator>(&sim_ns, &sim_name)
                .await?
            {
                // Not there, or not serving yet: its status changing wakes this object.
                Some(s) if s.status.as_ref().is_some_and(|s| !s.host.is_empty()) => Some(s),
                _ => return Ok(Next::AwaitChange),
            }
        }
        None => None,
    };
    let wanted = wanted(obj, simulator.as_deref());
    let sim = simulator
        .as_ref()
        .and_then(|s| {
            r.simulators
                .simulator(&key(&s.namespace().unwrap_or_default(), &s.name_any()))
        })
        .or_else(|| r.simulators.serving_at(&wanted.vcenter.server_url));
    let outcome = match sim {
        Some(sim) => make(r, &ns, &wanted, &sim).await,
        // A simulator starting here at that address writes its status, which wakes this.
        None => Err(Unmade::Named(format!(
            "vCenter {} is not a simulator of this process: only those are set up for vm-operator",
            wanted.vcenter.server_url
        ))),
    };
    let (ready, condition, refused) = match outcome {
        Ok(()) => (true, Condition::new("Ready", true, "Ready", ""), None),
        Err(unmade) => {
            let (why, refused) = match unmade {
                Unmade::Named(why) => (why, None),
                Unmade::Refused(why) => (why.clone(), Some(why)),
            };
            r.ctx
                .event(obj, true, "DependenciesFailed", why.clone())
                .await;
            let condition = Condition::new("Ready", false, "DependenciesFailed", why);
            (false, condition, refused)
        }
    };
    let mut conds = obj
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default();
    conditions::set(&mut conds, condition, r.ctx.now());
    let body = json!({
        "apiVersion": "vcsim.infrastructure.cluster.x-k8s.io/v1alpha1",
        "kind": "VMOperatorDependencies",
        "status": {"ready": ready, "conditions": conds},
    });
    infrasim_controller_runtime::writes::apply_status(&api, &obj.name_any(), MANAGER, &body)
        .await?;
    match refused {
        // A failure, retried with the runner's backoff.
        Some(why) => Err(Error::Dependencies(why)),
        // Ready, or waiting for what it names: the object's change, or its simulator's
        // status, wakes it.
        None => Ok(Next::AwaitChange),
    }
}

/// Why the dependencies could not be made, by what they wait for.
enum Unmade {
    /// Something the object names is not there (a storage policy, an inventory path, a
    /// simulator at its URL): the object's change, or its simulator's status, wakes it.
    Named(String),
    /// A write the plane refused.
    Refused(String),
}

impl From<String> for Unmade {
    fn from(why: String) -> Self {
        Unmade::Named(why)
    }
}

/// The object's dependencies with upstream's defaults for a simulator.
pub(super) fn wanted(obj: &VMOperatorDependencies, sim: Option<&VCenterSimulator>) -> Wanted {
    let spec = &obj.spec;
    let mut vcenter = spec.vcenter.clone().unwrap_or_default();
    let mut storage_classes = spec.storage_classes.clone();
    let mut vm_classes = spec.virtual_machine_classes.clone();
    if let Some(sim) = sim {
        let status = sim.status.clone().unwrap_or_default();
        let versions = kubernetes_versions(&sim.spec.model.clone().unwrap_or_default());
        vcenter = VCenterSpec {
            server_url: status.host,
            username: status.username,
            password: status.password,
            thumbprint: status.thumbprint,
            datacenter: "DC0".into(),
            cluster: "/DC0/host/DC0_C0".into(),
            folder: "DC0/vm".into(),
            resource_pool: "/DC0/host/DC0_C0/Resources".into(),
            distributed_port_group_name: "DC0_DVPG0".into(),
            content_library: super::types::ContentLibraryConfig {
                name: LIBRARY.into(),
                datastore: "/DC0/datastore/LocalDS_0".into(),
                items: versions
                    .iter()
                    .flat_map(|v| template_names(v).collect::<Vec<_>>())
                    .map(|name| ContentLibraryItemConfig {
                        files: vec![ContentLibraryItemFile {
                            name: format!("{name}.ovf"),
                            content: String::new(),
                        }],
                        name,
                        item_type: "ovf".into(),
                        product_info: "dummy-productInfo".into(),
                        os_info: "dummy-OSInfo".into(),
                    })
                    .collect(),
            },
        };
        if storage_classes.is_empty() {
            storage_classes.push(StorageClassSpec {
                name: "vcsim-default-storage-class".into(),
                storage_policy: super::vcenter::STORAGE_POLICY.into(),
            });
        }
        if !vm_classes
            .iter()
            .any(|c| c.name == "vcsim-default-vm-class")
        {
            vm_classes.push(VirtualMachineClassSpec {
                name: "vcsim-default-vm-class".into(),
                cpus: 2,
                memory: "4G".into(),
            });
        }
    }
    let operator_namespace = spec
        .operator_ref
        .as_ref()
        .map(|o| o.namespace.clone())
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| OPERATOR_NAMESPACE.to_string());
    Wanted {
        operator_namespace,
        vcenter,
        storage_classes,
        vm_classes,
    }
}

/// Makes every dependency (each only if missing); why not, for the condition.
async fn make(r: &Reconciler, ns: &str, w: &Wanted, sim: &Simulator) -> Result<(), Unmade> {
    let client = &r.ctx.client;
    fn fail(what: &'static str) -> impl Fn(kube::Error) -> Unmade {
        move |e| Unmade::Refused(format!("{what}: {e}"))
    }
    create(
        client,
        None,
        "v1",
        "Namespace",
        "namespaces",
        json!({"metadata": {"name": w.operator_namespace}}),
    )
    .await
    .map_err(fail("vm-operator's namespace"))?;
    for sc in &w.storage_classes {
        let id = sim
            .storage_policy_id(&sc.storage_policy)
            .ok_or_else(|| format!("no storage policy named {:?}", sc.storage_policy))?;
        let class = json!({"metadata": {"name": sc.name}, "provisioner": "kubernetes.io/vsphere-volume",
                           "parameters": {"storagePolicyID": id}});
        create(
            client,
            None,
            "storage.k8s.io/v1",
            "StorageClass",
            "storageclasses",
            class,
        )
        .await
        .map_err(fail("StorageClass"))?;
        let quota_key = format!("{}.storageclass.storage.k8s.io/requests.storage", sc.name);
        let quota = json!({"metadata": {"name": sc.name}, "spec": {"hard": {quota_key: "1Gi"}}});
        create(
            client,
            Some(ns),
            "v1",
            "ResourceQuota",
            "resourcequotas",
            quota,
        )
        .await
        .map_err(fail("ResourceQuota"))?;
    }
    provider_config(client, w, sim).await?;
    for class in &w.vm_classes {
        let body = json!({"metadata": {"name": class.name},
                          "spec": {"hardware": {"cpus": class.cpus, "memory": class.memory}}});
        create(
            client,
            Some(ns),
            VMOP_VERSION,
            "VirtualMachineClass",
            "virtualmachineclasses",
            body,
        )
        .await
        .map_err(fail("VirtualMachineClass"))?;
    }
    for item in &w.vcenter.content_library.items {
        image(client, ns, w, sim, item, r.ctx.now()).await?;
    }
    Ok(())
}

/// vm-operator's credentials Secrets and provider ConfigMap.
async fn provider_config(client: &kube::Client, w: &Wanted, sim: &Simulator) -> Result<(), Unmade> {
    let v = &w.vcenter;
    let ns = Some(w.operator_namespace.as_str());
    for name in CREDENTIALS {
        let secret = json!({"metadata": {"name": name}, "type": "Opaque",
                            "stringData": {"username": v.username, "password": v.password,
                                           "CAPV-TEST-Thumbprint": v.thumbprint}});
        create(client, ns, "v1", "Secret", "secrets", secret)
            .await
            .map_err(|e| Unmade::Refused(format!("Secret {name}: {e}")))?;
    }
    let id = |path: &str| {
        sim.find_by_path(path)
            .map(|m| m.value)
            .ok_or_else(|| format!("nothing at {path} in the simulator"))
    };
    let (host, port) = v
        .server_url
        .rsplit_once(':')
        .ok_or_else(|| format!("serverURL {:?} is not host:port", v.server_url))?;
    let data = json!({
        "Datacenter": id(&format!("/{}", v.datacenter))?,
        "Folder": id(&v.folder)?,
        "ResourcePool": id(&v.resource_pool)?,
        "InsecureSkipTLSVerify": "true",
        "StorageClassRequired": "true",
        "UseInventoryAsContentSource": "false",
        "VcCredsSecretName": CREDENTIALS[1],
        "VcPNID": host,
        "VcPort": port,
        "CAPV-TEST-Server": v.server_url,
        "CAPV-TEST-DatacenterName": v.datacenter,
        "CAPV-TEST-PortGroup": v.distributed_port_group_name,
    });
    let config = json!({"metadata": {"name": PROVIDER_CONFIG}, "data": data});
    create(client, ns, "v1", "ConfigMap", "configmaps", config)
        .await
        .map_err(|e| Unmade::Refused(format!("ConfigMap {PROVIDER_CONFIG}: {e}")))
}

/// The library item in the simulator and its VirtualMachineImage, Ready.
async fn image(
    client: &kube::Client,
    ns: &str,
    w: &Wanted,
    sim: &Simulator,
    item: &ContentLibraryItemConfig,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<(), Unmade> {
    use base64::Engine;
    let files = item
        .files
        .iter()
        .map(|f| {
            let bytes = match f.content.is_empty() {
                true => sample_ovf(&item.name, 2, 4096).into_bytes(),
                false => base64::engine::general_purpose::STANDARD
                    .decode(&f.content)
                    .map_err(|e| format!("file {} of item {}: {e}", f.name, item.name))?,
            };
            Ok((f.name.clone(), bytes.into()))
        })
        .collect::<Result<Vec<_>, String>>()?;
    let library = &w.vcenter.content_library;
    let spec = LibraryItemSpec {
        library: library.name.clone(),
        datastore: library.datastore.clone(),
        item: item.name.clone(),
        item_type: item.item_type.clone(),
        files,
    };
    let item_id = sim.add_library_item(&spec).map_err(|e| e.to_string())?;
    let body = json!({"metadata": {"name": item.name},
                      "spec": {"providerRef": {"kind": "ContentLibraryItem"}}});
    let (kind, plural) = ("VirtualMachineImage", "virtualmachineimages");
    create(client, Some(ns), VMOP_VERSION, kind, plural, body)
        .await
        .map_err(|e| Unmade::Refused(format!("VirtualMachineImage {}: {e}", item.name)))?;
    let images = api(client, Some(ns), &resource(VMOP_VERSION, kind, plural));
    // Server-side applied under the controller's field manager, as every other status it
    // writes: a merge patch would leave no owner and keep fields a later status drops.
    let status = json!({
        "apiVersion": VMOP_VERSION, "kind": kind, "metadata": {"name": item.name},
        "status": {
            "name": item.name, "providerItemID": item_id,
            "productInfo": {"fullVersion": item.product_info}, "osInfo": {"type": item.os_info},
            "conditions": [{"type": "Ready", "status": "True", "reason": "True", "message": "",
                            "lastTransitionTime": conditions::timestamp(now)}],
        },
    });
    infrasim_controller_runtime::writes::apply_status(&images, &item.name, MANAGER, &status)
        .await
        .map_err(|e| Unmade::Refused(format!("VirtualMachineImage {} status: {e}", item.name)))
}

/// The API resource of a kind known by apiVersion, kind and plural.
fn resource(api_version: &str, kind: &str, plural: &str) -> ApiResource {
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    ApiResource {
        group: group.to_string(),
        version: version.to_string(),
        api_version: api_version.to_string(),
        kind: kind.to_string(),
        plural: plural.to_string(),
    }
}

fn api(client: &kube::Client, ns: Option<&str>, resource: &ApiResource) -> Api<DynamicObject> {
    match ns {
        Some(ns) => Api::namespaced_with(client.clone(), ns, resource),
        None => Api::all_with(client.clone(), resource),
    }
}

/// Creates the object unless one of its name exists (upstream's "create if missing").
async fn create(
    client: &kube::Client,
    ns: Option<&str>,
    api_version: &str,
    kind: &str,
    plural: &str,
    mut body: Value,
) -> Result<(), kube::Error> {
    let resource = resource(api_version, kind, plural);
    let api = api(client, ns, &resource);
    let name = body["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    if api.get_opt(&name).await?.is_some() {
        return Ok(());
    }
    body["apiVersion"] = json!(api_version);
    body["kind"] = json!(kind);
    let obj: DynamicObject = serde_json::from_value(body).map_err(kube::Error::SerdeError)?;
    match api.create(&PostParams::default(), &obj).await {
        Ok(_) => Ok(()),
        // Made meanwhile: as good.
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::super::types::*;
    use super::*;

    #[test]
    fn a_simulator_reference_brings_upstreams_defaults() {
        let mut sim = VCenterSimulator::new(
            "vcsim1",
            VCenterSimulatorSpec {
                model: Some(VCenterSimulatorModel {
                    kubernetes_versions: Some(vec!["v1.33.0".into()]),
                    ..Default::default()
                }),
                users: None,
            },
        );
        sim.status = Some(VCenterSimulatorStatus {
            host: "127.0.0.1:8989".into(),
            password: "pw".into(),
            ..Default::default()
        });
        let deps = VMOperatorDependencies::new("deps", VMOperatorDependenciesSpec::default());
        let w = wanted(&deps, Some(&sim));
        assert_eq!(w.operator_namespace, OPERATOR_NAMESPACE);
        assert_eq!(w.vcenter.server_url, "127.0.0.1:8989");
        assert_eq!(w.vcenter.content_library.name, "vcsim");
        let items: Vec<&str> = w
            .vcenter
            .content_library
            .items
            .iter()
            .map(|i| i.name.as_str())
            .collect();
        assert_eq!(
            items,
            ["ubuntu-2204-kube-v1.33.0", "ubuntu-2404-kube-v1.33.0"]
        );
        assert_eq!(w.storage_classes[0].name, "vcsim-default-storage-class");
        assert_eq!(w.vm_classes[0].name, "vcsim-default-vm-class");
        // Without a simulator, only what the object says.
        let w = wanted(&deps, None);
        assert!(w.storage_classes.is_empty() && w.vm_classes.is_empty());
    }
}
