//! Custom resources and the kube-rs controllers that make them real.
//!
//! Every controller talks to its management plane through a `kube::Client`: over the
//! network from a kubeconfig (`infrasim controller`), or in process over the embedded
//! engine's own service (`infrasim up`). Controllers share a [`Context`] (the client, the
//! simulated cloud, the injected clock, an event recorder), write status by server-side
//! apply, and wait for deadlines on the injected clock ([`wakeups`]), never by polling.
//!
//! - [`capi`]: Cluster API's in-memory infrastructure provider, in the seed's `InMemory*`
//!   and upstream's `Dev*` spellings.
//! - [`capv`]: a stand-in for Cluster API Provider vSphere (VSphereCluster, VSphereMachine,
//!   VSphereVM → a VM in any vCenter), beside the embedded core.
//! - [`vcsim`]: CAPV's vcsim controller: simulated vCenters, control-plane endpoints and the
//!   variables of cluster templates that target them.
//! - [`vmgroup`]: groups of VMs cloned from a template on any vCenter (`VmGroup`).
//! - [`sip`]: bare-metal hosts claimed for tenant clusters, with their load balancers
//!   (`SIPCluster` over metal3's `BareMetalHost`).
//! - [`vino`]: VM-backed bare-metal hosts on the plane's Nodes (`Vino`), run with [`sip`].

pub mod capi;
pub mod capv;
pub mod crds;
pub mod deploy;
pub mod faults;
/// The controller runtime (its own crate, `infrasim-controller-runtime`), under the name the
/// families and the binary know it by.
pub use infrasim_controller_runtime as runtime;
pub mod metal3;
pub mod sip;
#[cfg(test)]
mod test_support;
pub mod vcsim;
pub mod vino;
pub mod vmgroup;

// The runtime's modules under the names other crates know them by.
pub use runtime::context::Context;
pub use runtime::{conditions, context, informers, leader, metrics, wakeups, writes};

/// Which controllers a process runs.
#[derive(Debug, Clone, Default)]
pub struct Selection {
    /// Watch one namespace only (all when `None`).
    pub namespace: Option<String>,
    /// Run the Cluster API in-memory provider (InMemory*, Dev*).
    pub inmemory: bool,
    /// Run the embedded Cluster API core stand-in beside the provider (off when real Cluster
    /// API controllers manage the plane).
    pub capi_core: bool,
    /// Run the vcsim controller (VCenterSimulator, ControlPlaneEndpoint, EnvVar).
    pub vcsim: bool,
    /// Run the VmGroup controller.
    pub vmgroup: bool,
    /// Run the SIPCluster controller, ViNO's, and the metal3 stand-in (where the plane's
    /// BareMetalHost CRD is ours) beside them.
    pub sip: bool,
    /// Serve the core kinds in Cluster API's v1beta1 too (see [`crds::core`]); the plane must
    /// reach the conversion webhook [`capi::conversion::Converter`] in this process.
    pub v1beta1: bool,
    /// How the plane reaches this process's webhooks (conversion, and the embedded core's
    /// admission webhooks).
    pub reach: capi::admission::Reach,
    /// The CAPV stand-in's `NodeAntiAffinity` feature gate (cluster modules; off by
    /// default, as CAPV's).
    pub capv_node_anti_affinity: bool,
    /// Serve the state metrics of the selected families' kinds (`/metrics/state`), when
    /// the process serves metrics: each object's samples kept from the informers the
    /// controllers read (3.5% of the CPU at 1,000 clusters, by a profile).
    pub state_metrics: bool,
    /// Which part of the selected controllers this process runs (see [`Part`]).
    pub part: Part,
}

/// The part of the selected controllers a process runs. In a fleet sharded over several
/// processes (`infrasim controller --shards`), every process hosts its shards' clusters with
/// the in-memory provider, and the one that leads runs everything else once.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Part {
    /// Every selected controller.
    #[default]
    All,
    /// The in-memory provider only.
    Provider,
    /// Every selected controller but the in-memory provider.
    AllButProvider,
}

