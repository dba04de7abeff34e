//! `v1` ComponentStatus (`kubectl get componentstatuses`): kube-apiserver's own view of the
//! control plane's health, computed on every read and never stored. Deprecated upstream
//! since 1.19 but still served, with a warning, and still read by tools (kube-rs's event
//! recorder among them). Here every component is part of the simulated control plane, so
//! each reports healthy, in the words kube-apiserver's probes use.

use crate::context::Ctx;
use crate::http::{json_value, HandlerResult};
use crate::status::ApiError;
use serde_json::{json, Value};

/// The components kube-apiserver probes, with the message a healthy probe reports.
const COMPONENTS: [(&str, &str); 3] = [
    ("controller-manager", "ok"),
    ("etcd-0", r#"{"health":"true","reason":""}"#),
    ("scheduler", "ok"),
];

fn component(name: &str, message: &str) -> Value {
    json!({
        "kind": "ComponentStatus",
        "apiVersion": "v1",
        "metadata": {"name": name},
        "conditions": [{"type": "Healthy", "status": "True", "message": message}],
    })
}

/// GET of one component or of the list, as JSON or as a Table.
pub(crate) fn get(ctx: &Ctx) -> HandlerResult {
    let items: Vec<Value> = match ctx.path.name.as_deref() {
        Some(name) => {
            let (name, message) = COMPONENTS
                .iter()
                .find(|(n, _)| *n == name)
                .ok_or_else(|| ApiError::object_not_found("", "componentstatus", name))?;
            vec![component(name, message)]
        }
        None => COMPONENTS.iter().map(|(n, m)| component(n, m)).collect(),
    };
    if let Some(table) = ctx.computed_table(&items) {
        return table;
    }
    match ctx.path.name {
        Some(_) => Ok(json_value(200, &items[0])),
        None => Ok(json_value(
            200,
            &json!({"kind": "ComponentStatusList", "apiVersion": "v1", "metadata": {}, "items": items}),
        )),
    }
}
