//! A controller's cache indexed by keys of its objects (a Cluster's name, a control plane's
//! name), so that a related object's change maps to the objects it concerns without scanning
//! the whole cache. `kube::runtime`'s reflector store has no indexes; a Cluster gate opening
//! would otherwise walk every Machine of every cluster, which at ten thousand clusters is most
//! of the controllers' work.
//!
//! The index is fed by the events its controller hears from the kind's informer, in order: it
//! holds what the controller has heard of, which the shared cache already holds (the informer
//! fills the cache before it passes an event on).

use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::{Resource, ResourceExt};
use std::collections::{HashMap, HashSet};
use std::hash::Hash;
use std::sync::{Arc, Mutex};

/// The keys an object is found by, within its namespace.
pub type Keys<K> = fn(&K) -> Vec<String>;

/// Objects of kind `K` by namespace and key. Cheap to clone: clones share one index.
pub struct Index<K: Resource>
where
    K::DynamicType: Eq + Hash,
{
    keys: Keys<K>,
    state: Arc<Mutex<State<K>>>,
}

impl<K: Resource> Clone for Index<K>
where
    K::DynamicType: Eq + Hash,
{
    fn clone(&self) -> Self {
        Index {
            keys: self.keys,
            state: self.state.clone(),
        }
    }
}

struct State<K: Resource>
where
    K::DynamicType: Eq + Hash,
{
    live: Table<K>,
    /// The table a relist is filling; it replaces `live` when the relist is done, so objects
    /// deleted while the watch was down leave the index as they leave the cache.
    relisting: Option<Table<K>>,
}

struct Table<K: Resource>
where
    K::DynamicType: Eq + Hash,
{
    by_key: HashMap<(String, String), HashSet<ObjectRef<K>>>,
    keys_of: HashMap<ObjectRef<K>, (String, Vec<String>)>,
}

impl<K: Resource> Default for Table<K>
where
    K::DynamicType: Eq + Hash,
{
    fn default() -> Self {
        Table {
            by_key: HashMap::new(),
            keys_of: HashMap::new(),
        }
    }
}

impl<K: Resource> Table<K>
where
    K::DynamicType: Eq + Hash + Clone + Default,
{
    fn insert(&mut self, object: &K, keys: Vec<String>) {
        let reference = ObjectRef::from_obj(object);
        self.remove(&reference);
        let namespace = object.namespace().unwrap_or_default();
        for key in &keys {
            self.by_key
                .entry((namespace.clone(), key.clone()))
                .or_default()
                .insert(reference.clone());
        }
        self.keys_of.insert(reference, (namespace, keys));
    }

    fn remove(&mut self, reference: &ObjectRef<K>) {
        let Some((namespace, keys)) = self.keys_of.remove(reference) else {
            return;
        };
        for key in keys {
            let slot = (namespace.clone(), key);
            if let Some(set) = self.by_key.get_mut(&slot) {
                set.remove(reference);
                if set.is_empty() {
                    self.by_key.remove(&slot);
                }
            }
        }
    }
}

impl<K: Resource> Index<K>
where
    K::DynamicType: Eq + Hash + Clone + Default,
{
    /// An empty index finding objects by `keys`.
    pub fn new(keys: Keys<K>) -> Self {
        Index {
            keys,
            state: Arc::new(Mutex::new(State {
                live: Table::default(),
                relisting: None,
            })),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State<K>> {
        // The index holds no invariant a panicking writer could break halfway.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Brings the index in step with one watch event.
    pub fn observe(&self, event: &watcher::Event<Arc<K>>) {
        let mut state = self.state();
        match event {
            watcher::Event::Init => state.relisting = Some(Table::default()),
            watcher::Event::InitApply(o) => {
                let keys = (self.keys)(o);
                match state.relisting.as_mut() {
                    Some(table) => table.insert(o, keys),
                    None => state.live.insert(o, keys),
                }
            }
            watcher::Event::InitDone => {
                if let Some(table) = state.relisting.take() {
                    state.live = table;
                }
            }
            watcher::Event::Apply(o) => state.live.insert(o, (self.keys)(o)),
            watcher::Event::Delete(o) => state.live.remove(&ObjectRef::from_obj(&**o)),
        }
    }

    /// The objects of `namespace` found by `key`.
    pub fn lookup(&self, namespace: &str, key: &str) -> Vec<ObjectRef<K>> {
        self.state()
            .live
            .by_key
            .get(&(namespace.to_string(), key.to_string()))
            .map(|set| set.iter().cloned().collect())
            .unwrap_or_default()
    }
}

/// The key of an object whose label `label` is `value`.
pub fn label_key(label: &str, value: &str) -> String {
    format!("{label}={value}")
}

/// An object's keys for the labels of `wanted` it carries.
pub fn label_keys<K: Resource>(object: &K, wanted: &[&str]) -> Vec<String> {
    let labels = object.labels();
    wanted
        .iter()
        .filter_map(|l| labels.get(*l).map(|v| label_key(l, v)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::ObjectMeta;

    fn map(name: &str, cluster: &str) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("ns".into()),
                labels: Some([("cluster".to_string(), cluster.to_string())].into()),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    fn names(index: &Index<ConfigMap>, key: &str) -> Vec<String> {
        let mut n: Vec<String> = index
            .lookup("ns", key)
            .into_iter()
            .map(|r| r.name)
            .collect();
        n.sort();
        n
    }

    fn index() -> Index<ConfigMap> {
        Index::new(|o| label_keys(o, &["cluster"]))
    }

    #[test]
    fn objects_move_between_keys_and_leave_on_delete() {
        let index = index();
        index.observe(&watcher::Event::Apply(Arc::new(map("a", "one"))));
        index.observe(&watcher::Event::Apply(Arc::new(map("b", "one"))));
        assert_eq!(names(&index, "cluster=one"), ["a", "b"]);
        index.observe(&watcher::Event::Apply(Arc::new(map("b", "two"))));
        assert_eq!(names(&index, "cluster=one"), ["a"]);
        assert_eq!(names(&index, "cluster=two"), ["b"]);
        index.observe(&watcher::Event::Delete(Arc::new(map("a", "one"))));
        assert!(names(&index, "cluster=one").is_empty());
        assert!(index.lookup("other", "cluster=two").is_empty());
    }

    #[test]
    fn a_relist_replaces_what_the_index_held() {
        let index = index();
        index.observe(&watcher::Event::Apply(Arc::new(map("gone", "one"))));
        index.observe(&watcher::Event::Init);
        index.observe(&watcher::Event::InitApply(Arc::new(map("kept", "one"))));
        // Until the relist is done, lookups answer from what was there.
        assert_eq!(names(&index, "cluster=one"), ["gone"]);
        index.observe(&watcher::Event::InitDone);
        assert_eq!(names(&index, "cluster=one"), ["kept"]);
    }
}