impl Selection {
    /// The selected controllers, for a startup banner.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if self.inmemory {
            parts.push("Cluster API in-memory provider (InMemory*, Dev*)");
        }
        parts.push(if self.capi_core {
            "the embedded Cluster API core (and in-cluster IPAM)"
        } else {
            "Cluster API core: external"
        });
        if self.vcsim {
            parts.push("vcsim (VCenterSimulator, ControlPlaneEndpoint, EnvVar)");
        }
        if self.capv() {
            parts.push("the CAPV stand-in (VSphereCluster, VSphereMachine, VSphereVM)");
        }
        if self.faults() {
            parts.push("Fault");
        }
        if self.vmgroup {
            parts.push("VmGroup");
        }
        if self.sip {
            parts.push("SIPCluster and Vino (over BareMetalHost)");
        }
        parts.join("; ")
    }

    /// Whether the CAPV stand-in runs: beside the vcsim controller and the embedded core
    /// (which serve CAPV's kinds); never where real Cluster API, and so the real CAPV, runs.
    pub fn capv(&self) -> bool {
        self.vcsim && self.capi_core
    }

    /// Whether the Fault controller runs: wherever this process hosts workload clusters
    /// (the in-memory provider's, the vcsim controller's endpoints).
    pub fn faults(&self) -> bool {
        self.inmemory || self.vcsim
    }

    /// The CRDs the selected controllers serve.
    pub fn crds(
        &self,
    ) -> Vec<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition>
    {
        let mut all = Vec::new();
        if self.inmemory {
            all.extend(crds::provider_reached(self.v1beta1.then_some(&self.reach)));
        }
        if self.capi_core {
            all.extend(crds::core_reached(self.v1beta1.then_some(&self.reach)));
            // No real Cluster API, so no real IPAM provider whose CRDs these would overwrite.
            all.extend(crds::ipam_in_cluster());
        }
        if self.vcsim {
            all.extend(crds::vcsim());
            // With the embedded core there is no real Cluster API, so no real CAPV whose own
            // CRDs these would overwrite.
            if self.capi_core {
                all.extend(crds::capv_reached(self.v1beta1.then_some(&self.reach)));
                all.extend(crds::capv_supervisor_reached(
                    self.v1beta1.then_some(&self.reach),
                ));
                all.extend(crds::vm_operator());
            }
        }
        if self.faults() {
            all.extend(crds::faults());
        }
        if self.vmgroup {
            all.extend(crds::vmgroup());
        }
        if self.sip {
            all.extend(crds::sip());
        }
        all
    }
}

/// Runs the selected controllers until the process ends.
///
/// A boxed future on purpose: an `async fn`'s state machine is compiled again in every crate
/// that polls it (it is never shared as a compiled symbol), and this one holds every
/// controller. Boxed here, the binary links it instead of compiling it a second time;
/// `inline(never)` keeps the box on this side.
#[inline(never)]
pub fn run(ctx: Context, selection: Selection) -> futures::future::BoxFuture<'static, ()> {
    let simulators = std::sync::Arc::new(vcsim::Simulators::default());
    Box::pin(run_selected(ctx, selection, simulators))
}

/// [`run`], with the vcsim controller's simulators kept in `simulators`, for a caller that
/// reads them (a benchmark counting a simulator's calls).
#[inline(never)]
pub fn run_with(
    ctx: Context,
    selection: Selection,
    simulators: std::sync::Arc<vcsim::Simulators>,
) -> futures::future::BoxFuture<'static, ()> {
    Box::pin(run_selected(ctx, selection, simulators))
}

