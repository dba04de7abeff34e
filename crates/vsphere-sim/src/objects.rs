//! The managed objects of one simulator and the store that holds them: [`ManagedObject`],
//! the [`Inventory`] (by reference, and every entity by parent and name), where a type sits
//! in the vim25 hierarchy ([`is_a`]), the well-known references ([`refs`]) and the UUIDs
//! derived from names ([`uuid_for`]).
//!
//! Every handler and the generator of the starting inventory (`inventory`) build on this;
//! it imports only the values, so it knows nothing of either.

use crate::value::{mor_array, Data, Moref, Name, Val};
use std::collections::HashMap;

type FastHash = foldhash::fast::RandomState;

/// One managed object: its reference and its properties by top-level name.
#[derive(Debug, Clone)]
pub struct ManagedObject {
    pub moref: Moref,
    pub props: crate::data::Props,
}

impl ManagedObject {
    pub fn new(ty: &str, value: &str) -> Self {
        ManagedObject {
            moref: Moref::new(ty, value),
            props: crate::data::Props::new(crate::value::type_name(ty)),
        }
    }

    pub fn set(&mut self, name: impl Into<Name>, value: impl Into<Val>) {
        self.props.insert(name.into(), value.into());
    }

    pub fn name(&self) -> &str {
        self.props.get("name").and_then(Val::as_str).unwrap_or("")
    }

    /// The value at a property path (`summary.runtime.powerState`).
    pub fn path(&self, path: &str) -> Option<&Val> {
        let (head, rest) = path.split_once('.').unwrap_or((path, ""));
        let top = self.props.get(head)?;
        if rest.is_empty() {
            Some(top)
        } else {
            top.path(rest)
        }
    }

    /// Appends a reference to a list property.
    pub fn push_mor(&mut self, prop: &'static str, m: Moref) {
        match self.props.get_mut(prop) {
            Some(Val::Array(_, items)) => items.push(Val::Mor(m)),
            _ => {
                self.props.insert(prop, mor_array([m]));
            }
        }
    }
}

/// Whether type `ty` is `base` or derives from it, in the vim25 hierarchy.
pub fn is_a(ty: &str, base: &str) -> bool {
    if ty == base {
        return true;
    }
    let parent = match ty {
        "ClusterComputeResource" => "ComputeResource",
        "VirtualApp" => "ResourcePool",
        "DistributedVirtualPortgroup" | "OpaqueNetwork" => "Network",
        "VmwareDistributedVirtualSwitch" => "DistributedVirtualSwitch",
        "StoragePod" => "Folder",
        "Folder"
        | "Datacenter"
        | "ComputeResource"
        | "HostSystem"
        | "ResourcePool"
        | "VirtualMachine"
        | "Datastore"
        | "Network"
        | "DistributedVirtualSwitch" => "ManagedEntity",
        "ContainerView" | "ListView" | "InventoryView" => "ManagedObjectView",
        "ManagedObjectView" => "View",
        _ => return false,
    };
    is_a(parent, base)
}

/// All managed objects of one simulator.
///
/// Besides the objects by reference, it indexes every entity by its parent and name, so the
/// duplicate-name checks of clone, create, move and rename cost the same in a folder of ten
/// VMs as in one of ten thousand (a scan of the folder made a clone's cost grow with the
/// inventory). The index follows `insert`, `remove`, [`Inventory::rename`] and
/// [`Inventory::reparent`]: a name or parent is never changed through `get_mut`.
#[derive(Debug, Default)]
pub struct Inventory {
    /// With foldhash rather than SipHash: references are ours, not an attacker's, and a
    /// listing looks up every object several times.
    objects: HashMap<String, ManagedObject, FastHash>,
    /// Parent value → name → the values of the children with that name (one, in a valid
    /// inventory; a list so an out-of-order insert never loses one).
    named: HashMap<String, HashMap<String, Vec<String>, FastHash>, FastHash>,
    next_id: u64,
    /// The last object built for each part of a VM that is the same in most VMs (a device's
    /// description, the guest before it boots), by the part's name: see [`Inventory::reuse`].
    last_parts: Vec<(&'static str, Val)>,
    /// What new objects' data objects are stored against (see [`crate::data::Bases`]).
    bases: crate::data::Bases,
    /// Bumped by every mutable access (and by [`Inventory::note_change`]): a call that left it
    /// as it was changed nothing a property collector reports, so its waiters need not wake.
    changes: u64,
    /// Which objects those changes touched, while a property filter wants to know.
    journal: crate::journal::Journal,
    /// A standalone ESXi host's inventory (hostd's `ha-*` references) rather than vCenter's.
    esx: bool,
    /// The objects changed since a keeper last took them, while one keeps this inventory
    /// (see `crate::persist`).
    dirty: Option<std::collections::HashSet<Box<str>, FastHash>>,
}

impl Inventory {
    /// An empty inventory, of a standalone ESXi host's (`esx`) or of a vCenter.
    pub(crate) fn new(esx: bool) -> Self {
        Inventory {
            esx,
            ..Inventory::default()
        }
    }

