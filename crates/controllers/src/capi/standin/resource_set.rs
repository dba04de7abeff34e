//! The ClusterResourceSet controller, as Cluster API's: for each Cluster its selector matches
//! (in its namespace, not being deleted), once the workload cluster answers, the manifests
//! in the set's ConfigMaps and Secrets (of type `addons.cluster.x-k8s.io/resource-set`) are
//! created there, in the set's order, Namespaces and CRDs first within each resource. The
//! Cluster's `ClusterResourceSetBinding` (named after it, owned by every set it lists)
//! records each resource as applied, with the SHA-256 of its data: `ApplyOnce` never applies
//! a resource again, `Reconcile` applies it again (create, or merge-patch what exists)
//! whenever the hash changes. `ResourcesApplied` says how it went.
//!
//! Deleting a set takes it out of every binding (a binding left empty is deleted) and leaves
//! what it made in the workload clusters, as upstream does. A Cluster's binding goes with
//! the Cluster (see [`run_bindings`]).

use super::{Core, Error};
use crate::capi::core::{
    Cluster, ClusterResourceSet, ClusterResourceSetBinding, ResourceBinding, ResourceRef,
    ResourceSetBinding, RESOURCE_SET_SECRET_TYPE,
};
use futures::StreamExt;
use infrasim_controller_runtime::conditions::{self, Condition};
use infrasim_controller_runtime::reconcile::{Cleanup, Next, Reconcile};
use infrasim_controller_runtime::triggers::{filtered, hash};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::{GroupVersionKind, Selector, SelectorExt};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::{Resource, ResourceExt};
use serde::Deserialize;
use serde_json::{json, Value};
use std::sync::Arc;

/// Upstream's finalizer on a ClusterResourceSet.
pub const FINALIZER: &str = "addons.cluster.x-k8s.io";

const MANAGER: &str = "infrasim-capi-core/resource-set";

/// The reconciler of the sets (and, in [`run_bindings`], of the bindings).
pub struct Sets {
    core: Arc<Core>,
}

/// Runs the ClusterResourceSet controller: a Cluster's labels, reachability or deletion, and
/// a change of a ConfigMap or resource-set Secret a set names, wake the sets concerned.
pub(super) async fn run(core: Arc<Core>) {
    let informers = &core.informers;
    let sets = informers.of::<ClusterResourceSet>();
    let store = sets.store();
    let by_cluster = move |c: Arc<Cluster>| {
        store
            .state()
            .iter()
            .filter(|s| s.namespace() == c.namespace() && selects(s, &c))
            .map(|s| ObjectRef::from_obj(&**s))
            .collect::<Vec<_>>()
    };
    let controller = infrasim_controller_runtime::triggers::controller(&sets, None)
        .watches_shared_stream(filtered(&informers.of::<Cluster>(), reach), by_cluster)
        .reconcile_on(resources_changed(&core));
    let ctx = core.ctx.clone();
    let reconciler = Arc::new(Sets { core });
    infrasim_controller_runtime::reconcile::run(&ctx, controller, reconciler).await;
}

/// What of a Cluster decides whether a set applies to it now.
fn reach(c: &Cluster) -> Option<u64> {
    hash((
        c.uid(),
        c.labels(),
        c.control_plane_initialized(),
        c.metadata.deletion_timestamp.is_some(),
    ))
}

/// Whether `set` selects `cluster` (an empty selector selects nothing, as upstream's).
fn selects(set: &ClusterResourceSet, cluster: &Cluster) -> bool {
    let s = &set.spec.cluster_selector;
    let empty = s.match_labels.as_ref().is_none_or(|m| m.is_empty())
        && s.match_expressions.as_ref().is_none_or(|e| e.is_empty());
    if empty {
        return false;
    }
    Selector::try_from(s.clone()).is_ok_and(|sel| sel.matches(cluster.labels()))
}

