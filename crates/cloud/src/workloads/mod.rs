//! What keeps workloads alive inside a simulated cluster: kube-controller-manager's Deployment,
//! ReplicaSet, DaemonSet, StatefulSet, Job, endpoints, disruption, pod-GC and certificate
//! signing controllers, kube-scheduler, and the kubelets, in miniature.
//!
//! One task per cluster watches the cluster's resource group in-process (no HTTP, no client
//! cache) and, whenever a workload object, a pod or a node changes, runs every controller over
//! the current objects. The controllers are level-triggered and idempotent, as Kubernetes'
//! are: a pass that finds nothing to do writes nothing, so the events of a pass's own writes
//! settle after one more pass. A cluster holds tens of objects, so reading them all per pass is
//! cheaper than keeping indexes up to date, and there is no cache to go stale.
//!
//! Time (pod startup, lease renewal) reads the cloud's injected clock; tests move a fake one.

mod autoscaler;
mod certificates;
mod daemonset;
mod deployment;
mod disruption;
mod endpoints;
mod events;
mod job;
mod kubelet;
mod node_lifecycle;
mod replicaset;
mod scheduler;
mod statefulset;

use chrono::{DateTime, Utc};
use infrasim_clock::SharedClock;
use infrasim_kube_api::pki::CertificateAuthority;
use infrasim_kube_api::status::ApiError;
use infrasim_kube_api::values::At;
pub(crate) use infrasim_kube_api::values::{condition_true, string_map};
use infrasim_kube_api::SystemWriter;
use infrasim_store::{Group, ObjectKey, ReadAt, WatchError};
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::oneshot;

pub use node_lifecycle::{KubeletSwitch, GRACE as NODE_MONITOR_GRACE};

/// How a cluster's simulated kubelets behave.
#[derive(Debug, Clone)]
pub struct WorkloadConfig {
    /// How long a pod bound to a node takes to become Running and Ready (its containers
    /// "start"); zero starts them at once.
    pub pod_startup: Duration,
    /// How often each node's kubelet renews its Lease in `kube-node-lease` (kubelets renew
    /// every 10 s); zero turns renewal off.
    pub lease_renewal: Duration,
    /// How long events are kept (kube-apiserver's `--event-ttl`, one hour by default).
    pub event_ttl: Duration,
}

impl Default for WorkloadConfig {
    fn default() -> Self {
        WorkloadConfig {
            pod_startup: Duration::from_secs(1),
            lease_renewal: Duration::from_secs(10),
            event_ttl: Duration::from_secs(3600),
        }
    }
}

/// The resources whose changes make the controllers look again.
const WATCHED: [&str; 11] = [
    certificates::RESOURCE,
    autoscaler::RESOURCE,
    "jobs.batch",
    "services",
    "poddisruptionbudgets.policy",
    "statefulsets.apps",
    "deployments.apps",
    "replicasets.apps",
    "daemonsets.apps",
    "pods",
    "nodes",
];

