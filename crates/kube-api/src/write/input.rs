//! What the write verbs read from a request before the pipeline: the dry-run flag, the field
//! manager, the expected resourceVersion, the object's identity against the URL, and the
//! decoding into the kind's type under `fieldValidation`; and the `Warning` headers after.

use crate::context::Ctx;
use crate::http::HandlerResult;
use crate::resources::NormalizeError;
use crate::status::ApiError;
use crate::values::At;
use serde_json::{json, Value};

/// Whether the request is a dry run (`dryRun=All`): checked and computed in full, not applied.
pub(crate) fn dry_run(ctx: &Ctx) -> Result<bool, ApiError> {
    match ctx.query.get("dryRun") {
        None | Some("") => Ok(false),
        Some("All") => Ok(true),
        Some(other) => Err(ApiError::bad_request(format!(
            "dryRun: Unsupported value: {other:?}: supported values: \"All\""
        ))),
    }
}

/// The field manager of a write: `fieldManager`, else the client's name from its User-Agent
/// (`kubectl/v1.32.0 (linux/amd64)` → `kubectl`), as kube-apiserver derives it.
pub(crate) fn field_manager(ctx: &Ctx) -> String {
    if let Some(m) = ctx.query.get("fieldManager").filter(|m| !m.is_empty()) {
        return m.to_string();
    }
    ctx.headers
        .get(http::header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .and_then(|ua| ua.split('/').next())
        .filter(|s| !s.is_empty())
        .unwrap_or("unknown")
        .to_string()
}

/// The resourceVersion an object pins (a precondition), if any.
pub(crate) fn expected_version(value: &Value) -> Result<Option<u64>, ApiError> {
    match value
        .at("/metadata/resourceVersion")
        .and_then(Value::as_str)
    {
        None | Some("") => Ok(None),
        Some(rv) => rv
            .parse::<u64>()
            .map(Some)
            .map_err(|_| ApiError::bad_request(format!("invalid resource version {rv:?}"))),
    }
}

/// Fills or checks `apiVersion`, `kind`, and `metadata.namespace` against the URL.
pub(crate) fn check_identity(ctx: &Ctx, value: &mut Value) -> Result<(), ApiError> {
    let info = &ctx.info;
    let obj = value
        .as_object_mut()
        .ok_or_else(|| ApiError::bad_request("the request body must be a JSON object"))?;
    for (field, want, what) in [
        ("apiVersion", &info.api_version, "API version"),
        ("kind", &info.kind, "kind"),
    ] {
        match obj.get(field).and_then(Value::as_str) {
            None | Some("") => {
                obj.insert(field.into(), json!(want));
            }
            Some(v) if v == want => {}
            Some(v) => {
                return Err(ApiError::bad_request(format!(
                    "the {what} in the data ({v}) does not match the expected {what} ({want})"
                )))
            }
        }
    }
    let meta = obj
        .entry("metadata")
        .or_insert_with(|| json!({}))
        .as_object_mut()
        .ok_or_else(|| ApiError::bad_request("metadata must be an object"))?;
    if info.namespaced {
        let url_ns = ctx.namespace();
        match meta.get("namespace").and_then(Value::as_str) {
            None | Some("") => {
                meta.insert("namespace".into(), json!(url_ns));
            }
            Some(ns) if ns == url_ns => {}
            Some(_) => {
                return Err(ApiError::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ))
            }
        }
    } else {
        meta.remove("namespace");
    }
    Ok(())
}

/// Decodes into the kind's type (dropping unknown fields) and applies `fieldValidation`:
/// `Strict` refuses unknown fields, `Warn` (the default) reports them in `Warning` headers,
/// `Ignore` drops them silently.
pub(crate) fn normalize(
    ctx: &Ctx,
    value: Value,
    warnings: &mut Vec<String>,
) -> Result<Value, ApiError> {
    let directive = ctx.query.get("fieldValidation").unwrap_or("Warn");
    if !matches!(directive, "Ignore" | "Warn" | "Strict" | "") {
        return Err(ApiError::bad_request(format!(
            "fieldValidation: Unsupported value: {directive:?}: supported values: \"Ignore\", \"Warn\", \"Strict\""
        )));
    }
    let (normalized, unknown) = decode(ctx, value, directive != "Ignore")?;
    if directive != "Ignore" {
        let unknown: Vec<String> = unknown
            .into_iter()
            .map(|f| format!("unknown field \"{f}\""))
            .collect();
        if directive == "Strict" && !unknown.is_empty() {
            return Err(ApiError::bad_request(format!(
                "strict decoding error: {}",
                unknown.join(", ")
            )));
        }
        warnings.extend(unknown);
    }
    Ok(normalized)
}

/// Decodes into the kind's type, dropping unknown fields; lists their paths when
/// `report_unknown` (a second walk over the object, for those who read the list).
pub(crate) fn decode(
    ctx: &Ctx,
    value: Value,
    report_unknown: bool,
) -> Result<(Value, Vec<String>), ApiError> {
    // Kept for an invalid object's 422, which names it.
    let name = value
        .at("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    ctx.info
        .prepare_reporting(value, report_unknown)
        .map_err(|e| decode_error(ctx, &name, e))
}

/// The error of a body its kind's type cannot hold: a 400 when it does not decode, a 422
/// naming the causes when its schema refuses it.
fn decode_error(ctx: &Ctx, name: &str, e: NormalizeError) -> ApiError {
    match e {
        NormalizeError::Decode(e) => ApiError::bad_request(format!(
            "error decoding {} {}: {e}",
            &ctx.info.kind,
            ctx.path.name.as_deref().unwrap_or("")
        )),
        NormalizeError::Invalid(causes) => {
            ApiError::invalid(&ctx.info.group, &ctx.info.kind, name, causes)
        }
    }
}

/// Adds `Warning` headers (RFC 7234 code 299, as kube-apiserver sends them).
pub(crate) fn with_warnings(result: HandlerResult, warnings: &[String]) -> HandlerResult {
    let mut resp = result?;
    for w in warnings {
        let escaped = w.replace('\\', "\\\\").replace('"', "\\\"");
        if let Ok(v) = http::HeaderValue::from_str(&format!("299 - \"{escaped}\"")) {
            resp.headers_mut().append(http::header::WARNING, v);
        }
    }
    Ok(resp)
}
