//! Where a clone goes, and on which network: a VmGroup's `spec.placement`, or a CAPV
//! VSphereVM's clone spec. Each part is a name inside the datacenter (`datacenter`) or, with
//! a `/`, a whole inventory path,
//! looked up with FindByInventoryPath. Each part left out is the vCenter's only or first one:
//! the first datacenter, its VM folder, its first cluster (or, with no cluster, its first
//! standalone host), and that compute resource's first datastore and first network, so a group
//! with no placement lands where `govc vm.clone` with no flags would, not wherever the template
//! happens to sit.

use infrasim_vim_client::{Client, Moref, NetworkBacking, ObjectContent, Val};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Where the VMs go; each part defaults to the vCenter's first (or only) one.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Placement {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub datacenter: Option<String>,
    /// A cluster (its root resource pool is used) or a standalone host's compute resource.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_pool: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub folder: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub datastore: Option<String>,
    /// The network (a standard or distributed port group) the VMs' NIC is on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<String>,
}

/// The folder, pool and datastore of a clone.
#[derive(Debug, Clone, PartialEq)]
pub struct Resolved {
    pub folder: Moref,
    pub pool: Moref,
    pub datastore: Option<Moref>,
    /// Every datastore of the compute resource that owns the pool (what a clone there can
    /// use), as read to choose `datastore`.
    pub pool_datastores: Vec<Moref>,
    /// The clone's `<deviceChange>`s: the template's NICs replaced by one on the network
    /// (empty when they are all on it already).
    pub device_change: String,
}

/// A datacenter, by name, with the roots of its folders.
struct Datacenter {
    name: String,
    vm_folder: Moref,
    host_folder: Moref,
}

/// The places `placement` names, or why they cannot be had.
pub async fn resolve(
    client: &Client,
    placement: Option<&Placement>,
    template: &ObjectContent,
) -> Result<Resolved, String> {
    let none = Placement::default();
    let p = placement.unwrap_or(&none);
    let dc = datacenter(client, p.datacenter.as_deref()).await?;
    let folder = match &p.folder {
        Some(f) => find(client, &path_in(&dc.name, "vm", f), "folder").await?,
        None => dc.vm_folder.clone(),
    };
    let pool = pool(client, &dc, p).await?;
    // The datastores and networks a clone in this pool can use are its compute resource's.
    let owner = read(client, &pool, &["owner"]).await?;
    let owner = owner
        .prop("owner")
        .and_then(Val::moref)
        .cloned()
        .ok_or_else(|| format!("resource pool {pool} has no owner"))?;
    let compute = read(client, &owner, &["datastore", "network"]).await?;
    let first = |prop: &str| {
        compute
            .prop(prop)
            .and_then(|v| v.items().first().and_then(|m| m.moref()).cloned())
    };
    let pool_datastores: Vec<Moref> = compute
        .prop("datastore")
        .map(|v| {
            v.items()
                .into_iter()
                .filter_map(Val::moref)
                .cloned()
                .collect()
        })
        .unwrap_or_default();
    let datastore = match &p.datastore {
        Some(d) => find(client, &path_in(&dc.name, "datastore", d), "datastore").await?,
        None => first("datastore").ok_or_else(|| format!("{owner} has no datastore"))?,
    };
    let network = match &p.network {
        Some(n) => Some(find(client, &path_in(&dc.name, "network", n), "network").await?),
        None => first("network"),
    };
    let device_change = match network {
        Some(network) => nic_on(client, network, template).await?,
        None => String::new(),
    };
    Ok(Resolved {
        folder,
        pool,
        datastore: Some(datastore),
        pool_datastores,
        device_change,
    })
}

