//! How a controller is woken: by changes of its own objects' spec and metadata (never by
//! the status it writes itself), by changes of related objects that a predicate hashes
//! (a family's own predicates, such as Cluster API's in `capi/triggers.rs`, pass only what
//! matters to the woken controller), and, through every relist, by every object again. Every
//! family's controllers are built and run here, with one concurrency cap.

use crate::controller::Controller;
use crate::index::Index;
use crate::informers::{Informer, Watched};
use crate::workqueue::WorkQueue;
use futures::Stream;
use kube::runtime::watcher;
use kube::ResourceExt;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;

/// A predicate's value: the hash of what it watches.
pub fn hash(value: impl Hash) -> Option<u64> {
    let mut h = DefaultHasher::new();
    value.hash(&mut h);
    Some(h.finish())
}

/// What a controller reacts to of its own objects: their spec (`generation`) and metadata,
/// not their status, which it writes itself (a status write would otherwise wake it for
/// nothing). Deadlines come through the controller's wakeups; related objects through their
/// own watches.
pub fn spec_and_metadata<K: kube::Resource>(o: &K) -> Option<u64> {
    let meta = o.meta();
    hash((
        &meta.uid,
        meta.generation,
        &meta.labels,
        &meta.annotations,
        &meta.finalizers,
        meta.deletion_timestamp.is_some(),
        meta.owner_references
            .as_ref()
            .map(|o| o.iter().map(|r| (&r.uid, r.controller)).collect::<Vec<_>>()),
    ))
}

/// The objects of `informer`'s kind whose `predicate` changed (see [`only_changes`]), for a
/// controller's `watches_shared_stream` or `owns_shared_stream`.
pub fn filtered<K: Watched>(
    informer: &Informer<K>,
    predicate: fn(&K) -> Option<u64>,
) -> impl Stream<Item = Arc<K>> + Send + 'static {
    only_changes(informer.subscribe(), predicate)
}

/// Every change of `informer`'s objects, deletions included.
pub fn every_change<K: Watched>(
    informer: &Informer<K>,
) -> impl Stream<Item = Arc<K>> + Send + 'static {
    only_changes(informer.subscribe(), |_| None)
}

/// A controller of `informer`'s kind woken by changes of its objects' spec and metadata (see
/// [`spec_and_metadata`]), not by the status it writes itself; it reads the informer's
/// cache, and `index`, when given, is kept in step with the events it hears.
pub fn controller<K: Watched>(informer: &Informer<K>, index: Option<&Index<K>>) -> Controller<K> {
    use futures::StreamExt;
    let index = index.cloned();
    let events = informer.subscribe().inspect(move |event| {
        if let Some(index) = &index {
            index.observe(event);
        }
    });
    queued(only_changes(events, spec_and_metadata::<K>), informer)
}

/// kube-runtime's controller over `changes` of its own objects, each change counted as a
/// request by the controller's work queue.
fn queued<K: Watched>(
    changes: impl Stream<Item = Arc<K>> + Send + 'static,
    informer: &Informer<K>,
) -> Controller<K> {
    use futures::StreamExt;
    let queue = WorkQueue::new(&K::kind(&()).to_ascii_lowercase());
    let counted = queue.clone();
    let changes = changes
        .inspect(move |o| counted.add((o.namespace(), o.name_any()), std::time::Instant::now()));
    let inner = kube::runtime::Controller::for_shared_stream(changes, informer.store())
        .with_config(kube::runtime::controller::Config::default().concurrency(CONCURRENCY));
    Controller::new(inner, queue)
}

/// [`controller`] for the objects `keep` accepts only: the others never reach its
/// reconciler (a provider among several serving one kind, as Cluster API's IPAM providers
/// share `IPAddressClaim`, each taking the claims that name its pools). Its related watches
/// must name accepted objects only too.
pub fn controller_where<K: Watched>(informer: &Informer<K>, keep: fn(&K) -> bool) -> Controller<K> {
    use futures::StreamExt;
    let events = informer.subscribe().filter(move |event| {
        futures::future::ready(match event {
            watcher::Event::Apply(o) | watcher::Event::InitApply(o) | watcher::Event::Delete(o) => {
                keep(o)
            }
            watcher::Event::Init | watcher::Event::InitDone => true,
        })
    });
    queued(only_changes(events, spec_and_metadata::<K>), informer)
}

/// Reconciles a controller runs at once. kube-runtime's default is no limit: every due object
/// starts at once, and at ten thousand clusters thousands of reconciles were in flight, each
/// holding its objects, requests and connections. Capped, requests for an object that waits
/// its turn merge into one run, as they do in controller-runtime's work queue (whose
/// `MaxConcurrentReconciles` Cluster API sets per controller). Measured with `bench capi` at
/// 1,000 clusters: 110 s of CPU uncapped, 98 s at 32, 103-109 s at 64; at 64, 10,000
/// clusters were Available in 598 s and 651 s (a cap of 32 risks idling behind reconciles
/// that wait on an unreachable workload cluster).
pub(crate) const CONCURRENCY: u16 = 64;

/// Runs a controller's outcomes to the end, counting the requests kube-runtime dropped for
/// want of a cached object (see [`crate::metrics::dropped`]); reconcile failures are logged
/// and retried by the error policies.
pub async fn run_to_end<T, R: 'static, Q: 'static>(
    outcomes: impl Stream<Item = Result<T, kube::runtime::controller::Error<R, Q>>>,
    queue: &WorkQueue,
) {
    use futures::StreamExt;
    outcomes
        .for_each(|outcome| {
            if let Err(kube::runtime::controller::Error::ObjectNotFound(r)) = outcome {
                crate::metrics::dropped();
                queue.forget(&(r.namespace, r.name));
            }
            futures::future::ready(())
        })
        .await
}