/// The sets that name a ConfigMap or resource-set Secret that changed. Secrets are watched
/// by type (a field selector), so the plane's other Secrets (kubeconfigs, CAs, bootstrap
/// data) cost nothing here.
fn resources_changed(core: &Core) -> impl futures::Stream<Item = ObjectRef<ClusterResourceSet>> {
    let client = core.ctx.client.clone();
    let secrets: Api<Secret> = Api::all(client.clone());
    let maps: Api<ConfigMap> = Api::all(client);
    let typed = watcher::Config::default().fields(&format!("type={RESOURCE_SET_SECRET_TYPE}"));
    let secrets = watcher(secrets, typed)
        .filter_map(|e| async move { changed(e, "Secret") })
        .boxed();
    let maps = watcher(maps, watcher::Config::default())
        .filter_map(|e| async move { changed(e, "ConfigMap") })
        .boxed();
    let store = core.informers.of::<ClusterResourceSet>().store();
    futures::stream::select(secrets, maps).flat_map(move |(ns, r)| {
        let naming: Vec<_> = store
            .state()
            .iter()
            .filter(|s| s.namespace().as_deref() == Some(ns.as_str()))
            .filter(|s| s.spec.resources.contains(&r))
            .map(|s| ObjectRef::from_obj(&**s))
            .collect();
        futures::stream::iter(naming)
    })
}

/// The namespace and reference of an object a watch event applies (not deletes).
fn changed<K: Resource>(
    event: Result<watcher::Event<K>, watcher::Error>,
    kind: &str,
) -> Option<(String, ResourceRef)> {
    match event.ok()? {
        watcher::Event::Apply(o) | watcher::Event::InitApply(o) => Some((
            o.namespace().unwrap_or_default(),
            ResourceRef {
                name: o.name_any(),
                kind: kind.to_string(),
            },
        )),
        _ => None,
    }
}

impl Reconcile<ClusterResourceSet> for Sets {
    type Error = Error;
    const FINALIZER: Option<&'static str> = Some(FINALIZER);

    async fn apply(&self, set: Arc<ClusterResourceSet>) -> Result<Next, Error> {
        let paused = set
            .annotations()
            .contains_key(crate::capi::PAUSED_ANNOTATION);
        let mut outcome = Outcome::default();
        let clusters = match paused {
            true => Vec::new(),
            false => self.clusters(&set),
        };
        // Read once for all the clusters the set applies to.
        if !clusters.is_empty() {
            if let Some(resources) = self.resources(&set, &mut outcome).await {
                for cluster in &clusters {
                    let applied = self.apply_to(&set, cluster, &resources, &mut outcome);
                    if let Err(e) = applied.await {
                        outcome.fail("NotApplied", "ApplyFailed", e.to_string());
                    }
                }
            }
        }
        write_status(&self.core, &set, paused, &outcome).await?;
        match outcome.retry {
            true => Err(Error::Invalid(outcome.message)),
            false => Ok(Next::AwaitChange),
        }
    }

