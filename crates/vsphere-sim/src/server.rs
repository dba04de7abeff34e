//! HTTPS for one simulator: SOAP at `/sdk`, the version documents clients read before
//! they speak SOAP (`/sdk/vimServiceVersions.xml`, `/sdk/vimService.wsdl`), the REST
//! (vAPI) endpoints under `/rest` and `/api`, datastore files under `/folder`, and content
//! library uploads under `/cls/data`.

use crate::simulator::Simulator;
use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rcgen::{CertificateParams, DistinguishedName, DnType, KeyPair, SanType};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::future::Future;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;
use thiserror::Error;
use tokio::net::TcpListener;

/// The largest SOAP request accepted.
pub const MAX_BODY: usize = 16 * 1024 * 1024;

/// A failure to set up TLS or to serve.
#[derive(Debug, Error)]
pub enum ServerError {
    #[error("TLS: {0}")]
    Tls(String),
    #[error("I/O: {0}")]
    Io(#[from] std::io::Error),
    #[error("{0}")]
    Kept(#[from] crate::persist::codec::Corrupt),
}

/// A serving certificate and what clients pin it by.
#[derive(Clone)]
pub struct ServerCert {
    pub cert_pem: String,
    key_pem: String,
    /// SHA-256 of the DER certificate, colon-separated upper-case hex (as govc prints it).
    pub thumbprint_sha256: String,
    /// SHA-1 of the DER certificate, colon-separated upper-case hex.
    pub thumbprint_sha1: String,
}

impl std::fmt::Debug for ServerCert {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerCert")
            .field("thumbprint_sha256", &self.thumbprint_sha256)
            .finish_non_exhaustive()
    }
}

fn colon_hex(bytes: &[u8]) -> String {
    bytes
        .iter()
        .map(|b| format!("{b:02X}"))
        .collect::<Vec<_>>()
        .join(":")
}

impl ServerCert {
    /// A self-signed ECDSA P-256 certificate for the given names and addresses.
    pub fn self_signed(dns: &[&str], ips: &[IpAddr]) -> Result<Self, ServerError> {
        let err = |e: rcgen::Error| ServerError::Tls(e.to_string());
        let key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).map_err(err)?;
        let mut params = CertificateParams::new(Vec::<String>::new()).map_err(err)?;
        params.distinguished_name = DistinguishedName::new();
        params
            .distinguished_name
            .push(DnType::CommonName, "infrasim vcsim");
        params
            .distinguished_name
            .push(DnType::OrganizationName, "infrasim");
        for d in dns {
            params
                .subject_alt_names
                .push(SanType::DnsName((*d).to_string().try_into().map_err(err)?));
        }
        for ip in ips {
            params.subject_alt_names.push(SanType::IpAddress(*ip));
        }
        let cert = params.self_signed(&key).map_err(err)?;
        Ok(ServerCert::with_der(
            cert.pem(),
            key.serialize_pem(),
            cert.der(),
        ))
    }

    /// A certificate (chain, leaf first) and key of the caller's, PEM: for a simulator whose
    /// clients trust a CA of their own rather than a thumbprint.
    /// The private key, PEM (to keep it with a kept simulator).
    pub fn key_pem(&self) -> &str {
        &self.key_pem
    }

    pub fn from_pem(cert_pem: &str, key_pem: &str) -> Result<Self, ServerError> {
        let tls = |e: &dyn std::fmt::Display| ServerError::Tls(e.to_string());
        let leaf = CertificateDer::pem_slice_iter(cert_pem.as_bytes())
            .next()
            .ok_or_else(|| ServerError::Tls("no certificate in the PEM".into()))?
            .map_err(|e| tls(&e))?;
        PrivateKeyDer::from_pem_slice(key_pem.as_bytes()).map_err(|e| tls(&e))?;
        let cert = ServerCert::with_der(cert_pem.to_string(), key_pem.to_string(), &leaf);
        cert.tls_config()?; // refuse a key that does not match now, not at the first client
        Ok(cert)
    }

