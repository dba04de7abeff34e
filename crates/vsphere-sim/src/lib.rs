//! A vSphere Web Services simulator: the vim25 object model, an inventory generator with
//! govmomi's VPX model semantics, the SOAP codec, sessions, PropertyCollector and views,
//! served over HTTPS at `/sdk`, so pyvmomi and govmomi talk to it unchanged.
//!
//! One file per managed-object type (`service_instance`, `session_manager`,
//! `property_collector`, `view_manager`, `search_index`, `virtual_machine`, `host`, …), each
//! answering its type's methods through a `dispatch` that the registry (`handlers`) lists by
//! type. What they share sits below them and imports none of them: the configuration
//! (`config`), the managed objects and their store (`objects`), what the simulator
//! remembers (`state`, each object's own state in a file there), a call's context (`call`),
//! and the generator of the starting inventory (`inventory`, a file per type). Above them: the engine that holds the state (`engine`),
//! and the handle with the SOAP request loop (`simulator`), the REST services (`rest`) and
//! the datastore file requests (`datastore_http`), and the Redfish service over the VMs (`bmc`). Values and their encoding are in `value`;
//! the envelope in `soap`.
//!
//! ```
//! use infrasim_vsphere_sim::{Simulator, SimConfig};
//! let sim = Simulator::new(SimConfig::default(), infrasim_clock::SystemClock::shared());
//! let vms = sim.with_inventory(|inv| inv.iter().filter(|o| o.moref.ty == "VirtualMachine").count());
//! assert_eq!(vms, 4);
//! ```

pub mod authorization;
pub mod bmc;
mod call;
mod cloud_init;
mod cluster_compute_resource;
mod config;
mod custom_fields;
mod data;
mod datastore;
mod datastore_browser;
pub mod datastore_files;
mod datastore_http;
mod devices;
mod engine;
mod event_manager;
pub mod fault;
pub mod fault_injection;
mod filter_spec;
mod folder;
pub mod fuzzing;
mod guest;
mod handlers;
mod host;
pub mod instance;
pub mod inventory;
mod journal;
mod managed_entity;
pub mod metrics;
mod objects;
mod pbm;
pub mod persist;
mod property_collector;
pub mod provisioning;
pub mod rest;
mod roles;
mod search_index;
pub mod server;
mod service_instance;
mod session_manager;
pub mod simulator;
mod snapshot;
pub mod soap;
mod state;
mod task;
mod task_kind;
pub mod value;
mod view_manager;
mod virtual_machine;

pub use instance::Instance;
pub use inventory::Model;
pub use provisioning::{
    sample_ovf, LibraryItemSpec, ProvisioningError, TagSpec, TemplateSpec, VmState,
};
pub use simulator::{Changes, Flavor, Reply, SimConfig, Simulator};