async fn run_selected(
    ctx: Context,
    selection: Selection,
    simulators: std::sync::Arc<vcsim::Simulators>,
) {
    let informers = std::sync::Arc::new(informers::Informers::new(
        ctx.client.clone(),
        selection.namespace.clone(),
    ));
    if selection.part == Part::Provider {
        if selection.inmemory {
            // The leader writes the Faults; a host puts them in force on its own clusters.
            let follow = faults::run(ctx.clone(), informers.clone(), true, faults::Role::Follower);
            futures::join!(capi::infra::run(ctx, informers), follow);
        }
        return;
    }
    if let (Some(metrics), true) = (&ctx.metrics, selection.capi_core) {
        capi::simulation_metrics::register(metrics.registry(), &informers);
    }
    let provider = async {
        if selection.inmemory && selection.part == Part::All {
            capi::infra::run(ctx.clone(), informers.clone()).await;
        }
    };
    let core = async {
        if selection.capi_core {
            futures::join!(
                capi::standin::run(ctx.clone(), informers.clone()),
                capi::ipam::run(ctx.clone(), informers.clone()),
            );
        }
    };
    let vcsim = async {
        if selection.vcsim {
            vcsim::run(
                ctx.clone(),
                informers.clone(),
                simulators,
                selection.capi_core,
            )
            .await;
        }
    };
    let capv = async {
        if selection.capv() {
            let defaults = vcsim::capv_defaults(ctx.client.clone(), informers.clone());
            capv::run(
                ctx.clone(),
                informers.clone(),
                defaults,
                selection.capv_node_anti_affinity,
            )
            .await;
        }
    };
    let vmgroup = async {
        if selection.vmgroup {
            vmgroup::run(ctx.clone(), informers.clone(), selection.vcsim).await;
        }
    };
    let faults = async {
        if selection.faults() {
            // Cluster objects to select by label where Cluster API's kinds are served.
            let clusters = selection.inmemory || selection.capi_core;
            faults::run(
                ctx.clone(),
                informers.clone(),
                clusters,
                faults::Role::Leader,
            )
            .await;
        }
    };
    let sip = async {
        if selection.sip {
            futures::join!(
                sip::run(ctx.clone(), informers.clone()),
                vino::run(ctx.clone(), informers.clone()),
                metal3::run(ctx.clone(), informers.clone())
            );
        }
    };
    // Each kind a task of its own, so it keeps up with its kind however busy the
    // controllers are; they end with this future (see `Tasks`).
    let _state = Tasks(
        follow_state(&ctx, &selection, &informers)
            .into_iter()
            .map(tokio::spawn)
            .collect(),
    );
    futures::join!(provider, core, vcsim, capv, vmgroup, sip, faults);
}

/// Tasks that end when this is dropped.
struct Tasks(Vec<tokio::task::JoinHandle<()>>);

impl Drop for Tasks {
    fn drop(&mut self) {
        for task in &self.0 {
            task.abort();
        }
    }
}

/// The tasks that keep the state metrics of the selected families' kinds (Cluster API's
/// and CAPV's, as their kube-state-metrics configurations define them) from `informers`,
/// when the process serves metrics.
fn follow_state(
    ctx: &Context,
    selection: &Selection,
    informers: &informers::Informers,
) -> Vec<futures::future::BoxFuture<'static, ()>> {
    let (Some(metrics), true) = (&ctx.metrics, selection.state_metrics) else {
        return Vec::new();
    };
    let mut kinds = Vec::new();
    if selection.capi_core {
        kinds.extend(capi::state_metrics::core());
    }
    if selection.inmemory {
        kinds.extend(capi::state_metrics::provider());
    }
    if selection.capv() {
        kinds.extend(capv::state_metrics::all());
    }
    kinds
        .into_iter()
        .map(|(resource, follow)| follow(informers, metrics.state(), resource))
        .collect()
}

/// Stops the task running the controllers ([`run`]) before the runtime goes away. Left to
/// the runtime's shutdown, kube-runtime's controllers can be polled after the reconciles
/// they spawned were cancelled under them, and its join handles unwrap that as a panic;
/// aborted here, a controller is dropped whole with its reconciles.
pub async fn stop(task: tokio::task::JoinHandle<()>) {
    task.abort();
    let _ = task.await;
}
