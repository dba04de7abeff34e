//! Keeps the objects' state metrics ([`infrasim_metrics::state`]) current: one watch per
//! kind, as kube-state-metrics has, whose events replace an object's samples. The watch is
//! of untyped objects at the version the definitions name (Cluster API's say `v1beta2`),
//! so the server converts as it would for kube-state-metrics, and this module compiles one
//! watch for every kind. Nothing of an object is kept but its rendered samples.

use futures::future::BoxFuture;
use futures::StreamExt;
use infrasim_metrics::state::{KindId, Resource, StateMetrics};
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::watcher::{self, watcher, Event};
use kube::runtime::WatchStreamExt;
use kube::ResourceExt;
use std::collections::HashSet;

/// Adds `resource`'s families to `table`; the returned future watches its objects (in
/// `namespace`, or all) and keeps their samples there until it is dropped.
pub fn watch(
    client: kube::Client,
    namespace: Option<&str>,
    table: &StateMetrics,
    resource: Resource,
    namespaced: bool,
) -> BoxFuture<'static, ()> {
    let (group, version, kind) = resource.gvk();
    let api_resource = ApiResource::from_gvk(&GroupVersionKind::gvk(group, version, kind));
    let api: Api<DynamicObject> = match namespace {
        Some(ns) if namespaced => Api::namespaced_with(client, ns, &api_resource),
        _ => Api::all_with(client, &api_resource),
    };
    let id = table.add(resource);
    Box::pin(follow(api, table.clone(), id))
}

async fn follow(api: Api<DynamicObject>, table: StateMetrics, id: KindId) {
    let events = watcher(api, watcher::Config::default()).default_backoff();
    let mut events = std::pin::pin!(events);
    // The objects of a list in progress: when it is done, the others are gone.
    let mut listed: HashSet<String> = HashSet::new();
    while let Some(event) = events.next().await {
        let Ok(event) = event else {
            // The watcher backs off and lists again by itself (a kind whose CRD is not
            // served yet is listed again until it is).
            continue;
        };
        match event {
            Event::Init => listed.clear(),
            Event::InitApply(o) => {
                let key = key_of(&o);
                set(&table, id, &key, &o);
                listed.insert(key);
            }
            Event::InitDone => table.retain(id, &std::mem::take(&mut listed)),
            Event::Apply(o) => set(&table, id, &key_of(&o), &o),
            Event::Delete(o) => table.remove(id, &key_of(&o)),
        }
    }
}

fn key_of(o: &DynamicObject) -> String {
    format!("{}/{}", o.namespace().unwrap_or_default(), o.name_any())
}

fn set(table: &StateMetrics, id: KindId, key: &str, o: &DynamicObject) {
    match serde_json::to_value(o) {
        Ok(value) => table.set(id, key, &value),
        Err(e) => tracing::warn!(%key, error = %e, "encoding an object for its state metrics"),
    }
}
