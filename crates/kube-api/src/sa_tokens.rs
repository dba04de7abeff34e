//! Service-account tokens as kube-apiserver issues them: JWTs signed with the cluster's
//! service-account key (kubeadm's `sa.key`, which Cluster API supplies as the `<cluster>-sa`
//! Secret), carrying the audiences, expiry and bound object the TokenRequest asked for.
//!
//! A token is verifiable from itself and the key: no table of issued tokens is kept, so the
//! tokens stay valid across restarts where the key is kept, and one cluster's tokens never
//! open another (each cluster has its own key). On use, the claims are checked as
//! kube-apiserver's service-account authenticator checks them: signature, issuer, time,
//! audience, and that the service account (and the pod, secret or node the token is bound
//! to) still exists with the UID the token names.

use crate::auth::Identity;
use crate::pki::{PkiError, SigningKey};
use base64::Engine;
use chrono::{DateTime, Utc};
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The issuer (`iss`) of every token: kube-apiserver's `--service-account-issuer` as kubeadm
/// sets it. It is also the one audience the API server accepts (`--api-audiences` defaults
/// to the issuer).
pub const ISSUER: &str = "https://kubernetes.default.svc.cluster.local";

/// How far a token's times may be off the server's clock (go-jose's default leeway, which
/// kube-apiserver's validator uses).
pub(crate) const LEEWAY_SECONDS: i64 = 60;

/// A service-account key, ready to sign and verify tokens.
pub struct TokenIssuer {
    key_id: String,
    algorithm: Algorithm,
    encoding: EncodingKey,
    decoding: DecodingKey,
}

impl std::fmt::Debug for TokenIssuer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenIssuer")
            .field("key_id", &self.key_id)
            .field("algorithm", &self.algorithm)
            .finish_non_exhaustive()
    }
}

/// The claims of a token, as kube-apiserver writes them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claims {
    pub aud: Vec<String>,
    pub exp: i64,
    pub iat: i64,
    pub iss: String,
    #[serde(default)]
    pub jti: String,
    #[serde(rename = "kubernetes.io")]
    pub kubernetes: KubernetesClaims,
    pub nbf: i64,
    pub sub: String,
}

/// The private `kubernetes.io` claim: whose token it is and what it is bound to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KubernetesClaims {
    pub namespace: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<Reference>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod: Option<Reference>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<Reference>,
    pub serviceaccount: Reference,
}

/// The type of a Secret that holds a legacy token, and the annotation naming its account.
pub const TOKEN_SECRET_TYPE: &str = "kubernetes.io/service-account-token";
pub const TOKEN_SECRET_ACCOUNT: &str = "kubernetes.io/service-account.name";

/// The issuer of a legacy token: one kube-controller-manager's tokens controller writes into
/// a Secret of type `kubernetes.io/service-account-token`.
pub const LEGACY_ISSUER: &str = "kubernetes/serviceaccount";

/// The claims of a legacy token, as the tokens controller writes them: no audience, no
/// expiry; the Secret that holds it is its lifetime.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LegacyClaims {
    pub iss: String,
    #[serde(rename = "kubernetes.io/serviceaccount/namespace")]
    pub namespace: String,
    #[serde(rename = "kubernetes.io/serviceaccount/secret.name")]
    pub secret_name: String,
    #[serde(rename = "kubernetes.io/serviceaccount/service-account.name")]
    pub service_account_name: String,
    #[serde(rename = "kubernetes.io/serviceaccount/service-account.uid")]
    pub service_account_uid: String,
    pub sub: String,
}

/// An object a token names, by name and UID.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reference {
    pub name: String,
    pub uid: String,
}

/// Who a verified token speaks for, with what kube-apiserver adds for TokenReview.
#[derive(Debug, Clone)]
pub struct Authenticated {
    pub identity: Identity,
    /// The service account's UID.
    pub uid: String,
    /// `authentication.kubernetes.io/…` facts: the token's ID, the pod and node bound.
    pub extra: BTreeMap<String, Vec<String>>,
    /// Those of the asked-for audiences the token is valid for.
    pub audiences: Vec<String>,
    pub expires: DateTime<Utc>,
}

