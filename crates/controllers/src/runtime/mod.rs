//! The controller runtime every family runs on: the [`Context`](context::Context) a
//! controller is given (client, simulated cloud, injected clock, vSphere handles, events),
//! shared [`informers`] and their caches, what wakes a controller ([`triggers`]) and the
//! [`index`]es that map a related change to the objects it concerns, deadlines on the injected
//! clock ([`wakeups`]), leader election, one [`reconcile`] shape and runner (finalizers, backoff, deadlines), status writes by server-side apply
//! ([`writes`]), conditions as Kubernetes and Cluster API shape them, and the metrics hooks.
//!
//! The families (`capi`, `vcsim`, `vmgroup`, `sip`, `vino`) sit above it and never import
//! each other's runtime pieces: what two families share lives here.

pub mod conditions;
pub mod context;
pub(crate) mod finalizers;
pub mod index;
pub mod informers;
pub mod leader;
pub mod metrics;
pub mod reconcile;
pub mod triggers;
pub mod wakeups;
pub mod writes;