/// Runs the controllers of one cluster until `stop` fires (or its sender is dropped). They
/// write through `writer` (kube-controller-manager's: see [`crate::components`]), the
/// scheduler and the kubelets as components of it, and read the group it writes into.
pub async fn run(
    writer: SystemWriter,
    clock: SharedClock,
    config: WorkloadConfig,
    ca: CertificateAuthority,
    kubelets: KubeletSwitch,
    mut stop: oneshot::Receiver<()>,
) {
    let group = writer.group().clone();
    let mut controllers = Controllers {
        ca,
        cluster: Cluster::new(writer, clock.clone(), kubelets.clone()),
        kubelet: kubelet::Kubelet::new(config.clone()),
        autoscaler: autoscaler::Autoscaler::default(),
    };
    // Events are swept at least every minute (sooner with a shorter TTL).
    let event_ttl = chrono::Duration::from_std(config.event_ttl).unwrap_or(chrono::Duration::MAX);
    let sweep_every = event_ttl.min(chrono::Duration::seconds(60));
    let mut next_sweep = clock.now() + sweep_every;
    let mut watch = match group.watch(None) {
        Ok(w) => w,
        Err(e) => {
            tracing::error!(group = group.name(), error = %e, "workload controllers cannot watch");
            return;
        }
    };
    let mut dirty = true;
    // Decoded lists are kept while the cluster is busy, so that a pass decodes only what
    // changed since the one before; once it has been quiet for LISTS_KEPT they are dropped,
    // or they would hold every idle cluster's objects twice (as bytes in the store, as JSON
    // values here). Real time, not the cluster's clock: this is about memory, not behaviour.
    let mut forget_lists_at: Option<tokio::time::Instant> = None;
    loop {
        if dirty {
            dirty = false;
            controllers.pass();
            forget_lists_at = Some(tokio::time::Instant::now() + LISTS_KEPT);
        }
        let now = clock.now();
        let next = [
            controllers.kubelet.next_deadline(),
            controllers.cluster.take_wake_at(),
        ]
        .into_iter()
        .flatten()
        .fold(next_sweep, |a, b| a.min(b));
        let wait = (next - now).to_std().unwrap_or(Duration::ZERO);
        tokio::select! {
            _ = &mut stop => return,
            // A kubelet stopped or started again (a fault).
            _ = kubelets.changed() => dirty = true,
            _ = sleep_until(forget_lists_at) => {
                controllers.cluster.forget_lists();
                forget_lists_at = None;
            }
            event = watch.next() => match event {
                Ok(e) => dirty |= WATCHED.contains(&&*e.resource),
                Err(WatchError::Lagged) => {
                    // Cut off behind a burst: start again from now and look at everything.
                    match group.watch(None) {
                        Ok(w) => watch = w,
                        Err(_) => return,
                    }
                    dirty = true;
                }
                Err(WatchError::Closed) => return,
            },
            _ = clock.sleep(wait) => {
                // A controller asked to look again at this time (a Job's deadline).
                dirty |= controllers.cluster.wake_requested(next);
                dirty |= controllers.kubelet.on_timers(&controllers.cluster);
                let now = clock.now();
                if now >= next_sweep {
                    events::expire(&controllers.cluster, now - event_ttl);
                    next_sweep = now + sweep_every;
                }
                // The timers may have decoded lists (node status reports, the event sweep).
                forget_lists_at.get_or_insert(tokio::time::Instant::now() + LISTS_KEPT);
            }
        }
        // Take every event already queued before running a pass: a burst costs one pass.
        loop {
            match watch.try_next() {
                Ok(Some(e)) => dirty |= WATCHED.contains(&&*e.resource),
                Ok(None) => break,
                Err(WatchError::Lagged) => {
                    if let Ok(w) = group.watch(None) {
                        watch = w;
                    }
                    dirty = true;
                    break;
                }
                Err(WatchError::Closed) => return,
            }
        }
    }
}

/// How long a cluster's decoded lists outlive its last pass.
const LISTS_KEPT: Duration = Duration::from_secs(2);

/// Sleeps until `at`, or forever when there is no `at`.
async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

struct Controllers {
    /// What signs approved certificate requests (kube-controller-manager's
    /// `--cluster-signing-cert-file`, the cluster CA under kubeadm).
    ca: CertificateAuthority,
    cluster: Cluster,
    kubelet: kubelet::Kubelet,
    autoscaler: autoscaler::Autoscaler,
}

impl Controllers {
    /// One pass of every controller, in the order their outputs feed each other.
    fn pass(&mut self) {
        let c = &self.cluster;
        kubelet::collect_orphans(c);
        deployment::reconcile(c);
        replicaset::reconcile(c);
        daemonset::reconcile(c);
        statefulset::reconcile(c);
        job::reconcile(c);
        scheduler::schedule(c);
        self.kubelet.sync_pods(c);
        node_lifecycle::reconcile(c);
        // Statuses last, so they count what this pass created and started.
        replicaset::update_status(c);
        daemonset::update_status(c);
        statefulset::update_status(c);
        deployment::update_status(c);
        disruption::update_status(c);
        endpoints::reconcile(c);
        certificates::sign_approved(c, &self.ca);
        // Last: it reads what the pass left, and its rescales bring the next pass.
        self.autoscaler.reconcile(c);
    }
}

