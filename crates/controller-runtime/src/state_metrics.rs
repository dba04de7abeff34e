//! Keeps the objects' state metrics ([`infrasim_metrics::state`]) current: one watch per
//! kind, as kube-state-metrics has, whose events replace an object's samples. The watch is
//! of untyped objects at the version the definitions name (Cluster API's say `v1beta2`),
//! so the server converts as it would for kube-state-metrics, and this module compiles one
//! watch for every kind. Nothing of an object is kept but its rendered samples.

use futures::future::BoxFuture;
use futures::StreamExt;
use infrasim_metrics::state::{KindId, Resource, StateMetrics};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, ApiResource, GroupVersionKind};
use kube::core::DynamicResourceScope;
use kube::runtime::watcher::{self, watcher, Event};
use kube::runtime::WatchStreamExt;
use kube::ResourceExt;
use serde::de::{Deserialize, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::{Map, Value};
use std::borrow::Cow;
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
    let api: Api<Observed> = match namespace {
        Some(ns) if namespaced => Api::namespaced_with(client, ns, &api_resource),
        _ => Api::all_with(client, &api_resource),
    };
    let id = table.add(resource);
    Box::pin(follow(api, table.clone(), id))
}

async fn follow(api: Api<Observed>, table: StateMetrics, id: KindId) {
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
                table.set(id, &key, &o.value);
                listed.insert(key);
            }
            Event::InitDone => table.retain(id, &std::mem::take(&mut listed)),
            Event::Apply(o) => table.set(id, &key_of(&o), &o.value),
            Event::Delete(o) => table.remove(id, &key_of(&o)),
        }
    }
}

fn key_of(o: &Observed) -> String {
    format!("{}/{}", o.namespace().unwrap_or_default(), o.name_any())
}

/// An object as the families read it: its JSON, without the managed fields, which the
/// decoder skips over instead of building (no family reads them, and they are often the
/// biggest part of an object), and the metadata the watch itself needs (name, namespace,
/// uid, resourceVersion). Decoded straight into a JSON value, it needs no second encoding.
#[derive(Clone, Debug)]
pub struct Observed {
    meta: ObjectMeta,
    value: Value,
}

impl kube::Resource for Observed {
    type DynamicType = ApiResource;
    type Scope = DynamicResourceScope;

    fn kind(dt: &ApiResource) -> Cow<'_, str> {
        dt.kind.as_str().into()
    }

    fn group(dt: &ApiResource) -> Cow<'_, str> {
        dt.group.as_str().into()
    }

    fn version(dt: &ApiResource) -> Cow<'_, str> {
        dt.version.as_str().into()
    }

    fn api_version(dt: &ApiResource) -> Cow<'_, str> {
        dt.api_version.as_str().into()
    }

    fn plural(dt: &ApiResource) -> Cow<'_, str> {
        dt.plural.as_str().into()
    }

    fn meta(&self) -> &ObjectMeta {
        &self.meta
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.meta
    }
}

impl<'de> Deserialize<'de> for Observed {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(ObjectVisitor)
    }
}

struct ObjectVisitor;

impl<'de> Visitor<'de> for ObjectVisitor {
    type Value = Observed;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a Kubernetes object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Observed, A::Error> {
        let mut body = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let value = if key == "metadata" {
                map.next_value::<Metadata>()?.0
            } else {
                map.next_value::<Value>()?
            };
            body.insert(key, value);
        }
        let metadata = body.get("metadata");
        let text = |field: &str| Some(metadata?.get(field)?.as_str()?.to_string());
        let meta = ObjectMeta {
            name: text("name"),
            namespace: text("namespace"),
            uid: text("uid"),
            resource_version: text("resourceVersion"),
            ..ObjectMeta::default()
        };
        Ok(Observed {
            meta,
            value: Value::Object(body),
        })
    }
}

/// An object's metadata without `managedFields`.
struct Metadata(Value);

impl<'de> Deserialize<'de> for Metadata {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(MetadataVisitor)
    }
}

struct MetadataVisitor;

impl<'de> Visitor<'de> for MetadataVisitor {
    type Value = Metadata;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("an object's metadata")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Metadata, A::Error> {
        let mut metadata = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if key == "managedFields" {
                map.next_value::<IgnoredAny>()?;
            } else {
                metadata.insert(key, map.next_value::<Value>()?);
            }
        }
        Ok(Metadata(Value::Object(metadata)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_object_is_read_whole_but_for_its_managed_fields() {
        let text = serde_json::to_vec(&json!({
            "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
            "metadata": {"name": "c1", "namespace": "ns", "labels": {"a": "b"}, "resourceVersion": "7",
                         "managedFields": [{"manager": "m", "operation": "Apply",
                                            "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {}}}]},
            "spec": {"paused": true}, "status": {"phase": "Provisioned"}}))
        .expect("JSON");
        let o: Observed = serde_json::from_slice(&text).expect("an object");
        assert_eq!(
            (o.name_any(), o.namespace()),
            ("c1".into(), Some("ns".into()))
        );
        assert_eq!(o.resource_version().as_deref(), Some("7"));
        let value = o.value;
        assert_eq!(value["metadata"]["labels"]["a"], "b");
        assert_eq!(value["metadata"]["name"], "c1");
        assert!(value["metadata"].get("managedFields").is_none(), "{value}");
        assert_eq!(value["spec"]["paused"], true);
        assert_eq!(value["status"]["phase"], "Provisioned");
        assert_eq!(value["kind"], "Cluster");
    }
}
