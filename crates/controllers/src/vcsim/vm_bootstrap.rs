//! The VM bootstrap reconciler: a VSphereVM (govmomi mode) stands for a VM CAPV cloned in a
//! simulated vCenter of this process. Once its Machine has bootstrap data and CAPV (or the
//! CAPV stand-in) reports the VM up (`status.ready`: powered on, its guest with an
//! address), the machine "boots": it joins the workload cluster served behind the cluster's
//! ControlPlaneEndpoint as kubeadm would (its Node with providerID `vsphere://<biosUUID>`,
//! and on a control-plane machine the etcd member and static pods), as the in-memory
//! provider's machines do. Deleting the VSphereVM takes the machine out of the cluster.
//!
//! The VM's IP needs no reconciler here: the simulator's guest model hands each VM its own
//! address on its network at power-on, so CAPV's wait on `guest.net` ends by itself.

use super::{Error, Reconciler};
use crate::capi::core::{Cluster, Machine};
use crate::capi::infra::boot::{self, Boot};
use crate::capi::infra::cloud_key;
use crate::capi::standin::certs;
use crate::capv::types::{provider_id, VSphereMachine, VSphereVM};
use infrasim_cloud::API_SERVER_PHASE;
use infrasim_controller_runtime::reconcile::{Cleanup, Next, Reconcile};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::Api;
use kube::{Resource, ResourceExt};
use std::sync::Arc;

/// Upstream's finalizer for the VMs it bootstraps.
pub const FINALIZER: &str = "vcsim.fake.infrastructure.cluster.x-k8s.io";

/// The Machine and Cluster a VM belongs to.
pub(super) struct Owners {
    pub machine: Arc<Machine>,
    pub cluster: Arc<Cluster>,
}

/// A VSphereVM is claimed (its finalizer added) only once it is known to boot here, so the
/// runner holds no finalizer of its own (see [`Reconcile::FINALIZER`]).
impl Reconcile<VSphereVM> for Reconciler {
    type Error = Error;

    async fn apply(&self, vm: Arc<VSphereVM>) -> Result<Next, Error> {
        boot_when_ready(&vm, self).await
    }

    /// The machine leaves its workload cluster, and the VM its finalizer.
    async fn cleanup(&self, vm: Arc<VSphereVM>) -> Result<Cleanup, Error> {
        if vm.finalizers().iter().any(|f| f == FINALIZER) {
            let ns = vm.namespace().unwrap_or_default();
            if let Some(owners) = owners(&vm, self).await? {
                let key = cloud_key(&owners.cluster.name_any(), &ns);
                self.ctx.cloud.remove_machine(&key, &vm.name_any()).await?;
            }
            infrasim_controller_runtime::finalizers::remove(&self.ctx.client, &*vm, FINALIZER)
                .await?;
        }
        Ok(Cleanup::Done)
    }
}

async fn boot_when_ready(vm: &VSphereVM, r: &Reconciler) -> Result<Next, Error> {
    let waits = |why: &str| {
        tracing::debug!(vm = vm.name_any(), "the VM's boot waits: {why}");
        Ok(Next::AwaitChange)
    };
    let Some(owners) = owners(vm, r).await? else {
        return waits("no VSphereMachine, Machine or Cluster owns it yet");
    };
    if owners.machine.spec.bootstrap.data_secret_name.is_none() {
        return waits("its Machine has no bootstrap data");
    }
    let Some(uuid) = vm.spec.bios_uuid.clone().filter(|u| !u.is_empty()) else {
        return waits("no BIOS UUID");
    };
    if infrasim_controller_runtime::finalizers::ensure(&r.ctx.client, vm, FINALIZER).await? {
        return waits("its finalizer was added");
    }
    if vm
        .spec
        .server
        .as_deref()
        .and_then(|s| r.simulators.serving_at(s))
        .is_none()
    {
        // Another vCenter (a real one, or a simulator of another process): not ours to boot.
        return waits("its vCenter is not a simulator of this process");
    }
    // CAPV (or its stand-in) says the VM is up: powered on, its guest with an address. Its
    // status change wakes the VSphereVM; reading the simulator instead, every waiting VM
    // looked through every VM at every change of the simulator (quadratic at thousands).
    if vm.status.as_ref().and_then(|s| s.ready) != Some(true) {
        return waits("not ready");
    }
    match boot_fault(vm, r, &owners).await? {
        Boot::Never => return waits("a MachineNeverBoots fault holds it"),
        Boot::NotBefore(at) if r.ctx.now() < at => {
            tracing::debug!(vm = vm.name_any(), "a MachineBootsLate fault holds it");
            return Ok(Next::At(at));
        }
        _ => {}
    }
    tracing::debug!(vm = vm.name_any(), "booting");
    match boot(vm, r, &owners, &uuid).await? {
        true => Ok(Next::AwaitChange),
        // The certificates were made meanwhile by another reconcile: they are there to be
        // read now, so at once.
        false => Ok(Next::At(r.ctx.now())),
    }
}

/// How the VM boots: held back by a boot fault on its cluster if one met it before it
/// joined (see [`crate::capi::infra::boot`]).
async fn boot_fault(vm: &VSphereVM, r: &Reconciler, owners: &Owners) -> Result<Boot, Error> {
    let ns = vm.namespace().unwrap_or_default();
    let key = cloud_key(&owners.cluster.name_any(), &ns);
    let joined = r
        .ctx
        .cloud
        .machines(&key)
        .is_some_and(|ms| ms.iter().any(|(m, _)| m.name == vm.name_any()));
    let fault = r.ctx.cloud.faults(&key).boot;
    let api: Api<VSphereVM> = Api::namespaced(r.ctx.client.clone(), &ns);
    Ok(boot::decide(&api, vm, fault, joined, r.ctx.now()).await?)
}

