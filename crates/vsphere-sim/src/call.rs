//! What a SOAP call's handler gets besides its arguments (`Call`), what a dispatched call
//! comes to (`Flow`), and the argument helpers every handler shares.
//!
//! Kept below the managed-object modules and the registry so that they can all name it
//! without importing `simulator`, which dispatches to them.

use crate::config::SimConfig;
use crate::fault::Fault;
use crate::soap::Element;
use crate::state::State;
use crate::value::Moref;
use chrono::{DateTime, Utc};
use std::sync::Mutex;

/// What a SOAP call needs besides its arguments.
pub(crate) struct Call<'a> {
    pub config: &'a SimConfig,
    pub now: DateTime<Utc>,
    /// The caller's session key, when it has a valid one.
    pub session: Option<String>,
    pub user_agent: &'a str,
    /// A cookie to set on the response (Login).
    pub set_session: Option<String>,
    /// The files uploaded to datastores (read by the datastore browser).
    pub files: &'a Mutex<crate::datastore_files::DatastoreFiles>,
    /// Runs what the timeline has due (the registry's `handlers::run_due`). Handed down
    /// here rather than imported so that `task::start`, which sits below the modules that
    /// operations route to, can still run a zero-delay task's operation before its method
    /// returns, as vCenter's fast tasks appear to.
    pub runner: fn(&mut State, &Call<'_>),
}

impl Call<'_> {
    /// Runs everything due by now, in order (running may schedule more).
    pub fn run_due(&self, state: &mut State) {
        (self.runner)(state, self)
    }
}

/// What a dispatched call came to.
pub(crate) enum Flow {
    /// The response body.
    Done(String),
    /// Nothing to report yet (WaitForUpdates): wait and try again.
    Wait,
}

/// A moref from a required argument.
pub(crate) fn arg_moref(args: &Element, name: &str) -> Result<Moref, Fault> {
    args.child(name)
        .and_then(Element::moref)
        .ok_or_else(|| Fault::invalid_argument(name))
}
