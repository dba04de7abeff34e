//! The clusters the page lists: one small row per Cluster API Cluster, kept current by a
//! watch on Clusters (and on KubeadmControlPlanes, for the version of a cluster that has no
//! topology), searched and paged here so the page only ever receives one page of 10,000.
//!
//! Rows are read from `cluster.x-k8s.io/v1beta2`, whose status counts the control plane's
//! and the workers' replicas, as Cluster API's own `kubectl get clusters` columns show them.

use futures::StreamExt;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use serde::Serialize;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

/// A cluster as the list shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Row {
    pub namespace: String,
    pub name: String,
    pub phase: String,
    /// The `Available` condition's status, when the cluster has one.
    pub available: Option<String>,
    pub control_plane: Replicas,
    pub workers: Replicas,
    pub version: Option<String>,
    pub created: Option<String>,
    /// The name of the control plane object, to find its version.
    #[serde(skip)]
    control_plane_name: Option<String>,
}

/// Ready against desired replicas.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Replicas {
    pub ready: i64,
    pub desired: i64,
}

fn replicas(status: &Value, part: &str) -> Replicas {
    let count = |field: &str| status[part][field].as_i64().unwrap_or(0);
    Replicas {
        ready: count("readyReplicas"),
        desired: count("desiredReplicas"),
    }
}

/// The row of a v1beta2 Cluster.
pub fn row(cluster: &DynamicObject) -> Row {
    let status = &cluster.data["status"];
    let spec = &cluster.data["spec"];
    let available = status["conditions"].as_array().and_then(|all| {
        all.iter()
            .find(|c| c["type"] == "Available")
            .and_then(|c| c["status"].as_str().map(String::from))
    });
    Row {
        namespace: cluster.metadata.namespace.clone().unwrap_or_default(),
        name: cluster.metadata.name.clone().unwrap_or_default(),
        phase: status["phase"].as_str().unwrap_or("Pending").to_string(),
        available,
        control_plane: replicas(status, "controlPlane"),
        workers: replicas(status, "workers"),
        version: spec["topology"]["version"].as_str().map(String::from),
        created: cluster
            .metadata
            .creation_timestamp
            .as_ref()
            .map(|t| t.0.to_string()),
        control_plane_name: spec["controlPlaneRef"]["name"].as_str().map(String::from),
    }
}

/// One page of the rows matching a search.
#[derive(Debug, Serialize)]
pub struct Page {
    /// How many rows match.
    pub total: usize,
    pub offset: usize,
    pub items: Vec<Row>,
}

type Key = (String, String);

/// The rows, and a generation that moves whenever one changes.
#[derive(Debug, Default)]
pub struct Index {
    rows: RwLock<BTreeMap<Key, Row>>,
    /// KubeadmControlPlanes' `spec.version`, by namespace and name.
    versions: RwLock<HashMap<Key, String>>,
    generation: AtomicU64,
}

fn key(object: &DynamicObject) -> Key {
    (
        object.metadata.namespace.clone().unwrap_or_default(),
        object.metadata.name.clone().unwrap_or_default(),
    )
}

