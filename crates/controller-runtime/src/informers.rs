//! One watch per kind, shared by every controller of the process, as client-go's shared
//! informers share theirs. kube-runtime gives each controller its own watches: a Machine
//! change was decoded by seven watchers (one per controller that cares about Machines), the
//! management plane encoded it seven times, and seven caches fell out of its watch window
//! apart, each relisting tens of thousands of objects. Here a kind has one watch, one cache
//! (the reflector store every controller of the kind reads) and a fan-out of its events to
//! the controllers subscribed to it.
//!
//! The fan-out queues are unbounded: the watch is read as fast as it is decoded, so the
//! management plane never drops it for being slow, and a busy controller only holds shared
//! pointers to objects it has yet to look at. kube-runtime's own shared streams would do
//! the rest but pass no deletions on, and an owner must hear that its Machine is gone.

use futures::channel::mpsc::{unbounded, UnboundedReceiver, UnboundedSender};
use futures::StreamExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::Api;
use kube::api::{ApiResource, DynamicObject};
use kube::core::{ClusterResourceScope, NamespaceResourceScope};
use kube::runtime::reflector::{self, Store};
use kube::runtime::watcher::{self, watcher, Event};
use kube::runtime::WatchStreamExt;
use kube::{Resource, ResourceExt};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::{Arc, Mutex, MutexGuard};

/// What an informer needs of a kind (namespaced or cluster-scoped).
pub trait Watched:
    Resource<DynamicType = (), Scope: Scoped>
    + Clone
    + DeserializeOwned
    + Serialize
    + Debug
    + Send
    + Sync
    + 'static
{
}

impl<K> Watched for K where
    K: Resource<DynamicType = (), Scope: Scoped>
        + Clone
        + DeserializeOwned
        + Serialize
        + Debug
        + Send
        + Sync
        + 'static
{
}

/// How a kind's objects are reached by scope: a namespaced kind in one namespace (or all,
/// `None`), a cluster-scoped kind (CAPV's VSphereClusterIdentity, VSphereDeploymentZone)
/// always cluster-wide, whatever namespace a caller or the informers were given.
pub trait Scoped {
    fn api<K: Resource<DynamicType = (), Scope = Self>>(
        client: kube::Client,
        namespace: Option<&str>,
    ) -> Api<K>;
}

impl Scoped for NamespaceResourceScope {
    fn api<K: Resource<DynamicType = (), Scope = Self>>(
        client: kube::Client,
        namespace: Option<&str>,
    ) -> Api<K> {
        match namespace {
            Some(ns) => Api::namespaced(client, ns),
            None => Api::all(client),
        }
    }
}

impl Scoped for ClusterResourceScope {
    fn api<K: Resource<DynamicType = (), Scope = Self>>(
        client: kube::Client,
        _: Option<&str>,
    ) -> Api<K> {
        Api::all(client)
    }
}

/// The cache key of `name` in `namespace`: a cluster-scoped object (`namespace` empty) has
/// none in its key.
fn cache_key<K: Resource<DynamicType = ()>>(
    namespace: &str,
    name: &str,
) -> reflector::ObjectRef<K> {
    let key = reflector::ObjectRef::new(name);
    match namespace {
        "" => key,
        ns => key.within(ns),
    }
}

