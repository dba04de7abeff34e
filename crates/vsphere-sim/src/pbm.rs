//! The storage policy service (PBM), SOAP in the `urn:pbm` namespace at `/pbm/sdk` (and at
//! `/pbm`, where the govmomi Debian packages posts): the policies CAPV looks a VM's storage
//! policy up in (`ProfileIDByName`: PbmQueryProfile then PbmRetrieveContent) and the
//! placement check it runs before cloning (PbmCheckRequirements), and the policy of each VM
//! (PbmQueryAssociatedProfile) as its clone, create or reconfigure spec set it. Calls need a
//! live SOAP session, as vCenter's PBM shares vCenter's sessions.
//!
//! The policies are vCenter 8's system-created ones, with their well-known IDs, so the names
//! CAPV users write in manifests ("vSAN Default Storage Policy") resolve.

use crate::fault::Fault;
use crate::soap::{Element, Request};
use crate::value::{write_element, Data, Moref, Val};
use chrono::{DateTime, Utc};
use std::collections::{BTreeMap, HashMap};

/// The storage policies associated with each VM's home, as the vim25 side set them: a
/// `VirtualMachineDefinedProfileSpec` in a clone's `location.profile` or a config spec's
/// `vmProfile` (CreateVM, ReconfigVM, a clone's `config`) associates its policy, a
/// `VirtualMachineEmptyProfileSpec` clears them. PbmQueryAssociatedProfile reads them.
#[derive(Debug, Default)]
pub(crate) struct Associations {
    by_vm: HashMap<String, Vec<String>>,
    /// A disk's policies, by PBM's `virtualDiskId` key (`vm-17:2000`: the VM and the disk's
    /// device key), as a clone's `location.disk[].profile` or a device change's `profile` set
    /// them.
    /// Ordered, so a VM's disks are one range of keys.
    by_disk: BTreeMap<String, Vec<String>>,
}

impl Associations {
    /// Applies profile specs (the `profile` or `vmProfile` elements of a request) to `vm`.
    pub(crate) fn apply<'a>(&mut self, vm: &Moref, specs: impl Iterator<Item = &'a Element>) {
        apply_to(self.by_vm.entry(vm.value.clone()).or_default(), specs);
        self.by_vm.retain(|_, ids| !ids.is_empty());
    }

    /// Applies profile specs to the disk `disk` (its device key) of `vm`.
    pub(crate) fn apply_disk<'a>(
        &mut self,
        vm: &Moref,
        disk: &str,
        specs: impl Iterator<Item = &'a Element>,
    ) {
        let key = format!("{}:{}", vm.value, disk.trim());
        apply_to(self.by_disk.entry(key).or_default(), specs);
        self.by_disk.retain(|_, ids| !ids.is_empty());
    }

    /// The policies of a disk, by its `virtualDiskId` key.
    pub(crate) fn of_disk(&self, key: &str) -> &[String] {
        self.by_disk.get(key).map_or(&[], Vec::as_slice)
    }

    /// The policies associated with a VM (by reference value).
    pub(crate) fn of(&self, vm: &str) -> &[String] {
        self.by_vm.get(vm).map_or(&[], Vec::as_slice)
    }

    /// A VM's policies and its disks' (by device key), as `persist` keeps them.
    pub(crate) fn record(&self, vm: &str) -> (Vec<String>, BTreeMap<String, Vec<String>>) {
        let prefix = format!("{vm}:");
        let disks = self
            .by_disk
            .range(prefix.clone()..)
            .take_while(|(k, _)| k.starts_with(&prefix))
            .map(|(k, ids)| (k[prefix.len()..].to_string(), ids.clone()))
            .collect();
        (self.of(vm).to_vec(), disks)
    }

    /// Takes back what [`Associations::record`] gave for `vm`.
    pub(crate) fn restore(
        &mut self,
        vm: &str,
        ids: Vec<String>,
        disks: BTreeMap<String, Vec<String>>,
    ) {
        if !ids.is_empty() {
            self.by_vm.insert(vm.to_string(), ids);
        }
        for (disk, ids) in disks {
            self.by_disk.insert(format!("{vm}:{disk}"), ids);
        }
    }

    /// Forgets a destroyed VM's policies, its disks' too.
    pub(crate) fn forget(&mut self, vm: &str) {
        self.by_vm.remove(vm);
        let prefix = format!("{vm}:");
        let disks: Vec<String> = self
            .by_disk
            .range(prefix.clone()..)
            .take_while(|(k, _)| k.starts_with(&prefix))
            .map(|(k, _)| k.clone())
            .collect();
        for k in disks {
            self.by_disk.remove(&k);
        }
    }
}

