//! Generated datastores: vCenter's `LocalDS_<n>`, an ESXi host's `datastore<n>` named by its
//! VMFS volume UUID, each with its browser.

use super::build::{enum_val, link};
use super::datacenter::Datacenter;
use super::model::Model;
use crate::objects::{uuid_for, Inventory, ManagedObject};
use crate::value::{mor_array, Data, Moref};

/// The model's datastores of a datacenter (at least one), in its datastore folder.
pub(super) fn datastores(inv: &mut Inventory, model: &Model, dc: &Datacenter) -> Vec<Moref> {
    (0..model.datastores.max(1))
        .map(|s| datastore(inv, dc, s))
        .collect()
}

/// Datastore `s` of datacenter `dc`.
fn datastore(inv: &mut Inventory, dc: &Datacenter, s: usize) -> Moref {
    // ESXi names its local datastores datastore1, datastore2, … by their VMFS UUIDs.
    let (value, name, volume) = if inv.esx() {
        let name = format!("datastore{}", s + 1);
        let volume = vmfs_uuid(&name);
        (volume.clone(), name, volume)
    } else {
        let name = format!("LocalDS_{s}");
        let volume = uuid_for(&format!("{}/{name}", dc.name), "ds");
        (inv.next_value("datastore"), name, volume)
    };
    let mut ds = ManagedObject::new("Datastore", &value);
    let m = ds.moref.clone();
    let url = format!("ds:///vmfs/volumes/{volume}/");
    ds.set("name", name.as_str());
    ds.set("parent", dc.ds_folder.clone());
    ds.set(
        "summary",
        Data::new("DatastoreSummary")
            .with("datastore", m.clone())
            .with("name", name.as_str())
            .with("url", url.as_str())
            .with("capacity", 1i64 << 40)
            .with("freeSpace", 1i64 << 39)
            .with("type", "VMFS")
            .with("accessible", true)
            .with("multipleHostAccess", true)
            .with("maintenanceMode", "normal"),
    );
    ds.set(
        "info",
        Data::new("VmfsDatastoreInfo")
            .with("name", name.as_str())
            .with("url", url.as_str())
            .with("freeSpace", 1i64 << 39)
            .with("maxFileSize", 1i64 << 40),
    );
    ds.set("vm", mor_array([]));
    ds.set("overallStatus", enum_val("ManagedEntityStatus", "green"));
    // Each datastore's browser (SearchDatastore_Task), as vCenter gives one.
    let browser = Moref::new("HostDatastoreBrowser", &format!("datastoreBrowser-{value}"));
    ds.set("browser", browser.clone());
    inv.insert(ManagedObject::new("HostDatastoreBrowser", &browser.value));
    inv.insert(ds);
    link(inv, &dc.ds_folder, "childEntity", &m);
    link(inv, &dc.moref, "datastore", &m);
    m
}

/// An ESXi datastore's reference value: its VMFS volume UUID (`57089c25-85e3ccd4-17b6-
/// 000c29d0beb3`), derived from its name.
fn vmfs_uuid(name: &str) -> String {
    let h = uuid_for(name, "vmfs").replace('-', "");
    format!("{}-{}-{}-{}", &h[0..8], &h[8..16], &h[16..20], &h[20..32])
}
