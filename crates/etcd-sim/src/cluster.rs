//! [`EtcdCluster`]: one simulated etcd cluster, shared by its members' gRPC services. It
//! holds the membership, the key space and the leases behind one lock (a cluster's traffic is
//! a handful of control-plane calls a minute), broadcasts each revision's events to the
//! watches, and expires leases on the injected clock.

use crate::keyspace::{KeyRange, KeySpace};
use crate::members::{Member, MemberError, Members, MembershipImage};
use crate::pb::mvccpb::Event;
use chrono::{DateTime, Utc};
use infrasim_clock::SharedClock;
use std::collections::{BTreeMap, BTreeSet};
use std::ops::{Deref, DerefMut};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};
use tokio::sync::broadcast;

/// A lease: its keys go when it expires or is revoked.
#[derive(Debug, Clone)]
pub struct Lease {
    pub granted_ttl: i64,
    pub expires_at: DateTime<Utc>,
    pub keys: BTreeSet<Vec<u8>>,
}

/// What the cluster's lock guards.
#[derive(Debug)]
pub struct State {
    pub members: Members,
    pub keys: KeySpace,
    pub leases: BTreeMap<i64, Lease>,
}

/// One revision's events, as watches receive them.
pub type Revision = Arc<Vec<Event>>;

/// Told the membership each time it changes, under the cluster's lock (so in order).
pub type MembershipHook = Box<dyn Fn(MembershipImage) + Send + Sync>;

struct Inner {
    state: Mutex<State>,
    on_membership: OnceLock<MembershipHook>,
    events: broadcast::Sender<Revision>,
    clock: SharedClock,
    /// Whether a task is waiting for the next lease to expire.
    lease_timer: Mutex<bool>,
}

/// A simulated etcd cluster. Cheap to clone.
#[derive(Clone)]
pub struct EtcdCluster {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for EtcdCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdCluster")
            .field("cluster_id", &self.lock().members.cluster_id)
            .finish()
    }
}

impl EtcdCluster {
    /// An empty cluster (no members yet) whose leases expire on `clock`.
    pub fn new(clock: SharedClock) -> Self {
        Self::with_members(clock, Members::new(crate::members::rand_u64() | 1))
    }

    /// A cluster with the membership `image` kept (its key space starts empty).
    pub fn restore(clock: SharedClock, image: MembershipImage) -> Self {
        Self::with_members(clock, Members::restore(image))
    }

    fn with_members(clock: SharedClock, members: Members) -> Self {
        // Watches that fall behind catch up from the history, so a short queue will do (thousands
        // of clusters each have one).
        let (events, _) = broadcast::channel(16);
        EtcdCluster {
            inner: Arc::new(Inner {
                state: Mutex::new(State {
                    members,
                    keys: KeySpace::new(),
                    leases: BTreeMap::new(),
                }),
                on_membership: OnceLock::new(),
                events,
                clock,
                lease_timer: Mutex::new(false),
            }),
        }
    }

    /// Tells `hook` the membership after every change of it, whoever made it (a machine's
    /// etcd step, or a client's MemberAdd, MemberRemove, MoveLeader or Alarm). Set once.
    pub fn on_membership_change(&self, hook: MembershipHook) {
        let _ = self.inner.on_membership.set(hook);
    }

    /// The membership as it stands.
    pub fn membership(&self) -> MembershipImage {
        self.lock().members.image()
    }

