//! Authentication: who is asking. A client certificate signed by the server's CA names a user
//! (CN) and groups (O); a bearer token is one registered with the server, or a
//! service-account JWT this server's key signed (`sa_tokens`), until it expires. Requests with
//! neither are refused with 401. What an identity may do is `authz`'s question.

use chrono::{DateTime, Utc};
use rustls::pki_types::CertificateDer;
use std::collections::HashMap;
use std::sync::RwLock;

/// An authenticated user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub user: String,
    pub groups: Vec<String>,
}

impl Identity {
    /// Reads CN and O from a verified client certificate.
    pub fn from_certificate(cert: &CertificateDer<'_>) -> Option<Identity> {
        let (_, parsed) = x509_parser::parse_x509_certificate(cert.as_ref()).ok()?;
        let subject = parsed.subject();
        let user = subject
            .iter_common_name()
            .next()
            .and_then(|cn| cn.as_str().ok())?
            .to_string();
        let mut groups: Vec<String> = subject
            .iter_organization()
            .filter_map(|o| o.as_str().ok().map(str::to_string))
            .collect();
        groups.push("system:authenticated".into());
        Some(Identity { user, groups })
    }
}

/// A token's identity and, if it expires, when.
type Registered = (Identity, Option<DateTime<Utc>>);

/// Bearer tokens the server accepts.
#[derive(Debug, Default)]
pub struct TokenAuthenticator {
    // Read on every token-authenticated request, written when a token is added: an RwLock
    // keeps readers from serializing.
    tokens: RwLock<HashMap<String, Registered>>,
}

impl TokenAuthenticator {
    /// Accepts `token` as `identity` from now on.
    pub fn add(&self, token: &str, identity: Identity) {
        self.insert(token, identity, None);
    }

    /// Accepts `token` as `identity` until `expires`.
    pub fn add_expiring(&self, token: &str, identity: Identity, expires: DateTime<Utc>) {
        self.insert(token, identity, Some(expires));
    }

    fn insert(&self, token: &str, identity: Identity, expires: Option<DateTime<Utc>>) {
        self.tokens
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(token.to_string(), (identity, expires));
    }

    /// The identity `token` was registered with, if it has not expired. Expired tokens are
    /// forgotten.
    pub fn lookup(&self, token: &str, now: DateTime<Utc>) -> Option<Identity> {
        if token.is_empty() {
            return None;
        }
        let expired = {
            let tokens = self.tokens.read().unwrap_or_else(|p| p.into_inner());
            match tokens.get(token)? {
                (identity, None) => return Some(identity.clone()),
                (identity, Some(expires)) if now < *expires => return Some(identity.clone()),
                _ => true,
            }
        };
        if expired {
            self.tokens
                .write()
                .unwrap_or_else(|p| p.into_inner())
                .remove(token);
        }
        None
    }
}

/// The token of an `Authorization: Bearer …` header value.
pub(crate) fn bearer_token(authorization: &str) -> Option<&str> {
    let token = authorization
        .strip_prefix("Bearer ")
        .or_else(|| authorization.strip_prefix("bearer "))?
        .trim();
    (!token.is_empty()).then_some(token)
}
