//! A Pod's write through `binding`, the scheduler's: the pod gets its node (and the
//! binding's annotations) and a `PodScheduled` condition, and nothing else changes. A pod
//! is bound once: a bound pod, or one being deleted, answers 409, as kube-apiserver's
//! binding storage does. A pod's spec is otherwise immutable, so this is the only way a
//! pod reaches a node.

use super::KindStrategy;
use crate::context::Ctx;
use crate::status::ApiError;
use crate::values::At;
use serde_json::{json, Value};

pub(super) struct Pod;

impl KindStrategy for Pod {
    fn split_for_update(
        &self,
        ctx: &Ctx,
        subresource: Option<&str>,
        old: &Value,
        new: Value,
    ) -> Value {
        match subresource {
            Some("binding") => bound(old, &new),
            _ => super::super::common::split_for_update(ctx, subresource, old, new),
        }
    }

    fn validate_update(
        &self,
        ctx: &Ctx,
        subresource: Option<&str>,
        old: &Value,
        _new: &Value,
    ) -> Option<Result<(), ApiError>> {
        (subresource == Some("binding")).then(|| may_bind(ctx, old))
    }
}

/// `old` with the node, annotations and PodScheduled condition `binding` (the bound pod the
/// binding verb made) carries.
fn bound(old: &Value, binding: &Value) -> Value {
    let mut pod = old.clone();
    pod["spec"]["nodeName"] = binding.at("/spec/nodeName").cloned().unwrap_or(Value::Null);
    if let Some(annotations) = binding
        .at("/metadata/annotations")
        .and_then(Value::as_object)
    {
        for (k, v) in annotations {
            pod["metadata"]["annotations"][k] = v.clone();
        }
    }
    if let Some(conditions) = binding.at("/status/conditions") {
        pod["status"]["conditions"] = conditions.clone();
    }
    pod
}

/// A 409 for a pod that has a node or is going.
fn may_bind(ctx: &Ctx, old: &Value) -> Result<(), ApiError> {
    let name = ctx.path.name.as_deref().unwrap_or("");
    if let Some(node) = old.at("/spec/nodeName").and_then(Value::as_str) {
        if !node.is_empty() {
            return Err(ApiError::conflict(format!(
                "Operation cannot be fulfilled on pods/binding \"{name}\": pod {name} is already assigned to node \"{node}\""
            )));
        }
    }
    if old.at("/metadata/deletionTimestamp").is_some() {
        return Err(ApiError::conflict(format!(
            "Operation cannot be fulfilled on pods/binding \"{name}\": pod {name} is being deleted, cannot be assigned to a host"
        )));
    }
    Ok(())
}

/// The bound pod a binding makes of `pod`: `node` in its spec, the binding's `annotations`,
/// and `PodScheduled` True (its transition time kept if it was True already).
pub(crate) fn bind(pod: &Value, node: &str, annotations: Option<&Value>, now: &str) -> Value {
    let mut next = pod.clone();
    next["spec"]["nodeName"] = json!(node);
    if let Some(Value::Object(annotations)) = annotations {
        for (k, v) in annotations {
            next["metadata"]["annotations"][k] = v.clone();
        }
    }
    let mut conditions: Vec<Value> = pod
        .at("/status/conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let was_true = conditions
        .iter()
        .any(|c| c["type"] == "PodScheduled" && c["status"] == "True");
    if !was_true {
        conditions.retain(|c| c["type"] != "PodScheduled");
        conditions
            .push(json!({"type": "PodScheduled", "status": "True", "lastTransitionTime": now}));
    }
    next["status"]["conditions"] = json!(conditions);
    next
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binding_sets_the_node_and_the_condition_and_nothing_else() {
        let pod = json!({"metadata": {"name": "p", "labels": {"a": "b"}},
                         "spec": {"containers": [{"name": "c", "image": "i"}]},
                         "status": {"phase": "Pending", "conditions": [
                             {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}});
        let wanted = bind(&pod, "n1", Some(&json!({"x": "y"})), "t1");
        let mut tampered = wanted.clone();
        tampered["metadata"]["labels"]["a"] = json!("changed");
        tampered["spec"]["containers"][0]["image"] = json!("other");
        let stored = bound(&pod, &tampered);
        assert_eq!(stored["spec"]["nodeName"], "n1");
        assert_eq!(stored["metadata"]["annotations"]["x"], "y");
        assert_eq!(stored["metadata"]["labels"]["a"], "b");
        assert_eq!(stored["spec"]["containers"][0]["image"], "i");
        let conditions = stored["status"]["conditions"].as_array().unwrap();
        assert_eq!(conditions.len(), 1);
        assert_eq!(conditions[0]["status"], "True");
        assert_eq!(conditions[0]["lastTransitionTime"], "t1");
    }
}
