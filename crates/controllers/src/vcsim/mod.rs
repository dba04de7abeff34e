//! The job of CAPV's vcsim controller: simulated vCenters (`VCenterSimulator`, each its own
//! simulator in this process, any number at once), control-plane endpoints reserved on the
//! simulated cloud (`ControlPlaneEndpoint`), and the variables a cluster template needs to
//! target both (`EnvVar`).
//!
//! Each reconciler writes under a field manager of its own, `infrasim-vcsim-controller/<its
//! file>` (a `MANAGER` beside it), so an object's managedFields say which one wrote what.

mod endpoint;
mod envvar;
pub mod faults;
pub mod simulators;
pub mod types;
pub(crate) mod vcenter;
pub mod virtual_machine;
mod vm_bootstrap;
mod vmoperator;

pub use simulators::{ChangeWaits, Simulators};

use infrasim_controller_runtime::context::Context;
use infrasim_controller_runtime::informers::Informers;
use infrasim_controller_runtime::reconcile;
use infrasim_controller_runtime::triggers::filtered;
use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};
use std::sync::Arc;
use types::{ControlPlaneEndpoint, EnvVar, VCenterSimulator};

/// Why a reconcile failed (it is retried).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Kube(#[from] kube::Error),
    #[error(transparent)]
    Cloud(#[from] infrasim_cloud::CloudError),
    #[error(transparent)]
    Provider(#[from] crate::capi::infra::Error),
    #[error("the cluster's certificates: {0}")]
    Certificates(String),
    #[error("the simulator: {0}")]
    Simulator(String),
    #[error("vm-operator's dependencies: {0}")]
    Dependencies(String),
}

/// What the vcsim reconcilers share: the context, the process's caches and its simulators.
pub struct Reconciler {
    pub ctx: Context,
    pub informers: Arc<Informers>,
    pub simulators: Arc<Simulators>,
    /// The public key every EnvVar hands out as `VSPHERE_SSH_AUTHORIZED_KEY` (one per
    /// process, as upstream's controller makes one at start).
    pub ssh_authorized_key: String,
    /// VirtualMachines waiting for their guest's address.
    pub virtual_machine_waits: ChangeWaits<virtual_machine::VirtualMachine>,
    /// EnvVars waiting for a place they name to appear in their simulator.
    pub envvar_waits: ChangeWaits<EnvVar>,
}

/// Runs the vcsim controllers until the process ends, on the process's informers, with the
/// simulators they start kept in `simulators`. With `vm_operator`, vm-operator's part is
/// played too (VirtualMachines get their VMs): only where no real vm-operator runs, as with
/// the embedded core, which installs vm-operator's kinds.
pub async fn run(
    ctx: Context,
    informers: Arc<Informers>,
    simulators: Arc<Simulators>,
    vm_operator: bool,
) {
    // What waits on a simulator is woken by the simulator's change notification: a
    // simulator of this process tells its subscribers, as it tells WaitForUpdates calls.
    let (virtual_machine_waits, virtual_machines_woken) = ChangeWaits::new();
    let (envvar_waits, envvars_woken) = ChangeWaits::new();
    let r = Arc::new(Reconciler {
        ctx: ctx.clone(),
        informers: informers.clone(),
        simulators,
        ssh_authorized_key: envvar::ssh_authorized_key(),
        virtual_machine_waits,
        envvar_waits,
    });
    let vcenters = infrasim_controller_runtime::triggers::controller(
        &informers.of::<VCenterSimulator>(),
        None,
    );
    let endpoints = infrasim_controller_runtime::triggers::controller(
        &informers.of::<ControlPlaneEndpoint>(),
        None,
    );
    let envvars = envvar_controller(&informers).reconcile_on(envvars_woken);
    // A VM boots when its Machine gets bootstrap data: the Machine's change wakes the
    // VSphereVM CAPV names after its VSphereMachine (the Machine's infrastructure).
    let vms = infrasim_controller_runtime::triggers::controller(
        &informers.of::<crate::capv::types::VSphereVM>(),
        None,
    )
    .watches_shared_stream(
        filtered(
            &informers.of::<crate::capi::core::Machine>(),
            crate::capi::triggers::machine_spec,
        ),
        |m| named_after_infrastructure(&m, "infrastructure.cluster.x-k8s.io"),
    )
    // And when CAPV reports its VM up (`status.ready`).
    .watches_shared_stream(
        filtered(&informers.of::<crate::capv::types::VSphereVM>(), vm_ready),
        |v| Some(ObjectRef::from_obj(&*v)),
    );
    // Dependencies made from a simulator wait for it to serve: its status wakes them.
    let dependencies = infrasim_controller_runtime::triggers::controller(
        &informers.of::<types::VMOperatorDependencies>(),
        None,
    )
    .watches_shared_stream(filtered(&informers.of::<VCenterSimulator>(), serving), {
        let deps = informers.of::<types::VMOperatorDependencies>().store();
        move |v: Arc<VCenterSimulator>| {
            let mut woken = referrers(&deps, &*v, |d| d.simulator_ref());
            woken.extend(served_by(&deps, &v));
            woken
        }
    });
    let vm_operator_vms =
        virtual_machine_controller(&informers).reconcile_on(virtual_machines_woken);
    let vm_operator_vms = async {
        if vm_operator {
            reconcile::run(&ctx, vm_operator_vms, r.clone()).await;
        }
    };
    futures::join!(
        vm_operator_vms,
        reconcile::run(&ctx, vcenters, r.clone()),
        reconcile::run(&ctx, endpoints, r.clone()),
        reconcile::run(&ctx, envvars, r.clone()),
        reconcile::run(&ctx, vms, r.clone()),
        reconcile::run(&ctx, dependencies, r.clone()),
    );
}

/// The CAPV stand-in's manager credentials for a server: those of the VCenterSimulator
/// serving there (from the cache, else asked of the API server, so a cluster made just
/// after the plane started is not reported unreachable for a moment for no reason).
pub fn capv_defaults(
    client: kube::Client,
    informers: Arc<Informers>,
) -> crate::capv::credentials::Defaults {
    Arc::new(move |server: String| {
        let client = client.clone();
        let informers = informers.clone();
        Box::pin(async move {
            let wanted = simulators::authority(&server).to_string();
            let serves = |s: &types::VCenterSimulatorStatus| !s.host.is_empty() && s.host == wanted;
            let cached = informers
                .of::<VCenterSimulator>()
                .store()
                .state()
                .into_iter()
                .filter_map(|s| s.status.clone())
                .find(serves);
            let status = match cached {
                Some(s) => Some(s),
                None => kube::Api::<VCenterSimulator>::all(client)
                    .list(&Default::default())
                    .await
                    .ok()?
                    .items
                    .into_iter()
                    .filter_map(|s| s.status)
                    .find(serves),
            }?;
            Some(crate::capv::credentials::ManagerCredentials {
                username: status.username,
                password: status.password,
                thumbprint: status.thumbprint,
            })
        })
    })
}

/// The EnvVar controller. An EnvVar is written from its simulator's and endpoint's status:
/// either changing wakes the EnvVars that name it (and so does a change of the
/// VMOperatorDependencies it names).
fn envvar_controller(informers: &Informers) -> infrasim_controller_runtime::Controller<EnvVar> {
    let envvars = informers.of::<EnvVar>();
    let by_simulator = {
        let envvars = envvars.store();
        move |v: Arc<VCenterSimulator>| referrers(&envvars, &*v, |e| e.simulator_ref())
    };
    let by_endpoint = {
        let envvars = envvars.store();
        move |c: Arc<ControlPlaneEndpoint>| referrers(&envvars, &*c, |e| Some(e.endpoint_ref()))
    };
    let by_dependencies = {
        let envvars = envvars.store();
        move |d: Arc<types::VMOperatorDependencies>| {
            referrers(&envvars, &*d, |e| e.dependencies_ref())
        }
    };
    infrasim_controller_runtime::triggers::controller(&envvars, None)
        .watches_shared_stream(
            filtered(&informers.of::<VCenterSimulator>(), serving),
            by_simulator,
        )
        .watches_shared_stream(
            filtered(&informers.of::<ControlPlaneEndpoint>(), reserved),
            by_endpoint,
        )
        .watches_shared_stream(
            infrasim_controller_runtime::triggers::every_change(
                &informers.of::<types::VMOperatorDependencies>(),
            ),
            by_dependencies,
        )
}

/// vm-operator's VirtualMachine controller: a VM waits for its namespace's dependencies
/// (their change wakes it) and for its Machine's bootstrap data.
fn virtual_machine_controller(
    informers: &Informers,
) -> infrasim_controller_runtime::Controller<virtual_machine::VirtualMachine> {
    let vms = informers.of::<virtual_machine::VirtualMachine>();
    let store = vms.store();
    infrasim_controller_runtime::triggers::controller(&vms, None)
        .watches_shared_stream(
            infrasim_controller_runtime::triggers::every_change(
                &informers.of::<types::VMOperatorDependencies>(),
            ),
            move |d| {
                let ns = d.namespace();
                store
                    .state()
                    .iter()
                    .filter(|v| v.namespace() == ns)
                    .map(|v| ObjectRef::from_obj(&**v))
                    .collect::<Vec<_>>()
            },
        )
        // Its Machine getting bootstrap data: CAPV names the VirtualMachine after the
        // VSphereMachine that is the Machine's infrastructure.
        .watches_shared_stream(
            filtered(
                &informers.of::<crate::capi::core::Machine>(),
                crate::capi::triggers::machine_spec,
            ),
            |m| named_after_infrastructure(&m, "vmware.infrastructure.cluster.x-k8s.io"),
        )
}

/// The dependencies that name no simulator but a vCenter URL `v` serves at: a simulator of
/// this process they were waiting for.
fn served_by(
    deps: &kube::runtime::reflector::Store<types::VMOperatorDependencies>,
    v: &VCenterSimulator,
) -> Vec<ObjectRef<types::VMOperatorDependencies>> {
    let Some(host) = v.status.as_ref().map(|s| &s.host).filter(|h| !h.is_empty()) else {
        return Vec::new();
    };
    deps.state()
        .iter()
        .filter(|d| d.spec.vcenter_simulator_ref.is_none())
        .filter(|d| {
            d.spec
                .vcenter
                .as_ref()
                .is_some_and(|c| simulators::authority(&c.server_url) == host)
        })
        .map(|d| ObjectRef::from_obj(&**d))
        .collect()
}

/// Whether CAPV reports a VSphereVM's VM up.
fn vm_ready(v: &crate::capv::types::VSphereVM) -> Option<u64> {
    hash((v.uid(), v.status.as_ref().and_then(|s| s.ready)))
}

/// What of a simulator its EnvVars are written from.
fn serving(v: &VCenterSimulator) -> Option<u64> {
    let s = v.status.as_ref();
    hash((
        v.uid(),
        s.map(|s| (&s.host, &s.username, &s.password, &s.thumbprint)),
    ))
}

/// What of an endpoint its EnvVars are written from.
fn reserved(c: &ControlPlaneEndpoint) -> Option<u64> {
    hash((c.uid(), c.status.as_ref().map(|s| (&s.host, s.port))))
}

fn hash(value: impl std::hash::Hash) -> Option<u64> {
    use std::hash::{DefaultHasher, Hasher};
    let mut h = DefaultHasher::new();
    value.hash(&mut h);
    Some(h.finish())
}

/// The EnvVars whose reference (`of`) names `obj`.
fn referrers<R, K>(
    store: &kube::runtime::reflector::Store<R>,
    obj: &K,
    of: impl Fn(&R) -> Option<(String, String)>,
) -> Vec<ObjectRef<R>>
where
    R: Resource<DynamicType = ()> + Clone,
    K: Resource<DynamicType = ()>,
{
    let wanted = (obj.namespace().unwrap_or_default(), obj.name_any());
    store
        .state()
        .iter()
        .filter(|e| of(e).is_some_and(|r| r == wanted))
        .map(|e| ObjectRef::from_obj(&**e))
        .collect()
}

/// The object CAPV names after a Machine's infrastructure: a VSphereMachine of `group` (its
/// VSphereVM, or in supervisor mode its VirtualMachine, has the same name).
fn named_after_infrastructure<R: Resource<DynamicType = ()>>(
    m: &crate::capi::core::Machine,
    group: &str,
) -> Option<ObjectRef<R>> {
    let infra = &m.spec.infrastructure_ref;
    (infra.kind == "VSphereMachine" && infra.api_group == group)
        .then(|| ObjectRef::new(&infra.name).within(&m.namespace().unwrap_or_default()))
}
