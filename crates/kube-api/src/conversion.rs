//! Converting custom objects between their CRD's versions. With the conversion strategy
//! `None` only `apiVersion` changes (done where bytes are served, see
//! `ResourceInfo::served_bytes`); with `Webhook`, kube-apiserver sends the objects in a
//! `ConversionReview` (`apiextensions.k8s.io/v1`) to the CRD's webhook, and so does this:
//! writes are converted to the storage version before they are stored, and every object
//! served (get, list, watch, and the answers of writes) to the version the client asked in.

use crate::context::Ctx;
use crate::resources::ResourceInfo;
use crate::status::ApiError;
use crate::values::At;
use crate::webhook::Reach;
use infrasim_store::StoredObject;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

/// How long a conversion webhook may take, as kube-apiserver allows it.
const TIMEOUT: Duration = Duration::from_secs(30);

/// Whether objects served in `info`'s version must be converted by a webhook.
pub(crate) fn by_webhook(info: &ResourceInfo) -> bool {
    info.conversion.is_some() && info.storage_version.as_deref() != Some(info.api_version.as_str())
}

/// Whether stored objects are served in `info`'s version only after a conversion (a
/// webhook's, or a built-in kind's stored as another, see `event_versions`).
pub(crate) fn converts(info: &ResourceInfo) -> bool {
    by_webhook(info) || info.stored_as.is_some()
}

/// `object` in the stored shape of a built-in kind stored as another; as it is otherwise.
/// The write path works on the request's shape and stores this.
pub(crate) fn stored_form(info: &ResourceInfo, object: Value) -> Value {
    match &info.stored_as {
        Some(how) => (how.to_storage)(object),
        None => object,
    }
}

/// A stored object's value in the request's shape, for a built-in kind stored as another.
pub(crate) fn served_form(info: &ResourceInfo, object: Value) -> Value {
    match &info.stored_as {
        Some(how) => (how.to_served)(object),
        None => object,
    }
}

/// `objects` in `desired` (an apiVersion): those in another version go to the webhook in one
/// review; the answer's objects must keep their identity and carry the desired version.
pub(crate) async fn convert(
    reach: &Reach,
    info: &ResourceInfo,
    mut objects: Vec<Value>,
    desired: &str,
) -> Result<Vec<Value>, ApiError> {
    let Some(client_config) = &info.conversion else {
        for o in &mut objects {
            o["apiVersion"] = json!(desired);
        }
        return Ok(objects);
    };
    let pending: Vec<usize> = (0..objects.len())
        .filter(|&i| objects[i]["apiVersion"].as_str() != Some(desired))
        .collect();
    if pending.is_empty() {
        return Ok(objects);
    }
    let failed = |why: String| {
        ApiError::internal(format!(
            "conversion webhook for {}, Kind={} failed: {why}",
            info.api_version, info.kind
        ))
    };
    let uid = uuid::Uuid::new_v4().to_string();
    let review = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
        "request": {"uid": uid, "desiredAPIVersion": desired,
                    "objects": pending.iter().map(|&i| objects[i].clone()).collect::<Vec<_>>()},
    });
    let answer = crate::webhook::call(reach, client_config, &review, TIMEOUT)
        .await
        .map_err(failed)?;
    let response = &answer["response"];
    if response["uid"].as_str() != Some(uid.as_str()) {
        return Err(failed(format!(
            "expected response.uid={uid:?}, got {}",
            response["uid"]
        )));
    }
    if response.at("/result/status").and_then(Value::as_str) != Some("Success") {
        let message = response.at("/result/message").and_then(Value::as_str);
        return Err(failed(
            message.unwrap_or("the webhook did not succeed").to_string(),
        ));
    }
    let converted = response["convertedObjects"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if converted.len() != pending.len() {
        return Err(failed(format!(
            "expected {} converted objects, got {}",
            pending.len(),
            converted.len()
        )));
    }
    for (&i, new) in pending.iter().zip(converted) {
        check_identity(&objects[i], &new, desired).map_err(failed)?;
        objects[i] = new;
    }
    Ok(objects)
}

