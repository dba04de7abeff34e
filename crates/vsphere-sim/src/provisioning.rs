//! Library calls that set a fresh simulator up the way a test environment wants it before
//! any client connects: VM templates and tags on inventory objects. CAPV's vcsim controller
//! does this with govc commands against its simulator; here the controller calls these, and
//! each goes through the code of the operation it stands for (`CreateVM_Task` and
//! `MarkAsTemplate`, the tagging service's create and attach), so what a client sees
//! afterwards is what it would see had it made the calls itself.

use crate::objects::is_a;
use crate::simulator::Simulator;
use crate::soap::Element;
use crate::value::{Moref, Val};

/// A VM template to create: what `govc vm.create -ds -cluster -net -on=false` then
/// `govc vm.markastemplate` make.
#[derive(Debug, Clone)]
pub struct TemplateSpec {
    /// The template's name, unique in its datacenter's VM folder.
    pub name: String,
    /// The datacenter (`DC0`): the template goes into its VM folder.
    pub datacenter: String,
    /// The cluster (`DC0_C0`) whose root resource pool and hosts it is placed on.
    pub cluster: String,
    /// The datastore (`LocalDS_0`) holding its files.
    pub datastore: String,
    pub num_cpus: u32,
    pub memory_mb: u32,
    /// The guest OS identifier (`ubuntu64Guest`).
    pub guest_id: String,
    /// A folder of the datacenter's VM folder to put it in (made if missing), as
    /// vm-operator keeps each namespace's VMs in a folder named after the namespace; the VM
    /// folder itself when `None`.
    pub folder: Option<String>,
}

impl TemplateSpec {
    /// A template as CAPV's vcsim controller makes them: 2 CPUs, 4 GiB, an Ubuntu guest, on
    /// the first cluster and datastore of `datacenter` (`DC0`).
    pub fn new(name: &str, datacenter: &str) -> Self {
        TemplateSpec {
            name: name.to_string(),
            datacenter: datacenter.to_string(),
            cluster: format!("{datacenter}_C0"),
            datastore: "LocalDS_0".to_string(),
            num_cpus: 2,
            memory_mb: 4096,
            guest_id: "ubuntu64Guest".to_string(),
            folder: None,
        }
    }

    /// The same, in the folder `folder` of the datacenter's VM folder.
    pub fn in_folder(mut self, folder: &str) -> Self {
        self.folder = Some(folder.to_string());
        self
    }
}

/// A tag to attach, with the category it belongs to (both made when missing).
#[derive(Debug, Clone)]
pub struct TagSpec {
    pub category: String,
    /// The managed object types the category's tags may be attached to (any when empty).
    pub associable_types: Vec<String>,
    pub tag: String,
}

/// An item of a local content library, with its files (made with the library if missing).
#[derive(Debug, Clone)]
pub struct LibraryItemSpec {
    pub library: String,
    /// The datastore backing the library, by inventory path (`/DC0/datastore/LocalDS_0`).
    pub datastore: String,
    pub item: String,
    /// `ovf`, `iso`, ...
    pub item_type: String,
    pub files: Vec<(String, bytes::Bytes)>,
}

/// A minimal OVF descriptor of a VM named `name` with `cpus` CPUs and `memory_mb` MiB: what a
/// library item needs to deploy as a VM of that size.
pub fn sample_ovf(name: &str, cpus: u32, memory_mb: u32) -> String {
    format!(
        r#"<?xml version="1.0" encoding="UTF-8"?>
<Envelope xmlns="http://schemas.dmtf.org/ovf/envelope/1" xmlns:ovf="http://schemas.dmtf.org/ovf/envelope/1" xmlns:rasd="http://schemas.dmtf.org/wbem/wscim/1/cim-schema/2/CIM_ResourceAllocationSettingData">
  <VirtualSystem ovf:id="{name}">
    <Name>{name}</Name>
    <VirtualHardwareSection>
      <Item><rasd:ResourceType>3</rasd:ResourceType><rasd:VirtualQuantity>{cpus}</rasd:VirtualQuantity></Item>
      <Item><rasd:AllocationUnits>byte * 2^20</rasd:AllocationUnits><rasd:ResourceType>4</rasd:ResourceType><rasd:VirtualQuantity>{memory_mb}</rasd:VirtualQuantity></Item>
    </VirtualHardwareSection>
  </VirtualSystem>
</Envelope>
"#
    )
}

