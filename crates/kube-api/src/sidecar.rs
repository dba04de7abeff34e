//! A second protocol on an API server's endpoint, as a simulated cluster's endpoint also
//! reaches its etcd: requests whose content type names the sidecar's protocol (gRPC) go to
//! it instead of the API.
//!
//! TLS picks the server certificate before any request is seen, so one handshake serves both:
//! client certificates of either CA are accepted there, and each request is then checked
//! against its own side's CA. An etcd client certificate never identifies a Kubernetes user,
//! and a Kubernetes client certificate never reaches etcd, as with kubeadm's separate CAs.

use bytes::Bytes;
use futures::future::BoxFuture;
use http_body_util::combinators::UnsyncBoxBody;
use hyper::body::Incoming;
use rustls::pki_types::{CertificateDer, UnixTime};
use rustls::server::danger::ClientCertVerifier;
use rustls::server::WebPkiClientVerifier;
use std::sync::Arc;

/// What a sidecar's responses carry.
pub type SidecarBody = UnsyncBoxBody<Bytes, SidecarError>;

/// A sidecar's response body failing mid-stream.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct SidecarError(pub Box<dyn std::error::Error + Send + Sync>);

/// A response of the endpoint: the API's or the sidecar's. (http-body-util's `Either` would
/// do, but its boxed error type trips the compiler's check that connection futures are
/// `Send` for every lifetime.)
pub enum EndpointBody {
    Api(crate::http::Body),
    Sidecar(SidecarBody),
}

impl http_body::Body for EndpointBody {
    type Data = Bytes;
    type Error = SidecarError;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Bytes>, SidecarError>>> {
        match self.get_mut() {
            EndpointBody::Api(b) => std::pin::Pin::new(b)
                .poll_frame(cx)
                .map(|f| f.map(|f| f.map_err(|never| match never {}))),
            EndpointBody::Sidecar(b) => std::pin::Pin::new(b).poll_frame(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            EndpointBody::Api(b) => b.is_end_stream(),
            EndpointBody::Sidecar(b) => b.is_end_stream(),
        }
    }

    fn size_hint(&self) -> http_body::SizeHint {
        match self {
            EndpointBody::Api(b) => b.size_hint(),
            EndpointBody::Sidecar(b) => b.size_hint(),
        }
    }
}

/// Serves one request of the sidecar's protocol.
pub type SidecarService = Arc<
    dyn Fn(http::Request<Incoming>) -> BoxFuture<'static, http::Response<SidecarBody>>
        + Send
        + Sync,
>;

/// A protocol served beside the API on the same endpoint.
#[derive(Clone)]
pub struct Sidecar {
    /// Requests whose `content-type` starts with this go to the sidecar (`application/grpc`).
    pub content_type: &'static str,
    /// The CA (PEM) whose client certificates, and only those, the sidecar serves.
    pub client_ca_pem: String,
    pub service: SidecarService,
    /// Answers a request the sidecar may not serve (no certificate of its CA).
    pub refuse: fn() -> http::Response<SidecarBody>,
}

impl std::fmt::Debug for Sidecar {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sidecar")
            .field("content_type", &self.content_type)
            .finish_non_exhaustive()
    }
}

/// Checks a presented certificate chain against one CA.
#[derive(Debug, Clone)]
pub(crate) struct Issuer {
    verifier: Arc<dyn ClientCertVerifier>,
    /// The CA's subject name (DER), which its certificates name as their issuer.
    subject: Vec<u8>,
}

impl Issuer {
    pub fn new(ca_pem: &str) -> Result<Self, crate::tls::ServeError> {
        let tls_err = |e: &dyn std::fmt::Display| crate::tls::ServeError::Tls(e.to_string());
        let mut roots = rustls::RootCertStore::empty();
        let mut subject = Vec::new();
        for ca in crate::tls::parse_certs(ca_pem)? {
            if subject.is_empty() {
                subject = subject_of(&ca).unwrap_or_default();
            }
            roots.add(ca).map_err(|e| tls_err(&e))?;
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
            .build()
            .map_err(|e| tls_err(&e))?;
        Ok(Issuer { verifier, subject })
    }

    /// Whether `chain` (leaf first) was issued by this CA.
    pub fn issued(&self, chain: &[CertificateDer<'_>]) -> bool {
        let Some((leaf, rest)) = chain.split_first() else {
            return false;
        };
        self.verifier
            .verify_client_cert(leaf, rest, UnixTime::now())
            .is_ok()
    }
}

/// Which of two CAs issued a chain the handshake has verified against both: `(a, b)`.
///
/// When the CAs are named differently (as in every layout kubeadm or Cluster API makes) the
/// leaf's issuer name says which, since the handshake found its issuer by that name and
/// checked the signature: verifying the chain again costs a signature check per connection,
/// which thousands of clusters' connections made a tenth of the process's CPU. With equal
/// names, or a leaf that names neither (an intermediate CA), each chain is verified.
pub(crate) fn issued_by(a: &Issuer, b: &Issuer, chain: &[CertificateDer<'_>]) -> (bool, bool) {
    let Some(leaf) = chain.first() else {
        return (false, false);
    };
    if a.subject != b.subject && !a.subject.is_empty() && !b.subject.is_empty() {
        if let Some(issuer) = issuer_of(leaf) {
            if issuer == a.subject || issuer == b.subject {
                return (issuer == a.subject, issuer == b.subject);
            }
        }
    }
    (a.issued(chain), b.issued(chain))
}

fn subject_of(cert: &CertificateDer<'_>) -> Option<Vec<u8>> {
    let (_, parsed) = x509_parser::parse_x509_certificate(cert.as_ref()).ok()?;
    Some(parsed.subject().as_raw().to_vec())
}

fn issuer_of(cert: &CertificateDer<'_>) -> Option<Vec<u8>> {
    let (_, parsed) = x509_parser::parse_x509_certificate(cert.as_ref()).ok()?;
    Some(parsed.issuer().as_raw().to_vec())
}

/// Whether a request belongs to the sidecar.
pub(crate) fn wants(sidecar: &Sidecar, req: &http::Request<Incoming>) -> bool {
    req.headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with(sidecar.content_type))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pki::CertificateAuthority;

    fn chain(ca: &CertificateAuthority) -> Vec<CertificateDer<'static>> {
        let cert = ca
            .client_cert("someone", &[])
            .expect("a client certificate");
        crate::tls::parse_certs(&cert.cert_pem).expect("PEM")
    }

    fn issuer(ca: &CertificateAuthority) -> Issuer {
        Issuer::new(&ca.cert_pem).expect("a CA")
    }

    #[test]
    fn each_side_knows_its_own_certificates() {
        let (api, etcd) = (
            CertificateAuthority::generate("kubernetes").expect("CA"),
            CertificateAuthority::generate("etcd-ca").expect("CA"),
        );
        let (a, b) = (issuer(&api), issuer(&etcd));
        assert_eq!(issued_by(&a, &b, &chain(&api)), (true, false));
        assert_eq!(issued_by(&a, &b, &chain(&etcd)), (false, true));
        assert_eq!(issued_by(&a, &b, &[]), (false, false));
    }

    #[test]
    fn same_named_cas_are_told_apart_by_their_signatures() {
        let (one, two) = (
            CertificateAuthority::generate("kubernetes").expect("CA"),
            CertificateAuthority::generate("kubernetes").expect("CA"),
        );
        let (a, b) = (issuer(&one), issuer(&two));
        assert_eq!(issued_by(&a, &b, &chain(&one)), (true, false));
        assert_eq!(issued_by(&a, &b, &chain(&two)), (false, true));
    }
}