/// The informers of one process: one per kind, made on first use. Dropping the last handle
/// stops their watches.
pub struct Informers {
    client: kube::Client,
    namespace: Option<String>,
    kinds: Mutex<HashMap<TypeId, Box<dyn Any + Send + Sync>>>,
    /// The typed caches by apiVersion and kind, for readers that know a kind only by those
    /// (the core reads provider objects by contract).
    untyped: Mutex<HashMap<(String, String), UntypedView>>,
    /// Where the owners of each watched kind's objects are heard, by apiVersion and kind
    /// (see [`Informers::observe_owners`]).
    owner_feeds: Mutex<HashMap<(String, String), OwnerFeed>>,
    watches: Mutex<Vec<tokio::task::AbortHandle>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Nothing here holds an invariant that a panic halfway could break.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Informers {
    /// Informers watching `namespace` (every namespace when `None`) through `client`.
    pub fn new(client: kube::Client, namespace: Option<String>) -> Self {
        Informers {
            client,
            namespace,
            kinds: Mutex::new(HashMap::new()),
            untyped: Mutex::new(HashMap::new()),
            owner_feeds: Mutex::new(HashMap::new()),
            watches: Mutex::new(Vec::new()),
        }
    }

    /// The informer of kind `K`, whose watch starts the first time it is asked for.
    pub fn of<K: Watched>(&self) -> Informer<K> {
        let mut kinds = lock(&self.kinds);
        if let Some(informer) = kinds
            .get(&TypeId::of::<K>())
            .and_then(|b| b.downcast_ref::<Informer<K>>())
        {
            return informer.clone();
        }
        let api = K::Scope::api::<K>(self.client.clone(), self.namespace.as_deref());
        let (informer, writer) = Informer::unstarted();
        let watch = tokio::spawn(drive(api, writer, informer.clone()));
        lock(&self.watches).push(watch.abort_handle());
        kinds.insert(TypeId::of::<K>(), Box::new(informer.clone()));
        let store = informer.store.clone();
        let key = (K::api_version(&()).into_owned(), K::kind(&()).into_owned());
        let fed = informer.clone();
        lock(&self.owner_feeds).insert(
            key.clone(),
            Arc::new(move |sink: OwnerSink| {
                fed.observe(Arc::new(move |event: &Event<Arc<K>>| {
                    if let Some(o) = object_of(event) {
                        sink(&o.namespace().unwrap_or_default(), o.owner_references());
                    }
                }))
            }),
        );
        lock(&self.untyped).insert(
            key,
            Arc::new(move |namespace, name| {
                store
                    .get(&cache_key(namespace, name))
                    .and_then(|o| untyped(&*o))
            }),
        );
        informer
    }
}

impl Informers {
    /// `name` in `namespace` as the kind's cache holds it, as controller-runtime's cached
    /// client reads: the objects a controller looks up are the ones whose changes wake it, so
    /// a copy a moment old is corrected by the event that follows, and a read costs no
    /// request (a GET was a tenth of the process's CPU at 1,000 clusters). An object the
    /// cache has not seen (created a moment ago, or before the first list) is asked of the
    /// API server, so a miss never passes for "does not exist" while the watch catches up.
    pub async fn get<K: Watched>(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<Arc<K>>, kube::Error> {
        if let Some(cached) = self.of::<K>().store.get(&cache_key(namespace, name)) {
            return Ok(Some(cached));
        }
        let api: Api<K> = K::Scope::api(self.client.clone(), Some(namespace));
        Ok(api.get_opt(name).await?.map(Arc::new))
    }
}

impl Informers {
    /// [`Informers::get`] for a kind known by its resource only: from the cache of a typed
    /// informer of that apiVersion and kind if the process has one, else from the API server.
    pub async fn get_untyped(
        &self,
        resource: &ApiResource,
        namespace: &str,
        name: &str,
    ) -> Result<Option<DynamicObject>, kube::Error> {
        let view = lock(&self.untyped)
            .get(&(resource.api_version.clone(), resource.kind.clone()))
            .cloned();
        if let Some(cached) = view.and_then(|read| read(namespace, name)) {
            return Ok(Some(cached));
        }
        let api: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), namespace, resource);
        api.get_opt(name).await
    }
}

impl Informers {
    /// Calls `sink` with the namespace and owner references of every object of `resource`
    /// as it changes (is listed, applied or deleted), from now on: how a controller hears
    /// of objects of kinds it learns only at run time, as Cluster API's core does of the
    /// providers' objects its references name. A kind the process has an informer of is
    /// heard from that informer's watch; any other gets a watch of its own, shared by
    /// every later caller.
    pub fn observe_owners(&self, resource: &ApiResource, sink: OwnerSink) {
        let key = (resource.api_version.clone(), resource.kind.clone());
        let feed = {
            let mut feeds = lock(&self.owner_feeds);
            match feeds.get(&key) {
                Some(feed) => feed.clone(),
                None => {
                    let sinks: Arc<Mutex<Vec<OwnerSink>>> = Arc::default();
                    let api = match &self.namespace {
                        Some(ns) => Api::namespaced_with(self.client.clone(), ns, resource),
                        None => Api::all_with(self.client.clone(), resource),
                    };
                    let watch = tokio::spawn(drive_owners(api, sinks.clone()));
                    lock(&self.watches).push(watch.abort_handle());
                    let feed: OwnerFeed = Arc::new(move |sink| lock(&sinks).push(sink));
                    feeds.insert(key, feed.clone());
                    feed
                }
            }
        };
        feed(sink);
    }
}

/// Called with an object's namespace and owner references (see
/// [`Informers::observe_owners`]).
pub type OwnerSink = Arc<dyn Fn(&str, &[OwnerReference]) + Send + Sync>;

/// Adds a sink to a kind's owner notifications.
type OwnerFeed = Arc<dyn Fn(OwnerSink) + Send + Sync>;

