//! A resource group: one independent object space (a simulated cluster, or the management
//! plane) with its own resourceVersion counter, event window and watchers.
//!
//! All state sits behind one std `Mutex` per group. Critical sections are short (a map
//! insert, an `Arc` clone of a persistent map for a list snapshot), and groups share nothing,
//! so thousands of groups never contend with each other. Watchers receive events through a
//! bounded broadcast channel: a watcher that falls behind is cut off (it sees
//! [`WatchError::Lagged`]) instead of slowing writers down.
//!
//! The channel carries weak references: the window is what keeps an event (and the object
//! versions it holds) alive. A channel slot keeps its value until it is overwritten, so a
//! strong reference there kept a cluster's last `watcher_buffer` events whatever the window
//! let go; an event the window has dropped before a watcher took it reads as lagging.

use crate::backend::{Backend, GroupImage};
use crate::durability::{self, Accepted, Commit, Settle};
use crate::error::{Result, StoreError};
use crate::event::{Event, EventType};
use crate::field_index::FieldIndex;
use crate::keyset::KeySet;
use crate::object::{
    format_time, meta_mut, read_meta, seal, spec_equal, Derived, ObjectKey, StoredObject,
};
use crate::packing::Packer;
use crate::uid_index::UidIndex;
use crate::StoreConfig;
use imbl::OrdMap;
use infrasim_clock::SharedClock;
use serde_json::{json, Value};
use std::borrow::Cow;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use tokio::sync::broadcast;

/// An object as a caller read it: the stored object and its decoded JSON.
#[derive(Clone, Copy)]
pub struct Read<'a> {
    pub object: &'a Arc<StoredObject>,
    pub value: &'a Value,
}

/// An object as a writer wrote it: the stored object and the JSON it was sealed from, so that a
/// writer that goes on reading what it wrote (the simulated clusters' controllers) need not
/// decode the bytes the store just encoded.
#[derive(Debug, Clone)]
pub struct Decoded {
    pub object: Arc<StoredObject>,
    pub value: Value,
}

impl Decoded {
    /// The object as a caller that read it holds it, for a write over it.
    pub fn read(&self) -> Read<'_> {
        Read {
            object: &self.object,
            value: &self.value,
        }
    }

    /// `object` with its bytes decoded.
    pub fn decode(object: Arc<StoredObject>) -> serde_json::Result<Decoded> {
        let value = object.to_value()?;
        Ok(Decoded { object, value })
    }

    /// `object` with the value sealed into it when that is the version `object` is, else
    /// decoded from its bytes (a write that changed nothing, or whose garbage collection
    /// wrote the object again).
    fn of(object: Arc<StoredObject>, sealed: Option<(u64, Value)>) -> Result<Decoded> {
        match sealed {
            Some((rv, value)) if rv == object.meta.resource_version => {
                Ok(Decoded { object, value })
            }
            _ => Ok(Decoded::decode(object)?),
        }
    }
}

/// The finalizer kube-apiserver adds for foreground cascading deletion.
pub const FOREGROUND_FINALIZER: &str = "foregroundDeletion";
/// The finalizer kube-apiserver adds for orphaning deletion.
pub const ORPHAN_FINALIZER: &str = "orphan";

/// What the API layer derived from an object; see [`Derived`].
pub type Fields = Arc<Derived>;

/// The objects of one resource, by key. A persistent map: cloning it is O(1), which is what
/// makes list snapshots cheap and lets lists iterate without holding the group lock.
pub type ResourceMap = OrdMap<ObjectKey, Arc<StoredObject>>;

/// How deleting an owner treats its dependents (`propagationPolicy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Propagation {
    /// Delete the owner now; the garbage collector deletes dependents afterwards.
    #[default]
    Background,
    /// Keep the owner (with the `foregroundDeletion` finalizer) until the dependents that
    /// block owner deletion are gone.
    Foreground,
    /// Delete the owner and strip its ownerReference from every dependent.
    Orphan,
}

/// Preconditions and policy of a delete.
#[derive(Debug, Clone, Default)]
pub struct DeleteOptions {
    pub propagation: Propagation,
    pub precondition_uid: Option<String>,
    pub precondition_resource_version: Option<u64>,
}

/// What a delete did.
#[derive(Debug, Clone)]
pub enum DeleteOutcome {
    /// The object is gone; this is its last state.
    Deleted(Arc<StoredObject>),
    /// The object is marked for deletion (`deletionTimestamp`) and waits on finalizers.
    Pending(Arc<StoredObject>),
}

impl DeleteOutcome {
    /// The object the outcome carries.
    pub fn object(&self) -> &Arc<StoredObject> {
        match self {
            DeleteOutcome::Deleted(o) | DeleteOutcome::Pending(o) => o,
        }
    }
}

/// Which state a list reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadAt {
    /// The newest state.
    Latest,
    /// The newest state, which must be at least this resourceVersion.
    NotOlderThan(u64),
    /// Exactly the state at this resourceVersion (rebuilt from the event window).
    Exact(u64),
}

/// A consistent view of one resource.
#[derive(Debug, Clone)]
pub struct Snapshot {
    pub resource_version: u64,
    pub objects: ResourceMap,
}

/// Why a watch stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WatchError {
    /// The watcher fell too far behind and was cut off; it should resume from the last
    /// resourceVersion it saw.
    Lagged,
    /// The group was dropped.
    Closed,
}

/// A started watch: the events already in the window after the requested resourceVersion,
/// then the live stream. Both are taken under the group lock, so together they have no gap and
/// no duplicate.
#[derive(Debug)]
pub struct Watch {
    /// Events the window holds after the requested resourceVersion, oldest first.
    pub backlog: Vec<Arc<Event>>,
    /// The resourceVersion the watch starts after.
    pub start: u64,
    receiver: broadcast::Receiver<Sent>,
}

/// What the channel carries: an event's resourceVersion and a weak reference to it (see the
/// module's doc).
type Sent = (u64, Weak<Event>);

impl Watch {
    /// The next live event.
    pub async fn next(&mut self) -> std::result::Result<Arc<Event>, WatchError> {
        loop {
            let sent = match self.receiver.recv().await {
                Ok(sent) => sent,
                Err(broadcast::error::RecvError::Lagged(_)) => return Err(WatchError::Lagged),
                Err(broadcast::error::RecvError::Closed) => return Err(WatchError::Closed),
            };
            if let Some(taken) = self.take(sent) {
                return taken;
            }
        }
    }

