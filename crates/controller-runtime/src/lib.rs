//! The controller runtime every family runs on: the [`Context`](context::Context) a
//! controller is given (client, simulated cloud, injected clock, vSphere handles, events),
//! shared [`informers`] and their caches, what wakes a controller ([`triggers`]) and the
//! [`index`]es that map a related change to the objects it concerns, deadlines on the injected
//! clock ([`wakeups`]), leader election, one [`reconcile`] shape and runner (finalizers, backoff, deadlines), status writes by server-side apply
//! ([`writes`]), conditions as Kubernetes and Cluster API shape them, the metrics hooks, and the
//! watches that keep the objects' [`state_metrics`] current.
//!
//! Beside them: the conditions' schema in CRDs ([`schema`]).
//!
//! The families (`capi`, `vcsim`, `vmgroup`, `sip`, `vino`, in `infrasim-controllers`) sit
//! above this crate and never import each other's runtime pieces: what two families share
//! lives here. A crate of its own so that nothing here can reach into a family.

pub mod client_metrics;
pub mod conditions;
pub mod context;
pub mod controller;
pub mod finalizers;
pub mod index;
pub mod informers;
pub mod leader;
pub mod metrics;
pub mod placement;
pub mod prometheus;
pub mod reconcile;
pub mod schema;
pub mod shards;
pub mod state_metrics;
pub mod triggers;
pub mod vcenters;
pub mod wakeups;
pub mod workqueue;
pub mod writes;

pub use context::Context;
pub use controller::Controller;