    /// The cluster's state, locked. Expired leases are dropped first, so no reader sees a
    /// key whose lease is over.
    pub fn lock(&self) -> StateGuard<'_> {
        let mut state = self.inner.state.lock().unwrap_or_else(|p| p.into_inner());
        let events = expire(&mut state, self.inner.clock.now());
        if !events.is_empty() {
            let _ = self.inner.events.send(Arc::new(events));
        }
        StateGuard {
            changes: state.members.changes(),
            state,
            hook: self.inner.on_membership.get(),
        }
    }

    pub fn now(&self) -> DateTime<Utc> {
        self.inner.clock.now()
    }

    /// Hands a revision's events to the watches.
    pub fn publish(&self, events: Vec<Event>) {
        if !events.is_empty() {
            let _ = self.inner.events.send(Arc::new(events));
        }
    }

    /// Revisions from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<Revision> {
        self.inner.events.subscribe()
    }

    /// The member named `name` is running (a control-plane machine's etcd came up); its ID.
    pub fn start_member(&self, name: &str, peer_url: &str, client_url: &str) -> u64 {
        self.lock().members.start(name, peer_url, client_url)
    }

    /// The member named `name` is removed (its machine is gone), if it still is a member.
    pub fn remove_member_named(&self, name: &str) -> Result<(), MemberError> {
        let mut state = self.lock();
        let id = state.members.by_name(name).map(|m| m.id);
        match id {
            Some(id) => state.members.remove(id),
            None => Ok(()),
        }
    }

    /// The member named `name`.
    pub fn member_named(&self, name: &str) -> Option<Member> {
        self.lock().members.by_name(name).cloned()
    }

    /// The member that answers on the cluster's shared endpoint: the leader, as a load
    /// balancer in front of healthy members most often reaches it.
    pub fn leader(&self) -> Option<u64> {
        self.lock().members.leader()
    }

    /// Makes sure a task expires the next lease on time (leases also expire on any access).
    pub fn watch_leases(&self) {
        {
            let mut running = self
                .inner
                .lease_timer
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            if *running {
                return;
            }
            *running = true;
        }
        let weak = Arc::downgrade(&self.inner);
        tokio::spawn(expire_on_time(weak));
    }
}

/// The cluster's state under its lock. When it is let go after a change of the membership,
/// the membership hook hears of it before the lock is (every path that changes the
/// membership goes through here, so none can forget to tell it).
pub struct StateGuard<'a> {
    state: MutexGuard<'a, State>,
    changes: u64,
    hook: Option<&'a MembershipHook>,
}

impl Deref for StateGuard<'_> {
    type Target = State;
    fn deref(&self) -> &State {
        &self.state
    }
}

impl DerefMut for StateGuard<'_> {
    fn deref_mut(&mut self) -> &mut State {
        &mut self.state
    }
}

impl Drop for StateGuard<'_> {
    fn drop(&mut self) {
        if self.state.members.changes() != self.changes {
            if let Some(hook) = self.hook {
                hook(self.state.members.image());
            }
        }
    }
}

/// Sleeps until the earliest lease expiry, expires, and repeats while leases remain.
async fn expire_on_time(weak: Weak<Inner>) {
    loop {
        let Some(inner) = weak.upgrade() else { return };
        let cluster = EtcdCluster { inner };
        let next = cluster.lock().leases.values().map(|l| l.expires_at).min();
        let Some(next) = next else {
            *cluster
                .inner
                .lease_timer
                .lock()
                .unwrap_or_else(|p| p.into_inner()) = false;
            return;
        };
        let wait = (next - cluster.now()).to_std().unwrap_or_default();
        let sleep = cluster
            .inner
            .clock
            .sleep(wait + std::time::Duration::from_millis(1));
        drop(cluster);
        sleep.await;
    }
}

/// Drops the leases over at `now`, deleting their keys in one revision; its events.
fn expire(state: &mut State, now: DateTime<Utc>) -> Vec<Event> {
    let over: Vec<i64> = state
        .leases
        .iter()
        .filter(|(_, l)| l.expires_at <= now)
        .map(|(id, _)| *id)
        .collect();
    if over.is_empty() {
        return Vec::new();
    }
    revoke(state, &over)
}

/// Removes leases `ids` and deletes their keys in one revision; its events.
pub fn revoke(state: &mut State, ids: &[i64]) -> Vec<Event> {
    let mut keys = Vec::new();
    for id in ids {
        if let Some(lease) = state.leases.remove(id) {
            keys.extend(lease.keys);
        }
    }
    let mut revision = state.keys.begin();
    for key in keys {
        revision.delete(&KeyRange::new(key, Vec::new()));
    }
    let events = revision.commit();
    if !events.is_empty() {
        state.members.commit();
    }
    events
}