impl Index {
    /// Moves on every change; the page is told when it does.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Relaxed)
    }

    fn changed(&self) {
        self.generation.fetch_add(1, Ordering::Relaxed);
    }

    /// Sets or replaces a cluster's row.
    pub fn put(&self, cluster: &DynamicObject) {
        let mut rows = self.rows.write().unwrap_or_else(|p| p.into_inner());
        rows.insert(key(cluster), row(cluster));
        drop(rows);
        self.changed();
    }

    fn remove(&self, cluster: &DynamicObject) {
        let mut rows = self.rows.write().unwrap_or_else(|p| p.into_inner());
        rows.remove(&key(cluster));
        drop(rows);
        self.changed();
    }

    fn replace(&self, clusters: Vec<DynamicObject>) {
        let fresh = clusters.iter().map(|c| (key(c), row(c))).collect();
        *self.rows.write().unwrap_or_else(|p| p.into_inner()) = fresh;
        self.changed();
    }

    fn put_version(&self, control_plane: &DynamicObject, present: bool) {
        let mut versions = self.versions.write().unwrap_or_else(|p| p.into_inner());
        let version = control_plane.data["spec"]["version"].as_str();
        match (present, version) {
            (true, Some(v)) => versions.insert(key(control_plane), v.to_string()),
            _ => versions.remove(&key(control_plane)),
        };
        drop(versions);
        self.changed();
    }

    /// The rows whose namespace, name, phase or version contain `query` (any case), sorted
    /// by namespace and name, from `offset`, at most `limit`.
    pub fn page(&self, query: &str, offset: usize, limit: usize) -> Page {
        let query = query.trim().to_lowercase();
        let rows = self.rows.read().unwrap_or_else(|p| p.into_inner());
        let versions = self.versions.read().unwrap_or_else(|p| p.into_inner());
        // A cluster without a topology takes its control plane's version.
        let version_of = |row: &Row| -> Option<String> {
            row.version.clone().or_else(|| {
                let cp = row.control_plane_name.clone().unwrap_or_default();
                versions.get(&(row.namespace.clone(), cp)).cloned()
            })
        };
        // Only the rows of the page are copied: the others are counted.
        let (mut total, mut items) = (0, Vec::new());
        for row in rows.values() {
            let version = version_of(row);
            if !query.is_empty() && !matches(row, version.as_deref(), &query) {
                continue;
            }
            if total >= offset && items.len() < limit {
                items.push(Row {
                    version,
                    ..row.clone()
                });
            }
            total += 1;
        }
        Page {
            total,
            offset,
            items,
        }
    }

    /// How many clusters are in each phase.
    pub fn phases(&self) -> BTreeMap<String, usize> {
        let rows = self.rows.read().unwrap_or_else(|p| p.into_inner());
        let mut counts = BTreeMap::new();
        for row in rows.values() {
            *counts.entry(row.phase.clone()).or_insert(0) += 1;
        }
        counts
    }

    /// Keeps the index current until the process ends: a watch on Clusters and one on
    /// KubeadmControlPlanes, each retried with backoff while its kind is not served (a
    /// plane with no Cluster API yet).
    pub fn watch(self: &Arc<Self>, client: kube::Client) {
        let clusters = resource("cluster.x-k8s.io", "Cluster", "clusters");
        let index = self.clone();
        let api = Api::all_with(client.clone(), &clusters);
        tokio::spawn(follow(api, move |event| match event {
            Change::Put(c) => index.put(&c),
            Change::Gone(c) => index.remove(&c),
            Change::All(all) => index.replace(all),
        }));
        let planes = resource(
            "controlplane.cluster.x-k8s.io",
            "KubeadmControlPlane",
            "kubeadmcontrolplanes",
        );
        let index = self.clone();
        let api = Api::all_with(client, &planes);
        tokio::spawn(follow(api, move |event| match event {
            Change::Put(cp) => index.put_version(&cp, true),
            Change::Gone(cp) => index.put_version(&cp, false),
            Change::All(all) => {
                index
                    .versions
                    .write()
                    .unwrap_or_else(|p| p.into_inner())
                    .clear();
                all.iter().for_each(|cp| index.put_version(cp, true));
            }
        }));
    }
}

fn matches(row: &Row, version: Option<&str>, query: &str) -> bool {
    let fields = [
        row.namespace.as_str(),
        row.name.as_str(),
        row.phase.as_str(),
        version.unwrap_or(""),
    ];
    fields.iter().any(|f| f.to_lowercase().contains(query))
        || format!("{}/{}", row.namespace, row.name).contains(query)
}

/// A v1beta2 kind of Cluster API's.
pub fn resource(group: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, "v1beta2", kind), plural)
}

