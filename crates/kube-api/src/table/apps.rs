//! Printers of the `apps` group's kinds.

use super::*;

pub(super) const DEPLOYMENT: Printer = Printer {
    kinds: &["Deployment"],
    columns: &[
        NAME,
        Column("Ready", "string", 0),
        Column("Up-to-date", "integer", 0),
        Column("Available", "integer", 0),
        AGE,
        Column("Containers", "string", 1),
        Column("Images", "string", 1),
        Column("Selector", "string", 1),
    ],
    cells: deployment,
};

fn deployment(v: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let name = json!(s(v, "metadata.name"));
    let (c, i) = containers_images(v, "spec.template.spec.containers");
    vec![
        name,
        json!(format!(
            "{}/{}",
            n(v, "status.readyReplicas"),
            v.at("/spec/replicas").and_then(Value::as_i64).unwrap_or(1)
        )),
        json!(n(v, "status.updatedReplicas")),
        json!(n(v, "status.availableReplicas")),
        age(v, now),
        c,
        i,
        json!(selector_string(v.at("/spec/selector"))),
    ]
}

pub(super) const REPLICA_SET: Printer = Printer {
    kinds: &["ReplicaSet"],
    columns: &[
        NAME,
        Column("Desired", "integer", 0),
        Column("Current", "integer", 0),
        Column("Ready", "integer", 0),
        AGE,
        Column("Containers", "string", 1),
        Column("Images", "string", 1),
        Column("Selector", "string", 1),
    ],
    cells: replica_set,
};

fn replica_set(v: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let name = json!(s(v, "metadata.name"));
    let (c, i) = containers_images(v, "spec.template.spec.containers");
    vec![
        name,
        json!(v.at("/spec/replicas").and_then(Value::as_i64).unwrap_or(1)),
        json!(n(v, "status.replicas")),
        json!(n(v, "status.readyReplicas")),
        age(v, now),
        c,
        i,
        json!(selector_string(v.at("/spec/selector"))),
    ]
}

pub(super) const DAEMON_SET: Printer = Printer {
    kinds: &["DaemonSet"],
    columns: &[
        NAME,
        Column("Desired", "integer", 0),
        Column("Current", "integer", 0),
        Column("Ready", "integer", 0),
        Column("Up-to-date", "integer", 0),
        Column("Available", "integer", 0),
        Column("Node Selector", "string", 0),
        AGE,
        Column("Containers", "string", 1),
        Column("Images", "string", 1),
        Column("Selector", "string", 1),
    ],
    cells: daemon_set,
};

fn daemon_set(v: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let name = json!(s(v, "metadata.name"));
    let (c, i) = containers_images(v, "spec.template.spec.containers");
    vec![
        name,
        json!(n(v, "status.desiredNumberScheduled")),
        json!(n(v, "status.currentNumberScheduled")),
        json!(n(v, "status.numberReady")),
        json!(n(v, "status.updatedNumberScheduled")),
        json!(n(v, "status.numberAvailable")),
        json!(or_none(selector_string(
            v.at("/spec/template/spec/nodeSelector")
        ))),
        age(v, now),
        c,
        i,
        json!(selector_string(v.at("/spec/selector"))),
    ]
}

pub(super) const STATEFUL_SET: Printer = Printer {
    kinds: &["StatefulSet"],
    columns: &[
        NAME,
        Column("Ready", "string", 0),
        AGE,
        Column("Containers", "string", 1),
        Column("Images", "string", 1),
    ],
    cells: stateful_set,
};

fn stateful_set(v: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let name = json!(s(v, "metadata.name"));
    let (c, i) = containers_images(v, "spec.template.spec.containers");
    vec![
        name,
        json!(format!(
            "{}/{}",
            n(v, "status.readyReplicas"),
            v.at("/spec/replicas").and_then(Value::as_i64).unwrap_or(1)
        )),
        age(v, now),
        c,
        i,
    ]
}

pub(super) const CONTROLLER_REVISION: Printer = Printer {
    kinds: &["ControllerRevision"],
    columns: &[
        NAME,
        Column("Controller", "string", 0),
        Column("Revision", "integer", 0),
        AGE,
    ],
    cells: controller_revision,
};

fn controller_revision(v: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let name = json!(s(v, "metadata.name"));
    let controller = arr(v, "metadata.ownerReferences")
        .iter()
        .find(|r| r.get("controller").and_then(Value::as_bool) == Some(true))
        .map(|r| {
            let group = s(r, "apiVersion").split('/').rev().nth(1).unwrap_or("");
            let kind = s(r, "kind").to_lowercase();
            let kind = if group.is_empty() {
                kind
            } else {
                format!("{kind}.{group}")
            };
            format!("{kind}/{}", s(r, "name"))
        })
        .unwrap_or_else(|| "<none>".into());
    vec![
        name,
        json!(controller),
        json!(v.get("revision").and_then(Value::as_i64).unwrap_or(0)),
        age(v, now),
    ]
}
