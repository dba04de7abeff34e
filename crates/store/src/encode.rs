//! Encoding objects as kube-apiserver writes them.
//!
//! kube-apiserver encodes a built-in kind from its Go struct, so the JSON keys come in the
//! struct's field order: `kind`, `apiVersion`, `metadata` (itself in `ObjectMeta`'s order),
//! then the body (`spec`, or `data`, `rules`, …) and `status` last. A custom resource is an
//! unstructured map, which Go's encoder writes with sorted keys. Clients compare these bytes
//! (and error offsets into them), so the store encodes each object the way its kind is
//! encoded upstream, once, when it is written: reads hand the bytes out unchanged and pay
//! nothing for the order.
//!
//! Only the levels clients look at are reordered: the top level, `metadata`, and the entries
//! of `ownerReferences` and `managedFields`. Deeper fields keep sorted order, which is what
//! a client sees from kube-apiserver for every map-typed field anyway.

use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::{Map, Value};

/// The order of `ObjectMeta`'s fields in the Go type.
const OBJECT_META: &[&str] = &[
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
];

/// The order of `ListMeta`'s fields (a list's or a table's `metadata`) in the Go type.
const LIST_META: &[&str] = &[
    "selfLink",
    "resourceVersion",
    "continue",
    "remainingItemCount",
];

/// `OwnerReference`'s fields in Go order.
const OWNER_REFERENCE: &[&str] = &[
    "apiVersion",
    "kind",
    "name",
    "uid",
    "controller",
    "blockOwnerDeletion",
];

/// `ManagedFieldsEntry`'s fields in Go order.
const MANAGED_FIELDS_ENTRY: &[&str] = &[
    "manager",
    "operation",
    "apiVersion",
    "time",
    "fieldsType",
    "fieldsV1",
    "subresource",
];

/// The body fields (after `kind`, `apiVersion`, `metadata`) of the built-in kinds whose body
/// is not simply `spec` then `status`, in their Go types' order.
fn body_order(kind: &str, api_version: &str) -> &'static [&'static str] {
    match kind {
        "ConfigMap" => &["immutable", "data", "binaryData"],
        "Secret" => &["immutable", "data", "stringData", "type"],
        "ServiceAccount" => &[
            "secrets",
            "imagePullSecrets",
            "automountServiceAccountToken",
        ],
        "Role" | "ClusterRole" => &["rules", "aggregationRule"],
        "RoleBinding" | "ClusterRoleBinding" => &["subjects", "roleRef"],
        "Endpoints" => &["subsets"],
        "EndpointSlice" => &["addressType", "endpoints", "ports"],
        "ControllerRevision" => &["data", "revision"],
        "PriorityClass" => &["value", "globalDefault", "description", "preemptionPolicy"],
        "RuntimeClass" => &["handler", "overhead", "scheduling"],
        "StorageClass" => &[
            "provisioner",
            "parameters",
            "reclaimPolicy",
            "mountOptions",
            "allowVolumeExpansion",
            "volumeBindingMode",
            "allowedTopologies",
        ],
        "ValidatingWebhookConfiguration" | "MutatingWebhookConfiguration" => &["webhooks"],
        "Event" if api_version == "v1" => &[
            "involvedObject",
            "reason",
            "message",
            "source",
            "firstTimestamp",
            "lastTimestamp",
            "count",
            "type",
            "eventTime",
            "series",
            "action",
            "related",
            "reportingComponent",
            "reportingInstance",
        ],
        "Event" => &[
            "eventTime",
            "series",
            "reportingController",
            "reportingInstance",
            "action",
            "reason",
            "regarding",
            "related",
            "note",
            "type",
            "deprecatedSource",
            "deprecatedFirstTimestamp",
            "deprecatedLastTimestamp",
            "deprecatedCount",
        ],
        _ => &["spec"],
    }
}

/// `value` encoded as JSON in the field order kube-apiserver gives a built-in kind.
pub fn to_vec_typed(value: &Value) -> serde_json::Result<Vec<u8>> {
    let mut out = Vec::with_capacity(512);
    let mut ser = serde_json::Serializer::new(&mut out);
    Typed(value).serialize(&mut ser)?;
    Ok(out)
}

/// A list's `metadata` (`ListMeta`) encoded in its Go type's field order.
pub fn to_vec_list_meta(meta: &Value) -> serde_json::Result<Vec<u8>> {
    serde_json::to_vec(&Level::Struct(meta, LIST_META))
}

/// A built-in object, serialized in its Go type's order.
struct Typed<'a>(&'a Value);

impl Serialize for Typed<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let Value::Object(map) = self.0 else {
            return self.0.serialize(s);
        };
        let kind = map.get("kind").and_then(Value::as_str).unwrap_or("");
        let api_version = map.get("apiVersion").and_then(Value::as_str).unwrap_or("");
        let body = body_order(kind, api_version);
        let mut head: Vec<&str> = vec!["kind", "apiVersion", "metadata"];
        head.extend_from_slice(body);
        // `status` closes every built-in kind that has one.
        let tail: &[&str] = &["status"];
        // Lists and tables carry `ListMeta`, single objects `ObjectMeta`.
        let list = map.contains_key("items") || map.contains_key("rows");
        let mut out = s.serialize_map(Some(map.len()))?;
        write_ordered(&mut out, map, &head, tail, |key, value| match key {
            "metadata" if list => Level::Struct(value, LIST_META),
            "metadata" => Level::Metadata(value),
            _ => Level::Plain(value),
        })?;
        out.end()
    }
}