    /// Whether this is a standalone ESXi host's inventory.
    pub fn esx(&self) -> bool {
        self.esx
    }

    /// A count that moves whenever the inventory may have changed (see `changes`).
    pub fn changes(&self) -> u64 {
        self.changes
    }

    /// Marks a change to what property collectors read from outside the inventory (the
    /// sessions behind `SessionManager.sessionList`).
    pub fn note_change(&mut self) {
        self.changes += 1;
        let manager = refs::session_manager(self.esx);
        self.journal.record(self.changes, &manager.value);
    }

    /// Starts or stops journaling which objects change (see [`crate::journal`]).
    pub(crate) fn keep_journal(&mut self, kept: bool) {
        self.journal.keep(kept, self.changes);
    }

    /// The values of the objects changed after change count `seen`, each once; `None` when
    /// that is not known (see [`crate::journal::Journal::since`]).
    pub(crate) fn changed_since(&self, seen: u64) -> Option<Vec<&str>> {
        self.journal.since(seen)
    }

    /// Counts a change to the object `value`.
    fn changed(&mut self, value: &str) {
        self.changes += 1;
        self.journal.record(self.changes, value);
        self.touch(value);
    }

    /// Marks the object `value` as to be kept again, for a change of what is kept beside it
    /// (its guest's addresses, its policies) that changed none of its properties.
    pub(crate) fn touch(&mut self, value: &str) {
        if let Some(dirty) = &mut self.dirty {
            if !dirty.contains(value) {
                dirty.insert(value.into());
            }
        }
    }

    /// Starts noting which objects change, for a keeper (see `crate::persist`).
    pub(crate) fn track_dirty(&mut self) {
        self.dirty.get_or_insert_with(Default::default);
    }

    /// The objects changed since the last call, when changes are noted.
    pub(crate) fn take_dirty(&mut self) -> Vec<Box<str>> {
        match &mut self.dirty {
            Some(dirty) if !dirty.is_empty() => dirty.drain().collect(),
            _ => Vec::new(),
        }
    }

    /// The number the next reference value is made from, and setting it back (a restore).
    pub(crate) fn next_id(&self) -> u64 {
        self.next_id
    }

    pub(crate) fn set_next_id(&mut self, next: u64) {
        self.next_id = self.next_id.max(next);
    }

    /// A fresh reference value with vCenter's prefix for the type: `vm-17` for `vm`, and
    /// `group-v3` / `domain-c7` for prefixes that already end in their letter.
    pub fn next_value(&mut self, prefix: &str) -> String {
        self.next_id += 1;
        if prefix.starts_with("group-") || prefix.starts_with("domain-") {
            format!("{prefix}{}", self.next_id)
        } else {
            format!("{prefix}-{}", self.next_id)
        }
    }

    pub fn insert(&mut self, mut object: ManagedObject) {
        self.changed(&object.moref.value);
        object.props.share(&mut self.bases);
        let value = object.moref.value.clone();
        if let Some(old) = self.objects.remove(&value) {
            self.unindex(&old);
        }
        self.index(&object);
        self.objects.insert(value, object);
    }

