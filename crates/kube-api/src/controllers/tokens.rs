//! kube-controller-manager's tokens controller, in-process: a Secret of type
//! `kubernetes.io/service-account-token` that names a service account (annotation
//! `kubernetes.io/service-account.name`) gets a legacy token of that account, the cluster's
//! CA and its namespace (`token`, `ca.crt`, `namespace`), and the account's UID in its
//! annotations; one whose account does not exist (or has another UID than the one it names)
//! is deleted. A token Secret made before its account is filled when the account comes.
//!
//! Such tokens are what a long-lived credential is in Kubernetes since bound tokens became
//! the default: `kubectl create secret generic --type=kubernetes.io/service-account-token`,
//! Helm charts of that era, and CAPV's ProviderServiceAccounts rely on it.

use crate::sa_tokens::TOKEN_SECRET_TYPE;
use crate::sa_tokens::{LegacyClaims, LEGACY_ISSUER, TOKEN_SECRET_ACCOUNT as ACCOUNT_NAME};
use crate::state::State;
use crate::system_writer::SystemWriter;
use base64::Engine;
use infrasim_store::{ObjectKey, Read, ReadAt};
use serde_json::{json, Value};
use std::sync::Arc;

/// The annotation the controller adds with the account's UID.
const ACCOUNT_UID: &str = "kubernetes.io/service-account.uid";

/// Fills (or deletes) token Secret `namespace/name`, as the tokens controller's sync does.
pub(crate) fn populate_secret(state: &Arc<State>, namespace: &str, name: &str) {
    let Some(stored) = state.group.get("secrets", &ObjectKey::new(namespace, name)) else {
        return;
    };
    let Ok(secret) = stored.to_value() else {
        return;
    };
    if secret["type"] != TOKEN_SECRET_TYPE || stored.meta.deletion_timestamp.is_some() {
        return;
    }
    let filled = ["token", "ca.crt", "namespace"]
        .iter()
        .all(|k| secret["data"].get(k).is_some());
    if filled {
        return;
    }
    let annotations = &secret["metadata"]["annotations"];
    let account_name = annotations[ACCOUNT_NAME].as_str().unwrap_or_default();
    let wanted_uid = annotations[ACCOUNT_UID].as_str();
    let writer = SystemWriter::controller(state, "tokens-controller");
    let account = state
        .group
        .get("serviceaccounts", &ObjectKey::new(namespace, account_name))
        .filter(|a| wanted_uid.is_none_or(|uid| *a.meta.uid == *uid));
    let Some(account) = account else {
        // No such account (any more): the token could never be used.
        if let Err(e) = writer.delete("secrets", namespace, name) {
            tracing::warn!(namespace, name, error = %e.message, "deleting an orphaned token secret");
        }
        return;
    };
    let claims = LegacyClaims {
        iss: LEGACY_ISSUER.into(),
        namespace: namespace.into(),
        secret_name: name.into(),
        service_account_name: account_name.into(),
        service_account_uid: account.meta.uid.to_string(),
        sub: format!("system:serviceaccount:{namespace}:{account_name}"),
    };
    let token = match state.token_issuer().and_then(|i| {
        i.issue(&claims)
            .map_err(|e| crate::status::ApiError::internal(e.to_string()))
    }) {
        Ok(token) => token,
        Err(e) => {
            tracing::warn!(namespace, name, error = %e.message, "signing a legacy token");
            return;
        }
    };
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let mut next = secret.clone();
    next["metadata"]["annotations"][ACCOUNT_UID] = json!(account.meta.uid.to_string());
    let data = &mut next["data"];
    if !data.is_object() {
        *data = json!({});
    }
    data["token"] = json!(b64(&token));
    data["ca.crt"] = json!(b64(&state.ca.cert_pem));
    data["namespace"] = json!(b64(namespace));
    let read = Read {
        object: &stored,
        value: &secret,
    };
    match writer.update("secrets", next, read) {
        // Changed meanwhile: the write that changed it calls again.
        Err(e) if e.code == 409 => {}
        Err(e) => tracing::warn!(namespace, name, error = %e.message, "filling a token secret"),
        Ok(_) => {}
    }
}

/// Fills the token Secrets of `namespace` that name a service account just created.
pub(crate) fn populate_for_account(state: &Arc<State>, namespace: &str, account: &str) {
    let Ok(snapshot) = state.group.snapshot("secrets", ReadAt::Latest) else {
        return;
    };
    let start = ObjectKey::new(namespace, "");
    let waiting: Vec<String> = snapshot
        .objects
        .range(start..)
        .take_while(|(key, _)| &*key.namespace == namespace)
        // Only token Secrets (a selectable field, read without decoding) are decoded.
        .filter(|(_, object)| object.field("type") == Some(TOKEN_SECRET_TYPE))
        .filter_map(|(key, object)| {
            let v: Value = object.to_value().ok()?;
            let names = v["metadata"]["annotations"][ACCOUNT_NAME].as_str() == Some(account);
            names.then(|| key.name.to_string())
        })
        .collect();
    for name in waiting {
        populate_secret(state, namespace, &name);
    }
}
