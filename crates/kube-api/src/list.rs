//! list: selectors, `limit`/`continue` pagination over a consistent snapshot, and the
//! `resourceVersion` / `resourceVersionMatch` semantics of kube-apiserver.

use crate::context::Ctx;
use crate::filter::Filter;
use crate::http::{json_bytes, json_value, Body, Format, HandlerResult};
use crate::status::ApiError;
use crate::table::{self, IncludeObject};
use base64::Engine;
use http::Response;
use infrasim_store::{ObjectKey, ReadAt, Snapshot, StoredObject};
use serde_json::{json, Value};
use std::ops::Bound;
use std::sync::Arc;

/// What a continue token carries: the snapshot's resourceVersion and the last key served.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct ContinueToken {
    v: String,
    rv: u64,
    ns: String,
    name: String,
}

fn encode_continue(rv: u64, key: &ObjectKey) -> String {
    let token = ContinueToken {
        v: "meta.k8s.io/v1".into(),
        rv,
        ns: key.namespace.to_string(),
        name: key.name.to_string(),
    };
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .encode(serde_json::to_vec(&token).unwrap_or_default())
}

fn decode_continue(token: &str) -> Result<ContinueToken, ApiError> {
    let bad = || ApiError::bad_request("continue key is not valid: invalid continue token");
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token.trim_end_matches('='))
        .map_err(|_| bad())?;
    let token: ContinueToken = serde_json::from_slice(&bytes).map_err(|_| bad())?;
    if token.v != "meta.k8s.io/v1" {
        return Err(bad());
    }
    Ok(token)
}

/// The read point of a list, from `resourceVersion` and `resourceVersionMatch`.
pub(crate) fn read_at(ctx: &Ctx) -> Result<ReadAt, ApiError> {
    let rv = ctx.query.get("resourceVersion").filter(|s| !s.is_empty());
    let matching = ctx
        .query
        .get("resourceVersionMatch")
        .filter(|s| !s.is_empty());
    let parse = |s: &str| {
        s.parse::<u64>()
            .map_err(|_| ApiError::bad_request(format!("invalid resource version {s:?}")))
    };
    match (rv, matching) {
        (None, None) => Ok(ReadAt::Latest),
        (None, Some(_)) => Err(ApiError::bad_request(
            "resourceVersionMatch is forbidden unless resourceVersion is provided",
        )),
        (Some("0"), Some("Exact")) => Err(ApiError::bad_request(
            "resourceVersionMatch \"Exact\" is forbidden for resourceVersion \"0\"",
        )),
        (Some("0"), _) => Ok(ReadAt::Latest),
        (Some(rv), None | Some("NotOlderThan")) => Ok(ReadAt::NotOlderThan(parse(rv)?)),
        (Some(rv), Some("Exact")) => Ok(ReadAt::Exact(parse(rv)?)),
        (Some(_), Some(other)) => Err(ApiError::bad_request(format!(
            "resourceVersionMatch: Unsupported value: {other:?}: supported values: \"Exact\", \"NotOlderThan\""
        ))),
    }
}

/// Where a page starts: its size limit and the continue token of the page before, if any.
fn page_request(ctx: &Ctx) -> Result<(Option<usize>, Option<ContinueToken>), ApiError> {
    let limit = ctx
        .query
        .number("limit")
        .map_err(ApiError::bad_request)?
        .filter(|l| *l > 0)
        .map(|l| l as usize);
    let token = match ctx.query.get("continue").filter(|s| !s.is_empty()) {
        Some(t) => {
            if ctx
                .query
                .get("resourceVersion")
                .is_some_and(|rv| !rv.is_empty() && rv != "0")
            {
                return Err(ApiError::bad_request(
                    "specifying resource version is not allowed when using continue",
                ));
            }
            Some(decode_continue(t)?)
        }
        None => None,
    };
    Ok((limit, token))
}

/// The consistent view the page is cut from; a continued list whose snapshot has left the
/// window is told so in kube-apiserver's words.
fn read_snapshot(
    ctx: &Ctx,
    filter: &Filter,
    token: Option<&ContinueToken>,
) -> Result<Snapshot, ApiError> {
    let at = match token {
        Some(t) => ReadAt::Exact(t.rv),
        None => read_at(ctx)?,
    };
    let group = &ctx.state.group;
    let store_key = &ctx.info.store_key;
    // With required labels (or indexed fields), the store's indexes read only the objects
    // holding the rarest of them; the whole filter still runs over them below.
    let labels = filter.labels.required_labels();
    let fields = filter.fields.required_fields();
    let snapshot = if labels.is_empty() && fields.is_empty() {
        group.snapshot(store_key, at)
    } else {
        group.snapshot_selected(store_key, at, &labels, &fields)
    }
    .map_err(|e| match (e, token) {
            (infrasim_store::StoreError::Expired { .. }, Some(_)) => ApiError::gone(
                "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.",
            ),
            (e, _) => ApiError::from_store(e, &ctx.info.group, &ctx.info.plural),
        })?;
    Ok(snapshot)
}

