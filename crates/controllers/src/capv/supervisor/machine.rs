//! The supervisor VSphereMachine reconciler, as CAPV's: once its Machine's cluster has its
//! infrastructure and the Machine its bootstrap data, it applies the vm-operator
//! VirtualMachine CAPV makes (named after the Machine, controlled by the VSphereMachine, with
//! its class, image, storage class and power-off mode, powered on, in the cluster's resource
//! policy, its cloud-init the bootstrap data Secret's `user-data`, labelled with the cluster
//! and role), then reports the VirtualMachine's progress (`VirtualMachineProvisioned`:
//! `Provisioning`, `PoweringOn`, `WaitingForNetworkAddress`, `WaitingForBIOSUUID`) until it has
//! an address and a BIOS UUID: then `spec.providerID: vsphere://<biosUUID>`,
//! `status.addresses`, `status.biosUUID` and `initialization.provisioned`. Deleting it
//! deletes the VirtualMachine first.

use super::super::types::provider_id;
use super::super::types::supervisor::VSphereMachine;
use super::super::types::vmoperator::VirtualMachine;
use super::super::{Error, Reconciler};
use super::{role_labels, VMOPERATOR_API};
use crate::capi::core::{Cluster, Machine};
use crate::capi::triggers::{cluster_gates, machine_spec};
use crate::capi::CLUSTER_NAME_LABEL;
use infrasim_controller_runtime::conditions::Condition;
use infrasim_controller_runtime::informers::Informers;
use infrasim_controller_runtime::reconcile::{Cleanup, Next, Reconcile};
use infrasim_controller_runtime::triggers::{every_change, filtered};
use infrasim_controller_runtime::Controller;
use kube::api::{Api, DeleteParams};
use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};
use serde_json::{json, Map, Value};
use std::sync::Arc;

/// CAPV's finalizer on a VSphereMachine (both modes).
pub const FINALIZER: &str = "vspheremachine.infrastructure.cluster.x-k8s.io";

const MANAGER: &str = "infrasim-capv/supervisor-machine";
const CONDITION: &str = "VirtualMachineProvisioned";

/// The controller: its VirtualMachine's changes, its Machine's (bootstrap data) and its
/// Cluster's gates wake it.
pub(in crate::capv) fn controller(informers: &Informers) -> Controller<VSphereMachine> {
    let machines = informers.of::<VSphereMachine>();
    infrasim_controller_runtime::triggers::controller(&machines, None)
        .owns_shared_stream(every_change(&informers.of::<VirtualMachine>()))
        .watches_shared_stream(filtered(&informers.of::<Machine>(), machine_spec), |m| {
            let infra = &m.spec.infrastructure_ref;
            (infra.kind == "VSphereMachine" && infra.api_group == VSphereMachine::group(&()))
                .then(|| ObjectRef::new(&infra.name).within(&m.namespace().unwrap_or_default()))
        })
        .watches_shared_stream(
            filtered(&informers.of::<Cluster>(), cluster_gates),
            super::super::of_cluster(informers),
        )
}

impl Reconcile<VSphereMachine> for Reconciler {
    type Error = Error;
    const FINALIZER: Option<&'static str> = Some(FINALIZER);

    async fn apply(&self, m: Arc<VSphereMachine>) -> Result<Next, Error> {
        let ns = m.namespace().unwrap_or_default();
        let found =
            super::super::machine_and_cluster(&self.informers, &ns, m.owner_references()).await?;
        let Some((machine, cluster)) = found else {
            return Ok(Next::AwaitChange);
        };
        let before = m.status.as_ref().map(|s| &s.rest);
        if super::super::paused(self, &*m, before, MANAGER, Some(&cluster)).await? {
            return Ok(Next::AwaitChange);
        }
        if let Some(waiting) = super::super::machine::waiting_for(&machine, &cluster) {
            write_status(self, &m, waiting, json!({})).await?;
            return Ok(Next::AwaitChange);
        }
        apply_vm(self, &m, &machine).await?;
        let vm = self
            .informers
            .get::<VirtualMachine>(&ns, &machine.name_any())
            .await?;
        mirror(self, &m, vm.as_deref()).await?;
        Ok(Next::AwaitChange)
    }