    /// The next live event if one is already waiting (`Ok(None)` if none is).
    pub fn try_next(&mut self) -> std::result::Result<Option<Arc<Event>>, WatchError> {
        loop {
            let sent = match self.receiver.try_recv() {
                Ok(sent) => sent,
                Err(broadcast::error::TryRecvError::Empty) => return Ok(None),
                Err(broadcast::error::TryRecvError::Lagged(_)) => return Err(WatchError::Lagged),
                Err(broadcast::error::TryRecvError::Closed) => return Err(WatchError::Closed),
            };
            if let Some(taken) = self.take(sent) {
                return taken.map(Some);
            }
        }
    }

    /// What a received event means to this watch: `None` to pass over it (a write applied
    /// before the watch started but made durable, and so sent, after: the watch's starting
    /// state holds it already), `Lagged` if the window let it go before this watcher took
    /// it (too far behind), else the event.
    fn take(&self, (resource_version, event): Sent) -> Option<Result<Arc<Event>, WatchError>> {
        if resource_version <= self.start {
            return None;
        }
        Some(event.upgrade().ok_or(WatchError::Lagged))
    }
}

/// One resource group.
#[derive(Debug)]
pub struct Group {
    name: Arc<str>,
    /// This group, for the backend to report back to (see [`Settle`]).
    me: Weak<Group>,
    /// Moves on each time writes not yet durable are undone (see [`Settle::failed`]).
    epoch: AtomicU64,
    state: Mutex<GroupState>,
    events: broadcast::Sender<Sent>,
    clock: SharedClock,
    backend: Arc<dyn Backend>,
    config: StoreConfig,
    /// The store's dictionaries, when it packs its objects ([`StoreConfig::packed`]).
    packer: Option<Arc<Packer>>,
}

#[derive(Debug, Default)]
struct GroupState {
    resource_version: u64,
    resources: HashMap<Arc<str>, ResourceMap>,
    window: VecDeque<Arc<Event>>,
    /// When each event of the window was published (the clock's milliseconds), kept only
    /// for a window of recent events ([`StoreConfig::fresh`]).
    window_times: VecDeque<i64>,
    /// Per resource, the newest resourceVersion of that resource's events that has left the
    /// window (absent while none has). kube-apiserver keeps a watch cache per resource, so a quiet resource's
    /// watchers can resume from an old resourceVersion however busy the others are; judged by
    /// the group-wide mark, they were sent 410 and relisted under any burst.
    evicted_by_resource: HashMap<Arc<str>, u64>,
    /// Every object by uid, for owner lookups.
    by_uid: UidIndex,
    /// Owner uid → its dependents.
    dependents: HashMap<Arc<str>, KeySet<(Arc<str>, ObjectKey)>>,
    /// Resource → `key=value` → the objects carrying that label. Controllers list their
    /// children by one label (Cluster API's `cluster.x-k8s.io/cluster-name`, a workload's
    /// selector), and scanning every object of a resource for it made each list cost as much
    /// as the whole resource: at thousands of clusters in one namespace, lists dominated.
    by_label: HashMap<Arc<str>, HashMap<String, KeySet<ObjectKey>>>,
    /// Resource → its objects by the values of the fields the API layer asked to index
    /// ([`Group::index_field`]).
    by_field: HashMap<Arc<str>, FieldIndex>,
    /// For a group restored after a restart: the newest resourceVersion whose events are not
    /// all known (everything before the restored window), for every resource alike.
    history_floor: u64,
    /// Applied writes the backend has not yet made durable, oldest first: published (window,
    /// watchers) once it has, undone if it cannot.
    unpublished: VecDeque<Arc<Event>>,
}

/// `image` with its objects packed as the group packs what it writes (a backend gives them
/// back as plain JSON), each version once however many events hold it.
fn repacked(image: GroupImage, packer: &Packer) -> GroupImage {
    let mut packed: HashMap<*const StoredObject, Arc<StoredObject>> = HashMap::new();
    let mut pack = |resource: &str, object: &Arc<StoredObject>| {
        packed
            .entry(Arc::as_ptr(object))
            .or_insert_with(|| object.repacked(packer, resource))
            .clone()
    };
    let objects = image
        .objects
        .iter()
        .map(|(resource, object)| (resource.clone(), pack(resource, object)))
        .collect();
    let window = image
        .window
        .iter()
        .map(|event| {
            Arc::new(Event {
                object: pack(&event.resource, &event.object),
                previous: event.previous.as_ref().map(|p| pack(&event.resource, p)),
                ..Event::clone(event)
            })
        })
        .collect();
    GroupImage {
        objects,
        window,
        ..image
    }
}

/// The `by_label` key of one label (`=` cannot appear in a label key or value).
fn label_key(key: &str, value: &str) -> String {
    format!("{key}={value}")
}

impl Group {
    pub(crate) fn new(
        name: &str,
        clock: SharedClock,
        backend: Arc<dyn Backend>,
        config: StoreConfig,
        packer: Option<Arc<Packer>>,
    ) -> Arc<Self> {
        let (events, _) = broadcast::channel(config.watcher_buffer.max(1));
        Arc::new_cyclic(|me| Group {
            name: Arc::from(name),
            me: me.clone(),
            epoch: AtomicU64::new(0),
            state: Mutex::new(GroupState::default()),
            events,
            clock,
            backend,
            config,
            packer,
        })
    }

    /// A group as `image` left it: its objects, its counter (the next write takes a higher
    /// resourceVersion than any before the restart), and its event window, from which
    /// watches resume; anything older gets `Expired` (410), never a silent gap.
    pub(crate) fn restored(
        image: GroupImage,
        clock: SharedClock,
        backend: Arc<dyn Backend>,
        config: StoreConfig,
        packer: Option<Arc<Packer>>,
    ) -> Arc<Self> {
        let image = match &packer {
            Some(packer) => repacked(image, packer),
            None => image,
        };
        let group = Group::new(&image.name, clock, backend, config, packer);
        {
            let mut state = group.lock();
            for (resource, object) in image.objects {
                index(&mut state, &resource, &object);
                let key = object.meta.key();
                state
                    .resources
                    .entry(resource)
                    .or_default()
                    .insert(key, object);
            }
            let keep = image.window.len().min(config.watch_window);
            let window = &image.window[image.window.len() - keep..];
            state.history_floor = match window.first() {
                Some(first) => first.resource_version - 1,
                None => image.resource_version,
            };
            state.window = window.iter().cloned().collect();
            if group.config.fresh.is_some() {
                // Their first publication is not kept: they count as fresh from the restart.
                let now = group.clock.now().timestamp_millis();
                state.window_times = std::iter::repeat_n(now, state.window.len()).collect();
            }
            state.resource_version = image.resource_version;
        }
        group
    }