/// What a controller watching a VM needs of it.
#[derive(Debug, Clone, PartialEq)]
pub struct VmState {
    pub moref: Moref,
    pub name: String,
    /// `config.uuid` and `config.instanceUuid`.
    pub bios_uuid: String,
    pub instance_uuid: String,
    pub powered_on: bool,
    /// `guest.ipAddress`, once the guest reports one.
    pub ip: Option<String>,
}

/// Why a provisioning call failed.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ProvisioningError {
    #[error("no inventory object at {0}")]
    NotFound(String),
    #[error("{0}")]
    Refused(String),
}

impl Simulator {
    /// The object at an inventory path (`/DC0/host/DC0_C0`), as `FindByInventoryPath`
    /// resolves it.
    pub fn find_by_path(&self, path: &str) -> Option<Moref> {
        self.with_inventory(|inv| {
            let mut cur = crate::objects::refs::root_folder(inv.esx());
            for part in path.split('/').filter(|p| !p.is_empty()) {
                cur = inv.child_named(&cur, part)?;
            }
            Some(cur)
        })
    }

    /// The inventory path of `m` (`/DC0/host/DC0_C0`), from the root folder by names.
    pub fn inventory_path(&self, m: &Moref) -> Option<String> {
        self.with_inventory(|inv| {
            let mut names = Vec::new();
            let mut cur = inv.get(m)?;
            while let Some(parent) = cur.props.get("parent").and_then(Val::as_mor) {
                names.push(cur.name().to_string());
                cur = inv.get(parent)?;
            }
            names.reverse();
            Some(format!("/{}", names.join("/")))
        })
    }

    /// The entity of type `ty` named `name`, inside the datacenter `within` when given (names
    /// are unique per folder, not per inventory).
    pub fn find_named(&self, ty: &str, name: &str, within: Option<&Moref>) -> Option<Moref> {
        self.with_inventory(|inv| {
            inv.iter()
                .filter(|o| o.moref.ty == ty && o.name() == name)
                .find(|o| {
                    within.is_none_or(|dc| {
                        inv.datacenter_of(&o.moref).is_some_and(|d| d.moref == *dc)
                    })
                })
                .map(|o| o.moref.clone())
        })
    }

    /// The VM whose BIOS UUID (`config.uuid`) is `uuid`, as `FindByUuid` finds it now (what
    /// the timeline has due done first).
    pub fn vm_by_bios_uuid(&self, uuid: &str) -> Option<VmState> {
        self.with_current_inventory(|inv| {
            // Compared in place: a copy of every VM's UUID per lookup was most of its cost.
            let vm = inv.iter().find(|o| {
                o.moref.ty == "VirtualMachine"
                    && matches!(o.path("config.uuid"), Some(Val::Str(u)) if u.eq_ignore_ascii_case(uuid))
            })?;
            Some(vm_state(vm))
        })
    }

    /// The VM `vm` as it is now (what the timeline has due done first), if it exists.
    pub fn vm(&self, vm: &Moref) -> Option<VmState> {
        self.with_current_inventory(|inv| {
            inv.get(vm)
                .filter(|o| o.moref.ty == "VirtualMachine")
                .map(vm_state)
        })
    }

    /// Creates the template `spec` describes, powered off and marked as a template; a VM of
    /// that name already in the folder is left as it is and returned (creating it twice is
    /// what a controller that restarts midway does).
    pub fn create_template(&self, spec: &TemplateSpec) -> Result<Moref, ProvisioningError> {
        self.create_vm_of(spec, true)
    }

    /// Deploys the OVF library item `item_id` as a VM named `name` (its size from the OVF),
    /// powered off, in the VM folder of `spec.datacenter` and the root pool of `spec.cluster`,
    /// as the OVF deployment service does; a VM of that name there is returned as it is.
    pub fn deploy_library_item(
        &self,
        item_id: &str,
        spec: &TemplateSpec,
    ) -> Result<Moref, ProvisioningError> {
        let (cpus, memory_mb) = self
            .rest_content_library()
            .ovf_size(item_id)
            .ok_or_else(|| ProvisioningError::NotFound(format!("library item {item_id}")))?;
        let mut spec = spec.clone();
        spec.num_cpus = cpus.map_or(spec.num_cpus, |n| n as u32);
        spec.memory_mb = memory_mb.map_or(spec.memory_mb, |n| n as u32);
        self.create_vm_of(&spec, false)
    }

