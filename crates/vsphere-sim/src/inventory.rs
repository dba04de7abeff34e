//! The managed objects of one simulator and the generator of its starting inventory.
//!
//! The model flags follow govmomi's VPX model, so the same numbers give the same names:
//! `DC0`, `DC0_C0`, `DC0_C0_H0`, `DC0_C0_RP0_VM0`, `DC0_H0`, `DC0_H0_VM0`, `LocalDS_0`,
//! `VM Network`, `DC0_DVPG0`.

use crate::value::{mor_array, string_array, Data, Moref, Name, Val};
use chrono::{DateTime, Utc};
use std::collections::HashMap;

type FastHash = foldhash::fast::RandomState;

/// What the generated inventory contains (per datacenter, cluster, host or pool).
#[derive(Debug, Clone)]
pub struct Model {
    pub datacenters: usize,
    pub clusters: usize,
    pub hosts_per_cluster: usize,
    pub standalone_hosts: usize,
    /// VMs per standalone host and per resource pool (govmomi's `Machine`).
    pub vms: usize,
    pub datastores: usize,
    /// Extra resource pools per cluster, besides the root pool.
    pub pools: usize,
    /// Distributed port groups per datacenter.
    pub portgroups: usize,
    /// How many datacenters (the last ones) sit inside a folder (govmomi's `Folder`).
    pub folders: usize,
    /// A single-host ESX model instead of a vCenter.
    pub esx: bool,
}

impl Default for Model {
    fn default() -> Self {
        Model {
            datacenters: 1,
            clusters: 1,
            hosts_per_cluster: 3,
            standalone_hosts: 1,
            vms: 2,
            datastores: 1,
            pools: 0,
            portgroups: 1,
            folders: 0,
            esx: false,
        }
    }
}

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
    /// A standalone ESXi host's inventory (hostd's `ha-*` references) rather than vCenter's.
    esx: bool,
}

impl Inventory {
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
        self.changes += 1;
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
    fn compact(&mut self) {
        for o in self.objects.values_mut() {
            o.props.compact();
        }
    }

    /// Replaces field `field` of `data` by the shared copy of [`Inventory::reuse`].
    fn reuse_field(&mut self, part: &'static str, data: &mut Data, field: &str) {
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
        self.changes += 1;
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
        self.objects
            .get_mut(&m.value)
            .filter(|o| o.moref.ty == m.ty)
    }

    /// Finds an object by value alone (the type attribute may name a base type).
    pub fn by_value(&self, value: &str) -> Option<&ManagedObject> {
        self.objects.get(value)
    }

