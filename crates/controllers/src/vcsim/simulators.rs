//! The simulators this process runs, one per `VCenterSimulator` (by `namespace/name`). The
//! VCenterSimulator reconciler starts and stops them; the EnvVar reconciler (and later the VM
//! reconcilers) reach their inventories through here. They live as long as the process:
//! unlike upstream's controller, any number run at once.

use infrasim_vsphere_sim::{Instance, Simulator};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Mutex;

/// What a running simulator's status reports.
#[derive(Debug, Clone, PartialEq)]
pub struct Serving {
    pub addr: SocketAddr,
    pub username: String,
    pub password: String,
    /// SHA-256 of its certificate, colon-separated upper-case hex.
    pub thumbprint: String,
}

/// The running simulators, by `namespace/name` of their VCenterSimulator.
#[derive(Default)]
pub struct Simulators {
    running: Mutex<HashMap<String, Instance>>,
}

impl std::fmt::Debug for Simulators {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Simulators")
            .field("running", &self.lock().len())
            .finish()
    }
}

/// The registry key of a VCenterSimulator.
pub fn key(namespace: &str, name: &str) -> String {
    format!("{namespace}/{name}")
}

impl Simulators {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Instance>> {
        // A panic elsewhere while holding the lock leaves the map itself intact.
        self.running.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Keeps `instance` as the simulator of `key`.
    pub fn insert(&self, key: &str, instance: Instance) {
        if let Some(old) = self.lock().insert(key.to_string(), instance) {
            // Replaced (never expected): the old one stops serving as it is dropped.
            drop(old);
        }
    }

    /// The simulator of `key`, if it runs here.
    pub fn simulator(&self, key: &str) -> Option<Simulator> {
        self.lock().get(key).map(|i| i.simulator().clone())
    }

    /// The simulator serving at `server` (`https://host:port`, as a VSphereVM's
    /// `spec.server` or `VSPHERE_SERVER` names it), if it runs here.
    pub fn serving_at(&self, server: &str) -> Option<Simulator> {
        let authority = server
            .trim_start_matches("https://")
            .split('/')
            .next()
            .unwrap_or_default();
        let addr: SocketAddr = authority.parse().ok()?;
        self.lock()
            .values()
            .find(|i| i.addr() == addr)
            .map(|i| i.simulator().clone())
    }

    /// Where and how the simulator of `key` serves, if it runs here.
    pub fn serving(&self, key: &str) -> Option<Serving> {
        self.lock().get(key).map(|i| {
            let config = i.simulator().config();
            Serving {
                addr: i.addr(),
                username: config.username.clone(),
                password: config.password.clone(),
                thumbprint: i.cert().thumbprint_sha256.clone(),
            }
        })
    }

    /// Stops the simulator of `key`; `true` if one ran. Its port is closed and its
    /// connections end before this returns.
    pub async fn stop(&self, key: &str) -> bool {
        let instance = self.lock().remove(key);
        match instance {
            Some(instance) => {
                if let Err(e) = instance.stop().await {
                    tracing::warn!(simulator = key, error = %e, "simulator stopped with an error");
                }
                true
            }
            None => false,
        }
    }

    /// How many run.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