impl TokenIssuer {
    /// An issuer signing with `key`: RS256 for an RSA key (what Cluster API generates),
    /// ES256 or ES384 for an ECDSA one (what infrasim generates).
    pub fn new(key: &SigningKey) -> Result<Self, PkiError> {
        use rcgen::PublicKeyData;
        let pair = rcgen::KeyPair::from_pem(&key.private_pem)?;
        let invalid = |e: jsonwebtoken::errors::Error| PkiError::Invalid(e.to_string());
        let private = key.private_pem.as_bytes();
        let public = key.public_pem.as_bytes();
        let (algorithm, encoding, decoding) = if pair.algorithm() == &rcgen::PKCS_RSA_SHA256 {
            (
                Algorithm::RS256,
                EncodingKey::from_rsa_pem(private).map_err(invalid)?,
                DecodingKey::from_rsa_pem(public).map_err(invalid)?,
            )
        } else {
            let algorithm = if pair.algorithm() == &rcgen::PKCS_ECDSA_P384_SHA384 {
                Algorithm::ES384
            } else {
                Algorithm::ES256
            };
            (
                algorithm,
                EncodingKey::from_ec_pem(private).map_err(invalid)?,
                DecodingKey::from_ec_pem(public).map_err(invalid)?,
            )
        };
        // kube-apiserver's key ID: the SHA-256 of the public key's DER, base64url.
        let digest = ring::digest::digest(&ring::digest::SHA256, &pair.subject_public_key_info());
        Ok(TokenIssuer {
            key_id: base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(digest.as_ref()),
            algorithm,
            encoding,
            decoding,
        })
    }

    /// A signed token carrying `claims` (a bound token's [`Claims`], or [`LegacyClaims`]).
    pub fn issue<C: Serialize>(&self, claims: &C) -> Result<String, PkiError> {
        let header = Header {
            typ: None,
            kid: Some(self.key_id.clone()),
            ..Header::new(self.algorithm)
        };
        jsonwebtoken::encode(&header, claims, &self.encoding)
            .map_err(|e| PkiError::Invalid(e.to_string()))
    }

    /// The claims of `token` if this key signed it; times and audiences are the caller's
    /// to check (against the server's clock, not the machine's).
    pub fn verify(&self, token: &str) -> Result<Claims, String> {
        self.verify_as(token)
    }

    /// The claims of a legacy `token` if this key signed it.
    pub fn verify_legacy(&self, token: &str) -> Result<LegacyClaims, String> {
        self.verify_as(token)
    }

    fn verify_as<C: serde::de::DeserializeOwned>(&self, token: &str) -> Result<C, String> {
        let mut validation = Validation::new(self.algorithm);
        validation.validate_exp = false;
        validation.validate_nbf = false;
        validation.validate_aud = false;
        validation.required_spec_claims.clear();
        jsonwebtoken::decode::<C>(token, &self.decoding, &validation)
            .map(|data| data.claims)
            .map_err(|e| e.to_string())
    }
}

/// Whether `token` has a JWT's shape (three base64url parts), so is worth verifying.
pub fn looks_like_jwt(token: &str) -> bool {
    token.split('.').count() == 3 && token.starts_with("ey")
}

/// The identity kube-apiserver gives service account `namespace/name`.
pub fn service_account_identity(namespace: &str, name: &str) -> Identity {
    Identity {
        user: format!("system:serviceaccount:{namespace}:{name}"),
        groups: vec![
            "system:serviceaccounts".into(),
            format!("system:serviceaccounts:{namespace}"),
            "system:authenticated".into(),
        ],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_legacy_token_verifies_only_as_one_and_only_with_its_key() {
        let key = SigningKey::generate().expect("a key");
        let issuer = TokenIssuer::new(&key).expect("an issuer");
        let claims = LegacyClaims {
            iss: LEGACY_ISSUER.into(),
            namespace: "ns".into(),
            secret_name: "robot-token".into(),
            service_account_name: "robot".into(),
            service_account_uid: "uid-1".into(),
            sub: "system:serviceaccount:ns:robot".into(),
        };
        let token = issuer.issue(&claims).expect("a token");
        assert!(looks_like_jwt(&token));
        assert_eq!(issuer.verify_legacy(&token), Ok(claims));
        // Not a bound token: it has no audience or expiry.
        assert!(issuer.verify(&token).is_err());
        let other = TokenIssuer::new(&SigningKey::generate().expect("a key")).expect("an issuer");
        assert!(other.verify_legacy(&token).is_err());
    }
}
