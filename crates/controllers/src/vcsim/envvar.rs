//! The EnvVar reconciler: writes into `status.variables` what a CAPV cluster template needs
//! to target a simulated vCenter and a control-plane endpoint (govmomi mode), with the names
//! upstream's controller gives them: inventory paths, or managed object IDs with `useMOID`.
//! It waits for the simulator and the endpoint to report where they serve, and is woken when
//! they do.

use super::simulators::{key, Simulators};
use super::types::{
    ControlPlaneEndpoint, EnvVar, VCenterSimulator, VCenterSimulatorStatus, VMOperatorDependencies,
};
use super::vcenter::{kubernetes_versions, template_names, STORAGE_POLICY};
use super::{Error, Reconciler};
use infrasim_controller_runtime::reconcile::{Next, Reconcile};
use infrasim_vsphere_sim::TemplateSpec;
use kube::api::Api;
use kube::ResourceExt;
use serde_json::json;
use std::collections::BTreeMap;
use std::sync::Arc;

/// The network VMs are connected to.
pub const NETWORK: &str = "VM Network";

impl super::types::ClusterEnvVarSpec {
    /// The variables of the cluster's shape, defaults applied as upstream's: the version
    /// (`v1.28.0`) and the machine counts (1 and 1).
    pub fn shape_variables(&self) -> [(&'static str, String); 3] {
        [
            (
                "KUBERNETES_VERSION",
                self.kubernetes_version.clone().unwrap_or("v1.28.0".into()),
            ),
            (
                "CONTROL_PLANE_MACHINE_COUNT",
                self.control_plane_machines.unwrap_or(1).to_string(),
            ),
            (
                "WORKER_MACHINE_COUNT",
                self.worker_machines.unwrap_or(1).to_string(),
            ),
        ]
    }
}

impl EnvVar {
    /// `(namespace, name)` of the VCenterSimulator it names, if it names one.
    pub fn simulator_ref(&self) -> Option<(String, String)> {
        let r = self.spec.vcenter_simulator.as_ref()?;
        Some((self.ref_namespace(&r.namespace), r.name.clone())).filter(|(_, n)| !n.is_empty())
    }

    /// `(namespace, name)` of its ControlPlaneEndpoint: the one it names, else the one named
    /// as its cluster (upstream's convention).
    pub fn endpoint_ref(&self) -> (String, String) {
        let r = &self.spec.control_plane_endpoint;
        let name = match r.name.is_empty() {
            true => self.spec.cluster.name.clone(),
            false => r.name.clone(),
        };
        (self.ref_namespace(&r.namespace), name)
    }

    /// `(namespace, name)` of the VMOperatorDependencies it names: supervisor mode.
    pub fn dependencies_ref(&self) -> Option<(String, String)> {
        let r = self.spec.vm_operator_dependencies.as_ref()?;
        Some((self.ref_namespace(&r.namespace), r.name.clone())).filter(|(_, n)| !n.is_empty())
    }

    fn ref_namespace(&self, namespace: &str) -> String {
        match namespace.is_empty() {
            true => self.namespace().unwrap_or_default(),
            false => namespace.to_string(),
        }
    }
}

/// The field manager this controller writes under, the family's and its own name (see
/// [`infrasim_controller_runtime::writes`]).
const MANAGER: &str = "infrasim-vcsim-controller/envvar";

impl Reconcile<EnvVar> for Reconciler {
    type Error = Error;