/// A cluster's objects, as the controllers read and write them.
pub(crate) struct Cluster {
    group: Arc<Group>,
    /// kube-controller-manager's writes, through the API's write path.
    writer: SystemWriter,
    scheduler: SystemWriter,
    clock: SharedClock,
    /// Decoded lists by resource, valid while the group's resourceVersion stays where it was
    /// read: the controllers of one pass read pods many times, and decode them once.
    lists: Mutex<HashMap<String, CachedList>>,
    /// What the controllers wrote since their lists were last read, by resource and
    /// resourceVersion, as the store sealed it: the next read of the list takes these
    /// instead of decoding the bytes the store just encoded from them.
    written: Mutex<HashMap<String, HashMap<u64, Obj>>>,
    /// The earliest time a controller asked for another pass (and whether that time has been
    /// handed to the loop's timer).
    wake_at: Mutex<Option<(DateTime<Utc>, bool)>>,
    /// Which nodes' kubelets are stopped.
    kubelets: KubeletSwitch,
}

/// A decoded list and the state of the resource it was decoded from.
struct CachedList {
    fingerprint: Fingerprint,
    list: Arc<Vec<Obj>>,
}

/// What identifies the state of one resource's objects without decoding them: resourceVersions
/// only grow, so any create or update raises the newest one, and a delete alone lowers the
/// count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Fingerprint {
    count: usize,
    newest: u64,
}

impl Fingerprint {
    fn of(objects: &infrasim_store::ResourceMap) -> Self {
        Fingerprint {
            count: objects.len(),
            newest: objects
                .values()
                .map(|o| o.meta.resource_version)
                .max()
                .unwrap_or(0),
        }
    }
}

/// An object read for a pass: its JSON and the resourceVersion to write against.
#[derive(Debug, Clone)]
pub(crate) struct Obj {
    /// Shared: a list reused across the passes' readers hands out the same decoded object.
    pub value: Arc<Value>,
    /// What `value` was decoded from: a write over it is compared against `value` instead
    /// of decoding the stored object again.
    stored: Arc<infrasim_store::StoredObject>,
}

impl Obj {
    /// A stored object decoded (`None` if its bytes are not JSON, which the store never holds).
    fn decode(o: &Arc<infrasim_store::StoredObject>) -> Option<Obj> {
        Some(Obj {
            value: Arc::new(o.to_value().ok()?),
            stored: o.clone(),
        })
    }

    /// The object as read, for a write over it.
    fn as_read(&self) -> infrasim_store::Read<'_> {
        infrasim_store::Read {
            object: &self.stored,
            value: &self.value,
        }
    }

    /// The resourceVersion it was read at.
    pub fn rv(&self) -> u64 {
        self.stored.meta.resource_version
    }

    pub fn str(&self, pointer: &str) -> &str {
        self.value.at(pointer).and_then(Value::as_str).unwrap_or("")
    }
    pub fn int(&self, pointer: &str) -> Option<i64> {
        self.value.at(pointer).and_then(Value::as_i64)
    }
    pub fn name(&self) -> &str {
        self.str("/metadata/name")
    }
    pub fn namespace(&self) -> &str {
        self.str("/metadata/namespace")
    }
    pub fn uid(&self) -> &str {
        self.str("/metadata/uid")
    }
    pub fn deleting(&self) -> bool {
        self.value.at("/metadata/deletionTimestamp").is_some()
    }
    pub fn labels(&self) -> BTreeMap<String, String> {
        string_map(self.value.at("/metadata/labels"))
    }
    /// The uid of the object's controller (the ownerReference with `controller: true`).
    pub fn controller_uid(&self) -> Option<&str> {
        self.value
            .at("/metadata/ownerReferences")
            .and_then(Value::as_array)?
            .iter()
            .find(|r| r.get("controller").and_then(Value::as_bool) == Some(true))
            .and_then(|r| r.get("uid"))
            .and_then(Value::as_str)
    }
}

impl Cluster {
    fn new(writer: SystemWriter, clock: SharedClock, kubelets: KubeletSwitch) -> Self {
        Cluster {
            kubelets,
            group: writer.group().clone(),
            scheduler: crate::components::scheduler(&writer),
            writer,
            clock,
            lists: Mutex::new(HashMap::new()),
            written: Mutex::new(HashMap::new()),
            wake_at: Mutex::new(None),
        }
    }

