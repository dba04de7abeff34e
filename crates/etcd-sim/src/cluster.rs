//! [`EtcdCluster`]: one simulated etcd cluster, shared by its members' gRPC services. It
//! holds the membership, the key space and the leases behind one lock (a cluster's traffic is
//! a handful of control-plane calls a minute), broadcasts each revision's events to the
//! watches, and expires leases on the injected clock.

use crate::keyspace::{KeyRange, KeySpace};
use crate::members::{Member, MemberError, Members, MembershipImage};
use crate::pb::mvccpb::{event::EventType, Event, KeyValue};
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

/// What keeps a cluster's state across restarts: told of each change, under the cluster's
/// lock, so in the order they were made.
pub trait Keeper: Send + Sync {
    /// The membership after a change of it, whoever made it (a machine's etcd step, or a
    /// client's MemberAdd, MemberRemove, MoveLeader or Alarm).
    fn membership(&self, image: MembershipImage);
    /// The keys and leases after a change of them (a put, a delete, a lease granted,
    /// renewed, revoked or expired).
    fn keys(&self, change: KeysChange);
}

/// What changed in the key space since the last [`Keeper::keys`], and the leases as they
/// stand (few, so always whole).
#[derive(Debug, Clone, Default)]
pub struct KeysChange {
    pub revision: i64,
    /// Keys written, as they are now.
    pub puts: Vec<KeyValue>,
    /// Keys deleted.
    pub deletes: Vec<Vec<u8>>,
    /// `puts` is every key there is: whatever else was kept is gone (when the history no
    /// longer holds every change, as after a delete of more keys than it keeps).
    pub whole: bool,
    pub leases: Vec<(i64, Lease)>,
}

/// A key space as it was kept, for [`EtcdCluster::restore`].
#[derive(Debug, Clone, Default)]
pub struct KeysImage {
    pub revision: i64,
    pub keys: Vec<KeyValue>,
    pub leases: Vec<(i64, Lease)>,
}

struct Inner {
    state: Mutex<State>,
    keeper: OnceLock<Arc<dyn Keeper>>,
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

