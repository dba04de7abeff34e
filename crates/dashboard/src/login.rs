//! Who may look: one-time login links, and the sessions they open.
//!
//! A link carries a token `ID.SECRET`, shaped like kubeadm's bootstrap tokens. Minting one
//! writes a Secret of type [`SECRET_TYPE`] in `kube-system`, so whoever the plane lets create
//! Secrets there (its administrators) can mint one from any process holding a kubeconfig
//! (`infrasim dashboard`), and nobody else can. Redeeming deletes that Secret with a
//! precondition on its UID and resourceVersion: two uses of one link cannot both succeed,
//! and a link lost in a terminal's scrollback is worth nothing once used or expired.
//!
//! A redeemed link opens a session: a random cookie the dashboard keeps in memory for
//! [`SESSION_LIFETIME`]. Sessions end with the process; links, kept in the plane, do not.

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DeleteParams, ListParams, PostParams, Preconditions};
use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Where login Secrets and the dashboard's address live.
pub const NAMESPACE: &str = "kube-system";
/// The type of a login Secret.
pub const SECRET_TYPE: &str = "infrasim.dev/dashboard-login";
/// The label every login Secret carries, to find the expired ones.
pub const LABEL: &str = "infrasim.dev/dashboard-login";
/// The ConfigMap holding the dashboard's address (`data.url`), for `infrasim dashboard`.
pub const CONFIG_MAP: &str = "infrasim-dashboard";
/// How long a link stays usable: a working day, so the banner's link still opens the page
/// after lunch; one use in any case.
pub const LINK_LIFETIME: chrono::Duration = chrono::Duration::hours(8);
/// How long a session lasts.
pub const SESSION_LIFETIME: Duration = Duration::from_secs(12 * 3600);
/// The session cookie's name.
pub const COOKIE: &str = "infrasim-dashboard";

const ID_LEN: usize = 6;
const SECRET_LEN: usize = 32;

/// Why a login was refused or a link could not be made.
#[derive(Debug, thiserror::Error)]
pub enum LoginError {
    #[error("the login link is malformed")]
    Malformed,
    #[error("the login link was used already, or never existed")]
    Unknown,
    #[error("the login link expired at {0}")]
    Expired(String),
    #[error("this plane serves no dashboard (no ConfigMap {NAMESPACE}/{CONFIG_MAP})")]
    NoDashboard,
    #[error(transparent)]
    Plane(#[from] kube::Error),
}

/// A login token, `ID.SECRET` (lower-case letters and digits).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Token {
    id: String,
    secret: String,
}

impl Token {
    /// A fresh token from the operating system's randomness (two version-4 UUIDs).
    pub fn generate() -> Token {
        let id = uuid::Uuid::new_v4().simple().to_string();
        let secret = uuid::Uuid::new_v4().simple().to_string();
        Token {
            id: id[..ID_LEN].to_string(),
            secret: secret[..SECRET_LEN].to_string(),
        }
    }

    /// Reads a token as a link carries it.
    pub fn parse(text: &str) -> Option<Token> {
        let (id, secret) = text.split_once('.')?;
        let fits = |s: &str, len| {
            s.len() == len
                && s.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        };
        (fits(id, ID_LEN) && fits(secret, SECRET_LEN)).then(|| Token {
            id: id.into(),
            secret: secret.into(),
        })
    }

    /// The name of the Secret that holds it.
    pub fn secret_name(&self) -> String {
        format!("infrasim-dashboard-login-{}", self.id)
    }
}

impl std::fmt::Display for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.id, self.secret)
    }
}

/// The login Secret for `token`, usable until `expires`.
fn login_secret(token: &Token, expires: DateTime<Utc>) -> Secret {
    let data = BTreeMap::from([
        ("token-id".to_string(), token.id.clone()),
        ("token-secret".to_string(), token.secret.clone()),
        ("expiration".to_string(), expires.to_rfc3339()),
    ]);
    Secret {
        metadata: ObjectMeta {
            name: Some(token.secret_name()),
            namespace: Some(NAMESPACE.into()),
            labels: Some(BTreeMap::from([(LABEL.to_string(), "true".to_string())])),
            ..Default::default()
        },
        type_: Some(SECRET_TYPE.into()),
        string_data: Some(data),
        ..Default::default()
    }
}