    async fn apply(&self, obj: Arc<EnvVar>) -> Result<Next, Error> {
        variables(&obj, self).await
    }
}

async fn variables(obj: &EnvVar, r: &Reconciler) -> Result<Next, Error> {
    let ns = obj.namespace().unwrap_or_default();
    let api: Api<EnvVar> = Api::namespaced(r.ctx.client.clone(), &ns);
    let Some((sim_ns, sim_name)) = obj.simulator_ref() else {
        let why = "spec.vCenterSimulator names no VCenterSimulator".to_string();
        r.ctx.event(obj, true, "InvalidSpec", why).await;
        return Ok(Next::AwaitChange);
    };
    let (cpe_ns, cpe_name) = obj.endpoint_ref();
    // Not there yet, or not serving yet: their status changing wakes this EnvVar.
    let Some(sim) = r
        .informers
        .get::<VCenterSimulator>(&sim_ns, &sim_name)
        .await?
    else {
        return Ok(Next::AwaitChange);
    };
    let Some(cpe) = r
        .informers
        .get::<ControlPlaneEndpoint>(&cpe_ns, &cpe_name)
        .await?
    else {
        return Ok(Next::AwaitChange);
    };
    let serving = sim.status.clone().unwrap_or_default();
    let endpoint = cpe.status.clone().unwrap_or_default();
    if serving.host.is_empty() || endpoint.host.is_empty() {
        return Ok(Next::AwaitChange);
    }
    let places = Places::new(obj, &sim);
    let local = r.simulators.simulator(&key(&sim_ns, &sim_name)).is_some();
    let ids = match (obj.spec.use_moid, local) {
        (false, _) => None,
        (true, true) => {
            let sim_key = key(&sim_ns, &sim_name);
            // Taken before the places are looked up, so one made in between is heard.
            let changes = r.simulators.simulator(&sim_key).map(|s| s.changes());
            match places.resolve(&r.simulators, &sim_key) {
                Ok(ids) => Some(ids),
                Err(why) => {
                    r.ctx.event(obj, true, "NotFound", why).await;
                    // A place a client makes in the simulator is its change; one the spec
                    // names differently is the EnvVar's.
                    if let Some(changes) = changes {
                        let me = kube::runtime::reflector::ObjectRef::from_obj(obj);
                        r.envvar_waits.wake_on_change(me, changes);
                    }
                    return Ok(Next::AwaitChange);
                }
            }
        }
        (true, false) => {
            let why = format!(
                "useMOID needs VCenterSimulator {sim_ns}/{sim_name} to run in this controller"
            );
            r.ctx.event(obj, true, "NotFound", why).await;
            // Started here, the simulator reports where it serves in its status (a new
            // address and certificate), whose change wakes this EnvVar.
            return Ok(Next::AwaitChange);
        }
    };
    if local {
        // The template this EnvVar names exists, whatever versions the simulator's model
        // listed (as the contract: the name the EnvVar picks always exists).
        places.ensure_template(&r.simulators, &key(&sim_ns, &sim_name));
    }
    let mut vars = common(obj, &serving, &endpoint, &r.ssh_authorized_key);
    match obj.dependencies_ref() {
        // Supervisor mode: what vm-operator was given, in place of the vCenter's places.
        Some((dep_ns, dep_name)) => {
            let deps = r
                .informers
                .get::<VMOperatorDependencies>(&dep_ns, &dep_name)
                .await?;
            let Some(deps) = deps else {
                return Ok(Next::AwaitChange);
            };
            vars.extend(supervisor(&super::vmoperator::wanted(&deps, Some(&sim))));
        }
        None => vars.extend(places.variables(ids.as_ref())),
    }
    if obj.status.as_ref().and_then(|s| s.variables.as_ref()) != Some(&vars) {
        let body = json!({
            "apiVersion": "vcsim.infrastructure.cluster.x-k8s.io/v1alpha1",
            "kind": "EnvVar",
            "status": {"variables": vars},
        });
        infrasim_controller_runtime::writes::apply_status(&api, &obj.name_any(), MANAGER, &body)
            .await?;
    }
    Ok(Next::AwaitChange)
}

/// The variables of both modes: the cluster's shape, the endpoint, the simulator's address
/// and credentials, and govc's.
fn common(
    env: &EnvVar,
    sim: &VCenterSimulatorStatus,
    endpoint: &super::types::ControlPlaneEndpointStatus,
    ssh_key: &str,
) -> BTreeMap<String, String> {
    let c = &env.spec.cluster;
    let vars = [
        ("VSPHERE_SSH_AUTHORIZED_KEY", ssh_key.to_string()),
        ("NAMESPACE", c.namespace.clone()),
        ("CLUSTER_NAME", c.name.clone()),
        ("CONTROL_PLANE_ENDPOINT_IP", endpoint.host.clone()),
        ("CONTROL_PLANE_ENDPOINT_PORT", endpoint.port.to_string()),
        ("VSPHERE_SERVER", format!("https://{}", sim.host)),
        ("VSPHERE_USERNAME", sim.username.clone()),
        ("VSPHERE_PASSWORD", sim.password.clone()),
        ("VSPHERE_TLS_THUMBPRINT", sim.thumbprint.clone()),
        ("VSPHERE_STORAGE_POLICY", STORAGE_POLICY.to_string()),
        (
            "GOVC_URL",
            format!(
                "https://{}:{}@{}/sdk",
                userinfo(&sim.username),
                userinfo(&sim.password),
                sim.host
            ),
        ),
        ("GOVC_INSECURE", "true".to_string()),
        (
            "VSPHERE_POWER_OFF_MODE",
            c.power_off_mode.clone().unwrap_or("trySoft".into()),
        ),
    ];
    vars.into_iter()
        .chain(c.shape_variables())
        .map(|(k, v)| (k.to_string(), v))
        .collect()
}

/// Supervisor mode's variables, from the first storage class, VM class and library item of
/// the dependencies (as upstream picks them).
fn supervisor(w: &super::vmoperator::Wanted) -> BTreeMap<String, String> {
    let mut vars = BTreeMap::new();
    if let Some(sc) = w.storage_classes.first() {
        vars.insert("VSPHERE_STORAGE_CLASS".to_string(), sc.name.clone());
        vars.insert(
            "VSPHERE_STORAGE_POLICY".to_string(),
            sc.storage_policy.clone(),
        );
    }
    if let Some(class) = w.vm_classes.first() {
        vars.insert("VSPHERE_MACHINE_CLASS_NAME".to_string(), class.name.clone());
    }
    if let Some(item) = w.vcenter.content_library.items.first() {
        vars.insert("VSPHERE_IMAGE_NAME".to_string(), item.name.clone());
    }
    vars
}

/// Percent-encodes what a URL's userinfo may not hold (`@` of `administrator@vsphere.local`).
fn userinfo(s: &str) -> String {
    percent_encoding::utf8_percent_encode(s, USERINFO).to_string()
}

const USERINFO: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// Where in the simulator's inventory the cluster's machines go.
struct Places {
    datacenter: String,
    cluster: String,
    datastore: String,
    template: String,
    /// The Kubernetes version the template is of: `KUBERNETES_VERSION` must name it, or
    /// the template's machines would join as another version than the cluster asks.
    version: Option<String>,
}

/// The managed object IDs of the places (`Datacenter:datacenter-2`, as govmomi prints a
/// reference).
struct Ids {
    datacenter: String,
    datastore: String,
    folder: String,
    resource_pool: String,
    network: String,
    template: String,
}

impl Places {
    fn new(env: &EnvVar, sim: &VCenterSimulator) -> Self {
        let c = &env.spec.cluster;
        let dc = c.datacenter.unwrap_or(0);
        let versions = kubernetes_versions(&sim.spec.model.clone().unwrap_or_default());
        // Upstream's pick: the 22.04 template of the asked version, else the newest
        // template of the model.
        let template = match &c.kubernetes_version {
            Some(v) => template_names(v).next(),
            None => versions.last().and_then(|v| template_names(v).last()),
        }
        .unwrap_or_default();
        let version = c
            .kubernetes_version
            .clone()
            .or_else(|| versions.last().cloned());
        Places {
            datacenter: format!("DC{dc}"),
            cluster: format!("DC{dc}_C{}", c.cluster.unwrap_or(0)),
            datastore: format!("LocalDS_{}", c.datastore.unwrap_or(0)),
            template,
            version,
        }
    }

