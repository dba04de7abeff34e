//! The VSphereMachine reconciler, as CAPV's: once its Machine's cluster has its
//! infrastructure and the Machine has bootstrap data, it makes the VSphereVM CAPV makes
//! (named after the Machine, owned by the VSphereMachine, with the VSphereMachine's clone
//! spec, the cluster's server and thumbprint where the machine names none, and the
//! bootstrap data Secret as `bootstrapRef`); once that VM is ready, the VSphereMachine gets
//! its provider ID (`vsphere://<biosUUID>`), its addresses and `initialization.provisioned`,
//! which Cluster API's core waits for. Deleting it deletes the VSphereVM first.

use super::types::{provider_id, VSphereCluster, VSphereMachine, VSphereVM};
use super::types::{GROUP, NOT_CLONE_SPEC};
use super::{Error, Reconciler};
use crate::capi::core::{Cluster, Machine};
use crate::capi::triggers::{cluster_gates, machine_spec};
use crate::capi::{CLUSTER_NAME_LABEL, CONTROL_PLANE_LABEL};
use infrasim_controller_runtime::conditions::{self, Condition};
use infrasim_controller_runtime::informers::Informers;
use infrasim_controller_runtime::reconcile::{Cleanup, Next, Reconcile};
use infrasim_controller_runtime::triggers::{every_change, filtered};
use infrasim_controller_runtime::Controller;
use kube::api::{Api, DeleteParams};
use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};
use serde_json::{json, Map, Value};
use std::sync::Arc;

/// CAPV's finalizer on a VSphereMachine.
pub const FINALIZER: &str = "vspheremachine.infrastructure.cluster.x-k8s.io";

const MANAGER: &str = "infrasim-capv/machine";

/// The VSphereMachine controller: its VSphereVM's changes, its Machine's (bootstrap data)
/// and its Cluster's gates (infrastructure provisioned) wake it.
pub(super) fn controller(informers: &Informers) -> Controller<VSphereMachine> {
    let machines = informers.of::<VSphereMachine>();
    infrasim_controller_runtime::triggers::controller(&machines, None)
        .owns_shared_stream(every_change(&informers.of::<VSphereVM>()))
        .watches_shared_stream(filtered(&informers.of::<Machine>(), machine_spec), |m| {
            let infra = &m.spec.infrastructure_ref;
            (infra.kind == "VSphereMachine" && infra.api_group == GROUP)
                .then(|| ObjectRef::new(&infra.name).within(&m.namespace().unwrap_or_default()))
        })
        .watches_shared_stream(
            filtered(&informers.of::<Cluster>(), cluster_gates),
            super::of_cluster(informers),
        )
}

impl Reconcile<VSphereMachine> for Reconciler {
    type Error = Error;
    const FINALIZER: Option<&'static str> = Some(FINALIZER);

    async fn apply(&self, vm: Arc<VSphereMachine>) -> Result<Next, Error> {
        let ns = vm.namespace().unwrap_or_default();
        let found = super::machine_and_cluster(&self.informers, &ns, vm.owner_references()).await?;
        let Some((machine, cluster)) = found else {
            return Ok(Next::AwaitChange);
        };
        let before = vm.status.as_ref().map(|s| &s.rest);
        if super::paused(self, &*vm, before, MANAGER, Some(&cluster)).await? {
            return Ok(Next::AwaitChange);
        }
        if let Some(waiting) = waiting_for(&machine, &cluster) {
            write_status(self, &vm, waiting, None).await?;
            return Ok(Next::AwaitChange);
        }
        let Some(vsphere_cluster) = self.vsphere_cluster(&cluster).await? else {
            return Ok(Next::AwaitChange);
        };
        ensure_vm(self, &vm, &machine, &vsphere_cluster).await?;
        let made = self
            .informers
            .get::<VSphereVM>(&ns, &machine.name_any())
            .await?;
        mirror(self, &vm, made.as_deref()).await?;
        Ok(Next::AwaitChange)
    }

    /// The VSphereVM goes first (its VM with it); the finalizer when it is gone.
    async fn cleanup(&self, vm: Arc<VSphereMachine>) -> Result<Cleanup, Error> {
        let ns = vm.namespace().unwrap_or_default();
        let api: Api<VSphereVM> = Api::namespaced(self.ctx.client.clone(), &ns);
        let names = owned_vm_names(&self.informers, &vm);
        let mut left = 0;
        for name in names {
            match api.delete(&name, &DeleteParams::default()).await {
                Ok(_) => left += 1,
                Err(kube::Error::Api(e)) if e.code == 404 => {}
                Err(e) => return Err(e.into()),
            }
        }
        if left > 0 {
            let deleting = Condition::new(
                "VirtualMachineProvisioned",
                false,
                "Deleting",
                "Waiting for the VSphereVM to be deleted",
            );
            write_status(self, &vm, deleting, None).await?;
            return Ok(Cleanup::Pending(Next::AwaitChange));
        }
        Ok(Cleanup::Done)
    }
}

