//! PATCH: JSON merge, JSON (RFC 6902) and strategic merge patches, applied to the object as
//! it is and written through the one write path; server-side apply has its own verb.

use crate::context::Ctx;
use crate::http::HandlerResult;
use crate::object::name_of;
use crate::status::ApiError;
use crate::values::At;
use crate::write::{self, input, Operation, Ownership, Write, WriteError};
use serde_json::{json, Value};
use std::borrow::Cow;

/// The patch formats served beside apply.
enum PatchBody {
    /// RFC 7386 JSON merge patch.
    Merge(Value),
    /// RFC 6902 JSON patch.
    Json(json_patch::Patch),
    /// Kubernetes strategic merge patch (built-in kinds).
    Strategic(Value),
}

pub(crate) async fn patch(ctx: &Ctx, body: &[u8]) -> HandlerResult {
    input::dry_run(ctx)?;
    let content_type = ctx
        .headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let media = content_type.split(';').next().unwrap_or("").trim();
    let decode = |what: &str| {
        let what = what.to_string();
        move |e: serde_json::Error| ApiError::bad_request(format!("error decoding {what}: {e}"))
    };
    let patch = match media {
        "application/merge-patch+json" => {
            PatchBody::Merge(serde_json::from_slice(body).map_err(decode("patch"))?)
        }
        "application/strategic-merge-patch+json" if !ctx.info.custom => {
            PatchBody::Strategic(serde_json::from_slice(body).map_err(decode("patch"))?)
        }
        "application/json-patch+json" => {
            PatchBody::Json(serde_json::from_slice(body).map_err(decode("JSON patch"))?)
        }
        other => {
            return Err(ApiError::unsupported_media_type(other).with_details(json!({
                "causes": [{"reason": "UnsupportedPatchType",
                            "message": "this server supports JSON merge patch, JSON patch, server-side apply and (for built-in kinds, as kube-apiserver) strategic merge patch"}]
            })))
        }
    };
    // Retry on conflict when the patch itself does not pin a resourceVersion, as
    // kube-apiserver does: a patch applies to whatever version is current.
    let pinned = match &patch {
        PatchBody::Merge(p) | PatchBody::Strategic(p) => input::expected_version(p)?,
        PatchBody::Json(_) => None,
    };
    for _ in 0..16 {
        match patch_once(ctx, &patch, pinned).await {
            Err(WriteError::Stale(_)) if pinned.is_none() => continue,
            other => return other.map_err(ApiError::from),
        }
    }
    Err(ApiError::conflict(
        "too many concurrent writes to this object; try again",
    ))
}

/// Patches the object as it is now, once.
async fn patch_once(
    ctx: &Ctx,
    patch: &PatchBody,
    pinned: Option<u64>,
) -> Result<http::Response<crate::http::Body>, WriteError> {
    let name = ctx.path.name.as_deref().unwrap_or("");
    let (current, old) = ctx.stored()?;
    // Patch in the version the client speaks; stored in the storage version after.
    let mut patched = if ctx.info.custom || ctx.info.stored_as.is_some() {
        crate::conversion::to_request_version(ctx, old.clone()).await?
    } else {
        old.clone()
    };
    match patch {
        PatchBody::Merge(p) => json_patch::merge(&mut patched, p),
        PatchBody::Strategic(p) => crate::strategic::apply(&mut patched, p).map_err(|e| {
            ApiError::bad_request(format!(
                "the strategic merge patch could not be applied: {e}"
            ))
        })?,
        PatchBody::Json(p) => apply_json_patch(&mut patched, p).map_err(|e| {
            ApiError::new_unprocessable(format!("the JSON patch could not be applied: {e}"))
        })?,
    }
    input::check_identity(ctx, &mut patched)?;
    if name_of(&patched) != name {
        return Err(
            ApiError::bad_request("the name of the object may not be changed by a patch").into(),
        );
    }
    let mut warnings = Vec::new();
    let object = input::normalize(ctx, patched, &mut warnings)?;
    let expected = pinned.or(Some(current.meta.resource_version));
    let written = write::persist(
        ctx,
        Write {
            operation: Operation::Update {
                read: current,
                old: Cow::Owned(old),
                expected,
            },
            object,
            ownership: Ownership::Record,
        },
    )
    .await?;
    Ok(write::respond(ctx, written, warnings).await?)
}

/// Applies an RFC 6902 patch as kube-apiserver's JSON patch library does: a `test` of `null`
/// passes where the path does not exist (kube-rs's finalizer helper tests that
/// `/metadata/finalizers` is absent that way before adding the first one). Operations apply
/// one by one; the caller discards the document if one fails.
fn apply_json_patch(
    doc: &mut Value,
    patch: &json_patch::Patch,
) -> Result<(), json_patch::PatchError> {
    for op in &patch.0 {
        if let json_patch::PatchOperation::Test(t) = op {
            if t.value.is_null() && doc.at(t.path.as_str()).is_none() {
                continue;
            }
        }
        json_patch::patch(doc, std::slice::from_ref(op))?;
    }
    Ok(())
}
