//! Server-side printing: `meta.k8s.io/v1` Tables with the columns kube-apiserver's printers
//! give each built-in kind, which is what `kubectl get` shows.

use crate::resources::{PrinterColumn, ResourceInfo};
use crate::selectors::selector_string;
use crate::values::At;
use chrono::{DateTime, Utc};
use serde_json::{json, Value};

mod apps;
mod autoscaling;
mod batch;
mod cluster;
mod core_group;

/// One column: name, type, and priority (0 = default output, 1 = only with `-o wide`).
struct Column(&'static str, &'static str, u8);

const NAME: Column = Column("Name", "string", 0);
const AGE: Column = Column("Age", "string", 0);

/// A kind's printer: its columns, and how one object fills them, kept side by side as
/// kube-apiserver's printers keep them.
struct Printer {
    kinds: &'static [&'static str],
    columns: &'static [Column],
    cells: fn(&Value, DateTime<Utc>) -> Vec<Value>,
}

/// Kinds without a printer of their own: Name and Created At, as kube-apiserver's default.
const DEFAULT: Printer = Printer {
    kinds: &[],
    columns: &[NAME, Column("Created At", "date", 0)],
    cells: default_cells,
};

fn default_cells(v: &Value, _now: DateTime<Utc>) -> Vec<Value> {
    vec![
        json!(s(v, "metadata.name")),
        json!(s(v, "metadata.creationTimestamp")),
    ]
}

/// Every built-in kind's printer.
const PRINTERS: &[&Printer] = &[
    &core_group::POD,
    &core_group::NAMESPACE,
    &core_group::NODE,
    &core_group::SERVICE,
    &core_group::ENDPOINTS,
    &core_group::CONFIG_MAP,
    &core_group::SECRET,
    &core_group::SERVICE_ACCOUNT,
    &core_group::EVENT,
    &apps::DEPLOYMENT,
    &apps::REPLICA_SET,
    &apps::DAEMON_SET,
    &apps::STATEFUL_SET,
    &apps::CONTROLLER_REVISION,
    &batch::JOB,
    &batch::CRON_JOB,
    &cluster::LEASE,
    &cluster::POD_DISRUPTION_BUDGET,
    &cluster::STORAGE_CLASS,
    &cluster::ROLE_BINDING,
    &cluster::MUTATING_WEBHOOK_CONFIGURATION,
    &cluster::ENDPOINT_SLICE,
    &cluster::VALIDATING_ADMISSION_POLICY,
    &cluster::VALIDATING_ADMISSION_POLICY_BINDING,
    &cluster::API_SERVICE,
    &cluster::CERTIFICATE_SIGNING_REQUEST,
    &cluster::COMPONENT_STATUS,
    &autoscaling::HORIZONTAL_POD_AUTOSCALER,
    &autoscaling::RESOURCE_METRICS,
];

fn printer(kind: &str) -> &'static Printer {
    PRINTERS
        .iter()
        .copied()
        .find(|p| p.kinds.contains(&kind))
        .unwrap_or(&DEFAULT)
}

fn columns(kind: &str) -> &'static [Column] {
    printer(kind).columns
}

/// Kubernetes' short human durations (`45s`, `3m20s`, `5h`, `12d`).
pub fn human_duration(d: chrono::Duration) -> String {
    let seconds = d.num_seconds();
    if seconds < -1 {
        return "<invalid>".into();
    }
    if seconds < 0 {
        return "0s".into();
    }
    if seconds < 60 * 2 {
        return format!("{seconds}s");
    }
    let minutes = seconds / 60;
    if minutes < 10 {
        let s = seconds % 60;
        return if s == 0 {
            format!("{minutes}m")
        } else {
            format!("{minutes}m{s}s")
        };
    }
    if minutes < 60 * 3 {
        return format!("{minutes}m");
    }
    let hours = minutes / 60;
    if hours < 8 {
        let m = minutes % 60;
        return if m == 0 {
            format!("{hours}h")
        } else {
            format!("{hours}h{m}m")
        };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        let h = hours % 24;
        let days = hours / 24;
        return if h == 0 {
            format!("{days}d")
        } else {
            format!("{days}d{h}h")
        };
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        let days = hours / 24;
        let dy = days % 365;
        return if dy == 0 {
            format!("{}y", days / 365)
        } else {
            format!("{}y{dy}d", days / 365)
        };
    }
    format!("{}y", hours / 24 / 365)
}

fn s<'a>(v: &'a Value, path: &str) -> &'a str {
    path.split('.')
        .try_fold(v, |v, k| v.get(k))
        .and_then(Value::as_str)
        .unwrap_or("")
}

