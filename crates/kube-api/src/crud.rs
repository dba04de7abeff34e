//! get, create, update (PUT), patch, delete and deletecollection of single resources.

use crate::handler::Ctx;
use crate::http::{json_bytes, json_typed, json_value, Format, HandlerResult};
use crate::protobuf::{self, ProtoError};
use crate::resources::NormalizeError;
use crate::status::ApiError;
use crate::table::{self, IncludeObject};
use crate::{defaults, namespaces, selectors, validation};
use infrasim_store::{
    DeleteOptions, DeleteOutcome, Derived, ObjectKey, Propagation, ReadAt, StoredObject,
};
use serde_json::{json, Value};
use std::sync::Arc;

/// The facts the store keeps beside an object of this kind.
pub(crate) fn derive(kind: &str, value: &Value) -> Arc<Derived> {
    let held = kind == "Namespace"
        && value
            .pointer("/spec/finalizers")
            .and_then(Value::as_array)
            .is_some_and(|f| !f.is_empty());
    Arc::new(Derived {
        fields: selectors::extract_fields(kind, value),
        held,
    })
}

/// One object as a response, JSON or a one-row Table.
pub(crate) fn render(ctx: &Ctx, object: &StoredObject, code: u16) -> HandlerResult {
    match ctx.format {
        Format::Table(api_version) => {
            let include = IncludeObject::parse(ctx.query.get("includeObject"))
                .map_err(ApiError::bad_request)?;
            let value = object
                .to_value()
                .map_err(|e| ApiError::internal(e.to_string()))?;
            let row = table::row(&ctx.info, &value, include, ctx.state.clock.now());
            let mut t = table::table(
                &ctx.info,
                vec![row],
                json!({"resourceVersion": object.meta.resource_version.to_string()}),
                true,
            );
            t["apiVersion"] = json!(api_version);
            Ok(json_typed(
                code,
                serde_json::to_vec(&t).unwrap_or_default(),
                "application/json",
            ))
        }
        Format::Metadata(api_version) => {
            let value = object
                .to_value()
                .map_err(|e| ApiError::internal(e.to_string()))?;
            Ok(json_value(
                code,
                &crate::http::partial_metadata(&value, api_version),
            ))
        }
        _ => Ok(json_bytes(code, ctx.info.served_bytes(&object.bytes))),
    }
}

fn key(ctx: &Ctx) -> ObjectKey {
    ObjectKey::new(ctx.namespace(), ctx.path.name.as_deref().unwrap_or(""))
}

fn store_err(ctx: &Ctx) -> impl Fn(infrasim_store::StoreError) -> ApiError + '_ {
    move |e| ApiError::from_store(e, &ctx.info.group, &ctx.info.plural)
}

pub(crate) fn get(ctx: &Ctx) -> HandlerResult {
    let name = ctx.path.name.as_deref().unwrap_or("");
    let object = ctx
        .state
        .group
        .get(&ctx.info.store_key, &key(ctx))
        .ok_or_else(|| ApiError::object_not_found(&ctx.info.group, &ctx.info.plural, name))?;
    render(ctx, &object, 200)
}

/// Decodes a request body: JSON, YAML, or Kubernetes protobuf, as kube-apiserver accepts.
pub(crate) fn decode_body(ctx: &Ctx, body: &[u8]) -> Result<Value, ApiError> {
    let content_type = ctx
        .headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/json");
    let value = decode_media(content_type, body)?;
    if !value.is_object() {
        return Err(ApiError::bad_request(
            "the request body must be a JSON object",
        ));
    }
    Ok(value)
}

fn decode_media(content_type: &str, body: &[u8]) -> Result<Value, ApiError> {
    let media = content_type.split(';').next().unwrap_or("").trim();
    match media {
        "application/json" | "" | "*/*" => serde_json::from_slice(body).map_err(|e| {
            ApiError::bad_request(format!("error decoding request body as JSON: {e}"))
        }),
        "application/yaml" => serde_yaml::from_slice(body).map_err(|e| {
            ApiError::bad_request(format!("error decoding request body as YAML: {e}"))
        }),
        protobuf::MEDIA_TYPE => protobuf::decode(body).map_err(|e| match e {
            ProtoError::UnsupportedKind(_)
            | ProtoError::UnknownField { .. }
            | ProtoError::Encoding(_) => ApiError::unsupported_media_type(media).with_details(
                json!({"causes": [{"reason": "UnsupportedProtobuf", "message": e.to_string()}]}),
            ),
            other => {
                ApiError::bad_request(format!("error decoding protobuf request body: {other}"))
            }
        }),
        other => Err(ApiError::unsupported_media_type(other)),
    }
}

