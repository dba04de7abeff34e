//! The two token resources: `serviceaccounts/{name}/token` (TokenRequest, what
//! `kubectl create token` and the kubelet's projected volumes ask for) and TokenReview (what
//! an authenticating webhook or proxy asks: whose token is this?).

use crate::codec::decode_body;
use crate::context::Ctx;
use crate::http::{json_value, HandlerResult};
use crate::sa_tokens::{self, Claims, KubernetesClaims, Reference, ISSUER};
use crate::status::ApiError;
use crate::values::At;
use infrasim_store::ObjectKey;
use serde_json::{json, Value};

/// The shortest lifetime a TokenRequest may ask for (kube-apiserver refuses less).
const MIN_EXPIRATION_SECONDS: i64 = 600;
/// The longest (2^32 seconds, kube-apiserver's bound).
const MAX_EXPIRATION_SECONDS: i64 = 1 << 32;
/// What a TokenRequest gets when it names no lifetime.
const DEFAULT_EXPIRATION_SECONDS: i64 = 3600;

/// `serviceaccounts/{name}/token`: a signed token for the ServiceAccount.
pub(crate) fn token_request(ctx: &Ctx, body: &[u8]) -> HandlerResult {
    let name = ctx.path.name.as_deref().unwrap_or("");
    let namespace = ctx.namespace();
    let sa = ctx
        .state
        .group
        .get("serviceaccounts", &ObjectKey::new(namespace, name))
        .ok_or_else(|| ApiError::object_not_found("", "serviceaccounts", name))?;
    let mut request: Value = if body.is_empty() {
        json!({})
    } else {
        decode_body(ctx, body)?
    };
    let seconds = expiration_seconds(&request, name)?;
    let audiences = audiences_of(&request);
    let now = ctx.state.clock.now();
    let expires = now + chrono::Duration::seconds(seconds);
    let mut kubernetes = KubernetesClaims {
        namespace: namespace.to_string(),
        node: None,
        pod: None,
        secret: None,
        serviceaccount: Reference {
            name: name.to_string(),
            uid: sa.meta.uid.to_string(),
        },
    };
    if let Some(bound) = request.at("/spec/boundObjectRef").cloned() {
        bind(ctx, &bound, &sa, &mut kubernetes)?;
    }
    let claims = Claims {
        aud: audiences.clone(),
        exp: expires.timestamp(),
        iat: now.timestamp(),
        iss: ISSUER.to_string(),
        jti: uuid::Uuid::new_v4().to_string(),
        kubernetes,
        nbf: now.timestamp(),
        sub: format!("system:serviceaccount:{namespace}:{name}"),
    };
    let token = ctx
        .state
        .token_issuer()?
        .issue(&claims)
        .map_err(|e| ApiError::internal(e.to_string()))?;
    request["apiVersion"] = json!("authentication.k8s.io/v1");
    request["kind"] = json!("TokenRequest");
    request["metadata"] = json!({"name": name, "namespace": namespace, "creationTimestamp": null});
    request["spec"]["expirationSeconds"] = json!(seconds);
    request["spec"]["audiences"] = json!(audiences);
    request["status"] =
        json!({"token": token, "expirationTimestamp": infrasim_store::format_time(expires)});
    Ok(json_value(201, &request))
}

/// The `spec.audiences` of a TokenRequest or TokenReview, or the API server's own when it
/// names none.
fn audiences_of(request: &Value) -> Vec<String> {
    let asked = crate::values::string_list(request.at("/spec/audiences"));
    if asked.is_empty() {
        vec![ISSUER.to_string()]
    } else {
        asked
    }
}

/// The lifetime asked for, refused as kube-apiserver refuses it when out of bounds.
fn expiration_seconds(request: &Value, name: &str) -> Result<i64, ApiError> {
    let Some(seconds) = request.at("/spec/expirationSeconds") else {
        return Ok(DEFAULT_EXPIRATION_SECONDS);
    };
    let seconds = seconds.as_i64().unwrap_or(0);
    let problem = if seconds < MIN_EXPIRATION_SECONDS {
        "may not specify a duration less than 10 minutes"
    } else if seconds > MAX_EXPIRATION_SECONDS {
        "may not specify a duration larger than 2^32 seconds"
    } else {
        return Ok(seconds);
    };
    Err(ApiError::invalid(
        "authentication.k8s.io",
        "TokenRequest",
        name,
        vec![(
            "spec.expirationSeconds".into(),
            format!("Invalid value: {seconds}: {problem}"),
        )],
    ))
}