    pub fn now(&self) -> DateTime<Utc> {
        self.clock.now()
    }

    /// Whether `node`'s kubelet is stopped (it renews nothing, reports nothing, starts no pod).
    pub fn kubelet_stopped(&self, node: &str) -> bool {
        self.kubelets.stopped(node)
    }

    /// Asks for a pass at `at` even if nothing changes by then (time-based conditions, such
    /// as a Job's `activeDeadlineSeconds`).
    pub fn wake_at(&self, at: DateTime<Utc>) {
        let mut wake = self.wake_at.lock().unwrap_or_else(|p| p.into_inner());
        match *wake {
            Some((current, _)) if current <= at => {}
            _ => *wake = Some((at, false)),
        }
    }

    /// The requested wake-up time, for the loop's timer.
    fn take_wake_at(&self) -> Option<DateTime<Utc>> {
        let mut wake = self.wake_at.lock().unwrap_or_else(|p| p.into_inner());
        wake.as_mut().map(|(at, handed)| {
            *handed = true;
            *at
        })
    }

    /// Whether the timer that fired was a requested wake-up (then it is consumed).
    fn wake_requested(&self, fired: DateTime<Utc>) -> bool {
        let mut wake = self.wake_at.lock().unwrap_or_else(|p| p.into_inner());
        match *wake {
            Some((at, true)) if at <= fired.max(self.now()) => {
                *wake = None;
                true
            }
            _ => false,
        }
    }

    /// Drops the decoded lists.
    pub fn forget_lists(&self) {
        self.lists.lock().unwrap_or_else(|p| p.into_inner()).clear();
        self.lock_written().clear();
    }

    fn lock_written(&self) -> std::sync::MutexGuard<'_, HashMap<String, HashMap<u64, Obj>>> {
        self.written.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Keeps what a controller wrote for the next read of its list. Only the resources the
    /// passes list are kept: nothing else would take them back out before the lists are
    /// forgotten.
    fn remember(&self, resource: &str, written: infrasim_store::Decoded) -> Obj {
        let obj = Obj {
            value: Arc::new(written.value),
            stored: written.object,
        };
        if WATCHED.contains(&resource) {
            self.lock_written()
                .entry(resource.to_string())
                .or_default()
                .insert(obj.rv(), obj.clone());
        }
        obj
    }

    /// `stored` decoded: what a controller wrote or a list holds of that version, else its
    /// bytes decoded.
    fn decoded(&self, resource: &str, stored: &Arc<infrasim_store::StoredObject>) -> Option<Obj> {
        let rv = stored.meta.resource_version;
        let written = self
            .lock_written()
            .get(resource)
            .and_then(|w| w.get(&rv).cloned());
        if let Some(obj) = written {
            return Some(obj);
        }
        let listed = self
            .lists
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(resource)
            .and_then(|l| l.list.iter().find(|o| o.rv() == rv).cloned());
        listed.or_else(|| Obj::decode(stored))
    }

    /// Every object of `resource`, decoded. Within a pass a list is decoded again only when
    /// that resource changed, and then only the objects that changed: the controllers of one
    /// pass read pods a dozen times, and each write of the pass would otherwise make every
    /// later reader decode every pod again.
    pub fn list(&self, resource: &str) -> Arc<Vec<Obj>> {
        let Ok(snapshot) = self.group.snapshot(resource, ReadAt::Latest) else {
            return Arc::new(Vec::new());
        };
        let fingerprint = Fingerprint::of(&snapshot.objects);
        let mut lists = self.lists.lock().unwrap_or_else(|p| p.into_inner());
        let previous = match lists.get(resource) {
            Some(cached) if cached.fingerprint == fingerprint => return cached.list.clone(),
            Some(cached) => cached.list.clone(),
            None => Arc::new(Vec::new()),
        };
        // A resourceVersion names one version of one object in the group, so an object whose
        // version was decoded (or written here) before is reused as it is. What was written
        // and is not listed any more was superseded or deleted: it goes.
        let mut decoded: HashMap<u64, Obj> = previous.iter().map(|o| (o.rv(), o.clone())).collect();
        decoded.extend(self.lock_written().remove(resource).unwrap_or_default());
        let list: Arc<Vec<Obj>> = Arc::new(
            snapshot
                .objects
                .values()
                .filter_map(|o| match decoded.get(&o.meta.resource_version) {
                    Some(known) => Some(known.clone()),
                    None => Obj::decode(o),
                })
                .collect(),
        );
        lists.insert(
            resource.to_string(),
            CachedList {
                fingerprint,
                list: list.clone(),
            },
        );
        list
    }

