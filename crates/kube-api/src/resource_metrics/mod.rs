//! `metrics.k8s.io/v1beta1`, the resource metrics API `kubectl top` and the
//! HorizontalPodAutoscaler read: a cluster's metrics-server, served by its API server itself.
//!
//! In a real cluster metrics-server scrapes every kubelet each `--metric-resolution` and
//! kube-apiserver proxies this group to it through an APIService. A simulated cluster has no
//! kubelet to scrape, so the figures are computed from the pods and nodes where they are read
//! ([`usage`]), and only servers that simulate a cluster's nodes serve the group
//! ([`crate::ApiConfig::resource_metrics`]). Reads answer as metrics-server answers: a list
//! holds the running pods (Ready nodes) that match the selectors, sorted by namespace and
//! name, each carrying its pod's labels; a pod or node with no figures is NotFound.

pub mod types;
pub mod usage;

use crate::context::Ctx;
use crate::http::{json_value, HandlerResult};
use crate::quantity;
use crate::selectors::{FieldSelector, LabelSelector};
use crate::status::ApiError;
use crate::values::At;
use chrono::{DateTime, Utc};
use infrasim_store::{ReadAt, StoredObject};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::Arc;
use usage::{ContainerUsage, Usage, UsageReader};

/// The window every figure covers, as a Go duration.
const WINDOW: &str = "15s";

/// GET of one NodeMetrics or PodMetrics, or of a list of them.
pub(crate) fn get(ctx: &Ctx) -> HandlerResult {
    let items = match ctx.info.kind.as_str() {
        "NodeMetrics" => nodes(ctx)?,
        _ => pods(ctx)?,
    };
    if let Some(name) = ctx.path.name.as_deref() {
        let found = items
            .into_iter()
            .find(|m| m.at("/metadata/name").and_then(Value::as_str) == Some(name));
        let Some(found) = found else {
            return Err(not_found(ctx, name));
        };
        return answer(ctx, vec![found], false);
    }
    answer(ctx, items, true)
}

/// metrics-server's NotFound: the pod's (node's) own when there is no such object, else the
/// metrics' (it has no figures for it).
fn not_found(ctx: &Ctx, name: &str) -> ApiError {
    let (resource, namespace) = match ctx.path.namespace.as_deref() {
        Some(namespace) => ("pods", namespace),
        None => ("nodes", ""),
    };
    let key = infrasim_store::ObjectKey::new(namespace, name);
    if ctx.state.group.get(resource, &key).is_none() {
        return ApiError::object_not_found("", resource, name);
    }
    let name = match namespace {
        "" => name.to_string(),
        namespace => format!("{namespace}/{name}"),
    };
    ApiError::object_not_found(&ctx.info.group, &ctx.info.plural, &name)
}

/// The answer in the format asked for: JSON, or a Table with metrics-server's columns.
fn answer(ctx: &Ctx, items: Vec<Value>, list: bool) -> HandlerResult {
    if let Some(table) = ctx.computed_table(&items) {
        return table;
    }
    if !list {
        return Ok(json_value(200, &items[0]));
    }
    Ok(json_value(
        200,
        &json!({
            "kind": ctx.info.list_kind,
            "apiVersion": types::API_VERSION,
            "metadata": {},
            "items": items,
        }),
    ))
}

/// The selectors of a list: labels are the pod's (node's), fields its name and namespace.
fn selectors(ctx: &Ctx) -> Result<(LabelSelector, FieldSelector), ApiError> {
    let labels = LabelSelector::parse(ctx.query.get("labelSelector").unwrap_or(""))
        .map_err(ApiError::bad_request)?;
    let fields = FieldSelector::parse(ctx.query.get("fieldSelector").unwrap_or(""), &ctx.info.kind)
        .map_err(ApiError::bad_request)?;
    Ok((labels, fields))
}