/// Whether the request is a dry run (`dryRun=All`): checked and computed in full, not applied.
fn dry_run(ctx: &Ctx) -> Result<bool, ApiError> {
    match ctx.query.get("dryRun") {
        None | Some("") => Ok(false),
        Some("All") => Ok(true),
        Some(other) => Err(ApiError::bad_request(format!(
            "dryRun: Unsupported value: {other:?}: supported values: \"All\""
        ))),
    }
}

/// Fills or checks `apiVersion`, `kind`, and `metadata.namespace` against the URL.
fn check_identity(ctx: &Ctx, value: &mut Value) -> Result<(), ApiError> {
    let info = &ctx.info;
    let obj = value
        .as_object_mut()
        .ok_or_else(|| ApiError::bad_request("the request body must be a JSON object"))?;
    match obj.get("apiVersion").and_then(Value::as_str) {
        None | Some("") => {
            obj.insert("apiVersion".into(), json!(info.api_version));
        }
        Some(v) if v == info.api_version => {}
        Some(v) => {
            return Err(ApiError::bad_request(format!(
                "the API version in the data ({v}) does not match the expected API version ({})",
                info.api_version
            )))
        }
    }
    match obj.get("kind").and_then(Value::as_str) {
        None | Some("") => {
            obj.insert("kind".into(), json!(info.kind));
        }
        Some(k) if k == info.kind => {}
        Some(k) => {
            return Err(ApiError::bad_request(format!(
                "the kind in the data ({k}) does not match the expected kind ({})",
                info.kind
            )))
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
fn normalize(ctx: &Ctx, value: Value, warnings: &mut Vec<String>) -> Result<Value, ApiError> {
    let directive = ctx.query.get("fieldValidation").unwrap_or("Warn");
    if !matches!(directive, "Ignore" | "Warn" | "Strict" | "") {
        return Err(ApiError::bad_request(format!(
            "fieldValidation: Unsupported value: {directive:?}: supported values: \"Ignore\", \"Warn\", \"Strict\""
        )));
    }
    let normalized = ctx.info.normalize(value.clone()).map_err(|e| match e {
        NormalizeError::Decode(e) => ApiError::bad_request(format!(
            "error decoding {} {}: {e}",
            &ctx.info.kind,
            ctx.path.name.as_deref().unwrap_or("")
        )),
        NormalizeError::Invalid(causes) => ApiError::invalid(
            &ctx.info.group,
            &ctx.info.kind,
            value
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or(""),
            causes,
        ),
    })?;
    if directive != "Ignore" {
        let mut unknown = Vec::new();
        unknown_fields(&value, &normalized, "", &mut unknown);
        if !unknown.is_empty() {
            if directive == "Strict" {
                let list: Vec<String> = unknown
                    .iter()
                    .map(|f| format!("unknown field \"{f}\""))
                    .collect();
                return Err(ApiError::bad_request(format!(
                    "strict decoding error: {}",
                    list.join(", ")
                )));
            }
            warnings.extend(
                unknown
                    .into_iter()
                    .map(|f| format!("unknown field \"{f}\"")),
            );
        }
    }
    Ok(normalized)
}

/// Paths present in `input` but dropped by decoding (`spec.containers[0].bogus`).
fn unknown_fields(input: &Value, decoded: &Value, prefix: &str, out: &mut Vec<String>) {
    match (input, decoded) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in a {
                let path = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                match b.get(k) {
                    Some(d) => unknown_fields(v, d, &path, out),
                    None if v.is_null() => {}
                    None => out.push(path),
                }
            }
        }
        (Value::Array(a), Value::Array(b)) => {
            for (i, (v, d)) in a.iter().zip(b).enumerate() {
                unknown_fields(v, d, &format!("{prefix}[{i}]"), out);
            }
        }
        _ => {}
    }
}

/// Adds `Warning` headers (RFC 7234 code 299, as kube-apiserver sends them).
fn with_warnings(result: HandlerResult, warnings: &[String]) -> HandlerResult {
    let mut resp = result?;
    for w in warnings {
        let escaped = w.replace('\\', "\\\\").replace('"', "\\\"");
        if let Ok(v) = http::HeaderValue::from_str(&format!("299 - \"{escaped}\"")) {
            resp.headers_mut().append(http::header::WARNING, v);
        }
    }
    Ok(resp)
}

fn name_of(value: &Value) -> String {
    value
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string()
}

pub(crate) fn create(ctx: &Ctx, body: &[u8]) -> HandlerResult {
    let mut value = decode_body(ctx, body)?;
    let manager = field_manager(ctx);
    let now = infrasim_store::format_time(ctx.state.clock.now());
    crate::apply::record_update(
        None,
        &mut value,
        &manager,
        &ctx.info.api_version,
        &now,
        !ctx.info.custom,
    );
    create_value(ctx, value)
}

/// Creates an object from a decoded body (a create, or an apply that creates).
fn create_value(ctx: &Ctx, mut value: Value) -> HandlerResult {
    let dry = dry_run(ctx)?;
    check_identity(ctx, &mut value)?;
    if value
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .is_some_and(|rv| !rv.is_empty())
    {
        return Err(ApiError::bad_request(
            "resourceVersion should not be set on objects to be created",
        ));
    }
    let generate = value
        .pointer("/metadata/generateName")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    if ctx.info.namespaced {
        namespaces::ensure_writable(
            &ctx.state,
            ctx.namespace(),
            &ctx.info.plural,
            &name_of(&value),
        )?;
    }
    let mut warnings = Vec::new();
    let mut value = normalize(ctx, value, &mut warnings)?;
    // Status is the system's to write; a create cannot set it. Nodes are the exception, as in
    // kube-apiserver: a kubelet registers its node with capacity and conditions in one create.
    if ctx.info.has_status && (ctx.info.kind != "Node" || ctx.info.custom) {
        if let Some(o) = value.as_object_mut() {
            o.remove("status");
        }
    }
    defaults::apply(&ctx.state, &ctx.info.kind, &mut value);
    to_storage_version(ctx, &mut value);
    let is_crd = ctx.info.kind == "CustomResourceDefinition" && !ctx.info.custom;
    if is_crd {
        let causes = crate::crd::validate(&value);
        if !causes.is_empty() {
            return Err(crate::crd::invalid(&name_of(&value), causes));
        }
        crate::crd::add_finalizer(&mut value);
    }
    // generateName: try a few random suffixes, as kube-apiserver's name generator does.
    for attempt in 0..8 {
        if name_of(&value).is_empty() && !generate.is_empty() {
            value["metadata"]["name"] = json!(format!("{generate}{}", random_suffix()));
        }
        validation::validate(&ctx.info.kind, &ctx.info.group, &value)?;
        let derived = derive(&ctx.info.kind, &value);
        if dry {
            let would = ctx
                .state
                .group
                .create_dry_run(&ctx.info.store_key, value.clone(), derived)
                .map_err(store_err(ctx))?;
            return with_warnings(render(ctx, &would, 201), &warnings);
        }
        match ctx
            .state
            .group
            .create(&ctx.info.store_key, value.clone(), derived)
        {
            Ok(created) => {
                if ctx.info.kind == "Namespace" && !ctx.info.custom {
                    namespaces::populate(&ctx.state, &created.meta.name);
                }
                if is_crd {
                    crate::crd::register(&ctx.state, &created.meta.name);
                    let fresh = ctx
                        .state
                        .group
                        .get(&ctx.info.store_key, &created.meta.key())
                        .unwrap_or(created);
                    return with_warnings(render(ctx, &fresh, 201), &warnings);
                }
                return with_warnings(render(ctx, &created, 201), &warnings);
            }
            Err(infrasim_store::StoreError::AlreadyExists { .. })
                if !generate.is_empty() && attempt < 7 =>
            {
                value["metadata"]["name"] = json!("");
            }
            Err(e) => return Err(store_err(ctx)(e)),
        }
    }
    Err(ApiError::internal("could not generate a unique name"))
}

/// Five characters from the alphabet kube-apiserver's name generator uses.
fn random_suffix() -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    (0..5)
        .map(|_| ALPHABET[rand::random_range(0..ALPHABET.len())] as char)
        .collect()
}