    /// The group's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The newest resourceVersion written in this group.
    pub fn resource_version(&self) -> u64 {
        self.lock().resource_version
    }

    fn lock(&self) -> MutexGuard<'_, GroupState> {
        // A panic while holding the lock cannot leave a half-applied write behind: writes are
        // undone on error before the lock is released. So a poisoned lock is still consistent.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs `f` as one write: its changes are persisted, then published, atomically.
    fn write<T>(&self, f: impl FnOnce(&mut Txn<'_>) -> Result<T>) -> Result<T> {
        self.write_mode(false, f)
    }

    /// Runs `f` as a write that is checked and computed in full, then undone: nothing is
    /// persisted or published (`dryRun=All`).
    fn dry_run<T>(&self, f: impl FnOnce(&mut Txn<'_>) -> Result<T>) -> Result<T> {
        self.write_mode(true, f)
    }

    fn write_mode<T>(&self, dry: bool, f: impl FnOnce(&mut Txn<'_>) -> Result<T>) -> Result<T> {
        let mut state = self.lock();
        let mut txn = Txn {
            state: &mut state,
            pending: Vec::new(),
            now: format_time(self.clock.now()),
            packer: self.packer.as_deref(),
            sealed: None,
        };
        let result = f(&mut txn);
        let pending = std::mem::take(&mut txn.pending);
        if dry {
            undo(&mut state, &pending);
            return result;
        }
        let value = match result {
            Ok(v) if pending.is_empty() => return Ok(v),
            Ok(v) => v,
            Err(e) => {
                undo(&mut state, &pending);
                return Err(e);
            }
        };
        let settle: Arc<dyn Settle> = match self.me.upgrade() {
            Some(me) => me,
            None => return Err(StoreError::GroupNotFound(self.name.to_string())),
        };
        let commit = Commit {
            group: &self.name,
            changes: &pending,
            settle,
            epoch: self.epoch.load(Ordering::SeqCst),
        };
        let ticket = match self.backend.submit(commit) {
            Ok(Accepted::Done) => {
                self.publish(&mut state, pending);
                return Ok(value);
            }
            Ok(Accepted::Queued(ticket)) => ticket,
            Err(e) => {
                undo(&mut state, &pending);
                return Err(e);
            }
        };
        state.unpublished.extend(pending);
        // The lock is let go before the wait: the group's other writers go on meanwhile.
        drop(state);
        match durability::defer(ticket) {
            None => Ok(value),
            Some(ticket) => ticket.wait_blocking().map(|()| value),
        }
    }

    /// Appends durable events to the window and sends them to watchers.
    fn publish(&self, state: &mut GroupState, events: impl IntoIterator<Item = Arc<Event>>) {
        let now = self
            .config
            .fresh
            .map(|_| self.clock.now().timestamp_millis());
        for event in events {
            state.window.push_back(event.clone());
            if let Some(now) = now {
                state.window_times.push_back(now);
            }
            // No receivers is fine; lagging receivers are their own problem.
            let _ = self
                .events
                .send((event.resource_version, Arc::downgrade(&event)));
        }
        let stale_before = self
            .config
            .fresh
            .zip(now)
            .map(|(f, now)| (f.floor, now.saturating_sub(f.keep.as_millis() as i64)));
        loop {
            let over = state.window.len() > self.config.watch_window;
            let stale = stale_before.is_some_and(|(floor, before)| {
                state.window.len() > floor
                    && state.window_times.front().is_some_and(|t| *t < before)
            });
            if !(over || stale) {
                break;
            }
            state.window_times.pop_front();
            if let Some(old) = state.window.pop_front() {
                state
                    .evicted_by_resource
                    .insert(old.resource.clone(), old.resource_version);
            }
        }
    }

    /// Creates an object. Sets `uid`, `creationTimestamp`, `generation` and
    /// `resourceVersion`; refuses an existing key.
    pub fn create(
        &self,
        resource: &str,
        object: Value,
        fields: Fields,
    ) -> Result<Arc<StoredObject>> {
        self.write(|txn| txn.create(resource, object, fields))
    }

    /// Creates the object with key `key`, or replaces the one there unconditionally, in one
    /// write: for records a single writer keeps (not API objects, whose replacements check
    /// their resourceVersion).
    pub fn put(&self, resource: &str, key: &ObjectKey, object: Value) -> Result<Arc<StoredObject>> {
        self.write(|txn| match txn.current(resource, key) {
            Some(_) => txn.update(resource, object, Fields::default(), None, None),
            None => txn.create(resource, object, Fields::default()),
        })
    }

    /// [`Group::create`], answering with the JSON the object was sealed from as well.
    pub fn create_decoded(&self, resource: &str, object: Value, fields: Fields) -> Result<Decoded> {
        self.write_decoded(|txn| txn.create(resource, object, fields))
    }

    /// Replaces an object. `expected` is the resourceVersion the caller read (a stale one is a
    /// conflict); `None` means unconditional. A write that changes nothing is not a write: the
    /// current object comes back with its resourceVersion unchanged.
    pub fn update(
        &self,
        resource: &str,
        object: Value,
        fields: Fields,
        expected: Option<u64>,
    ) -> Result<Arc<StoredObject>> {
        self.write(|txn| txn.update(resource, object, fields, expected, None))
    }

    /// [`Group::update`] (or, when `dry`, [`Group::update_dry_run`]) for a caller that has
    /// decoded the object it read: while that is still the stored object, the store compares
    /// against the caller's copy rather than decoding the object again under its lock.
    pub fn update_read(
        &self,
        resource: &str,
        object: Value,
        fields: Fields,
        expected: Option<u64>,
        read: Read<'_>,
        dry: bool,
    ) -> Result<Arc<StoredObject>> {
        if dry {
            return self.update_dry(resource, object, fields, expected, Some(read));
        }
        self.write(|txn| txn.update(resource, object, fields, expected, Some(read)))
    }

    /// [`Group::update_read`] (not a dry run), answering with the JSON the object was sealed
    /// from as well.
    pub fn update_read_decoded(
        &self,
        resource: &str,
        object: Value,
        fields: Fields,
        expected: Option<u64>,
        read: Read<'_>,
    ) -> Result<Decoded> {
        self.write_decoded(|txn| txn.update(resource, object, fields, expected, Some(read)))
    }

    /// A write `f` answering with the object it wrote and the JSON that object was sealed from.
    fn write_decoded(
        &self,
        f: impl FnOnce(&mut Txn<'_>) -> Result<Arc<StoredObject>>,
    ) -> Result<Decoded> {
        let (object, sealed) = self.write(|txn| {
            let object = f(txn)?;
            Ok((object, txn.sealed.take()))
        })?;
        Decoded::of(object, sealed)
    }

    /// Deletes an object, honouring finalizers and the propagation policy.
    pub fn delete(
        &self,
        resource: &str,
        key: &ObjectKey,
        options: &DeleteOptions,
    ) -> Result<DeleteOutcome> {
        self.write(|txn| txn.delete(resource, key, options))
    }

    /// What [`Group::create`] would store, without storing it: uid, creationTimestamp and
    /// generation set, but no resourceVersion, since nothing was written (kube-apiserver's
    /// dry-run storage answers with the object as it was given to it), so the answer can be
    /// sent back as a real create.
    pub fn create_dry_run(
        &self,
        resource: &str,
        object: Value,
        fields: Fields,
    ) -> Result<Arc<StoredObject>> {
        let would = self.dry_run(|txn| txn.create(resource, object, fields))?;
        restamp(would, None)
    }

    /// What [`Group::update`] would store, without storing it; it keeps the stored object's
    /// resourceVersion, since no new one was written.
    pub fn update_dry_run(
        &self,
        resource: &str,
        object: Value,
        fields: Fields,
        expected: Option<u64>,
    ) -> Result<Arc<StoredObject>> {
        self.update_dry(resource, object, fields, expected, None)
    }

    fn update_dry(
        &self,
        resource: &str,
        object: Value,
        fields: Fields,
        expected: Option<u64>,
        read: Option<Read<'_>>,
    ) -> Result<Arc<StoredObject>> {
        let key = read_meta(&object).key();
        let (would, before) = self.dry_run(|txn| {
            let before = txn.current(resource, &key).map(|c| c.meta.resource_version);
            Ok((
                txn.update(resource, object, fields, expected, read)?,
                before,
            ))
        })?;
        restamp(would, before)
    }

    /// What [`Group::delete`] would do, without doing it; the object answered keeps its
    /// stored resourceVersion, as kube-apiserver's dry-run delete reads the object and
    /// writes nothing.
    pub fn delete_dry_run(
        &self,
        resource: &str,
        key: &ObjectKey,
        options: &DeleteOptions,
    ) -> Result<DeleteOutcome> {
        let (outcome, before) = self.dry_run(|txn| {
            let before = txn.current(resource, key).map(|c| c.meta.resource_version);
            Ok((txn.delete(resource, key, options)?, before))
        })?;
        Ok(match outcome {
            DeleteOutcome::Deleted(o) => DeleteOutcome::Deleted(restamp(o, before)?),
            DeleteOutcome::Pending(o) => DeleteOutcome::Pending(restamp(o, before)?),
        })
    }

    /// One object.
    pub fn get(&self, resource: &str, key: &ObjectKey) -> Option<Arc<StoredObject>> {
        self.lock().resources.get(resource)?.get(key).cloned()
    }

    /// The resources that currently hold at least one object.
    pub fn resources(&self) -> Vec<Arc<str>> {
        self.lock()
            .resources
            .iter()
            .filter(|(_, m)| !m.is_empty())
            .map(|(r, _)| r.clone())
            .collect()
    }

    /// How many objects each resource holds now (those holding none left out).
    pub fn object_counts(&self) -> Vec<(Arc<str>, usize)> {
        self.lock()
            .resources
            .iter()
            .filter(|(_, m)| !m.is_empty())
            .map(|(r, m)| (r.clone(), m.len()))
            .collect()
    }

    /// A snapshot of one resource at the requested point.
    pub fn snapshot(&self, resource: &str, at: ReadAt) -> Result<Snapshot> {
        let (objects, current, replay) = {
            let state = self.lock();
            let objects = state.resources.get(resource).cloned().unwrap_or_default();
            let current = state.resource_version;
            let requested = state.requested(resource, at)?;
            // Copy out (Arc clones) only the events to roll back; replay them unlocked.
            // Writes not yet durable are newer than the window's and rolled back first.
            let replay: Vec<Arc<Event>> = match requested {
                Some(rv) => state
                    .unpublished
                    .iter()
                    .rev()
                    .chain(state.window.iter().rev())
                    .take_while(|e| e.resource_version > rv)
                    .filter(|e| &*e.resource == resource)
                    .cloned()
                    .collect(),
                None => Vec::new(),
            };
            let version = requested.unwrap_or(current);
            (objects, version, replay)
        };
        let mut objects = objects;
        for event in replay {
            match &event.previous {
                Some(prev) => {
                    objects.insert(event.key.clone(), prev.clone());
                }
                None => {
                    objects.remove(&event.key);
                }
            }
        }
        Ok(Snapshot {
            resource_version: current,
            objects,
        })
    }

    /// A snapshot that holds at least every object of `resource` carrying all of `labels`
    /// (`key=value` pairs) and holding all of `fields` (`field=value`), read as
    /// [`Group::snapshot`] reads: at the latest version it holds the objects of the rarest of
    /// those labels and indexed fields (from the label index and the field index
    /// ([`Group::index_field`]), without looking at the others, so a selector that names a
    /// label every cluster shares and one of a single cluster's reads that cluster's objects
    /// only); a field not indexed narrows nothing; at an exact older version, where the
    /// indexes do not reach, it is the whole resource. Callers filter either way.
    pub fn snapshot_selected(
        &self,
        resource: &str,
        at: ReadAt,
        labels: &[(&str, &str)],
        fields: &[(&str, &str)],
    ) -> Result<Snapshot> {
        let state = self.lock();
        let by_field = state.by_field.get(resource);
        let fields: Vec<&(&str, &str)> = fields
            .iter()
            .filter(|(f, _)| by_field.is_some_and(|i| i.covers(f)))
            .collect();
        if state.requested(resource, at)?.is_some() || (labels.is_empty() && fields.is_empty()) {
            drop(state);
            return self.snapshot(resource, at);
        }
        let all = state.resources.get(resource);
        let by_label = state.by_label.get(resource);
        let labelled = labels
            .iter()
            .map(|(k, v)| by_label.and_then(|labels| labels.get(&label_key(k, v))));
        let holding = fields
            .iter()
            .map(|(f, v)| by_field.and_then(|index| index.get(f, v)));
        let rarest = labelled
            .chain(holding)
            .min_by_key(|keys| keys.map_or(0, KeySet::len))
            .flatten();
        let objects: ResourceMap = match (all, rarest) {
            (Some(all), Some(keys)) => keys
                .iter()
                .filter_map(|k| Some((k.clone(), all.get(k)?.clone())))
                .collect(),
            _ => ResourceMap::new(),
        };
        Ok(Snapshot {
            resource_version: state.resource_version,
            objects,
        })
    }

    /// Keeps `resource`'s objects indexed by the value of their selectable field `field`
    /// from now on (those stored already included), for [`Group::snapshot_selected`].
    pub fn index_field(&self, resource: &str, field: &str) {
        let mut guard = self.lock();
        let state = &mut *guard;
        let objects = state.resources.get(resource);
        let index = state.by_field.entry(Arc::from(resource)).or_default();
        let stored = objects
            .into_iter()
            .flat_map(|m| m.iter())
            .map(|(k, o)| (k, &**o));
        index.add_field(field, stored);
    }

    /// Starts a watch on the whole group after resourceVersion `from` (`None`: from now).
    pub fn watch(&self, from: Option<u64>) -> Result<Watch> {
        self.watch_from(None, from)
    }

    /// Starts a watch for one resource's events after resourceVersion `from`. It can start
    /// from further back than [`Group::watch`]: only the events of `resource` need to be in
    /// the window. The watch still carries every event of the group; the caller filters.
    pub fn watch_resource(&self, resource: &str, from: Option<u64>) -> Result<Watch> {
        self.watch_from(Some(resource), from)
    }

    fn watch_from(&self, resource: Option<&str>, from: Option<u64>) -> Result<Watch> {
        let state = self.lock();
        let receiver = self.events.subscribe();
        let current = state.resource_version;
        let oldest = match resource {
            Some(r) => state.oldest_for(r),
            None => state.evicted_through(),
        };
        let start = match from {
            None => current,
            Some(rv) if rv > current => {
                return Err(StoreError::TooLargeResourceVersion {
                    requested: rv,
                    current,
                });
            }
            Some(rv) if rv < oldest => {
                return Err(StoreError::Expired {
                    requested: rv,
                    oldest_available: oldest,
                });
            }
            Some(rv) => rv,
        };
        let first = state
            .window
            .partition_point(|e| e.resource_version <= start);
        let backlog = state.window.range(first..).cloned().collect();
        Ok(Watch {
            backlog,
            start,
            receiver,
        })
    }

    /// A snapshot of `resource` and a watch starting exactly after it.
    pub fn snapshot_and_watch(&self, resource: &str) -> (Snapshot, Watch) {
        let state = self.lock();
        let receiver = self.events.subscribe();
        let snapshot = Snapshot {
            resource_version: state.resource_version,
            objects: state.resources.get(resource).cloned().unwrap_or_default(),
        };
        let watch = Watch {
            backlog: Vec::new(),
            start: state.resource_version,
            receiver,
        };
        (snapshot, watch)
    }

    /// The oldest resourceVersion a watch or an exact read can still start from.
    pub fn oldest_resumable(&self) -> u64 {
        self.lock().evicted_through()
    }
}

impl Settle for Group {
    fn durable(&self, resource_version: u64) {
        let mut state = self.lock();
        let mut ready = Vec::new();
        while state
            .unpublished
            .front()
            .is_some_and(|e| e.resource_version <= resource_version)
        {
            ready.extend(state.unpublished.pop_front());
        }
        self.publish(&mut state, ready);
    }

    fn failed(&self) {
        let mut state = self.lock();
        let undone: Vec<Arc<Event>> = state.unpublished.drain(..).collect();
        // resourceVersions handed out stay used: a reader may have seen them.
        let counter = state.resource_version;
        undo(&mut state, &undone);
        state.resource_version = counter;
        self.epoch.fetch_add(1, Ordering::SeqCst);
    }

    fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::SeqCst)
    }
}

impl GroupState {
    /// The oldest resourceVersion from which `resource`'s events are all still in the window.
    fn oldest_for(&self, resource: &str) -> u64 {
        self.evicted_by_resource
            .get(resource)
            .copied()
            .unwrap_or(0)
            .max(self.history_floor)
    }

    /// The newest resourceVersion of any resource that has left the window (0 while none has).
    fn evicted_through(&self) -> u64 {
        self.evicted_by_resource
            .values()
            .max()
            .copied()
            .unwrap_or(0)
            .max(self.history_floor)
    }

    /// The past version a read of `resource` at `at` asks for (`None`: the latest), or why it
    /// cannot be served.
    fn requested(&self, resource: &str, at: ReadAt) -> Result<Option<u64>> {
        let current = self.resource_version;
        match at {
            ReadAt::Latest => Ok(None),
            ReadAt::NotOlderThan(rv) | ReadAt::Exact(rv) if rv > current => {
                Err(StoreError::TooLargeResourceVersion {
                    requested: rv,
                    current,
                })
            }
            ReadAt::NotOlderThan(_) => Ok(None),
            ReadAt::Exact(rv) if rv < self.oldest_for(resource) => Err(StoreError::Expired {
                requested: rv,
                oldest_available: self.oldest_for(resource),
            }),
            ReadAt::Exact(rv) => Ok(Some(rv)),
        }
    }
}

fn undo(state: &mut GroupState, pending: &[Arc<Event>]) {
    for event in pending.iter().rev() {
        let now = state
            .resources
            .get(&event.resource)
            .and_then(|m| m.get(&event.key))
            .cloned();
        if let Some(now) = &now {
            unindex(state, &event.resource, now);
        }
        let map = state.resources.entry(event.resource.clone()).or_default();
        match &event.previous {
            Some(prev) => {
                map.insert(event.key.clone(), prev.clone());
                index(state, &event.resource, prev);
            }
            None => {
                map.remove(&event.key);
            }
        }
        state.resource_version = event.resource_version - 1;
    }
}

fn index(state: &mut GroupState, resource: &Arc<str>, object: &Arc<StoredObject>) {
    let key = object.meta.key();
    if !object.meta.labels.is_empty() {
        let labels = state.by_label.entry(resource.clone()).or_default();
        for (k, v) in &object.meta.labels {
            labels
                .entry(label_key(k, v))
                .or_default()
                .insert(key.clone());
        }
    }
    if let Some(fields) = state.by_field.get_mut(resource) {
        fields.insert(&key, object);
    }
    state.by_uid.put(resource, object);
    for owner in &object.meta.owner_references {
        state
            .dependents
            .entry(owner.uid.clone())
            .or_default()
            .insert((resource.clone(), key.clone()));
    }
}

fn unindex(state: &mut GroupState, resource: &Arc<str>, object: &StoredObject) {
    state.by_uid.remove(&object.meta.uid);
    let entry = (resource.clone(), object.meta.key());
    if let Some(fields) = state.by_field.get_mut(resource) {
        fields.remove(&entry.1, object);
    }
    if let Some(labels) = state.by_label.get_mut(resource) {
        for (k, v) in &object.meta.labels {
            let label = label_key(k, v);
            if let Some(set) = labels.get_mut(&label) {
                set.remove(&entry.1);
                if set.is_empty() {
                    labels.remove(&label);
                }
            }
        }
    }
    for owner in &object.meta.owner_references {
        if let Some(set) = state.dependents.get_mut(&owner.uid) {
            set.remove(&entry);
            if set.is_empty() {
                state.dependents.remove(&owner.uid);
            }
        }
    }
}

/// One write in progress: mutations apply to the state at once and are recorded as events, so
/// that a failed persist can undo them.
struct Txn<'a> {
    state: &'a mut GroupState,
    pending: Vec<Arc<Event>>,
    now: String,
    packer: Option<&'a Packer>,
    /// The JSON of the last object put, with its resourceVersion: kept instead of dropped, for
    /// a writer that wants it back ([`Decoded`]).
    sealed: Option<(u64, Value)>,
}

/// `object` with the resourceVersion `rv` (none: without one): a dry run's answer carries
/// the version that is stored, not the one its undone write took.
fn restamp(object: Arc<StoredObject>, rv: Option<u64>) -> Result<Arc<StoredObject>> {
    if rv == Some(object.meta.resource_version) {
        return Ok(object);
    }
    let mut value = object.to_value()?;
    let meta = meta_mut(&mut value);
    match rv {
        Some(rv) => meta.insert("resourceVersion".into(), Value::String(rv.to_string())),
        None => meta.remove("resourceVersion"),
    };
    Ok(seal(&value, object.derived.clone(), None, Some(&object))?)
}

impl Txn<'_> {
    fn current(&self, resource: &str, key: &ObjectKey) -> Option<Arc<StoredObject>> {
        self.state.resources.get(resource)?.get(key).cloned()
    }

