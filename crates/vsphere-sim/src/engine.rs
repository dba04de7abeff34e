//! The engine of one simulated vCenter (or ESX host): its configuration, its clock, the
//! state behind its lock and the wake-ups of waiting calls. Every front drives it: the SOAP
//! request loop (`simulator`), the REST services (`rest`), the datastore file requests
//! (`datastore_http`) and the provisioning helpers.
//!
//! It is apart from the `Simulator` handle so that those fronts reach the SOAP state
//! without importing the handle, which holds their own state (the REST services) beside
//! the engine.
//!
//! Each simulator has its own lock and shares nothing with others, so many instances run in
//! one process without contending. Requests hold the lock only while they run (they never
//! wait inside it).

use crate::call::Call;
use crate::config::{Flavor, SimConfig};
use crate::datastore_files::DatastoreFiles;
use crate::inventory;
use crate::objects::Inventory;
use crate::persist::Keeper;
use crate::state::State;
use chrono::{DateTime, Utc};
use infrasim_clock::SharedClock;
use std::sync::{Arc, Mutex, MutexGuard};

/// The shared core of a simulator. Cheap to clone.
#[derive(Debug, Clone)]
pub(crate) struct Engine {
    config: Arc<SimConfig>,
    clock: SharedClock,
    state: Arc<Mutex<State>>,
    /// Wakes WaitForUpdates calls after any request that may have changed something.
    changed: Arc<tokio::sync::Notify>,
    /// Counts the same changes for subscribers in this process (see `Simulator::changes`):
    /// a `Notify` wakes only those waiting at that moment, a watch also tells one that
    /// subscribed before a change and looks later.
    revision: Arc<tokio::sync::watch::Sender<u64>>,
    /// Files uploaded to datastores over HTTP (see `datastore_files`).
    files: Arc<Mutex<DatastoreFiles>>,
    /// Where what survives a restart is written, when the simulator is kept (`persist`).
    keeper: Option<Keeper>,
}

impl Engine {
    /// An engine with a freshly generated inventory.
    pub fn new(config: SimConfig, clock: SharedClock) -> Self {
        let state = State {
            inventory: Engine::generate(&config, &clock),
            ..State::default()
        };
        Engine::with(config, clock, state, None)
    }

    /// An engine whose state `keeper` keeps: the state it holds when it holds one (a
    /// restart), else a freshly generated one, written to it whole.
    pub fn kept(
        config: SimConfig,
        clock: SharedClock,
        keeper: Keeper,
    ) -> Result<Self, crate::persist::codec::Corrupt> {
        let esx = config.flavor == Flavor::Esx8;
        let mut state = State {
            inventory: Inventory::new(esx),
            ..State::default()
        };
        if crate::persist::restore(&keeper, &mut state)? {
            // What the restart itself changes (tasks ended, guests booting) is kept too.
            state.inventory.track_dirty();
            crate::task::end_interrupted(&mut state, clock.now());
            crate::virtual_machine::resume_guests(&mut state, clock.now(), config.guest_delay);
            keeper.save(&mut state);
        } else {
            state.inventory = Engine::generate(&config, &clock);
            state.inventory.track_dirty();
            keeper.save_all(&mut state);
        }
        let engine = Engine::with(config, clock, state, Some(keeper.clone()));
        {
            let mut files = engine.files.lock().unwrap_or_else(|p| p.into_inner());
            for (datastore, path, body) in keeper.files() {
                files.put(&datastore, &path, body.into());
            }
        }
        Ok(engine)
    }

    fn generate(config: &SimConfig, clock: &SharedClock) -> Inventory {
        let mut model = config.model.clone();
        model.esx = config.flavor == Flavor::Esx8;
        let mut inventory = inventory::generate(&model, clock.now());
        crate::service_instance::install_managers(&mut inventory);
        inventory
    }

    fn with(config: SimConfig, clock: SharedClock, state: State, keeper: Option<Keeper>) -> Self {
        Engine {
            config: Arc::new(config),
            clock,
            state: Arc::new(Mutex::new(state)),
            changed: Arc::new(tokio::sync::Notify::new()),
            revision: Arc::new(tokio::sync::watch::Sender::new(0)),
            files: Arc::default(),
            keeper,
        }
    }

    /// Where the simulator's state is kept, when it is.
    pub fn keeper(&self) -> Option<&Keeper> {
        self.keeper.as_ref()
    }

    /// The state behind the lock, for a holder that reads it without keeping it alive
    /// (the metrics' scrape).
    pub(crate) fn state(&self) -> &Arc<Mutex<State>> {
        &self.state
    }

    pub fn config(&self) -> &SimConfig {
        &self.config
    }

    pub fn clock(&self) -> &SharedClock {
        &self.clock
    }

    /// The simulator's time now.
    pub fn now(&self) -> DateTime<Utc> {
        self.clock.now()
    }

    /// What waiting WaitForUpdates calls wait on.
    pub fn changed(&self) -> &tokio::sync::Notify {
        &self.changed
    }