/// Applies profile specs to one entity's policy list: a defined profile adds its policy, an
/// empty one clears the list.
fn apply_to<'a>(ids: &mut Vec<String>, specs: impl Iterator<Item = &'a Element>) {
    for spec in specs {
        match spec.xsi_type.as_deref() {
            Some("VirtualMachineEmptyProfileSpec") => ids.clear(),
            _ => {
                if let Some(id) = spec.text_of("profileId").map(str::trim) {
                    if !ids.iter().any(|i| i == id) {
                        ids.push(id.to_string());
                    }
                }
            }
        }
    }
}

/// The default namespace and the `pbm:` prefix of data types, as govmomi's decoder looks
/// polymorphic PBM types up by their prefixed name.
const NAMESPACES: &str = r#"xmlns="urn:pbm" xmlns:pbm="urn:pbm""#;

/// vCenter 8's system-created storage policies: (ID, name, description, system type).
const POLICIES: &[(&str, &str, &str, &str)] = &[
    (
        "aa6d5a82-1c88-45da-85d3-3d74b91a5bad",
        "vSAN Default Storage Policy",
        "Storage policy used as default for vSAN datastores",
        "VsanDefaultProfile",
    ),
    (
        "4d5f673c-536f-11e6-beb8-9e71128cae77",
        "VM Encryption Policy",
        "Sample storage policy for VMware's VM and virtual disk encryption",
        "",
    ),
    (
        "f4e5bade-15a2-4805-bf8e-52318c4ce443",
        "Management Storage Policy - Thin",
        "Management Storage policy used for VMC large cluster",
        "",
    ),
    (
        "c4ad4c56-4c62-4a8e-8de9-5d5ab9c2c0d1",
        "Host-local PMem Default Storage Policy",
        "Storage policy used as default for Host-local PMem datastores",
        "PmemDefaultProfile",
    ),
];

/// The ID of the policy named `name`, as `ProfileIDByName` finds it.
pub(crate) fn id_by_name(name: &str) -> Option<&'static str> {
    POLICIES.iter().find(|p| p.1 == name).map(|p| p.0)
}

/// Answers one PBM request (the request's `Cookie` names its session); the body of the
/// `…Response` element, or a fault.
pub(crate) fn dispatch(
    req: &Request,
    session: Option<&str>,
    now: DateTime<Utc>,
    associations: &Associations,
) -> Result<String, Fault> {
    let this = req
        .this
        .clone()
        .ok_or_else(|| Fault::invalid_request("the request has no _this"))?;
    if session.is_none() && req.method != "PbmRetrieveServiceContent" {
        return Err(Fault::not_authenticated(&this));
    }
    match (&*this.ty, req.method.as_str()) {
        ("PbmServiceInstance", "PbmRetrieveServiceContent") => Ok(service_content()),
        ("PbmProfileProfileManager", "PbmQueryProfile") => Ok(query_profile(&req.args)),
        ("PbmProfileProfileManager", "PbmRetrieveContent") => retrieve_content(&req.args, now),
        ("PbmProfileProfileManager", "PbmQueryAssociatedProfile") => {
            Ok(query_associated_profile(&req.args, associations))
        }
        ("PbmPlacementSolver", "PbmCheckRequirements") => Ok(check_requirements(&req.args)),
        _ => Err(Fault::method_not_found(&this, &req.method)),
    }
}

/// `<{method}Response>` in the PBM namespace around `inner`.
pub(crate) fn response(method: &str, inner: &str) -> String {
    crate::soap::response(method, inner).replacen(
        &format!("<{method}Response xmlns=\"urn:vim25\">"),
        &format!("<{method}Response {NAMESPACES}>"),
        1,
    )
}

fn returnval(out: &mut String, value: Val) {
    write_element(out, "returnval", &value, false);
}

