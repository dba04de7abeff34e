#![allow(dead_code)] // Each test binary uses part of these helpers.
//! Starts an API server on a loopback port for a test and hands out client configurations.

use infrasim_kube_api::kubeconfig::{self, KubeconfigSpec};
use infrasim_kube_api::pki::CertificateAuthority;
use infrasim_kube_api::{ApiConfig, ApiServer};
use infrasim_store::{Store, StoreConfig};
use std::net::SocketAddr;

pub struct TestServer {
    pub server: ApiServer,
    /// The store group behind the server, for tests that write under the API.
    pub group: std::sync::Arc<infrasim_store::Group>,
    pub addr: SocketAddr,
    pub ca: CertificateAuthority,
    _shutdown: tokio::sync::oneshot::Sender<()>,
}

impl TestServer {
    pub async fn start(window: usize) -> TestServer {
        Self::start_with(window, ApiConfig::default()).await
    }

    pub async fn start_with(window: usize, api_config: ApiConfig) -> TestServer {
        let store = StoreConfig {
            watch_window: window,
            ..StoreConfig::default()
        };
        Self::start_with_store(store, api_config).await
    }

    pub async fn start_with_store(config: StoreConfig, api_config: ApiConfig) -> TestServer {
        let store = Store::in_memory(config);
        let group = store.create_group("test").unwrap();
        let ca = CertificateAuthority::generate("test-ca").unwrap();
        let server = ApiServer::new(group.clone(), ca.clone(), store.clock().clone(), api_config);
        let cert = ca
            .serving_cert(
                "kube-apiserver",
                &["localhost".into()],
                &["127.0.0.1".parse().unwrap()],
            )
            .unwrap();
        let tls = server.tls_config(&cert).unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(server.clone().serve(listener, tls, async move {
            let _ = rx.await;
        }));
        TestServer {
            server,
            group,
            addr,
            ca,
            _shutdown: tx,
        }
    }

    /// A kube-rs client authenticated by a client certificate signed by `ca`.
    pub async fn client_with_cert_from(
        &self,
        ca: &CertificateAuthority,
        user: &str,
        groups: &[&str],
    ) -> kube::Client {
        let cert = ca.client_cert(user, groups).unwrap();
        let yaml = kubeconfig::render(&KubeconfigSpec {
            cluster_name: "test",
            user_name: user,
            server: &format!("https://{}", self.addr),
            ca_pem: &self.ca.cert_pem,
            client_cert_pem: &cert.cert_pem,
            client_key_pem: &cert.key_pem,
            tls_server_name: None,
        });
        let kc = kube::config::Kubeconfig::from_yaml(&yaml).unwrap();
        let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
            .await
            .unwrap();
        kube::Client::try_from(config).unwrap()
    }

    /// The admin client.
    pub async fn client(&self) -> kube::Client {
        self.client_with_cert_from(&self.ca, "kubernetes-admin", &["system:masters"])
            .await
    }

    /// A client that sends a bearer token (or nothing).
    pub fn client_with_token(&self, token: Option<&str>) -> kube::Client {
        let mut config = kube::Config::new(format!("https://{}", self.addr).parse().unwrap());
        let pem = self.ca.cert_pem.clone();
        let der = rustls_pem_to_der(&pem);
        config.root_cert = Some(vec![der]);
        if let Some(t) = token {
            config.auth_info.token = Some(t.to_string().into());
        }
        kube::Client::try_from(config).unwrap()
    }
}

fn rustls_pem_to_der(pem: &str) -> Vec<u8> {
    use base64::Engine;
    let body: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
    base64::engine::general_purpose::STANDARD
        .decode(body)
        .unwrap()
}