/// What a watch says, folded to what an index needs.
pub enum Change {
    Put(DynamicObject),
    Gone(DynamicObject),
    /// A fresh listing that replaces everything seen before.
    All(Vec<DynamicObject>),
}

/// Applies `api`'s watch events to `apply` until the process ends.
pub async fn follow(api: Api<DynamicObject>, apply: impl Fn(Change) + Send + 'static) {
    let mut listing: Vec<DynamicObject> = Vec::new();
    let mut events = watcher::watcher(api, watcher::Config::default())
        .default_backoff()
        .boxed();
    while let Some(event) = events.next().await {
        match event {
            Ok(Event::Init) => listing.clear(),
            Ok(Event::InitApply(object)) => listing.push(object),
            Ok(Event::InitDone) => apply(Change::All(std::mem::take(&mut listing))),
            Ok(Event::Apply(object)) => apply(Change::Put(object)),
            Ok(Event::Delete(object)) => apply(Change::Gone(object)),
            // Retried with backoff by the stream; said once at debug level since a plane
            // without Cluster API's CRDs says it every few seconds.
            Err(e) => tracing::debug!(error = %e, "dashboard watch"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cluster(ns: &str, name: &str, phase: &str, status: Value) -> DynamicObject {
        let mut body = json!({
            "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
            "metadata": {"namespace": ns, "name": name, "creationTimestamp": "2026-11-30T08:00:00Z"},
            "spec": {"controlPlaneRef": {"name": format!("{name}-cp")}},
            "status": status,
        });
        body["status"]["phase"] = json!(phase);
        serde_json::from_value(body).expect("a cluster")
    }

    #[test]
    fn a_row_counts_ready_against_desired_and_reads_available() {
        let c = cluster(
            "ns",
            "a",
            "Provisioned",
            json!({
                "controlPlane": {"desiredReplicas": 3, "readyReplicas": 2},
                "workers": {"desiredReplicas": 5, "readyReplicas": 5},
                "conditions": [{"type": "Available", "status": "False"}],
            }),
        );
        let r = row(&c);
        assert_eq!(
            r.control_plane,
            Replicas {
                ready: 2,
                desired: 3
            }
        );
        assert_eq!(
            r.workers,
            Replicas {
                ready: 5,
                desired: 5
            }
        );
        assert_eq!(r.available.as_deref(), Some("False"));
        assert_eq!(r.phase, "Provisioned");
        assert_eq!(r.created.as_deref(), Some("2026-11-30T08:00:00Z"));
    }

    #[test]
    fn pages_are_sorted_searched_and_bounded_and_versions_come_from_the_control_plane() {
        let index = Index::default();
        let before = index.generation();
        for i in 0..25 {
            let phase = if i % 5 == 0 { "Failed" } else { "Provisioned" };
            index.put(&cluster("ns", &format!("c{i:02}"), phase, json!({})));
        }
        assert!(index.generation() > before);
        let page = index.page("", 20, 10);
        assert_eq!((page.total, page.items.len()), (25, 5));
        assert_eq!(page.items[0].name, "c20");
        let failed = index.page("FAILED", 0, 100);
        assert_eq!(failed.total, 5);
        assert_eq!(index.page("ns/c1", 0, 100).total, 10);
        assert_eq!(index.phases().get("Failed"), Some(&5));

        let kcp: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "controlplane.cluster.x-k8s.io/v1beta2", "kind": "KubeadmControlPlane",
            "metadata": {"namespace": "ns", "name": "c03-cp"}, "spec": {"version": "v1.33.0"},
        }))
        .expect("a control plane");
        index.put_version(&kcp, true);
        assert_eq!(
            index.page("c03", 0, 1).items[0].version.as_deref(),
            Some("v1.33.0")
        );
        assert_eq!(index.page("v1.33", 0, 10).total, 1);
        index.put_version(&kcp, false);
        assert_eq!(index.page("c03", 0, 1).items[0].version, None);
    }
}
