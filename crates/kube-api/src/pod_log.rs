//! `pods/{name}/log`: simulated pods have no process, so their log is a short, honest note of
//! what they are, in the container's name.

use crate::context::Ctx;
use crate::http::{json_typed, HandlerResult};
use crate::status::ApiError;
use crate::values::At;
use infrasim_store::ObjectKey;
use serde_json::Value;

pub(crate) fn log(ctx: &Ctx) -> HandlerResult {
    let name = ctx.path.name.as_deref().unwrap_or("");
    let pod = ctx
        .state
        .group
        .get("pods", &ObjectKey::new(ctx.namespace(), name))
        .ok_or_else(|| ApiError::object_not_found("", "pods", name))?
        .to_value()
        .map_err(|e| ApiError::internal(e.to_string()))?;
    let containers: Vec<String> = pod
        .at("/spec/containers")
        .and_then(Value::as_array)
        .map(|cs| {
            cs.iter()
                .filter_map(|c| c.get("name").and_then(Value::as_str).map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    let container = match ctx.query.get("container").filter(|c| !c.is_empty()) {
        Some(c) if containers.iter().any(|x| x == c) => c.to_string(),
        Some(c) => {
            return Err(ApiError::bad_request(format!(
                "container {c} is not valid for pod {name}"
            )))
        }
        None if containers.len() == 1 => containers[0].clone(),
        None => {
            return Err(ApiError::bad_request(format!(
                "a container name must be specified for pod {name}, choose one of: [{}]",
                containers.join(" ")
            )))
        }
    };
    let node = pod
        .at("/spec/nodeName")
        .and_then(Value::as_str)
        .unwrap_or("<unscheduled>");
    let phase = pod
        .at("/status/phase")
        .and_then(Value::as_str)
        .unwrap_or("Pending");
    let started = pod
        .at("/status/startTime")
        .and_then(Value::as_str)
        .unwrap_or("");
    let body = format!(
        "{started} infrasim: container {container} of pod {}/{name} is simulated (node {node}, phase {phase}); no process runs, so there is no output\n",
        ctx.namespace()
    );
    Ok(json_typed(200, body, "text/plain"))
}