    fn with_der(cert_pem: String, key_pem: String, der: &[u8]) -> Self {
        ServerCert {
            cert_pem,
            key_pem,
            thumbprint_sha256: colon_hex(ring::digest::digest(&ring::digest::SHA256, der).as_ref()),
            thumbprint_sha1: colon_hex(
                ring::digest::digest(&ring::digest::SHA1_FOR_LEGACY_USE_ONLY, der).as_ref(),
            ),
        }
    }

    fn tls_config(&self) -> Result<Arc<rustls::ServerConfig>, ServerError> {
        let tls = |e: &dyn std::fmt::Display| ServerError::Tls(e.to_string());
        let chain: Vec<CertificateDer<'static>> =
            CertificateDer::pem_slice_iter(self.cert_pem.as_bytes())
                .collect::<Result<_, _>>()
                .map_err(|e| tls(&e))?;
        let key = PrivateKeyDer::from_pem_slice(self.key_pem.as_bytes()).map_err(|e| tls(&e))?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| tls(&e))?
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .map_err(|e| tls(&e))?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Arc::new(config))
    }
}

/// The versions document pyvmomi reads to pick its API version.
pub fn service_versions(api: &str) -> String {
    let prior = [
        "8.0.2.0", "8.0.1.0", "8.0.0.2", "8.0.0.1", "8.0.0.0", "7.0.3.2", "7.0.3.1", "7.0.3.0",
        "7.0.2.1", "7.0.2.0", "7.0.1.1", "7.0.1.0", "7.0.0.2", "7.0.0.1", "7.0.0.0", "6.9.1",
        "6.8.7", "6.7.3", "6.7.2", "6.7.1", "6.7", "6.5", "6.0", "5.5", "5.1", "5.0", "4.1", "4.0",
    ];
    let prior: String = prior
        .iter()
        .filter(|v| **v != api && version_le(v, api))
        .map(|v| format!("<version>{v}</version>"))
        .collect();
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\" ?>\n<namespaces version=\"1.0\">\n <namespace>\n  <name>urn:vim25</name>\n  <version>{api}</version>\n  <priorVersions>{prior}</priorVersions>\n </namespace>\n</namespaces>\n"
    )
}

fn version_le(a: &str, b: &str) -> bool {
    let parse = |s: &str| {
        s.split('.')
            .map(|p| p.parse::<u32>().unwrap_or(0))
            .collect::<Vec<_>>()
    };
    parse(a) <= parse(b)
}

fn reply(status: u16, content_type: &str, body: impl Into<Bytes>) -> Response<Full<Bytes>> {
    let mut resp = Response::new(Full::new(body.into()));
    *resp.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    if let Ok(v) = content_type.parse() {
        resp.headers_mut().insert(http::header::CONTENT_TYPE, v);
    }
    resp
}