    /// Out of every binding; what it made stays in the workload clusters.
    async fn cleanup(&self, set: Arc<ClusterResourceSet>) -> Result<Cleanup, Error> {
        let ns = set.namespace().unwrap_or_default();
        let api: Api<ClusterResourceSetBinding> =
            Api::namespaced(self.core.ctx.client.clone(), &ns);
        let bindings = self
            .core
            .informers
            .of::<ClusterResourceSetBinding>()
            .store()
            .state();
        for b in bindings
            .iter()
            .filter(|b| b.namespace().as_deref() == Some(ns.as_str()))
        {
            let name = set.name_any();
            if !b
                .spec
                .bindings
                .iter()
                .any(|e| e.cluster_resource_set_name == name)
            {
                continue;
            }
            let mut kept = (**b).clone();
            kept.spec
                .bindings
                .retain(|e| e.cluster_resource_set_name != name);
            let uid = set.uid().unwrap_or_default();
            kept.metadata.owner_references = Some(
                b.owner_references()
                    .iter()
                    .filter(|o| o.uid != uid)
                    .cloned()
                    .collect(),
            );
            let result = if kept.spec.bindings.is_empty() {
                api.delete(&b.name_any(), &DeleteParams::default())
                    .await
                    .map(|_| ())
            } else {
                kept.metadata.managed_fields = None;
                api.replace(&b.name_any(), &PostParams::default(), &kept)
                    .await
                    .map(|_| ())
            };
            match result {
                Ok(()) => {}
                Err(kube::Error::Api(e)) if e.code == 404 => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(Cleanup::Done)
    }
}

/// How applying a set went, over all its clusters.
#[derive(Default)]
struct Outcome {
    failed: Option<(&'static str, &'static str)>,
    message: String,
    /// Whether to retry with backoff (a cluster unreachable, an apply that failed).
    retry: bool,
}

impl Outcome {
    fn fail(&mut self, reason: &'static str, v1beta1_reason: &'static str, message: String) {
        self.failed = Some((reason, v1beta1_reason));
        self.message = message;
        self.retry = reason != "InternalError" || self.retry;
    }
}

impl Sets {
    /// The Clusters `set` applies to now, from the cache.
    fn clusters(&self, set: &ClusterResourceSet) -> Vec<Arc<Cluster>> {
        self.core
            .informers
            .of::<Cluster>()
            .store()
            .state()
            .into_iter()
            .filter(|c| c.namespace() == set.namespace() && c.metadata.deletion_timestamp.is_none())
            .filter(|c| selects(set, c))
            .collect()
    }

    /// Applies what `set` names to `cluster`'s workload cluster, as its binding allows.
    /// The data of the set's resources that exist, in the set's order (a missing one is
    /// reported and skipped, as upstream does); `None` when a Secret is of another type.
    async fn resources(
        &self,
        set: &ClusterResourceSet,
        outcome: &mut Outcome,
    ) -> Option<Vec<(ResourceRef, Vec<Vec<u8>>)>> {
        let ns = set.namespace().unwrap_or_default();
        let mut resources = Vec::new();
        for r in &set.spec.resources {
            match self.read(&ns, r).await {
                Ok(Some(data)) => resources.push((r.clone(), data)),
                Ok(None) => outcome.fail(
                    "InternalError",
                    "RetrievingResourceFailed",
                    format!("{} {} not found", r.kind, r.name),
                ),
                Err(why) => {
                    outcome.fail("WrongSecretType", "WrongSecretType", why);
                    return None;
                }
            }
        }
        Some(resources)
    }

    async fn apply_to(
        &self,
        set: &ClusterResourceSet,
        cluster: &Cluster,
        resources: &[(ResourceRef, Vec<Vec<u8>>)],
        outcome: &mut Outcome,
    ) -> Result<(), Error> {
        // The workload cluster answers once its control plane is up: its change wakes the set.
        if !cluster.control_plane_initialized() {
            return Ok(());
        }
        let workload = match self.core.workloads.of(&self.core.ctx.client, cluster).await {
            Ok(client) => client,
            Err(e) => {
                outcome.fail("InternalError", "RemoteClusterClientFailed", e.to_string());
                outcome.retry = true;
                return Ok(());
            }
        };
        let mut binding = self.binding(set, cluster).await?;
        let entry = entry_of(&mut binding, &set.name_any());
        for (r, data) in resources {
            let digest = digest(data);
            let done = entry
                .resources
                .iter()
                .find(|b| b.name == r.name && b.kind == r.kind);
            let needed = match done {
                None => true,
                Some(b) if !b.applied => true,
                Some(b) => set.reconciles() && b.hash.as_deref() != Some(digest.as_str()),
            };
            if !needed {
                continue;
            }
            let result = apply_objects(&workload, data, set.reconciles()).await;
            if let Err(why) = &result {
                outcome.fail(
                    "NotApplied",
                    "ApplyFailed",
                    format!("{} {}: {why}", r.kind, r.name),
                );
            }
            let record = ResourceBinding {
                name: r.name.clone(),
                kind: r.kind.clone(),
                applied: result.is_ok(),
                hash: Some(digest),
                last_applied_time: Some(conditions::timestamp(self.core.ctx.now())),
                ..Default::default()
            };
            match entry
                .resources
                .iter_mut()
                .find(|b| b.name == r.name && b.kind == r.kind)
            {
                Some(b) => *b = record,
                None => entry.resources.push(record),
            }
        }
        self.save(binding).await
    }

    /// The data of a ConfigMap or resource-set Secret, keys sorted (values decoded); `None`
    /// when it does not exist; why not when a Secret is of another type.
    async fn read(&self, ns: &str, r: &ResourceRef) -> Result<Option<Vec<Vec<u8>>>, String> {
        let client = self.core.ctx.client.clone();
        let read = match r.kind.as_str() {
            "Secret" => Api::<Secret>::namespaced(client, ns).get_opt(&r.name).await,
            _ => {
                let map = Api::<ConfigMap>::namespaced(client, ns)
                    .get_opt(&r.name)
                    .await;
                return Ok(map.ok().flatten().map(|m| {
                    let mut data: Vec<(String, String)> =
                        m.data.unwrap_or_default().into_iter().collect();
                    data.sort();
                    data.into_iter().map(|(_, v)| v.into_bytes()).collect()
                }));
            }
        };
        let Some(secret) = read.ok().flatten() else {
            return Ok(None);
        };
        if secret.type_.as_deref() != Some(RESOURCE_SET_SECRET_TYPE) {
            return Err(format!(
                "Secret type of resource {} is not supported",
                r.name
            ));
        }
        // A BTreeMap: its values come in sorted key order.
        Ok(Some(
            secret
                .data
                .unwrap_or_default()
                .into_values()
                .map(|v| v.0)
                .collect(),
        ))
    }

    /// The Cluster's binding (a new one when it has none), owned by `set`.
    async fn binding(
        &self,
        set: &ClusterResourceSet,
        cluster: &Cluster,
    ) -> Result<ClusterResourceSetBinding, Error> {
        let ns = cluster.namespace().unwrap_or_default();
        let api: Api<ClusterResourceSetBinding> =
            Api::namespaced(self.core.ctx.client.clone(), &ns);
        let mut binding = match api.get_opt(&cluster.name_any()).await? {
            Some(b) => b,
            None => {
                let mut b = ClusterResourceSetBinding::new(
                    &cluster.name_any(),
                    crate::capi::core::ClusterResourceSetBindingSpec {
                        cluster_name: cluster.name_any(),
                        bindings: Vec::new(),
                    },
                );
                b.metadata.namespace = Some(ns.clone());
                b
            }
        };
        let owner = set.controller_owner_ref(&()).map(|mut o| {
            o.controller = None;
            o.block_owner_deletion = None;
            o
        });
        let owners = binding
            .metadata
            .owner_references
            .get_or_insert_with(Vec::new);
        if let Some(owner) = owner {
            if !owners.iter().any(|o| o.uid == owner.uid) {
                owners.push(owner);
            }
        }
        Ok(binding)
    }

    /// Creates or replaces the binding.
    async fn save(&self, mut binding: ClusterResourceSetBinding) -> Result<(), Error> {
        let ns = binding.namespace().unwrap_or_default();
        let api: Api<ClusterResourceSetBinding> =
            Api::namespaced(self.core.ctx.client.clone(), &ns);
        binding.metadata.managed_fields = None;
        if binding.resource_version().is_some() {
            api.replace(&binding.name_any(), &PostParams::default(), &binding)
                .await?;
        } else {
            api.create(&PostParams::default(), &binding).await?;
        }
        Ok(())
    }
}

/// The binding's entry for the set `name`, added when missing.
fn entry_of<'a>(
    binding: &'a mut ClusterResourceSetBinding,
    name: &str,
) -> &'a mut ResourceSetBinding {
    let bindings = &mut binding.spec.bindings;
    let at = match bindings
        .iter()
        .position(|b| b.cluster_resource_set_name == name)
    {
        Some(at) => at,
        None => {
            bindings.push(ResourceSetBinding {
                cluster_resource_set_name: name.to_string(),
                resources: Vec::new(),
            });
            bindings.len() - 1
        }
    };
    &mut bindings[at]
}