/// The stored objects of `resource` in `namespace` (all of them for `""`) that match the
/// request's selectors and name, in key order (namespace, then name).
fn matching(
    ctx: &Ctx,
    resource: &str,
    namespace: &str,
) -> Result<Vec<Arc<StoredObject>>, ApiError> {
    let (labels, fields) = selectors(ctx)?;
    let snapshot = ctx
        .state
        .group
        .snapshot(resource, ReadAt::Latest)
        .map_err(|e| ApiError::internal(e.to_string()))?;
    let name = ctx.path.name.as_deref();
    Ok(snapshot
        .objects
        .values()
        .filter(|o| namespace.is_empty() || &*o.meta.namespace == namespace)
        .filter(|o| name.is_none_or(|n| &*o.meta.name == n))
        .filter(|o| labels.matches(&o.meta.labels) && fields.matches(o))
        .cloned()
        .collect())
}

/// PodMetrics of the running pods the request names.
fn pods(ctx: &Ctx) -> Result<Vec<Value>, ApiError> {
    let at = usage::sample_time(ctx.state.clock.now());
    let now = ctx.state.clock.now();
    let mut reader = UsageReader::new(&ctx.state.group);
    let mut items = Vec::new();
    for stored in matching(ctx, "pods", ctx.namespace())? {
        let Ok(pod) = stored.to_value() else { continue };
        if let Some(containers) = reader.pod(&pod, at) {
            items.push(pod_metrics(&stored, &containers, at, now));
        }
    }
    Ok(items)
}

fn pod_metrics(
    pod: &StoredObject,
    containers: &[ContainerUsage],
    at: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Value {
    let containers: Vec<Value> = containers
        .iter()
        .map(|c| json!({"name": c.name, "usage": usage_value(c.usage)}))
        .collect();
    json!({
        "kind": "PodMetrics",
        "apiVersion": types::API_VERSION,
        "metadata": {
            "name": &*pod.meta.name,
            "namespace": &*pod.meta.namespace,
            // metrics-server stamps each answer with the time it was made.
            "creationTimestamp": infrasim_store::format_time(now),
            "labels": pod.meta.labels,
        },
        "timestamp": infrasim_store::format_time(at),
        "window": WINDOW,
        "containers": containers,
    })
}

/// NodeMetrics of the Ready nodes the request names.
fn nodes(ctx: &Ctx) -> Result<Vec<Value>, ApiError> {
    let at = usage::sample_time(ctx.state.clock.now());
    let now = ctx.state.clock.now();
    let nodes = matching(ctx, "nodes", "")?;
    if nodes.is_empty() {
        return Ok(Vec::new());
    }
    let on_nodes = pods_by_node(ctx, at)?;
    let mut items = Vec::new();
    for stored in nodes {
        let Ok(node) = stored.to_value() else {
            continue;
        };
        let pods = on_nodes
            .get(&*stored.meta.name)
            .copied()
            .unwrap_or_default();
        if let Some(usage) = usage::node(&node, pods, at) {
            items.push(json!({
                "kind": "NodeMetrics",
                "apiVersion": types::API_VERSION,
                "metadata": {
                    "name": &*stored.meta.name,
                    "creationTimestamp": infrasim_store::format_time(now),
                    "labels": stored.meta.labels,
                },
                "timestamp": infrasim_store::format_time(at),
                "window": WINDOW,
                "usage": usage_value(usage),
            }));
        }
    }
    Ok(items)
}

/// What the running pods use, summed per node.
fn pods_by_node(ctx: &Ctx, at: DateTime<Utc>) -> Result<HashMap<String, Usage>, ApiError> {
    let snapshot = ctx
        .state
        .group
        .snapshot("pods", ReadAt::Latest)
        .map_err(|e| ApiError::internal(e.to_string()))?;
    let mut reader = UsageReader::new(&ctx.state.group);
    let mut by_node: HashMap<String, Usage> = HashMap::new();
    for stored in snapshot.objects.values() {
        // Only bound pods can run: skip decoding the rest.
        if stored.field("spec.nodeName").is_some_and(str::is_empty) {
            continue;
        }
        let Ok(pod) = stored.to_value() else { continue };
        let Some(containers) = reader.pod(&pod, at) else {
            continue;
        };
        let node = pod["spec"]["nodeName"].as_str().unwrap_or("").to_string();
        let total = by_node.entry(node).or_default();
        for c in containers {
            *total += c.usage;
        }
    }
    Ok(by_node)
}

/// A usage as metrics-server writes it: nanocores and kibibytes.
fn usage_value(usage: Usage) -> Value {
    json!({"cpu": quantity::nanocores(usage.cpu), "memory": quantity::kibibytes(usage.memory)})
}