/// The object an event is about (none for the markers of a list).
fn object_of<K>(event: &Event<K>) -> Option<&K> {
    match event {
        Event::Apply(o) | Event::Delete(o) | Event::InitApply(o) => Some(o),
        Event::Init | Event::InitDone => None,
    }
}

/// Follows the watch of a kind no informer of this process has, for its objects' owners.
async fn drive_owners(api: Api<DynamicObject>, sinks: Arc<Mutex<Vec<OwnerSink>>>) {
    let events = watcher(api, watcher::Config::default()).default_backoff();
    let mut events = std::pin::pin!(events);
    while let Some(event) = events.next().await {
        let Ok(event) = event else {
            // The watcher backs off and lists again by itself.
            continue;
        };
        if let Some(o) = object_of(&event) {
            let ns = o.namespace().unwrap_or_default();
            for sink in lock(&sinks).iter() {
                sink(&ns, o.owner_references());
            }
        }
    }
}

/// A typed cache read as untyped objects.
type UntypedView = Arc<dyn Fn(&str, &str) -> Option<DynamicObject> + Send + Sync>;

/// `object` as an untyped object. The kinds cached here are the process's own, whose CRDs are
/// generated from the same types, so the server keeps no field the type would drop.
fn untyped<K: Serialize + Resource>(object: &K) -> Option<DynamicObject> {
    // The typed metadata is cloned rather than encoded and decoded again with the rest (its
    // managedFields are most of an object's bytes), and the rest is taken from the encoding
    // as it is: decoding a DynamicObject would buffer it whole to split its flattened fields.
    let serde_json::Value::Object(mut data) = serde_json::to_value(object).ok()? else {
        return None;
    };
    let mut text = |field: &str| match data.remove(field) {
        Some(serde_json::Value::String(s)) => s,
        _ => String::new(),
    };
    let types = kube::api::TypeMeta {
        api_version: text("apiVersion"),
        kind: text("kind"),
    };
    data.remove("metadata");
    Some(DynamicObject {
        types: Some(types),
        metadata: object.meta().clone(),
        data: serde_json::Value::Object(data),
    })
}

impl Drop for Informers {
    fn drop(&mut self) {
        for watch in lock(&self.watches).drain(..) {
            watch.abort();
        }
    }
}

/// One kind's cache and the controllers subscribed to its events. Cheap to clone.
pub struct Informer<K: Watched> {
    store: Store<K>,
    hub: Arc<Mutex<Hub<K>>>,
}

impl<K: Watched> Clone for Informer<K> {
    fn clone(&self) -> Self {
        Informer {
            store: self.store.clone(),
            hub: self.hub.clone(),
        }
    }
}

/// Where the watch is: before its first list, listing, or following changes.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Phase {
    NotStarted,
    Listing,
    Live,
}

struct Hub<K> {
    phase: Phase,
    subscribers: Vec<Subscriber<K>>,
}

struct Subscriber<K> {
    events: Sink<K>,
    /// Subscribed while a list was under way: it missed that list's first objects, so it
    /// gets the whole cache when the list is done.
    joined_listing: bool,
}

/// Where a subscriber's events go: a queue its controller reads when it runs, or a function
/// called as the event is published (an index that must be in step with the cache before any
/// controller hears of the event).
enum Sink<K> {
    Queue(UnboundedSender<Event<Arc<K>>>),
    Call(Observer<K>),
}

/// A function called with every event of a kind, in order, as it is published.
pub type Observer<K> = Arc<dyn Fn(&Event<Arc<K>>) + Send + Sync>;

impl<K> Sink<K> {
    /// Hands one event on; false once the receiving end is gone.
    fn send(&self, event: Event<Arc<K>>) -> bool {
        match self {
            Sink::Queue(tx) => tx.unbounded_send(event).is_ok(),
            Sink::Call(observe) => {
                observe(&event);
                true
            }
        }
    }
}

impl<K: Watched> Informer<K> {
    /// An informer with an empty cache, and the writer its watch fills the cache with.
    fn unstarted() -> (Self, reflector::store::Writer<K>) {
        let (store, writer) = reflector::store();
        let hub = Hub {
            phase: Phase::NotStarted,
            subscribers: Vec::new(),
        };
        let informer = Informer {
            store,
            hub: Arc::new(Mutex::new(hub)),
        };
        (informer, writer)
    }

    /// The kind's cache, kept by the informer's watch.
    pub fn store(&self) -> Store<K> {
        self.store.clone()
    }