/// Binds the token to the object `bound` names (a Pod, Secret or Node), which must exist
/// (with the UID given, if one is) and, for a pod, run as the service account.
fn bind(
    ctx: &Ctx,
    bound: &Value,
    sa: &infrasim_store::StoredObject,
    claims: &mut KubernetesClaims,
) -> Result<(), ApiError> {
    let field = |k: &str| bound.get(k).and_then(Value::as_str).unwrap_or("");
    let (kind, name, uid) = (field("kind"), field("name"), field("uid"));
    let (resource, namespace) = match kind {
        "Pod" => ("pods", claims.namespace.as_str()),
        "Secret" => ("secrets", claims.namespace.as_str()),
        "Node" => ("nodes", ""),
        other => {
            return Err(ApiError::bad_request(format!(
                "cannot bind token to object of type {other}"
            )))
        }
    };
    let object = ctx
        .state
        .group
        .get(resource, &ObjectKey::new(namespace, name))
        .ok_or_else(|| ApiError::object_not_found("", resource, name))?;
    if !uid.is_empty() && uid != &*object.meta.uid {
        return Err(ApiError::conflict(format!(
            "the UID in the bound object reference ({uid}) does not match the UID in record. The object might have been deleted and then recreated"
        )));
    }
    let reference = Reference {
        name: name.to_string(),
        uid: object.meta.uid.to_string(),
    };
    match kind {
        "Pod" => {
            let pod = object
                .to_value()
                .map_err(|e| ApiError::internal(e.to_string()))?;
            let runs_as = pod
                .at("/spec/serviceAccountName")
                .and_then(Value::as_str)
                .unwrap_or("default");
            if runs_as != &*sa.meta.name {
                return Err(ApiError::bad_request(format!(
                    "cannot bind token for serviceaccount {:?} to pod running with different serviceaccount name.",
                    &*sa.meta.name
                )));
            }
            // Since Kubernetes 1.30 a pod-bound token also names the pod's node.
            let node = pod.at("/spec/nodeName").and_then(Value::as_str);
            claims.node = node.and_then(|n| {
                let node = ctx.state.group.get("nodes", &ObjectKey::new("", n))?;
                Some(Reference {
                    name: n.to_string(),
                    uid: node.meta.uid.to_string(),
                })
            });
            claims.pod = Some(reference);
        }
        "Secret" => claims.secret = Some(reference),
        _ => claims.node = Some(reference),
    }
    Ok(())
}

/// TokenReview: whether a token authenticates, as whom, and for which audiences.
pub(crate) fn token_review(ctx: &Ctx, body: &[u8]) -> HandlerResult {
    let mut review = decode_body(ctx, body)?;
    let token = review
        .at("/spec/token")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    if token.is_empty() {
        return Err(ApiError::bad_request(
            "token is required for TokenReview in authentication",
        ));
    }
    let api_audiences = vec![ISSUER.to_string()];
    let audiences = audiences_of(&review);
    let now = ctx.state.clock.now();
    let status = match crate::authn::authenticate(&ctx.state, &token, &audiences, now) {
        Ok(found) => json!({
            "authenticated": true,
            "user": {"username": found.identity.user, "uid": found.uid,
                     "groups": found.identity.groups, "extra": found.extra},
            "audiences": found.audiences,
        }),
        // A token the server was given (an admin's) stands for the API's own audiences.
        Err(_)
            if !sa_tokens::looks_like_jwt(&token)
                && audiences.iter().any(|a| api_audiences.contains(a)) =>
        {
            match ctx.state.tokens.lookup(&token, now) {
                Some(identity) => json!({
                    "authenticated": true,
                    "user": {"username": identity.user, "groups": identity.groups},
                    "audiences": api_audiences,
                }),
                None => json!({"user": {}, "error": "[invalid bearer token, token lookup failed]"}),
            }
        }
        Err(e) => json!({"user": {}, "error": format!("[{e}]")}),
    };
    review["apiVersion"] = json!(ctx.info.api_version);
    review["kind"] = json!(ctx.info.kind);
    if review.get("metadata").is_none() {
        review["metadata"] = json!({"creationTimestamp": null});
    }
    review["status"] = status;
    Ok(json_value(201, &review))
}
