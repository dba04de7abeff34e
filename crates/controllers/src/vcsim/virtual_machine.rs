//! vm-operator's VirtualMachine, for a plane without vm-operator (supervisor mode): what
//! vm-operator does with one, against a simulator of this process. Once the namespace's
//! VMOperatorDependencies are ready, the VM is deployed from its image's content library
//! item (the OVF's size) in the simulator, powered on as `spec.powerState` says, and its
//! status reports it as vm-operator does (`uniqueID`, `biosUUID`, `instanceUUID`,
//! `powerState`, and `network.primaryIP4` once the guest reports its address). Deleting
//! the VirtualMachine powers the VM off and destroys it. A VirtualMachine of CAPV's supervisor
//! mode (owned by a `vmware.infrastructure.cluster.x-k8s.io` VSphereMachine owned by a
//! Machine with bootstrap data) then joins the workload cluster, as a VSphereVM's VM does.

use super::types::{VCenterSimulator, VMOperatorDependencies};
use super::vm_bootstrap;
use super::vmoperator::wanted;
use super::{Error, Reconciler};
use crate::capi::infra::cloud_key;
use infrasim_controller_runtime::reconcile::{Cleanup, Next, Reconcile};
use infrasim_vsphere_sim::{Simulator, TemplateSpec};
use kube::api::{Api, ApiResource, DynamicObject};
use kube::runtime::reflector::ObjectRef;
use kube::ResourceExt;
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

/// The finalizer a VirtualMachine carries while its VM exists in the simulator.
pub const FINALIZER: &str = "vcsim.infrastructure.cluster.x-k8s.io/virtualmachine";

pub use crate::capv::types::vmoperator::{
    VirtualMachine, VirtualMachineSpec, VirtualMachineStatus,
};

/// A VirtualMachine is claimed (its finalizer added) only once the namespace's simulator is
/// ready, so the runner holds no finalizer of its own (see [`Reconcile::FINALIZER`]).
/// The field manager this controller writes under, the family's and its own name (see
/// [`infrasim_controller_runtime::writes`]).
const MANAGER: &str = "infrasim-vcsim-controller/virtual_machine";

impl Reconcile<VirtualMachine> for Reconciler {
    type Error = Error;

    async fn apply(&self, vm: Arc<VirtualMachine>) -> Result<Next, Error> {
        deploy_and_boot(&vm, self).await
    }

    /// The machine leaves its workload cluster, the VM goes from the simulator, and the
    /// object loses its finalizer (at once when no simulator was ever ready for it).
    async fn cleanup(&self, vm: Arc<VirtualMachine>) -> Result<Cleanup, Error> {
        let ns = vm.namespace().unwrap_or_default();
        let client = &self.ctx.client;
        let Some(sim) = simulator_of(self, &ns).await? else {
            infrasim_controller_runtime::finalizers::remove(client, &*vm, FINALIZER).await?;
            return Ok(Cleanup::Done);
        };
        if vm.finalizers().iter().any(|f| f == FINALIZER) {
            if let Some(owners) = owners(&vm, self).await? {
                let key = cloud_key(&owners.cluster.name_any(), &ns);
                self.ctx.cloud.remove_machine(&key, &vm.name_any()).await?;
            }
            if let Some(m) = &existing(&vm) {
                sim.destroy_vm(m)
                    .map_err(|e| Error::Simulator(e.to_string()))?;
            }
            infrasim_controller_runtime::finalizers::remove(client, &*vm, FINALIZER).await?;
        }
        Ok(Cleanup::Done)
    }
}

/// The simulator's VM the object made, if it made one.
fn existing(vm: &VirtualMachine) -> Option<infrasim_vsphere_sim::value::Moref> {
    vm.status
        .as_ref()
        .and_then(|s| s.unique_id.clone())
        .map(|id| infrasim_vsphere_sim::value::Moref::new("VirtualMachine", &id))
}

