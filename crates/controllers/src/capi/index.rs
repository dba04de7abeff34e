//! A Cluster API controller's objects by the Cluster they belong to (their
//! `cluster.x-k8s.io/cluster-name` label): the runtime's [`Index`] over a kind's informer.

use infrasim_controller_runtime::index::{label_key, label_keys, Index};
use std::sync::Arc;

/// A kind's objects by the cluster they belong to (their `cluster.x-k8s.io/cluster-name`
/// label), kept in step with the kind's shared cache as it is written: a controller that only
/// reads a cluster's Machines or MachineDeployments finds them here, as upstream's read from
/// controller-runtime's cache, instead of listing them from the API server on every reconcile
/// (two in five of the stand-in's requests were such lists). Controllers that create objects
/// from what they count (MachineSet, KubeadmControlPlane, the topology's MachineDeployments)
/// still list: a cache a moment behind their own creates would have them create again.
pub struct ByCluster<K: infrasim_controller_runtime::informers::Watched> {
    index: Index<K>,
    informer: infrasim_controller_runtime::informers::Informer<K>,
}

impl<K: infrasim_controller_runtime::informers::Watched> ByCluster<K> {
    /// Starts indexing the objects of `informer`'s cache.
    pub fn new(informer: infrasim_controller_runtime::informers::Informer<K>) -> Self {
        let index = Index::new(|o: &K| label_keys(o, &[crate::capi::CLUSTER_NAME_LABEL]));
        let observer = index.clone();
        informer.observe(Arc::new(move |event| observer.observe(event)));
        ByCluster { index, informer }
    }

    /// The objects of `cluster` in `namespace`; `None` until the cache has been filled by its
    /// first list (a partial answer would pass for a cluster with fewer objects).
    pub fn of(&self, namespace: &str, cluster: &str) -> Option<Vec<Arc<K>>> {
        if !self.informer.is_live() {
            return None;
        }
        let store = self.informer.store();
        let key = label_key(crate::capi::CLUSTER_NAME_LABEL, cluster);
        Some(
            self.index
                .lookup(namespace, &key)
                .iter()
                .filter_map(|r| store.get(r))
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::runtime::watcher;
    use kube::ResourceExt;

    #[test]
    fn a_cluster_s_objects_are_found_once_the_cache_is_filled() {
        let (informer, mut feed) =
            infrasim_controller_runtime::informers::testing::informer::<ConfigMap>();
        let by = ByCluster::new(informer);
        let labelled = |name: &str, cluster: &str| {
            let mut m = ConfigMap::default();
            m.metadata.name = Some(name.into());
            m.metadata.namespace = Some("ns".into());
            m.metadata.labels = Some(
                [(
                    crate::capi::CLUSTER_NAME_LABEL.to_string(),
                    cluster.to_string(),
                )]
                .into(),
            );
            m
        };
        feed(watcher::Event::Init);
        feed(watcher::Event::InitApply(labelled("a", "one")));
        // A cache still listing answers nothing rather than part of a cluster.
        assert!(by.of("ns", "one").is_none());
        feed(watcher::Event::InitDone);
        feed(watcher::Event::Apply(labelled("b", "one")));
        feed(watcher::Event::Apply(labelled("c", "two")));
        let mut found: Vec<String> = by
            .of("ns", "one")
            .unwrap()
            .iter()
            .map(|o| o.name_any())
            .collect();
        found.sort();
        assert_eq!(found, ["a", "b"]);
        feed(watcher::Event::Delete(labelled("a", "one")));
        assert_eq!(by.of("ns", "one").unwrap().len(), 1);
        assert!(by.of("other", "one").unwrap().is_empty());
    }
}