/// The resource pool `p` names: a pool by path or inside its cluster, a cluster's root pool,
/// or the datacenter's first compute resource's.
async fn pool(client: &Client, dc: &Datacenter, p: &Placement) -> Result<Moref, String> {
    match (&p.resource_pool, &p.cluster) {
        (Some(rp), _) if rp.contains('/') => {
            find(client, rp.trim_start_matches('/'), "resourcePool").await
        }
        (Some(rp), Some(cluster)) => {
            let path = format!("{}/Resources/{rp}", path_in(&dc.name, "host", cluster));
            find(client, &path, "resourcePool").await
        }
        (Some(rp), None) => Err(format!(
            "resourcePool {rp:?} needs its cluster, or an inventory path"
        )),
        (None, Some(cluster)) => {
            let path = format!("{}/Resources", path_in(&dc.name, "host", cluster));
            find(client, &path, "cluster").await
        }
        (None, None) => {
            let compute = first_compute_resource(client, dc).await?;
            let compute = read(client, &compute, &["resourcePool"]).await?;
            compute
                .prop("resourcePool")
                .and_then(Val::moref)
                .cloned()
                .ok_or_else(|| format!("{} has no resource pool", compute.obj))
        }
    }
}

/// The datacenter's first cluster, or its first standalone host when it has no cluster,
/// looking through its host folder and the folders inside it in inventory order.
async fn first_compute_resource(client: &Client, dc: &Datacenter) -> Result<Moref, String> {
    let mut folders = std::collections::VecDeque::from([dc.host_folder.clone()]);
    let mut standalone = None;
    while let Some(folder) = folders.pop_front() {
        let children = read(client, &folder, &["childEntity"]).await?;
        let children = children
            .prop("childEntity")
            .map(Val::items)
            .unwrap_or_default();
        for child in children.into_iter().filter_map(Val::moref) {
            match child.ty.as_str() {
                "ClusterComputeResource" => return Ok(child.clone()),
                "ComputeResource" if standalone.is_none() => standalone = Some(child.clone()),
                "Folder" => folders.push_back(child.clone()),
                _ => {}
            }
        }
    }
    standalone.ok_or_else(|| format!("datacenter {} has no cluster or host", dc.name))
}

/// The deviceChanges that move the template's NICs to `network`, or none when every NIC is
/// on it already.
async fn nic_on(
    client: &Client,
    network: Moref,
    template: &ObjectContent,
) -> Result<String, String> {
    let devices = read(
        client,
        &template.obj,
        &["config.hardware.device", "network"],
    )
    .await?;
    let on = devices.prop("network").map(Val::items).unwrap_or_default();
    if on.len() == 1 && on[0].moref() == Some(&network) {
        return Ok(String::new());
    }
    let backing = if network.ty == "DistributedVirtualPortgroup" {
        let pg = read(
            client,
            &network,
            &["key", "config.distributedVirtualSwitch"],
        )
        .await?;
        let switch = pg
            .prop("config.distributedVirtualSwitch")
            .and_then(Val::moref)
            .cloned()
            .ok_or_else(|| format!("{network} has no switch"))?;
        let switch = read(client, &switch, &["uuid"]).await?;
        NetworkBacking::Portgroup {
            switch_uuid: switch.text("uuid").to_string(),
            portgroup_key: pg.text("key").to_string(),
        }
    } else {
        let named = read(client, &network, &["name"]).await?;
        NetworkBacking::Network {
            name: named.text("name").to_string(),
            network,
        }
    };
    let devices = devices
        .prop("config.hardware.device")
        .cloned()
        .unwrap_or(Val::List(Vec::new()));
    Ok(infrasim_vim_client::ops::replace_nics(&devices, &backing))
}

/// `name` as a path under the datacenter's `kind` folder, unless it is a path already.
pub fn path_in(dc: &str, kind: &str, name: &str) -> String {
    if name.contains('/') {
        name.trim_start_matches('/').to_string()
    } else {
        format!("{dc}/{kind}/{name}")
    }
}

async fn find(client: &Client, path: &str, what: &str) -> Result<Moref, String> {
    client
        .find_by_inventory_path(path)
        .await
        .map_err(|e| format!("finding {what} {path:?}: {e}"))?
        .ok_or_else(|| format!("placement: no {what} at {path:?}"))
}

async fn read(client: &Client, obj: &Moref, paths: &[&str]) -> Result<ObjectContent, String> {
    client
        .properties(obj, paths)
        .await
        .map_err(|e| format!("reading {obj}: {e}"))
}