/// The request's `Cookie` header, which carries the SOAP session.
fn cookie_of<B>(req: &Request<B>) -> Option<String> {
    req.headers()
        .get(http::header::COOKIE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

/// Handles one HTTP request for a simulator. A kept simulator (see `persist`) answers only
/// once what the request changed is durable, and answers with an error when it could not be
/// kept: a client is never told of a change a restart would lose.
pub async fn handle<B>(sim: &Simulator, req: Request<B>) -> Response<Full<Bytes>>
where
    B: http_body::Body<Data = Bytes>,
    B::Error: std::error::Error + Send + Sync + 'static,
{
    let Some(keeper) = sim.keeper() else {
        return route(sim, req).await;
    };
    let soap = req.uri().path().starts_with("/sdk");
    let (response, durable) = infrasim_store::durability::scope(route(sim, req)).await;
    let failed = match durable.wait().await {
        Err(e) => Some(e.to_string()),
        Ok(()) => keeper.take_error(),
    };
    match failed {
        None => response,
        Some(why) => {
            let why = format!("the change could not be kept: {why}");
            if soap {
                let fault = crate::fault::Fault::system_error(&why);
                reply(500, "text/xml; charset=utf-8", crate::soap::fault(&fault))
            } else {
                reply(500, "text/plain", why)
            }
        }
    }
}

/// Routes one HTTP request to the simulator's front that answers it.
async fn route<B>(sim: &Simulator, req: Request<B>) -> Response<Full<Bytes>>
where
    B: http_body::Body<Data = Bytes>,
    B::Error: std::error::Error + Send + Sync + 'static,
{
    let api = match sim.config().flavor {
        crate::Flavor::VCenter7 => "7.0.3.0",
        _ => "8.0.3.0",
    };
    let path = req.uri().path().trim_end_matches('/').to_string();
    match (req.method().clone(), path.as_str()) {
        (Method::GET, "/sdk/vimServiceVersions.xml") => {
            reply(200, "text/xml; charset=utf-8", service_versions(api))
        }
        (Method::GET, "/sdk/vimService.wsdl") => {
            reply(200, "text/xml; charset=utf-8", service_wsdl(api))
        }
        (method, path) if path == "/folder" || path.starts_with("/folder/") => {
            file_request(sim, &method, path, req).await
        }
        (method, path) if path.starts_with(crate::rest::UPLOAD_PREFIX) => {
            upload_request(sim, &method, path, req).await
        }
        (Method::POST, "/pbm/sdk" | "/pbm") => pbm_request(sim, req).await,
        (_, path) if path == "/redfish" || path.starts_with("/redfish/") => {
            redfish_request(sim, req).await
        }
        (Method::POST, "/sdk") => soap_request(sim, req).await,
        (method, path) if crate::rest::split(path).is_some() => {
            rest_request(sim, &method, path, req).await
        }
        _ => reply(404, "text/plain", "not found"),
    }
}

/// `/sdk/vimService.wsdl`: the service WSDL, which points at `vim.wsdl` and names the API.
fn service_wsdl(api: &str) -> String {
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\" ?>\n<definitions targetNamespace=\"urn:vim25Service\" xmlns=\"http://schemas.xmlsoap.org/wsdl/\" xmlns:interface=\"urn:vim25\">\n <import location=\"vim.wsdl\" namespace=\"urn:vim25\"/>\n <service name=\"VimService\">\n  <port binding=\"interface:VimBinding\" name=\"VimPort\">\n   <soap:address location=\"https://localhost/sdk\" xmlns:soap=\"http://schemas.xmlsoap.org/wsdl/soap/\"/>\n  </port>\n </service>\n</definitions>\n<!-- apiVersion {api} -->\n"
    )
}

/// A file body too large or cut off, answered as a file request is (in plain text).
fn unread_file(why: Unread) -> Response<Full<Bytes>> {
    match why {
        Unread::TooLarge => reply(
            413,
            "text/plain",
            format!("files are limited to {MAX_BODY} bytes"),
        ),
        Unread::Cut => reply(400, "text/plain", "the upload was cut off"),
    }
}

/// A datastore file request (`/folder/...`): GET, HEAD (the GET's length, no body), PUT or
/// DELETE in the session of the request's cookie.
async fn file_request<B>(
    sim: &Simulator,
    method: &Method,
    path: &str,
    req: Request<B>,
) -> Response<Full<Bytes>>
where
    B: http_body::Body<Data = Bytes>,
{
    let cookie = cookie_of(&req);
    let query = req.uri().query().unwrap_or("").to_string();
    let head = method == Method::HEAD;
    let body = match read_body(req.into_body()).await {
        Ok(b) => b,
        Err(why) => return unread_file(why),
    };
    let a = sim.handle_file(method, path, &query, cookie.as_deref(), body);
    let mut resp = reply(
        a.status,
        a.content_type,
        if head { Bytes::new() } else { a.body.clone() },
    );
    if head {
        if let Ok(v) = a.body.len().to_string().parse() {
            resp.headers_mut().insert(http::header::CONTENT_LENGTH, v);
        }
    }
    resp
}

/// A file pushed to a content library upload URL.
async fn upload_request<B>(
    sim: &Simulator,
    method: &Method,
    path: &str,
    req: Request<B>,
) -> Response<Full<Bytes>>
where
    B: http_body::Body<Data = Bytes>,
{
    let headers = req.headers().clone();
    let body = match read_body(req.into_body()).await {
        Ok(b) => b,
        Err(why) => return unread_file(why),
    };
    let a = sim.handle_upload(method, path, &headers, body);
    reply(a.status, "text/plain", a.body)
}

/// A Redfish request (see `bmc`).
async fn redfish_request<B>(sim: &Simulator, req: Request<B>) -> Response<Full<Bytes>>
where
    B: http_body::Body<Data = Bytes>,
{
    use infrasim_redfish::{RedfishError, Reply};
    let (parts, body) = req.into_parts();
    let r = match read_body(body).await {
        Ok(body) => sim.handle_redfish(&infrasim_redfish::Request {
            method: &parts.method,
            path: parts.uri.path(),
            query: parts.uri.query(),
            headers: &parts.headers,
            body: &body,
        }),
        Err(Unread::TooLarge) => Reply::error(&RedfishError::too_large(MAX_BODY)),
        Err(Unread::Cut) => Reply::error(&RedfishError::malformed_json()),
    };
    let mut resp = Response::new(Full::new(Bytes::from(r.body)));
    *resp.status_mut() = http::StatusCode::from_u16(r.status).unwrap_or(http::StatusCode::OK);
    for (name, value) in r.headers {
        if let Ok(v) = http::HeaderValue::from_str(&value) {
            resp.headers_mut().insert(name, v);
        }
    }
    resp
}

/// A storage policy (PBM) SOAP request.
async fn pbm_request<B>(sim: &Simulator, req: Request<B>) -> Response<Full<Bytes>>
where
    B: http_body::Body<Data = Bytes>,
{
    let cookie = cookie_of(&req);
    let body = match read_body(req.into_body()).await {
        Ok(b) => b,
        Err(_) => {
            let f = crate::fault::Fault::invalid_request("the request body was not read");
            return reply(413, "text/xml; charset=utf-8", crate::soap::fault(&f));
        }
    };
    let r = sim.handle_pbm(&String::from_utf8_lossy(&body), cookie.as_deref());
    reply(r.status, "text/xml; charset=utf-8", r.body)
}

/// A vim25 SOAP request (`/sdk`), answered with the session cookie a login sets.
async fn soap_request<B>(sim: &Simulator, req: Request<B>) -> Response<Full<Bytes>>
where
    B: http_body::Body<Data = Bytes>,
{
    let cookie = cookie_of(&req);
    let agent = req
        .headers()
        .get(http::header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let body = match read_body(req.into_body()).await {
        Ok(b) => b,
        Err(Unread::TooLarge) => {
            let f = crate::fault::Fault::invalid_request(&format!(
                "the request body is larger than {MAX_BODY} bytes"
            ));
            return reply(413, "text/xml; charset=utf-8", crate::soap::fault(&f));
        }
        Err(Unread::Cut) => {
            let f = crate::fault::Fault::invalid_request("the request body was cut off");
            return reply(500, "text/xml; charset=utf-8", crate::soap::fault(&f));
        }
    };
    let text = String::from_utf8_lossy(&body);
    let r = sim.handle(&text, cookie.as_deref(), &agent).await;
    sim.count_answer(r.body.len());
    tracing::trace!(request = %text, response = %r.body, status = r.status, "soap");
    let mut resp = reply(r.status, "text/xml; charset=utf-8", r.body);
    if let Some(c) = r.set_cookie.and_then(|c| c.parse().ok()) {
        resp.headers_mut().insert(http::header::SET_COOKIE, c);
    }
    resp
}

/// A REST (vAPI) request, `/rest/...` or `/api/...`.
async fn rest_request<B>(
    sim: &Simulator,
    method: &Method,
    path: &str,
    req: Request<B>,
) -> Response<Full<Bytes>>
where
    B: http_body::Body<Data = Bytes>,
{
    let headers = req.headers().clone();
    let query = req.uri().query().map(str::to_string);
    let body = match read_body(req.into_body()).await {
        Ok(b) => b,
        Err(Unread::TooLarge) => return reply(413, "application/json", ""),
        Err(Unread::Cut) => return reply(400, "application/json", ""),
    };
    match sim.handle_rest(method, path, query.as_deref(), &headers, &body) {
        Some(a) => {
            let cookie = crate::rest::session::login_cookie(method, path, a.status, &a.body);
            let mut resp = reply(a.status, "application/json", a.body);
            if let Some(c) = cookie.and_then(|c| c.parse().ok()) {
                resp.headers_mut().insert(http::header::SET_COOKIE, c);
            }
            resp
        }
        None => reply(404, "text/plain", "not found"),
    }
}

/// Why a request body was not read.
enum Unread {
    TooLarge,
    Cut,
}

/// The request body, up to [`MAX_BODY`]. A larger one is read on and dropped (up to four
/// times the limit) so that a client sending it all before reading the answer (pyvmomi,
/// govmomi) gets the 413 fault rather than a reset connection.
async fn read_body<B>(body: B) -> Result<Bytes, Unread>
where
    B: http_body::Body<Data = Bytes>,
{
    let mut body = std::pin::pin!(body);
    let mut collected = bytes::BytesMut::new();
    let mut seen = 0usize;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|_| Unread::Cut)?;
        let Some(data) = frame.data_ref() else {
            continue;
        };
        seen += data.len();
        if seen > MAX_BODY {
            collected.clear();
            if seen > 4 * MAX_BODY {
                break;
            }
            continue;
        }
        collected.extend_from_slice(data);
    }
    if seen > MAX_BODY {
        return Err(Unread::TooLarge);
    }
    Ok(collected.freeze())
}

