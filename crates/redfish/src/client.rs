//! A client of one BMC, as metal3's `bmc.address` names it
//! (`redfish+https://host:port/redfish/v1/Systems/<id>`, `redfish-virtualmedia+https://…`,
//! or the bare `redfish://`, which means HTTPS): HTTP Basic with the host's credentials, the
//! certificate verified against the system's roots unless the host says not to
//! (`disableCertificateVerification`, as Ironic's redfish driver honours it). What a
//! provisioner needs of a BMC and no more: read the system and its parts, reset it, set a
//! one-time boot source, insert and eject virtual media.

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::connect::HttpConnector;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use serde_json::{json, Value};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// How long one request may take.
const TIMEOUT: Duration = Duration::from_secs(30);

/// Why a BMC request failed.
#[derive(Debug, thiserror::Error, Clone, PartialEq)]
pub enum ClientError {
    /// The address is not one a Redfish driver takes.
    #[error("{0}")]
    Address(String),
    /// The BMC could not be reached (refused, TLS, timeout).
    #[error("{0}")]
    Transport(String),
    /// The BMC answered with an error status: its HTTP status and Redfish message.
    #[error("HTTP {status} {message_id}: {message}")]
    Status {
        status: u16,
        message_id: String,
        message: String,
    },
    /// The BMC answered something that is not what was asked for.
    #[error("unexpected answer: {0}")]
    Answer(String),
}

impl ClientError {
    /// Whether the BMC refused the credentials.
    pub fn is_unauthorized(&self) -> bool {
        matches!(
            self,
            ClientError::Status {
                status: 401 | 403,
                ..
            }
        )
    }
}

/// A parsed `bmc.address`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Address {
    /// `https://host:port` (or `http://`).
    pub base: String,
    /// The system's path (`/redfish/v1/Systems/<id>`).
    pub system: String,
    /// Whether the driver boots by virtual media (`redfish-virtualmedia`) rather than PXE.
    pub virtual_media: bool,
}

impl Address {
    pub fn parse(address: &str) -> Result<Address, ClientError> {
        let bad = |why: &str| ClientError::Address(format!("{address:?}: {why}"));
        let (scheme, rest) = address.split_once("://").ok_or_else(|| bad("no scheme"))?;
        let (driver, transport) = scheme.split_once('+').unwrap_or((scheme, "https"));
        let virtual_media = match driver {
            "redfish" => false,
            "redfish-virtualmedia" => true,
            other => return Err(bad(&format!("the driver {other:?} is not a Redfish one"))),
        };
        if !matches!(transport, "https" | "http") {
            return Err(bad("the transport is neither https nor http"));
        }
        let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
        if authority.is_empty() {
            return Err(bad("no host"));
        }
        let path = format!("/{path}");
        if !path.starts_with("/redfish/v1/Systems/") || path.len() <= "/redfish/v1/Systems/".len() {
            return Err(bad(
                "the path does not name a system under /redfish/v1/Systems/",
            ));
        }
        Ok(Address {
            base: format!("{transport}://{authority}"),
            system: path.trim_end_matches('/').to_string(),
            virtual_media,
        })
    }
}

type Http =
    hyper_util::client::legacy::Client<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>;

/// A BMC, logged in with HTTP Basic.
#[derive(Clone)]
pub struct Bmc {
    http: Http,
    pub address: Address,
    authorization: String,
}

impl std::fmt::Debug for Bmc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bmc")
            .field("address", &self.address)
            .finish()
    }
}

/// The HTTP clients BMCs are reached through, one per trust, each built on first use:
/// connections are pooled by authority, so the passes over a host reuse its BMC's
/// connection, and the system's roots are read once. Owned by whatever drives the BMCs, so
/// its pools live and die with that driver's runtime.
#[derive(Default)]
pub struct Bmcs {
    verified: OnceLock<Http>,
    unverified: OnceLock<Http>,
}

impl Bmcs {
    /// A client of the BMC at `address` as `user`; `verify` says whether its certificate
    /// must chain to the system's roots.
    pub fn bmc(
        &self,
        address: Address,
        user: &str,
        password: &str,
        verify: bool,
    ) -> Result<Bmc, ClientError> {
        use base64::Engine;
        let cell = if verify {
            &self.verified
        } else {
            &self.unverified
        };
        let http = match cell.get() {
            Some(http) => http.clone(),
            None => {
                let made = http_client(verify)?;
                cell.get_or_init(|| made).clone()
            }
        };
        let token = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
        Ok(Bmc {
            http,
            address,
            authorization: format!("Basic {token}"),
        })
    }
}

