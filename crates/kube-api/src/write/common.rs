//! What the write path's steps and every kind's strategy share, below both: a 422 made of
//! causes, and the common split of an update (what a write through the main resource, the
//! `status` subresource or `ephemeralcontainers` may change).

use crate::context::Ctx;
use crate::ephemeral;
use crate::object::name_of;
use crate::status::ApiError;
use serde_json::Value;

/// A 422 naming every cause, or nothing when there is none.
pub(crate) fn refuse(
    ctx: &Ctx,
    new: &Value,
    causes: Vec<(String, String)>,
) -> Result<(), ApiError> {
    if causes.is_empty() {
        return Ok(());
    }
    let info = &ctx.info;
    Err(ApiError::invalid(
        &info.group,
        &info.kind,
        &name_of(new),
        causes,
    ))
}

/// The common split of an update: through `ephemeralcontainers` only those change (a pod's);
/// through `status` the stored object stays but for its status; through the main resource
/// the stored status stays.
pub(crate) fn split_for_update(
    ctx: &Ctx,
    subresource: Option<&str>,
    current: &Value,
    incoming: Value,
) -> Value {
    match subresource {
        Some("ephemeralcontainers") => ephemeral::prepare_for_update(current, &incoming),
        Some("status") => split_through_status(current, incoming),
        _ if ctx.info.has_status => keep_stored_status(current, incoming),
        _ => incoming,
    }
}

/// The request's status, resourceVersion and managedFields (an apply through status
/// computed the new ownership; an update recomputes it), and the rest as stored. The
/// request carries the rest already, mostly unchanged (a client sends the object it read,
/// an apply merged onto it): compared, copied where it differs.
fn split_through_status(current: &Value, mut incoming: Value) -> Value {
    if incoming.get("status").is_some_and(Value::is_null) {
        if let Some(o) = incoming.as_object_mut() {
            o.remove("status");
        }
    }
    keep_stored(&mut incoming, current, &["status", "metadata"]);
    let meta = current.get("metadata").unwrap_or(&Value::Null);
    if !incoming.get("metadata").is_some_and(Value::is_object) {
        incoming["metadata"] = Value::Object(Default::default());
    }
    if let Some(m) = incoming.get_mut("metadata") {
        keep_stored(m, meta, &["resourceVersion", "managedFields"]);
    }
    if incoming.pointer("/metadata/managedFields").is_none() {
        if let Some(managed) = meta.get("managedFields") {
            incoming["metadata"]["managedFields"] = managed.clone();
        }
    }
    incoming
}

/// Through the main resource the status is the stored one (none if none is stored).
fn keep_stored_status(current: &Value, mut incoming: Value) -> Value {
    match current.get("status") {
        Some(s) => incoming["status"] = s.clone(),
        None => {
            if let Some(o) = incoming.as_object_mut() {
                o.remove("status");
            }
        }
    }
    incoming
}

/// Makes `incoming` hold `stored`'s fields but for `except` (which it keeps as it has them):
/// fields it lacks are copied in, fields it has that `stored` lacks go, and fields that
/// differ are copied over; equal fields are left as they are, not copied.
fn keep_stored(incoming: &mut Value, stored: &Value, except: &[&str]) {
    let (Some(to), Some(from)) = (incoming.as_object_mut(), stored.as_object()) else {
        let kept: Vec<(String, Value)> = except
            .iter()
            .filter_map(|k| Some((k.to_string(), incoming.get(*k)?.clone())))
            .collect();
        *incoming = stored.clone();
        if let Some(o) = incoming.as_object_mut() {
            o.extend(kept);
        }
        return;
    };
    to.retain(|k, _| except.contains(&k.as_str()) || from.contains_key(k));
    for (k, v) in from {
        if except.contains(&k.as_str()) {
            continue;
        }
        match to.get_mut(k) {
            Some(slot) if slot == v => {}
            Some(slot) => *slot = v.clone(),
            None => {
                to.insert(k.clone(), v.clone());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::keep_stored;
    use serde_json::json;

    #[test]
    fn keeps_the_stored_fields_but_the_excepted_ones() {
        let stored = json!({"spec": {"a": 1}, "kept": "x", "status": {"old": true}});
        let mut incoming = json!({"spec": {"a": 2}, "extra": 1, "status": {"new": true}});
        keep_stored(&mut incoming, &stored, &["status"]);
        assert_eq!(
            incoming,
            json!({"spec": {"a": 1}, "kept": "x", "status": {"new": true}})
        );
        // An excepted field the request lacks stays absent (not copied from the stored one).
        let mut bare = json!({"spec": {"a": 1}});
        keep_stored(&mut bare, &stored, &["status"]);
        assert_eq!(bare, json!({"spec": {"a": 1}, "kept": "x"}));
    }
}