    /// Tells everyone who waits for a change that one happened: WaitForUpdates calls and
    /// subscribers in this process.
    pub fn notify_changed(&self) {
        self.changed.notify_waiters();
        self.revision.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// A subscription to the changes `notify_changed` reports from now on.
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.revision.subscribe()
    }

    pub fn lock(&self) -> StateGuard<'_> {
        // Handlers validate before they mutate, so a poisoned lock still holds a consistent
        // inventory.
        StateGuard {
            state: self.state.lock().unwrap_or_else(|p| p.into_inner()),
            keeper: self.keeper.as_ref(),
        }
    }

    /// The context of one call at `now`, in `session` (if any), from `user_agent`.
    pub fn call<'a>(
        &'a self,
        now: DateTime<Utc>,
        session: Option<String>,
        user_agent: &'a str,
    ) -> Call<'a> {
        Call {
            config: &self.config,
            now,
            session,
            user_agent,
            set_session: None,
            files: &self.files,
            runner: crate::handlers::run_due,
        }
    }

    /// Runs `f` on the SOAP state as a call of the simulator's own user would (for a REST
    /// operation that changes the inventory: an OVF deployment), after what the timeline has
    /// due, then, if the inventory changed, wakes those waiting for a change so they see it.
    /// Only then, as for SOAP calls: a controller here powers on a VM that is already on at
    /// every look, and waking its waiters for that would have them look again, and again.
    pub fn with_state<T>(&self, f: impl FnOnce(&mut State, &Call<'_>) -> T) -> T {
        let (out, changed) = {
            let mut state = self.lock();
            let before = state.inventory.changes();
            let call = self.call(self.clock.now(), None, "vapi");
            call.run_due(&mut state);
            let out = f(&mut state, &call);
            (out, state.inventory.changes() != before)
        };
        if changed {
            self.notify_changed();
        }
        out
    }

    /// Reads the inventory.
    pub fn with_inventory<T>(&self, f: impl FnOnce(&Inventory) -> T) -> T {
        f(&self.lock().inventory)
    }

    /// Reads the inventory as it is now: what the timeline has due (a task's end, a guest
    /// coming up) is done first, as any call would, and reported as a change if it changed
    /// something. Only then: a read must not wake WaitForUpdates calls for nothing.
    pub fn with_current_inventory<T>(&self, f: impl FnOnce(&Inventory) -> T) -> T {
        let (out, changed) = {
            let mut state = self.lock();
            let before = state.inventory.changes();
            self.call(self.clock.now(), None, "vapi")
                .run_due(&mut state);
            let changed = state.inventory.changes() != before;
            (f(&state.inventory), changed)
        };
        if changed {
            self.notify_changed();
        }
        out
    }

    /// When `vm` next changes by itself: the earliest time the timeline runs a task's
    /// operation on it or brings its guest up.
    pub fn next_change_of(&self, vm: &crate::value::Moref) -> Option<DateTime<Utc>> {
        self.lock().timeline.next_due_for(vm)
    }

    /// The user of the live SOAP session a `Cookie` header names, if any (touching it, so
    /// an idle one ends here): vCenter lets a SOAP session open a REST one.
    pub fn soap_session_user(&self, cookie: &str) -> Option<String> {
        let key = session_cookie(cookie)?;
        let mut state = self.lock();
        let key = crate::session_manager::touch(&mut state, &self.config, &key, self.clock.now())?;
        state.sessions.get(&key).map(|s| s.user.clone())
    }

    /// The files uploaded to datastores.
    pub fn uploaded_files(&self) -> &Mutex<DatastoreFiles> {
        &self.files
    }
}

/// The simulator's state while its lock is held. Letting go of it writes what changed to
/// the keeper, if the simulator is kept, before the lock is free: so records are written in
/// the order their changes were made, whichever front (SOAP, REST, files, Redfish, a
/// scheduled task's end) made them, without each front having to remember.
pub(crate) struct StateGuard<'a> {
    state: MutexGuard<'a, State>,
    keeper: Option<&'a Keeper>,
}

impl std::ops::Deref for StateGuard<'_> {
    type Target = State;

    fn deref(&self) -> &State {
        &self.state
    }
}

impl std::ops::DerefMut for StateGuard<'_> {
    fn deref_mut(&mut self) -> &mut State {
        &mut self.state
    }
}

impl Drop for StateGuard<'_> {
    fn drop(&mut self) {
        if let Some(keeper) = self.keeper {
            keeper.save(&mut self.state);
        }
    }
}

/// The cookie vCenter's SOAP sessions travel in.
pub const COOKIE: &str = "vmware_soap_session";

/// The session key in a `Cookie` header (pyvmomi sends back the whole `Set-Cookie` value).
pub(crate) fn session_cookie(header: &str) -> Option<String> {
    header.split(';').find_map(|part| {
        let (k, v) = part.trim().split_once('=')?;
        (k == COOKIE).then(|| v.trim_matches('"').to_string())
    })
}
