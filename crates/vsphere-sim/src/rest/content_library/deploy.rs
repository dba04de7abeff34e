//! The deployment of an OVF item (`/vcenter/ovf/library-item/<id>?action=deploy`) as a VM
//! of the SOAP inventory, made as CreateVM_Task makes one.

use super::operation::Ctx;
use super::ovf::read_ovf;
use super::store::ContentLibrary;
use crate::objects::is_a;
use crate::rest::sim::Sim;
use crate::rest::wire::{text, Answer, Form};
use crate::value::{Moref, Val};
use http::Method;
use serde_json::{json, Value};

/// The VM folder of the datacenter `entity` is in.
pub(super) fn vm_folder_of(inv: &crate::objects::Inventory, entity: &Moref) -> Option<Moref> {
    inv.datacenter_of(entity)?
        .props
        .get("vmFolder")
        .and_then(Val::as_mor)
        .cloned()
}

/// Deploys an OVF item (`~action=deploy`) as a VM: in the target's resource pool and folder
/// (the pool's datacenter's VM folder when none is given), named as the deployment spec
/// says (else as the OVF, else as the item), with the OVF's CPUs and memory. A VM that
/// cannot be created (a taken name) is a deployment that did not succeed, as vCenter reports
/// it; an unknown item, pool or folder is not_found.
pub(super) fn deploy(
    sim: &Sim<'_, ContentLibrary>,
    cx: &Ctx<'_>,
    method: &Method,
    id: &str,
    body: &Value,
) -> Answer {
    let form = cx.form;
    if *method != Method::POST || cx.action != Some("deploy") {
        return Answer::not_found(form, "OVF library item operation");
    }
    let Some((item_name, ovf)) = sim.own_state().ovf_of(id) else {
        return Answer::missing(form, "Library item", id);
    };
    let Some(ovf) = ovf else {
        return Answer::invalid(form, &format!("Library item {id} has no OVF descriptor."));
    };
    let system = read_ovf(&ovf);
    let deployment = body.get("deployment_spec").unwrap_or(&Value::Null);
    let target = body.get("target").unwrap_or(&Value::Null);
    let pool = text(target, "resource_pool_id");
    if pool.is_empty() {
        return Answer::invalid(form, "target.resource_pool_id is required.");
    }
    let name = Some(text(deployment, "name"))
        .filter(|n| !n.is_empty())
        .or(system.name.clone())
        .unwrap_or(item_name);
    let mut config = vec![field("name", &name)];
    if let Some(n) = system.cpus {
        config.push(field("numCPUs", &n.to_string()));
    }
    if let Some(n) = system.memory_mb {
        config.push(field("memoryMB", &n.to_string()));
    }
    let annotation = text(deployment, "annotation");
    if !annotation.is_empty() {
        config.push(field("annotation", &annotation));
    }
    let placement = Placement {
        pool: Moref::new("ResourcePool", &pool),
        folder: Some(text(target, "folder_id")).filter(|f| !f.is_empty()),
        host: Some(text(target, "host_id")).filter(|h| !h.is_empty()),
        datastore: Some(text(deployment, "default_datastore_id")).filter(|d| !d.is_empty()),
    };
    match create_vm(sim, form, &placement, config) {
        Ok(vm) => cx.ok(json!({"succeeded": true,
                               "resource_id": {"type": "VirtualMachine", "id": vm.value}})),
        Err(Ok(message)) => cx.ok(json!({"succeeded": false, "error": {"errors": [{
            "category": "SERVER",
            "error": {"@class": "com.vmware.vapi.std.errors.error",
                      "messages": [{"id": "com.vmware.ovfs.ovfs-main.ovfs.deploy_failed",
                                    "default_message": message, "args": []}]}}]}})),
        Err(Err(refused)) => refused,
    }
}

/// Where a deployed VM goes: pool, folder, host and datastore (reference values).
struct Placement {
    pool: Moref,
    folder: Option<String>,
    host: Option<String>,
    datastore: Option<String>,
}

fn field(name: &str, value: &str) -> crate::soap::Element {
    crate::soap::Element {
        name: name.to_string(),
        text: value.to_string(),
        ..Default::default()
    }
}

/// Creates the VM as CreateVM_Task does (`folder::create_vm`), under the SOAP state's lock.
/// `Err(Ok(message))` is a VM the inventory refused; `Err(Err(answer))` a target not found.
fn create_vm(
    sim: &Sim<'_, ContentLibrary>,
    form: Form,
    at: &Placement,
    mut config: Vec<crate::soap::Element>,
) -> Result<Moref, Result<String, Answer>> {
    sim.with_state(|state, call| {
        let inv = &state.inventory;
        let absent = |what: &str, id: &str| Err(Err(Answer::missing(form, what, id)));
        if !inv
            .by_value(&at.pool.value)
            .is_some_and(|p| is_a(&p.moref.ty, "ResourcePool"))
        {
            return absent("Resource pool", &at.pool.value);
        }
        let folder = match &at.folder {
            Some(f) => Moref::new("Folder", f),
            None => match vm_folder_of(inv, &at.pool) {
                Some(f) => f,
                None => return absent("Folder", "of the resource pool's datacenter"),
            },
        };
        if inv.get(&folder).is_none() {
            return absent("Folder", &folder.value);
        }
        let host = at.host.as_deref().map(|h| Moref::new("HostSystem", h));
        if let Some(h) = host.as_ref().filter(|h| inv.get(h).is_none()) {
            return absent("Host", &h.value);
        }
        if let Some(ds) = &at.datastore {
            let Some(name) = inv.get(&Moref::new("Datastore", ds)).map(|d| d.name()) else {
                return absent("Datastore", ds);
            };
            let mut files = field("files", "");
            files
                .children
                .push(field("vmPathName", &format!("[{name}]")));
            config.push(files);
        }
        let spec = crate::soap::Element {
            name: "config".to_string(),
            children: config,
            ..Default::default()
        };
        match crate::folder::create_vm(state, call, &folder, &spec, &at.pool, host.as_ref()) {
            Ok(Some(Val::Mor(vm))) => Ok(vm),
            Ok(_) => Err(Ok("the VM was not created".to_string())),
            Err(fault) => Err(Ok(fault.message)),
        }
    })
}
