//! A small client of the vSphere Web Services API (vim25 over SOAP), for controllers that
//! drive a vCenter: ours (`infrasim vcsim`, a VCenterSimulator) or a real one.
//!
//! Why our own rather than a crate: the one maintained Rust binding, `vim_rs`, speaks the VI
//! JSON API first (vCenter 8.0 U1 and later; not older vCenters, not ESXi, not the SOAP
//! endpoint every simulator serves), marks its SOAP transport experimental, and generates
//! the whole API, which a 2-core CI machine cannot compile in its budget. A controller needs
//! a dozen methods; this crate is those, over hyper and rustls like the rest of the project.
//!
//! - [`client`]: one logged-in session per vCenter, shared by many tasks, that logs in
//!   again when the server forgets it (`NotAuthenticated`);
//! - [`trust`]: how the server's certificate is trusted (a pinned thumbprint, or a CA);
//! - [`xml`]: reading answers: managed object references, property values, faults;
//! - [`ops`]: what is built on the calls: listing objects through a container view, reading
//!   properties, cloning, reconfiguring, powering and destroying VMs, tasks, custom fields;
//! - [`updates`]: change notification (a filter over a container view, WaitForUpdatesEx);
//! - [`drs`]: a cluster's DRS groups and rules, and adding a VM to a VM group;
//! - [`rest`]: the vSphere Automation API's session and cluster modules;
//! - [`redfish`]: the Redfish service infrasim's simulators serve beside `/sdk`.

pub mod client;
pub mod drs;
pub mod ops;
pub mod pbm;
pub mod redfish;
pub mod rest;
pub mod trust;
pub mod updates;
pub mod xml;

pub use client::{Client, Credentials};
pub use ops::{CloneSpec, NetworkBacking, TaskState};
pub use trust::Trust;
pub use updates::{ObjectUpdate, UpdateSet, Watch};
pub use xml::{Moref, ObjectContent, Val};

/// Why a call failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The server could not be reached, or the connection broke.
    #[error("{0}")]
    Transport(String),
    /// The server answered with a SOAP fault: its type (`NotAuthenticated`, `InvalidLogin`,
    /// `DuplicateName`, `ManagedObjectNotFound`, ...) and message.
    #[error("{kind}: {message}")]
    Fault { kind: String, message: String },
    /// The answer was not what the method returns.
    #[error("unexpected answer: {0}")]
    Answer(String),
    /// The settings given cannot work (a bad URL, an unreadable CA bundle, ...).
    #[error("{0}")]
    Config(String),
}

impl Error {
    /// The fault's type, for a SOAP fault.
    pub fn fault_kind(&self) -> Option<&str> {
        match self {
            Error::Fault { kind, .. } => Some(kind),
            _ => None,
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
