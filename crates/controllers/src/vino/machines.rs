//! The VMs behind ViNO's hosts. Upstream runs libvirt on every selected Node and
//! sushy-tools in front of it; here a vCenter stands in for every Node's libvirt: each
//! domain is a VM named after its BareMetalHost, on the cluster host matching its Node's
//! place among the selected Nodes, with the flavor's CPUs and memory and one NIC per
//! interface carrying the MAC ViNO allocated. A VM is made powered off (a defined, unstarted
//! domain); from then on its power is its BMC's (the vCenter's Redfish service), which
//! metal3, or its stand-in (`crate::metal3`), drives.
//!
//! The vCenter is the one the Secret `vino-vcenter` in the controller's namespace names
//! (`server`, `username`, `password`, `thumbprint` or `caBundle`, as a VmGroup's). Without
//! one, the controller starts a simulator of its own on the advertise address and writes
//! that Secret, so the VMs can be looked at with govc or pyvmomi.

use infrasim_vim_client::{Client, Credentials, Moref, Trust, Val};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, PostParams};
use kube::ResourceExt;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Mutex;

/// The Secret naming the vCenter the VMs live in.
pub const SECRET: &str = "vino-vcenter";

/// Marks a `vino-vcenter` Secret this controller wrote for its own simulator: a restarted
/// controller starts a new simulator and rewrites it.
const OWN: &str = "vino.infrasim.dev/own-simulator";

/// How long a VM operation may take.
const TASK_LIMIT: Duration = Duration::from_secs(60);

/// The CPUs and MiB of memory of vino-builder's shipped flavors.
pub fn flavor(name: &str) -> Result<(i64, i64), String> {
    match name {
        "master" => Ok((1, 4096)),
        "worker" => Ok((1, 2048)),
        other => Err(format!(
            "no flavor {other:?}: the builder's flavors are \"master\" and \"worker\""
        )),
    }
}

/// The connection to the vCenter, made on first use and again when its Secret changes.
#[derive(Default)]
pub struct Hypervisors {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    connected: Option<Arc<Connected>>,
    own: Option<infrasim_vsphere_sim::Instance>,
}

/// A logged-in vCenter and where VMs go in it.
pub struct Connected {
    credentials: Credentials,
    pub client: Client,
    folder: Moref,
    pool: Moref,
    hosts: Vec<Moref>,
    datastore: String,
    network: (Moref, String),
}

impl Hypervisors {
    /// The vCenter, connected; why not.
    pub async fn get(&self, ctx: &crate::Context, ns: &str) -> Result<Arc<Connected>, String> {
        let mut state = self.state.lock().await;
        let credentials = credentials(ctx, ns, &mut state).await?;
        if let Some(c) = state
            .connected
            .as_ref()
            .filter(|c| c.credentials == credentials)
        {
            return Ok(c.clone());
        }
        let client = Client::connect(credentials.clone())
            .await
            .map_err(|e| format!("logging in to {}: {e}", credentials.server))?;
        let connected = Arc::new(place(client, credentials).await?);
        state.connected = Some(connected.clone());
        Ok(connected)
    }
}

/// The Secret's credentials; a simulator of our own (and the Secret) when there is none, or
/// when the Secret is one an earlier run wrote for a simulator that is gone.
async fn credentials(
    ctx: &crate::Context,
    ns: &str,
    state: &mut State,
) -> Result<Credentials, String> {
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), ns);
    let found = secrets
        .get_opt(SECRET)
        .await
        .map_err(|e| format!("reading Secret {ns}/{SECRET}: {e}"))?;
    let ours = found
        .as_ref()
        .is_some_and(|s| s.annotations().contains_key(OWN));
    if let Some(secret) = found.as_ref().filter(|_| !ours || state.own.is_some()) {
        return infrasim_controller_runtime::vcenters::read_secret(secret)
            .map_err(|why| format!("Secret {ns}/{SECRET}: {why}"));
    }
    let config = infrasim_vsphere_sim::SimConfig {
        password: crate::vcsim::vcenter::password(),
        ..Default::default()
    };
    let addr = std::net::SocketAddr::new(ctx.cloud.advertise_address(), 0);
    let instance = infrasim_vsphere_sim::Instance::start(config, addr, ctx.clock.clone())
        .await
        .map_err(|e| format!("starting the hosts' simulator: {e}"))?;
    let sim_config = instance.simulator().config();
    let credentials = Credentials {
        server: instance.addr().to_string(),
        username: sim_config.username.clone(),
        password: sim_config.password.clone(),
        trust: Trust::Thumbprint(instance.cert().thumbprint_sha256.clone()),
    };
    write(&secrets, found, &credentials).await?;
    tracing::info!(server = %credentials.server, "ViNO's hosts run in a simulator of their own");
    state.own = Some(instance);
    Ok(credentials)
}