impl Reconciler {
    /// The VSphereCluster a Cluster names as its infrastructure.
    async fn vsphere_cluster(&self, c: &Cluster) -> Result<Option<Arc<VSphereCluster>>, Error> {
        let Some(infra) = c
            .spec
            .infrastructure_ref
            .as_ref()
            .filter(|r| r.kind == "VSphereCluster")
        else {
            return Ok(None);
        };
        let ns = c.namespace().unwrap_or_default();
        Ok(self
            .informers
            .get::<VSphereCluster>(&ns, &infra.name)
            .await?)
    }
}

/// The VSphereVMs a VSphereMachine owns (by its uid), from the cache.
fn owned_vm_names(informers: &Informers, m: &VSphereMachine) -> Vec<String> {
    let uid = m.uid().unwrap_or_default();
    informers
        .of::<VSphereVM>()
        .store()
        .state()
        .iter()
        .filter(|v| v.owner_references().iter().any(|o| o.uid == uid))
        .map(|v| v.name_any())
        .collect()
}

/// Why the machine's VM cannot be made yet, as CAPV reports it (in both modes).
pub(super) fn waiting_for(machine: &Machine, cluster: &Cluster) -> Option<Condition> {
    let (reason, message) = if !cluster.infrastructure_provisioned() {
        (
            "WaitingForClusterInfrastructureReady",
            "Waiting for the cluster's infrastructure to be provisioned",
        )
    } else if machine.spec.bootstrap.data_secret_name.is_some() {
        return None;
    } else if !machine.is_control_plane() && !cluster.control_plane_initialized() {
        (
            "WaitingForControlPlaneInitialized",
            "Waiting for the control plane to be initialized",
        )
    } else {
        ("WaitingForBootstrapData", "Waiting for bootstrap data")
    };
    Some(Condition::new(
        "VirtualMachineProvisioned",
        false,
        reason,
        message,
    ))
}

