//! One session with one vCenter, shared by every task that uses it. A vCenter forgets idle
//! sessions (30 minutes by default) and forgets them all when it restarts; rather than a
//! keep-alive timer per session, a call that gets `NotAuthenticated` logs in again once and
//! is sent again, so a controller never sees an expired session.

use crate::xml::{escape, Answer, Moref, Val};
use crate::{Error, Result, Trust};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::connect::HttpConnector;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::RwLock;
use std::time::Duration;

/// Where a vCenter is and who logs in to it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Credentials {
    /// `host:port`, `host` (port 443) or an `https://` URL; the SOAP path is `/sdk`.
    pub server: String,
    pub username: String,
    pub password: String,
    pub trust: Trust,
}

impl Credentials {
    /// The SOAP endpoint's URL.
    pub fn url(&self) -> Result<http::Uri> {
        let server = self.server.trim().trim_end_matches('/');
        let server = server.strip_prefix("https://").unwrap_or(server);
        if server.contains("://") {
            return Err(Error::Config(format!(
                "{server:?}: only https:// servers are spoken to"
            )));
        }
        let host = server.strip_suffix("/sdk").unwrap_or(server);
        format!("https://{host}/sdk")
            .parse()
            .map_err(|e| Error::Config(format!("server {:?}: {e}", self.server)))
    }
}

/// The managers a session uses, from RetrieveServiceContent.
#[derive(Debug, Clone)]
pub struct ServiceContent {
    pub root_folder: Moref,
    pub property_collector: Moref,
    pub view_manager: Moref,
    pub session_manager: Moref,
    pub search_index: Moref,
    pub custom_fields_manager: Option<Moref>,
    /// `about.apiVersion`, sent back in SOAPAction as vCenter expects.
    pub api_version: String,
}

type Https = hyper_rustls::HttpsConnector<HttpConnector>;

/// A logged-in session; cheap to share behind an `Arc`.
pub struct Client {
    http: hyper_util::client::legacy::Client<Https, Full<Bytes>>,
    url: http::Uri,
    credentials: Credentials,
    content: ServiceContent,
    cookie: RwLock<Option<String>>,
    logins: AtomicU64,
    /// Logged out for good: no call logs in again.
    closed: std::sync::atomic::AtomicBool,
    /// The vSphere Automation (REST) session's token, once one was asked for.
    pub(crate) rest_token: RwLock<Option<String>>,
}

/// How long one call may take before it is abandoned.
const CALL_TIMEOUT: Duration = Duration::from_secs(60);

impl Client {
    /// Connects, reads the service content and logs in.
    pub async fn connect(credentials: Credentials) -> Result<Client> {
        let url = credentials.url()?;
        let tls = credentials.trust.client_config()?;
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_only()
            .enable_http1()
            .build();
        let http =
            hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
                .pool_idle_timeout(Duration::from_secs(90))
                .build(connector);
        let mut client = Client {
            http,
            url,
            credentials,
            content: ServiceContent {
                root_folder: Moref::new("Folder", ""),
                property_collector: Moref::new("PropertyCollector", ""),
                view_manager: Moref::new("ViewManager", ""),
                session_manager: Moref::new("SessionManager", ""),
                search_index: Moref::new("SearchIndex", ""),
                custom_fields_manager: None,
                api_version: "7.0".into(),
            },
            cookie: RwLock::new(None),
            logins: AtomicU64::new(0),
            closed: Default::default(),
            rest_token: RwLock::new(None),
        };
        client.content = client.service_content().await?;
        client.login().await?;
        Ok(client)
    }

    pub fn content(&self) -> &ServiceContent {
        &self.content
    }

    /// Logins made so far: one, plus one per session the server forgot.
    pub fn logins(&self) -> u64 {
        self.logins.load(Ordering::Relaxed)
    }

    /// Ends the session for good: later calls fail rather than log in again.
    pub async fn logout(&self) -> Result<()> {
        self.closed.store(true, Ordering::Relaxed);
        let body = format!(
            r#"<Logout xmlns="urn:vim25">{}</Logout>"#,
            self.content.session_manager.element("_this")
        );
        self.post(&body).await.map(drop)
    }

    /// Calls a method (`body` is its element, e.g. `<PowerOffVM_Task ...>`), logging in
    /// again once if the server no longer knows the session (unless logged out).
    pub async fn call(&self, body: &str) -> Result<Answer> {
        match self.post(body).await {
            Err(e)
                if e.fault_kind() == Some("NotAuthenticated")
                    && !self.closed.load(Ordering::Relaxed) =>
            {
                tracing::info!(server = %self.url, "the vCenter forgot the session; logging in again");
                self.login().await?;
                self.post(body).await
            }
            other => other,
        }
    }