    /// Powers `vm` on as PowerOnVM_Task does (its guest comes up after the boot delay); a VM
    /// already on is left as it is.
    pub fn power_on(&self, vm: &Moref) -> Result<(), ProvisioningError> {
        self.with_state(|state, call| {
            if crate::virtual_machine::power_state(state, vm) == "poweredOn" {
                return Ok(());
            }
            crate::virtual_machine::run(
                state,
                call,
                crate::state::timeline::VmOp::PowerOn(vm.clone()),
            )
            .map(|_| ())
            .map_err(|f| ProvisioningError::Refused(f.message))
        })
    }

    /// Powers `vm` off if it is on and destroys it, as PowerOffVM_Task and Destroy_Task do
    /// (vCenter refuses to destroy a running VM); a VM already gone is not an error.
    pub fn destroy_vm(&self, vm: &Moref) -> Result<(), ProvisioningError> {
        use crate::state::timeline::VmOp;
        use crate::virtual_machine::{power_state, run};
        self.with_state(|state, call| {
            if state.inventory.get(vm).is_none() {
                return Ok(());
            }
            if power_state(state, vm) == "poweredOn" {
                run(state, call, VmOp::PowerOff(vm.clone()))
                    .map_err(|f| ProvisioningError::Refused(f.message))?;
            }
            crate::managed_entity::destroy(state, call, vm)
                .map(|_| ())
                .map_err(|f| ProvisioningError::Refused(f.message))
        })
    }

    /// A VM of `spec` (a template when `template`), made by CreateVM_Task's code.
    fn create_vm_of(
        &self,
        spec: &TemplateSpec,
        template: bool,
    ) -> Result<Moref, ProvisioningError> {
        let missing = |what: &str| ProvisioningError::NotFound(what.to_string());
        let dc = self
            .find_named("Datacenter", &spec.datacenter, None)
            .ok_or_else(|| missing(&spec.datacenter))?;
        let cluster = self
            .find_named("ClusterComputeResource", &spec.cluster, Some(&dc))
            .ok_or_else(|| missing(&spec.cluster))?;
        self.with_state(|state, call| {
            let prop = |m: &Moref, name: &str| {
                state
                    .inventory
                    .get(m)
                    .and_then(|o| o.props.get(name))
                    .and_then(Val::as_mor)
                    .cloned()
            };
            let mut folder = prop(&dc, "vmFolder").ok_or_else(|| missing("vmFolder"))?;
            let pool = prop(&cluster, "resourcePool")
                .filter(|p| is_a(&p.ty, "ResourcePool"))
                .ok_or_else(|| missing("resourcePool"))?;
            if let Some(sub) = &spec.folder {
                folder = crate::folder::ensure_folder(state, &folder, sub)
                    .map_err(|f| ProvisioningError::Refused(f.message))?;
            }
            if let Some(vm) = state.inventory.child_named(&folder, &spec.name) {
                return Ok(vm);
            }
            let config = config_spec(spec);
            let vm = match crate::folder::create_vm(state, call, &folder, &config, &pool, None) {
                Ok(Some(Val::Mor(vm))) => vm,
                Ok(_) => return Err(ProvisioningError::Refused("no VM was created".into())),
                Err(fault) => return Err(ProvisioningError::Refused(fault.message)),
            };
            if template {
                crate::virtual_machine::set_template(state, &vm, true);
            }
            Ok(vm)
        })
    }

    /// The ID of the storage policy named `name` (what PBM's `ProfileIDByName` answers).
    pub fn storage_policy_id(&self, name: &str) -> Option<String> {
        crate::pbm::id_by_name(name).map(str::to_string)
    }