fn n(v: &Value, path: &str) -> i64 {
    path.split('.')
        .try_fold(v, |v, k| v.get(k))
        .and_then(Value::as_i64)
        .unwrap_or(0)
}

fn arr<'a>(v: &'a Value, path: &str) -> &'a [Value] {
    path.split('.')
        .try_fold(v, |v, k| v.get(k))
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

fn count(v: &Value, path: &str) -> usize {
    match path.split('.').try_fold(v, |v, k| v.get(k)) {
        Some(Value::Object(m)) => m.len(),
        Some(Value::Array(a)) => a.len(),
        _ => 0,
    }
}

fn or_none(s: String) -> String {
    if s.is_empty() {
        "<none>".into()
    } else {
        s
    }
}

fn age(v: &Value, now: DateTime<Utc>) -> Value {
    let created = s(v, "metadata.creationTimestamp");
    match DateTime::parse_from_rfc3339(created) {
        Ok(t) => json!(human_duration(now - t.with_timezone(&Utc))),
        Err(_) => json!("<unknown>"),
    }
}

fn containers_images(v: &Value, spec: &str) -> (Value, Value) {
    let cs = arr(v, spec);
    let names: Vec<&str> = cs.iter().map(|c| s(c, "name")).collect();
    let images: Vec<&str> = cs.iter().map(|c| s(c, "image")).collect();
    (json!(names.join(",")), json!(images.join(",")))
}

fn pod_status(v: &Value) -> (String, String, i64) {
    let statuses = arr(v, "status.containerStatuses");
    let total = arr(v, "spec.containers").len();
    let ready = statuses
        .iter()
        .filter(|c| c.get("ready").and_then(Value::as_bool) == Some(true))
        .count();
    let restarts: i64 = statuses.iter().map(|c| n(c, "restartCount")).sum();
    let mut reason = s(v, "status.phase").to_string();
    if !s(v, "status.reason").is_empty() {
        reason = s(v, "status.reason").to_string();
    }
    for c in statuses.iter().rev() {
        let waiting = s(c, "state.waiting.reason");
        let terminated = s(c, "state.terminated.reason");
        if !waiting.is_empty() {
            reason = waiting.to_string();
        } else if !terminated.is_empty() {
            reason = terminated.to_string();
        }
    }
    if v.at("/metadata/deletionTimestamp").is_some() {
        reason = "Terminating".into();
    }
    if reason.is_empty() {
        reason = "Pending".into();
    }
    (format!("{ready}/{total}"), reason, restarts)
}

fn node_status(v: &Value) -> String {
    let ready = arr(v, "status.conditions")
        .iter()
        .find(|c| s(c, "type") == "Ready")
        .map(|c| {
            if s(c, "status") == "True" {
                "Ready"
            } else {
                "NotReady"
            }
        })
        .unwrap_or("Unknown");
    if v.at("/spec/unschedulable").and_then(Value::as_bool) == Some(true) {
        format!("{ready},SchedulingDisabled")
    } else {
        ready.to_string()
    }
}

fn node_roles(v: &Value) -> String {
    let mut roles: Vec<String> = v
        .at("/metadata/labels")
        .and_then(Value::as_object)
        .map(|m| {
            m.keys()
                .filter_map(|k| k.strip_prefix("node-role.kubernetes.io/"))
                .filter(|r| !r.is_empty())
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    roles.sort();
    or_none(roles.join(","))
}

fn node_address(v: &Value, kind: &str) -> String {
    or_none(
        arr(v, "status.addresses")
            .iter()
            .find(|a| s(a, "type") == kind)
            .map(|a| s(a, "address").to_string())
            .unwrap_or_default(),
    )
}

fn service_ports(v: &Value) -> String {
    let ports: Vec<String> = arr(v, "spec.ports")
        .iter()
        .map(|p| {
            let proto = match s(p, "protocol") {
                "" => "TCP",
                other => other,
            };
            match n(p, "nodePort") {
                0 => format!("{}/{proto}", n(p, "port")),
                np => format!("{}:{np}/{proto}", n(p, "port")),
            }
        })
        .collect();
    or_none(ports.join(","))
}

fn cells(kind: &str, v: &Value, now: DateTime<Utc>) -> Vec<Value> {
    (printer(kind).cells)(v, now)
}

/// What a Table row carries besides its cells (`includeObject`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IncludeObject {
    None,
    #[default]
    Metadata,
    Object,
}

impl IncludeObject {
    pub fn parse(s: Option<&str>) -> Result<Self, String> {
        match s {
            None | Some("") | Some("Metadata") => Ok(IncludeObject::Metadata),
            Some("None") => Ok(IncludeObject::None),
            Some("Object") => Ok(IncludeObject::Object),
            Some(other) => Err(format!("includeObject: Unsupported value: {other:?}: supported values: \"Metadata\", \"None\", \"Object\"")),
        }
    }
}

/// The column definitions of a resource.
pub fn column_definitions(info: &ResourceInfo) -> Value {
    if let Some(columns) = &info.printer_columns {
        let mut defs = vec![
            json!({"name": "Name", "type": "string", "format": "name", "description": "Name must be unique within a namespace.", "priority": 0}),
        ];
        for c in columns {
            defs.push(json!({"name": c.name, "type": c.ty, "format": c.format, "description": c.description, "priority": c.priority}));
        }
        // kube-apiserver prints a CRD's own columns after Name and nothing else; Age only
        // when the CRD defines no columns (its defaulting adds that one).
        if columns.is_empty() {
            defs.push(json!({"name": "Age", "type": "date", "format": "", "description": "CreationTimestamp is a timestamp representing the server time when this object was created.", "priority": 0}));
        }
        return Value::Array(defs);
    }
    Value::Array(
        columns(&info.kind)
            .iter()
            .map(|Column(name, ty, priority)| {
                let format = if *name == "Name" { "name" } else { "" };
                json!({"name": name, "type": ty, "format": format, "description": "", "priority": priority})
            })
            .collect(),
    )
}

/// The end of a dotted key: the first `.` or `[` not escaped by a backslash.
fn key_end(r: &str) -> usize {
    let bytes = r.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'.' | b'[' => return i,
            _ => i += 1,
        }
    }
    r.len()
}