    /// The kind's watch events from now on. A subscriber that comes after the first list
    /// gets the cache as a list of its own (`Init`, `InitApply` of every object, `InitDone`),
    /// so it starts from every object, as a watch of its own would.
    pub fn subscribe(&self) -> UnboundedReceiver<Event<Arc<K>>> {
        let (tx, rx) = unbounded();
        self.join(Sink::Queue(tx));
        rx
    }

    /// Calls `observe` with the kind's events from now on, as [`Informer::subscribe`] would
    /// queue them, but as each is published and before any queue hears of it: what it keeps
    /// is up to date by the time a controller woken by the event reads it.
    pub fn observe(&self, observe: Observer<K>) {
        self.join(Sink::Call(observe));
    }

    /// Whether the cache holds every object (its first list is done).
    pub fn is_live(&self) -> bool {
        lock(&self.hub).phase == Phase::Live
    }

    fn join(&self, events: Sink<K>) {
        let mut hub = lock(&self.hub);
        let mut joined_listing = false;
        match hub.phase {
            Phase::NotStarted => {}
            Phase::Listing => {
                events.send(Event::Init);
                joined_listing = true;
            }
            Phase::Live => {
                events.send(Event::Init);
                for object in self.store.state() {
                    events.send(Event::InitApply(object));
                }
                events.send(Event::InitDone);
            }
        }
        hub.subscribers.push(Subscriber {
            events,
            joined_listing,
        });
    }
}

impl<K: Watched> Hub<K> {
    /// Sends one event (already in the cache) to every subscriber still listening.
    fn publish(&mut self, event: Event<K>, store: &Store<K>) {
        let shared = match event {
            Event::Apply(o) => Event::Apply(Arc::new(o)),
            Event::Delete(o) => Event::Delete(Arc::new(o)),
            Event::InitApply(o) => Event::InitApply(Arc::new(o)),
            Event::Init => {
                self.phase = Phase::Listing;
                crate::metrics::relisted(K::kind(&()).into_owned());
                Event::Init
            }
            Event::InitDone => {
                self.phase = Phase::Live;
                if self.subscribers.iter().any(|s| s.joined_listing) {
                    let everything = store.state();
                    for late in self.subscribers.iter_mut().filter(|s| s.joined_listing) {
                        for object in &everything {
                            late.events.send(Event::InitApply(object.clone()));
                        }
                        late.joined_listing = false;
                    }
                }
                Event::InitDone
            }
        };
        // Observers first: a controller may run the moment its queue has the event, and
        // must find the indexes already in step.
        for s in &self.subscribers {
            if let Sink::Call(_) = s.events {
                s.events.send(shared.clone());
            }
        }
        self.subscribers.retain(|s| match s.events {
            Sink::Call(_) => true,
            Sink::Queue(_) => s.events.send(shared.clone()),
        });
    }
}

/// Follows the kind's watch for good: each event goes into the cache first, then to the
/// subscribers, so whatever a subscriber hears of is already in the cache its controller
/// reads.
async fn drive<K: Watched>(
    api: Api<K>,
    mut writer: reflector::store::Writer<K>,
    informer: Informer<K>,
) {
    // No controller here reads managedFields, and they are the bulk of a cached object's
    // metadata (a tree of field sets per manager): the cache keeps objects without them.
    let events = watcher(api, watcher::Config::default())
        .default_backoff()
        .modify(|o: &mut K| o.meta_mut().managed_fields = None);
    let mut events = std::pin::pin!(events);
    while let Some(event) = events.next().await {
        let event = match event {
            Ok(event) => event,
            Err(e) => {
                // The watcher backs off and lists again by itself.
                tracing::debug!(kind = %K::kind(&()), error = %e, "watch error");
                continue;
            }
        };
        let mut hub = lock(&informer.hub);
        writer.apply_watcher_event(&event);
        hub.publish(event, &informer.store);
    }
}

/// An informer fed by hand, for tests of what is built on informers (other crates' tests
/// reach it through the `test-support` feature).
#[cfg(any(test, feature = "test-support"))]
pub mod testing {
    use super::*;