/// An HTTPS server on a loopback port answering each JSON POST with `answer(path, body)`,
/// its certificate (for `webhook.default.svc` and 127.0.0.1) signed by `ca`: a webhook.
pub async fn https_json_server<F>(ca: &CertificateAuthority, answer: F) -> u16
where
    F: Fn(&str, serde_json::Value) -> serde_json::Value + Send + Sync + 'static,
{
    use http_body_util::{BodyExt, Full};
    use rustls::pki_types::pem::PemObject;
    use std::sync::Arc;
    let cert = ca
        .serving_cert(
            "webhook",
            &["webhook.default.svc".into()],
            &["127.0.0.1".parse().expect("an IP")],
        )
        .expect("a serving certificate");
    let certs = rustls::pki_types::CertificateDer::pem_slice_iter(cert.cert_pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .expect("PEM");
    let key =
        rustls::pki_types::PrivateKeyDer::from_pem_slice(cert.key_pem.as_bytes()).expect("key");
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let tls = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .expect("TLS");
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(tls));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let answer = Arc::new(answer);
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let (acceptor, answer) = (acceptor.clone(), answer.clone());
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let service =
                    hyper::service::service_fn(move |req: http::Request<hyper::body::Incoming>| {
                        let answer = answer.clone();
                        async move {
                            let path = req.uri().path().to_string();
                            let body = req
                                .into_body()
                                .collect()
                                .await
                                .map(|b| b.to_bytes())
                                .unwrap_or_default();
                            let body = serde_json::from_slice(&body).unwrap_or_default();
                            let reply = answer(&path, body).to_string();
                            Ok::<_, std::convert::Infallible>(http::Response::new(Full::new(
                                bytes::Bytes::from(reply),
                            )))
                        }
                    });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(tls), service)
                    .await;
            });
        }
    });
    port
}

/// What [`as_admin`] got back.
pub struct Answer {
    pub status: u16,
    pub body: String,
    /// The `Warning` headers.
    pub warnings: Vec<String>,
}

impl Answer {
    /// The body as JSON (the first line of a watch), or null.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(self.body.lines().next().unwrap_or("")).unwrap_or_default()
    }
}

/// `GET path` accepting `accept` (a Table, say), handled in-process as an administrator.
pub async fn as_admin_accepting(server: &ApiServer, path: &str, accept: &str) -> Answer {
    request_as_admin(
        server,
        "GET",
        path,
        &[(http::header::ACCEPT, accept)],
        String::new(),
    )
    .await
}

/// `method path` with `body` of `content_type`, handled in-process as an administrator
/// (`system:masters`).
pub async fn as_admin(
    server: &ApiServer,
    method: &str,
    path: &str,
    content_type: &str,
    body: String,
) -> Answer {
    let headers = [(http::header::CONTENT_TYPE, content_type)];
    request_as_admin(server, method, path, &headers, body).await
}

async fn request_as_admin(
    server: &ApiServer,
    method: &str,
    path: &str,
    headers: &[(http::header::HeaderName, &str)],
    body: String,
) -> Answer {
    use http_body_util::{BodyExt, Full};
    let mut req = http::Request::builder()
        .method(method)
        .uri(path)
        .header(http::header::USER_AGENT, "infrasim-test/1.0");
    for (name, value) in headers {
        req = req.header(name, *value);
    }
    let req = req
        .body(Full::new(bytes::Bytes::from(body)))
        .expect("a request");
    let admin = infrasim_kube_api::Identity {
        user: "admin".into(),
        groups: vec!["system:masters".into()],
    };
    let resp = server.handle(req, Some(admin)).await;
    let status = resp.status().as_u16();
    let warnings = resp
        .headers()
        .get_all(http::header::WARNING)
        .iter()
        .filter_map(|v| v.to_str().ok().map(str::to_string))
        .collect();
    let bytes = resp.into_body().collect().await.expect("a body").to_bytes();
    Answer {
        status,
        body: String::from_utf8_lossy(&bytes).into_owned(),
        warnings,
    }
}

/// An API server over a fresh group whose clock is `clock`, for handling requests in-process.
pub fn server_on(clock: &infrasim_clock::FakeClock) -> ApiServer {
    let store = Store::new(
        StoreConfig::default(),
        std::sync::Arc::new(clock.clone()),
        std::sync::Arc::new(infrasim_store::MemoryBackend),
    );
    let group = store.create_group("g").unwrap();
    let ca = CertificateAuthority::generate("ca").unwrap();
    ApiServer::new(
        group,
        ca,
        std::sync::Arc::new(clock.clone()),
        ApiConfig::default(),
    )
}