/// An HTTP client with the TLS settings `verify` says.
fn http_client(verify: bool) -> Result<Http, ClientError> {
    let connector = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls_config(verify)?)
        .https_or_http()
        .enable_http1()
        .build();
    Ok(
        hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(30))
            .build(connector),
    )
}

impl Bmc {
    /// One request: the JSON answer (null when empty), or the BMC's error.
    pub async fn request(
        &self,
        method: http::Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Value, ClientError> {
        let payload = body.map(Value::to_string).unwrap_or_default();
        let request = http::Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.address.base))
            .header(http::header::AUTHORIZATION, &self.authorization)
            .header(http::header::CONTENT_TYPE, "application/json")
            .header(http::header::ACCEPT, "application/json")
            .body(Full::new(Bytes::from(payload)))
            .map_err(|e| ClientError::Address(e.to_string()))?;
        let exchange = async {
            let response = self
                .http
                .request(request)
                .await
                .map_err(|e| ClientError::Transport(chain(&e)))?;
            let status = response.status();
            let bytes = response
                .into_body()
                .collect()
                .await
                .map_err(|e| ClientError::Transport(e.to_string()))?
                .to_bytes();
            Ok::<_, ClientError>((status, bytes))
        };
        let (status, bytes) = tokio::time::timeout(TIMEOUT, exchange)
            .await
            .map_err(|_| ClientError::Transport(format!("{path}: no answer in {TIMEOUT:?}")))??;
        let value: Value = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes)
                .map_err(|e| ClientError::Answer(format!("{path}: not JSON: {e}")))?
        };
        if status.is_success() {
            return Ok(value);
        }
        let info = &value["error"]["@Message.ExtendedInfo"][0];
        Err(ClientError::Status {
            status: status.as_u16(),
            message_id: info["MessageId"].as_str().unwrap_or("").to_string(),
            message: info["Message"]
                .as_str()
                .or_else(|| value["error"]["message"].as_str())
                .unwrap_or("")
                .to_string(),
        })
    }

    pub async fn get(&self, path: &str) -> Result<Value, ClientError> {
        self.request(http::Method::GET, path, None).await
    }

    /// The system.
    pub async fn system(&self) -> Result<Value, ClientError> {
        self.get(&self.address.system).await
    }

    /// Every member of the collection a resource links to under `field` (`Processors`).
    pub async fn members_of(
        &self,
        resource: &Value,
        field: &str,
    ) -> Result<Vec<Value>, ClientError> {
        let Some(path) = resource[field]["@odata.id"].as_str() else {
            return Ok(Vec::new());
        };
        let collection = self.get(path).await?;
        let mut out = Vec::new();
        for m in collection["Members"].as_array().into_iter().flatten() {
            if let Some(p) = m["@odata.id"].as_str() {
                out.push(self.get(p).await?);
            }
        }
        Ok(out)
    }

    /// `ComputerSystem.Reset` with `kind` (`On`, `ForceOff`, `ForceRestart`, ...).
    pub async fn reset(&self, system: &Value, kind: &str) -> Result<(), ClientError> {
        let target = system["Actions"]["#ComputerSystem.Reset"]["target"]
            .as_str()
            .ok_or_else(|| ClientError::Answer("the system has no reset action".into()))?;
        self.request(
            http::Method::POST,
            target,
            Some(&json!({"ResetType": kind})),
        )
        .await
        .map(drop)
    }

    /// Boots from `target` (`Pxe`, `Cd`, `Hdd`) once, or always when `persistent`, in `mode`.
    pub async fn boot(
        &self,
        target: &str,
        persistent: bool,
        mode: &str,
    ) -> Result<(), ClientError> {
        let enabled = if persistent { "Continuous" } else { "Once" };
        let body = json!({"Boot": {
            "BootSourceOverrideTarget": target,
            "BootSourceOverrideEnabled": enabled,
            "BootSourceOverrideMode": mode,
        }});
        self.request(http::Method::PATCH, &self.address.system, Some(&body))
            .await
            .map(drop)
    }

    /// The manager's virtual CD (the first virtual media taking CDs).
    async fn cd(&self, system: &Value) -> Result<Value, ClientError> {
        let manager = system["Links"]["ManagedBy"][0]["@odata.id"]
            .as_str()
            .ok_or_else(|| ClientError::Answer("the system names no manager".into()))?;
        let manager = self.get(manager).await?;
        let media = self.members_of(&manager, "VirtualMedia").await?;
        media
            .into_iter()
            .find(|m| {
                m["MediaTypes"]
                    .as_array()
                    .is_some_and(|t| t.iter().any(|t| t == "CD" || t == "DVD"))
            })
            .ok_or_else(|| ClientError::Answer("the BMC has no virtual CD".into()))
    }

    /// Inserts `image` in the virtual CD (what was there is ejected first).
    pub async fn insert_cd(&self, system: &Value, image: &str) -> Result<(), ClientError> {
        let cd = self.cd(system).await?;
        if cd["Inserted"] == true {
            self.action(&cd, "#VirtualMedia.EjectMedia", None).await?;
        }
        let body = json!({"Image": image, "Inserted": true, "WriteProtected": true});
        self.action(&cd, "#VirtualMedia.InsertMedia", Some(&body))
            .await
    }

    /// Ejects the virtual CD, if anything is in it.
    pub async fn eject_cd(&self, system: &Value) -> Result<(), ClientError> {
        let cd = self.cd(system).await?;
        if cd["Inserted"] == true || !cd["Image"].is_null() {
            self.action(&cd, "#VirtualMedia.EjectMedia", None).await?;
        }
        Ok(())
    }

    async fn action(
        &self,
        on: &Value,
        name: &str,
        body: Option<&Value>,
    ) -> Result<(), ClientError> {
        let target = on["Actions"][name]["target"]
            .as_str()
            .ok_or_else(|| ClientError::Answer(format!("no {name} action")))?;
        let empty = json!({});
        self.request(http::Method::POST, target, Some(body.unwrap_or(&empty)))
            .await
            .map(drop)
    }
}