/// A key as written in a path, with `\.` read as a dot (label keys such as
/// `cluster\.x-k8s\.io/cluster-name`).
fn unescape_key(key: &str) -> String {
    key.replace("\\.", ".")
}

/// Evaluates the JSONPath forms printer columns use: `.a.b`, `.a[0].b`,
/// `.a[?(@.type=="Ready")].status`, and keys with dots either escaped (`.a.b\.c`) or quoted
/// (`.a['b\.c/d']`), as Cluster API's CRDs name label keys.
pub fn json_path<'a>(v: &'a Value, path: &str) -> Option<&'a Value> {
    let mut cur = v;
    let mut rest = path
        .trim()
        .trim_start_matches('{')
        .trim_end_matches('}')
        .trim_start_matches('$');
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('.') {
            let end = key_end(r);
            let key = &r[..end];
            if !key.is_empty() {
                cur = cur.get(unescape_key(key))?;
            }
            rest = &r[end..];
        } else if let Some(r) = rest.strip_prefix('[') {
            // A quoted key may hold `]`; find the closing quote first.
            let quoted = r.starts_with('\'') || r.starts_with('"');
            let end = if quoted {
                // The closing quote, then `]` right after it.
                let close = r[1..].find(&r[..1])? + 1;
                (r.as_bytes().get(close + 1) == Some(&b']')).then_some(close + 1)?
            } else {
                r.find(']')?
            };
            let inner = &r[..end];
            rest = &r[end + 1..];
            if quoted {
                cur = cur.get(unescape_key(&inner[1..inner.len() - 1]))?;
            } else if let Ok(i) = inner.parse::<usize>() {
                cur = cur.get(i)?;
            } else if let Some(filter) =
                inner.strip_prefix("?(@.").and_then(|f| f.strip_suffix(')'))
            {
                let (field, want) = filter.split_once("==")?;
                let want = want.trim().trim_matches(|c| c == '"' || c == '\'');
                cur = cur.as_array()?.iter().find(|item| {
                    item.get(field.trim()).map(|x| match x {
                        Value::String(s) => s == want,
                        other => scalar_text(other) == want,
                    }) == Some(true)
                })?;
            } else {
                return None;
            }
        } else {
            return None;
        }
    }
    Some(cur)
}

/// A non-string scalar as JSONPath filters compare it (`3`, `true`).
fn scalar_text(v: &Value) -> String {
    v.to_string()
}

fn custom_cells(
    info: &ResourceInfo,
    columns: &[PrinterColumn],
    v: &Value,
    now: DateTime<Utc>,
) -> Vec<Value> {
    let mut cells = vec![json!(s(v, "metadata.name"))];
    for c in columns {
        let found = json_path(v, &c.json_path);
        cells.push(match (c.ty.as_str(), found) {
            (_, None) => Value::Null,
            ("date", Some(Value::String(t))) => DateTime::parse_from_rfc3339(t)
                .map(|t| json!(human_duration(now - t.with_timezone(&Utc))))
                .unwrap_or(Value::Null),
            (_, Some(x)) => x.clone(),
        });
    }
    if columns.is_empty() {
        cells.push(age(v, now));
    }
    let _ = info;
    cells
}