/// Serves `sim` over HTTPS on `listener` until `shutdown` completes.
pub async fn serve(
    sim: Simulator,
    listener: TcpListener,
    cert: &ServerCert,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), ServerError> {
    let acceptor = tokio_rustls::TlsAcceptor::from(cert.tls_config()?);
    tokio::pin!(shutdown);
    // Every connection ends when this sender goes (at shutdown, or if this future is
    // dropped): a stopped simulator keeps no connection, and so no state, alive.
    let (_open, open) = tokio::sync::watch::channel(());
    loop {
        let (tcp, _) = tokio::select! {
            _ = &mut shutdown => return Ok(()),
            a = listener.accept() => match a {
                Ok(a) => a,
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let acceptor = acceptor.clone();
        let sim = sim.clone();
        let mut open = open.clone();
        tokio::spawn(async move {
            tokio::select! {
                _ = connection(sim, acceptor, tcp) => {}
                _ = open.changed() => {}
            }
        });
    }
}

/// One client connection: the TLS handshake (at most ten seconds), then HTTP until the client
/// goes.
async fn connection(
    sim: Simulator,
    acceptor: tokio_rustls::TlsAcceptor,
    tcp: tokio::net::TcpStream,
) {
    let _ = tcp.set_nodelay(true);
    let Ok(Ok(tls)) = tokio::time::timeout(Duration::from_secs(10), acceptor.accept(tcp)).await
    else {
        return;
    };
    let service = hyper::service::service_fn(move |req: Request<Incoming>| {
        let sim = sim.clone();
        async move { Ok::<_, std::convert::Infallible>(handle(&sim, req).await) }
    });
    let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    let _ = builder.serve_connection(TokioIo::new(tls), service).await;
}
