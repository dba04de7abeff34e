//! How a vCenter's certificate is trusted. vCenters mostly serve certificates of their own
//! VMCA, which no system store knows, so operators pin the thumbprint (govc's
//! `GOVC_TLS_KNOWN_HOSTS`, CAPV's `VSPHERE_TLS_THUMBPRINT`) or hand over the CA. Trusting
//! nothing in particular ("insecure") is deliberately not offered.

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use std::sync::Arc;

/// What makes the server's certificate trusted.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Trust {
    /// The certificate whose SHA-256 (or, as older tools print it, SHA-1) digest this is, in
    /// hex with or without colons, any case.
    Thumbprint(String),
    /// Certificates chaining to these PEM CA certificates, for the server's host name.
    CaBundle(String),
}

impl Trust {
    /// The TLS client settings that trust what `self` says and nothing else.
    pub fn client_config(&self) -> crate::Result<rustls::ClientConfig> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| crate::Error::Config(e.to_string()))?;
        let config = match self {
            Trust::Thumbprint(t) => builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(Pinned {
                    digest: normalized(t)?,
                    provider,
                }))
                .with_no_client_auth(),
            Trust::CaBundle(pem) => {
                let mut roots = rustls::RootCertStore::empty();
                for cert in rustls_pemfile::certs(&mut pem.as_bytes()) {
                    let cert = cert.map_err(|e| crate::Error::Config(format!("CA bundle: {e}")))?;
                    roots
                        .add(cert)
                        .map_err(|e| crate::Error::Config(format!("CA bundle: {e}")))?;
                }
                if roots.is_empty() {
                    return Err(crate::Error::Config(
                        "the CA bundle holds no certificate".into(),
                    ));
                }
                builder.with_root_certificates(roots).with_no_client_auth()
            }
        };
        Ok(config)
    }
}

/// A thumbprint as lower-case hex without separators; an error unless it is a SHA-1 (40
/// digits) or SHA-256 (64 digits).
fn normalized(thumbprint: &str) -> crate::Result<String> {
    let hex: String = thumbprint
        .chars()
        .filter(|c| *c != ':')
        .map(|c| c.to_ascii_lowercase())
        .collect();
    let is_hex = hex.chars().all(|c| c.is_ascii_hexdigit());
    match (is_hex, hex.len()) {
        (true, 40 | 64) => Ok(hex),
        _ => Err(crate::Error::Config(format!(
            "{thumbprint:?} is not a SHA-1 or SHA-256 thumbprint"
        ))),
    }
}

/// The digest of a DER certificate that `like` is the length of, as lower-case hex.
fn digest_of(der: &[u8], like: &str) -> String {
    let algorithm = match like.len() {
        40 => &ring::digest::SHA1_FOR_LEGACY_USE_ONLY,
        _ => &ring::digest::SHA256,
    };
    ring::digest::digest(algorithm, der)
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Trusts the one certificate with the pinned digest; signatures are still checked.
#[derive(Debug)]
struct Pinned {
    digest: String,
    provider: Arc<rustls::crypto::CryptoProvider>,
}

impl ServerCertVerifier for Pinned {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        if digest_of(end_entity.as_ref(), &self.digest) == self.digest {
            Ok(ServerCertVerified::assertion())
        } else {
            Err(rustls::Error::General(
                "the server's certificate does not have the pinned thumbprint".into(),
            ))
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        let algorithms = &self.provider.signature_verification_algorithms;
        rustls::crypto::verify_tls12_signature(message, cert, dss, algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        let algorithms = &self.provider.signature_verification_algorithms;
        rustls::crypto::verify_tls13_signature(message, cert, dss, algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thumbprints_are_read_in_either_form_and_length() {
        let sha256 = "84:69:CC:94:6E:1B:D8:25:E3:7F:5A:10:23:2D:E0:D1:15:1C:B7:47:92:EE:24:47:E9:A0:92:38:04:E7:50:5B";
        assert_eq!(normalized(sha256).unwrap().len(), 64);
        assert_eq!(
            normalized("BB10CC688E51092E8C8CCA72F5DAE5BDD71F8DCB").unwrap(),
            "bb10cc688e51092e8c8cca72f5dae5bdd71f8dcb"
        );
        assert!(normalized("not-a-thumbprint").is_err());
        assert!(normalized("abcd").is_err());
    }

    #[test]
    fn the_digest_follows_the_pinned_length() {
        assert_eq!(digest_of(b"x", &"0".repeat(40)).len(), 40);
        assert_eq!(digest_of(b"x", &"0".repeat(64)).len(), 64);
    }

    #[test]
    fn a_ca_bundle_without_certificates_is_refused() {
        assert!(Trust::CaBundle("nothing here".into())
            .client_config()
            .is_err());
        assert!(Trust::Thumbprint("zz".into()).client_config().is_err());
    }
}