fn expected_version(value: &Value) -> Result<Option<u64>, ApiError> {
    match value
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
    {
        None | Some("") => Ok(None),
        Some(rv) => rv
            .parse::<u64>()
            .map(Some)
            .map_err(|_| ApiError::bad_request(format!("invalid resource version {rv:?}"))),
    }
}

/// Builds the object to store from the client's `incoming` and the `current` object: the
/// main resource keeps the stored status; the status subresource keeps everything else.
fn merge_for_update(ctx: &Ctx, current: &Value, mut incoming: Value) -> Value {
    if ctx.path.subresource.as_deref() == Some("status") {
        let mut merged = current.clone();
        merged["status"] = incoming.get("status").cloned().unwrap_or(Value::Null);
        if merged["status"].is_null() {
            if let Some(o) = merged.as_object_mut() {
                o.remove("status");
            }
        }
        if let Some(rv) = incoming.pointer("/metadata/resourceVersion") {
            merged["metadata"]["resourceVersion"] = rv.clone();
        } else if let Some(m) = merged.get_mut("metadata").and_then(Value::as_object_mut) {
            m.remove("resourceVersion");
        }
        // An apply through status computed the new ownership (an update recomputes it).
        if let Some(managed) = incoming.pointer("/metadata/managedFields") {
            merged["metadata"]["managedFields"] = managed.clone();
        }
        return merged;
    }
    if ctx.info.has_status {
        match current.get("status") {
            Some(s) => incoming["status"] = s.clone(),
            None => {
                if let Some(o) = incoming.as_object_mut() {
                    o.remove("status");
                }
            }
        }
    }
    incoming
}