/// One row for an object.
pub fn row(
    info: &ResourceInfo,
    object: &Value,
    include: IncludeObject,
    now: DateTime<Utc>,
) -> Value {
    let cells = match &info.printer_columns {
        Some(columns) => custom_cells(info, columns, object, now),
        None => cells(&info.kind, object, now),
    };
    let mut row = json!({"cells": cells});
    match include {
        IncludeObject::None => {}
        IncludeObject::Object => row["object"] = object.clone(),
        IncludeObject::Metadata => {
            row["object"] = json!({
                "kind": "PartialObjectMetadata",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": object.get("metadata").cloned().unwrap_or(Value::Null),
            })
        }
    }
    row
}

/// A whole Table.
pub fn table(info: &ResourceInfo, rows: Vec<Value>, list_meta: Value, with_columns: bool) -> Value {
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": list_meta,
        "columnDefinitions": if with_columns { column_definitions(info) } else { Value::Array(vec![]) },
        "rows": rows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_durations_match_kubectl() {
        let d = chrono::Duration::seconds;
        assert_eq!(human_duration(d(5)), "5s");
        assert_eq!(human_duration(d(119)), "119s");
        assert_eq!(human_duration(d(200)), "3m20s");
        assert_eq!(human_duration(d(600)), "10m");
        assert_eq!(human_duration(d(3 * 3600 + 60)), "3h1m");
        assert_eq!(human_duration(d(30 * 3600)), "30h");
        assert_eq!(human_duration(d(3 * 86400 + 7200)), "3d2h");
    }

    #[test]
    fn pod_row_shows_ready_status_and_node() {
        let pod = json!({
            "metadata": {"name": "web", "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"containers": [{"name": "a"}, {"name": "b"}], "nodeName": "n1"},
            "status": {"phase": "Running", "podIP": "10.0.0.5", "containerStatuses": [
                {"name": "a", "ready": true, "restartCount": 1},
                {"name": "b", "ready": false, "restartCount": 2, "state": {"waiting": {"reason": "CrashLoopBackOff"}}}
            ]}
        });
        let now: DateTime<Utc> = "2026-01-01T00:01:00Z".parse().unwrap();
        let reg = crate::resources::Registry::builtin();
        let pods = reg.find("", "v1", "pods").unwrap();
        let r = row(&pods, &pod, IncludeObject::None, now);
        assert_eq!(
            r["cells"],
            json!([
                "web",
                "1/2",
                "CrashLoopBackOff",
                "3",
                "60s",
                "10.0.0.5",
                "n1",
                "<none>",
                "<none>"
            ])
        );
    }
}

#[cfg(test)]
mod json_path_tests {
    use super::json_path;
    use serde_json::json;

    #[test]
    fn printer_column_paths() {
        let v = json!({"spec": {"replicas": 3, "items": [{"n": "a"}]},
                       "status": {"conditions": [{"type": "Ready", "status": "True"}, {"type": "X", "status": "False"}]}});
        assert_eq!(json_path(&v, ".spec.replicas"), Some(&json!(3)));
        assert_eq!(json_path(&v, ".spec.items[0].n"), Some(&json!("a")));
        assert_eq!(
            json_path(&v, ".status.conditions[?(@.type==\"Ready\")].status"),
            Some(&json!("True"))
        );
        assert_eq!(
            json_path(&v, ".status.conditions[?(@.type=='X')].status"),
            Some(&json!("False"))
        );
        assert_eq!(json_path(&v, ".spec.missing"), None);
    }

    #[test]
    fn label_keys_with_escaped_or_quoted_dots() {
        let v = json!({"metadata": {"labels": {"cluster.x-k8s.io/cluster-name": "c1"},
                                    "ownerReferences": [{"kind": "Machine", "name": "m1"}]}});
        assert_eq!(
            json_path(&v, ".metadata.labels['cluster\\.x-k8s\\.io/cluster-name']"),
            Some(&json!("c1"))
        );
        assert_eq!(
            json_path(&v, ".metadata.labels.cluster\\.x-k8s\\.io/cluster-name"),
            Some(&json!("c1"))
        );
        assert_eq!(
            json_path(&v, ".metadata.labels[\"cluster.x-k8s.io/cluster-name\"]"),
            Some(&json!("c1"))
        );
        assert_eq!(
            json_path(&v, ".metadata.ownerReferences[?(@.kind==\"Machine\")].name"),
            Some(&json!("m1"))
        );
        assert_eq!(json_path(&v, ".metadata.labels['x"), None);
    }
}