    /// `value` as a value, sharing one of the last [`PARTS_KEPT`] given for `part` when it
    /// is equal: the VMs of a model and the clones of a template are built one after another
    /// from the same parts (a runtime per host, taken in turn), so one copy serves them all
    /// (changing one copies it, see [`Val::data_mut`]). Only a few per part are kept, so
    /// memory stays bounded whatever the clients build.
    pub fn reuse(&mut self, part: &'static str, value: impl Into<Val>) -> Val {
        let value = value.into();
        let mut kept = self.last_parts.iter().filter(|(p, _)| *p == part);
        if let Some((_, v)) = kept.clone().find(|(_, v)| *v == value) {
            return v.clone();
        }
        if kept.by_ref().count() >= PARTS_KEPT {
            if let Some(oldest) = self.last_parts.iter().position(|(p, _)| *p == part) {
                self.last_parts.remove(oldest);
            }
        }
        self.last_parts.push((part, value.clone()));
        value
    }

    /// Shares what an object holds again after changes (see [`crate::data::Bases`]): a
    /// clone's parts are changed one by one after it is made.
    pub fn reshare(&mut self, m: &Moref) {
        if let Some(o) = self.objects.get_mut(&m.value) {
            o.props.share(&mut self.bases);
        }
    }

    /// Gives back the spare capacity of every object's lists: the child lists of folders,
    /// pools, hosts, datastores and networks grew one VM at a time.
    pub(crate) fn compact(&mut self) {
        for o in self.objects.values_mut() {
            o.props.compact();
        }
    }

    /// Replaces field `field` of `data` by the shared copy of [`Inventory::reuse`].
    pub(crate) fn reuse_field(&mut self, part: &'static str, data: &mut Data, field: &str) {
        if let Some(v) = data.get_mut(field) {
            *v = self.reuse(part, std::mem::replace(v, Val::Bool(false)));
        }
    }

    /// The index key of an object: its parent's value and its name, when it has both.
    fn key(object: &ManagedObject) -> Option<(&str, &str)> {
        let parent = object.props.get("parent").and_then(Val::as_mor)?;
        let name = object.props.get("name").and_then(Val::as_str)?;
        Some((parent.value.as_str(), name))
    }

    fn index(&mut self, object: &ManagedObject) {
        if let Some((parent, name)) = Inventory::key(object) {
            self.named
                .entry(parent.to_string())
                .or_default()
                .entry(name.to_string())
                .or_default()
                .push(object.moref.value.clone());
        }
    }

    fn unindex(&mut self, object: &ManagedObject) {
        let Some((parent, name)) = Inventory::key(object) else {
            return;
        };
        let Some(names) = self.named.get_mut(parent) else {
            return;
        };
        if let Some(values) = names.get_mut(name) {
            values.retain(|v| *v != object.moref.value);
            if values.is_empty() {
                names.remove(name);
            }
        }
        if names.is_empty() {
            self.named.remove(parent);
        }
    }

    /// The child of `parent` named `name`: an entity whose parent it is, or, for a resource
    /// pool, one of its VMs (whose parent is their folder).
    pub fn child_named(&self, parent: &Moref, name: &str) -> Option<Moref> {
        let indexed = self
            .named
            .get(&parent.value)
            .and_then(|names| names.get(name))
            .and_then(|values| values.first())
            .and_then(|v| self.objects.get(v))
            .map(|o| o.moref.clone());
        if indexed.is_some() || !is_a(&parent.ty, "ResourcePool") {
            return indexed;
        }
        let pool = self.get(parent)?;
        pool.props
            .get("vm")
            .map(Val::morefs)
            .unwrap_or_default()
            .into_iter()
            .find(|vm| self.get(vm).is_some_and(|o| o.name() == name))
    }

    /// Renames an entity (its `name` property; the config and summary copies are the
    /// caller's).
    pub fn rename(&mut self, m: &Moref, name: &str) {
        self.update_key(m, |o| o.set("name", name));
    }