/// Applies the VSphereVM CAPV makes for `m` (see the module's doc).
async fn ensure_vm(
    r: &Reconciler,
    m: &VSphereMachine,
    machine: &Machine,
    cluster: &VSphereCluster,
) -> Result<(), Error> {
    let ns = m.namespace().unwrap_or_default();
    let name = machine.name_any();
    let mut spec: Map<String, Value> = m
        .spec
        .rest
        .iter()
        .filter(|(k, _)| !NOT_CLONE_SPEC.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    // From the Machine's failure domain first, then the VSphereMachine, then the cluster.
    super::zones::placement(&r.informers, machine, &mut spec).await;
    let empty = |v: Option<&Value>| v.and_then(Value::as_str).is_none_or(str::is_empty);
    if empty(spec.get("server")) {
        spec.insert("server".into(), json!(cluster.spec.server));
    }
    if empty(spec.get("thumbprint")) {
        spec.insert("thumbprint".into(), json!(cluster.spec.thumbprint));
    }
    let secret = machine.spec.bootstrap.data_secret_name.clone();
    spec.insert("bootstrapRef".into(), json!({ "name": secret }));
    let mut labels = Map::new();
    labels.insert(CLUSTER_NAME_LABEL.into(), json!(machine.spec.cluster_name));
    if machine.is_control_plane() {
        labels.insert(CONTROL_PLANE_LABEL.into(), json!(""));
    }
    let owner = json!({
        "apiVersion": VSphereMachine::api_version(&()),
        "kind": "VSphereMachine",
        "name": m.name_any(),
        "uid": m.uid().unwrap_or_default(),
    });
    let body = json!({
        "apiVersion": VSphereVM::api_version(&()),
        "kind": "VSphereVM",
        "metadata": {"name": name, "labels": labels, "ownerReferences": [owner]},
        "spec": spec,
    });
    let api: Api<VSphereVM> = Api::namespaced(r.ctx.client.clone(), &ns);
    infrasim_controller_runtime::writes::apply(&api, &name, MANAGER, &body).await?;
    Ok(())
}

/// Reports the VSphereVM's progress on the VSphereMachine; once it is ready, the provider
/// ID, addresses and `initialization.provisioned`.
async fn mirror(r: &Reconciler, m: &VSphereMachine, vm: Option<&VSphereVM>) -> Result<(), Error> {
    let ready = vm.and_then(|v| v.status.as_ref()).and_then(|s| s.ready) == Some(true);
    let uuid = vm.and_then(|v| v.spec.bios_uuid.clone());
    let (Some(vm), true, Some(uuid)) = (vm, ready, uuid) else {
        let provisioning = vm
            .and_then(|v| v.status.as_ref())
            .and_then(|s| s.rest.get("conditions"))
            .and_then(|c| serde_json::from_value::<Vec<Condition>>(c.clone()).ok())
            .and_then(|c| conditions::find(&c, "VirtualMachineProvisioned").cloned())
            .unwrap_or_else(|| {
                Condition::new("VirtualMachineProvisioned", false, "Provisioning", "")
            });
        return write_status(r, m, provisioning, None).await;
    };
    let id = provider_id(&uuid);
    if m.spec.provider_id.as_deref() != Some(id.as_str()) {
        let api: Api<VSphereMachine> =
            Api::namespaced(r.ctx.client.clone(), &m.namespace().unwrap_or_default());
        let body = json!({
            "apiVersion": VSphereMachine::api_version(&()),
            "kind": "VSphereMachine",
            "metadata": {"name": m.name_any()},
            "spec": {"providerID": id},
        });
        infrasim_controller_runtime::writes::apply(&api, &m.name_any(), MANAGER, &body).await?;
    }
    let mut addresses: Vec<Value> = vm
        .status
        .as_ref()
        .and_then(|s| s.addresses.clone())
        .unwrap_or_default()
        .into_iter()
        .map(|a| json!({"type": "ExternalIP", "address": a}))
        .collect();
    addresses.push(json!({"type": "InternalDNS", "address": vm.name_any()}));
    let provisioned = Condition::new("VirtualMachineProvisioned", true, "Provisioned", "");
    // CAPV copies the VM's per-NIC network status (each with its MAC address).
    let network: Vec<Value> = vm
        .status
        .as_ref()
        .and_then(|s| s.rest.get("network"))
        .and_then(Value::as_array)
        .map(|n| {
            n.iter()
                .filter(|s| s.get("macAddr").is_some())
                .cloned()
                .collect()
        })
        .unwrap_or_default();
    let extra = json!({"addresses": addresses, "network": network, "initialization": {"provisioned": true}});
    write_status(r, m, provisioned, Some(extra)).await
}

/// Writes `provisioned` (and `Ready`, its summary) with `extra` status fields.
async fn write_status(
    r: &Reconciler,
    m: &VSphereMachine,
    provisioned: Condition,
    extra: Option<Value>,
) -> Result<(), Error> {
    let before = m.status.as_ref().map(|s| &s.rest);
    let extra = extra.unwrap_or_else(|| json!({}));
    super::write_status(r, m, before, MANAGER, vec![provisioned], extra).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn machine(control_plane: bool, data: Option<&str>) -> Machine {
        let labels = if control_plane {
            json!({ CONTROL_PLANE_LABEL: "" })
        } else {
            json!({})
        };
        serde_json::from_value(json!({
            "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
            "metadata": {"name": "m", "namespace": "ns", "labels": labels},
            "spec": {"clusterName": "c", "bootstrap": {"dataSecretName": data},
                     "infrastructureRef": {"apiGroup": GROUP, "kind": "VSphereMachine", "name": "m"}},
        }))
        .expect("a Machine")
    }

    fn cluster(infrastructure: bool, control_plane: bool) -> Cluster {
        serde_json::from_value(json!({
            "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
            "metadata": {"name": "c", "namespace": "ns"},
            "spec": {},
            "status": {"initialization": {"infrastructureProvisioned": infrastructure,
                                          "controlPlaneInitialized": control_plane}},
        }))
        .expect("a Cluster")
    }

    fn reason(m: &Machine, c: &Cluster) -> Option<String> {
        waiting_for(m, c).map(|c| c.reason)
    }

    #[test]
    fn a_vm_waits_for_the_clusters_infrastructure_then_for_bootstrap_data() {
        let worker = machine(false, None);
        let waiting = |r: &str| Some(r.to_string());
        assert_eq!(
            reason(&worker, &cluster(false, false)),
            waiting("WaitingForClusterInfrastructureReady")
        );
        assert_eq!(
            reason(&worker, &cluster(true, false)),
            waiting("WaitingForControlPlaneInitialized")
        );
        assert_eq!(
            reason(&machine(true, None), &cluster(true, false)),
            waiting("WaitingForBootstrapData")
        );
        assert_eq!(
            reason(&machine(false, Some("m-data")), &cluster(true, true)),
            None
        );
    }
}