    pub fn remove(&mut self, m: &Moref) -> Option<ManagedObject> {
        self.changes += 1;
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

fn enum_val(ty: &'static str, v: impl Into<crate::value::Name>) -> Val {
    Val::Enum(ty, v.into())
}

fn folder(
    inv: &mut Inventory,
    prefix: &str,
    name: &str,
    parent: &Moref,
    child_types: &[&str],
) -> Moref {
    let value = if prefix == "group-d" && parent.value.is_empty() {
        refs::root_folder(inv.esx).value
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

/// A generated object's reference value: vCenter's next one for the prefix, or on an ESXi
/// host hostd's fixed value for its single datacenter, folders, compute resource, host, root
/// pool and network.
fn value_for(inv: &mut Inventory, prefix: &str) -> String {
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
    if inv.esx && !fixed.is_empty() {
        fixed.to_string()
    } else {
        inv.next_value(prefix)
    }
}

/// An ESXi datastore's reference value: its VMFS volume UUID (`57089c25-85e3ccd4-17b6-
/// 000c29d0beb3`), derived from its name.
fn vmfs_uuid(name: &str) -> String {
    let h = uuid_for(name, "vmfs").replace('-', "");
    format!("{}-{}-{}-{}", &h[0..8], &h[8..16], &h[16..20], &h[20..32])
}

/// What an ESXi host has that a host under vCenter here does not: its own datastore
/// browser, and a configuration manager whose storage system answers
/// QueryUnresolvedVmfsVolume.
fn esx_host_extras(inv: &mut Inventory, host: &Moref) {
    let browser = Moref::new("HostDatastoreBrowser", "ha-host-datastorebrowser");
    let storage = Moref::new("HostStorageSystem", "storageSystem");
    inv.insert(ManagedObject::new(&browser.ty, &browser.value));
    inv.insert(ManagedObject::new(&storage.ty, &storage.value));
    if let Some(h) = inv.get_mut(host) {
        h.set("datastoreBrowser", browser);
        h.set(
            "configManager",
            Data::new("HostConfigManager").with("storageSystem", storage),
        );
    }
}

fn link(inv: &mut Inventory, parent: &Moref, prop: &'static str, child: &Moref) {
    if let Some(p) = inv.get_mut(parent) {
        p.push_mor(prop, child.clone());
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

/// Everything a generated host or VM needs to know about where it lives.
struct Placement {
    vm_folder: Moref,
    datastores: Vec<Moref>,
    network: Moref,
}

fn host(inv: &mut Inventory, name: &str, parent: &Moref, place: &Placement) -> Moref {
    let value = value_for(inv, "host");
    let mut h = ManagedObject::new("HostSystem", &value);
    let m = h.moref.clone();
    h.set("name", name);
    h.set("parent", parent.clone());
    h.set("overallStatus", enum_val("ManagedEntityStatus", "green"));
    let runtime = Data::new("HostRuntimeInfo")
        .with(
            "connectionState",
            enum_val("HostSystemConnectionState", "connected"),
        )
        .with("powerState", enum_val("HostSystemPowerState", "poweredOn"))
        .with("inMaintenanceMode", false);
    let hardware = Data::new("HostHardwareSummary")
        .with("vendor", "VMware, Inc. (infrasim)")
        .with("model", "VMware Virtual Platform")
        .with("uuid", uuid_for(name, "host"))
        .with("memorySize", 4i64 * 1024 * 1024 * 1024)
        .with("cpuModel", "Intel(R) Xeon(R) CPU (simulated)")
        .with("cpuMhz", 2294)
        .with("numCpuPkgs", 2i32)
        .with("numCpuCores", 2i32)
        .with("numCpuThreads", 2i32)
        .with("numNics", 1i32)
        .with("numHBAs", 1i32);
    let summary = Data::new("HostListSummary")
        .with("host", m.clone())
        .with("hardware", hardware)
        .with("runtime", runtime.clone())
        .with(
            "config",
            Data::new("HostConfigSummary")
                .with("name", name)
                .with("port", 443i32)
                .with("vmotionEnabled", false)
                .with("faultToleranceEnabled", false),
        )
        .with("quickStats", Data::new("HostListSummaryQuickStats"))
        .with("overallStatus", enum_val("ManagedEntityStatus", "green"))
        .with("rebootRequired", false)
        .with("managementServerIp", "127.0.0.1");
    h.set("summary", summary);
    h.set("runtime", runtime);
    h.set("vm", mor_array([]));
    h.set("datastore", mor_array(place.datastores.iter().cloned()));
    h.set("network", mor_array([place.network.clone()]));
    inv.insert(h);
    link(inv, &place.network, "host", &m);
    m
}

fn resource_pool(inv: &mut Inventory, name: &str, parent: &Moref, owner: &Moref) -> Moref {
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

/// Where a VM is created: its host, resource pool, folder, datastore and network.
#[derive(Debug, Clone)]
pub struct VmPlacement {
    pub host: Moref,
    pub pool: Moref,
    pub folder: Moref,
    pub datastore: Moref,
    pub network: Moref,
}

/// Creates a powered-on VM named `name` at `at`.
/// The virtual hardware of a generated VM: a paravirtual SCSI controller, a disk on the
/// datastore and a VMXNET3 NIC on the network (the parts equal in every VM shared).
fn vm_hardware(
    inv: &mut Inventory,
    name: &str,
    at: &VmPlacement,
    ds_name: &str,
    net_name: &str,
) -> Data {
    let (datastore, network) = (&at.datastore, &at.network);
    let mac = {
        let u = uuid_for(name, "mac");
        format!("00:50:56:{}:{}:{}", &u[0..2], &u[2..4], &u[4..6])
    };
    let disk = Data::new("VirtualDisk")
        .with("key", 204i32)
        .with(
            "deviceInfo",
            inv.reuse(
                "disk.deviceInfo",
                Data::new("Description")
                    .with("label", "Hard disk 1")
                    .with("summary", "10,485,760 KB"),
            ),
        )
        .with(
            "backing",
            Data::new("VirtualDiskFlatVer2BackingInfo")
                .with("fileName", format!("[{ds_name}] {name}/{name}.vmdk"))
                .with("datastore", datastore.clone())
                .with("diskMode", "persistent")
                .with("thinProvisioned", true),
        )
        .with("controllerKey", 202i32)
        .with("unitNumber", 0i32)
        .with("capacityInKB", 10_485_760i64)
        .with("capacityInBytes", 10_737_418_240i64);
    let on = crate::devices::NicBacking::Network {
        network: Some(network),
        device_name: net_name,
    };
    let mut nic =
        crate::devices::ethernet_card("VirtualVmxnet3", crate::devices::FIRST_NIC_KEY, on, &mac);
    inv.reuse_field("nic.deviceInfo", &mut nic, "deviceInfo");
    inv.reuse_field("nic.backing", &mut nic, "backing");
    let controller = Data::new("ParaVirtualSCSIController")
        .with("key", 202i32)
        .with(
            "deviceInfo",
            Data::new("Description")
                .with("label", "SCSI controller 0")
                .with("summary", "VMware paravirtual SCSI"),
        )
        .with("controllerKey", 100i32)
        .with("unitNumber", 3i32)
        .with("busNumber", 0i32)
        .with("device", Val::Array("int", vec![Val::Int(204)]))
        .with(
            "sharedBus",
            Val::Enum("VirtualSCSISharing", "noSharing".into()),
        );
    Data::new("VirtualHardware")
        .with("numCPU", 1i32)
        .with("numCoresPerSocket", 1i32)
        .with("memoryMB", 32i32)
        .with("virtualICH7MPresent", false)
        .with("virtualSMCPresent", false)
        .with(
            "device",
            Val::Array(
                "VirtualDevice",
                vec![
                    inv.reuse("controller", controller),
                    Val::from(disk),
                    Val::from(nic),
                ],
            ),
        )
}

/// What tells one generated VM from another in its summary.
struct VmIds<'a> {
    vm: &'a Moref,
    name: &'a str,
    vmx: &'a str,
    uuid: &'a str,
    instance_uuid: &'a str,
}

/// A generated VM's summary (its runtime the very object of the VM's `runtime`).
fn vm_summary(inv: &mut Inventory, ids: &VmIds<'_>, runtime: &Val) -> Data {
    let VmIds {
        vm,
        name,
        vmx,
        uuid,
        instance_uuid,
    } = *ids;
    Data::new("VirtualMachineSummary")
        .with("vm", vm.clone())
        .with("runtime", runtime.clone())
        .with(
            "guest",
            inv.reuse(
                "summary.guest",
                Data::new("VirtualMachineGuestSummary")
                    .with(
                        "toolsStatus",
                        enum_val("VirtualMachineToolsStatus", "toolsNotInstalled"),
                    )
                    .with("toolsRunningStatus", "guestToolsNotRunning"),
            ),
        )
        .with(
            "config",
            Data::new("VirtualMachineConfigSummary")
                .with("name", name)
                .with("template", false)
                .with("vmPathName", vmx)
                .with("memorySizeMB", 32i32)
                .with("numCpu", 1i32)
                .with("numEthernetCards", 1i32)
                .with("numVirtualDisks", 1i32)
                .with("uuid", uuid)
                .with("instanceUuid", instance_uuid)
                .with("guestId", "otherGuest")
                .with("guestFullName", "Other (32-bit)"),
        )
        .with(
            "quickStats",
            inv.reuse("quickStats", Data::new("VirtualMachineQuickStats")),
        )
        .with("overallStatus", enum_val("ManagedEntityStatus", "green"))
}

pub fn create_vm(inv: &mut Inventory, name: &str, at: &VmPlacement, now: DateTime<Utc>) -> Moref {
    let VmPlacement {
        host,
        pool,
        folder,
        datastore,
        network,
    } = at;
    let value = inv.next_value("vm");
    let m = Moref::new("VirtualMachine", &value);
    let ds_name = inv
        .get(datastore)
        .map(|d| d.name().to_string())
        .unwrap_or_default();
    let net_name = inv
        .get(network)
        .map(|d| d.name().to_string())
        .unwrap_or_default();
    let uuid = uuid_for(name, "bios");
    let instance_uuid = uuid_for(name, "instance");
    let vmx = format!("[{ds_name}] {name}/{name}.vmx");
    let hardware = vm_hardware(inv, name, at, &ds_name, &net_name);
    let config = Data::new("VirtualMachineConfigInfo")
        .with("changeVersion", now.to_rfc3339())
        .with("modified", now)
        .with("name", name)
        .with("guestFullName", "Other (32-bit)")
        .with("version", "vmx-13")
        .with("uuid", uuid.as_str())
        .with("createDate", now)
        .with("instanceUuid", instance_uuid.as_str())
        .with("template", false)
        .with("cpuHotAddEnabled", false)
        .with("cpuHotRemoveEnabled", false)
        .with("memoryHotAddEnabled", false)
        .with("guestId", "otherGuest")
        .with("alternateGuestName", "")
        .with(
            "files",
            Data::new("VirtualMachineFileInfo").with("vmPathName", vmx.as_str()),
        )
        .with("hardware", hardware)
        .with("extraConfig", Val::Array("OptionValue", vec![]));
    let runtime = Data::new("VirtualMachineRuntimeInfo")
        .with("host", host.clone())
        .with(
            "connectionState",
            enum_val("VirtualMachineConnectionState", "connected"),
        )
        .with(
            "powerState",
            enum_val("VirtualMachinePowerState", "poweredOn"),
        )
        .with("bootTime", now)
        .with("maxCpuUsage", 2294i32)
        .with("maxMemoryUsage", 32i32);
    // One object for both (and for VMs of the same host and time): they change together.
    let runtime = inv.reuse("runtime", runtime);
    let guest = Data::new("GuestInfo")
        .with(
            "toolsStatus",
            enum_val("VirtualMachineToolsStatus", "toolsNotInstalled"),
        )
        .with("toolsRunningStatus", "guestToolsNotRunning")
        .with("guestState", "notRunning")
        .with("net", Val::Array("GuestNicInfo", vec![]));
    let guest = inv.reuse("guest", guest);
    let ids = VmIds {
        vm: &m,
        name,
        vmx: &vmx,
        uuid: &uuid,
        instance_uuid: &instance_uuid,
    };
    let summary = vm_summary(inv, &ids, &runtime);
    let mut vm = ManagedObject::new("VirtualMachine", &value);
    vm.set("name", name);
    vm.set("parent", folder.clone());
    vm.set("resourcePool", pool.clone());
    vm.set("runtime", runtime);
    vm.set("summary", summary);
    vm.set("config", config);
    vm.set("guest", guest);
    vm.set("datastore", mor_array([datastore.clone()]));
    vm.set("network", mor_array([network.clone()]));
    vm.set("overallStatus", enum_val("ManagedEntityStatus", "green"));
    inv.insert(vm);
    link(inv, folder, "childEntity", &m);
    link(inv, pool, "vm", &m);
    link(inv, host, "vm", &m);
    link(inv, datastore, "vm", &m);
    link(inv, network, "vm", &m);
    m
}

/// Builds the starting inventory of a model.
pub fn generate(model: &Model, now: DateTime<Utc>) -> Inventory {
    let mut inv = Inventory {
        esx: model.esx,
        ..Inventory::default()
    };
    let esx = model.esx;
    // An ESXi host's folders hold one type each.
    let kinds = |vcenter: &'static [&'static str]| if esx { &vcenter[1..2] } else { vcenter };
    let root = folder(
        &mut inv,
        "group-d",
        if esx { "ha-folder-root" } else { "Datacenters" },
        &Moref::new("Folder", ""),
        kinds(&["Folder", "Datacenter"]),
    );
    let datacenters = if model.esx { 1 } else { model.datacenters };
    let mut nfolder = 0;
    for d in 0..datacenters {
        // govmomi's Folder model: the last N datacenters sit in a folder F<n> under the root,
        // and what they hold goes into F<n> subfolders of their vm/host/datastore/network.
        let in_folder = !model.esx && nfolder < model.folders && d + model.folders >= datacenters;
        let parent = if in_folder {
            let f = folder(
                &mut inv,
                "group-d",
                &format!("F{nfolder}"),
                &root,
                &["Folder", "Datacenter"],
            );
            link(&mut inv, &root, "childEntity", &f);
            f
        } else {
            root.clone()
        };
        let dc_name = if model.esx {
            "ha-datacenter".to_string()
        } else {
            format!("DC{d}")
        };
        let dc_value = value_for(&mut inv, "datacenter");
        let dc = Moref::new("Datacenter", &dc_value);
        let vm_folder = folder(
            &mut inv,
            "group-v",
            "vm",
            &dc,
            kinds(&["Folder", "VirtualMachine", "VirtualApp"]),
        );
        let host_folder = folder(
            &mut inv,
            "group-h",
            "host",
            &dc,
            kinds(&["Folder", "ComputeResource"]),
        );
        let ds_folder = folder(
            &mut inv,
            "group-s",
            "datastore",
            &dc,
            kinds(&["Folder", "Datastore", "StoragePod"]),
        );
        let net_folder = folder(
            &mut inv,
            "group-n",
            "network",
            &dc,
            kinds(&["Folder", "Network", "DistributedVirtualSwitch"]),
        );
        let mut dco = ManagedObject::new("Datacenter", &dc_value);
        dco.set("name", dc_name.as_str());
        dco.set("parent", parent.clone());
        dco.set("vmFolder", vm_folder.clone());
        dco.set("hostFolder", host_folder.clone());
        dco.set("datastoreFolder", ds_folder.clone());
        dco.set("networkFolder", net_folder.clone());
        dco.set("datastore", mor_array([]));
        dco.set("network", mor_array([]));
        dco.set("overallStatus", enum_val("ManagedEntityStatus", "green"));
        inv.insert(dco);
        link(&mut inv, &parent, "childEntity", &dc);
        let (vm_folder, host_folder, ds_folder, net_folder) = if in_folder {
            let name = format!("F{nfolder}");
            nfolder += 1;
            let sub = |inv: &mut Inventory, prefix: &str, parent: &Moref| {
                let child_type = inv
                    .get(parent)
                    .and_then(|p| p.props.get("childType"))
                    .cloned();
                let f = folder(inv, prefix, &name, parent, &[]);
                if let (Some(ct), Some(o)) = (child_type, inv.get_mut(&f)) {
                    o.set("childType", ct);
                }
                link(inv, parent, "childEntity", &f);
                f
            };
            (
                sub(&mut inv, "group-v", &vm_folder),
                sub(&mut inv, "group-h", &host_folder),
                sub(&mut inv, "group-s", &ds_folder),
                sub(&mut inv, "group-n", &net_folder),
            )
        } else {
            (vm_folder, host_folder, ds_folder, net_folder)
        };

        // Storage and networks first: hosts and VMs refer to them.
        let mut datastores = Vec::new();
        for s in 0..model.datastores.max(1) {
            // ESXi names its local datastores datastore1, datastore2, … by their VMFS UUIDs.
            let (value, name, volume) = if esx {
                let name = format!("datastore{}", s + 1);
                let volume = vmfs_uuid(&name);
                (volume.clone(), name, volume)
            } else {
                let name = format!("LocalDS_{s}");
                let volume = uuid_for(&format!("{dc_name}/{name}"), "ds");
                (inv.next_value("datastore"), name, volume)
            };
            let mut ds = ManagedObject::new("Datastore", &value);
            let m = ds.moref.clone();
            let url = format!("ds:///vmfs/volumes/{volume}/");
            ds.set("name", name.as_str());
            ds.set("parent", ds_folder.clone());
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
            link(&mut inv, &ds_folder, "childEntity", &m);
            link(&mut inv, &dc, "datastore", &m);
            datastores.push(m);
        }
        let net_value = value_for(&mut inv, "network");
        let mut net = ManagedObject::new("Network", &net_value);
        let network = net.moref.clone();
        net.set("name", "VM Network");
        net.set("parent", net_folder.clone());
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
        link(&mut inv, &net_folder, "childEntity", &network);
        link(&mut inv, &dc, "network", &network);
        if !model.esx && model.portgroups > 0 {
            let dvs_value = inv.next_value("dvs");
            let mut dvs = ManagedObject::new("VmwareDistributedVirtualSwitch", &dvs_value);
            let dvs_ref = dvs.moref.clone();
            dvs.set("name", format!("{dc_name}_DVS"));
            dvs.set("parent", net_folder.clone());
            dvs.set("uuid", uuid_for(&format!("{dc_name}_DVS"), "dvs"));
            dvs.set("portgroup", mor_array([]));
            inv.insert(dvs);
            link(&mut inv, &net_folder, "childEntity", &dvs_ref);
            for p in 0..model.portgroups {
                let value = inv.next_value("dvportgroup");
                let name = format!("{dc_name}_DVPG{p}");
                let mut pg = ManagedObject::new("DistributedVirtualPortgroup", &value);
                let m = pg.moref.clone();
                pg.set("name", name.as_str());
                pg.set("parent", net_folder.clone());
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
                        .with("distributedVirtualSwitch", dvs_ref.clone())
                        .with("type", "earlyBinding"),
                );
                pg.set("host", mor_array([]));
                pg.set("vm", mor_array([]));
                inv.insert(pg);
                link(&mut inv, &net_folder, "childEntity", &m);
                link(&mut inv, &dc, "network", &m);
                link(&mut inv, &dvs_ref, "portgroup", &m);
            }
        }
        let place = Placement {
            vm_folder: vm_folder.clone(),
            datastores: datastores.clone(),
            network: network.clone(),
        };

        // Standalone hosts: a ComputeResource holding one host and a root pool.
        let standalone = if model.esx { 1 } else { model.standalone_hosts };
        for h in 0..standalone {
            let name = if model.esx {
                "localhost.localdomain".to_string()
            } else {
                format!("{dc_name}_H{h}")
            };
            let cr_value = value_for(&mut inv, "domain-s");
            let cr = Moref::new("ComputeResource", &cr_value);
            let host_ref = host(&mut inv, &name, &cr, &place);
            if esx {
                esx_host_extras(&mut inv, &host_ref);
            }
            let pool = resource_pool(&mut inv, "Resources", &cr, &cr);
            let mut cro = ManagedObject::new("ComputeResource", &cr_value);
            cro.set("name", name.as_str());
            cro.set("parent", host_folder.clone());
            cro.set("host", mor_array([host_ref.clone()]));
            cro.set("resourcePool", pool.clone());
            cro.set("datastore", mor_array(datastores.iter().cloned()));
            cro.set("network", mor_array([network.clone()]));
            cro.set("overallStatus", enum_val("ManagedEntityStatus", "green"));
            inv.insert(cro);
            link(&mut inv, &host_folder, "childEntity", &cr);
            for v in 0..model.vms {
                let vm_name = format!("{name}_VM{v}");
                create_vm(
                    &mut inv,
                    &vm_name,
                    &VmPlacement {
                        host: host_ref.clone(),
                        pool: pool.clone(),
                        folder: place.vm_folder.clone(),
                        datastore: datastores[0].clone(),
                        network: network.clone(),
                    },
                    now,
                );
            }
        }
        if model.esx {
            continue;
        }
        for c in 0..model.clusters {
            let name = format!("{dc_name}_C{c}");
            let cl_value = inv.next_value("domain-c");
            let cl = Moref::new("ClusterComputeResource", &cl_value);
            let mut hosts = Vec::new();
            for h in 0..model.hosts_per_cluster {
                hosts.push(host(&mut inv, &format!("{name}_H{h}"), &cl, &place));
            }
            let root_pool = resource_pool(&mut inv, "Resources", &cl, &cl);
            let mut clo = ManagedObject::new("ClusterComputeResource", &cl_value);
            clo.set("name", name.as_str());
            clo.set("parent", host_folder.clone());
            clo.set("host", mor_array(hosts.iter().cloned()));
            clo.set("resourcePool", root_pool.clone());
            clo.set("datastore", mor_array(datastores.iter().cloned()));
            clo.set("network", mor_array([network.clone()]));
            clo.set("overallStatus", enum_val("ManagedEntityStatus", "green"));
            clo.set(
                "summary",
                Data::new("ClusterComputeResourceSummary")
                    .with("totalCpu", 2294 * 2 * hosts.len() as i32)
                    .with(
                        "totalMemory",
                        4i64 * 1024 * 1024 * 1024 * hosts.len() as i64,
                    )
                    .with("numCpuCores", 2 * hosts.len() as i16 as i32)
                    .with("numCpuThreads", 2 * hosts.len() as i32)
                    .with("effectiveCpu", 2294 * 2 * hosts.len() as i32)
                    .with("effectiveMemory", 4096i64 * hosts.len() as i64)
                    .with("numHosts", hosts.len() as i32)
                    .with("numEffectiveHosts", hosts.len() as i32)
                    .with("overallStatus", enum_val("ManagedEntityStatus", "green")),
            );
            inv.insert(clo);
            link(&mut inv, &host_folder, "childEntity", &cl);
            let mut pools = vec![root_pool.clone()];
            for p in 1..=model.pools {
                let child = resource_pool(&mut inv, &format!("{name}_RP{p}"), &root_pool, &cl);
                link(&mut inv, &root_pool, "resourcePool", &child);
                pools.push(child);
            }
            let mut turn = 0;
            for (p, pool) in pools.iter().enumerate() {
                for v in 0..model.vms {
                    let host_ref = hosts.get(turn % hosts.len().max(1)).cloned();
                    turn += 1;
                    if let Some(host_ref) = host_ref {
                        let vm_name = format!("{name}_RP{p}_VM{v}");
                        create_vm(
                            &mut inv,
                            &vm_name,
                            &VmPlacement {
                                host: host_ref.clone(),
                                pool: pool.clone(),
                                folder: place.vm_folder.clone(),
                                datastore: datastores[0].clone(),
                                network: network.clone(),
                            },
                            now,
                        );
                    }
                }
            }
        }
    }
    inv.compact();
    inv
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
        // Pinned from the generator before it was split into a file per type: a change to
        // any reference, property, value or their order changes these.
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
                (23, 14839113205443357935),
                (152, 694303629394480365),
                (27, 295445830526724636),
                (16, 15748469598885721756)
            ]
        );
        let inv = generate(&Model::default(), now);
        let vm = inv.iter().find(|o| o.name() == "DC0_C0_RP0_VM1").unwrap();
        assert_eq!(vm.moref.value, "vm-21");
    }

    #[test]
    fn types_follow_the_vim_hierarchy() {
        assert!(is_a("ClusterComputeResource", "ManagedEntity"));
        assert!(is_a("DistributedVirtualPortgroup", "Network"));
        assert!(!is_a("Datastore", "Network"));
    }
}