    fn resource_name(&self, resource: &str) -> Arc<str> {
        self.state
            .resources
            .get_key_value(resource)
            .map(|(k, _)| k.clone())
            .unwrap_or_else(|| Arc::from(resource))
    }

    /// Stamps a new resourceVersion on `value`, stores it and records the event.
    fn put(
        &mut self,
        resource: &str,
        mut value: Value,
        fields: Fields,
        previous: Option<Arc<StoredObject>>,
    ) -> Result<Arc<StoredObject>> {
        let rv = self.state.resource_version + 1;
        meta_mut(&mut value).insert("resourceVersion".into(), Value::String(rv.to_string()));
        let packing = self.packer.map(|p| (p, resource));
        let object = seal(&value, fields, packing, previous.as_deref())?;
        let resource = self.resource_name(resource);
        let key = object.meta.key();
        // Most writes (a status, a spec) leave what the indexes hold as it was; those need
        // not touch them, which at scale means several ordered sets of thousands of keys.
        let reindex = previous.as_ref().is_none_or(|prev| {
            prev.meta.uid != object.meta.uid
                || prev.meta.labels != object.meta.labels
                || prev.meta.owner_references != object.meta.owner_references
        });
        if reindex {
            if let Some(prev) = &previous {
                unindex(self.state, &resource, prev);
            }
            index(self.state, &resource, &object);
        } else {
            // The index by uid holds the current version.
            self.state.by_uid.put(&resource, &object);
            if let (Some(prev), Some(by_field)) =
                (&previous, self.state.by_field.get_mut(&resource))
            {
                // Only the selectable fields may have moved (a Pod bound to a node).
                if prev.derived.fields != object.derived.fields {
                    by_field.remove(&key, prev);
                    by_field.insert(&key, &object);
                }
            }
        }
        self.state
            .resources
            .entry(resource.clone())
            .or_default()
            .insert(key.clone(), object.clone());
        self.state.resource_version = rv;
        let event_type = if previous.is_some() {
            EventType::Modified
        } else {
            EventType::Added
        };
        self.pending.push(Arc::new(Event {
            resource_version: rv,
            event_type,
            resource,
            key,
            object: object.clone(),
            previous,
        }));
        self.sealed = Some((rv, value));
        Ok(object)
    }

