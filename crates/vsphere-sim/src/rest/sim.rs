//! The simulator as one REST service sees it: the engine that holds the SOAP side (sessions
//! to borrow, the inventory to read, VMs to create) and the service's own state behind its
//! lock. The router (`rest`) makes one per service and request, so a service reaches only its
//! own state and never names the others' nor the `Simulator` handle that holds them all.

use crate::engine::Engine;
use std::sync::{Mutex, MutexGuard};

pub(crate) struct Sim<'a, S> {
    pub engine: &'a Engine,
    own: &'a Mutex<S>,
}

impl<'a, S> Sim<'a, S> {
    pub fn new(engine: &'a Engine, own: &'a Mutex<S>) -> Self {
        Sim { engine, own }
    }

    /// The service's own state, locked. A lock poisoned by a panicking request is taken as
    /// it is, rather than failing every later request of the service.
    pub fn own_state(&self) -> MutexGuard<'a, S> {
        self.own.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn now(&self) -> chrono::DateTime<chrono::Utc> {
        self.engine.now()
    }

    pub fn config(&self) -> &crate::config::SimConfig {
        self.engine.config()
    }

    pub fn with_inventory<T>(&self, f: impl FnOnce(&crate::objects::Inventory) -> T) -> T {
        self.engine.with_inventory(f)
    }

    pub fn with_state<T>(
        &self,
        f: impl FnOnce(&mut crate::state::State, &crate::call::Call<'_>) -> T,
    ) -> T {
        self.engine.with_state(f)
    }

    pub fn soap_session_user(&self, cookie: &str) -> Option<String> {
        self.engine.soap_session_user(cookie)
    }
}