/// Upstream's hash of a resource: SHA-256 over its values in key order.
fn digest(data: &[Vec<u8>]) -> String {
    let mut h = ring::digest::Context::new(&ring::digest::SHA256);
    for value in data {
        h.update(value);
    }
    let hex: String = h
        .finish()
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("sha256:{hex}")
}

/// The objects in a resource's values: a JSON list, or YAML documents.
fn objects(data: &[Vec<u8>]) -> Result<Vec<Value>, String> {
    let mut all = Vec::new();
    for value in data {
        let text = String::from_utf8_lossy(value);
        if text.trim_start().starts_with('[') {
            let list: Vec<Value> = serde_json::from_str(&text).map_err(|e| e.to_string())?;
            all.extend(list);
            continue;
        }
        for doc in serde_yaml::Deserializer::from_str(&text) {
            let v = Value::deserialize(doc).map_err(|e| e.to_string())?;
            if v.is_object() {
                all.push(v);
            }
        }
    }
    // Namespaces and CRDs before what lives in them, as upstream orders a create.
    all.sort_by_key(|o| create_order(o["kind"].as_str().unwrap_or("")));
    Ok(all)
}

fn create_order(kind: &str) -> usize {
    const ORDER: &[&str] = &[
        "Namespace",
        "CustomResourceDefinition",
        "StorageClass",
        "PersistentVolume",
        "PersistentVolumeClaim",
        "Secret",
        "ConfigMap",
        "ServiceAccount",
        "LimitRange",
        "Pod",
        "ReplicaSet",
        "Endpoints",
    ];
    ORDER.iter().position(|k| *k == kind).unwrap_or(ORDER.len())
}

