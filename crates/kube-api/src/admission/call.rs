//! Calling one admission webhook: the `AdmissionReview` request (sent through
//! [`crate::webhook`]) and the answer: allowed or denied, a JSON patch, warnings.

use super::{Subject, Webhook};
use crate::context::Ctx;
use crate::status::ApiError;
use crate::values::At;
use base64::Engine;
use serde_json::{json, Value};
use std::time::Duration;

/// Calls `hook` about `subject`: its `response`, or `None` when the webhook failed and its
/// failure policy says to ignore that.
pub(super) async fn review(
    ctx: &Ctx,
    hook: &Webhook,
    subject: &Subject<'_>,
) -> Result<Option<Value>, ApiError> {
    let side_effects = hook.spec["sideEffects"].as_str().unwrap_or("Unknown");
    if subject.dry_run && !matches!(side_effects, "None" | "NoneOnDryRun") {
        return Err(ApiError::bad_request(format!(
            "admission webhook \"{}\" does not support dry run",
            hook.name
        )));
    }
    let uid = uuid::Uuid::new_v4().to_string();
    let body = request(ctx, hook, subject, &uid);
    let timeout = hook.spec["timeoutSeconds"]
        .as_u64()
        .unwrap_or(10)
        .clamp(1, 30);
    let outcome = crate::webhook::call(
        &ctx.state.webhooks(),
        &hook.spec["clientConfig"],
        &body,
        Duration::from_secs(timeout),
    )
    .await;
    let response = outcome.and_then(|answer| {
        let response = answer.get("response").cloned().unwrap_or(Value::Null);
        match response["uid"].as_str() {
            Some(u) if u == uid => Ok(response),
            other => Err(format!("expected response.uid={uid:?}, got {other:?}")),
        }
    });
    match response {
        Ok(r) => Ok(Some(r)),
        Err(_) if hook.spec["failurePolicy"].as_str() == Some("Ignore") => Ok(None),
        Err(e) => Err(ApiError::internal(format!(
            "Internal error occurred: failed calling webhook \"{}\": {e}",
            hook.name
        ))),
    }
}

/// The `AdmissionReview` kube-apiserver sends, objects in the version the client spoke, or
/// in the webhook's when it matched an equivalent one (then `requestKind` and
/// `requestResource` still name the request's).
fn request(ctx: &Ctx, hook: &Webhook, subject: &Subject<'_>, uid: &str) -> Value {
    let info = &ctx.info;
    let shown = hook.target.as_deref().unwrap_or(info);
    let as_requested = |o: Option<&Value>| super::seen_as(ctx, shown, o);
    let resource_of = |i: &crate::resources::ResourceInfo| json!({"group": i.group, "version": i.version, "resource": i.plural});
    let mut request = json!({
        "uid": uid,
        "kind": super::admitted_kind_as(ctx, shown), "resource": resource_of(shown),
        "requestKind": super::admitted_kind(ctx), "requestResource": resource_of(info),
        "name": ctx.path.name.clone().or_else(|| subject.object.and_then(|o| {
            o.at("/metadata/name").and_then(Value::as_str).map(str::to_string)
        })).unwrap_or_default(),
        "operation": subject.operation.name(),
        "userInfo": super::user_info(ctx),
        "object": as_requested(subject.object),
        "oldObject": as_requested(subject.old),
        "dryRun": subject.dry_run,
        "options": {"apiVersion": "meta.k8s.io/v1", "kind": subject.operation.options_kind()},
    });
    if info.namespaced {
        request["namespace"] = json!(ctx.namespace());
    }
    if let Some(sub) = &ctx.path.subresource {
        request["subResource"] = json!(sub);
        request["requestSubResource"] = json!(sub);
    }
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request})
}

/// The request's refusal, if the webhook denied it: its status code (400 if none) and
/// message, as kube-apiserver words it.
pub(super) fn denied(hook: &Webhook, response: &Value) -> Result<(), ApiError> {
    if response["allowed"].as_bool() == Some(true) {
        return Ok(());
    }
    let status = &response["status"];
    let message = status["message"].as_str().unwrap_or("");
    let words = if message.is_empty() {
        format!(
            "admission webhook \"{}\" denied the request without explanation",
            hook.name
        )
    } else {
        format!(
            "admission webhook \"{}\" denied the request: {message}",
            hook.name
        )
    };
    let code = status["code"]
        .as_u64()
        .filter(|c| (400..600).contains(c))
        .unwrap_or(400);
    let error = ApiError::from_webhook(code as u16, status["reason"].as_str(), words);
    // kube-apiserver passes the webhook's Status on whole but for its message: clients read
    // the causes (the fields) of a 422 from its details.
    Err(match status.get("details").filter(|d| d.is_object()) {
        Some(details) => error.with_details(details.clone()),
        None => error,
    })
}

/// The JSON patch of a mutating webhook's answer, if any.
pub(super) fn patch(
    hook: &Webhook,
    response: &Value,
) -> Result<Option<json_patch::Patch>, ApiError> {
    let Some(encoded) = response["patch"].as_str() else {
        return Ok(None);
    };
    let bad = |e: &dyn std::fmt::Display| {
        ApiError::internal(format!(
            "Internal error occurred: admission webhook \"{}\" returned an invalid patch: {e}",
            hook.name
        ))
    };
    if response["patchType"].as_str().unwrap_or("JSONPatch") != "JSONPatch" {
        return Err(bad(&"only JSONPatch is supported"));
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .map_err(|e| bad(&e))?;
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|e| bad(&e))
}

/// The warnings a webhook attached to its answer.
pub(super) fn warnings(response: &Value) -> Vec<String> {
    response["warnings"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|w| w.as_str().map(str::to_string))
        .collect()
}
