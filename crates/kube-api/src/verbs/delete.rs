//! DELETE of one object (finalizers and propagation honoured, the deleted object or a
//! Status in answer, as kube-apiserver's registry answers for the kind) and of a collection,
//! each object through the delete path ([`crate::write::delete`]).

use crate::context::Ctx;
use crate::http::{json_bytes, status_response, HandlerResult};
use crate::selectors;
use crate::status::ApiError;
use crate::values::At;
use crate::write::delete::{self as delete_path, Deletion};
use crate::write::input;
use infrasim_store::{DeleteOptions, DeleteOutcome, Propagation, ReadAt};
use serde_json::{json, Value};

/// Reads `DeleteOptions` from the body and query.
fn delete_options(ctx: &Ctx, body: &[u8]) -> Result<DeleteOptions, ApiError> {
    let opts: Value = if body.iter().all(u8::is_ascii_whitespace) {
        json!({})
    } else {
        serde_json::from_slice(body)
            .map_err(|e| ApiError::bad_request(format!("error decoding DeleteOptions: {e}")))?
    };
    input::dry_run(ctx)?;
    options_from(ctx, &opts)
}

/// `DeleteOptions` as decoded (a DELETE's body, an Eviction's `deleteOptions`), with the
/// query's `propagationPolicy` and `orphanDependents` where the object has none.
pub(crate) fn options_from(ctx: &Ctx, opts: &Value) -> Result<DeleteOptions, ApiError> {
    let from_body = |k: &str| opts.get(k).and_then(Value::as_str).map(str::to_string);
    let policy = from_body("propagationPolicy")
        .or_else(|| ctx.query.get("propagationPolicy").map(str::to_string));
    let orphan = opts
        .get("orphanDependents")
        .and_then(Value::as_bool)
        .or_else(|| ctx.query.flag("orphanDependents").ok().filter(|b| *b));
    let propagation = match (policy.as_deref(), orphan) {
        (Some(_), Some(_)) => {
            return Err(ApiError::invalid(
                "meta.k8s.io",
                "DeleteOptions",
                "",
                vec![("propagationPolicy".into(), "Invalid value: \"null\": orphanDependents and deletionPropagation cannot be both set".into())],
            ))
        }
        (Some("Background"), _) => Propagation::Background,
        (Some("Foreground"), _) => Propagation::Foreground,
        (Some("Orphan"), _) | (None, Some(true)) => Propagation::Orphan,
        (None, _) => Propagation::Background,
        (Some(other), _) => {
            return Err(ApiError::invalid(
                "meta.k8s.io",
                "DeleteOptions",
                "",
                vec![(
                    "propagationPolicy".into(),
                    format!("Unsupported value: \"{other}\": supported values: \"Foreground\", \"Background\", \"Orphan\", \"nil\""),
                )],
            ))
        }
    };
    let precondition_resource_version = match opts
        .at("/preconditions/resourceVersion")
        .and_then(Value::as_str)
    {
        Some(rv) => Some(
            rv.parse::<u64>()
                .map_err(|_| ApiError::bad_request(format!("invalid resource version {rv:?}")))?,
        ),
        None => None,
    };
    Ok(DeleteOptions {
        propagation,
        precondition_uid: opts
            .at("/preconditions/uid")
            .and_then(Value::as_str)
            .map(str::to_string),
        precondition_resource_version,
    })
}

/// A delete is a dry run when the query or the DeleteOptions body says `All`.
fn delete_is_dry(ctx: &Ctx, body: &[u8]) -> Result<bool, ApiError> {
    let from_body = serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|v| v.get("dryRun").and_then(Value::as_array).cloned())
        .is_some_and(|a| a.iter().any(|x| x.as_str() == Some("All")));
    Ok(from_body || input::dry_run(ctx)?)
}

pub(crate) async fn delete(ctx: &Ctx, body: &[u8]) -> HandlerResult {
    let options = delete_options(ctx, body)?;
    let name = ctx.path.name.as_deref().unwrap_or("");
    let dry = delete_is_dry(ctx, body)?;
    let deletion = Deletion {
        key: ctx.key(),
        options,
        dry,
        admit: true,
    };
    let removed = delete_path::remove(ctx, deletion).await?;
    input::with_warnings(answer(ctx, name, removed.outcome).await, &removed.warnings)
}