    /// The VirtualMachine goes first (vm-operator destroys its VM); the finalizer after.
    async fn cleanup(&self, m: Arc<VSphereMachine>) -> Result<Cleanup, Error> {
        let ns = m.namespace().unwrap_or_default();
        let api: Api<VirtualMachine> = Api::namespaced(self.ctx.client.clone(), &ns);
        let uid = m.uid().unwrap_or_default();
        let mut left = 0;
        for vm in self.informers.of::<VirtualMachine>().store().state() {
            if vm.namespace().as_deref() != Some(&ns)
                || !vm.owner_references().iter().any(|o| o.uid == uid)
            {
                continue;
            }
            left += 1;
            match api.delete(&vm.name_any(), &DeleteParams::default()).await {
                Ok(_) => {}
                Err(kube::Error::Api(e)) if e.code == 404 => {}
                Err(e) => return Err(e.into()),
            }
        }
        if left > 0 {
            let deleting = Condition::new(
                CONDITION,
                false,
                "Deleting",
                "Waiting for the VirtualMachine to be deleted",
            );
            write_status(self, &m, deleting, json!({})).await?;
            return Ok(Cleanup::Pending(Next::AwaitChange));
        }
        Ok(Cleanup::Done)
    }
}

/// vm-operator's power-off mode for CAPV's (`hard` when unset).
fn power_off_mode(m: &VSphereMachine) -> Result<&'static str, String> {
    match m
        .spec
        .rest
        .get("powerOffMode")
        .and_then(Value::as_str)
        .unwrap_or("")
    {
        "" | "hard" => Ok("Hard"),
        "soft" => Ok("Soft"),
        "trySoft" => Ok("TrySoft"),
        other => Err(format!(
            "unable to map PowerOffMode {other:?} to vm-operator equivalent"
        )),
    }
}

/// The VirtualMachine's spec and labels as CAPV writes them for `m`.
fn vm_body(m: &VSphereMachine, machine: &Machine) -> Result<Value, String> {
    let cluster = &machine.spec.cluster_name;
    let text = |k: &str| m.spec.rest.get(k).cloned().unwrap_or(Value::Null);
    let mut spec = json!({
        "imageName": text("imageName"), "className": text("className"),
        "powerState": "PoweredOn", "powerOffMode": power_off_mode(m)?,
        "reserved": {"resourcePolicyName": cluster},
        "bootstrap": {"cloudInit": {"rawCloudConfig": {
            "name": machine.spec.bootstrap.data_secret_name, "key": "user-data"}}},
    });
    if let Some(sc) = m.spec.rest.get("storageClass").filter(|v| !v.is_null()) {
        spec["storageClass"] = sc.clone();
    }
    let mut labels: Map<String, Value> = role_labels(cluster, machine.is_control_plane())
        .into_iter()
        .map(|(k, v)| (k.to_string(), json!(v)))
        .collect();
    labels.insert(CLUSTER_NAME_LABEL.into(), json!(cluster));
    if !machine.is_control_plane() {
        let md = machine
            .labels()
            .get("cluster.x-k8s.io/deployment-name")
            .cloned()
            .unwrap_or_default();
        labels.insert("cluster.x-k8s.io/deployment-name".into(), json!(md));
    }
    let owner = json!({"apiVersion": VSphereMachine::api_version(&()), "kind": "VSphereMachine",
                       "name": m.name_any(), "uid": m.uid().unwrap_or_default(),
                       "controller": true, "blockOwnerDeletion": true});
    Ok(json!({
        "apiVersion": VMOPERATOR_API, "kind": "VirtualMachine",
        "metadata": {"name": machine.name_any(), "labels": labels, "ownerReferences": [owner]},
        "spec": spec,
    }))
}

async fn apply_vm(r: &Reconciler, m: &VSphereMachine, machine: &Machine) -> Result<(), Error> {
    let body = match vm_body(m, machine) {
        Ok(b) => b,
        Err(why) => {
            let failed = Condition::new(
                CONDITION,
                false,
                "NotProvisioned",
                format!("failed to create or update VirtualMachine: {why}"),
            );
            write_status(r, m, failed, json!({})).await?;
            return Err(Error::Reported(why));
        }
    };
    let api: Api<VirtualMachine> =
        Api::namespaced(r.ctx.client.clone(), &m.namespace().unwrap_or_default());
    infrasim_controller_runtime::writes::apply(&api, &machine.name_any(), MANAGER, &body).await?;
    Ok(())
}