/// Cuts one page of matching objects out of the snapshot, with the list metadata that
/// tells the client where the next page starts.
fn page<'s>(
    snapshot: &'s Snapshot,
    filter: &Filter,
    limit: Option<usize>,
    token: Option<&ContinueToken>,
) -> (Vec<&'s Arc<StoredObject>>, Value) {
    // Where iteration starts: after the continue key, else at the namespace's first key.
    let start = match (token, &filter.namespace) {
        (Some(t), _) => Bound::Excluded(ObjectKey::new(&t.ns, &t.name)),
        (None, Some(ns)) => Bound::Included(ObjectKey::new(ns, "")),
        (None, None) => Bound::Unbounded,
    };
    let in_namespace = |k: &ObjectKey| {
        filter
            .namespace
            .as_deref()
            .is_none_or(|ns| *k.namespace == *ns)
    };
    let mut items: Vec<&Arc<StoredObject>> = Vec::new();
    let mut next_key = None;
    let mut remaining = 0usize;
    let mut iter = snapshot
        .objects
        .range((start, Bound::Unbounded))
        .take_while(|(k, _)| in_namespace(k))
        .filter(|(_, o)| filter.matches(o));
    for (key, object) in iter.by_ref() {
        if limit.is_some_and(|l| items.len() >= l) {
            // One more match exists: the page is full and a continue token is due.
            remaining = 1;
            break;
        }
        items.push(object);
        next_key = Some(key.clone());
    }
    let continue_token = if remaining > 0 {
        next_key.map(|k| encode_continue(snapshot.resource_version, &k))
    } else {
        None
    };
    let mut meta = json!({"resourceVersion": snapshot.resource_version.to_string()});
    if let Some(c) = &continue_token {
        meta["continue"] = json!(c);
        if !filter.has_selectors() {
            meta["remainingItemCount"] = json!(remaining + iter.count());
        }
    }
    (items, meta)
}

pub(crate) async fn list(ctx: &Ctx) -> HandlerResult {
    let filter = Filter::from_ctx(ctx)?;
    let (limit, token) = page_request(ctx)?;
    let snapshot = read_snapshot(ctx, &filter, token.as_ref())?;
    let (items, meta) = page(&snapshot, &filter, limit, token.as_ref());

    let items = crate::conversion::served(ctx, items.into_iter().cloned().collect()).await?;
    match ctx.format {
        Format::Table(api_version) => table_list(ctx, &items, meta, api_version),
        Format::Metadata(api_version) => Ok(metadata_list(&items, meta, api_version)),
        _ => Ok(json_list(ctx, &items, &meta)),
    }
}

/// The page as a Table, one row per object (`kubectl get`).
fn table_list(
    ctx: &Ctx,
    items: &[Arc<StoredObject>],
    meta: Value,
    api_version: &str,
) -> HandlerResult {
    let include =
        IncludeObject::parse(ctx.query.get("includeObject")).map_err(ApiError::bad_request)?;
    let now = ctx.state.clock.now();
    let rows: Vec<Value> = items
        .iter()
        .filter_map(|o| serde_json::from_slice::<Value>(&ctx.info.served_bytes(&o.bytes())).ok())
        .map(|v| table::row(&ctx.info, &v, include, now))
        .collect();
    let mut t = table::table(&ctx.info, rows, meta, true);
    t["apiVersion"] = json!(api_version);
    Ok(json_value(200, &t))
}

/// The page as a `PartialObjectMetadataList`: the objects' metadata only.
fn metadata_list(items: &[Arc<StoredObject>], meta: Value, api_version: &str) -> Response<Body> {
    let items: Vec<Value> = items
        .iter()
        .filter_map(|o| o.to_value().ok())
        .map(|v| crate::http::partial_metadata(&v, api_version))
        .collect();
    let list = json!({"kind": "PartialObjectMetadataList", "apiVersion": api_version,
                      "metadata": meta, "items": items});
    json_bytes(200, infrasim_store::to_vec_typed(&list).unwrap_or_default())
}

/// The page as the resource's list kind, in JSON.
fn json_list(ctx: &Ctx, items: &[Arc<StoredObject>], meta: &Value) -> Response<Body> {
    // Stitch the stored bytes together: no object is decoded or re-encoded.
    let size: usize = items.iter().map(|o| o.len() + 1).sum();
    let mut out = Vec::with_capacity(size + 256);
    out.extend_from_slice(b"{\"kind\":\"");
    out.extend_from_slice(ctx.info.list_kind.as_bytes());
    out.extend_from_slice(b"\",\"apiVersion\":\"");
    out.extend_from_slice(ctx.info.api_version.as_bytes());
    out.extend_from_slice(b"\",\"metadata\":");
    out.extend_from_slice(&infrasim_store::to_vec_list_meta(meta).unwrap_or_default());
    out.extend_from_slice(b",\"items\":[");
    for (i, o) in items.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(&ctx.info.served_bytes(&o.bytes()));
    }
    out.extend_from_slice(b"]}");
    json_bytes(200, out)
}
