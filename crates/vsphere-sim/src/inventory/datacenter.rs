//! A generated datacenter with its four folders, in the root folder or, in govmomi's Folder
//! model, in a folder `F<n>` of its own.

use super::build::{enum_val, link, value_for};
use super::folder::{folder, kinds, subfolder};
use super::model::Model;
use crate::objects::{Inventory, ManagedObject};
use crate::value::{mor_array, Moref};

/// A generated datacenter: its reference and name, and the folders what it holds goes into
/// (in the Folder model, the `F<n>` subfolders of its own folders).
pub(super) struct Datacenter {
    pub moref: Moref,
    pub name: String,
    pub vm_folder: Moref,
    pub host_folder: Moref,
    pub ds_folder: Moref,
    pub net_folder: Moref,
}

/// Datacenter `d` of the model, under `root`.
pub(super) fn datacenter(inv: &mut Inventory, model: &Model, d: usize, root: &Moref) -> Datacenter {
    let esx = model.esx;
    let datacenters = if esx { 1 } else { model.datacenters };
    // govmomi's Folder model: the last N datacenters sit in a folder F<n> under the root, n
    // counting from the first of them.
    let first_in_folder = datacenters.saturating_sub(model.folders);
    let in_folder = (!esx && d >= first_in_folder).then(|| format!("F{}", d - first_in_folder));
    let parent = match &in_folder {
        Some(name) => {
            let f = folder(inv, "group-d", name, root, &["Folder", "Datacenter"]);
            link(inv, root, "childEntity", &f);
            f
        }
        None => root.clone(),
    };
    let name = if esx {
        "ha-datacenter".to_string()
    } else {
        format!("DC{d}")
    };
    let value = value_for(inv, "datacenter");
    let dc = Moref::new("Datacenter", &value);
    let vm_folder = folder(
        inv,
        "group-v",
        "vm",
        &dc,
        kinds(esx, &["Folder", "VirtualMachine", "VirtualApp"]),
    );
    let host_folder = folder(
        inv,
        "group-h",
        "host",
        &dc,
        kinds(esx, &["Folder", "ComputeResource"]),
    );
    let ds_folder = folder(
        inv,
        "group-s",
        "datastore",
        &dc,
        kinds(esx, &["Folder", "Datastore", "StoragePod"]),
    );
    let net_folder = folder(
        inv,
        "group-n",
        "network",
        &dc,
        kinds(esx, &["Folder", "Network", "DistributedVirtualSwitch"]),
    );
    let mut dco = ManagedObject::new("Datacenter", &value);
    dco.set("name", name.as_str());
    dco.set("parent", parent.clone());
    dco.set("vmFolder", vm_folder.clone());
    dco.set("hostFolder", host_folder.clone());
    dco.set("datastoreFolder", ds_folder.clone());
    dco.set("networkFolder", net_folder.clone());
    dco.set("datastore", mor_array([]));
    dco.set("network", mor_array([]));
    dco.set("overallStatus", enum_val("ManagedEntityStatus", "green"));
    inv.insert(dco);
    link(inv, &parent, "childEntity", &dc);
    let (vm_folder, host_folder, ds_folder, net_folder) = match &in_folder {
        Some(f) => (
            subfolder(inv, "group-v", f, &vm_folder),
            subfolder(inv, "group-h", f, &host_folder),
            subfolder(inv, "group-s", f, &ds_folder),
            subfolder(inv, "group-n", f, &net_folder),
        ),
        None => (vm_folder, host_folder, ds_folder, net_folder),
    };
    Datacenter {
        moref: dc,
        name,
        vm_folder,
        host_folder,
        ds_folder,
        net_folder,
    }
}