/// The answer to a delete, dry or not, as kube-apiserver's registry gives it: the object
/// while finalizers hold it (a namespace as marked Terminating); once gone, the deleted object for the kinds whose storage
/// returns it ([`crate::resources::ResourceInfo::returns_deleted`]), else a Success Status.
async fn answer(ctx: &Ctx, name: &str, outcome: DeleteOutcome) -> HandlerResult {
    match outcome {
        DeleteOutcome::Pending(object) => {
            let object = crate::conversion::served_one(ctx, object).await?;
            ctx.render(&object, 200)
        }
        DeleteOutcome::Deleted(object) => {
            let object = crate::conversion::served_one(ctx, object).await?;
            if ctx.info.returns_deleted {
                return ctx.render(&object, 200);
            }
            Ok(status_response(
                200,
                &json!({
                    "kind": "Status",
                    "apiVersion": "v1",
                    "metadata": {},
                    "status": "Success",
                    "details": {"name": name, "group": &ctx.info.group, "kind": &ctx.info.plural, "uid": &*object.meta.uid},
                }),
            ))
        }
    }
}

pub(crate) async fn delete_collection(ctx: &Ctx, body: &[u8]) -> HandlerResult {
    let options = delete_options(ctx, body)?;
    let dry = delete_is_dry(ctx, body)?;
    let labels = selectors::LabelSelector::parse(ctx.query.get("labelSelector").unwrap_or(""))
        .map_err(ApiError::bad_request)?;
    let fields = selectors::FieldSelector::parse_for(
        ctx.query.get("fieldSelector").unwrap_or(""),
        &ctx.info.kind,
        ctx.info.stored_as.map(|s| s.field_label),
    )
    .map_err(ApiError::bad_request)?;
    let snapshot = ctx
        .state
        .group
        .snapshot(&ctx.info.store_key, ReadAt::Latest)
        .map_err(|e| ctx.store_error(e))?;
    let ns = ctx.namespace();
    let mut deleted = Vec::new();
    let mut warnings = Vec::new();
    for (key, object) in snapshot.objects.iter() {
        if ctx.info.namespaced && !ns.is_empty() && &*key.namespace != ns {
            continue;
        }
        if !labels.matches(&object.meta.labels) || !fields.matches(object) {
            continue;
        }
        // What one DELETE would be refused (a system namespace) the collection passes over.
        if !delete_path::deletable(ctx, &key.name) {
            continue;
        }
        // Each object is admitted as its own delete, as kube-apiserver's DeleteCollection
        // deletes them one by one.
        let deletion = Deletion {
            key: key.clone(),
            options: options.clone(),
            dry,
            admit: true,
        };
        match delete_path::remove(&ctx.naming(&key.name), deletion).await {
            Ok(removed) => warnings.extend(removed.warnings),
            // Gone already: kube-apiserver lists it all the same.
            Err(e) if e.code == 404 => {}
            Err(e) => return Err(e),
        }
        // The answer is the list the deletions worked through, as it was read before them
        // (kube-apiserver's DeleteCollection answers with that list, for every kind).
        deleted.push(object.clone());
    }
    let mut out = Vec::with_capacity(deleted.iter().map(|o| o.len() + 1).sum::<usize>() + 128);
    out.extend_from_slice(
        format!(
            "{{\"kind\":\"{}\",\"apiVersion\":\"{}\",\"metadata\":{{\"resourceVersion\":\"{}\"}},\"items\":[",
            &ctx.info.list_kind,
            &ctx.info.api_version,
            snapshot.resource_version
        )
        .as_bytes(),
    );
    for (i, o) in deleted.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(&ctx.info.served_bytes(&o.bytes()));
    }
    out.extend_from_slice(b"]}");
    input::with_warnings(Ok(json_bytes(200, out)), &warnings)
}