    /// Removes an object for good, then lets the garbage collector react.
    fn remove(&mut self, resource: &str, current: Arc<StoredObject>) -> Result<Arc<StoredObject>> {
        let rv = self.state.resource_version + 1;
        let mut value = current.to_value()?;
        meta_mut(&mut value).insert("resourceVersion".into(), Value::String(rv.to_string()));
        let last = seal(
            &value,
            current.derived.clone(),
            self.packer.map(|p| (p, resource)),
            Some(&current),
        )?;
        let resource = self.resource_name(resource);
        let key = current.meta.key();
        unindex(self.state, &resource, &current);
        if let Some(map) = self.state.resources.get_mut(&resource) {
            map.remove(&key);
        }
        self.state.resource_version = rv;
        self.pending.push(Arc::new(Event {
            resource_version: rv,
            event_type: EventType::Deleted,
            resource,
            key,
            object: last.clone(),
            previous: Some(current),
        }));
        self.collect_garbage(&last)?;
        Ok(last)
    }

    /// Rewrites the metadata of a stored object (deletion marks, finalizers, owner refs).
    fn edit_meta(
        &mut self,
        resource: &str,
        current: &Arc<StoredObject>,
        edit: impl FnOnce(&mut serde_json::Map<String, Value>),
    ) -> Result<Arc<StoredObject>> {
        let mut value = current.to_value()?;
        edit(meta_mut(&mut value));
        self.put(
            resource,
            value,
            current.derived.clone(),
            Some(current.clone()),
        )
    }