/// Brings the machine up in its cluster's workload cluster (each step once); `false` when
/// the cluster's certificates are being made by another reconcile (look again soon).
pub(super) async fn boot<K: Resource<DynamicType = ()>>(
    vm: &K,
    r: &Reconciler,
    owners: &Owners,
    uuid: &str,
) -> Result<bool, Error> {
    let Owners { machine, cluster } = owners;
    let ns = cluster.namespace().unwrap_or_default();
    let key = cloud_key(&cluster.name_any(), &ns);
    let control_plane = machine.is_control_plane();
    let version = machine.spec.version.clone();
    // Before the workload cluster exists, whichever machine comes first: a cluster made
    // without the CA secrets would serve with a CA of its own that the kubeconfig, written
    // later from the secrets, does not trust.
    if !ensure_certificates(r, cluster, &key).await? {
        return Ok(false);
    }
    crate::capi::infra::ensure_cloud_cluster(&r.ctx, cluster, &key, version.as_deref()).await?;
    let node = vm.name_any();
    let cloud = &r.ctx.cloud;
    let first = !cloud
        .machines(&key)
        .is_some_and(|ms| ms.iter().any(|(m, _)| m.name == node));
    cloud
        .register_machine(&key, &node, control_plane, &provider_id(uuid))
        .await?;
    for step in [0, 1, 2, API_SERVER_PHASE] {
        cloud
            .run_machine_step(&key, &node, control_plane, version.as_deref(), step)
            .await?;
    }
    if first {
        let why = format!(
            "joined the workload cluster of {} as Node {node} ({})",
            cluster.name_any(),
            provider_id(uuid)
        );
        r.ctx.event(vm, false, "Bootstrapped", why).await;
    }
    Ok(true)
}

/// The cluster's certificate authorities and admin kubeconfig, as KubeadmControlPlane keeps
/// them (made here when missing, as KubeadmControlPlane makes them before any machine;
/// existing ones are used as they are).
async fn ensure_certificates(r: &Reconciler, cluster: &Cluster, key: &str) -> Result<bool, Error> {
    let ns = cluster.namespace().unwrap_or_default();
    let secrets: Api<Secret> = Api::namespaced(r.ctx.client.clone(), &ns);
    let owner = OwnerReference {
        api_version: Cluster::api_version(&()).to_string(),
        kind: Cluster::kind(&()).to_string(),
        name: cluster.name_any(),
        uid: cluster.uid().unwrap_or_default(),
        ..OwnerReference::default()
    };
    let name = cluster.name_any();
    let cert = |e: certs::CertError| Error::Certificates(e.to_string());
    let Some(ca) = certs::lookup_or_generate(&secrets, &name, &owner, true)
        .await
        .map_err(cert)?
    else {
        // Made meanwhile by another reconcile: read back on the next one.
        return Ok(false);
    };
    let endpoint = r.ctx.cloud.reserve_endpoint(key, None).await?;
    let host = r.ctx.cloud.advertise_address().to_string();
    certs::ensure_kubeconfig(
        &secrets,
        &name,
        &ca,
        &host,
        i32::from(endpoint.port()),
        &owner,
    )
    .await
    .map_err(cert)?;
    Ok(true)
}

/// VSphereVM → its VSphereMachine owner → that one's Machine owner → the Machine's Cluster.
async fn owners(vm: &VSphereVM, r: &Reconciler) -> Result<Option<Owners>, Error> {
    let ns = vm.namespace().unwrap_or_default();
    let Some(vsphere_machine) = owner_of(vm.owner_references(), "VSphereMachine", GOVMOMI_GROUP)
    else {
        return Ok(None);
    };
    let Some(vsphere_machine) = r
        .informers
        .get::<VSphereMachine>(&ns, &vsphere_machine)
        .await?
    else {
        return Ok(None);
    };
    machine_owners(r, &ns, vsphere_machine.owner_references()).await
}

/// CAPV's govmomi-mode group.
const GOVMOMI_GROUP: &str = "infrastructure.cluster.x-k8s.io";

/// The name of the owner of `kind` in `group`.
pub(super) fn owner_of(refs: &[OwnerReference], kind: &str, group: &str) -> Option<String> {
    refs.iter()
        .find(|o| o.kind == kind && o.api_version.split('/').next() == Some(group))
        .map(|o| o.name.clone())
}

/// The Machine among `refs` and its Cluster.
pub(super) async fn machine_owners(
    r: &Reconciler,
    ns: &str,
    refs: &[OwnerReference],
) -> Result<Option<Owners>, Error> {
    let Some(machine) = owner_of(refs, "Machine", "cluster.x-k8s.io") else {
        return Ok(None);
    };
    let Some(machine) = r.informers.get::<Machine>(ns, &machine).await? else {
        return Ok(None);
    };
    let Some(cluster) = r
        .informers
        .get::<Cluster>(ns, &machine.spec.cluster_name)
        .await?
    else {
        return Ok(None);
    };
    Ok(Some(Owners { machine, cluster }))
}