    /// Gives an entity a new parent (its `parent` property; the child lists are the caller's).
    pub fn reparent(&mut self, m: &Moref, parent: &Moref) {
        self.update_key(m, |o| o.set("parent", parent.clone()));
    }

    fn update_key(&mut self, m: &Moref, change: impl FnOnce(&mut ManagedObject)) {
        self.changed(&m.value);
        if let Some(mut o) = self.objects.remove(&m.value) {
            self.unindex(&o);
            change(&mut o);
            self.index(&o);
            self.objects.insert(m.value.clone(), o);
        }
    }

    pub fn get(&self, m: &Moref) -> Option<&ManagedObject> {
        self.objects.get(&m.value).filter(|o| o.moref.ty == m.ty)
    }

    pub fn get_mut(&mut self, m: &Moref) -> Option<&mut ManagedObject> {
        self.changes += 1;
        let object = self
            .objects
            .get_mut(&m.value)
            .filter(|o| o.moref.ty == m.ty)?;
        self.journal.record(self.changes, &m.value);
        if let Some(dirty) = &mut self.dirty {
            if !dirty.contains(m.value.as_str()) {
                dirty.insert(m.value.as_str().into());
            }
        }
        Some(object)
    }

    /// Finds an object by value alone (the type attribute may name a base type).
    pub fn by_value(&self, value: &str) -> Option<&ManagedObject> {
        self.objects.get(value)
    }

    pub fn remove(&mut self, m: &Moref) -> Option<ManagedObject> {
        self.changed(&m.value);
        let object = self.objects.remove(&m.value)?;
        self.unindex(&object);
        Some(object)
    }

    pub fn iter(&self) -> impl Iterator<Item = &ManagedObject> {
        self.objects.values()
    }

    /// The direct children of a managed entity, in inventory order.
    pub fn children(&self, m: &Moref) -> Vec<Moref> {
        self.child_refs(m).into_iter().cloned().collect()
    }

    /// As [`Inventory::children`], borrowed.
    pub fn child_refs(&self, m: &Moref) -> Vec<&Moref> {
        let Some(o) = self.get(m) else {
            return Vec::new();
        };
        let props: &[&str] = match &*o.moref.ty {
            "Folder" => &["childEntity"],
            "Datacenter" => &["vmFolder", "hostFolder", "datastoreFolder", "networkFolder"],
            "ComputeResource" | "ClusterComputeResource" => &["host", "resourcePool"],
            "ResourcePool" | "VirtualApp" => &["resourcePool", "vm"],
            _ => &[],
        };
        props
            .iter()
            .filter_map(|p| o.props.get(p))
            .flat_map(Val::mor_refs)
            .collect()
    }

    /// The datacenter an entity lives in (itself, for a datacenter).
    pub fn datacenter_of(&self, m: &Moref) -> Option<&ManagedObject> {
        let mut cur = self.by_value(&m.value);
        while let Some(o) = cur {
            if o.moref.ty == "Datacenter" {
                return Some(o);
            }
            cur = o
                .props
                .get("parent")
                .and_then(Val::as_mor)
                .and_then(|p| self.by_value(&p.value));
        }
        None
    }

    /// The inventory path of an entity (`/DC0/vm/DC0_H0_VM0`).
    pub fn path_of(&self, m: &Moref) -> String {
        let mut parts = Vec::new();
        let mut cur = self.get(m);
        while let Some(o) = cur {
            let parent = o.props.get("parent").and_then(Val::as_mor);
            if parent.is_none() {
                break; // the root folder has no name in paths
            }
            parts.push(o.name().to_string());
            cur = parent.and_then(|p| self.get(p));
        }
        parts.reverse();
        format!("/{}", parts.join("/"))
    }
}

/// How many objects per part [`Inventory::reuse`] keeps: as many as the hosts VMs of a
/// cluster are spread over in the usual models.
const PARTS_KEPT: usize = 8;

/// Well-known references of every simulator. Those that differ on a standalone ESXi host
/// (hostd's `ha-*` values) take `esx`.
pub mod refs {
    use crate::value::Moref;