    /// The names of `resource`'s objects in `namespace`, read from the store's keys without
    /// decoding an object.
    pub fn names(&self, resource: &str, namespace: &str) -> Vec<String> {
        let Ok(snapshot) = self.group.snapshot(resource, ReadAt::Latest) else {
            return Vec::new();
        };
        snapshot
            .objects
            .keys()
            .filter(|k| &*k.namespace == namespace)
            .map(|k| k.name.to_string())
            .collect()
    }

    /// The objects of `resource` created before `before`, decoded; the others are not.
    pub fn created_before(&self, resource: &str, before: DateTime<Utc>) -> Vec<Obj> {
        let Ok(snapshot) = self.group.snapshot(resource, ReadAt::Latest) else {
            return Vec::new();
        };
        snapshot
            .objects
            .values()
            .filter(|o| o.meta.creation_timestamp < before)
            .filter_map(Obj::decode)
            .collect()
    }

    pub fn get(&self, resource: &str, namespace: &str, name: &str) -> Option<Obj> {
        let stored = self.group.get(resource, &ObjectKey::new(namespace, name))?;
        self.decoded(resource, &stored)
    }

    /// One object as stored (not decoded).
    pub fn stored(
        &self,
        resource: &str,
        namespace: &str,
        name: &str,
    ) -> Option<Arc<infrasim_store::StoredObject>> {
        self.group.get(resource, &ObjectKey::new(namespace, name))
    }

    /// [`Cluster::update`] over the object as `read` (stored and decoded).
    pub fn update_read(
        &self,
        resource: &str,
        object: Value,
        read: infrasim_store::Read<'_>,
    ) -> bool {
        let before = read.object.meta.resource_version;
        let result = self.writer.update_decoded(resource, object, read);
        self.written(resource, before, result)
    }

    pub fn create(&self, resource: &str, object: Value) -> Option<Obj> {
        match self.writer.create_decoded(resource, object) {
            Ok(created) => Some(self.remember(resource, created)),
            Err(e) => {
                tracing::debug!(resource, error = %e.message, "controller create");
                None
            }
        }
    }

    /// Writes `object` over the version `read`. A conflict means someone wrote in between;
    /// the event of that write brings another pass, which sees it. The status stays as
    /// stored: it is written through [`Cluster::set_status`].
    pub fn update(&self, resource: &str, object: Value, read: &Obj) -> bool {
        self.update_read(resource, object, read.as_read())
    }

    /// Writes `object`'s status over the version `read` (the `status` subresource), as
    /// `writer`.
    fn update_status_as(
        &self,
        writer: &SystemWriter,
        resource: &str,
        object: Value,
        read: &Obj,
    ) -> bool {
        let result = writer.update_status_decoded(resource, object, read.as_read());
        self.written(resource, read.rv(), result)
    }

    /// Whether a controller's write over the version `before` changed the object (see
    /// [`changed`]); what it wrote is kept for the next read.
    fn written(
        &self,
        resource: &str,
        before: u64,
        result: Result<infrasim_store::Decoded, ApiError>,
    ) -> bool {
        let result = result.map(|w| {
            let raised = w.object.meta.resource_version != before;
            if raised {
                self.remember(resource, w);
            }
            raised
        });
        changed(resource, result)
    }

    /// Writes `status` into the object if it differs from what is there.
    pub fn set_status(&self, resource: &str, obj: &Obj, status: Value) {
        if obj.value.get("status") == Some(&status) {
            return;
        }
        let mut next = Value::clone(&obj.value);
        next["status"] = status;
        self.update_status_as(&self.writer, resource, next, obj);
    }

