//! DELETE of one object (finalizers and propagation honoured, the deleted object or a
//! Status in answer, as kube-apiserver's registry answers for the kind) and of a collection.

use crate::context::Ctx;
use crate::http::{json_bytes, status_response, HandlerResult};
use crate::status::ApiError;
use crate::values::At;
use crate::write::input;
use crate::{admission, namespaces, selectors};
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
    let from_body = |k: &str| opts.get(k).and_then(Value::as_str).map(str::to_string);
    input::dry_run(ctx)?;
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

/// The validating webhooks' say on deleting the object the path names (if it exists: a
/// missing one is the store's 404 to report); their warnings.
async fn admit_delete(ctx: &Ctx, dry_run: bool) -> Result<Vec<String>, ApiError> {
    let mut warnings = Vec::new();
    if !admission::has_validators(ctx) {
        return Ok(warnings);
    }
    let current = ctx
        .state
        .group
        .get(&ctx.info.store_key, &ctx.key())
        .and_then(|o| o.to_value().ok());
    if let Some(old) = current {
        let subject = admission::Subject {
            operation: admission::Operation::Delete,
            object: None,
            old: Some(&old),
            dry_run,
        };
        admission::validate(ctx, &subject, &mut warnings).await?;
    }
    Ok(warnings)
}

pub(crate) async fn delete(ctx: &Ctx, body: &[u8]) -> HandlerResult {
    let options = delete_options(ctx, body)?;
    let name = ctx.path.name.as_deref().unwrap_or("");
    // NamespaceLifecycle refuses a system namespace's deletion at admission, so a dry run
    // is refused too.
    if ctx.info.kind == "Namespace" && !ctx.info.custom {
        namespaces::check_deletable(name)?;
    }
    let dry = delete_is_dry(ctx, body)?;
    let warnings = admit_delete(ctx, dry).await?;
    let group = &ctx.state.group;
    let outcome = if dry {
        group.delete_dry_run(&ctx.info.store_key, &ctx.key(), &options)
    } else {
        group.delete(&ctx.info.store_key, &ctx.key(), &options)
    }
    .map_err(|e| ctx.store_error(e))?;
    input::with_warnings(answer(ctx, name, outcome, dry).await, &warnings)
}

/// The answer to a delete, dry or not, as kube-apiserver's registry gives it: the object
/// while finalizers hold it; once gone, the deleted object for the kinds whose storage
/// returns it ([`crate::resources::ResourceInfo::returns_deleted`]), else a Success Status.
async fn answer(ctx: &Ctx, name: &str, outcome: DeleteOutcome, dry: bool) -> HandlerResult {
    match outcome {
        DeleteOutcome::Pending(object) => {
            let object = crate::conversion::served_one(ctx, object).await?;
            // What follows a deletion's start is not for a dry run: nothing was marked.
            if !dry && !ctx.info.custom {
                if ctx.info.kind == "CustomResourceDefinition" {
                    crate::crd::spawn_cleanup(ctx.state.clone(), name.to_string());
                }
                if ctx.info.kind == "Namespace" {
                    let object = namespaces::begin_termination(&ctx.state, name).unwrap_or(object);
                    return ctx.render(&object, 200);
                }
            }
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

pub(crate) fn delete_collection(ctx: &Ctx, body: &[u8]) -> HandlerResult {
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
    for (key, object) in snapshot.objects.iter() {
        if ctx.info.namespaced && !ns.is_empty() && &*key.namespace != ns {
            continue;
        }
        if !labels.matches(&object.meta.labels) || !fields.matches(object) {
            continue;
        }
        if ctx.info.kind == "Namespace" && namespaces::check_deletable(&key.name).is_err() {
            continue;
        }
        let result = if dry {
            ctx.state
                .group
                .delete_dry_run(&ctx.info.store_key, key, &options)
        } else {
            ctx.state.group.delete(&ctx.info.store_key, key, &options)
        };
        match result {
            Ok(DeleteOutcome::Pending(_)) if !dry && ctx.info.kind == "Namespace" => {
                namespaces::begin_termination(&ctx.state, &key.name);
            }
            // Gone already: kube-apiserver lists it all the same.
            Ok(_) | Err(infrasim_store::StoreError::NotFound { .. }) => {}
            Err(e) => return Err(ctx.store_error(e)),
        }
        // The answer is the list the deletions worked through, as it was read before them
        // (kube-apiserver's DeleteCollection answers with that list, for every kind).
        deleted.push(object.clone());
    }
    let mut out =
        Vec::with_capacity(deleted.iter().map(|o| o.bytes.len() + 1).sum::<usize>() + 128);
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
        out.extend_from_slice(&ctx.info.served_bytes(&o.bytes));
    }
    out.extend_from_slice(b"]}");
    Ok(json_bytes(200, out))
}