    fn pick(ty: &str, esx: bool, on_esx: &str, on_vcenter: &str) -> Moref {
        Moref::new(ty, if esx { on_esx } else { on_vcenter })
    }

    pub fn service_instance() -> Moref {
        Moref::new("ServiceInstance", "ServiceInstance")
    }
    pub fn root_folder(esx: bool) -> Moref {
        pick("Folder", esx, "ha-folder-root", "group-d1")
    }
    pub fn property_collector(esx: bool) -> Moref {
        pick(
            "PropertyCollector",
            esx,
            "ha-property-collector",
            "propertyCollector",
        )
    }
    pub fn view_manager() -> Moref {
        Moref::new("ViewManager", "ViewManager")
    }
    pub fn session_manager(esx: bool) -> Moref {
        pick("SessionManager", esx, "ha-sessionmgr", "SessionManager")
    }
    pub fn search_index(esx: bool) -> Moref {
        pick("SearchIndex", esx, "ha-searchindex", "SearchIndex")
    }
    /// vCenter only: ESXi has no custom fields.
    pub fn custom_fields_manager() -> Moref {
        Moref::new("CustomFieldsManager", "CustomFieldsManager")
    }
    pub fn event_manager(esx: bool) -> Moref {
        pick("EventManager", esx, "ha-eventmgr", "EventManager")
    }
    pub fn task_manager(esx: bool) -> Moref {
        pick("TaskManager", esx, "ha-taskmgr", "TaskManager")
    }
}

/// Deterministic UUIDs derived from a name, so the same model gives the same UUIDs.
pub fn uuid_for(name: &str, salt: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut bytes = [0u8; 16];
    for (i, b) in bytes.iter_mut().enumerate() {
        for c in name.bytes().chain(salt.bytes()).chain([i as u8]) {
            h ^= u64::from(c);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        *b = (h >> 24) as u8;
    }
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    // One allocation rather than seventeen: every clone makes two of these.
    uuid::Uuid::from_bytes(bytes).hyphenated().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_uuids_are_stable_version_4_shaped() {
        // Computed once from the derivation; a change here changes every generated UUID.
        assert_eq!(
            uuid_for("DC0_H0_VM0", "bios"),
            "f46ce636-c322-4255-bb70-81db98110dcb"
        );
        assert_ne!(
            uuid_for("DC0_H0_VM0", "bios"),
            uuid_for("DC0_H0_VM0", "instance")
        );
    }

    #[test]
    fn reuse_keeps_a_few_objects_per_part_and_only_shares_equal_ones() {
        let mut inv = Inventory::default();
        let first = inv.reuse("p", Data::new("T").with("x", 1));
        let same = inv.reuse("p", Data::new("T").with("x", 1));
        let other = inv.reuse("p", Data::new("T").with("x", 2));
        let elsewhere = inv.reuse("q", Data::new("T").with("x", 2));
        let first_again = inv.reuse("p", Data::new("T").with("x", 1));
        let ptr = |v: &Val| match v {
            Val::Data(d) => std::sync::Arc::as_ptr(d),
            _ => std::ptr::null(),
        };
        assert_eq!(ptr(&first), ptr(&same));
        assert_ne!(ptr(&first), ptr(&other));
        assert_eq!(other.path("x"), Some(&Val::Int(2)));
        assert_ne!(ptr(&other), ptr(&elsewhere));
        assert_eq!(ptr(&first), ptr(&first_again));
        for x in 0..2 * PARTS_KEPT as i32 {
            inv.reuse("p", Data::new("T").with("x", x + 10));
        }
        assert_eq!(inv.last_parts.len(), PARTS_KEPT + 1);
        let evicted = inv.reuse("p", Data::new("T").with("x", 1));
        assert_ne!(ptr(&first), ptr(&evicted));
    }

    #[test]
    fn types_follow_the_vim_hierarchy() {
        assert!(is_a("ClusterComputeResource", "ManagedEntity"));
        assert!(is_a("DistributedVirtualPortgroup", "Network"));
        assert!(!is_a("Datastore", "Network"));
    }
}