/// A converted object must be the same object (name, namespace, uid) in the desired version.
fn check_identity(old: &Value, new: &Value, desired: &str) -> Result<(), String> {
    if new["apiVersion"].as_str() != Some(desired) {
        return Err(format!(
            "invalid converted object: apiVersion {} is not {desired}",
            new["apiVersion"]
        ));
    }
    for field in ["name", "namespace", "uid"] {
        if old["metadata"][field] != new["metadata"][field] {
            return Err(format!(
                "invalid converted object: metadata.{field} changed"
            ));
        }
    }
    Ok(())
}

/// Whether objects of `info` are stored in another version or shape than it serves (a
/// custom kind's other versions, a built-in kind stored as another).
pub(crate) fn stored_differently(info: &ResourceInfo) -> bool {
    info.stored_as.is_some()
        || info
            .storage_version
            .as_deref()
            .is_some_and(|v| v != info.api_version)
}

/// `object` in the storage version, for a write: converted by the CRD's webhook, or (without
/// one) relabelled, or, for a built-in kind stored as another, put in that kind's shape.
pub(crate) async fn to_storage(ctx: &Ctx, object: Value) -> Result<Value, ApiError> {
    let info = &ctx.info;
    if info.stored_as.is_some() {
        return Ok(stored_form(info, object));
    }
    match (&info.conversion, &info.storage_version) {
        (Some(_), Some(storage)) => {
            let mut converted = convert(&ctx.state.webhooks(), info, vec![object], storage).await?;
            Ok(converted.pop().unwrap_or(Value::Null))
        }
        (None, Some(storage)) => {
            let mut object = object;
            object["apiVersion"] = Value::String(storage.clone());
            Ok(object)
        }
        _ => Ok(object),
    }
}

/// `object` in the version of the request, for a verb that works on it there (a patch).
pub(crate) async fn to_request_version(ctx: &Ctx, object: Value) -> Result<Value, ApiError> {
    if ctx.info.stored_as.is_some() {
        return Ok(served_form(&ctx.info, object));
    }
    let mut converted = convert(
        &ctx.state.webhooks(),
        &ctx.info,
        vec![object],
        &ctx.info.api_version,
    )
    .await?;
    Ok(converted.pop().unwrap_or(Value::Null))
}

/// Stored objects as served in the request's version: the same objects when no webhook
/// is involved, else new ones with the converted bytes (metadata as stored).
pub(crate) async fn served(
    ctx: &Ctx,
    objects: Vec<Arc<StoredObject>>,
) -> Result<Vec<Arc<StoredObject>>, ApiError> {
    served_from(&ctx.state.webhooks(), &ctx.info, objects).await
}

/// [`served`], for a caller that holds the webhooks and the resource rather than a request.
pub(crate) async fn served_from(
    reach: &Reach,
    info: &ResourceInfo,
    objects: Vec<Arc<StoredObject>>,
) -> Result<Vec<Arc<StoredObject>>, ApiError> {
    if let Some(how) = &info.stored_as {
        return objects
            .iter()
            .map(|o| {
                let value = o
                    .to_value()
                    .map_err(|e| ApiError::internal(e.to_string()))?;
                let served = (how.to_served)(value);
                Ok(restamped(o, &served))
            })
            .collect();
    }
    if !by_webhook(info) || objects.is_empty() {
        return Ok(objects);
    }
    let values: Result<Vec<Value>, _> = objects.iter().map(|o| o.to_value()).collect();
    let values = values.map_err(|e| ApiError::internal(e.to_string()))?;
    let converted = convert(reach, info, values, &info.api_version).await?;
    Ok(objects
        .iter()
        .zip(converted)
        .map(|(o, v)| restamped(o, &v))
        .collect())
}

/// A stored object with `value` as its bytes (its metadata as stored).
fn restamped(object: &StoredObject, value: &Value) -> Arc<StoredObject> {
    StoredObject::plain(
        object.meta.clone(),
        object.derived.clone(),
        serde_json::to_vec(value).unwrap_or_default().into(),
    )
}

/// One stored object as served in the request's version.
pub(crate) async fn served_one(
    ctx: &Ctx,
    object: Arc<StoredObject>,
) -> Result<Arc<StoredObject>, ApiError> {
    let mut served = served(ctx, vec![object]).await?;
    served
        .pop()
        .ok_or_else(|| ApiError::internal("conversion lost the object"))
}