    /// An informer with no watch, and a function that plays its watch's events.
    pub fn informer<K: Watched>() -> (Informer<K>, impl FnMut(Event<K>)) {
        let (informer, mut writer) = Informer::unstarted();
        let fed = informer.clone();
        let feed = move |event: Event<K>| {
            let mut hub = lock(&fed.hub);
            writer.apply_watcher_event(&event);
            hub.publish(event, &fed.store);
        };
        (informer, feed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::ObjectMeta;
    use kube::ResourceExt;

    fn map(name: &str) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("ns".into()),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    fn feed(
        i: &Informer<ConfigMap>,
        w: &mut reflector::store::Writer<ConfigMap>,
        e: Event<ConfigMap>,
    ) {
        let mut hub = lock(&i.hub);
        w.apply_watcher_event(&e);
        hub.publish(e, &i.store);
    }

    /// What a subscriber has been sent so far, as `kind:name` strings.
    fn heard(rx: &mut UnboundedReceiver<Event<Arc<ConfigMap>>>) -> Vec<String> {
        let mut out = Vec::new();
        while let Ok(e) = rx.try_recv() {
            out.push(match e {
                Event::Init => "init".to_string(),
                Event::InitApply(o) => format!("listed:{}", o.name_any()),
                Event::InitDone => "done".to_string(),
                Event::Apply(o) => format!("applied:{}", o.name_any()),
                Event::Delete(o) => format!("deleted:{}", o.name_any()),
            });
        }
        out
    }

    #[test]
    fn a_cached_object_reads_untyped_with_its_type_and_fields() {
        let mut cm = map("x");
        cm.data = Some([("k".to_string(), "v".to_string())].into());
        let object = untyped(&cm).expect("a ConfigMap serializes");
        let types = object.types.expect("apiVersion and kind are kept");
        assert_eq!(
            (types.api_version.as_str(), types.kind.as_str()),
            ("v1", "ConfigMap")
        );
        assert_eq!(object.metadata.namespace.as_deref(), Some("ns"));
        assert_eq!(
            object.data.pointer("/data/k"),
            Some(&serde_json::json!("v"))
        );
    }

    #[test]
    fn every_subscriber_hears_every_event_deletions_included() {
        let (i, mut w) = Informer::unstarted();
        let (mut a, mut b) = (i.subscribe(), i.subscribe());
        feed(&i, &mut w, Event::Init);
        feed(&i, &mut w, Event::InitApply(map("x")));
        feed(&i, &mut w, Event::InitDone);
        feed(&i, &mut w, Event::Delete(map("x")));
        let want = ["init", "listed:x", "done", "deleted:x"];
        assert_eq!(heard(&mut a), want);
        assert_eq!(heard(&mut b), want);
        assert!(i.store().state().is_empty());
    }

    #[test]
    fn an_observer_starts_from_the_cache_and_hears_every_event_as_it_is_published() {
        let (i, mut w) = Informer::unstarted();
        feed(&i, &mut w, Event::Init);
        feed(&i, &mut w, Event::InitApply(map("x")));
        assert!(!i.is_live());
        feed(&i, &mut w, Event::InitDone);
        assert!(i.is_live());
        let mut queue = i.subscribe();
        heard(&mut queue);
        // What the observer has heard, by the time `feed` returns.
        let seen: Arc<Mutex<Vec<String>>> = Arc::default();
        let log = seen.clone();
        i.observe(Arc::new(move |e: &Event<Arc<ConfigMap>>| {
            let what = match e {
                Event::InitApply(o) => format!("listed:{}", o.name_any()),
                Event::Apply(o) => format!("applied:{}", o.name_any()),
                _ => return,
            };
            lock(&log).push(what);
        }));
        assert_eq!(*lock(&seen), ["listed:x"]);
        feed(&i, &mut w, Event::Apply(map("y")));
        assert_eq!(*lock(&seen), ["listed:x", "applied:y"]);
        assert_eq!(heard(&mut queue), ["applied:y"]);
    }

    #[test]
    fn a_late_subscriber_starts_from_the_whole_cache() {
        let (i, mut w) = Informer::unstarted();
        feed(&i, &mut w, Event::Init);
        feed(&i, &mut w, Event::InitApply(map("x")));
        let mut mid_list = i.subscribe();
        feed(&i, &mut w, Event::InitApply(map("y")));
        feed(&i, &mut w, Event::InitDone);
        let mut live = i.subscribe();
        feed(&i, &mut w, Event::Apply(map("z")));
        let mut mid = heard(&mut mid_list);
        // The list's own `y`, then the whole cache once the list is done.
        assert_eq!(mid.remove(0), "init");
        assert_eq!(mid.remove(0), "listed:y");
        assert_eq!(mid.pop().as_deref(), Some("applied:z"));
        assert_eq!(mid.pop().as_deref(), Some("done"));
        mid.sort();
        assert_eq!(mid, ["listed:x", "listed:y"]);
        let mut late = heard(&mut live);
        assert_eq!(late.first().map(String::as_str), Some("init"));
        assert_eq!(late.pop().as_deref(), Some("applied:z"));
        assert_eq!(late.pop().as_deref(), Some("done"));
        late.remove(0);
        late.sort();
        assert_eq!(late, ["listed:x", "listed:y"]);
    }
}
