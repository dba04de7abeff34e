//! A generated cluster (ClusterComputeResource) `DC<n>_C<c>`: its hosts, its root pool and
//! the model's child pools, and the model's VMs in every pool, spread over the hosts in turn.

use super::build::{enum_val, link, Placement};
use super::datacenter::Datacenter;
use super::host::host;
use super::model::Model;
use super::resource_pool::resource_pool;
use super::vm::generated_vm;
use crate::objects::{Inventory, ManagedObject};
use crate::value::{mor_array, Data, Moref};
use chrono::{DateTime, Utc};

/// Cluster `c` of datacenter `dc`, in its host folder.
pub(super) fn cluster(
    inv: &mut Inventory,
    model: &Model,
    dc: &Datacenter,
    c: usize,
    place: &Placement,
    now: DateTime<Utc>,
) {
    let name = format!("{}_C{c}", dc.name);
    let value = inv.next_value("domain-c");
    let cl = Moref::new("ClusterComputeResource", &value);
    let hosts: Vec<Moref> = (0..model.hosts_per_cluster)
        .map(|h| host(inv, &format!("{name}_H{h}"), &cl, place))
        .collect();
    let root_pool = resource_pool(inv, "Resources", &cl, &cl);
    let mut clo = ManagedObject::new("ClusterComputeResource", &value);
    clo.set("name", name.as_str());
    clo.set("parent", dc.host_folder.clone());
    clo.set("host", mor_array(hosts.iter().cloned()));
    clo.set("resourcePool", root_pool.clone());
    clo.set("datastore", mor_array(place.datastores.iter().cloned()));
    clo.set("network", mor_array([place.network.clone()]));
    clo.set("overallStatus", enum_val("ManagedEntityStatus", "green"));
    clo.set("summary", summary(hosts.len()));
    for (prop, value) in crate::cluster_compute_resource::default_properties() {
        clo.set(prop, value);
    }
    inv.insert(clo);
    link(inv, &dc.host_folder, "childEntity", &cl);
    let mut pools = vec![root_pool.clone()];
    for p in 1..=model.pools {
        let child = resource_pool(inv, &format!("{name}_RP{p}"), &root_pool, &cl);
        link(inv, &root_pool, "resourcePool", &child);
        pools.push(child);
    }
    let mut turn = 0;
    for (p, pool) in pools.iter().enumerate() {
        for v in 0..model.vms {
            let host_ref = hosts.get(turn % hosts.len().max(1));
            turn += 1;
            if let Some(host_ref) = host_ref {
                let vm_name = format!("{name}_RP{p}_VM{v}");
                generated_vm(inv, &vm_name, place, host_ref, pool, now);
            }
        }
    }
}

/// A cluster's summary: the sums over its `hosts` hosts, all alike.
fn summary(hosts: usize) -> Data {
    Data::new("ClusterComputeResourceSummary")
        .with("totalCpu", 2294 * 2 * hosts as i32)
        .with("totalMemory", 4i64 * 1024 * 1024 * 1024 * hosts as i64)
        .with("numCpuCores", 2 * hosts as i16 as i32)
        .with("numCpuThreads", 2 * hosts as i32)
        .with("effectiveCpu", 2294 * 2 * hosts as i32)
        .with("effectiveMemory", 4096i64 * hosts as i64)
        .with("numHosts", hosts as i32)
        .with("numEffectiveHosts", hosts as i32)
        .with("overallStatus", enum_val("ManagedEntityStatus", "green"))
}
