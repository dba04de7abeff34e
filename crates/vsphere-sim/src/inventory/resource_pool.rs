//! A generated resource pool: a compute resource's root pool (`Resources`) or a child of it.

use super::build::{enum_val, value_for};
use crate::objects::{Inventory, ManagedObject};
use crate::value::{mor_array, Moref};

/// An empty pool named `name` under `parent`, of compute resource `owner`.
pub(super) fn resource_pool(
    inv: &mut Inventory,
    name: &str,
    parent: &Moref,
    owner: &Moref,
) -> Moref {
    let value = value_for(inv, "resgroup");
    let mut p = ManagedObject::new("ResourcePool", &value);
    p.set("name", name);
    p.set("parent", parent.clone());
    p.set("owner", owner.clone());
    p.set("resourcePool", mor_array([]));
    p.set("vm", mor_array([]));
    p.set("overallStatus", enum_val("ManagedEntityStatus", "green"));
    let m = p.moref.clone();
    inv.insert(p);
    m
}
