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
