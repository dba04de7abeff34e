//! Generated standalone hosts: each a ComputeResource holding one host, its root pool and
//! the model's VMs. An ESXi host is one of these, `localhost.localdomain`.

use super::build::{enum_val, link, value_for, Placement};
use super::datacenter::Datacenter;
use super::host::{esx_host_extras, host};
use super::model::Model;
use super::resource_pool::resource_pool;
use super::vm::generated_vm;
use crate::objects::{Inventory, ManagedObject};
use crate::value::{mor_array, Moref};
use chrono::{DateTime, Utc};

/// The datacenter's standalone hosts, in its host folder.
pub(super) fn standalone_hosts(
    inv: &mut Inventory,
    model: &Model,
    dc: &Datacenter,
    place: &Placement,
    now: DateTime<Utc>,
) {
    let standalone = if model.esx { 1 } else { model.standalone_hosts };
    for h in 0..standalone {
        let name = if model.esx {
            "localhost.localdomain".to_string()
        } else {
            format!("{}_H{h}", dc.name)
        };
        let (host_ref, pool) = standalone_host(inv, &name, dc, place);
        for v in 0..model.vms {
            generated_vm(inv, &format!("{name}_VM{v}"), place, &host_ref, &pool, now);
        }
    }
}

/// A ComputeResource named `name` with its host and root pool; gives back both.
fn standalone_host(
    inv: &mut Inventory,
    name: &str,
    dc: &Datacenter,
    place: &Placement,
) -> (Moref, Moref) {
    let value = value_for(inv, "domain-s");
    let cr = Moref::new("ComputeResource", &value);
    let host_ref = host(inv, name, &cr, place);
    if inv.esx() {
        esx_host_extras(inv, &host_ref);
    }
    let pool = resource_pool(inv, "Resources", &cr, &cr);
    let mut cro = ManagedObject::new("ComputeResource", &value);
    cro.set("name", name);
    cro.set("parent", dc.host_folder.clone());
    cro.set("host", mor_array([host_ref.clone()]));
    cro.set("resourcePool", pool.clone());
    cro.set("datastore", mor_array(place.datastores.iter().cloned()));
    cro.set("network", mor_array([place.network.clone()]));
    cro.set("overallStatus", enum_val("ManagedEntityStatus", "green"));
    inv.insert(cro);
    link(inv, &dc.host_folder, "childEntity", &cr);
    (host_ref, pool)
}
