//! The `scale` subresource (autoscaling/v1 Scale) of deployments, replicasets, statefulsets,
//! replicationcontrollers, and custom resources that declare one.

use crate::codec::decode_body;
use crate::context::Ctx;
use crate::http::{json_value, HandlerResult};
use crate::status::ApiError;
use crate::values::At;
use crate::write::{self, Operation, Ownership, Write, WriteError};
use infrasim_store::ObjectKey;
use serde_json::{json, Value};
use std::borrow::Cow;

/// GET, PUT or PATCH of `…/scale`.
pub(crate) async fn handle(ctx: &Ctx, method: &http::Method, body: &[u8]) -> HandlerResult {
    let Some(paths) = ctx.info.scale.clone() else {
        return Err(ApiError::not_found(
            "the server could not find the requested resource",
        ));
    };
    let name = ctx.path.name.as_deref().unwrap_or("");
    let key = ObjectKey::new(ctx.namespace(), name);
    for _ in 0..16 {
        let current = ctx
            .state
            .group
            .get(&ctx.info.store_key, &key)
            .ok_or_else(|| ApiError::object_not_found(&ctx.info.group, &ctx.info.plural, name))?;
        let object = current
            .to_value()
            .map_err(|e| ApiError::internal(e.to_string()))?;
        let scale = paths.scale_of(&object);
        let (wanted, pinned) = match *method {
            http::Method::GET => return Ok(json_value(200, &scale)),
            http::Method::PUT => {
                let body = decode_body(ctx, body)?;
                let rv = body
                    .at("/metadata/resourceVersion")
                    .and_then(Value::as_str)
                    .filter(|s| !s.is_empty())
                    .and_then(|s| s.parse::<u64>().ok());
                (body, rv)
            }
            http::Method::PATCH => {
                let content_type = ctx
                    .headers
                    .get(http::header::CONTENT_TYPE)
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("");
                let mut patched = scale.clone();
                let patch: Value = serde_json::from_slice(body)
                    .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?;
                if content_type.starts_with("application/json-patch+json") {
                    let p: json_patch::Patch = serde_json::from_value(patch)
                        .map_err(|e| ApiError::bad_request(e.to_string()))?;
                    json_patch::patch(&mut patched, &p)
                        .map_err(|e| ApiError::new_unprocessable(e.to_string()))?;
                } else {
                    // Merge and strategic merge are the same on a Scale: it has no lists.
                    json_patch::merge(&mut patched, &patch);
                }
                (patched, None)
            }
            _ => {
                return Err(ApiError::method_not_allowed(
                    "the server does not allow this method on the requested resource",
                ))
            }
        };
        let replicas = wanted
            .at("/spec/replicas")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        if replicas < 0 {
            return Err(ApiError::invalid(
                "autoscaling",
                "Scale",
                name,
                vec![(
                    "spec.replicas".into(),
                    format!("Invalid value: {replicas}: must be greater than or equal to 0"),
                )],
            ));
        }
        let mut updated = object.clone();
        paths.set_spec_replicas(&mut updated, Some(json!(replicas)));
        let expected = pinned.or(Some(current.meta.resource_version));
        let write = Write {
            operation: Operation::Update {
                read: current.clone(),
                old: Cow::Owned(object),
                expected,
            },
            object: updated,
            ownership: Ownership::Record,
        };
        match write::persist(ctx, write).await {
            Ok(written) => {
                let value = written
                    .object
                    .to_value()
                    .map_err(|e| ApiError::internal(e.to_string()))?;
                return Ok(json_value(200, &paths.scale_of(&value)));
            }
            Err(WriteError::Stale(_)) if pinned.is_none() => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(ApiError::conflict(
        "too many concurrent writes to this object; try again",
    ))
}