    fn paths(&self) -> [(&'static str, String); 5] {
        let dc = &self.datacenter;
        [
            ("datastore", format!("/{dc}/datastore/{}", self.datastore)),
            ("folder", format!("/{dc}/vm")),
            ("pool", format!("/{dc}/host/{}/Resources", self.cluster)),
            ("network", format!("/{dc}/network/{NETWORK}")),
            ("template", format!("/{dc}/vm/{}", self.template)),
        ]
    }

    fn resolve(&self, sims: &Simulators, key: &str) -> Result<Ids, String> {
        let sim = sims
            .simulator(key)
            .ok_or_else(|| format!("simulator {key} is not running"))?;
        let id = |path: &str| {
            sim.find_by_path(path)
                .map(|m| format!("{}:{}", m.ty, m.value))
                .ok_or_else(|| format!("nothing at {path} in simulator {key}"))
        };
        let [ds, folder, pool, network, template] = self.paths().map(|(_, p)| p);
        Ok(Ids {
            datacenter: id(&format!("/{}", self.datacenter))?,
            datastore: id(&ds)?,
            folder: id(&folder)?,
            resource_pool: id(&pool)?,
            network: id(&network)?,
            template: id(&template)?,
        })
    }

    fn ensure_template(&self, sims: &Simulators, key: &str) {
        let Some(sim) = sims.simulator(key) else {
            return;
        };
        let mut spec = TemplateSpec::new(&self.template, &self.datacenter);
        spec.cluster = self.cluster.clone();
        spec.datastore = self.datastore.clone();
        if let Err(e) = sim.create_template(&spec) {
            tracing::debug!(template = %self.template, error = %e, "template not made");
        }
    }

    /// The govmomi-mode variables: names as upstream writes them, or IDs.
    fn variables(&self, ids: Option<&Ids>) -> BTreeMap<String, String> {
        let [_, folder, pool, network, template] = self.paths().map(|(_, p)| p);
        let mut vars =
            BTreeMap::from([("VSPHERE_COMPUTE_CLUSTER".to_string(), self.cluster.clone())]);
        if let Some(version) = &self.version {
            vars.insert("KUBERNETES_VERSION".to_string(), version.clone());
            // CAPV's templates name the cloud provider's image by it; upstream leaves it to
            // the user, and the cloud provider is released per Kubernetes version.
            vars.insert("CPI_IMAGE_K8S_VERSION".to_string(), version.clone());
        }
        let mut put = |k: &str, v: String| {
            vars.insert(k.to_string(), v);
        };
        match ids {
            None => {
                put("VSPHERE_DATACENTER", self.datacenter.clone());
                put("VSPHERE_DATASTORE", self.datastore.clone());
                // Upstream writes the folder without its leading slash.
                put("VSPHERE_FOLDER", folder.trim_start_matches('/').to_string());
                put("VSPHERE_RESOURCE_POOL", pool);
                put("VSPHERE_NETWORK", network);
                put("VSPHERE_TEMPLATE", template);
            }
            Some(ids) => {
                put("VSPHERE_DATACENTER", ids.datacenter.clone());
                put("VSPHERE_DATASTORE", ids.datastore.clone());
                put("VSPHERE_FOLDER", ids.folder.clone());
                put("VSPHERE_RESOURCE_POOL", ids.resource_pool.clone());
                put("VSPHERE_NETWORK", ids.network.clone());
                put("VSPHERE_TEMPLATE", ids.template.clone());
            }
        }
        vars
    }
}

/// A new Ed25519 public key in OpenSSH's `authorized_keys` form. Written here rather than
/// with an SSH crate: the format is two length-prefixed strings, base64-encoded, and the
/// private half is never used (the machines are simulated).
pub(super) fn ssh_authorized_key() -> String {
    use base64::Engine;
    use ring::signature::KeyPair;
    let rng = ring::rand::SystemRandom::new();
    let public = ring::signature::Ed25519KeyPair::generate_pkcs8(&rng)
        .ok()
        .and_then(|doc| ring::signature::Ed25519KeyPair::from_pkcs8(doc.as_ref()).ok())
        .map(|pair| pair.public_key().as_ref().to_vec())
        .unwrap_or_default();
    let mut blob = Vec::new();
    for part in [b"ssh-ed25519".as_slice(), public.as_slice()] {
        blob.extend_from_slice(&(part.len() as u32).to_be_bytes());
        blob.extend_from_slice(part);
    }
    format!(
        "ssh-ed25519 {} infrasim-vcsim",
        base64::engine::general_purpose::STANDARD.encode(blob)
    )
}

#[cfg(test)]
mod tests {
    use super::super::types::*;
    use super::*;