/// Applies a resource's objects to the workload cluster: created (`ApplyOnce`: an existing
/// one is left as it is), or with `reconcile` merge-patched where they exist. Every object
/// is tried; the first failure is returned.
async fn apply_objects(
    workload: &kube::Client,
    data: &[Vec<u8>],
    reconcile: bool,
) -> Result<(), String> {
    let mut first_error = None;
    for o in objects(data)? {
        if let Err(e) = apply_object(workload, o, reconcile).await {
            first_error.get_or_insert(e);
        }
    }
    first_error.map_or(Ok(()), Err)
}

async fn apply_object(workload: &kube::Client, o: Value, reconcile: bool) -> Result<(), String> {
    let obj: DynamicObject = serde_json::from_value(o.clone()).map_err(|e| e.to_string())?;
    let types = obj
        .types
        .clone()
        .ok_or("an object without apiVersion and kind")?;
    let gvk = GroupVersionKind::try_from(&types).map_err(|e| e.to_string())?;
    let (resource, caps) = kube::discovery::pinned_kind(workload, &gvk)
        .await
        .map_err(|e| format!("{}: {e}", types.kind))?;
    let api: Api<DynamicObject> = if caps.scope == kube::discovery::Scope::Namespaced {
        let ns = obj.namespace().unwrap_or_else(|| "default".into());
        Api::namespaced_with(workload.clone(), &ns, &resource)
    } else {
        Api::all_with(workload.clone(), &resource)
    };
    let name = obj.name_any();
    let what = |e: kube::Error| format!("{} {name}: {e}", types.kind);
    match api.create(&PostParams::default(), &obj).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 409 && !reconcile => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 409 => api
            .patch(&name, &PatchParams::default(), &Patch::Merge(&o))
            .await
            .map(|_| ())
            .map_err(what),
        Err(e) => Err(what(e)),
    }
}

/// Writes `ResourcesApplied` (and `Paused`) as upstream does.
async fn write_status(
    core: &Core,
    set: &ClusterResourceSet,
    paused: bool,
    outcome: &Outcome,
) -> Result<(), Error> {
    let now = core.ctx.now();
    let mut conds = set
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default();
    conditions::set(
        &mut conds,
        match paused {
            true => Condition::new("Paused", true, "Paused", "Paused"),
            false => Condition::new("Paused", false, "NotPaused", ""),
        },
        now,
    );
    let mut old = Vec::new();
    if !paused {
        let (applied, old_applied) = match outcome.failed {
            None => (
                Condition::new("ResourcesApplied", true, "Applied", ""),
                json!({"type": "ResourcesApplied", "status": "True"}),
            ),
            Some((reason, old_reason)) => (
                Condition::new("ResourcesApplied", false, reason, outcome.message.clone()),
                json!({"type": "ResourcesApplied", "status": "False", "severity": "Warning", "reason": old_reason, "message": outcome.message}),
            ),
        };
        conditions::set(&mut conds, applied, now);
        let mut o = old_applied;
        o["lastTransitionTime"] = json!(conditions::timestamp(now));
        old.push(o);
    }
    let mut status = json!({"conditions": conds, "deprecated": {"v1beta1": {"conditions": old}}});
    if !outcome.retry {
        status["observedGeneration"] = json!(set.metadata.generation);
    }
    let api: Api<ClusterResourceSet> = Api::namespaced(
        core.ctx.client.clone(),
        &set.namespace().unwrap_or_default(),
    );
    let body = json!({
        "apiVersion": ClusterResourceSet::api_version(&()),
        "kind": "ClusterResourceSet",
        "metadata": {"name": set.name_any()},
        "status": status,
    });
    infrasim_controller_runtime::writes::apply_status(&api, &set.name_any(), MANAGER, &body)
        .await?;
    Ok(())
}

