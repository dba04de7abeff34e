//! Where a group's clones go, and on which network. Each part of `spec.placement` is a name inside the datacenter
//! (`spec.placement.datacenter`, or the vCenter's only or first one) or, with a `/`, a whole
//! inventory path; each part left out is the template's own (its folder, its resource pool,
//! its datastore), as vSphere clones by default. Looked up with FindByInventoryPath.

use super::types::Placement;
use infrasim_vim_client::{Client, Moref, NetworkBacking, ObjectContent, Val};

/// The folder, pool and datastore of a clone.
#[derive(Debug, Clone, PartialEq)]
pub struct Resolved {
    pub folder: Moref,
    pub pool: Moref,
    pub datastore: Option<Moref>,
    /// The clone's `<deviceChange>`s: the template's NICs replaced by one on the network.
    pub device_change: String,
}

/// The places `placement` names, or why they cannot be had.
pub async fn resolve(
    client: &Client,
    placement: Option<&Placement>,
    template: &ObjectContent,
) -> Result<Resolved, String> {
    let own = |path: &str| {
        template
            .prop(path)
            .and_then(Val::moref)
            .cloned()
            .ok_or_else(|| format!("the template has no {path}"))
    };
    let Some(p) = placement else {
        return Ok(Resolved {
            folder: own("parent")?,
            pool: own("resourcePool")?,
            datastore: None,
            device_change: String::new(),
        });
    };
    let dc = match &p.datacenter {
        Some(dc) => dc.clone(),
        None => first_datacenter(client).await?,
    };
    let folder = match &p.folder {
        Some(f) => find(client, &path_in(&dc, "vm", f), "folder").await?,
        None => own("parent")?,
    };
    let pool = match (&p.resource_pool, &p.cluster) {
        (Some(rp), _) if rp.contains('/') => find(client, rp, "resourcePool").await?,
        (Some(rp), Some(cluster)) => {
            let path = format!("{}/Resources/{rp}", path_in(&dc, "host", cluster));
            find(client, &path, "resourcePool").await?
        }
        (Some(rp), None) => {
            return Err(format!(
                "resourcePool {rp:?} needs its cluster, or an inventory path"
            ))
        }
        (None, Some(cluster)) => {
            let path = format!("{}/Resources", path_in(&dc, "host", cluster));
            find(client, &path, "cluster").await?
        }
        (None, None) => own("resourcePool")?,
    };
    let datastore = match &p.datastore {
        Some(d) => Some(find(client, &path_in(&dc, "datastore", d), "datastore").await?),
        None => None,
    };
    let device_change = match &p.network {
        Some(n) => nic_on(client, &path_in(&dc, "network", n), n, template).await?,
        None => String::new(),
    };
    Ok(Resolved {
        folder,
        pool,
        datastore,
        device_change,
    })
}

/// The deviceChanges that move the template's NICs to the network at `path`.
async fn nic_on(
    client: &Client,
    path: &str,
    name: &str,
    template: &ObjectContent,
) -> Result<String, String> {
    let network = find(client, path, "network").await?;
    let read = |obj: Moref, paths: &'static [&'static str]| async move {
        client
            .properties(&obj, paths)
            .await
            .map_err(|e| format!("reading {obj}: {e}"))
    };
    let backing = if network.ty == "DistributedVirtualPortgroup" {
        let pg = read(network.clone(), &["key", "config.distributedVirtualSwitch"]).await?;
        let switch = pg
            .prop("config.distributedVirtualSwitch")
            .and_then(Val::moref)
            .cloned()
            .ok_or_else(|| format!("{name} has no switch"))?;
        let switch = read(switch, &["uuid"]).await?;
        NetworkBacking::Portgroup {
            switch_uuid: switch.text("uuid").to_string(),
            portgroup_key: pg.text("key").to_string(),
        }
    } else {
        NetworkBacking::Network {
            name: name.rsplit('/').next().unwrap_or(name).to_string(),
            network,
        }
    };
    let devices = read(template.obj.clone(), &["config.hardware.device"]).await?;
    let devices = devices
        .prop("config.hardware.device")
        .cloned()
        .unwrap_or(Val::List(Vec::new()));
    Ok(infrasim_vim_client::ops::replace_nics(&devices, &backing))
}

/// `name` as a path under the datacenter's `kind` folder, unless it is a path already.
fn path_in(dc: &str, kind: &str, name: &str) -> String {
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

async fn first_datacenter(client: &Client) -> Result<String, String> {
    let dcs = client
        .list("Datacenter", &["name"])
        .await
        .map_err(|e| format!("listing datacenters: {e}"))?;
    dcs.first()
        .map(|d| d.text("name").to_string())
        .ok_or_else(|| "the vCenter has no datacenter".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_placed_in_the_datacenter_and_paths_kept() {
        assert_eq!(path_in("DC0", "vm", "team"), "DC0/vm/team");
        assert_eq!(path_in("DC0", "vm", "/DC1/vm/team"), "DC1/vm/team");
        assert_eq!(path_in("DC0", "host", "DC0_C0"), "DC0/host/DC0_C0");
    }
}
