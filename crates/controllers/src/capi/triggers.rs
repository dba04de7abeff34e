//! What of a related object a controller reacts to. A Cluster's status changes many times
//! while it comes up; each change would wake every Machine, bootstrap config and
//! infrastructure machine of the cluster, which need only know whether the cluster's
//! infrastructure is provisioned, its control plane initialized, or it is paused. These
//! predicates hash just that, and [`only_changes`] passes an object on only when its hash
//! changes, so a cluster of N machines costs O(N) reconciles, not O(N²).

use crate::capi::core::{Cluster, KubeadmControlPlane, Machine, MachineDeployment};
use crate::capi::index::Index;
use crate::informers::{Informer, Watched};
use futures::Stream;
use kube::runtime::{watcher, Controller};
use kube::ResourceExt;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;

fn hash(value: impl Hash) -> Option<u64> {
    let mut h = DefaultHasher::new();
    value.hash(&mut h);
    Some(h.finish())
}

/// The gates a Cluster opens for what belongs to it.
pub fn cluster_gates(c: &Cluster) -> Option<u64> {
    hash((
        c.uid(),
        c.infrastructure_provisioned(),
        c.control_plane_initialized(),
        c.paused(),
        c.annotations().contains_key(crate::capi::PAUSED_ANNOTATION),
        c.metadata.deletion_timestamp.is_some(),
        c.spec
            .control_plane_endpoint
            .as_ref()
            .map(|e| (&e.host, e.port)),
        c.spec.infrastructure_ref.as_ref().map(|r| &r.name),
        c.spec.control_plane_ref.as_ref().map(|r| &r.name),
    ))
}

/// What a Machine's bootstrap config and infrastructure machine need of it: its spec, labels,
/// annotations (the bootstrapped mark, pausing), and deletion.
pub fn machine_spec(m: &Machine) -> Option<u64> {
    hash((
        m.uid(),
        serde_json::to_string(&m.spec).unwrap_or_default(),
        m.labels(),
        m.annotations(),
        m.metadata.deletion_timestamp.is_some(),
    ))
}

/// What an owner of Machines counts: their readiness, availability, being up to date, their
/// Node, and their deletion (with the hooks that hold it).
pub fn machine_summary(m: &Machine) -> Option<u64> {
    let status = m.status.as_ref();
    let conds: Vec<(String, String, String)> = status
        .and_then(|s| s.conditions.as_ref())
        .map(|c| {
            c.iter()
                .filter(|c| {
                    matches!(
                        c.type_.as_str(),
                        "Ready"
                            | "Available"
                            | "UpToDate"
                            | "Deleting"
                            | "NodeHealthy"
                            | "HealthCheckSucceeded"
                            | "OwnerRemediated"
                    )
                })
                .map(|c| (c.type_.clone(), c.status.clone(), c.reason.clone()))
                .collect()
        })
        .unwrap_or_default();
    hash((
        m.uid(),
        conds,
        status.and_then(|s| s.node_ref.as_ref()).map(|n| &n.name),
        status.and_then(|s| s.phase.as_ref()),
        status
            .and_then(|s| s.node_info.as_ref())
            .and_then(|i| i.get("kubeletVersion"))
            .map(|v| v.to_string()),
        &m.spec.provider_id,
        &m.spec.version,
        m.annotations(),
        m.metadata.deletion_timestamp.is_some(),
    ))
}

/// What a health check counts of a Machine: whether its selector and cluster still take it
/// in (labels, cluster), whether its Node is healthy, the annotations that mark or exempt it,
/// and its conditions once it has a Node. A Machine's status changes a dozen times while it
/// comes up; its health check needs to hear of a few of them.
pub fn machine_health(m: &Machine) -> Option<u64> {
    let healthy = m
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .is_some_and(|c| crate::conditions::is_true(c, "NodeHealthy"));
    let marks: Vec<(&String, &String)> = m
        .annotations()
        .iter()
        .filter(|(k, _)| {
            matches!(
                k.as_str(),
                "cluster.x-k8s.io/remediate-machine"
                    | "cluster.x-k8s.io/skip-remediation"
                    | "cluster.x-k8s.io/paused"
            )
        })
        .collect();
    let node = m
        .status
        .as_ref()
        .and_then(|s| s.node_ref.as_ref())
        .map(|n| &n.name);
    // Once the Machine has its Node, any condition may be one a check watches
    // (`unhealthyMachineConditions`); before, its conditions change with every boot step and
    // only the startup timeout matters, which runs from InfrastructureReady.
    let conds: Vec<(&str, &str)> = m
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .into_iter()
        .flatten()
        .filter(|c| node.is_some() || c.type_ == "InfrastructureReady")
        .filter(|c| c.type_ != "Ready" && c.type_ != "Available")
        .map(|c| (c.type_.as_str(), c.status.as_str()))
        .collect();
    hash((
        m.uid(),
        m.labels(),
        &m.spec.cluster_name,
        healthy,
        marks,
        node,
        m.metadata.deletion_timestamp.is_some(),
        conds,
    ))
}

/// A Machine's failed health check (`HealthCheckSucceeded` not True), which its Ready
/// summarizes. A first verdict of True changes nothing of Ready, so it wakes nobody.
pub fn health_verdict(m: &Machine) -> Option<u64> {
    let verdict = m
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .and_then(|c| crate::conditions::find(c, "HealthCheckSucceeded"))
        .filter(|c| !c.is_true())
        .map(|c| (c.status.clone(), c.reason.clone()));
    hash((m.uid(), verdict))
}

/// What makes a control plane's Machines up to date or not: its version and the template of
/// their infrastructure.
pub fn control_plane_rollout(k: &KubeadmControlPlane) -> Option<u64> {
    hash((
        k.uid(),
        &k.spec.version,
        &k.spec.machine_template.spec.infrastructure_ref.name,
    ))
}

/// What makes a deployment's Machines up to date or not: its Machine template.
pub fn deployment_rollout(md: &MachineDeployment) -> Option<u64> {
    hash((
        md.uid(),
        serde_json::to_string(&md.spec.template.spec).unwrap_or_default(),
    ))
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
    Controller::for_shared_stream(
        only_changes(events, spec_and_metadata::<K>),
        informer.store(),
    )
    .with_config(kube::runtime::controller::Config::default().concurrency(CONCURRENCY))
}

/// Reconciles a controller runs at once. kube-runtime's default is no limit: every due object
/// starts at once, and at ten thousand clusters thousands of reconciles were in flight, each
/// holding its objects, requests and connections. Capped, requests for an object that waits
/// its turn merge into one run, as they do in controller-runtime's work queue (whose
/// `MaxConcurrentReconciles` Cluster API sets per controller). Measured with `bench capi` at
/// 1,000 clusters: 110 s of CPU uncapped, 98 s at 32, 103-109 s at 64; at 64, 10,000
/// clusters were Available in 598 s and 651 s (a cap of 32 risks idling behind reconciles
/// that wait on an unreachable workload cluster).
const CONCURRENCY: u16 = 64;

/// Runs a controller's outcomes to the end, counting the requests kube-runtime dropped for
/// want of a cached object (see [`crate::metrics::dropped`]); reconcile failures are logged
/// and retried by the error policies.
pub async fn run_to_end<T, R: 'static, Q: 'static>(
    outcomes: impl Stream<Item = Result<T, kube::runtime::controller::Error<R, Q>>>,
) {
    use futures::StreamExt;
    outcomes
        .for_each(|outcome| {
            if let Err(kube::runtime::controller::Error::ObjectNotFound(_)) = outcome {
                crate::metrics::dropped();
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