    /// Writes the status of `object` (a pod or a Node) as the kubelet of `node`.
    pub fn kubelet_status(&self, node: &str, resource: &str, object: Value, read: &Obj) -> bool {
        let kubelet = crate::components::kubelet(&self.writer, node);
        self.update_status_as(&kubelet, resource, object, read)
    }

    /// Writes `status` into the object as kube-controller-manager's controller that runs as
    /// `service_account`, if it differs from what is there.
    pub fn set_status_as(&self, service_account: &str, resource: &str, obj: &Obj, status: Value) {
        if obj.value.get("status") == Some(&status) {
            return;
        }
        let mut next = Value::clone(&obj.value);
        next["status"] = status;
        let writer = crate::components::controller(&self.writer, service_account);
        self.update_status_as(&writer, resource, next, obj);
    }

    /// Writes a pod's status as the scheduler (why it cannot be placed).
    pub fn scheduler_status(&self, object: Value, read: &Obj) -> bool {
        self.update_status_as(&self.scheduler, "pods", object, read)
    }

    /// Puts `pod` on `node` as the scheduler does, through `pods/binding`.
    pub fn bind(&self, pod: &Obj, node: &str) -> bool {
        let bound = self.scheduler.bind_decoded(pod.as_read(), node);
        self.written("pods", pod.rv(), bound)
    }

    pub fn delete(&self, resource: &str, namespace: &str, name: &str) {
        if let Err(e) = self.writer.delete(resource, namespace, name) {
            if e.code != 404 {
                tracing::debug!(resource, error = %e.message, "controller delete");
            }
        }
    }
}

/// Whether a controller's write changed the object, given whether it raised its
/// resourceVersion. A write the API found to change nothing (what the controller computed is
/// what is stored, once defaulted and decoded) did not happen; a conflict means someone wrote
/// in between (the event of that write brings another pass, which sees it); a missing object
/// was deleted.
fn changed(resource: &str, result: Result<bool, ApiError>) -> bool {
    match result {
        Ok(changed) => changed,
        Err(e) if e.code == 409 || e.code == 404 => false,
        Err(e) => {
            tracing::debug!(resource, error = %e.message, "controller update");
            false
        }
    }
}

/// Kubernetes' alphabet for generated name suffixes and hashes: no vowels (no words), no
/// look-alike characters.
const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// A random suffix of `n` characters, as `generateName` appends.
pub(crate) fn random_suffix(n: usize) -> String {
    (0..n)
        .map(|_| ALPHABET[rand::random::<u32>() as usize % ALPHABET.len()] as char)
        .collect()
}

/// A stable short hash of a pod template, rendered as Deployments' `pod-template-hash` and
/// DaemonSets' `controller-revision-hash` are: FNV-1a over the template, its decimal digits
/// mapped through the alphabet above.
pub(crate) fn template_hash(template: &Value) -> String {
    let mut hash: u32 = 0x811c_9dc5;
    for byte in template.to_string().bytes() {
        hash ^= u32::from(byte);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    hash.to_string()
        .bytes()
        .map(|d| ALPHABET[usize::from(d - b'0') % ALPHABET.len()] as char)
        .collect()
}

/// The ownerReference a controller puts on what it creates.
pub(crate) fn controller_ref(owner: &Obj, api_version: &str, kind: &str) -> Value {
    json!({
        "apiVersion": api_version, "kind": kind, "name": owner.name(), "uid": owner.uid(),
        "controller": true, "blockOwnerDeletion": true,
    })
}

/// Whether a pod counts as Ready (its Ready condition is True).
pub(crate) fn pod_ready(pod: &Obj) -> bool {
    condition_true(&pod.value, "Ready")
}

/// The pod with its `Ready` condition switched to `ready` at `now`, the rest of it kept: what
/// the node lifecycle controller writes of a pod on a lost node, and its kubelet when back.
pub(crate) fn with_ready(pod: &Obj, ready: bool, now: &str) -> Value {
    let mut next = Value::clone(&pod.value);
    let conditions = next
        .pointer_mut("/status/conditions")
        .and_then(Value::as_array_mut);
    for k in conditions.into_iter().flatten() {
        if k.get("type").and_then(Value::as_str) == Some("Ready") {
            k["status"] = json!(if ready { "True" } else { "False" });
            k["lastTransitionTime"] = json!(now);
        }
    }
    next
}

/// Builds a pod from a workload's template, owned by the workload.
pub(crate) fn pod_from_template(
    template: &Value,
    namespace: &str,
    generate_prefix: &str,
    owner: Value,
    extra_labels: &[(&str, String)],
) -> Value {
    let mut labels = template
        .at("/metadata/labels")
        .cloned()
        .unwrap_or_else(|| json!({}));
    for (k, v) in extra_labels {
        labels[*k] = json!(v);
    }
    let mut metadata = json!({
        "name": format!("{generate_prefix}{}", random_suffix(5)),
        "generateName": generate_prefix,
        "namespace": namespace,
        "labels": labels,
        "ownerReferences": [owner],
    });
    if let Some(a) = template.at("/metadata/annotations") {
        metadata["annotations"] = a.clone();
    }
    // The API defaults the rest (the phase, the QoS class, the tolerations of
    // DefaultTolerationSeconds) as it does for any client's pod.
    let spec = template.get("spec").cloned().unwrap_or_else(|| json!({}));
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": metadata,
        "spec": spec,
    })
}