async fn deploy_and_boot(vm: &VirtualMachine, r: &Reconciler) -> Result<Next, Error> {
    let ns = vm.namespace().unwrap_or_default();
    let api: Api<VirtualMachine> = Api::namespaced(r.ctx.client.clone(), &ns);
    let Some(sim) = simulator_of(r, &ns).await? else {
        // No ready dependencies in the namespace yet: their change wakes this VM.
        return Ok(Next::AwaitChange);
    };
    if infrasim_controller_runtime::finalizers::ensure(&r.ctx.client, vm, FINALIZER).await? {
        return Ok(Next::AwaitChange);
    }
    let moref = match existing(vm).filter(|m| sim.vm(m).is_some()) {
        Some(m) => m,
        None => match deploy(vm, r, &ns, &sim).await? {
            Ok(m) => m,
            Err(NotDeployed::Spec(why)) => {
                r.ctx.event(vm, true, "DeployFailed", why).await;
                return Ok(Next::AwaitChange);
            }
            Err(NotDeployed::Image(why)) => {
                r.ctx.event(vm, true, "DeployFailed", why).await;
                // A backstop, not a poll: VirtualMachineImages are not watched here (the
                // dependencies make theirs before they turn ready, which wakes this VM), so
                // an image someone else makes, or its library item, is seen on this look.
                return Ok(Next::After(Duration::from_secs(10)));
            }
        },
    };
    let power_on = vm.spec.power_state.as_deref().unwrap_or("PoweredOn") == "PoweredOn";
    if power_on {
        sim.power_on(&moref)
            .map_err(|e| Error::Simulator(e.to_string()))?;
    }
    // Taken before the VM is read, so a guest coming up in between is heard.
    let changes = sim.changes();
    let Some(state) = sim.vm(&moref) else {
        // Destroyed by someone else since it was powered on: the next reconcile deploys it
        // again (a failure, retried with the runner's backoff).
        return Err(Error::Simulator(format!("VM {} went away", moref.value)));
    };
    let mut status = json!({
        "uniqueID": state.moref.value,
        "biosUUID": state.bios_uuid,
        "instanceUUID": state.instance_uuid,
        "powerState": if state.powered_on { "PoweredOn" } else { "PoweredOff" },
        "conditions": [{"type": "VirtualMachineCreated", "status": "True", "reason": "True",
                        "message": "", "lastTransitionTime":
                            infrasim_controller_runtime::conditions::timestamp(r.ctx.now())}],
    });
    if let Some(ip) = &state.ip {
        status["network"] = json!({"primaryIP4": ip});
    }
    let body = json!({"apiVersion": "vmoperator.vmware.com/v1alpha6", "kind": "VirtualMachine",
                      "status": status});
    infrasim_controller_runtime::writes::apply_status(&api, &vm.name_any(), MANAGER, &body).await?;
    if state.powered_on && state.ip.is_none() {
        // The guest comes up after its boot delay, a time the simulator knows; anything else
        // that gives it an address (a reset, a NIC added) is a change that wakes it.
        r.virtual_machine_waits
            .wake_on_change(ObjectRef::from_obj(vm), changes);
        return Ok(sim
            .next_change_of(&moref)
            .map_or(Next::AwaitChange, Next::At));
    }
    // A Cluster API machine's VM (CAPV's supervisor mode): once powered on and with its
    // bootstrap data, it joins the workload cluster as a VSphereVM's does.
    let owners = owners(vm, r)
        .await?
        .filter(|o| state.powered_on && o.machine.spec.bootstrap.data_secret_name.is_some());
    if let Some(owners) = owners {
        if !vm_bootstrap::boot(vm, r, &owners, &state.bios_uuid).await? {
            // The certificates were made meanwhile by another reconcile: there to be read
            // now, so at once.
            return Ok(Next::At(r.ctx.now()));
        }
    }
    Ok(Next::AwaitChange)
}

/// VirtualMachine → its (supervisor-mode) VSphereMachine owner → Machine → Cluster.
async fn owners(
    vm: &VirtualMachine,
    r: &Reconciler,
) -> Result<Option<vm_bootstrap::Owners>, Error> {
    let ns = vm.namespace().unwrap_or_default();
    let group = "vmware.infrastructure.cluster.x-k8s.io";
    let Some(name) = vm_bootstrap::owner_of(vm.owner_references(), "VSphereMachine", group) else {
        return Ok(None);
    };
    let Some(vsphere_machine) = r
        .informers
        .get::<crate::capv::types::supervisor::VSphereMachine>(&ns, &name)
        .await?
    else {
        return Ok(None);
    };
    vm_bootstrap::machine_owners(r, &ns, vsphere_machine.owner_references()).await
}

/// The simulator the namespace's ready VMOperatorDependencies point at, if it runs here.
async fn simulator_of(r: &Reconciler, ns: &str) -> Result<Option<Simulator>, Error> {
    let deps = r.informers.of::<VMOperatorDependencies>().store().state();
    let Some(deps) = deps.iter().find(|d| {
        d.namespace().as_deref() == Some(ns) && d.status.as_ref().is_some_and(|s| s.ready)
    }) else {
        return Ok(None);
    };
    let sim = match deps.simulator_ref() {
        Some((sim_ns, sim_name)) => {
            r.informers
                .get::<VCenterSimulator>(&sim_ns, &sim_name)
                .await?
        }
        None => None,
    };
    let server = wanted(deps, sim.as_deref()).vcenter.server_url;
    Ok(r.simulators.serving_at(&server))
}

/// Why a VM could not be deployed, by what it waits for.
enum NotDeployed {
    /// The VirtualMachine's spec: its change wakes it.
    Spec(String),
    /// Its image, the image's library item, or the simulator's deployment of it.
    Image(String),
}

/// Deploys the VM from its image's library item; the VM, or why it cannot be made.
async fn deploy(
    vm: &VirtualMachine,
    r: &Reconciler,
    ns: &str,
    sim: &Simulator,
) -> Result<Result<infrasim_vsphere_sim::value::Moref, NotDeployed>, Error> {
    let Some(image) = vm.spec.image_name.as_deref() else {
        return Ok(Err(NotDeployed::Spec("spec.imageName is not set".into())));
    };
    let resource = ApiResource {
        group: "vmoperator.vmware.com".into(),
        version: "v1alpha6".into(),
        api_version: "vmoperator.vmware.com/v1alpha6".into(),
        kind: "VirtualMachineImage".into(),
        plural: "virtualmachineimages".into(),
    };
    let images: Api<DynamicObject> = Api::namespaced_with(r.ctx.client.clone(), ns, &resource);
    let Some(image_obj) = images.get_opt(image).await? else {
        let why = format!("VirtualMachineImage {image} does not exist");
        return Ok(Err(NotDeployed::Image(why)));
    };
    let Some(item) = image_obj.data["status"]["providerItemID"].as_str() else {
        let why = format!("VirtualMachineImage {image} has no library item");
        return Ok(Err(NotDeployed::Image(why)));
    };
    Ok(sim
        .deploy_library_item(
            item,
            &TemplateSpec::new(&vm.name_any(), "DC0").in_folder(ns),
        )
        .map_err(|e| NotDeployed::Image(e.to_string())))
}