/// Runs the ClusterResourceSetBinding controller: a binding goes when its Cluster is gone or
/// being deleted (upstream's binding controller; its owners are the sets, not the Cluster).
pub(super) async fn run_bindings(core: Arc<Core>) {
    let informers = &core.informers;
    let bindings = informers.of::<ClusterResourceSetBinding>();
    let controller = infrasim_controller_runtime::triggers::controller(&bindings, None)
        .watches_shared_stream(filtered(&informers.of::<Cluster>(), reach), |c| {
            Some(ObjectRef::new(&c.name_any()).within(&c.namespace().unwrap_or_default()))
        });
    let ctx = core.ctx.clone();
    infrasim_controller_runtime::reconcile::run(&ctx, controller, Arc::new(Sets { core })).await;
}

impl Reconcile<ClusterResourceSetBinding> for Sets {
    type Error = Error;

    async fn apply(&self, b: Arc<ClusterResourceSetBinding>) -> Result<Next, Error> {
        let ns = b.namespace().unwrap_or_default();
        let cluster = self
            .core
            .informers
            .get::<Cluster>(&ns, &b.spec.cluster_name)
            .await?;
        if cluster.is_some_and(|c| c.metadata.deletion_timestamp.is_none()) {
            return Ok(Next::AwaitChange);
        }
        let api: Api<ClusterResourceSetBinding> =
            Api::namespaced(self.core.ctx.client.clone(), &ns);
        match api.delete(&b.name_any(), &DeleteParams::default()).await {
            Ok(_) => Ok(Next::AwaitChange),
            Err(kube::Error::Api(e)) if e.code == 404 => Ok(Next::AwaitChange),
            Err(e) => Err(e.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hash_is_upstreams_over_the_values_in_key_order() {
        let data = vec![b"a: 1\n".to_vec(), b"b: 2\n".to_vec()];
        // `printf 'a: 1\nb: 2\n' | sha256sum`
        assert_eq!(
            digest(&data),
            "sha256:d02b8bb58aa82e872f709035f39b734b9f28dde0c3d305698a95d04aec594cfa"
        );
    }

    #[test]
    fn yaml_documents_and_json_lists_are_read_namespaces_first() {
        let yaml = b"kind: ConfigMap\napiVersion: v1\nmetadata: {name: c}\n---\n---\nkind: Namespace\napiVersion: v1\nmetadata: {name: n}\n".to_vec();
        let list =
            br#"[{"kind": "Secret", "apiVersion": "v1", "metadata": {"name": "s"}}]"#.to_vec();
        let kinds: Vec<String> = objects(&[yaml, list])
            .unwrap()
            .iter()
            .map(|o| o["kind"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(kinds, ["Namespace", "Secret", "ConfigMap"]);
    }

    #[test]
    fn an_empty_selector_selects_no_cluster() {
        let set = |labels: Option<&[(&str, &str)]>| {
            let mut s = ClusterResourceSet::new("s", Default::default());
            s.spec.cluster_selector.match_labels = labels.map(|l| {
                l.iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect()
            });
            s
        };
        let mut cluster = Cluster::new("c", Default::default());
        cluster.metadata.labels = Some([("cni".to_string(), "calico".to_string())].into());
        assert!(!selects(&set(None), &cluster));
        assert!(!selects(&set(Some(&[])), &cluster));
        assert!(selects(&set(Some(&[("cni", "calico")])), &cluster));
        assert!(!selects(&set(Some(&[("cni", "cilium")])), &cluster));
    }
}