/// Where the VirtualMachine is, as the condition's reason CAPV gives; `None` once it has an
/// address and a BIOS UUID.
fn progress(vm: Option<&VirtualMachine>) -> Option<&'static str> {
    let status = vm
        .and_then(|v| v.status.as_ref())
        .map(|s| json!(s))
        .unwrap_or(json!({}));
    let created = status["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "VirtualMachineCreated" && c["status"] == "True");
    let address = status
        .pointer("/network/primaryIP4")
        .or_else(|| status.pointer("/network/primaryIP6"))
        .and_then(Value::as_str)
        .is_some_and(|a| !a.is_empty());
    match () {
        _ if !created => Some("Provisioning"),
        _ if status["powerState"] != "PoweredOn" => Some("PoweringOn"),
        _ if !address => Some("WaitingForNetworkAddress"),
        _ if status["biosUUID"].as_str().is_none_or(str::is_empty) => Some("WaitingForBIOSUUID"),
        _ => None,
    }
}

/// Reports the VirtualMachine's progress; once it is up, the provider ID and addresses.
async fn mirror(
    r: &Reconciler,
    m: &VSphereMachine,
    vm: Option<&VirtualMachine>,
) -> Result<(), Error> {
    if let Some(reason) = progress(vm) {
        return write_status(
            r,
            m,
            Condition::new(CONDITION, false, reason, ""),
            json!({}),
        )
        .await;
    }
    let status = vm
        .and_then(|v| v.status.as_ref())
        .map(|s| json!(s))
        .unwrap_or(json!({}));
    let uuid = status["biosUUID"].as_str().unwrap_or_default();
    let ip = status
        .pointer("/network/primaryIP4")
        .or_else(|| status.pointer("/network/primaryIP6"))
        .and_then(Value::as_str)
        .unwrap_or_default();
    let id = provider_id(uuid);
    if m.spec.provider_id.as_deref() != Some(id.as_str()) {
        let api: Api<VSphereMachine> =
            Api::namespaced(r.ctx.client.clone(), &m.namespace().unwrap_or_default());
        let body = json!({"apiVersion": VSphereMachine::api_version(&()), "kind": "VSphereMachine",
                          "metadata": {"name": m.name_any()}, "spec": {"providerID": id}});
        infrasim_controller_runtime::writes::apply(&api, &m.name_any(), MANAGER, &body).await?;
    }
    let extra = json!({"addresses": [{"type": "InternalIP", "address": ip}], "biosUUID": uuid,
                       "initialization": {"provisioned": true}});
    write_status(
        r,
        m,
        Condition::new(CONDITION, true, "Provisioned", ""),
        extra,
    )
    .await
}

async fn write_status(
    r: &Reconciler,
    m: &VSphereMachine,
    c: Condition,
    extra: Value,
) -> Result<(), Error> {
    let before = m.status.as_ref().map(|s| &s.rest);
    super::super::write_status(r, m, before, MANAGER, vec![c], extra).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vm(status: Value) -> VirtualMachine {
        serde_json::from_value(
            json!({"apiVersion": VMOPERATOR_API, "kind": "VirtualMachine",
            "metadata": {"name": "m"}, "spec": {}, "status": status}),
        )
        .expect("a VirtualMachine")
    }

    #[test]
    fn progress_follows_vm_operators_status_as_capv_reads_it() {
        let created = json!([{"type": "VirtualMachineCreated", "status": "True"}]);
        assert_eq!(progress(None), Some("Provisioning"));
        assert_eq!(
            progress(Some(&vm(json!({"conditions": created})))),
            Some("PoweringOn")
        );
        let on = json!({"conditions": created, "powerState": "PoweredOn"});
        assert_eq!(progress(Some(&vm(on))), Some("WaitingForNetworkAddress"));
        let up = json!({"conditions": created, "powerState": "PoweredOn", "network": {"primaryIP4": "10.0.0.2"}});
        assert_eq!(progress(Some(&vm(up))), Some("WaitingForBIOSUUID"));
        let done = json!({"conditions": created, "powerState": "PoweredOn", "biosUUID": "u",
                          "network": {"primaryIP4": "10.0.0.2"}});
        assert_eq!(progress(Some(&vm(done))), None);
    }

    #[test]
    fn power_off_modes_map_to_vm_operators() {
        let m = |mode: &str| -> VSphereMachine {
            serde_json::from_value(json!({"apiVersion": "vmware.infrastructure.cluster.x-k8s.io/v1beta2",
                "kind": "VSphereMachine", "metadata": {"name": "m"}, "spec": {"powerOffMode": mode}}))
            .expect("a VSphereMachine")
        };
        assert_eq!(power_off_mode(&m("trySoft")), Ok("TrySoft"));
        assert_eq!(power_off_mode(&m("")), Ok("Hard"));
        assert!(power_off_mode(&m("gently")).is_err());
    }
}
