//! One set of Events served in two shapes, as kube-apiserver serves them: `core/v1` Event and
//! `events.k8s.io/v1` Event are the same stored objects. They are stored as `core/v1`; a
//! request through `events.k8s.io/v1` has its object converted on the way in and every
//! object it is answered with (get, list, watch, writes) converted on the way out. So
//! `kubectl get events` and `kubectl describe` show what kube-rs's and client-go's newer
//! recorders write through `events.k8s.io`, and the other way round.
//!
//! The field mapping is kube-apiserver's (`pkg/apis/events/v1` conversion):
//!
//! | `events.k8s.io/v1`        | `core/v1`            |
//! |---------------------------|----------------------|
//! | `regarding`               | `involvedObject`     |
//! | `note`                    | `message`            |
//! | `reportingController`     | `reportingComponent` |
//! | `deprecatedSource`        | `source`             |
//! | `deprecatedFirstTimestamp`| `firstTimestamp`     |
//! | `deprecatedLastTimestamp` | `lastTimestamp`      |
//! | `deprecatedCount`         | `count`              |
//!
//! and `eventTime`, `series`, `action`, `reason`, `related`, `reportingInstance`, `type`
//! and `metadata` are the same in both.

use serde_json::{Map, Value};

/// `(events.k8s.io/v1 name, core/v1 name)` of the fields named differently.
const RENAMED: [(&str, &str); 7] = [
    ("regarding", "involvedObject"),
    ("note", "message"),
    ("reportingController", "reportingComponent"),
    ("deprecatedSource", "source"),
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
    ("deprecatedCount", "count"),
];

/// An `events.k8s.io/v1` Event as the `core/v1` Event it is stored as.
pub(crate) fn to_core(event: Value) -> Value {
    let mut out = rename(event, |(served, stored)| (served, stored));
    out.insert("apiVersion".into(), Value::from("v1"));
    // The core type always has these (structs in Go, so never omitted).
    out.entry("involvedObject")
        .or_insert_with(|| Value::Object(Map::new()));
    out.entry("source")
        .or_insert_with(|| Value::Object(Map::new()));
    Value::Object(out)
}

/// A stored `core/v1` Event as `events.k8s.io/v1` serves it.
pub(crate) fn to_events_v1(event: Value) -> Value {
    let mut out = rename(event, |(served, stored)| (stored, served));
    out.insert("apiVersion".into(), Value::from("events.k8s.io/v1"));
    // `eventTime` is required and never omitted in this version: an Event recorded through
    // `core/v1` without one is served with null, as kube-apiserver serves it.
    out.entry("eventTime").or_insert(Value::Null);
    Value::Object(out)
}

/// Moves every renamed field from its name in one version to its name in the other;
/// `direction` picks (from, to) out of a `RENAMED` pair.
fn rename(
    event: Value,
    direction: fn((&'static str, &'static str)) -> (&'static str, &'static str),
) -> Map<String, Value> {
    let mut map = match event {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    let mut moved = Vec::new();
    for pair in RENAMED {
        let (from, to) = direction(pair);
        // A field already named as the target version names it (a client that sent both)
        // is dropped: it does not exist in the source version.
        map.remove(to);
        if let Some(v) = map.remove(from) {
            moved.push((to, v));
        }
    }
    for (to, v) in moved {
        map.insert(to.to_string(), v);
    }
    map
}

/// A field selector's label in `events.k8s.io/v1` as the stored `core/v1` field it selects;
/// `None` for a label this version does not offer.
pub(crate) fn events_v1_field_label(label: &str) -> Option<String> {
    match label {
        "metadata.name" | "metadata.namespace" | "reason" | "type" => Some(label.to_string()),
        "reportingController" => Some("reportingComponent".to_string()),
        "deprecatedSource" => Some("source".to_string()),
        _ => {
            let field = label.strip_prefix("regarding.")?;
            matches!(
                field,
                "kind"
                    | "namespace"
                    | "name"
                    | "uid"
                    | "apiVersion"
                    | "resourceVersion"
                    | "fieldPath"
            )
            .then(|| format!("involvedObject.{field}"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn recorded_by_kube_rs() -> Value {
        json!({
            "apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": "web.17a", "namespace": "demo"},
            "eventTime": "2026-11-28T08:00:00.000000Z",
            "action": "Reconciling", "reason": "Scaled", "type": "Normal",
            "note": "scaled to 3",
            "regarding": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web",
                          "namespace": "demo", "uid": "u-1"},
            "reportingController": "example.com/controller",
            "reportingInstance": "controller-0",
            "series": {"count": 2, "lastObservedTime": "2026-11-28T08:01:00.000000Z"},
        })
    }

    #[test]
    fn an_events_v1_event_is_stored_as_core_and_served_back_unchanged() {
        let stored = to_core(recorded_by_kube_rs());
        assert_eq!(stored["apiVersion"], "v1");
        assert_eq!(stored["involvedObject"]["name"], "web");
        assert_eq!(stored["message"], "scaled to 3");
        assert_eq!(stored["reportingComponent"], "example.com/controller");
        assert_eq!(stored["source"], json!({}));
        for gone in ["regarding", "note", "reportingController"] {
            assert!(stored.get(gone).is_none(), "{gone} is not a core field");
        }
        let mut back = to_events_v1(stored);
        back.as_object_mut().unwrap().remove("deprecatedSource");
        assert_eq!(back, recorded_by_kube_rs());
    }

    #[test]
    fn a_core_event_without_event_time_is_served_with_a_null_one() {
        let core = json!({"apiVersion": "v1", "kind": "Event",
                          "metadata": {"name": "e", "namespace": "d"},
                          "involvedObject": {"kind": "Pod", "name": "p"},
                          "message": "pulled", "count": 3,
                          "firstTimestamp": "2026-11-28T08:00:00Z",
                          "source": {"component": "kubelet"}});
        let served = to_events_v1(core);
        assert_eq!(served["eventTime"], Value::Null);
        assert_eq!(served["regarding"]["name"], "p");
        assert_eq!(served["deprecatedCount"], 3);
        assert_eq!(served["deprecatedSource"]["component"], "kubelet");
        assert_eq!(served["deprecatedFirstTimestamp"], "2026-11-28T08:00:00Z");
    }

    #[test]
    fn field_labels_of_events_v1_select_the_core_fields() {
        assert_eq!(
            events_v1_field_label("regarding.name").as_deref(),
            Some("involvedObject.name")
        );
        assert_eq!(
            events_v1_field_label("reportingController").as_deref(),
            Some("reportingComponent")
        );
        assert_eq!(events_v1_field_label("involvedObject.name"), None);
        assert_eq!(events_v1_field_label("regarding.color"), None);
    }
}
