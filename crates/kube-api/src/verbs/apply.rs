//! Server-side apply (`PATCH` with `application/apply-patch+yaml`): the applied configuration
//! merged into the object (or creating it) with field ownership tracked per manager;
//! conflicts are 409 unless `force`. The merged object goes through the one write path.

use crate::context::Ctx;
use crate::http::HandlerResult;
use crate::object::name_of;
use crate::status::ApiError;
use crate::write::{self, input, Operation, Ownership, Write, WriteError};
use serde_json::{json, Value};
use std::borrow::Cow;

/// Whether a PATCH is an apply (by its content type).
pub(crate) fn requested(ctx: &Ctx) -> bool {
    let media = ctx
        .headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    matches!(
        media.split(';').next().unwrap_or("").trim(),
        "application/apply-patch+yaml" | "application/apply-patch+cbor"
    )
}

pub(crate) async fn apply(ctx: &Ctx, body: &[u8]) -> HandlerResult {
    input::dry_run(ctx)?;
    let manager = ctx
        .query
        .get("fieldManager")
        .filter(|m| !m.is_empty())
        .ok_or_else(|| {
            ApiError::invalid(
                "meta.k8s.io",
                "PatchOptions",
                "",
                vec![(
                    "fieldManager".into(),
                    "Required value: is required for apply patch".into(),
                )],
            )
        })?;
    let force = ctx.query.flag("force").map_err(ApiError::bad_request)?;
    let config = configuration(ctx, body)?;
    for _ in 0..16 {
        match apply_once(ctx, &config, manager, force).await {
            Err(WriteError::Stale(_)) => continue,
            // Another writer created the object between this apply's read and its create:
            // kube-apiserver's apply is an update that may create (a compare-and-swap loop in
            // its storage), so it merges into what the other made instead of failing.
            Err(WriteError::Refused(e)) if e.reason == "AlreadyExists" => continue,
            other => return other.map_err(ApiError::from),
        }
    }
    Err(ApiError::conflict(
        "too many concurrent writes to this object; try again",
    ))
}

/// The applied configuration: identity checked against the URL (the name taken from it if
/// missing, as kube-apiserver does), and only what the endpoint may set.
fn configuration(ctx: &Ctx, body: &[u8]) -> Result<Value, ApiError> {
    // Most appliers (kube-rs, client-go) send JSON, which YAML includes: parse it as JSON
    // first, which is several times cheaper, and as YAML otherwise.
    let mut config: Value = match serde_json::from_slice(body) {
        Ok(v) => v,
        Err(_) => serde_yaml::from_slice(body)
            .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))?,
    };
    if !config.is_object() {
        return Err(ApiError::bad_request(
            "the applied configuration must be an object",
        ));
    }
    input::check_identity(ctx, &mut config)?;
    let name = ctx.path.name.as_deref().unwrap_or("");
    if name_of(&config).is_empty() {
        config["metadata"]["name"] = json!(name);
    }
    if name_of(&config) != name {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({}) does not match the name on the URL ({name})",
            name_of(&config)
        )));
    }
    reset_fields(ctx, &mut config);
    Ok(config)
}

/// What an apply may set, as kube-apiserver's strategies reset the rest: through `status`
/// only the status (and the identity of the object); through the main resource everything
/// but the status, for kinds that have a status subresource.
fn reset_fields(ctx: &Ctx, config: &mut Value) {
    let Some(obj) = config.as_object_mut() else {
        return;
    };
    match ctx.path.subresource.as_deref() {
        // A CSR's approval is in its status too (its conditions).
        Some("status" | "approval") => {
            obj.retain(|k, _| matches!(k.as_str(), "apiVersion" | "kind" | "metadata" | "status"));
            if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
                meta.retain(|k, _| matches!(k.as_str(), "name" | "namespace" | "resourceVersion"));
            }
        }
        None if ctx.info.has_status => {
            obj.remove("status");
        }
        _ => {}
    }
}

/// Merges into the object as it is now and writes, once.
async fn apply_once(
    ctx: &Ctx,
    config: &Value,
    manager: &str,
    force: bool,
) -> Result<http::Response<crate::http::Body>, WriteError> {
    let name = ctx.path.name.as_deref().unwrap_or("");
    let subresource = ctx.path.subresource.clone().unwrap_or_default();
    let current = ctx.state.group.get(&ctx.info.store_key, &ctx.key());
    let old = match &current {
        Some(c) => Some(
            c.to_value()
                .map_err(|e| ApiError::internal(e.to_string()))?,
        ),
        None if !subresource.is_empty() => {
            return Err(ApiError::object_not_found(&ctx.info.group, &ctx.info.plural, name).into())
        }
        None => None,
    };
    let now = infrasim_store::format_time(ctx.state.clock.now());
    let applier = crate::apply::Applier {
        manager,
        subresource: &subresource,
        force,
        now: &now,
        lists: ctx.info.lists(),
    };
    // Merged in the version the client speaks (a conversion webhook may shape it otherwise
    // than the stored version).
    let converted = match &old {
        Some(o) if crate::conversion::converts(&ctx.info) => {
            Some(crate::conversion::to_request_version(ctx, o.clone()).await?)
        }
        _ => None,
    };
    let base = converted.as_ref().or(old.as_ref());
    let merged = match crate::apply::apply(base, config, &applier).map_err(|e| {
        ApiError::bad_request(format!(
            "the applied configuration could not be merged: {e}"
        ))
    })? {
        crate::apply::Applied::Merged(v) => v,
        crate::apply::Applied::Unchanged => {
            // Nothing to change: answer with the object as it is.
            let current = current.ok_or_else(|| {
                ApiError::internal("an apply found nothing to change in no object")
            })?;
            let current = crate::conversion::served_one(ctx, current).await?;
            return Ok(ctx.render(&current, 200)?);
        }
        crate::apply::Applied::Conflicts(conflicts) => {
            return Err(conflict_error(ctx, name, &conflicts).into())
        }
    };
    let mut warnings = Vec::new();
    let object = input::normalize(ctx, merged, &mut warnings)?;
    let operation = match (current, old) {
        (Some(current), Some(old)) => Operation::Update {
            expected: Some(current.meta.resource_version),
            read: current,
            old: Cow::Owned(old),
        },
        _ => Operation::Create,
    };
    let written = write::persist(
        ctx,
        Write {
            operation,
            object,
            ownership: Ownership::Computed,
        },
    )
    .await?;
    Ok(write::respond(ctx, written, warnings).await?)
}

/// The 409 of an apply whose fields other managers own.
fn conflict_error(ctx: &Ctx, name: &str, conflicts: &[(String, String)]) -> ApiError {
    let n = conflicts.len();
    let lines: Vec<String> = conflicts
        .iter()
        .map(|(m, f)| format!("conflict with \"{m}\": {f}"))
        .collect();
    let causes: Vec<Value> = conflicts
        .iter()
        .map(|(m, f)| json!({"reason": "FieldManagerConflict", "message": format!("conflict with \"{m}\""), "field": f}))
        .collect();
    ApiError::conflict(format!(
        "Apply failed with {n} conflict{}: {}",
        if n == 1 { "" } else { "s" },
        lines.join(", ")
    ))
    .with_details(
        json!({"name": name, "group": ctx.info.group, "kind": ctx.info.plural, "causes": causes}),
    )
}