pub(crate) fn update(ctx: &Ctx, body: &[u8]) -> HandlerResult {
    dry_run(ctx)?;
    let mut value = decode_body(ctx, body)?;
    check_identity(ctx, &mut value)?;
    let url_name = ctx.path.name.as_deref().unwrap_or("");
    let body_name = name_of(&value);
    if body_name.is_empty() {
        value["metadata"]["name"] = json!(url_name);
    } else if body_name != url_name {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({body_name}) does not match the name on the URL ({url_name})"
        )));
    }
    let mut warnings = Vec::new();
    let value = normalize(ctx, value, &mut warnings)?;
    let expected = expected_version(&value)?;
    let current = ctx
        .state
        .group
        .get(&ctx.info.store_key, &key(ctx))
        .ok_or_else(|| ApiError::object_not_found(&ctx.info.group, &ctx.info.plural, url_name))?;
    let current_value = current
        .to_value()
        .map_err(|e| ApiError::internal(e.to_string()))?;
    let mut value = merge_for_update(ctx, &current_value, value);
    defaults::apply(&ctx.state, &ctx.info.kind, &mut value);
    validation::validate_update(&ctx.info.kind, &ctx.info.group, &current_value, &value)?;
    record(ctx, &current_value, &mut value);
    with_warnings(store_update(ctx, value, expected), &warnings)
}

/// Custom objects are stored in their CRD's storage version.
fn to_storage_version(ctx: &Ctx, value: &mut Value) {
    if let Some(v) = &ctx.info.storage_version {
        value["apiVersion"] = Value::String(v.clone());
    }
}

fn store_update(ctx: &Ctx, mut value: Value, expected: Option<u64>) -> HandlerResult {
    to_storage_version(ctx, &mut value);
    defaults::apply(&ctx.state, &ctx.info.kind, &mut value);
    validation::validate(&ctx.info.kind, &ctx.info.group, &value)?;
    let is_crd = ctx.info.kind == "CustomResourceDefinition" && !ctx.info.custom;
    if is_crd && ctx.path.subresource.is_none() {
        let causes = crate::crd::validate(&value);
        if !causes.is_empty() {
            return Err(crate::crd::invalid(&name_of(&value), causes));
        }
    }
    let derived = derive(&ctx.info.kind, &value);
    if dry_run(ctx)? {
        let would = ctx
            .state
            .group
            .update_dry_run(&ctx.info.store_key, value, derived, expected)
            .map_err(store_err(ctx))?;
        return render(ctx, &would, 200);
    }
    let updated = ctx
        .state
        .group
        .update(&ctx.info.store_key, value, derived, expected)
        .map_err(store_err(ctx))?;
    if is_crd {
        crate::crd::register(&ctx.state, &updated.meta.name);
        if let Some(fresh) = ctx
            .state
            .group
            .get(&ctx.info.store_key, &updated.meta.key())
        {
            return render(ctx, &fresh, 200);
        }
    }
    render(ctx, &updated, 200)
}

