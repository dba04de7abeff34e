//! The computed, create-only resources: SelfSubjectAccessReview, SubjectAccessReview,
//! LocalSubjectAccessReview (what `kubectl auth can-i` asks) and SelfSubjectReview (`kubectl
//! auth whoami`). The token resources are `token_resources`'.

use crate::auth::Identity;
use crate::authz::{self, Attributes, ResourceAttributes};
use crate::codec::decode_body;
use crate::context::Ctx;
use crate::http::{json_value, HandlerResult};
use crate::status::ApiError;
use serde_json::{json, Value};

fn attributes_of(spec: &Value, namespace_override: Option<&str>) -> Result<Attributes, ApiError> {
    let s = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    if let Some(r) = spec.get("resourceAttributes") {
        let verb = s(r, "verb");
        return Ok(Attributes {
            verb: if verb.is_empty() { "*".into() } else { verb },
            resource: Some(ResourceAttributes {
                group: s(r, "group"),
                resource: s(r, "resource"),
                subresource: s(r, "subresource"),
                namespace: namespace_override
                    .map(str::to_string)
                    .unwrap_or_else(|| s(r, "namespace")),
                name: s(r, "name"),
            }),
            path: String::new(),
        });
    }
    if let Some(n) = spec.get("nonResourceAttributes") {
        return Ok(Attributes {
            verb: s(n, "verb"),
            resource: None,
            path: s(n, "path"),
        });
    }
    Err(ApiError::invalid(
        "authorization.k8s.io",
        "SubjectAccessReview",
        "",
        vec![("spec.resourceAttributes".into(), "Required value: exactly one of nonResourceAttributes or resourceAttributes must be specified".into())],
    ))
}

/// Answers a POST to one of the review resources.
pub(crate) fn create(ctx: &Ctx, body: &[u8]) -> HandlerResult {
    let mut review = decode_body(ctx, body)?;
    let spec = review.get("spec").cloned().unwrap_or(json!({}));
    match ctx.info.kind.as_str() {
        "TokenReview" => return crate::token_resources::token_review(ctx, body),
        "SelfSubjectReview" => {
            review["status"] =
                json!({"userInfo": {"username": ctx.identity.user, "groups": ctx.identity.groups}});
        }
        kind => {
            let (who, namespace) = match kind {
                "SelfSubjectAccessReview" => (ctx.identity.clone(), None),
                _ => {
                    let user = spec
                        .get("user")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string();
                    let groups: Vec<String> = spec
                        .get("groups")
                        .and_then(Value::as_array)
                        .map(|a| {
                            a.iter()
                                .filter_map(|g| g.as_str().map(str::to_string))
                                .collect()
                        })
                        .unwrap_or_default();
                    if user.is_empty() && groups.is_empty() {
                        return Err(ApiError::invalid(
                            "authorization.k8s.io",
                            kind,
                            "",
                            vec![("spec.user".into(), "Invalid value: \"\": at least one of user or group must be specified".into())],
                        ));
                    }
                    let ns =
                        (kind == "LocalSubjectAccessReview").then(|| ctx.namespace().to_string());
                    (Identity { user, groups }, ns)
                }
            };
            let attrs = attributes_of(&spec, namespace.as_deref())?;
            let (allowed, reason) = authz::allowed(&ctx.state, &who, &attrs);
            let mut status = json!({"allowed": allowed});
            if !reason.is_empty() {
                status["reason"] = json!(reason);
            }
            review["status"] = status;
        }
    }
    review["apiVersion"] = json!(ctx.info.api_version);
    review["kind"] = json!(ctx.info.kind);
    if review.get("metadata").is_none() {
        review["metadata"] = json!({});
    }
    Ok(json_value(201, &review))
}
