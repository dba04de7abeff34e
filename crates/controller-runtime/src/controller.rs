//! A controller before it runs: kube-runtime's [`kube::runtime::Controller`] with its work
//! queue beside it. Families build one as they would kube-runtime's (the same
//! `watches_shared_stream`, `owns_shared_stream`, `watches_stream` and `reconcile_on`), and
//! every request a trigger makes is seen by the [`WorkQueue`] on its way in, so the queue's
//! depth, adds and waits are measured where kube-runtime's own scheduler measures nothing.

use crate::informers::Watched;
use crate::workqueue::{Key, WorkQueue};
use futures::{Stream, StreamExt};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::Resource;
use serde::de::DeserializeOwned;
use std::fmt::Debug;
use std::sync::Arc;
use std::time::Instant;

/// A controller of `K` and its work queue.
pub struct Controller<K: Watched> {
    pub(crate) inner: kube::runtime::Controller<K>,
    pub(crate) queue: Arc<WorkQueue>,
}

/// The queue's key of an object reference.
pub(crate) fn key<K: Resource>(r: &ObjectRef<K>) -> Key
where
    K::DynamicType: Clone,
{
    (r.namespace.clone(), r.name.clone())
}

impl<K: Watched> Controller<K> {
    /// Wraps kube-runtime's controller, whose own objects' stream `queue` already counts.
    pub(crate) fn new(inner: kube::runtime::Controller<K>, queue: Arc<WorkQueue>) -> Self {
        Controller { inner, queue }
    }

    /// A mapper that tells the queue of the requests `mapper` makes.
    fn counted<T, I>(
        &self,
        mapper: impl Fn(T) -> I + Sync + Send + 'static,
    ) -> impl Fn(T) -> Vec<ObjectRef<K>> + Sync + Send + 'static
    where
        I: IntoIterator<Item = ObjectRef<K>>,
    {
        let queue = self.queue.clone();
        move |object| {
            let refs: Vec<ObjectRef<K>> = mapper(object).into_iter().collect();
            let now = Instant::now();
            for r in &refs {
                queue.add(key(r), now);
            }
            refs
        }
    }

    /// kube-runtime's `watches_shared_stream`: the objects `mapper` names for each change.
    pub fn watches_shared_stream<Other, I>(
        self,
        trigger: impl Stream<Item = Arc<Other>> + Send + 'static,
        mapper: impl Fn(Arc<Other>) -> I + Sync + Send + 'static,
    ) -> Self
    where
        Other: Clone + Resource + DeserializeOwned + Debug + Send + 'static,
        Other::DynamicType: Default + Debug + Clone,
        I: 'static + IntoIterator<Item = ObjectRef<K>>,
        I::IntoIter: Send,
    {
        let mapper = self.counted(mapper);
        Controller {
            inner: self.inner.watches_shared_stream(trigger, mapper),
            queue: self.queue,
        }
    }

    /// kube-runtime's `watches_stream`.
    pub fn watches_stream<Other, I>(
        self,
        trigger: impl Stream<Item = Result<Other, watcher::Error>> + Send + 'static,
        mapper: impl Fn(Other) -> I + Sync + Send + 'static,
    ) -> Self
    where
        Other: Clone + Resource + DeserializeOwned + Debug + Send + 'static,
        Other::DynamicType: Default + Debug + Clone,
        I: 'static + IntoIterator<Item = ObjectRef<K>>,
        I::IntoIter: Send,
    {
        let mapper = self.counted(mapper);
        Controller {
            inner: self.inner.watches_stream(trigger, mapper),
            queue: self.queue,
        }
    }

    /// kube-runtime's `owns_shared_stream`: each changed child's owners of kind `K` (by their
    /// owner references, controller or not, as kube-runtime maps them).
    pub fn owns_shared_stream<Child>(
        self,
        trigger: impl Stream<Item = Arc<Child>> + Send + 'static,
    ) -> Self
    where
        Child: Watched,
    {
        self.watches_shared_stream(trigger, |child: Arc<Child>| {
            let meta = child.meta();
            let ns = meta.namespace.as_deref();
            meta.owner_references
                .iter()
                .flatten()
                .filter_map(|owner| ObjectRef::<K>::from_owner_ref(ns, owner, ()))
                .collect::<Vec<_>>()
        })
    }

    /// kube-runtime's `reconcile_on`: the objects a stream names.
    pub fn reconcile_on(self, trigger: impl Stream<Item = ObjectRef<K>> + Send + 'static) -> Self {
        let queue = self.queue.clone();
        let counted = trigger.inspect(move |r| queue.add(key(r), Instant::now()));
        Controller {
            inner: self.inner.reconcile_on(counted),
            queue: self.queue,
        }
    }

    /// The cache of the controller's own objects.
    pub fn store(&self) -> kube::runtime::reflector::Store<K> {
        self.inner.store()
    }

    /// kube-runtime's `with_config`.
    pub fn with_config(self, config: kube::runtime::controller::Config) -> Self {
        Controller {
            inner: self.inner.with_config(config),
            queue: self.queue,
        }
    }
}
