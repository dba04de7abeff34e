//! The controllers that run inside the API server process beside its registry, as
//! kube-apiserver runs its own (system namespaces, RBAC bootstrap, API autoregistration,
//! the apiextensions controllers) and as kube-controller-manager runs the namespace
//! controllers of every cluster. Each writes through the API ([`crate::SystemWriter`]) as
//! the component it stands for.
//!
//! They sit above the registry: the registry reaches them only through the [`HOOKS`] it is
//! given in its state, so the write path never imports a controller (and a controller's
//! writes take the write path like anyone's).

mod apiservice;
mod crd;
mod namespace;
mod rbac;
mod tokens;

use crate::state::{Hooks, State};
use std::sync::Arc;

/// What the registry calls after writes of the kinds these controllers follow.
pub(crate) const HOOKS: Hooks = Hooks {
    namespace_created: namespace::populate,
    namespace_terminating,
    crd_written: crd::register,
    crd_deleting,
    token_secret_written: tokens::populate_secret,
    service_account_created: tokens::populate_for_account,
};

fn namespace_terminating(state: &Arc<State>, name: &str) {
    namespace::spawn_finalizer(state.clone(), name.to_string());
}

fn crd_deleting(state: &Arc<State>, name: &str) {
    crd::spawn_cleanup(state.clone(), name.to_string());
}

/// What a server does first over its group: the initial namespaces, the RBAC bootstrap, the
/// stored CRDs served again and the local APIServices; a deletion left unfinished resumes.
pub(crate) fn start(state: &Arc<State>) {
    namespace::bootstrap(state);
    rbac::bootstrap(state);
    crd::register_all(state);
    apiservice::bootstrap(state);
    apiservice::sync_custom(state);
}
