//! The controller runtime every family runs on: the [`Context`](context::Context) a
//! controller is given (client, simulated cloud, injected clock, vSphere handles, events),
//! shared [`informers`] and their caches, what wakes a controller ([`triggers`]) and the
//! [`index`]es that map a related change to the objects it concerns, deadlines on the injected
//! clock ([`wakeups`]), leader election, one [`reconcile`] shape and runner (finalizers, backoff, deadlines), status writes by server-side apply
//! ([`writes`]), conditions as Kubernetes and Cluster API shape them, and the metrics hooks.
//!
//! Beside them: the conditions' schema in CRDs ([`schema`]), how a controller installs its
//! CRDs ([`crds`]), and vCenter credentials as the vSphere families read them ([`vcenter`]).
//!
//! The families (`infrasim-capi`, `infrasim-vcsim`, `infrasim-vmgroup`, `infrasim-sip`,
//! `infrasim-vino`) are crates above this one; what two families share lives here, so that
//! they build side by side.

pub mod conditions;
pub mod context;
pub mod crds;
pub mod finalizers;
pub mod index;
pub mod informers;
pub mod leader;
pub mod metrics;
pub mod reconcile;
pub mod schema;
#[cfg(any(test, feature = "test-support"))]
pub mod test_support;
pub mod triggers;
pub mod vcenter;
pub mod wakeups;
pub mod writes;

pub use context::Context;
