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

pub mod capi;
pub mod conditions;
pub mod context;
pub mod crds;
mod schema;
pub mod wakeups;

pub use context::Context;