/// The datacenter named `name`, or the vCenter's first.
async fn datacenter(client: &Client, name: Option<&str>) -> Result<Datacenter, String> {
    let dcs = client
        .list("Datacenter", &["name", "vmFolder", "hostFolder"])
        .await
        .map_err(|e| format!("listing datacenters: {e}"))?;
    let dc = match name {
        Some(name) => dcs.iter().find(|d| d.text("name") == name),
        None => dcs.first(),
    };
    let dc = dc.ok_or_else(|| match name {
        Some(name) => format!("placement: no datacenter {name:?}"),
        None => "the vCenter has no datacenter".to_string(),
    })?;
    let folder = |prop: &str| {
        dc.prop(prop)
            .and_then(Val::moref)
            .cloned()
            .ok_or_else(|| format!("datacenter {} has no {prop}", dc.text("name")))
    };
    Ok(Datacenter {
        name: dc.text("name").to_string(),
        vm_folder: folder("vmFolder")?,
        host_folder: folder("hostFolder")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use infrasim_clock::SystemClock;
    use infrasim_vim_client::{Credentials, Trust};
    use infrasim_vsphere_sim::{Instance, SimConfig};

    #[test]
    fn names_are_placed_in_the_datacenter_and_paths_kept() {
        assert_eq!(path_in("DC0", "vm", "team"), "DC0/vm/team");
        assert_eq!(path_in("DC0", "vm", "/DC1/vm/team"), "DC1/vm/team");
        assert_eq!(path_in("DC0", "host", "DC0_C0"), "DC0/host/DC0_C0");
    }

    /// A client of a simulator of the default model, and its VM `DC0_H0_VM0`.
    async fn simulator() -> (Instance, Client, ObjectContent) {
        let sim = Instance::start(
            SimConfig::default(),
            ([127, 0, 0, 1], 0).into(),
            SystemClock::shared(),
        )
        .await
        .unwrap();
        let client = Client::connect(Credentials {
            server: sim.addr().to_string(),
            username: SimConfig::default().username,
            password: SimConfig::default().password,
            trust: Trust::Thumbprint(sim.cert().thumbprint_sha256.clone()),
        })
        .await
        .unwrap();
        let vms = client.list("VirtualMachine", &["name"]).await.unwrap();
        let vm = vms
            .into_iter()
            .find(|v| v.text("name") == "DC0_H0_VM0")
            .unwrap();
        (sim, client, vm)
    }

    async fn name(client: &Client, obj: &Moref) -> String {
        let o = client.properties(obj, &["name"]).await.unwrap();
        o.text("name").to_string()
    }

    #[tokio::test]
    async fn parts_left_out_are_the_vcenters_first_not_the_templates() {
        let (_sim, client, template) = simulator().await;
        let place = resolve(&client, None, &template).await.unwrap();
        assert_eq!(
            name(&client, &place.folder).await,
            "vm",
            "the datacenter's VM folder"
        );
        // The template sits on the standalone host DC0_H0; the first cluster wins.
        let pool = client.properties(&place.pool, &["owner"]).await.unwrap();
        let owner = pool.prop("owner").and_then(Val::moref).unwrap();
        assert_eq!(name(&client, owner).await, "DC0_C0");
        let datastore = place.datastore.as_ref().unwrap();
        assert_eq!(name(&client, datastore).await, "LocalDS_0");
        assert_eq!(
            place.device_change, "",
            "the template's NIC is on the first network"
        );
    }

    #[tokio::test]
    async fn a_named_port_group_replaces_the_nic_and_a_missing_datacenter_is_named() {
        let (_sim, client, template) = simulator().await;
        let p = Placement {
            network: Some("DC0_DVPG0".into()),
            ..Placement::default()
        };
        let place = resolve(&client, Some(&p), &template).await.unwrap();
        assert!(place
            .device_change
            .contains("<operation>remove</operation>"));
        assert!(
            place.device_change.contains("<portgroupKey>"),
            "{}",
            place.device_change
        );
        let p = Placement {
            datacenter: Some("DC9".into()),
            ..Placement::default()
        };
        let err = resolve(&client, Some(&p), &template).await.unwrap_err();
        assert_eq!(err, "placement: no datacenter \"DC9\"");
    }
}