/// Passes an object on when `predicate` of it changes, and always when it is deleted
/// (kube-runtime's own predicate filter drops deletions whose last state hashed the same, and
/// an owner must hear that its Machine is gone).
///
/// A relist sends every object through again, as an informer re-delivers every object after
/// one: the watch may have missed events, and with them wakeups whose targets were not yet in
/// the controller's cache. Kept across relists, the hashes lost such wakeups for good, and a
/// burst of clusters under `infrasim up`'s window left the first ones waiting forever.
///
/// The relisted objects go through only when the relist is done. Until then the reflector
/// keeps them aside and its cache still holds the state before the relist, so a reconcile
/// asked for an object created while the watch was down finds nothing, and kube-runtime drops
/// the request (`ObjectNotFound`) for good. At ten thousand clusters watches fall behind their
/// window, and this left clusters waiting for a bootstrap config that was never reconciled.
pub fn only_changes<K, S>(
    events: S,
    predicate: fn(&K) -> Option<u64>,
) -> impl Stream<Item = Arc<K>> + Send + 'static
where
    K: kube::Resource + Send + Sync + 'static,
    S: Stream<Item = watcher::Event<Arc<K>>> + Send + 'static,
{
    use futures::StreamExt;
    events
        .scan(Changes::<K>::new(predicate), move |changes, event| {
            futures::future::ready(Some(changes.pass(event)))
        })
        .flat_map(futures::stream::iter)
}

/// The state of [`only_changes`]: the last hash of every object, and the objects of a relist
/// under way.
struct Changes<K> {
    predicate: fn(&K) -> Option<u64>,
    seen: std::collections::HashMap<String, u64>,
    relisted: Option<Vec<Arc<K>>>,
}

impl<K: kube::Resource> Changes<K> {
    fn new(predicate: fn(&K) -> Option<u64>) -> Self {
        Changes {
            predicate,
            seen: Default::default(),
            relisted: None,
        }
    }

    /// What of `event` goes on to the controller, now.
    fn pass(&mut self, event: watcher::Event<Arc<K>>) -> Vec<Arc<K>> {
        match event {
            watcher::Event::Apply(o) => {
                // No hash (as for `every_change`): every change passes, nothing to remember.
                let Some(hash) = (self.predicate)(&o) else {
                    return vec![o];
                };
                match self.seen.insert(o.uid().unwrap_or_default(), hash) {
                    Some(old) if old == hash => vec![],
                    _ => vec![o],
                }
            }
            watcher::Event::Delete(o) => {
                self.seen.remove(&o.uid().unwrap_or_default());
                vec![o]
            }
            watcher::Event::Init => {
                self.seen.clear();
                self.relisted = Some(Vec::new());
                vec![]
            }
            watcher::Event::InitApply(o) => {
                if let Some(hash) = (self.predicate)(&o) {
                    self.seen.insert(o.uid().unwrap_or_default(), hash);
                }
                self.relisted.get_or_insert_with(Vec::new).push(o);
                vec![]
            }
            watcher::Event::InitDone => self.relisted.take().unwrap_or_default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::ObjectMeta;

    fn map(uid: &str, generation: i64) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                name: Some(uid.into()),
                uid: Some(uid.into()),
                generation: Some(generation),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    fn shared(event: watcher::Event<ConfigMap>) -> watcher::Event<Arc<ConfigMap>> {
        use watcher::Event::*;
        match event {
            Apply(o) => Apply(Arc::new(o)),
            Delete(o) => Delete(Arc::new(o)),
            InitApply(o) => InitApply(Arc::new(o)),
            Init => Init,
            InitDone => InitDone,
        }
    }

    async fn passed(events: Vec<watcher::Event<ConfigMap>>) -> Vec<String> {
        let stream = futures::stream::iter(events.into_iter().map(shared));
        only_changes(stream, spec_and_metadata::<ConfigMap>)
            .map(|o| o.name_any())
            .collect()
            .await
    }

    #[tokio::test]
    async fn unchanged_objects_pass_once_until_a_relist() {
        use watcher::Event::*;
        let out = passed(vec![
            Apply(map("a", 1)),
            Apply(map("a", 1)),
            Apply(map("a", 2)),
            // After a relist every object goes through again, changed or not.
            Init,
            InitApply(map("a", 2)),
            InitDone,
            Apply(map("a", 2)),
            Delete(map("a", 2)),
        ])
        .await;
        assert_eq!(out, ["a", "a", "a", "a"]);
    }

    /// The reflector swaps a relist into its cache only at `InitDone`: an object passed on
    /// before then would be looked up in the old cache and dropped if it is new.
    #[tokio::test]
    async fn relisted_objects_pass_when_the_relist_is_done() {
        use watcher::Event::*;
        let (tx, rx) = futures::channel::mpsc::unbounded();
        let mut out = Box::pin(only_changes(rx, spec_and_metadata::<ConfigMap>));
        for event in [
            Apply(map("a", 1)),
            Init,
            InitApply(map("a", 1)),
            InitApply(map("b", 1)),
        ] {
            tx.unbounded_send(shared(event)).unwrap();
        }
        let first = out.next().await.unwrap();
        assert_eq!(first.name_any(), "a");
        let early = futures::FutureExt::now_or_never(out.next());
        assert!(
            early.is_none(),
            "passed before the relist was done: {early:?}"
        );
        tx.unbounded_send(InitDone).unwrap();
        let a = out.next().await.unwrap();
        let b = out.next().await.unwrap();
        assert_eq!((a.name_any(), b.name_any()), ("a".into(), "b".into()));
    }
}