    /// Adds the library item `spec` describes (see [`LibraryItemSpec`]); its ID.
    pub fn add_library_item(&self, spec: &LibraryItemSpec) -> Result<String, ProvisioningError> {
        let datastore = self
            .find_by_path(&spec.datastore)
            .filter(|d| d.ty == "Datastore")
            .ok_or_else(|| ProvisioningError::NotFound(spec.datastore.clone()))?;
        let now = self.now();
        let mut library = self.rest_content_library();
        let id = library.ensure_item(
            &spec.library,
            &datastore.value,
            &spec.item,
            &spec.item_type,
            &spec.files,
            now,
        );
        if let Some(keeper) = self.keeper() {
            keeper.put_record(crate::persist::CONTENT_LIBRARY, &*library);
        }
        Ok(id)
    }

    /// Attaches `spec`'s tag to `object`, creating its category (single cardinality, as
    /// `govc tags.category.create` does by default) and the tag if missing. Attaching a tag
    /// an object already carries changes nothing.
    pub fn attach_tag(&self, spec: &TagSpec, object: &Moref) -> Result<(), ProvisioningError> {
        if self.with_inventory(|inv| inv.get(object).is_none()) {
            return Err(ProvisioningError::NotFound(object.value.clone()));
        }
        let mut tagging = self.rest_tagging();
        tagging
            .ensure_attached(&spec.category, &spec.associable_types, &spec.tag, object)
            .map_err(ProvisioningError::Refused)?;
        if let Some(keeper) = self.keeper() {
            keeper.put_record(crate::persist::TAGGING, &*tagging);
        }
        Ok(())
    }
}

/// A string or enum property's text.
fn text(o: &crate::objects::ManagedObject, path: &str) -> Option<String> {
    match o.path(path) {
        Some(Val::Str(s)) => Some(s.clone()),
        Some(Val::Enum(_, s)) => Some(s.to_string()),
        _ => None,
    }
}

fn vm_state(vm: &crate::objects::ManagedObject) -> VmState {
    VmState {
        moref: vm.moref.clone(),
        name: vm.name().to_string(),
        bios_uuid: text(vm, "config.uuid").unwrap_or_default(),
        instance_uuid: text(vm, "config.instanceUuid").unwrap_or_default(),
        powered_on: text(vm, "runtime.powerState").as_deref() == Some("poweredOn"),
        ip: text(vm, "guest.ipAddress").filter(|ip| !ip.is_empty()),
    }
}