    /// A cluster as it was kept: its membership and, if kept, its keys and leases (leases
    /// that ran out meanwhile expire at the first look). Watches from before the restart
    /// find their revisions compacted.
    pub fn restore(clock: SharedClock, image: MembershipImage, keys: Option<KeysImage>) -> Self {
        let cluster = Self::with_members(clock, Members::restore(image));
        if let Some(kept) = keys {
            let leases = !kept.leases.is_empty();
            {
                let mut state = cluster
                    .inner
                    .state
                    .lock()
                    .unwrap_or_else(|p| p.into_inner());
                state.keys = KeySpace::restore(kept.revision, kept.keys);
                state.leases = kept.leases.into_iter().collect();
            }
            if leases && tokio::runtime::Handle::try_current().is_ok() {
                cluster.watch_leases();
            }
        }
        cluster
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
                keeper: OnceLock::new(),
                events,
                clock,
                lease_timer: Mutex::new(false),
            }),
        }
    }

    /// Tells `keeper` of every change from now on (see [`Keeper`]). Set once.
    pub fn keep_with(&self, keeper: Arc<dyn Keeper>) {
        let _ = self.inner.keeper.set(keeper);
    }

    /// The membership as it stands.
    pub fn membership(&self) -> MembershipImage {
        self.lock().members.image()
    }

    /// The cluster's state, locked. Expired leases are dropped first, so no reader sees a
    /// key whose lease is over.
    pub fn lock(&self) -> StateGuard<'_> {
        let mut state = self.inner.state.lock().unwrap_or_else(|p| p.into_inner());
        let keeper = self.inner.keeper.get();
        // Taken before the expiry, so the keeper hears of what the expiry deletes.
        let before = keeper.map(|_| Seen::of(&state));
        let events = expire(&mut state, self.inner.clock.now());
        if !events.is_empty() {
            let _ = self.inner.events.send(Arc::new(events));
        }
        StateGuard {
            state,
            before,
            keeper,
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

    /// Raises (or with `raise` false clears) `alarm` on the member named `member`, or on
    /// every member when `None`, as `etcdctl alarm` and etcd itself would; the members it
    /// changed. A name that is no member changes nothing.
    pub fn set_alarm(
        &self,
        member: Option<&str>,
        alarm: crate::pb::etcdserverpb::AlarmType,
        raise: bool,
    ) -> Vec<u64> {
        let mut state = self.lock();
        let id = match member {
            None => 0,
            Some(name) => match state.members.by_name(name) {
                Some(m) => m.id,
                None => return Vec::new(),
            },
        };
        let changed = match raise {
            true => state.members.activate_alarm(id, alarm),
            false => state.members.deactivate_alarm(id, alarm),
        };
        changed.into_iter().map(|a| a.member_id).collect()
    }

    /// Stops (or with `down` false starts again) the etcd of the member named `name`, as
    /// when its machine's etcd crashes: it answers nothing, and leadership moves off it while
    /// a majority of the members is up (see [`crate::members::Members::set_down`]). Whether
    /// that changed anything; a name that is no member changes nothing.
    pub fn set_member_down(&self, name: &str, down: bool) -> bool {
        let mut state = self.lock();
        match state.members.by_name(name).map(|m| m.id) {
            Some(id) => state.members.set_down(id, down),
            None => false,
        }
    }

    /// Whether the member named `name` is down.
    pub fn member_down(&self, name: &str) -> bool {
        let state = self.lock();
        (state.members.by_name(name)).is_some_and(|m| state.members.is_down(m.id))
    }

    /// The member that answers on the cluster's shared endpoint: the leader, or without one
    /// (no quorum) the first member up, which answers what needs no leader (Status,
    /// MemberList) and refuses the rest ("etcdserver: no leader"); `None` before any member
    /// started, or with every member down.
    pub fn answering(&self) -> Option<u64> {
        let state = self.lock();
        state.members.leader().or_else(|| state.members.first_up())
    }

    /// Whether a majority of the members is up (the cluster can elect a leader).
    pub fn has_quorum(&self) -> bool {
        self.lock().members.has_quorum()
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

/// The cluster's state under its lock. When it is let go after a change, the keeper hears of
/// it before the lock is (every path that changes the state goes through here, so none can
/// forget to tell it).
pub struct StateGuard<'a> {
    state: MutexGuard<'a, State>,
    /// The state when the lock was taken (only with a keeper).
    before: Option<Seen>,
    keeper: Option<&'a Arc<dyn Keeper>>,
}

/// What a keeper's guard compares to know what changed.
#[derive(PartialEq)]
struct Seen {
    membership: u64,
    revision: i64,
    leases: u64,
}

impl Seen {
    fn of(state: &State) -> Self {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        for (id, lease) in &state.leases {
            (id, lease.granted_ttl, lease.expires_at, &lease.keys).hash(&mut h);
        }
        Seen {
            membership: state.members.changes(),
            revision: state.keys.revision(),
            leases: h.finish(),
        }
    }
}

/// The key-space change since `before`, from the history (or whole, if it lacks some).
fn keys_change(state: &State, before: &Seen) -> KeysChange {
    let mut change = KeysChange {
        revision: state.keys.revision(),
        leases: state
            .leases
            .iter()
            .map(|(id, l)| (*id, l.clone()))
            .collect(),
        ..KeysChange::default()
    };
    let since = (state.keys.revision() != before.revision)
        .then(|| state.keys.events_since(before.revision));
    match since {
        None => {}
        Some(Ok(events)) => {
            let mut last: BTreeMap<Vec<u8>, Option<KeyValue>> = BTreeMap::new();
            for e in events {
                let Some(kv) = e.kv else { continue };
                let put = e.r#type == EventType::Put as i32;
                last.insert(kv.key.clone(), put.then_some(kv));
            }
            for (key, kv) in last {
                match kv {
                    Some(kv) => change.puts.push(kv),
                    None => change.deletes.push(key),
                }
            }
        }
        Some(Err(_)) => {
            change.whole = true;
            change.puts = state.keys.all().cloned().collect();
        }
    }
    change
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
        let (Some(keeper), Some(before)) = (self.keeper, &self.before) else {
            return;
        };
        let now = Seen::of(&self.state);
        if now == *before {
            return;
        }
        if now.membership != before.membership {
            keeper.membership(self.state.members.image());
        }
        if (now.revision, now.leases) != (before.revision, before.leases) {
            keeper.keys(keys_change(&self.state, before));
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

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default)]
    struct Recording {
        memberships: Mutex<Vec<MembershipImage>>,
        keys: Mutex<Vec<KeysChange>>,
    }

    impl Keeper for Recording {
        fn membership(&self, image: MembershipImage) {
            self.memberships.lock().unwrap().push(image);
        }
        fn keys(&self, change: KeysChange) {
            self.keys.lock().unwrap().push(change);
        }
    }

    fn write(cluster: &EtcdCluster, change: impl FnOnce(&mut crate::keyspace::Revision<'_>)) {
        let mut state = cluster.lock();
        let mut revision = state.keys.begin();
        change(&mut revision);
        revision.commit();
    }

    #[test]
    fn a_keeper_hears_each_change_and_a_restore_gives_keys_and_leases_back() {
        let clock = infrasim_clock::SystemClock::shared();
        let cluster = EtcdCluster::new(clock.clone());
        let keeper = Arc::new(Recording::default());
        cluster.keep_with(keeper.clone());
        cluster.start_member("cp-0", "https://10.0.0.1:2380", "https://10.0.0.1:2379");
        assert_eq!(keeper.memberships.lock().unwrap().len(), 1);
        write(&cluster, |r| {
            r.put(b"a".to_vec(), b"1".to_vec(), 0);
            r.put(b"b".to_vec(), b"2".to_vec(), 0);
        });
        write(&cluster, |r| {
            r.put(b"a".to_vec(), b"3".to_vec(), 0);
            r.delete(&KeyRange::new(b"b".to_vec(), Vec::new()));
        });
        let expires_at = clock.now() + chrono::Duration::seconds(600);
        cluster.lock().leases.insert(
            7,
            Lease {
                granted_ttl: 600,
                expires_at,
                keys: [b"a".to_vec()].into(),
            },
        );
        drop(cluster.lock()); // a look changes nothing: nothing to tell
        let changes = keeper.keys.lock().unwrap().clone();
        assert_eq!(changes.len(), 3, "{changes:?}");
        let values = |c: &KeysChange| -> Vec<(Vec<u8>, Vec<u8>, i64)> {
            c.puts
                .iter()
                .map(|kv| (kv.key.clone(), kv.value.clone(), kv.version))
                .collect()
        };
        assert_eq!(values(&changes[1]), [(b"a".to_vec(), b"3".to_vec(), 2)]);
        assert_eq!(changes[1].deletes, [b"b".to_vec()]);
        assert!(changes[2].puts.is_empty() && changes[2].leases.len() == 1);
        assert_eq!(
            keeper.memberships.lock().unwrap().len(),
            1,
            "no membership change"
        );

        let revision = changes[2].revision;
        let a = cluster.lock().keys.get(b"a").cloned().unwrap();
        let kept = KeysImage {
            revision,
            keys: vec![a.clone()],
            leases: changes[2].leases.clone(),
        };
        let back = EtcdCluster::restore(clock, cluster.membership(), Some(kept));
        let state = back.lock();
        assert_eq!(
            state.keys.get(b"a"),
            Some(&a),
            "revisions and version as they were"
        );
        assert_eq!(state.keys.revision(), revision);
        assert!(
            state.keys.check_read_revision(revision - 1).is_err(),
            "the past is compacted"
        );
        assert_eq!(state.leases.get(&7).map(|l| l.expires_at), Some(expires_at));
        assert_eq!(state.members.image(), cluster.membership());
    }
}