pub(crate) fn patch(ctx: &Ctx, body: &[u8]) -> HandlerResult {
    dry_run(ctx)?;
    let content_type = ctx
        .headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let media = content_type.split(';').next().unwrap_or("").trim();
    let patch: PatchBody = match media {
        "application/merge-patch+json" => PatchBody::Merge(
            serde_json::from_slice(body).map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?,
        ),
        "application/strategic-merge-patch+json" if !ctx.info.custom => PatchBody::Strategic(
            serde_json::from_slice(body).map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?,
        ),
        "application/apply-patch+yaml" | "application/apply-patch+cbor" => {
            return server_side_apply(ctx, body);
        }
        "application/json-patch+json" => PatchBody::Json(
            serde_json::from_slice(body).map_err(|e| ApiError::bad_request(format!("error decoding JSON patch: {e}")))?,
        ),
        other => {
            return Err(ApiError::unsupported_media_type(other).with_details(json!({
                "causes": [{"reason": "UnsupportedPatchType",
                            "message": "this server supports JSON merge patch, JSON patch and (for built-in kinds, as kube-apiserver) strategic merge patch; server-side apply is not implemented yet"}]
            })))
        }
    };
    let name = ctx.path.name.as_deref().unwrap_or("");
    // Retry on conflict when the patch itself does not pin a resourceVersion, as
    // kube-apiserver does: a patch applies to whatever version is current.
    let pinned = match &patch {
        PatchBody::Merge(p) | PatchBody::Strategic(p) => expected_version(p)?,
        PatchBody::Json(_) => None,
    };
    for _ in 0..16 {
        let current = ctx
            .state
            .group
            .get(&ctx.info.store_key, &key(ctx))
            .ok_or_else(|| ApiError::object_not_found(&ctx.info.group, &ctx.info.plural, name))?;
        let current_value = current
            .to_value()
            .map_err(|e| ApiError::internal(e.to_string()))?;
        let mut patched = current_value.clone();
        if ctx.info.custom {
            // Patch in the version the client speaks; stored in the storage version after.
            patched["apiVersion"] = Value::String(ctx.info.api_version.clone());
        }
        match &patch {
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
        check_identity(ctx, &mut patched)?;
        if name_of(&patched) != name {
            return Err(ApiError::bad_request(
                "the name of the object may not be changed by a patch",
            ));
        }
        let mut warnings = Vec::new();
        let patched = normalize(ctx, patched, &mut warnings)?;
        let mut patched = merge_for_update(ctx, &current_value, patched);
        defaults::apply(&ctx.state, &ctx.info.kind, &mut patched);
        validation::validate_update(&ctx.info.kind, &ctx.info.group, &current_value, &patched)?;
        record(ctx, &current_value, &mut patched);
        let expected = pinned.or(Some(current.meta.resource_version));
        match store_update(ctx, patched, expected) {
            Err(e) if e.code == 409 && e.reason == "Conflict" && pinned.is_none() => continue,
            other => return with_warnings(other, &warnings),
        }
    }
    Err(ApiError::conflict(
        "too many concurrent writes to this object; try again",
    ))
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
            if t.value.is_null() && doc.pointer(t.path.as_str()).is_none() {
                continue;
            }
        }
        json_patch::patch(doc, std::slice::from_ref(op))?;
    }
    Ok(())
}

