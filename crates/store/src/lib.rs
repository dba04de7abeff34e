//! The versioned object store under every infrasim API server.
//!
//! A [`Store`] holds many independent [`Group`]s (one per simulated cluster, one for the
//! management plane). A group stores objects by resource and [`ObjectKey`], each object
//! encoded once ([`StoredObject`]), and gives Kubernetes semantics that need no knowledge of
//! kinds: `uid`, `creationTimestamp`, `generation`, a strictly increasing `resourceVersion`,
//! optimistic concurrency, finalizers and `deletionTimestamp`, ownerReference garbage
//! collection, consistent snapshots at past resourceVersions, and watches that resume with no
//! gap and no duplicate.
//!
//! ```
//! use infrasim_store::{Store, StoreConfig, ObjectKey};
//! use serde_json::json;
//!
//! let store = Store::in_memory(StoreConfig::default());
//! let group = store.create_group("management").unwrap();
//! let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
//!                 "metadata": {"name": "a", "namespace": "default"}});
//! let created = group.create("configmaps", cm, Default::default()).unwrap();
//! assert_eq!(created.meta.resource_version, 1);
//! assert!(group.get("configmaps", &ObjectKey::new("default", "a")).is_some());
//! ```

mod backend;
pub mod durability;
mod encode;
mod error;
mod event;
mod field_index;
mod fields;
mod group;
mod keyset;
mod labels;
mod object;
mod packing;
pub mod shared_names;
mod store;
mod uid_index;

pub use backend::{Backend, GroupImage, MemoryBackend};
pub use encode::{to_vec_list_meta, to_vec_typed};
pub use error::{Result, StoreError};
pub use event::{Event, EventType};
pub use fields::SelectableFields;
pub use group::{
    Decoded, DeleteOptions, DeleteOutcome, Fields, Group, Propagation, Read, ReadAt, ResourceMap,
    Snapshot, Watch, WatchError, FOREGROUND_FINALIZER, ORPHAN_FINALIZER,
};
pub use labels::Labels;
pub use object::{format_time, Derived, ObjectKey, ObjectMeta, OwnerRef, StoredObject};
pub use store::{FreshWindow, Store, StoreConfig};
