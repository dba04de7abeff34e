//! What every builder of the generated inventory uses: reference values (vCenter's counters
//! or hostd's fixed ones), links from a parent's lists, enum values, and where hosts and VMs
//! are put.

use crate::objects::Inventory;
use crate::value::{Moref, Val};

pub(super) fn enum_val(ty: &'static str, v: impl Into<crate::value::Name>) -> Val {
    Val::Enum(ty, v.into())
}

/// A generated object's reference value: vCenter's next one for the prefix, or on an ESXi
/// host hostd's fixed value for its single datacenter, folders, compute resource, host, root
/// pool and network.
pub(super) fn value_for(inv: &mut Inventory, prefix: &str) -> String {
    let fixed = match prefix {
        "datacenter" => "ha-datacenter",
        "group-v" => "ha-folder-vm",
        "group-h" => "ha-folder-host",
        "group-s" => "ha-folder-datastore",
        "group-n" => "ha-folder-network",
        "domain-s" => "ha-compute-res",
        "host" => "ha-host",
        "resgroup" => "ha-root-pool",
        "network" => "HaNetwork-VM Network",
        _ => "",
    };
    if inv.esx() && !fixed.is_empty() {
        fixed.to_string()
    } else {
        inv.next_value(prefix)
    }
}

/// Appends `child` to list property `prop` of `parent`.
pub(super) fn link(inv: &mut Inventory, parent: &Moref, prop: &'static str, child: &Moref) {
    if let Some(p) = inv.get_mut(parent) {
        p.push_mor(prop, child.clone());
    }
}

/// Everything a generated host or VM needs to know about where it lives.
pub(super) struct Placement {
    pub vm_folder: Moref,
    pub datastores: Vec<Moref>,
    pub network: Moref,
}
