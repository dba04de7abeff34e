//! A simulated etcd cluster behind etcd's own v3 gRPC API, so that etcdctl, clientv3 and
//! Cluster API's KubeadmControlPlane manage it as they manage a real one.
//!
//! - [`EtcdCluster`] is one cluster: its members (which follow the control-plane machines of a
//!   simulated workload cluster, named after their nodes), the leader and raft term, alarms,
//!   a small key space with revisions and watches, and leases on the injected clock.
//! - [`MemberService`] answers as one member: [`MemberService::routes`] is every service of
//!   the API as one tower service, and [`serve`] serves it over TLS on a listener.
//!
//! The protobuf code is generated at build time from `proto/` (our own transcription of the
//! API's messages and field numbers) by protox, a protobuf compiler in Rust: no `protoc` is
//! needed on the machine.

mod cluster;
mod keyspace;
mod kv;
mod lease;
mod listener;
mod members;
mod service;
mod snapshot;
mod watch;

pub use cluster::{EtcdCluster, Keeper, KeysChange, KeysImage, Lease, StateGuard};
pub use keyspace::KeyError;
pub use listener::{serve, serve_connection, tls_config};
pub use members::{Member, MemberError, MembershipImage};
pub use service::{handle, MemberService, ETCD_VERSION};

/// The generated messages, servers and clients.
#[allow(clippy::all, missing_docs)]
pub mod pb {
    pub mod mvccpb {
        tonic::include_proto!("mvccpb");
    }
    pub mod etcdserverpb {
        tonic::include_proto!("etcdserverpb");
    }
}