    fn env(spec: EnvVarSpec) -> EnvVar {
        let mut e = EnvVar::new("cluster1", spec);
        e.metadata.namespace = Some("ns1".into());
        e
    }

    fn sim(versions: Option<Vec<String>>) -> VCenterSimulator {
        VCenterSimulator::new(
            "vcsim1",
            VCenterSimulatorSpec {
                model: Some(VCenterSimulatorModel {
                    kubernetes_versions: versions,
                    ..Default::default()
                }),
                users: None,
            },
        )
    }

    #[test]
    fn references_default_to_the_namespace_and_the_cluster_name() {
        let e = env(EnvVarSpec {
            vcenter_simulator: Some(NamespacedRef {
                namespace: String::new(),
                name: "vcsim1".into(),
            }),
            cluster: ClusterEnvVarSpec {
                name: "cluster1".into(),
                ..Default::default()
            },
            ..Default::default()
        });
        assert_eq!(e.simulator_ref(), Some(("ns1".into(), "vcsim1".into())));
        assert_eq!(e.endpoint_ref(), ("ns1".into(), "cluster1".into()));
        assert_eq!(env(EnvVarSpec::default()).simulator_ref(), None);
    }

    #[test]
    fn govmomi_mode_names_the_places_as_upstream_does() {
        let e = env(EnvVarSpec {
            cluster: ClusterEnvVarSpec {
                name: "cluster1".into(),
                kubernetes_version: Some("v1.33.0".into()),
                datacenter: Some(1),
                ..Default::default()
            },
            ..Default::default()
        });
        let vars = Places::new(&e, &sim(None)).variables(None);
        assert_eq!(vars["VSPHERE_DATACENTER"], "DC1");
        assert_eq!(vars["VSPHERE_COMPUTE_CLUSTER"], "DC1_C0");
        assert_eq!(vars["VSPHERE_DATASTORE"], "LocalDS_0");
        assert_eq!(vars["VSPHERE_FOLDER"], "DC1/vm");
        assert_eq!(vars["VSPHERE_RESOURCE_POOL"], "/DC1/host/DC1_C0/Resources");
        assert_eq!(vars["VSPHERE_NETWORK"], "/DC1/network/VM Network");
        assert_eq!(vars["VSPHERE_TEMPLATE"], "/DC1/vm/ubuntu-2204-kube-v1.33.0");
    }