    fn create(
        &mut self,
        resource: &str,
        mut value: Value,
        fields: Fields,
    ) -> Result<Arc<StoredObject>> {
        let meta = read_meta(&value);
        let key = meta.key();
        if self.current(resource, &key).is_some() {
            return Err(StoreError::AlreadyExists {
                resource: resource.to_string(),
                name: key.name.to_string(),
            });
        }
        let now = self.now.clone();
        let m = meta_mut(&mut value);
        m.insert(
            "uid".into(),
            Value::String(uuid::Uuid::new_v4().to_string()),
        );
        m.insert("creationTimestamp".into(), Value::String(now));
        if fields.no_generation {
            m.remove("generation");
        } else {
            m.insert("generation".into(), json!(1));
        }
        m.remove("deletionTimestamp");
        m.remove("deletionGracePeriodSeconds");
        let created = self.put(resource, value, fields, None)?;
        self.check_owners(resource, created)
    }

    /// What the garbage collector does with an object whose ownerReferences name owners that
    /// do not exist (any more, or ever): with no owner left it is collected; otherwise the
    /// dangling references are removed. Runs when the references are written; an owner's
    /// later removal is handled by [`Txn::collect_garbage`].
    fn check_owners(
        &mut self,
        resource: &str,
        object: Arc<StoredObject>,
    ) -> Result<Arc<StoredObject>> {
        let refs = &object.meta.owner_references;
        let dangling: Vec<Arc<str>> = refs
            .iter()
            .filter(|r| r.uid != object.meta.uid && !self.state.by_uid.contains(&r.uid))
            .map(|r| r.uid.clone())
            .collect();
        if dangling.is_empty() {
            return Ok(object);
        }
        if dangling.len() == refs.len() {
            self.delete_object(resource, object.clone(), Propagation::Background)?;
            return Ok(object);
        }
        self.edit_meta(resource, &object, |m| {
            for uid in &dangling {
                strip_owner(m, uid);
            }
        })
    }