/// The error and its causes, as one line.
fn chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        out.push_str(": ");
        out.push_str(&c.to_string());
        cause = c.source();
    }
    out
}

/// TLS settings: the system's roots, or (when the host disables verification) any
/// certificate, its signatures still checked.
fn tls_config(verify: bool) -> Result<rustls::ClientConfig, ClientError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| ClientError::Transport(e.to_string()))?;
    if !verify {
        return Ok(builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(Unverified { provider }))
            .with_no_client_auth());
    }
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls_native_certs::load_native_certs().certs {
        // A system root rustls cannot parse is skipped, as every TLS client does.
        let _ = roots.add(cert);
    }
    Ok(builder.with_root_certificates(roots).with_no_client_auth())
}

/// Accepts any certificate: what `disableCertificateVerification` asks for.
#[derive(Debug)]
struct Unverified {
    provider: Arc<rustls::crypto::CryptoProvider>,
}

impl ServerCertVerifier for Unverified {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
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
    fn addresses_are_read_as_metal3_writes_them() {
        let a = Address::parse("redfish+https://127.0.0.1:8989/redfish/v1/Systems/abc").unwrap();
        assert_eq!(a.base, "https://127.0.0.1:8989");
        assert_eq!(a.system, "/redfish/v1/Systems/abc");
        assert!(!a.virtual_media);
        let v = Address::parse("redfish-virtualmedia://bmc/redfish/v1/Systems/1/").unwrap();
        assert_eq!((v.base.as_str(), v.virtual_media), ("https://bmc", true));
        assert_eq!(v.system, "/redfish/v1/Systems/1");
        assert_eq!(
            Address::parse("redfish+http://10.0.0.5:8000/redfish/v1/Systems/m0")
                .unwrap()
                .base,
            "http://10.0.0.5:8000"
        );
        for bad in [
            "ipmi://10.0.0.1",
            "redfish+ftp://h/redfish/v1/Systems/1",
            "redfish://h/redfish/v1/Systems/",
            "redfish://h/other",
            "nothing",
        ] {
            assert!(Address::parse(bad).is_err(), "{bad}");
        }
    }
}