    async fn service_content(&self) -> Result<ServiceContent> {
        let answer = self.post(r#"<RetrieveServiceContent xmlns="urn:vim25"><_this type="ServiceInstance">ServiceInstance</_this></RetrieveServiceContent>"#).await?;
        let content = answer.returnval("RetrieveServiceContent")?;
        let moref = |name: &str| content.field(name).and_then(Val::moref).cloned();
        let required = |name: &str| {
            moref(name).ok_or_else(|| Error::Answer(format!("the service content has no {name}")))
        };
        Ok(ServiceContent {
            root_folder: required("rootFolder")?,
            property_collector: required("propertyCollector")?,
            view_manager: required("viewManager")?,
            session_manager: required("sessionManager")?,
            search_index: required("searchIndex")?,
            custom_fields_manager: moref("customFieldsManager"),
            api_version: content
                .field("about")
                .and_then(|a| a.field("apiVersion"))
                .and_then(Val::text)
                .unwrap_or("7.0")
                .to_string(),
        })
    }

    async fn login(&self) -> Result<()> {
        // A fresh session: the old cookie, if any, must not be sent with the login.
        self.set_cookie(None);
        self.logins.fetch_add(1, Ordering::Relaxed);
        let c = &self.credentials;
        self.post(&format!(
            r#"<Login xmlns="urn:vim25">{}<userName>{}</userName><password>{}</password></Login>"#,
            self.content.session_manager.element("_this"),
            escape(&c.username),
            escape(&c.password)
        ))
        .await?;
        match self.cookie() {
            Some(_) => Ok(()),
            None => Err(Error::Answer("Login set no session cookie".into())),
        }
    }

    fn cookie(&self) -> Option<String> {
        self.cookie.read().map(|c| c.clone()).unwrap_or_default()
    }

    /// The session cookie (`name=value`), for the services that share the vim session (PBM).
    pub(crate) fn session_cookie(&self) -> Option<String> {
        self.cookie()
    }

    fn set_cookie(&self, cookie: Option<String>) {
        if let Ok(mut c) = self.cookie.write() {
            *c = cookie;
        }
    }

    /// One POST to `/sdk`.
    async fn post(&self, body: &str) -> Result<Answer> {
        let envelope = envelope("", body);
        let mut request = http::Request::post(self.url.clone())
            .header(http::header::CONTENT_TYPE, "text/xml; charset=utf-8")
            .header(
                "SOAPAction",
                format!("\"urn:vim25/{}\"", self.content.api_version),
            );
        if let Some(cookie) = self.cookie() {
            request = request.header(http::header::COOKIE, cookie);
        }
        let request = request
            .body(Full::new(Bytes::from(envelope)))
            .map_err(|e| Error::Config(e.to_string()))?;
        let (status, headers, bytes) = self.send(request).await?;
        if let Some(set) = headers.get(http::header::SET_COOKIE) {
            let set = set.to_str().unwrap_or_default();
            self.set_cookie(Some(set.split(';').next().unwrap_or(set).to_string()));
        }
        answer(&self.url.to_string(), status, &bytes)
    }
}

/// A SOAP envelope around `body`, with `header` (SOAP header elements; none when empty).
pub(crate) fn envelope(header: &str, body: &str) -> String {
    let header = match header {
        "" => String::new(),
        h => format!("<soapenv:Header>{h}</soapenv:Header>"),
    };
    format!(
        r#"<?xml version="1.0" encoding="UTF-8"?><soapenv:Envelope xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/" xmlns:xsd="http://www.w3.org/2001/XMLSchema" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">{header}<soapenv:Body>{body}</soapenv:Body></soapenv:Envelope>"#
    )
}

/// A SOAP answer from `url`: its returned values, its fault, or the HTTP status when the
/// body is no SOAP at all.
pub(crate) fn answer(url: &str, status: http::StatusCode, bytes: &[u8]) -> Result<Answer> {
    match Answer::new(&String::from_utf8_lossy(bytes)) {
        Err(Error::Answer(_)) if !status.is_success() => {
            Err(Error::Transport(format!("{url}: HTTP {status}")))
        }
        other => other,
    }
}

impl Client {
    /// The vCenter's `https://host:port` (the SOAP URL without `/sdk`).
    pub(crate) fn base(&self) -> String {
        let url = self.url.to_string();
        url.strip_suffix("/sdk").unwrap_or(&url).to_string()
    }

    pub(crate) fn credentials(&self) -> &Credentials {
        &self.credentials
    }

    /// Sends `request` (SOAP or REST) with the call timeout; the status, headers and body.
    pub(crate) async fn send(
        &self,
        request: http::Request<Full<Bytes>>,
    ) -> Result<(http::StatusCode, http::HeaderMap, Bytes)> {
        let exchange = async {
            let response = self
                .http
                .request(request)
                .await
                .map_err(|e| Error::Transport(format!("{}: {}", self.url, chain(&e))))?;
            let status = response.status();
            let headers = response.headers().clone();
            let body = response
                .into_body()
                .collect()
                .await
                .map_err(|e| Error::Transport(format!("{}: {e}", self.url)))?
                .to_bytes();
            Ok((status, headers, body))
        };
        tokio::time::timeout(CALL_TIMEOUT, exchange)
            .await
            .map_err(|_| Error::Transport(format!("{}: no answer in {CALL_TIMEOUT:?}", self.url)))?
    }
}

/// An error with its causes, as one line (hyper's errors hide the useful part in a source).
fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn credentials(server: &str) -> Credentials {
        Credentials {
            server: server.into(),
            username: "u".into(),
            password: "p".into(),
            trust: Trust::Thumbprint("0".repeat(64)),
        }
    }

    #[test]
    fn servers_are_read_as_host_port_or_url() {
        let url = |s: &str| credentials(s).url().map(|u| u.to_string());
        assert_eq!(url("127.0.0.1:8989").unwrap(), "https://127.0.0.1:8989/sdk");
        assert_eq!(
            url("https://vc.example.com/sdk").unwrap(),
            "https://vc.example.com/sdk"
        );
        assert_eq!(url("vc.example.com").unwrap(), "https://vc.example.com/sdk");
        assert!(url("http://vc.example.com").is_err());
    }
}
