//! The `pods/binding` subresource, through which a scheduler puts a pod on a node: a POST
//! of a `Binding` (`target` names the node), answered 201 with a Success Status. The write
//! itself is the Pod strategy's (`write/kinds/pod.rs`), through the one write path.

use crate::context::Ctx;
use crate::http::{status_response, HandlerResult};
use crate::status::ApiError;
use crate::values::At;
use crate::write::kinds::pod;
use crate::write::{self, input, Operation, Ownership, Write, WriteError, Written};
use infrasim_store::{Read, StoredObject};
use serde_json::{json, Value};
use std::borrow::Cow;
use std::sync::Arc;

/// POST `pods/<name>/binding`.
pub(crate) async fn create(ctx: &Ctx, body: &[u8]) -> HandlerResult {
    input::dry_run(ctx)?;
    let binding: Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("error decoding Binding: {e}")))?;
    let name = ctx.path.name.as_deref().unwrap_or("");
    if let Some(other) = binding.at("/metadata/name").and_then(Value::as_str) {
        if other != name {
            return Err(ApiError::bad_request(format!(
                "name in URL does not match name in Binding object: {name} != {other}"
            )));
        }
    }
    let node = target(&binding, name)?;
    assign(ctx, node, binding.at("/metadata/annotations"), None).await?;
    Ok(status_response(
        201,
        &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}),
    ))
}

/// The node a binding names: `target.name`, of kind `Node` (or no kind).
fn target<'a>(binding: &'a Value, name: &str) -> Result<&'a str, ApiError> {
    let kind = binding
        .at("/target/kind")
        .and_then(Value::as_str)
        .unwrap_or("");
    let node = binding
        .at("/target/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    let mut causes = Vec::new();
    if !kind.is_empty() && kind != "Node" {
        causes.push((
            "target.kind".to_string(),
            format!("Invalid value: \"{kind}\": must be empty or 'Node'"),
        ));
    }
    if node.is_empty() {
        causes.push(("target.name".to_string(), "Required value".to_string()));
    }
    if causes.is_empty() {
        return Ok(node);
    }
    Err(ApiError::invalid("", "Binding", name, causes))
}

/// Binds the pod the context names to `node`, with the binding's `annotations`; a write
/// that raced another is tried again over what that one stored (kube-apiserver's binding
/// storage updates in a retry loop too).
pub(crate) async fn assign(
    ctx: &Ctx,
    node: &str,
    annotations: Option<&Value>,
    mut known: Option<Read<'_>>,
) -> Result<Written, ApiError> {
    let mut attempts = 0;
    loop {
        let (read, old) = match known.take() {
            // What the caller read, while it is still the stored pod: not decoded again.
            Some(k) if current_is(ctx, k.object) => (k.object.clone(), Cow::Borrowed(k.value)),
            _ => {
                let (read, old) = ctx.stored()?;
                (read, Cow::Owned(old))
            }
        };
        let now = infrasim_store::format_time(ctx.state.clock.now());
        let object = pod::bind(&old, node, annotations, &now);
        let expected = Some(read.meta.resource_version);
        let write = Write {
            operation: Operation::Update {
                read,
                old,
                expected,
            },
            object,
            ownership: Ownership::Record,
        };
        match write::persist(ctx, write).await {
            Ok(written) => return Ok(written),
            Err(WriteError::Stale(_)) if attempts < 8 => attempts += 1,
            Err(e) => return Err(e.into()),
        }
    }
}

/// Whether `object` is the version of the request's object the store holds.
fn current_is(ctx: &Ctx, object: &Arc<StoredObject>) -> bool {
    ctx.state
        .group
        .get(&ctx.info.store_key, &ctx.key())
        .is_some_and(|current| Arc::ptr_eq(&current, object))
}