/// A string field of a Secret's data, decoded.
fn field(secret: &Secret, key: &str) -> Option<String> {
    let bytes = secret.data.as_ref()?.get(key)?;
    String::from_utf8(bytes.0.clone()).ok()
}

/// Whether `secret` is a login Secret for `token` that is still usable at `now`.
fn check(secret: &Secret, token: &Token, now: DateTime<Utc>) -> Result<(), LoginError> {
    if secret.type_.as_deref() != Some(SECRET_TYPE) {
        return Err(LoginError::Unknown);
    }
    let stored = field(secret, "token-secret").unwrap_or_default();
    if !same(stored.as_bytes(), token.secret.as_bytes()) {
        return Err(LoginError::Unknown);
    }
    let expiration = field(secret, "expiration").unwrap_or_default();
    match DateTime::parse_from_rfc3339(&expiration) {
        Ok(at) if at > now => Ok(()),
        _ => Err(LoginError::Expired(expiration)),
    }
}

/// Compares in time independent of where the inputs differ.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Mints a token in the plane `client` speaks to, first clearing the expired ones.
pub async fn mint(client: &kube::Client) -> Result<Token, LoginError> {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), NAMESPACE);
    let now = Utc::now();
    let listed = secrets
        .list(&ListParams::default().labels(&format!("{LABEL}=true")))
        .await?;
    for old in listed.items {
        let expired = field(&old, "expiration")
            .and_then(|at| DateTime::parse_from_rfc3339(&at).ok())
            .is_none_or(|at| at <= now);
        if let (true, Some(name)) = (expired, old.metadata.name.as_deref()) {
            // Best effort: another minter may have cleared it first.
            let _ = secrets.delete(name, &DeleteParams::default()).await;
        }
    }
    let token = Token::generate();
    let secret = login_secret(&token, now + LINK_LIFETIME);
    secrets.create(&PostParams::default(), &secret).await?;
    Ok(token)
}

/// A fresh login link for the dashboard of the plane `client` speaks to.
pub async fn link(client: &kube::Client) -> Result<String, LoginError> {
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), NAMESPACE);
    let url = maps
        .get_opt(CONFIG_MAP)
        .await?
        .and_then(|m| m.data?.get("url").cloned())
        .ok_or(LoginError::NoDashboard)?;
    let token = mint(client).await?;
    Ok(link_for(&url, &token))
}

/// The login link for `token` at the dashboard whose address is `url`.
pub fn link_for(url: &str, token: &Token) -> String {
    format!("{}/login?token={token}", url.trim_end_matches('/'))
}

/// Records the dashboard's address in the plane, where [`link`] reads it.
pub async fn publish(client: &kube::Client, url: &str) -> Result<(), kube::Error> {
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), NAMESPACE);
    let map = ConfigMap {
        metadata: ObjectMeta {
            name: Some(CONFIG_MAP.into()),
            ..Default::default()
        },
        data: Some(BTreeMap::from([("url".to_string(), url.to_string())])),
        ..Default::default()
    };
    let params = kube::api::PatchParams::apply("infrasim-dashboard").force();
    maps.patch(CONFIG_MAP, &params, &kube::api::Patch::Apply(&map))
        .await?;
    Ok(())
}

/// Uses up the link carrying `token`: checks it, then deletes its Secret on the condition
/// that nobody changed or deleted it meanwhile.
pub async fn redeem(client: &kube::Client, token: &Token) -> Result<(), LoginError> {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), NAMESPACE);
    let secret = secrets
        .get_opt(&token.secret_name())
        .await?
        .ok_or(LoginError::Unknown)?;
    check(&secret, token, Utc::now())?;
    let params = DeleteParams {
        preconditions: Some(Preconditions {
            uid: secret.metadata.uid.clone(),
            resource_version: secret.metadata.resource_version.clone(),
        }),
        ..Default::default()
    };
    match secrets.delete(&token.secret_name(), &params).await {
        Ok(_) => Ok(()),
        // Deleted or changed since it was read: another redemption won.
        Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => Err(LoginError::Unknown),
        Err(e) => Err(e.into()),
    }
}