async fn write(
    secrets: &Api<Secret>,
    found: Option<Secret>,
    c: &Credentials,
) -> Result<(), String> {
    let Trust::Thumbprint(thumbprint) = &c.trust else {
        return Err("the simulator is trusted by thumbprint".into());
    };
    let data: BTreeMap<String, String> = [
        ("server", c.server.as_str()),
        ("username", c.username.as_str()),
        ("password", c.password.as_str()),
        ("thumbprint", thumbprint.as_str()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let mut secret = found.unwrap_or_default();
    secret.metadata.name = Some(SECRET.into());
    secret.annotations_mut().insert(OWN.into(), "true".into());
    secret.data = None;
    secret.string_data = Some(data);
    let done = match secret.metadata.resource_version {
        Some(_) => {
            secrets
                .replace(SECRET, &PostParams::default(), &secret)
                .await
        }
        None => secrets.create(&PostParams::default(), &secret).await,
    };
    done.map(drop)
        .map_err(|e| format!("writing Secret {SECRET}: {e}"))
}

/// Where VMs go: the first datacenter's VM folder and its first cluster's root pool, hosts,
/// datastore and network.
async fn place(client: Client, credentials: Credentials) -> Result<Connected, String> {
    let fail = |what: &str, e: infrasim_vim_client::Error| format!("reading {what}: {e}");
    let dcs = client
        .list("Datacenter", &["name", "vmFolder"])
        .await
        .map_err(|e| fail("datacenters", e))?;
    let folder = dcs
        .first()
        .and_then(|d| d.prop("vmFolder"))
        .and_then(Val::moref)
        .cloned()
        .ok_or("the vCenter has no datacenter")?;
    let mut clusters = client
        .list(
            "ClusterComputeResource",
            &["name", "resourcePool", "host", "datastore", "network"],
        )
        .await
        .map_err(|e| fail("clusters", e))?;
    clusters.sort_by(|a, b| a.text("name").cmp(b.text("name")));
    let cluster = clusters.first().ok_or("the vCenter has no cluster")?;
    let first = |prop: &str| -> Result<Moref, String> {
        cluster
            .prop(prop)
            .and_then(|v| v.items().first().and_then(|m| m.moref()).cloned())
            .ok_or_else(|| format!("cluster {} has no {prop}", cluster.text("name")))
    };
    let pool = cluster
        .prop("resourcePool")
        .and_then(Val::moref)
        .cloned()
        .ok_or("the cluster has no resource pool")?;
    let hosts: Vec<Moref> = cluster
        .prop("host")
        .map(|h| {
            h.items()
                .into_iter()
                .filter_map(|m| m.moref().cloned())
                .collect()
        })
        .unwrap_or_default();
    let datastore = first("datastore")?;
    let network = first("network")?;
    let name_of = |obj: Moref| {
        let client = &client;
        async move {
            client
                .properties(&obj, &["name"])
                .await
                .map(|o| o.text("name").to_string())
                .map_err(|e| fail("names", e))
        }
    };
    let datastore = name_of(datastore).await?;
    let network_name = name_of(network.clone()).await?;
    Ok(Connected {
        credentials,
        folder,
        pool,
        hosts,
        datastore,
        network: (network, network_name),
        client,
    })
}

/// A VM as the controller needs it.
#[derive(Debug, Clone, PartialEq)]
pub struct Vm {
    pub moref: Moref,
    pub powered_on: bool,
}

impl Connected {
    /// The VMs in the folder by name.
    pub async fn vms(&self) -> Result<BTreeMap<String, Vm>, String> {
        let found = self
            .client
            .list("VirtualMachine", &["name", "runtime.powerState"])
            .await
            .map_err(|e| format!("listing VMs: {e}"))?;
        Ok(found
            .into_iter()
            .map(|o| {
                let vm = Vm {
                    powered_on: o.text("runtime.powerState") == "poweredOn",
                    moref: o.obj.clone(),
                };
                (o.text("name").to_string(), vm)
            })
            .collect())
    }

    /// Makes VM `name`, powered off, on the `slot`th host (round the cluster's hosts), with
    /// the flavor's shape and a NIC per MAC.
    pub async fn create(
        &self,
        name: &str,
        slot: usize,
        shape: (i64, i64),
        macs: &[String],
    ) -> Result<Moref, String> {
        let host = (!self.hosts.is_empty()).then(|| &self.hosts[slot % self.hosts.len()]);
        let config = self.config(name, shape, macs);
        let task = self
            .client
            .create_vm(&self.folder, &config, &self.pool, host)
            .await
            .map_err(|e| format!("creating VM {name}: {e}"))?;
        self.finish(&task, name)
            .await?
            .ok_or_else(|| format!("creating VM {name}: the task returned no VM"))
    }

    /// The VirtualMachineConfigSpec: the NIC the new VM gets is replaced by ours.
    fn config(&self, name: &str, (cpus, memory_mb): (i64, i64), macs: &[String]) -> String {
        use infrasim_vim_client::xml::escape;
        let (network, network_name) = &self.network;
        let mut nics = format!(
            r#"<deviceChange><operation>remove</operation><device xsi:type="VirtualVmxnet3"><key>{}</key></device></deviceChange>"#,
            4000
        );
        for (i, mac) in macs.iter().enumerate() {
            nics.push_str(&format!(
                r#"<deviceChange><operation>add</operation><device xsi:type="VirtualVmxnet3"><key>{}</key><backing xsi:type="VirtualEthernetCardNetworkBackingInfo"><deviceName>{}</deviceName>{}</backing><addressType>manual</addressType><macAddress>{}</macAddress></device></deviceChange>"#,
                -1 - i as i64,
                escape(network_name),
                network.element("network"),
                escape(mac)
            ));
        }
        format!(
            r#"<name>{}</name><guestId>otherLinux64Guest</guestId><files><vmPathName>[{}]</vmPathName></files><numCPUs>{cpus}</numCPUs><memoryMB>{memory_mb}</memoryMB>{nics}"#,
            escape(name),
            escape(&self.datastore)
        )
    }

    /// Powers `vm` on or off.
    pub async fn power(&self, name: &str, vm: &Moref, on: bool) -> Result<(), String> {
        let method = if on {
            "PowerOnVM_Task"
        } else {
            "PowerOffVM_Task"
        };
        let task = self
            .client
            .start(method, vm)
            .await
            .map_err(|e| format!("{method} on {name}: {e}"))?;
        self.finish(&task, name).await.map(drop)
    }

    /// Powers `vm` off if it runs, and destroys it.
    pub async fn destroy(&self, name: &str, vm: &Vm) -> Result<(), String> {
        if vm.powered_on {
            self.power(name, &vm.moref, false).await?;
        }
        let task = self
            .client
            .start("Destroy_Task", &vm.moref)
            .await
            .map_err(|e| format!("destroying {name}: {e}"))?;
        self.finish(&task, name).await.map(drop)
    }

    async fn finish(&self, task: &Moref, name: &str) -> Result<Option<Moref>, String> {
        match self.client.wait(task, TASK_LIMIT).await {
            Ok(made) => Ok(made),
            Err(e) => Err(format!("{name}: {e}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_builders_flavors_give_the_vms_shape() {
        assert_eq!(flavor("master").unwrap(), (1, 4096));
        assert_eq!(flavor("worker").unwrap(), (1, 2048));
        assert!(flavor("gpu").unwrap_err().contains("\"gpu\""));
    }

    #[tokio::test]
    async fn a_vm_is_made_off_with_the_macs_asked_for_then_powered_and_destroyed() {
        let (_sim, credentials) = crate::test_support::simulator().await;
        let client = Client::connect(credentials.clone()).await.unwrap();
        let c = place(client, credentials).await.unwrap();
        let macs = ["52:54:00:06:00:01".to_string()];
        let vm = c
            .create("ns-v-node1-master-0", 1, (1, 4096), &macs)
            .await
            .unwrap();
        let read = c
            .client
            .properties(
                &vm,
                &["config.hardware", "runtime.powerState", "runtime.host"],
            )
            .await
            .unwrap();
        assert_eq!(read.text("runtime.powerState"), "poweredOff");
        assert_eq!(
            read.prop("runtime.host").and_then(Val::moref),
            Some(&c.hosts[1])
        );
        let hw = read.prop("config.hardware").unwrap();
        assert_eq!(hw.field("memoryMB").and_then(Val::text), Some("4096"));
        let devices = c
            .client
            .properties(&vm, &["config.hardware.device"])
            .await
            .unwrap();
        let nics: Vec<&str> = devices
            .prop("config.hardware.device")
            .map(Val::items)
            .unwrap_or_default()
            .into_iter()
            .filter_map(|d| d.field("macAddress").and_then(Val::text))
            .collect();
        assert_eq!(nics, ["52:54:00:06:00:01"]);
        c.power("v", &vm, true).await.unwrap();
        let vms = c.vms().await.unwrap();
        let made = &vms["ns-v-node1-master-0"];
        assert!(made.powered_on);
        c.destroy("v", made).await.unwrap();
        assert!(!c.vms().await.unwrap().contains_key("ns-v-node1-master-0"));
    }
}
