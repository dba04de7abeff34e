//! Generated networks: a datacenter's `VM Network` and, on vCenter, its distributed switch
//! `DC<n>_DVS` with the model's port groups `DC<n>_DVPG<p>`.

use super::build::{enum_val, link, value_for};
use super::datacenter::Datacenter;
use super::model::Model;
use crate::objects::{uuid_for, Inventory, ManagedObject};
use crate::value::{mor_array, Data, Moref};

/// The datacenter's networks; gives back the VM Network, the one hosts and VMs are put on.
pub(super) fn networks(inv: &mut Inventory, model: &Model, dc: &Datacenter) -> Moref {
    let network = vm_network(inv, dc);
    if !model.esx && model.portgroups > 0 {
        distributed_switch(inv, dc, model.portgroups);
    }
    network
}

fn vm_network(inv: &mut Inventory, dc: &Datacenter) -> Moref {
    let value = value_for(inv, "network");
    let mut net = ManagedObject::new("Network", &value);
    let network = net.moref.clone();
    net.set("name", "VM Network");
    net.set("parent", dc.net_folder.clone());
    net.set(
        "summary",
        Data::new("NetworkSummary")
            .with("network", network.clone())
            .with("name", "VM Network")
            .with("accessible", true),
    );
    net.set("host", mor_array([]));
    net.set("vm", mor_array([]));
    net.set("overallStatus", enum_val("ManagedEntityStatus", "green"));
    inv.insert(net);
    link(inv, &dc.net_folder, "childEntity", &network);
    link(inv, &dc.moref, "network", &network);
    network
}

/// The datacenter's distributed switch and its `portgroups` port groups.
fn distributed_switch(inv: &mut Inventory, dc: &Datacenter, portgroups: usize) {
    let value = inv.next_value("dvs");
    let mut dvs = ManagedObject::new("VmwareDistributedVirtualSwitch", &value);
    let dvs_ref = dvs.moref.clone();
    let name = format!("{}_DVS", dc.name);
    dvs.set("name", name.clone());
    dvs.set("parent", dc.net_folder.clone());
    dvs.set("uuid", uuid_for(&name, "dvs"));
    dvs.set("portgroup", mor_array([]));
    inv.insert(dvs);
    link(inv, &dc.net_folder, "childEntity", &dvs_ref);
    for p in 0..portgroups {
        portgroup(inv, dc, &dvs_ref, p);
    }
}

/// Port group `p` of switch `dvs`.
fn portgroup(inv: &mut Inventory, dc: &Datacenter, dvs: &Moref, p: usize) {
    let value = inv.next_value("dvportgroup");
    let name = format!("{}_DVPG{p}", dc.name);
    let mut pg = ManagedObject::new("DistributedVirtualPortgroup", &value);
    let m = pg.moref.clone();
    pg.set("name", name.as_str());
    pg.set("parent", dc.net_folder.clone());
    pg.set("key", value.as_str());
    pg.set(
        "summary",
        Data::new("NetworkSummary")
            .with("network", m.clone())
            .with("name", name.as_str())
            .with("accessible", true),
    );
    pg.set(
        "config",
        Data::new("DVPortgroupConfigInfo")
            .with("key", value.as_str())
            .with("name", name.as_str())
            .with("numPorts", 0i32)
            .with("distributedVirtualSwitch", dvs.clone())
            .with("type", "earlyBinding"),
    );
    pg.set("host", mor_array([]));
    pg.set("vm", mor_array([]));
    inv.insert(pg);
    link(inv, &dc.net_folder, "childEntity", &m);
    link(inv, &dc.moref, "network", &m);
    link(inv, dvs, "portgroup", &m);
}