/// A condition for a status, keeping the transition time of an unchanged one.
pub(crate) fn condition(
    previous: Option<&Value>,
    ty: &str,
    status: &str,
    reason: &str,
    message: &str,
    now: &str,
    with_update_time: bool,
) -> Value {
    let old = previous
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(ty));
    let same_status = old.and_then(|c| c.get("status")).and_then(Value::as_str) == Some(status);
    let same_reason = old.and_then(|c| c.get("reason")).and_then(Value::as_str) == Some(reason)
        && old.and_then(|c| c.get("message")).and_then(Value::as_str) == Some(message);
    let transition = match old.and_then(|c| c.get("lastTransitionTime")) {
        Some(t) if same_status => t.clone(),
        _ => json!(now),
    };
    let mut c = json!({
        "type": ty, "status": status, "reason": reason, "message": message,
        "lastTransitionTime": transition,
    });
    if with_update_time {
        c["lastUpdateTime"] = match old.and_then(|c| c.get("lastUpdateTime")) {
            Some(t) if same_status && same_reason => t.clone(),
            _ => json!(now),
        };
    }
    c
}

/// Records the pod template of a DaemonSet or StatefulSet as a ControllerRevision named
/// `<owner>-<hash>` (what `kubectl rollout history` and `rollout undo` read), the newest
/// revision number going to the current template (a rollback renumbers an old one).
pub(crate) fn record_revision(c: &Cluster, owner: &Obj, kind: &str, hash: &str) {
    const RESOURCE: &str = "controllerrevisions.apps";
    let name = format!("{}-{hash}", owner.name());
    let revisions = c.list(RESOURCE);
    let owned: Vec<&Obj> = revisions
        .iter()
        .filter(|r| r.namespace() == owner.namespace() && r.controller_uid() == Some(owner.uid()))
        .collect();
    let newest = owned
        .iter()
        .filter_map(|r| r.int("/revision"))
        .max()
        .unwrap_or(0);
    match owned.iter().find(|r| r.name() == name) {
        Some(current) if current.int("/revision") == Some(newest) => {}
        Some(current) => {
            let mut next = Value::clone(&current.value);
            next["revision"] = json!(newest + 1);
            c.update(RESOURCE, next, current);
        }
        None => {
            let mut template = owner
                .value
                .at("/spec/template")
                .cloned()
                .unwrap_or_else(|| json!({}));
            template["$patch"] = json!("replace");
            let mut labels = template
                .at("/metadata/labels")
                .cloned()
                .unwrap_or_else(|| json!({}));
            labels["controller-revision-hash"] = json!(hash);
            c.create(
                RESOURCE,
                json!({
                    "apiVersion": "apps/v1", "kind": "ControllerRevision",
                    "metadata": {"name": name, "namespace": owner.namespace(), "labels": labels,
                                 "ownerReferences": [controller_ref(owner, "apps/v1", kind)]},
                    "data": {"spec": {"template": template}},
                    "revision": newest + 1,
                }),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use infrasim_clock::FakeClock;
    use infrasim_store::{MemoryBackend, Store, StoreConfig};

    fn cluster() -> (Store, Cluster) {
        let clock: SharedClock = Arc::new(FakeClock::new(Utc::now()));
        let store = Store::new(
            StoreConfig::default(),
            clock.clone(),
            Arc::new(MemoryBackend),
        );
        let group = store.create_group("test").expect("group");
        let ca = CertificateAuthority::generate("test").expect("a CA");
        let server =
            infrasim_kube_api::ApiServer::new(group, ca, clock.clone(), Default::default());
        let cluster = Cluster::new(
            crate::components::controller_manager(&server),
            clock,
            KubeletSwitch::default(),
        );
        (store, cluster)
    }

    /// The ConfigMaps of `default` the test wrote (not the namespace's CA bundle).
    fn written_configmaps(c: &Cluster) -> Vec<Obj> {
        c.list("configmaps")
            .iter()
            .filter(|o| o.name() != "kube-root-ca.crt")
            .cloned()
            .collect()
    }

    fn config_map(name: &str, value: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": name, "namespace": "default"}, "data": {"k": value}})
    }

    #[test]
    fn lists_follow_every_change_of_their_resource() {
        let (_store, c) = cluster();
        c.create("configmaps", config_map("a", "1"));
        c.create("configmaps", config_map("b", "1"));
        assert_eq!(written_configmaps(&c).len(), 2);
        // A write to another resource leaves the decoded list as it was.
        let before = c.list("configmaps");
        c.create(
            "secrets",
            json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "s", "namespace": "default"}}),
        );
        assert!(Arc::ptr_eq(&before, &c.list("configmaps")));
        // An update shows, and the untouched object is the one decoded before.
        let a = c.get("configmaps", "default", "a").expect("a");
        let mut next = Value::clone(&a.value);
        next["data"]["k"] = json!("2");
        assert!(c.update("configmaps", next, &a));
        let after = written_configmaps(&c);
        let values: Vec<&str> = after.iter().map(|o| o.str("/data/k")).collect();
        assert_eq!(values, ["2", "1"]);
        // A delete alone (the count falls, the newest version stays) shows too.
        c.delete("configmaps", "default", "b");
        let names: Vec<String> = written_configmaps(&c)
            .iter()
            .map(|o| o.name().to_string())
            .collect();
        assert_eq!(names, ["a"]);
    }

    /// What the controllers write is read back as the store holds it (the API's defaults and
    /// allocations in it), from the JSON the store sealed rather than its bytes decoded again.
    #[test]
    fn what_a_controller_wrote_is_listed_as_stored() {
        let (_store, c) = cluster();
        let web = |c: &Cluster| {
            c.list("services")
                .iter()
                .find(|o| o.name() == "web")
                .cloned()
                .expect("web is listed")
        };
        let created = c
            .create(
                "services",
                json!({"apiVersion": "v1", "kind": "Service",
                       "metadata": {"name": "web", "namespace": "default"},
                       "spec": {"ports": [{"port": 80}]}}),
            )
            .expect("created");
        let listed = web(&c);
        assert!(Arc::ptr_eq(&listed.value, &created.value));
        assert_eq!(*listed.value, listed.stored.to_value().expect("decodes"));
        assert!(!listed.str("/spec/clusterIP").is_empty());
        assert_eq!(listed.str("/spec/type"), "ClusterIP");

        let status = json!({"loadBalancer": {"ingress": [{"ip": "192.0.2.1"}]}});
        c.set_status("services", &listed, status);
        let updated = web(&c);
        assert!(updated.rv() > listed.rv());
        assert_eq!(
            updated.str("/status/loadBalancer/ingress/0/ip"),
            "192.0.2.1"
        );
        assert_eq!(*updated.value, updated.stored.to_value().expect("decodes"));
        let got = c.get("services", "default", "web").expect("web");
        assert!(Arc::ptr_eq(&got.value, &updated.value));
    }
}
