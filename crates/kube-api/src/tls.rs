//! TLS configurations: the API server's (clients present certificates of the cluster CA, or
//! of a sidecar's CA too), and a client's of such a server.

use crate::pki::{CertificateAuthority, KeyedCert};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use std::sync::Arc;
use thiserror::Error;

/// A failure to start serving.
#[derive(Debug, Error)]
pub enum ServeError {
    #[error("TLS configuration: {0}")]
    Tls(String),
    #[error("I/O: {0}")]
    Io(#[from] std::io::Error),
}

/// The TLS configuration of a server whose clients present certificates signed by `ca`.
pub fn tls_config(
    ca: &CertificateAuthority,
    cert: &KeyedCert,
) -> Result<Arc<rustls::ServerConfig>, ServeError> {
    tls_config_for(&[&ca.cert_pem], cert)
}

/// The TLS configuration of a server whose clients present certificates signed by any of
/// `cas` (PEM).
pub(crate) fn tls_config_for(
    cas: &[&str],
    cert: &KeyedCert,
) -> Result<Arc<rustls::ServerConfig>, ServeError> {
    let tls_err = |e: &dyn std::fmt::Display| ServeError::Tls(e.to_string());
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    for ca_pem in cas {
        for ca_cert in parse_certs(ca_pem)? {
            roots.add(ca_cert).map_err(|e| tls_err(&e))?;
        }
    }
    let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .allow_unauthenticated()
        .build()
        .map_err(|e| tls_err(&e))?;
    let chain = parse_certs(&cert.cert_pem)?;
    let key = PrivateKeyDer::from_pem_slice(cert.key_pem.as_bytes()).map_err(|e| tls_err(&e))?;
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| tls_err(&e))?
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain, key)
        .map_err(|e| tls_err(&e))?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    // rustls sizes its session cache for 256 clients up front; a simulated cluster's API
    // server has a handful (its controllers, a kubectl), and thousands of them run at once.
    config.session_storage = rustls::server::ServerSessionMemoryCache::new(16);
    Ok(Arc::new(config))
}

/// A client's TLS configuration: servers verified against `ca_pem` (PEM, one or more CAs),
/// `client` presented as the client certificate, no ALPN (callers that speak a protocol say
/// which).
pub fn client_tls_config(
    ca_pem: &str,
    client: &KeyedCert,
) -> Result<rustls::ClientConfig, ServeError> {
    let tls_err = |e: &dyn std::fmt::Display| ServeError::Tls(e.to_string());
    let mut roots = rustls::RootCertStore::empty();
    for ca in parse_certs(ca_pem)? {
        roots.add(ca).map_err(|e| tls_err(&e))?;
    }
    let chain = parse_certs(&client.cert_pem)?;
    let key = PrivateKeyDer::from_pem_slice(client.key_pem.as_bytes()).map_err(|e| tls_err(&e))?;
    rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .and_then(|b| {
            b.with_root_certificates(roots)
                .with_client_auth_cert(chain, key)
        })
        .map_err(|e| tls_err(&e))
}

pub(crate) fn parse_certs(pem: &str) -> Result<Vec<CertificateDer<'static>>, ServeError> {
    CertificateDer::pem_slice_iter(pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| ServeError::Tls(e.to_string()))
}