fn service_content() -> String {
    let mor = |ty: &str, value: &str| Val::Mor(Moref::new(ty, value));
    let content = Data::new("pbm:PbmServiceInstanceContent")
        .with(
            "aboutInfo",
            Data::new("pbm:PbmAboutInfo")
                .with("name", "PBM")
                .with("version", "8.0.3.0")
                .with("instanceUuid", "5ba3d4a1-7d0c-4c6e-9a3b-0f0b6f9b8f11"),
        )
        .with("sessionManager", mor("PbmSessionManager", "SessionManager"))
        .with(
            "capabilityMetadataManager",
            mor("PbmCapabilityMetadataManager", "CapabilityMetadataManager"),
        )
        .with(
            "profileManager",
            mor("PbmProfileProfileManager", "ProfileManager"),
        )
        .with(
            "complianceManager",
            mor("PbmComplianceManager", "complianceManager"),
        )
        .with(
            "placementSolver",
            mor("PbmPlacementSolver", "placementSolver"),
        )
        .with(
            "replicationManager",
            mor("PbmReplicationManager", "ReplicationManager"),
        );
    let mut out = String::new();
    returnval(&mut out, Val::from(content));
    out
}

/// The IDs of the policies of the asked resource type (STORAGE) and category
/// (REQUIREMENT, or any when none is asked).
fn query_profile(args: &Element) -> String {
    let resource = args
        .child("resourceType")
        .and_then(|r| r.text_of("resourceType"))
        .unwrap_or("");
    let category = args.text_of("profileCategory").unwrap_or("");
    let mut out = String::new();
    if resource != "STORAGE" || !(category.is_empty() || category == "REQUIREMENT") {
        return out;
    }
    for (id, ..) in POLICIES {
        returnval(&mut out, Val::from(profile_id(id)));
    }
    out
}

/// The policies of one entity (`PbmServerObjectRef`): a VM's home (`virtualMachine`, key
/// `vm-N`) or one of its disks (`virtualDiskId`, key `vm-N:<disk key>`); other objects
/// (datastores) have none here.
fn query_associated_profile(args: &Element, associations: &Associations) -> String {
    let mut out = String::new();
    let Some(entity) = args.child("entity") else {
        return out;
    };
    let key = entity.text_of("key").unwrap_or("").trim();
    let ids = match entity.text_of("objectType").map(str::trim) {
        Some("virtualMachine") => associations.of(key),
        Some("virtualDiskId") => associations.of_disk(key),
        _ => &[],
    };
    for id in ids {
        returnval(&mut out, Val::from(profile_id(id)));
    }
    out
}

fn profile_id(id: &str) -> Data {
    Data::new("pbm:PbmProfileId").with("uniqueId", id)
}

/// The policies named by ID; an unknown ID is an InvalidArgument, as vCenter answers.
fn retrieve_content(args: &Element, now: DateTime<Utc>) -> Result<String, Fault> {
    let ids: Vec<&str> = args
        .children_named("profileIds")
        .map(|e| e.text_of("uniqueId").unwrap_or(""))
        .collect();
    if ids.is_empty() {
        return Err(Fault::invalid_request("no profile IDs"));
    }
    let mut out = String::new();
    for id in ids {
        let (id, name, description, system) = POLICIES
            .iter()
            .find(|(p, ..)| *p == id)
            .ok_or_else(|| Fault::invalid_argument("profileId"))?;
        let mut profile = Data::new("pbm:PbmCapabilityProfile")
            .with("profileId", profile_id(id))
            .with("name", *name)
            .with("description", *description)
            .with("creationTime", now)
            .with("createdBy", "Temporary user handle")
            .with("lastUpdatedTime", now)
            .with("lastUpdatedBy", "Temporary user handle")
            .with("profileCategory", "REQUIREMENT")
            .with(
                "resourceType",
                Data::new("pbm:PbmProfileResourceType").with("resourceType", "STORAGE"),
            )
            .with(
                "constraints",
                Data::new("pbm:PbmCapabilitySubProfileConstraints"),
            )
            .with("generationId", Val::Long(0))
            .with("isDefault", false);
        if !system.is_empty() {
            profile = profile.with("systemCreatedProfileType", *system);
        }
        returnval(&mut out, Val::from(profile));
    }
    Ok(out)
}

/// Every hub searched is compatible: the simulated datastores satisfy every policy.
fn check_requirements(args: &Element) -> String {
    let mut out = String::new();
    for hub in args.children_named("hubsToSearch") {
        let hub = Data::new("pbm:PbmPlacementHub")
            .with("hubType", hub.text_of("hubType").unwrap_or("Datastore"))
            .with("hubId", hub.text_of("hubId").unwrap_or(""));
        returnval(
            &mut out,
            Val::from(Data::new("pbm:PbmPlacementCompatibilityResult").with("hub", hub)),
        );
    }
    out
}
