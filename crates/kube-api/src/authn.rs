//! Who a request's bearer token names: a token registered with the server, or a
//! service-account token this server's key signed, checked as kube-apiserver's
//! service-account authenticator checks it (issuer, lifetime, audiences, and the objects it
//! is bound to still there). Apart from [`crate::auth`]'s identities and
//! [`crate::sa_tokens`]' signing because it reads the server's state, which holds both.

use crate::auth::{bearer_token, Identity};
use crate::sa_tokens::{
    looks_like_jwt, service_account_identity, Authenticated, LegacyClaims, Reference, ISSUER,
    LEEWAY_SECONDS, LEGACY_ISSUER,
};
use crate::state::State;
use base64::Engine;
use chrono::{DateTime, Utc};
use infrasim_store::ObjectKey;
use std::collections::BTreeMap;

/// How long a verified service-account token is remembered (kube-apiserver caches a
/// successful token authentication for ten seconds too): verifying a signature on every
/// request of a busy client would cost more than the request.
const VERIFIED_TOKEN_TTL: chrono::TimeDelta = chrono::TimeDelta::seconds(10);

/// The identity of an `Authorization` header value: a token registered with the server, or a
/// service-account token this server's key signed for the API's audience.
pub(crate) fn bearer(state: &State, authorization: &str, now: DateTime<Utc>) -> Option<Identity> {
    let token = bearer_token(authorization)?;
    if let Some(identity) = state.tokens.lookup(token, now) {
        return Some(identity);
    }
    if !looks_like_jwt(token) {
        return None;
    }
    let audiences = [ISSUER.to_string()];
    match authenticate(state, token, &audiences, now) {
        Ok(found) => {
            let until = found.expires.min(now + VERIFIED_TOKEN_TTL);
            state
                .tokens
                .add_expiring(token, found.identity.clone(), until);
            Some(found.identity)
        }
        Err(reason) => {
            tracing::debug!(%reason, "service-account token refused");
            None
        }
    }
}

/// Authenticates `token` for one of `audiences` at `now`, as kube-apiserver's
/// service-account authenticator does; the error is its reason, in kube-apiserver's words.
pub(crate) fn authenticate(
    state: &State,
    token: &str,
    audiences: &[String],
    now: DateTime<Utc>,
) -> Result<Authenticated, String> {
    let issuer = state.token_issuer().map_err(|e| e.message)?;
    let claims = match issuer.verify(token) {
        Ok(claims) => claims,
        // Not a bound token's claims: a legacy token's, if this key signed it.
        Err(bound) => match issuer.verify_legacy(token) {
            Ok(legacy) => return authenticate_legacy(state, token, &legacy, audiences, now),
            Err(_) => return Err(format!("invalid bearer token, {bound}")),
        },
    };
    if claims.iss != ISSUER {
        return Err("invalid bearer token, token issuer is not recognised".into());
    }
    let at = now.timestamp();
    if at > claims.exp + LEEWAY_SECONDS {
        return Err("invalid bearer token, service account token has expired".into());
    }
    if at + LEEWAY_SECONDS < claims.nbf {
        return Err("invalid bearer token, service account token is not valid yet".into());
    }
    let valid: Vec<String> = audiences
        .iter()
        .filter(|a| claims.aud.contains(a))
        .cloned()
        .collect();
    if valid.is_empty() {
        return Err(format!(
            "invalid bearer token, token audiences {:?} is invalid for the target audiences {:?}",
            claims.aud, audiences
        ));
    }
    let kube = &claims.kubernetes;
    let ns = kube.namespace.as_str();
    check_bound(state, "serviceaccounts", ns, &kube.serviceaccount)?;
    if let Some(pod) = &kube.pod {
        check_bound(state, "pods", ns, pod)?;
    }
    if let Some(secret) = &kube.secret {
        check_bound(state, "secrets", ns, secret)?;
    }
    if let (Some(node), None) = (&kube.node, &kube.pod) {
        check_bound(state, "nodes", "", node)?;
    }
    let sa = &kube.serviceaccount.name;
    let mut extra = BTreeMap::new();
    let mut fact = |key: &str, value: &str| {
        extra.insert(
            format!("authentication.kubernetes.io/{key}"),
            vec![value.to_string()],
        );
    };
    if !claims.jti.is_empty() {
        fact("credential-id", &format!("JTI={}", claims.jti));
    }
    for (what, bound) in [("pod", &kube.pod), ("node", &kube.node)] {
        if let Some(b) = bound {
            fact(&format!("{what}-name"), &b.name);
            fact(&format!("{what}-uid"), &b.uid);
        }
    }
    Ok(Authenticated {
        identity: service_account_identity(ns, sa),
        uid: kube.serviceaccount.uid.clone(),
        extra,
        audiences: valid,
        expires: DateTime::from_timestamp(claims.exp, 0).unwrap_or(now),
    })
}

/// A legacy token, checked as kube-apiserver's legacy validator checks it with service
/// account lookup on (its default): the Secret that holds it still exists and still holds
/// this token, and the service account still exists with the UID the token names. It has
/// no audience of its own: it is good for any the request asks for.
fn authenticate_legacy(
    state: &State,
    token: &str,
    claims: &LegacyClaims,
    audiences: &[String],
    now: DateTime<Utc>,
) -> Result<Authenticated, String> {
    if claims.iss != LEGACY_ISSUER {
        return Err("invalid bearer token, token issuer is not recognised".into());
    }
    let ns = claims.namespace.as_str();
    let secret = state
        .group
        .get("secrets", &ObjectKey::new(ns, &claims.secret_name))
        .filter(|s| s.meta.deletion_timestamp.is_none())
        .ok_or_else(|| {
            format!(
                "invalid bearer token, secret \"{}\" not found",
                claims.secret_name
            )
        })?;
    let held = secret
        .to_value()
        .ok()
        .and_then(|s| {
            s.pointer("/data/token")
                .and_then(|t| t.as_str())
                .map(str::to_string)
        })
        .and_then(|t| base64::engine::general_purpose::STANDARD.decode(t).ok());
    if held.as_deref() != Some(token.as_bytes()) {
        return Err("invalid bearer token, token does not match the secret's".into());
    }
    let account = Reference {
        name: claims.service_account_name.clone(),
        uid: claims.service_account_uid.clone(),
    };
    check_bound(state, "serviceaccounts", ns, &account)?;
    Ok(Authenticated {
        identity: service_account_identity(ns, &account.name),
        uid: account.uid,
        extra: BTreeMap::new(),
        audiences: audiences.to_vec(),
        // Good while its secret is; verified again after the cache's ten seconds.
        expires: now + chrono::TimeDelta::days(365),
    })
}

/// That the object a token names still exists, with the UID the token names, and is not
/// being deleted.
fn check_bound(
    state: &State,
    resource: &str,
    namespace: &str,
    reference: &Reference,
) -> Result<(), String> {
    let what = resource.trim_end_matches('s');
    let object = state
        .group
        .get(resource, &ObjectKey::new(namespace, &reference.name))
        .ok_or_else(|| {
            format!(
                "invalid bearer token, {what} \"{}\" not found",
                reference.name
            )
        })?;
    if *object.meta.uid != *reference.uid {
        return Err(format!(
            "invalid bearer token, {what} UID ({}) does not match claim ({})",
            object.meta.uid, reference.uid
        ));
    }
    if object.meta.deletion_timestamp.is_some() && resource != "pods" {
        return Err(format!(
            "invalid bearer token, {what} \"{}\" is being deleted",
            reference.name
        ));
    }
    Ok(())
}