    #[test]
    fn without_a_version_the_newest_template_of_the_model_is_picked() {
        let e = env(EnvVarSpec::default());
        let p = Places::new(&e, &sim(Some(vec!["v1.30.1".into(), "v1.31.2".into()])));
        assert_eq!(p.template, "ubuntu-2404-kube-v1.31.2");
        let p = Places::new(&e, &sim(None));
        assert_eq!(p.template, "ubuntu-2404-kube-v1.36.0");
        // The version the template is of, not upstream's default beside a newer template.
        assert_eq!(p.variables(None)["KUBERNETES_VERSION"], "v1.36.0");
        assert_eq!(p.variables(None)["CPI_IMAGE_K8S_VERSION"], "v1.36.0");
        assert_eq!(
            p.variables(None)["VSPHERE_TEMPLATE"],
            "/DC0/vm/ubuntu-2404-kube-v1.36.0"
        );
    }

    #[test]
    fn common_variables_carry_the_endpoint_and_govc_url() {
        let e = env(EnvVarSpec {
            cluster: ClusterEnvVarSpec {
                name: "c1".into(),
                namespace: "default".into(),
                worker_machines: Some(3),
                ..Default::default()
            },
            ..Default::default()
        });
        let status = VCenterSimulatorStatus {
            host: "127.0.0.1:8989".into(),
            username: "administrator@vsphere.local".into(),
            password: "pw".into(),
            thumbprint: "AB:CD".into(),
            conditions: None,
        };
        let endpoint = ControlPlaneEndpointStatus {
            host: "127.0.0.1".into(),
            port: 20001,
        };
        let vars = common(&e, &status, &endpoint, "ssh-ed25519 AAAA");
        assert_eq!(vars["KUBERNETES_VERSION"], "v1.28.0");
        assert_eq!(vars["WORKER_MACHINE_COUNT"], "3");
        assert_eq!(vars["CONTROL_PLANE_MACHINE_COUNT"], "1");
        assert_eq!(vars["CONTROL_PLANE_ENDPOINT_PORT"], "20001");
        assert_eq!(vars["VSPHERE_SERVER"], "https://127.0.0.1:8989");
        assert_eq!(vars["VSPHERE_TLS_THUMBPRINT"], "AB:CD");
        assert_eq!(vars["VSPHERE_POWER_OFF_MODE"], "trySoft");
        assert_eq!(
            vars["GOVC_URL"],
            "https://administrator%40vsphere.local:pw@127.0.0.1:8989/sdk"
        );
    }

    #[test]
    fn the_ssh_key_is_an_openssh_ed25519_public_key() {
        use base64::Engine;
        let key = ssh_authorized_key();
        let mut parts = key.split(' ');
        assert_eq!(parts.next(), Some("ssh-ed25519"));
        let blob = base64::engine::general_purpose::STANDARD
            .decode(parts.next().unwrap())
            .unwrap();
        // 4 + 11 ("ssh-ed25519") + 4 + 32 (the key).
        assert_eq!(blob.len(), 51);
        assert_eq!(&blob[4..15], b"ssh-ed25519");
        assert_ne!(ssh_authorized_key(), key, "a new key each time");
    }
}