    fn update(
        &mut self,
        resource: &str,
        mut value: Value,
        fields: Fields,
        expected: Option<u64>,
        read: Option<Read<'_>>,
    ) -> Result<Arc<StoredObject>> {
        let new_meta = read_meta(&value);
        let key = new_meta.key();
        let current = self
            .current(resource, &key)
            .ok_or_else(|| StoreError::NotFound {
                resource: resource.to_string(),
                name: key.name.to_string(),
            })?;
        let conflict = |message: String| StoreError::Conflict {
            resource: resource.to_string(),
            name: key.name.to_string(),
            message,
        };
        if let Some(rv) = expected {
            if rv != current.meta.resource_version {
                return Err(conflict(format!(
                    "Operation cannot be fulfilled on {resource} \"{}\": the object has been modified; please apply your changes to the latest version and try again",
                    key.name
                )));
            }
        }
        if !new_meta.uid.is_empty() && new_meta.uid != current.meta.uid {
            return Err(conflict(format!(
                "Precondition failed: UID in precondition: {}, UID in object meta: {}",
                new_meta.uid, current.meta.uid
            )));
        }
        if current.meta.deletion_timestamp.is_some() {
            if let Some(added) = new_meta
                .finalizers
                .iter()
                .find(|f| !current.meta.finalizers.contains(f))
            {
                return Err(StoreError::Invalid {
                    resource: resource.to_string(),
                    name: key.name.to_string(),
                    message: format!(
                        "metadata.finalizers: Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers [\"{added}\"]"
                    ),
                });
            }
        }
        let old = match read {
            Some(read) if Arc::ptr_eq(read.object, &current) => Cow::Borrowed(read.value),
            _ => Cow::Owned(current.to_value()?),
        };
        let old = old.as_ref();
        // Fields the server owns are carried over whatever the client sent (read in place:
        // the old metadata, managedFields and all, is not copied for four fields).
        let old_meta = old.get("metadata").unwrap_or(&Value::Null);
        let generation = if spec_equal(old, &value) {
            current.meta.generation
        } else {
            current.meta.generation + 1
        };
        let m = meta_mut(&mut value);
        for owned in [
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
        ] {
            match old_meta.get(owned) {
                Some(v) => m.insert(owned.into(), v.clone()),
                None => m.remove(owned),
            };
        }
        if fields.no_generation {
            m.remove("generation");
        } else {
            m.insert("generation".into(), json!(generation));
        }
        m.insert(
            "resourceVersion".into(),
            Value::String(current.meta.resource_version.to_string()),
        );
        if value == *old {
            return Ok(current);
        }
        let owners_changed = new_meta.owner_references != current.meta.owner_references;
        let updated = self.put(resource, value, fields, Some(current))?;
        if updated.meta.deletion_timestamp.is_some() && updated.releasable() {
            return self.remove(resource, updated);
        }
        if owners_changed {
            return self.check_owners(resource, updated);
        }
        Ok(updated)
    }

    fn delete(
        &mut self,
        resource: &str,
        key: &ObjectKey,
        options: &DeleteOptions,
    ) -> Result<DeleteOutcome> {
        let current = self
            .current(resource, key)
            .ok_or_else(|| StoreError::NotFound {
                resource: resource.to_string(),
                name: key.name.to_string(),
            })?;
        let conflict = |message: String| StoreError::Conflict {
            resource: resource.to_string(),
            name: key.name.to_string(),
            message,
        };
        if let Some(uid) = &options.precondition_uid {
            if **uid != *current.meta.uid {
                return Err(conflict(format!(
                    "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                    current.meta.uid
                )));
            }
        }
        if let Some(rv) = options.precondition_resource_version {
            if rv != current.meta.resource_version {
                return Err(conflict(format!(
                    "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}",
                    current.meta.resource_version
                )));
            }
        }
        self.delete_object(resource, current, options.propagation)
    }

