//! How a simulator is set up: which vCenter (or ESXi host) it claims to be, its credentials,
//! its generated model and its timings.
//!
//! Kept apart from `simulator` so that the per-call context (`call::Call`), which every
//! managed-object module reads, names the configuration without importing the handle that
//! dispatches to those modules.

use crate::inventory::model::Model;
use crate::objects::uuid_for;
use std::time::Duration;

/// Which vCenter the simulator claims to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavor {
    /// vCenter 8.0 (API 8.0.3.0).
    VCenter8,
    /// vCenter 7.0 (API 7.0.3.0).
    VCenter7,
    /// A standalone ESXi 8.0 host.
    Esx8,
}

/// How a simulator is set up.
#[derive(Debug, Clone)]
pub struct SimConfig {
    pub username: String,
    pub password: String,
    /// Sessions idle longer than this expire (`NotAuthenticated` afterwards).
    pub session_idle: Duration,
    pub flavor: Flavor,
    pub model: Model,
    /// The instance UUID vCenter reports in `about.instanceUuid`.
    pub instance_uuid: String,
    /// How long a task stays queued and running before its operation completes (half
    /// queued, half running), so clients can observe both states.
    pub task_delay: Duration,
    /// How long after power-on a guest reports tools running and its IP addresses.
    pub guest_delay: Duration,
    /// Users besides `username`, each with a system role (`username` is `Admin`).
    pub users: Vec<crate::roles::SimUser>,
}

impl SimConfig {
    /// The role of a user by name: the simulator's own user is Admin, a configured user has
    /// its role; `None` for a stranger.
    pub(crate) fn role_of(&self, user: &str) -> Option<crate::roles::SystemRole> {
        if user == self.username {
            return Some(crate::roles::SystemRole::Admin);
        }
        self.users.iter().find(|u| u.name == user).map(|u| u.role)
    }

    /// The role of the user these credentials log in as (SOAP Login, REST basic
    /// credentials); `None` when they log in as nobody.
    pub(crate) fn authenticate(
        &self,
        user: &str,
        password: &str,
    ) -> Option<crate::roles::SystemRole> {
        if user == self.username && password == self.password {
            return Some(crate::roles::SystemRole::Admin);
        }
        self.users
            .iter()
            .find(|u| u.name == user && u.password == password)
            .map(|u| u.role)
    }
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            username: "administrator@vsphere.local".into(),
            password: String::new(),
            session_idle: Duration::from_secs(30 * 60),
            flavor: Flavor::VCenter8,
            model: Model::default(),
            instance_uuid: uuid_for("infrasim", "instance"),
            task_delay: Duration::ZERO,
            guest_delay: Duration::from_millis(200),
            users: Vec::new(),
        }
    }
}