/// Reads `DeleteOptions` from the body and query.
fn delete_options(ctx: &Ctx, body: &[u8]) -> Result<DeleteOptions, ApiError> {
    let opts: Value = if body.iter().all(u8::is_ascii_whitespace) {
        json!({})
    } else {
        serde_json::from_slice(body)
            .map_err(|e| ApiError::bad_request(format!("error decoding DeleteOptions: {e}")))?
    };
    let from_body = |k: &str| opts.get(k).and_then(Value::as_str).map(str::to_string);
    dry_run(ctx)?;
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
        .pointer("/preconditions/resourceVersion")
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
            .pointer("/preconditions/uid")
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
    Ok(from_body || dry_run(ctx)?)
}

pub(crate) async fn delete(ctx: &Ctx, body: &[u8]) -> HandlerResult {
    let options = delete_options(ctx, body)?;
    if delete_is_dry(ctx, body)? {
        let outcome = ctx
            .state
            .group
            .delete_dry_run(&ctx.info.store_key, &key(ctx), &options)
            .map_err(store_err(ctx))?;
        return render(ctx, outcome.object(), 200);
    }
    let name = ctx.path.name.as_deref().unwrap_or("");
    if ctx.info.kind == "Namespace" {
        namespaces::check_deletable(name)?;
    }
    let outcome = ctx
        .state
        .group
        .delete(&ctx.info.store_key, &key(ctx), &options)
        .map_err(store_err(ctx))?;
    match outcome {
        DeleteOutcome::Pending(object) => {
            if ctx.info.kind == "CustomResourceDefinition" && !ctx.info.custom {
                crate::crd::spawn_cleanup(ctx.state.clone(), name.to_string());
            }
            if ctx.info.kind == "Namespace" && !ctx.info.custom {
                let object = namespaces::begin_termination(&ctx.state, name).unwrap_or(object);
                return render(ctx, &object, 200);
            }
            render(ctx, &object, 200)
        }
        DeleteOutcome::Deleted(object) => {
            if ctx.info.kind == "Pod" {
                return render(ctx, &object, 200);
            }
            Ok(json_value(
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
    let fields = selectors::FieldSelector::parse(
        ctx.query.get("fieldSelector").unwrap_or(""),
        &ctx.info.kind,
    )
    .map_err(ApiError::bad_request)?;
    let snapshot = ctx
        .state
        .group
        .snapshot(&ctx.info.store_key, ReadAt::Latest)
        .map_err(store_err(ctx))?;
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
            Ok(outcome) if dry => deleted.push(outcome.object().clone()),
            Ok(outcome) => {
                if ctx.info.kind == "Namespace" && matches!(outcome, DeleteOutcome::Pending(_)) {
                    namespaces::begin_termination(&ctx.state, &key.name);
                }
                deleted.push(outcome.object().clone());
            }
            Err(infrasim_store::StoreError::NotFound { .. }) => {}
            Err(e) => return Err(store_err(ctx)(e)),
        }
    }
    let mut out =
        Vec::with_capacity(deleted.iter().map(|o| o.bytes.len() + 1).sum::<usize>() + 128);
    out.extend_from_slice(
        format!(
            "{{\"kind\":\"{}\",\"apiVersion\":\"{}\",\"metadata\":{{\"resourceVersion\":\"{}\"}},\"items\":[",
            &ctx.info.list_kind,
            &ctx.info.api_version,
            ctx.state.group.resource_version()
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

/// Records the fields an update changed as owned by its manager (`Update` operation).
fn record(ctx: &Ctx, old: &Value, new: &mut Value) {
    // The client's managedFields are not trusted; ownership is derived from the change.
    if let (Some(m), Some(o)) = (
        new.get_mut("metadata").and_then(Value::as_object_mut),
        old.pointer("/metadata/managedFields"),
    ) {
        m.insert("managedFields".into(), o.clone());
    }
    let now = infrasim_store::format_time(ctx.state.clock.now());
    crate::apply::record_update(
        Some(old),
        new,
        &field_manager(ctx),
        &ctx.info.api_version,
        &now,
        !ctx.info.custom,
    );
}

/// The field manager of a write: `fieldManager`, else the client's name from its User-Agent
/// (`kubectl/v1.32.0 (linux/amd64)` → `kubectl`), as kube-apiserver derives it.
fn field_manager(ctx: &Ctx) -> String {
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

/// Server-side apply (`application/apply-patch+yaml`): create or merge the applied
/// configuration, tracking field ownership per manager; conflicts are 409 unless `force`.
fn server_side_apply(ctx: &Ctx, body: &[u8]) -> HandlerResult {
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
    check_identity(ctx, &mut config)?;
    let name = ctx.path.name.as_deref().unwrap_or("");
    // kube-apiserver takes the name from the URL when the applied configuration has none.
    if name_of(&config).is_empty() {
        config["metadata"]["name"] = json!(name);
    }
    if name_of(&config) != name {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({}) does not match the name on the URL ({name})",
            name_of(&config)
        )));
    }
    let subresource = ctx.path.subresource.clone().unwrap_or_default();
    reset_fields(ctx, &mut config, &subresource);
    let builtin = !ctx.info.custom;
    let now = infrasim_store::format_time(ctx.state.clock.now());
    for _ in 0..16 {
        let current = ctx.state.group.get(&ctx.info.store_key, &key(ctx));
        let current_value = match &current {
            Some(c) => Some(
                c.to_value()
                    .map_err(|e| ApiError::internal(e.to_string()))?,
            ),
            None => None,
        };
        if current.is_none() && !subresource.is_empty() {
            return Err(ApiError::object_not_found(
                &ctx.info.group,
                &ctx.info.plural,
                name,
            ));
        }
        let merged = match crate::apply::apply(
            current_value.as_ref(),
            &config,
            &crate::apply::Applier {
                manager,
                subresource: &subresource,
                force,
                now: &now,
                builtin,
            },
        )
        .map_err(|e| {
            ApiError::bad_request(format!(
                "the applied configuration could not be merged: {e}"
            ))
        })? {
            crate::apply::Applied::Merged(v) => v,
            crate::apply::Applied::Conflicts(conflicts) => {
                let n = conflicts.len();
                let lines: Vec<String> = conflicts
                    .iter()
                    .map(|(m, f)| format!("conflict with \"{m}\": {f}"))
                    .collect();
                let causes: Vec<Value> = conflicts
                    .iter()
                    .map(|(m, f)| json!({"reason": "FieldManagerConflict", "message": format!("conflict with \"{m}\""), "field": f}))
                    .collect();
                return Err(ApiError::conflict(format!(
                    "Apply failed with {n} conflict{}: {}",
                    if n == 1 { "" } else { "s" },
                    lines.join(", ")
                ))
                .with_details(json!({"name": name, "group": ctx.info.group, "kind": ctx.info.plural, "causes": causes})));
            }
        };
        let Some(current) = current else {
            // Apply to create: the ordinary create path, with the ownership already recorded.
            return create_value(ctx, merged);
        };
        if current_value.as_ref() == Some(&merged) {
            // Nothing to change (see `apply::apply`): answer with the object as it is.
            return render(ctx, &current, 200);
        }
        let mut warnings = Vec::new();
        let normalized = normalize(ctx, merged, &mut warnings)?;
        let value = merge_for_update(
            ctx,
            current_value.as_ref().unwrap_or(&Value::Null),
            normalized,
        );
        match store_update(ctx, value, Some(current.meta.resource_version)) {
            Err(e) if e.code == 409 && e.reason == "Conflict" => continue,
            other => return with_warnings(other, &warnings),
        }
    }
    Err(ApiError::conflict(
        "too many concurrent writes to this object; try again",
    ))
}

/// What an apply may set, as kube-apiserver's strategies reset the rest: through `status`
/// only the status (and the identity of the object); through the main resource everything
/// but the status, for kinds that have a status subresource.
fn reset_fields(ctx: &Ctx, config: &mut Value, subresource: &str) {
    let Some(obj) = config.as_object_mut() else {
        return;
    };
    if subresource == "status" {
        obj.retain(|k, _| matches!(k.as_str(), "apiVersion" | "kind" | "metadata" | "status"));
        if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.retain(|k, _| matches!(k.as_str(), "name" | "namespace" | "resourceVersion"));
        }
    } else if ctx.info.has_status && subresource.is_empty() {
        obj.remove("status");
    }
}

/// The two patch formats served so far.
enum PatchBody {
    /// RFC 7386 JSON merge patch.
    Merge(Value),
    /// RFC 6902 JSON patch.
    Json(json_patch::Patch),
    /// Kubernetes strategic merge patch (built-in kinds).
    Strategic(Value),
}