/// The open sessions, by cookie value.
#[derive(Debug, Default)]
pub struct Sessions {
    open: Mutex<HashMap<String, Instant>>,
}

impl Sessions {
    /// Opens a session; the cookie value that names it.
    pub fn open(&self, now: Instant) -> String {
        let id = format!(
            "{}{}",
            uuid::Uuid::new_v4().simple(),
            uuid::Uuid::new_v4().simple()
        );
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        open.retain(|_, until| *until > now);
        open.insert(id.clone(), now + SESSION_LIFETIME);
        id
    }

    /// Whether the request's `Cookie` header names an open session.
    pub fn admits(&self, cookie_header: Option<&str>, now: Instant) -> bool {
        let Some(value) = cookie_header.and_then(session_cookie) else {
            return false;
        };
        let open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        open.get(value).is_some_and(|until| *until > now)
    }
}

/// The session cookie's value in a `Cookie` header.
fn session_cookie(header: &str) -> Option<&str> {
    header.split(';').find_map(|pair| {
        let (name, value) = pair.trim().split_once('=')?;
        (name == COOKIE).then_some(value)
    })
}

/// The `Set-Cookie` value for session `id`: sent back only over HTTPS, never to scripts,
/// never with another site's requests.
pub fn set_cookie(id: &str) -> String {
    format!(
        "{COOKIE}={id}; Path=/; Max-Age={}; Secure; HttpOnly; SameSite=Strict",
        SESSION_LIFETIME.as_secs()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::ByteString;

    fn stored(token: &Token, expires: DateTime<Utc>) -> Secret {
        // What the plane returns: stringData folded into data.
        let mut secret = login_secret(token, expires);
        let data = secret.string_data.take().unwrap_or_default();
        secret.data = Some(
            data.into_iter()
                .map(|(k, v)| (k, ByteString(v.into_bytes())))
                .collect(),
        );
        secret
    }

    #[test]
    fn a_token_reads_back_as_written_and_nothing_else_reads() {
        let token = Token::generate();
        assert_eq!(Token::parse(&token.to_string()), Some(token.clone()));
        assert!(token.secret_name().starts_with("infrasim-dashboard-login-"));
        for bad in [
            "",
            "abc",
            "abcdef.short",
            "ABCDEF.0123456789abcdef0123456789abcdef",
        ] {
            assert_eq!(Token::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_login_secret_admits_its_token_until_it_expires() {
        let token = Token::generate();
        let now = Utc::now();
        let secret = stored(&token, now + chrono::Duration::minutes(5));
        assert!(check(&secret, &token, now).is_ok());
        let later = now + chrono::Duration::minutes(6);
        assert!(matches!(
            check(&secret, &token, later),
            Err(LoginError::Expired(_))
        ));
        let other = Token::generate();
        assert!(matches!(
            check(&secret, &other, now),
            Err(LoginError::Unknown)
        ));
        let mut plain = secret.clone();
        plain.type_ = Some("Opaque".into());
        assert!(matches!(
            check(&plain, &token, now),
            Err(LoginError::Unknown)
        ));
    }

    #[test]
    fn a_session_lasts_its_lifetime_and_only_its_cookie_opens_it() {
        let sessions = Sessions::default();
        let start = Instant::now();
        let id = sessions.open(start);
        let header = format!("theme=dark; {COOKIE}={id}");
        assert!(sessions.admits(Some(&header), start));
        assert!(!sessions.admits(Some(&format!("{COOKIE}=x{id}")), start));
        assert!(!sessions.admits(None, start));
        let after = start + SESSION_LIFETIME + Duration::from_secs(1);
        assert!(!sessions.admits(Some(&header), after));
        assert!(set_cookie(&id).contains("HttpOnly; SameSite=Strict"));
    }
}