/// How one field's value is written: as it is, or in a Go type's order.
enum Level<'a> {
    Plain(&'a Value),
    Metadata(&'a Value),
    Entries(&'a Value, &'static [&'static str]),
    Struct(&'a Value, &'static [&'static str]),
}

impl Serialize for Level<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Level::Plain(v) => v.serialize(s),
            Level::Metadata(Value::Object(map)) => {
                let mut out = s.serialize_map(Some(map.len()))?;
                write_ordered(&mut out, map, OBJECT_META, &[], |key, value| match key {
                    "ownerReferences" => Level::Entries(value, OWNER_REFERENCE),
                    "managedFields" => Level::Entries(value, MANAGED_FIELDS_ENTRY),
                    _ => Level::Plain(value),
                })?;
                out.end()
            }
            Level::Entries(Value::Array(items), order) => {
                s.collect_seq(items.iter().map(|item| Level::Struct(item, order)))
            }
            Level::Struct(Value::Object(map), order) => {
                let mut out = s.serialize_map(Some(map.len()))?;
                write_ordered(&mut out, map, order, &[], |_, value| Level::Plain(value))?;
                out.end()
            }
            Level::Metadata(v) | Level::Entries(v, _) | Level::Struct(v, _) => v.serialize(s),
        }
    }
}

/// Writes `map`'s fields: first those named in `head` (in that order), then any others in
/// sorted order, then those named in `tail`.
fn write_ordered<'a, M: SerializeMap>(
    out: &mut M,
    map: &'a Map<String, Value>,
    head: &[&str],
    tail: &[&str],
    level: impl Fn(&str, &'a Value) -> Level<'a>,
) -> Result<(), M::Error> {
    for key in head {
        if let Some(value) = map.get(*key) {
            out.serialize_entry(key, &level(key, value))?;
        }
    }
    for (key, value) in map {
        if !head.contains(&key.as_str()) && !tail.contains(&key.as_str()) {
            out.serialize_entry(key, &level(key, value))?;
        }
    }
    for key in tail {
        if let Some(value) = map.get(*key) {
            out.serialize_entry(key, &level(key, value))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn typed(v: Value) -> String {
        String::from_utf8(to_vec_typed(&v).unwrap()).unwrap()
    }

    #[test]
    fn a_pod_starts_with_kind_and_ends_with_status() {
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "status": {"phase": "Running"},
            "spec": {"nodeName": "n"}, "metadata": {"uid": "u", "name": "p", "namespace": "d",
            "labels": {"b": "1", "a": "2"}, "creationTimestamp": "t", "resourceVersion": "5"}});
        assert_eq!(
            typed(pod),
            r#"{"kind":"Pod","apiVersion":"v1","metadata":{"name":"p","namespace":"d","uid":"u","resourceVersion":"5","creationTimestamp":"t","labels":{"a":"2","b":"1"}},"spec":{"nodeName":"n"},"status":{"phase":"Running"}}"#
        );
    }

    #[test]
    fn bodies_follow_their_go_type() {
        let secret = json!({"type": "Opaque", "data": {"k": "dg=="}, "apiVersion": "v1",
            "kind": "Secret", "metadata": {"name": "s"}, "immutable": true});
        assert_eq!(
            typed(secret),
            r#"{"kind":"Secret","apiVersion":"v1","metadata":{"name":"s"},"immutable":true,"data":{"k":"dg=="},"type":"Opaque"}"#
        );
        let binding = json!({"roleRef": {"name": "r"}, "subjects": [], "kind": "RoleBinding",
            "apiVersion": "rbac.authorization.k8s.io/v1", "metadata": {"name": "b"}});
        assert!(typed(binding).ends_with(r#""subjects":[],"roleRef":{"name":"r"}}"#));
    }

    #[test]
    fn owner_references_and_managed_fields_follow_their_go_types() {
        let cm = json!({"kind": "ConfigMap", "apiVersion": "v1", "metadata": {
            "ownerReferences": [{"uid": "1", "name": "o", "kind": "K", "apiVersion": "v1",
                                 "controller": true}],
            "managedFields": [{"time": "t", "manager": "m", "operation": "Apply",
                               "fieldsV1": {}, "fieldsType": "FieldsV1", "apiVersion": "v1"}],
            "name": "c"}});
        let text = typed(cm);
        assert!(
            text.contains(
                r#"[{"apiVersion":"v1","kind":"K","name":"o","uid":"1","controller":true}]"#
            ),
            "{text}"
        );
        assert!(text.contains(r#"[{"manager":"m","operation":"Apply","apiVersion":"v1","time":"t","fieldsType":"FieldsV1","fieldsV1":{}}]"#), "{text}");
    }

    #[test]
    fn unknown_fields_come_between_the_body_and_status_in_sorted_order() {
        let v = json!({"status": 1, "zeta": 2, "alpha": 3, "spec": 4, "kind": "X",
                       "apiVersion": "example.com/v1"});
        assert_eq!(
            typed(v),
            r#"{"kind":"X","apiVersion":"example.com/v1","spec":4,"alpha":3,"zeta":2,"status":1}"#
        );
    }

    #[test]
    fn lists_carry_list_meta_in_its_go_order() {
        let list = json!({"items": [], "metadata": {"remainingItemCount": 3, "continue": "c",
            "resourceVersion": "9"}, "apiVersion": "v1", "kind": "PodList"});
        assert_eq!(
            typed(list),
            r#"{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"9","continue":"c","remainingItemCount":3},"items":[]}"#
        );
    }

    #[test]
    fn the_same_value_results_whatever_the_order() {
        let v = json!({"kind": "Event", "apiVersion": "events.k8s.io/v1", "note": "n",
            "reason": "r", "metadata": {"name": "e"}, "type": "Normal"});
        let text = typed(v.clone());
        assert!(
            text.contains(r#""reason":"r","note":"n","type":"Normal""#),
            "{text}"
        );
        assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), v);
    }
}
