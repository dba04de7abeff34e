//! The benchmarks behind `infrasim bench`: each measures one of infrasim's servers or
//! controllers against a baseline in the same run and prints a table (`api` against a bare
//! hyper server, `etcd` and `store` against Debian's etcd, `vsphere` against govmomi's
//! simulator, and the controllers against naive loops). A crate of its own so the main
//! binary builds without them: `infrasim` links it only with its `bench` feature.

mod api;
mod capi;
mod capi_dashboard;
mod capi_scrape;
mod capv;
mod cel;
mod etcd;
mod faults;
mod fleet;
mod harness;
mod process;
mod redfish;
mod scrape;
mod sip;
mod store;
mod vcsim;
mod vim;
mod vmgroup;
mod vsphere;
mod vsphere_updates;

use clap::{Args, Subcommand};

/// `infrasim bench <what>`.
#[derive(Debug, Args)]
pub struct BenchArgs {
    #[command(subcommand)]
    what: BenchWhat,
}

#[derive(Debug, Subcommand)]
enum BenchWhat {
    /// GET, LIST and watch fan-out against the API server and a bare server.
    Api(api::ApiBenchArgs),
    /// N Cluster API clusters through the embedded plane: time until Available, reconciles
    /// per second, peak RSS.
    Capi(capi::CapiBenchArgs),
    /// N clusters of CAPV's default flavor (VMs cloned in one VCenterSimulator by the CAPV
    /// stand-in), beside the in-memory provider's N: time until Available, CPU, vCenter calls.
    Capv(capv::CapvBenchArgs),
    /// etcd Status + MemberList per second through a cluster's endpoint and a port-forward,
    /// against Debian's etcd server.
    Etcd(etcd::EtcdBenchArgs),
    /// N Cluster API clusters, a share of them faulted (a worker's node NotReady): the time
    /// from the Faults to the node Unknown, the health check's mark and the remediation.
    Faults(faults::FaultsBenchArgs),
    /// N simulated workload clusters in this process, as `infrasim fleet` makes them: time
    /// until every one is up, CPU and memory per cluster, and idle cost.
    Fleet(fleet::FleetBenchArgs),
    /// `infrasim vcsim` against govmomi's simulator (Debian's library): server CPU per
    /// RetrievePropertiesEx, per clone and per listing of every VM, memory and startup, at
    /// several model sizes.
    Vsphere(vsphere::VsphereBenchArgs),
    /// One scrape of N workload clusters' request families: infrasim's tables against
    /// prometheus-client's `Family` holding the same series (render time, size, record cost).
    Scrape(scrape::ScrapeBenchArgs),
    /// The vcsim controller: N VCenterSimulators in one process (time to Ready, memory), and
    /// M VMs cloned in one of them the way CAPV clones them.
    Vcsim(vcsim::VcsimBenchArgs),
    /// The VmGroup controller: time for an N-replica group to be ready and vCenter calls per
    /// VM, against a naive list-everything loop.
    Vmgroup(vmgroup::VmGroupBenchArgs),
    /// The SIPCluster controller: time to place N SIPClusters over M BareMetalHosts, one at a
    /// time.
    Sip(sip::SipBenchArgs),
    /// The Redfish service of `infrasim vcsim` against sushy-tools' emulator: requests per
    /// second and server CPU per request for a GET of a system and for a reset.
    Redfish(redfish::RedfishBenchArgs),
    /// Durable state: creates per second through the API, durable against in-memory and
    /// against Debian's etcd puts; restart time and disk bytes per object.
    Store(store::StoreBenchArgs),
}

/// Runs the benchmark `args` names and prints its table.
pub async fn run(args: BenchArgs) -> anyhow::Result<()> {
    match args.what {
        BenchWhat::Api(a) => api::run(a).await,
        BenchWhat::Capi(a) => capi::run(a).await,
        BenchWhat::Capv(a) => capv::run(a).await,
        BenchWhat::Etcd(a) => etcd::run(a).await,
        BenchWhat::Faults(a) => faults::run(a).await,
        BenchWhat::Fleet(a) => fleet::run(a).await,
        BenchWhat::Vsphere(a) => vsphere::run(a).await,
        BenchWhat::Scrape(a) => scrape::run(a).await,
        BenchWhat::Vcsim(a) => vcsim::run(a).await,
        BenchWhat::Vmgroup(a) => vmgroup::run(a).await,
        BenchWhat::Sip(a) => sip::run(a).await,
        BenchWhat::Redfish(a) => redfish::run(a).await,
        BenchWhat::Store(a) => store::run(a).await,
    }
}

/// Stops the task running the controllers before the runtime goes away (see
/// [`infrasim_controllers::stop`]).
pub(crate) use infrasim_controllers::stop as stop_controllers;