    fn delete_object(
        &mut self,
        resource: &str,
        current: Arc<StoredObject>,
        propagation: Propagation,
    ) -> Result<DeleteOutcome> {
        if current.meta.deletion_timestamp.is_some() {
            // Already being deleted: a repeated delete changes nothing.
            return Ok(DeleteOutcome::Pending(current));
        }
        let uid = current.meta.uid.clone();
        let dependents = |state: &GroupState| -> Vec<(Arc<str>, ObjectKey)> {
            state
                .dependents
                .get(&uid)
                .map(|s| s.iter().cloned().collect())
                .unwrap_or_default()
        };
        match propagation {
            Propagation::Orphan => {
                for (dep_resource, dep_key) in dependents(self.state) {
                    if let Some(dep) = self.current(&dep_resource, &dep_key) {
                        self.edit_meta(&dep_resource, &dep, |m| strip_owner(m, &uid))?;
                    }
                }
                self.finish_or_mark(resource, current, None)
            }
            Propagation::Background => self.finish_or_mark(resource, current, None),
            Propagation::Foreground => {
                let deps = dependents(self.state);
                if deps.is_empty() {
                    return self.finish_or_mark(resource, current, None);
                }
                let marked = self.mark_deleting(resource, &current, Some(FOREGROUND_FINALIZER))?;
                for (dep_resource, dep_key) in deps {
                    if let Some(dep) = self.current(&dep_resource, &dep_key) {
                        self.delete_object(&dep_resource, dep, Propagation::Background)?;
                    }
                }
                // The last dependent's removal may already have finished the owner.
                match self.current(resource, &marked.meta.key()) {
                    Some(owner) => {
                        self.release_foreground(resource, owner.clone())?;
                        match self.current(resource, &owner.meta.key()) {
                            Some(still) => Ok(DeleteOutcome::Pending(still)),
                            None => Ok(DeleteOutcome::Deleted(self.last_state(resource, &owner))),
                        }
                    }
                    None => Ok(DeleteOutcome::Deleted(self.last_state(resource, &marked))),
                }
            }
        }
    }

    /// The final state of an object removed within this transaction.
    fn last_state(&self, resource: &str, object: &Arc<StoredObject>) -> Arc<StoredObject> {
        self.pending
            .iter()
            .rev()
            .find(|e| {
                e.event_type == EventType::Deleted
                    && &*e.resource == resource
                    && e.key == object.meta.key()
            })
            .map(|e| e.object.clone())
            .unwrap_or_else(|| object.clone())
    }

    /// Removes the object now if nothing holds it, else marks it for deletion.
    fn finish_or_mark(
        &mut self,
        resource: &str,
        current: Arc<StoredObject>,
        extra_finalizer: Option<&str>,
    ) -> Result<DeleteOutcome> {
        if current.releasable() && extra_finalizer.is_none() {
            return Ok(DeleteOutcome::Deleted(self.remove(resource, current)?));
        }
        Ok(DeleteOutcome::Pending(self.mark_deleting(
            resource,
            &current,
            extra_finalizer,
        )?))
    }

    fn mark_deleting(
        &mut self,
        resource: &str,
        current: &Arc<StoredObject>,
        extra_finalizer: Option<&str>,
    ) -> Result<Arc<StoredObject>> {
        let now = self.now.clone();
        self.edit_meta(resource, current, |m| {
            m.insert("deletionTimestamp".into(), Value::String(now));
            m.insert("deletionGracePeriodSeconds".into(), json!(0));
            if let Some(f) = extra_finalizer {
                let list = m.entry("finalizers").or_insert_with(|| json!([]));
                if let Some(list) = list.as_array_mut() {
                    if !list.iter().any(|v| v.as_str() == Some(f)) {
                        list.push(Value::String(f.to_string()));
                    }
                }
            }
        })
    }

    /// Drops the `foregroundDeletion` finalizer once no dependent blocks the owner, and
    /// removes the owner if that was its last finalizer.
    fn release_foreground(&mut self, resource: &str, owner: Arc<StoredObject>) -> Result<()> {
        if owner.meta.deletion_timestamp.is_none()
            || !owner
                .meta
                .finalizers
                .iter()
                .any(|f| &**f == FOREGROUND_FINALIZER)
        {
            return Ok(());
        }
        let uid = owner.meta.uid.clone();
        let blocked = self
            .state
            .dependents
            .get(&uid)
            .map(|deps| {
                deps.iter().any(|(r, k)| {
                    self.current(r, k).is_some_and(|d| {
                        d.meta
                            .owner_references
                            .iter()
                            .any(|o| o.uid == uid && o.block_owner_deletion)
                    })
                })
            })
            .unwrap_or(false);
        if blocked {
            return Ok(());
        }
        let released = self.edit_meta(resource, &owner, |m| {
            if let Some(list) = m.get_mut("finalizers").and_then(Value::as_array_mut) {
                list.retain(|v| v.as_str() != Some(FOREGROUND_FINALIZER));
                if list.is_empty() {
                    m.remove("finalizers");
                }
            }
        })?;
        if released.releasable() {
            self.remove(resource, released)?;
        }
        Ok(())
    }

    /// Reacts to the removal of `removed`: deletes dependents left without owners, and lets
    /// owners waiting in foreground deletion finish.
    fn collect_garbage(&mut self, removed: &StoredObject) -> Result<()> {
        let orphans: Vec<(Arc<str>, ObjectKey)> = self
            .state
            .dependents
            .get(&removed.meta.uid)
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default();
        for (dep_resource, dep_key) in orphans {
            let Some(dep) = self.current(&dep_resource, &dep_key) else {
                continue;
            };
            let owner_alive = dep
                .meta
                .owner_references
                .iter()
                .any(|o| self.state.by_uid.contains(&o.uid));
            if owner_alive {
                // Another owner lives on: only the reference to the removed one goes.
                let uid = removed.meta.uid.clone();
                self.edit_meta(&dep_resource, &dep, |m| strip_owner(m, &uid))?;
            } else {
                self.delete_object(&dep_resource, dep, Propagation::Background)?;
            }
        }
        for owner_ref in &removed.meta.owner_references {
            let Some((owner_resource, owner_key)) = self.state.by_uid.get(&owner_ref.uid) else {
                continue;
            };
            if let Some(owner) = self.current(&owner_resource, &owner_key) {
                self.release_foreground(&owner_resource, owner)?;
            }
        }
        Ok(())
    }
}

fn strip_owner(meta: &mut serde_json::Map<String, Value>, uid: &str) {
    if let Some(list) = meta
        .get_mut("ownerReferences")
        .and_then(Value::as_array_mut)
    {
        list.retain(|r| r.get("uid").and_then(Value::as_str) != Some(uid));
        if list.is_empty() {
            meta.remove("ownerReferences");
        }
    }
}
