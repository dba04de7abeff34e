//! Generated folders: the root, a datacenter's four, and govmomi's Folder model's `F<n>`.

use super::build::{enum_val, link, value_for};
use crate::objects::{refs, Inventory, ManagedObject};
use crate::value::{mor_array, string_array, Moref};

/// A folder named `name` under `parent` (none for the root, whose value is fixed), holding
/// entities of `child_types`.
pub(super) fn folder(
    inv: &mut Inventory,
    prefix: &str,
    name: &str,
    parent: &Moref,
    child_types: &[&str],
) -> Moref {
    let value = if prefix == "group-d" && parent.value.is_empty() {
        refs::root_folder(inv.esx()).value
    } else {
        value_for(inv, prefix)
    };
    let mut f = ManagedObject::new("Folder", &value);
    f.set("name", name);
    if !parent.value.is_empty() {
        f.set("parent", parent.clone());
    }
    f.set("childEntity", mor_array([]));
    f.set("childType", string_array(child_types.iter().copied()));
    f.set("overallStatus", enum_val("ManagedEntityStatus", "green"));
    let m = f.moref.clone();
    inv.insert(f);
    m
}

/// The child types of a folder: vCenter's list, or on an ESXi host its one type (each of
/// hostd's folders holds one type).
pub(super) fn kinds(esx: bool, vcenter: &'static [&'static str]) -> &'static [&'static str] {
    if esx {
        &vcenter[1..2]
    } else {
        vcenter
    }
}

/// The root folder: vCenter's `Datacenters`, hostd's `ha-folder-root`.
pub(super) fn root(inv: &mut Inventory) -> Moref {
    let esx = inv.esx();
    folder(
        inv,
        "group-d",
        if esx { "ha-folder-root" } else { "Datacenters" },
        &Moref::new("Folder", ""),
        kinds(esx, &["Folder", "Datacenter"]),
    )
}

/// A subfolder `name` of `parent` holding what `parent` holds (govmomi's Folder model puts
/// what a datacenter in folder `F<n>` holds into `F<n>` subfolders of its four folders).
pub(super) fn subfolder(inv: &mut Inventory, prefix: &str, name: &str, parent: &Moref) -> Moref {
    let child_type = inv
        .get(parent)
        .and_then(|p| p.props.get("childType"))
        .cloned();
    let f = folder(inv, prefix, name, parent, &[]);
    if let (Some(ct), Some(o)) = (child_type, inv.get_mut(&f)) {
        o.set("childType", ct);
    }
    link(inv, parent, "childEntity", &f);
    f
}