/// The VirtualMachineConfigSpec of a template, as `CreateVM_Task` reads it.
fn config_spec(spec: &TemplateSpec) -> Element {
    let field = |name: &str, text: String| Element {
        name: name.to_string(),
        text,
        ..Default::default()
    };
    let files = Element {
        name: "files".to_string(),
        children: vec![field("vmPathName", format!("[{}]", spec.datastore))],
        ..Default::default()
    };
    Element {
        name: "config".to_string(),
        children: vec![
            field("name", spec.name.clone()),
            field("guestId", spec.guest_id.clone()),
            field("numCPUs", spec.num_cpus.to_string()),
            field("memoryMB", spec.memory_mb.to_string()),
            files,
        ],
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SimConfig;
    use infrasim_clock::FakeClock;
    use std::sync::Arc;

    fn sim() -> Simulator {
        Simulator::new(
            SimConfig::default(),
            Arc::new(FakeClock::new("2030-01-01T00:00:00Z".parse().unwrap())),
        )
    }

    fn prop(sim: &Simulator, vm: &Moref, path: &str) -> Option<Val> {
        sim.with_inventory(|inv| inv.get(vm).and_then(|o| o.path(path)).cloned())
    }

    #[test]
    fn a_template_is_created_powered_off_and_marked_once() {
        let sim = sim();
        let spec = TemplateSpec::new("ubuntu-2204-kube-v1.33.0", "DC0");
        let vm = sim.create_template(&spec).unwrap();
        assert_eq!(
            sim.find_by_path("/DC0/vm/ubuntu-2204-kube-v1.33.0"),
            Some(vm.clone())
        );
        assert!(matches!(
            prop(&sim, &vm, "config.template"),
            Some(Val::Bool(true))
        ));
        assert!(matches!(
            prop(&sim, &vm, "config.hardware.numCPU"),
            Some(Val::Int(2))
        ));
        assert!(matches!(
            prop(&sim, &vm, "config.hardware.memoryMB"),
            Some(Val::Int(4096))
        ));
        assert!(
            matches!(prop(&sim, &vm, "runtime.powerState"), Some(Val::Enum(_, s)) if s == "poweredOff")
        );
        // Again: the same VM, not a second one.
        assert_eq!(sim.create_template(&spec).unwrap(), vm);
        let Some(Val::Str(uuid)) = prop(&sim, &vm, "config.uuid") else {
            panic!("no config.uuid");
        };
        let state = sim.vm_by_bios_uuid(&uuid.to_uppercase()).unwrap();
        assert_eq!(state.moref, vm);
        assert!(!state.powered_on && state.ip.is_none());
        assert_eq!(sim.vm_by_bios_uuid("no-such-uuid"), None);
    }

    /// A controller in this process waits on a VM through `changes` and `next_change_of`:
    /// the guest coming up is a deadline on the simulator's clock, and the read at that time
    /// makes it happen and is heard as a change.
    #[tokio::test]
    async fn a_vms_next_change_is_a_deadline_and_is_heard_when_it_happens() {
        let clock = FakeClock::new("2030-01-01T00:00:00Z".parse().unwrap());
        let sim = Simulator::new(SimConfig::default(), Arc::new(clock.clone()));
        let vm = sim
            .create_vm_of(&TemplateSpec::new("vm-a", "DC0"), false)
            .unwrap();
        assert_eq!(sim.next_change_of(&vm), None, "nothing is scheduled yet");
        let mut changes = sim.changes();
        let heard = |changes: &mut crate::simulator::Changes| {
            futures::FutureExt::now_or_never(changes.next()) == Some(true)
        };
        assert!(!heard(&mut changes), "nothing changed since subscribing");
        sim.power_on(&vm).unwrap();
        assert!(heard(&mut changes), "the power-on is a change");
        let guest_up = sim.now() + chrono::Duration::from_std(sim.config().guest_delay).unwrap();
        assert_eq!(sim.next_change_of(&vm), Some(guest_up));
        // Reads before the deadline change nothing and wake nobody.
        assert!(sim.vm(&vm).is_some_and(|s| s.powered_on));
        assert!(!heard(&mut changes));
        clock.advance(sim.config().guest_delay);
        assert!(
            !heard(&mut changes),
            "due, but not done until someone looks"
        );
        sim.vm(&vm).unwrap();
        assert!(heard(&mut changes), "the read brought the guest up");
        assert_eq!(sim.next_change_of(&vm), None);
        let guest_state = prop(&sim, &vm, "guest.guestState");
        assert!(matches!(guest_state, Some(Val::Str(s)) if s == "running"));
    }

    #[tokio::test]
    async fn a_subscription_ends_with_its_simulator() {
        let sim = sim();
        let mut changes = sim.changes();
        drop(sim);
        assert!(!changes.next().await, "no simulator, no changes");
    }

    #[test]
    fn library_items_are_made_once_with_their_files() {
        let sim = sim();
        let ovf = sample_ovf("ubuntu-2204-kube-v1.33.0", 2, 4096);
        let spec = LibraryItemSpec {
            library: "vcsim".into(),
            datastore: "/DC0/datastore/LocalDS_0".into(),
            item: "ubuntu-2204-kube-v1.33.0".into(),
            item_type: "ovf".into(),
            files: vec![("ubuntu-2204-kube-v1.33.0.ovf".into(), ovf.into())],
        };
        assert_eq!(
            sim.storage_policy_id("vSAN Default Storage Policy")
                .as_deref(),
            Some("aa6d5a82-1c88-45da-85d3-3d74b91a5bad")
        );
        assert_eq!(sim.storage_policy_id("no such policy"), None);
        let id = sim.add_library_item(&spec).unwrap();
        assert_eq!(sim.add_library_item(&spec).unwrap(), id);
        let (name, file) = sim.rest_content_library().ovf_of(&id).unwrap();
        assert_eq!(name, "ubuntu-2204-kube-v1.33.0");
        assert!(file.is_some_and(|f| f.starts_with(b"<?xml")));
        let mut elsewhere = spec.clone();
        elsewhere.datastore = "/DC0/datastore/nope".into();
        assert_eq!(
            sim.add_library_item(&elsewhere),
            Err(ProvisioningError::NotFound("/DC0/datastore/nope".into()))
        );
    }

    /// The library item `img` on DC0's first datastore: an OVF of `cpus` CPUs and
    /// `memory_mb` of memory; its ID.
    fn img_item(sim: &Simulator, cpus: u32, memory_mb: u32) -> String {
        let spec = LibraryItemSpec {
            library: "vcsim".into(),
            datastore: "/DC0/datastore/LocalDS_0".into(),
            item: "img".into(),
            item_type: "ovf".into(),
            files: vec![("img.ovf".into(), sample_ovf("img", cpus, memory_mb).into())],
        };
        sim.add_library_item(&spec).unwrap()
    }

    #[test]
    fn a_library_item_deploys_powers_on_and_is_destroyed() {
        let sim = sim();
        let item = img_item(&sim, 4, 8192);
        let vm = sim
            .deploy_library_item(&item, &TemplateSpec::new("vm-a", "DC0"))
            .unwrap();
        assert!(matches!(
            prop(&sim, &vm, "config.hardware.numCPU"),
            Some(Val::Int(4))
        ));
        assert!(matches!(
            prop(&sim, &vm, "config.hardware.memoryMB"),
            Some(Val::Int(8192))
        ));
        assert!(matches!(
            prop(&sim, &vm, "config.template"),
            Some(Val::Bool(false))
        ));
        sim.power_on(&vm).unwrap();
        sim.power_on(&vm).unwrap();
        let Some(Val::Str(uuid)) = prop(&sim, &vm, "config.uuid") else {
            panic!("no config.uuid");
        };
        assert!(sim.vm_by_bios_uuid(&uuid).unwrap().powered_on);
        sim.destroy_vm(&vm).unwrap();
        assert_eq!(sim.vm_by_bios_uuid(&uuid), None);
        sim.destroy_vm(&vm).unwrap();
        assert!(sim
            .deploy_library_item("no-such-item", &TemplateSpec::new("vm-b", "DC0"))
            .is_err());
    }

    #[test]
    fn vms_of_one_name_in_two_folders_are_two_vms() {
        let sim = sim();
        let item = img_item(&sim, 2, 2048);
        let deploy = |folder: &str| {
            sim.deploy_library_item(&item, &TemplateSpec::new("web", "DC0").in_folder(folder))
                .unwrap()
        };
        let (a, b) = (deploy("team-a"), deploy("team-b"));
        assert_ne!(a, b, "one name, two namespaces' folders: two VMs");
        assert_eq!(deploy("team-a"), a, "made once per folder");
        assert_eq!(
            sim.with_inventory(|inv| inv.path_of(&a)),
            "/DC0/vm/team-a/web"
        );
        assert_eq!(
            sim.with_inventory(|inv| inv.path_of(&b)),
            "/DC0/vm/team-b/web"
        );
    }

    #[test]
    fn a_template_in_a_missing_cluster_is_refused() {
        let mut spec = TemplateSpec::new("t", "DC0");
        spec.cluster = "DC0_C9".into();
        assert_eq!(
            sim().create_template(&spec),
            Err(ProvisioningError::NotFound("DC0_C9".into()))
        );
    }

    #[test]
    fn tags_are_attached_by_path_and_respect_associable_types() {
        let sim = sim();
        let region = TagSpec {
            category: "k8s-region".into(),
            associable_types: vec!["Datacenter".into()],
            tag: "DC0".into(),
        };
        let dc = sim.find_by_path("/DC0").unwrap();
        let cluster = sim
            .find_named("ClusterComputeResource", "DC0_C0", Some(&dc))
            .unwrap();
        assert_eq!(
            sim.inventory_path(&cluster).as_deref(),
            Some("/DC0/host/DC0_C0")
        );
        sim.attach_tag(&region, &dc).unwrap();
        sim.attach_tag(&region, &dc).unwrap();
        assert!(matches!(
            sim.attach_tag(&region, &cluster),
            Err(ProvisioningError::Refused(_))
        ));
        let gone = Moref::new("Datacenter", "datacenter-99");
        assert_eq!(
            sim.attach_tag(&region, &gone),
            Err(ProvisioningError::NotFound("datacenter-99".into()))
        );
    }
}
