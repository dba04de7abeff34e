//! The starting inventory of a simulator, generated from a [`Model`], and the public face
//! of the object model (re-exported from `objects`, where the crate itself takes it from).
//!
//! The model flags follow govmomi's VPX model, so the same numbers give the same names:
//! `DC0`, `DC0_C0`, `DC0_C0_H0`, `DC0_C0_RP0_VM0`, `DC0_H0`, `DC0_H0_VM0`, `LocalDS_0`,
//! `VM Network`, `DC0_DVPG0`. One file per type builds its objects; [`generate`] calls them
//! in the order that gives every object its reference value, so that order is the
//! generator's contract (pinned by a test below).

mod build;
mod cluster;
mod compute_resource;
mod datacenter;
mod datastore;
mod folder;
mod host;
pub(crate) mod model;
mod network;
mod resource_pool;
pub(crate) mod vm;

pub use crate::objects::{is_a, refs, uuid_for, Inventory, ManagedObject};
pub use model::Model;
pub use vm::{create_vm, VmPlacement};

use build::Placement;
use chrono::{DateTime, Utc};

/// Builds the starting inventory of a model.
pub fn generate(model: &Model, now: DateTime<Utc>) -> Inventory {
    let mut inv = Inventory::new(model.esx);
    let root = folder::root(&mut inv);
    let datacenters = if model.esx { 1 } else { model.datacenters };
    for d in 0..datacenters {
        let dc = datacenter::datacenter(&mut inv, model, d, &root);
        // Storage and networks first: hosts and VMs refer to them.
        let datastores = datastore::datastores(&mut inv, model, &dc);
        let network = network::networks(&mut inv, model, &dc);
        let place = Placement {
            vm_folder: dc.vm_folder.clone(),
            datastores,
            network,
        };
        compute_resource::standalone_hosts(&mut inv, model, &dc, &place, now);
        // A standalone ESXi host has no clusters.
        if !model.esx {
            for c in 0..model.clusters {
                cluster::cluster(&mut inv, model, &dc, c, &place, now);
            }
        }
    }
    inv.compact();
    inv
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::{Data, Moref, Val};

    #[test]
    fn every_entity_is_found_by_its_parent_and_name_and_follows_renames_and_moves() {
        let mut inv = generate(&Model::default(), Utc::now());
        let entities: Vec<Moref> = inv
            .iter()
            .filter(|o| is_a(&o.moref.ty, "ManagedEntity") && o.props.contains_key("parent"))
            .map(|o| o.moref.clone())
            .collect();
        assert!(entities.len() > 10);
        for m in &entities {
            let o = inv.get(m).unwrap();
            let parent = o.props.get("parent").and_then(Val::as_mor).unwrap().clone();
            assert_eq!(
                inv.child_named(&parent, o.name()).as_ref(),
                Some(m),
                "{m:?}"
            );
            // Whatever children() lists under a parent is found by name there too.
            for c in inv.children(&parent) {
                let name = inv.get(&c).unwrap().name().to_string();
                assert!(
                    inv.child_named(&parent, &name).is_some(),
                    "{c:?} under {parent:?}"
                );
            }
        }
        let vm = entities
            .iter()
            .find(|m| m.ty == "VirtualMachine")
            .unwrap()
            .clone();
        let folder = inv.get(&vm).unwrap().props["parent"]
            .as_mor()
            .unwrap()
            .clone();
        inv.rename(&vm, "renamed");
        assert_eq!(inv.child_named(&folder, "renamed"), Some(vm.clone()));
        assert_eq!(inv.get(&vm).unwrap().name(), "renamed");
        let root = refs::root_folder(false);
        inv.reparent(&vm, &root);
        assert_eq!(inv.child_named(&folder, "renamed"), None);
        assert_eq!(inv.child_named(&root, "renamed"), Some(vm.clone()));
        inv.remove(&vm);
        assert_eq!(inv.child_named(&root, "renamed"), None);
    }

    #[test]
    fn the_default_model_has_vcsims_names() {
        let inv = generate(&Model::default(), Utc::now());
        let mut names: Vec<(String, String)> = inv
            .iter()
            .filter(|o| {
                matches!(
                    &*o.moref.ty,
                    "VirtualMachine"
                        | "HostSystem"
                        | "ClusterComputeResource"
                        | "Datacenter"
                        | "Datastore"
                )
            })
            .map(|o| (o.moref.ty.to_string(), o.name().to_string()))
            .collect();
        names.sort();
        let vms: Vec<&str> = names
            .iter()
            .filter(|(t, _)| t == "VirtualMachine")
            .map(|(_, n)| n.as_str())
            .collect();
        assert_eq!(
            vms,
            vec![
                "DC0_C0_RP0_VM0",
                "DC0_C0_RP0_VM1",
                "DC0_H0_VM0",
                "DC0_H0_VM1"
            ]
        );
        let hosts: Vec<&str> = names
            .iter()
            .filter(|(t, _)| t == "HostSystem")
            .map(|(_, n)| n.as_str())
            .collect();
        assert_eq!(hosts, vec!["DC0_C0_H0", "DC0_C0_H1", "DC0_C0_H2", "DC0_H0"]);
        assert!(names.contains(&("Datastore".into(), "LocalDS_0".into())));
        assert!(names.contains(&("ClusterComputeResource".into(), "DC0_C0".into())));
        let vm = inv.iter().find(|o| o.name() == "DC0_H0_VM0").unwrap();
        assert_eq!(inv.path_of(&vm.moref), "/DC0/vm/DC0_H0_VM0");
        assert_eq!(
            vm.path("summary.runtime.powerState").and_then(Val::as_str),
            Some("poweredOn")
        );
    }

    /// The object at `path` of a VM, as the shared pointer it is stored under.
    fn shared(inv: &Inventory, vm: &str, path: &str) -> std::sync::Arc<Data> {
        let o = inv.iter().find(|o| o.name() == vm).unwrap();
        match o.path(path) {
            Some(Val::Data(d)) => d.clone(),
            other => panic!("{path}: {other:?}"),
        }
    }

    #[test]
    fn vms_of_a_model_share_their_identical_parts_until_one_changes() {
        let mut inv = generate(&Model::default(), Utc::now());
        let (a, b) = ("DC0_H0_VM0", "DC0_H0_VM1");
        for path in ["guest", "summary.guest", "summary.quickStats", "runtime"] {
            assert!(
                std::sync::Arc::ptr_eq(&shared(&inv, a, path), &shared(&inv, b, path)),
                "{path}"
            );
        }
        // Within a VM, the runtime and its summary's copy are one object.
        assert!(std::sync::Arc::ptr_eq(
            &shared(&inv, a, "runtime"),
            &shared(&inv, a, "summary.runtime")
        ));
        // What differs is not shared: each VM's own disk file.
        assert!(!std::sync::Arc::ptr_eq(
            &shared(&inv, a, "config"),
            &shared(&inv, b, "config")
        ));
        // A change to one VM's shared part copies it: the other VM keeps its value.
        let m = inv.iter().find(|o| o.name() == a).unwrap().moref.clone();
        let guest = inv.get_mut(&m).and_then(|o| o.props.get_mut("guest"));
        guest
            .and_then(Val::data_mut)
            .unwrap()
            .set("guestState", "running");
        let state = |vm: &str| {
            let o = inv.iter().find(|o| o.name() == vm).unwrap();
            o.path("guest.guestState")
                .and_then(Val::as_str)
                .map(str::to_string)
        };
        assert_eq!(state(a).as_deref(), Some("running"));
        assert_eq!(state(b).as_deref(), Some("notRunning"));
    }

    /// Every object of an inventory as text, in reference order: its reference and its
    /// properties as stored (so how they are shared against one another counts too).
    fn fingerprint(inv: &Inventory) -> (usize, u64) {
        let mut objects: Vec<&ManagedObject> = inv.iter().collect();
        objects.sort_by(|a, b| a.moref.value.cmp(&b.moref.value));
        // FNV-1a rather than std's hasher, whose output may change between Rust releases.
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for o in &objects {
            for b in format!("{:?} {:?}\n", o.moref, o.props).bytes() {
                h ^= u64::from(b);
                h = h.wrapping_mul(0x0100_0000_01b3);
            }
        }
        (objects.len(), h)
    }

    #[test]
    fn generated_inventories_stay_exactly_as_they_were() {
        // Pinned from the generator before it was split into a file per type (and again when
        // clusters gained their DRS configuration): a change to any reference, property,
        // value or their order changes these.
        let now = chrono::DateTime::from_timestamp(1_700_000_000, 0).unwrap();
        let big = Model {
            datacenters: 3,
            clusters: 2,
            hosts_per_cluster: 2,
            standalone_hosts: 2,
            vms: 2,
            datastores: 2,
            pools: 2,
            portgroups: 2,
            folders: 2,
            esx: false,
        };
        let more_folders_than_datacenters = Model {
            folders: 2,
            ..Model::default()
        };
        let esx = Model {
            esx: true,
            ..Model::default()
        };
        let got: Vec<(usize, u64)> = [Model::default(), big, more_folders_than_datacenters, esx]
            .iter()
            .map(|m| fingerprint(&generate(m, now)))
            .collect();
        assert_eq!(
            got,
            vec![
                (23, 10188907525989972286),
                (152, 6213006404449716940),
                (27, 8949452521512957269),
                (16, 15748469598885721756)
            ]
        );
        let inv = generate(&Model::default(), now);
        let vm = inv.iter().find(|o| o.name() == "DC0_C0_RP0_VM1").unwrap();
        assert_eq!(vm.moref.value, "vm-21");
    }
}
