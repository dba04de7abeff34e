//! A Redfish service (DMTF DSP0266) in front of machines that are not there, as sushy-tools
//! puts one in front of libvirt's domains: one service answers for many systems, each with
//! its manager (the BMC, with virtual media) and its chassis, behind HTTP Basic or Redfish
//! sessions, with ETags on every resource and errors as Redfish's Base message registry
//! names them.
//!
//! The protocol lives here and knows nothing of vSphere: what a system *is* comes from a
//! [`Machines`] backend (the vSphere simulator's VMs implement it), which powers machines
//! and keeps, with each machine, what its BMC holds for it (a [`Record`]: the boot
//! override, the inserted media, BIOS settings). The service keeps its own accounts and
//! sessions.
//!
//! The pieces: `routes` parses a path into the resource it names; `resources/` renders each
//! resource as JSON (a file per area: the service root, systems, managers, chassis, the
//! account, session, update and task services); `actions` changes things (resets, boot
//! options, media, BIOS); `service` authenticates a request, checks its ETag and sends it
//! to the right one; `errors` are the registry's messages. `client` is the other side: a
//! provisioner's client of one BMC (what metal3's stand-in drives hosts with).

mod accounts;
mod actions;
pub mod client;
mod errors;
mod machines;
mod resources;
mod routes;
mod service;
mod sessions;

pub use errors::RedfishError;
pub use machines::{
    BootOverride, Disk, Hardware, LastBoot, Machines, Media, Nic, Power, PowerOp, Record,
};
pub use service::{Reply, Request, Service, MAX_BODY};

/// Where every Redfish resource lives.
pub const ROOT: &str = "/redfish/v1";
