//! Calling a webhook as kube-apiserver does, for admission and for conversion alike: JSON
//! POSTed over HTTPS to its `url`, or to a ready endpoint of its `service` (through the
//! Service's EndpointSlices, so a webhook server on the host can stand behind a selector-less
//! Service), trusting the configuration's `caBundle`. A webhook server that lives in this
//! process (an [`InProcessWebhook`] registered for a Service) gets the same review without a
//! socket: the embedded controllers convert their own kinds this way, and the review, its
//! checks and its errors are the ones a remote webhook gets.

use crate::values::At;
use base64::Engine;
use bytes::Bytes;
use futures::future::BoxFuture;
use http_body_util::{BodyExt, Full};
use infrasim_store::{Group, ObjectKey, ReadAt};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex, RwLock};
use std::time::Duration;

/// A webhook server in this process, standing for a Service: it answers a review (an
/// `AdmissionReview` or a `ConversionReview`, as JSON) POSTed to `path`, or says why not.
pub trait InProcessWebhook: Send + Sync {
    fn review(&self, path: &str, body: Value) -> BoxFuture<'static, Result<Value, String>>;
}

/// The in-process webhook servers, by the Service (`namespace`, `name`) they stand for.
#[derive(Default)]
pub struct InProcessWebhooks(RwLock<HashMap<(String, String), Arc<dyn InProcessWebhook>>>);

impl std::fmt::Debug for InProcessWebhooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let services = self.0.read().unwrap_or_else(|p| p.into_inner());
        f.debug_list().entries(services.keys()).finish()
    }
}

impl InProcessWebhooks {
    /// Serves `hook` as Service `namespace/name`, replacing whatever served it before.
    pub fn insert(&self, namespace: &str, name: &str, hook: Arc<dyn InProcessWebhook>) {
        self.0
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert((namespace.to_string(), name.to_string()), hook);
    }

    fn get(&self, config: &Value) -> Option<Arc<dyn InProcessWebhook>> {
        let service = config.get("service")?;
        let key = (
            service["namespace"].as_str()?.to_string(),
            service["name"].as_str()?.to_string(),
        );
        self.0
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(&key)
            .cloned()
    }
}

/// Where webhooks are reached: Services through the group's EndpointSlices, unless a server
/// in this process stands for the Service.
#[derive(Clone)]
pub(crate) struct Reach {
    pub group: Arc<Group>,
    pub in_process: Arc<InProcessWebhooks>,
}

/// POSTs `body` to the webhook `client_config` names and returns its JSON answer, or says
/// why there is none, in kube-apiserver's words.
pub(crate) async fn call(
    reach: &Reach,
    client_config: &Value,
    body: &Value,
    timeout: Duration,
) -> Result<Value, String> {
    let answer = match reach.in_process.get(client_config) {
        Some(hook) => {
            let path = client_config["service"]["path"].as_str().unwrap_or("/");
            hook.review(path, body.clone())
        }
        None => {
            let target = target(&reach.group, client_config)?;
            let client_config = client_config.clone();
            let body = body.clone();
            Box::pin(async move { post(&client_config, &target, &body).await })
        }
    };
    tokio::time::timeout(timeout, answer)
        .await
        .unwrap_or_else(|_| {
            Err(format!(
                "context deadline exceeded after {}s",
                timeout.as_secs()
            ))
        })
}

/// Where a webhook is served.
struct Target {
    /// `host:port` to connect to.
    address: String,
    /// The name its certificate must carry.
    server_name: String,
    path: String,
}

/// The webhook's address: its `url`, or its `service` resolved through EndpointSlices.
fn target(group: &Group, config: &Value) -> Result<Target, String> {
    if let Some(url) = config["url"].as_str() {
        let rest = url
            .strip_prefix("https://")
            .ok_or_else(|| format!("webhook URL {url:?} must be https"))?;
        let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
        let host = authority.rsplit_once(':').map_or(authority, |(h, _)| h);
        let address = if authority.contains(':') {
            authority.to_string()
        } else {
            format!("{authority}:443")
        };
        return Ok(Target {
            address,
            server_name: host.trim_matches(|c| c == '[' || c == ']').to_string(),
            path: if path.is_empty() {
                "/".into()
            } else {
                path.into()
            },
        });
    }
    let service = &config["service"];
    let (namespace, name) = (
        service["namespace"].as_str().unwrap_or(""),
        service["name"].as_str().unwrap_or(""),
    );
    let port = service["port"].as_u64().unwrap_or(443);
    let address = endpoint(group, namespace, name, port)?;
    Ok(Target {
        address,
        server_name: format!("{name}.{namespace}.svc"),
        path: service["path"].as_str().unwrap_or("/").to_string(),
    })
}

/// A ready endpoint of Service `namespace/name` for its port `port`, from its EndpointSlices.
fn endpoint(group: &Group, namespace: &str, name: &str, port: u64) -> Result<String, String> {
    let svc = group
        .get("services", &ObjectKey::new(namespace, name))
        .and_then(|s| s.to_value().ok())
        .ok_or_else(|| format!("service \"{name}\" not found"))?;
    let service_port = svc["spec"]["ports"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["port"].as_u64() == Some(port))
        .cloned()
        .ok_or_else(|| format!("service {namespace}/{name} has no port {port}"))?;
    let port_name = service_port["name"].as_str().unwrap_or("");
    let slices = group
        .snapshot("endpointslices.discovery.k8s.io", ReadAt::Latest)
        .map_err(|e| e.to_string())?;
    for slice in slices.objects.values() {
        let Ok(slice) = slice.to_value() else {
            continue;
        };
        let owned = slice.at("/metadata/namespace").and_then(Value::as_str) == Some(namespace)
            && slice
                .at("/metadata/labels/kubernetes.io~1service-name")
                .and_then(Value::as_str)
                == Some(name);
        if !owned {
            continue;
        }
        let target_port = slice["ports"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|p| p["name"].as_str().unwrap_or("") == port_name)
            .and_then(|p| p["port"].as_u64());
        let ready = slice["endpoints"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|e| e.at("/conditions/ready").and_then(Value::as_bool) != Some(false));
        if let (Some(port), Some(address)) =
            (target_port, ready.and_then(|e| e["addresses"][0].as_str()))
        {
            return Ok(if address.contains(':') {
                format!("[{address}]:{port}")
            } else {
                format!("{address}:{port}")
            });
        }
    }
    Err(format!("no endpoints available for service \"{name}\""))
}

/// A pooled HTTPS client of one webhook.
type Client = hyper_util::client::legacy::Client<
    hyper_rustls::HttpsConnector<hyper_util::client::legacy::connect::HttpConnector>,
    Full<Bytes>,
>;

/// The clients of the webhooks called so far, by the `caBundle` they trust and the name their
/// certificate must carry. kube-apiserver keeps its connections to a webhook open between
/// calls; a TLS handshake per admission or conversion would cost more than the call.
static CLIENTS: LazyLock<Mutex<HashMap<(String, String), Client>>> =
    LazyLock::new(Default::default);

/// Clients kept at most; past this the pool starts over (webhook configurations change rarely).
const CLIENTS_KEPT: usize = 256;

/// The client of webhooks trusting `ca_bundle` (base64 PEM) and serving as `server_name`.
fn client(ca_bundle: &str, server_name: &str) -> Result<Client, String> {
    let key = (ca_bundle.to_string(), server_name.to_string());
    let mut clients = CLIENTS.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(client) = clients.get(&key) {
        return Ok(client.clone());
    }
    let ca = base64::engine::general_purpose::STANDARD
        .decode(ca_bundle)
        .map_err(|e| e.to_string())?;
    let mut roots = rustls::RootCertStore::empty();
    for cert in crate::tls::parse_certs(&String::from_utf8_lossy(&ca)).map_err(|e| e.to_string())? {
        roots.add(cert).map_err(|e| e.to_string())?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let name = rustls::pki_types::ServerName::try_from(server_name.to_string())
        .map_err(|e| e.to_string())?;
    // The address may be an endpoint's IP; the certificate names the Service (or the URL's
    // host), so the name to verify is fixed rather than read from the address.
    let https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_only()
        .with_server_name_resolver(hyper_rustls::FixedServerNameResolver::new(name))
        .enable_http1()
        .build();
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build(https);
    if clients.len() >= CLIENTS_KEPT {
        clients.clear();
    }
    clients.insert(key, client.clone());
    Ok(client)
}

/// An error and its causes, as Go prints a wrapped error (`dial tcp: connection refused`).
fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        text.push_str(": ");
        text.push_str(&c.to_string());
        cause = c.source();
    }
    text
}

/// POSTs `body` to the webhook over HTTPS, trusting the configuration's `caBundle`.
async fn post(config: &Value, target: &Target, body: &Value) -> Result<Value, String> {
    let url = format!("https://{}{}", target.address, target.path);
    let fail = |e: &dyn std::fmt::Display| format!("failed to call webhook: Post \"{url}\": {e}");
    let client = client(
        config["caBundle"].as_str().unwrap_or(""),
        &target.server_name,
    )
    .map_err(|e| fail(&e))?;
    let request = http::Request::post(url.as_str())
        .header(http::header::HOST, target.server_name.as_str())
        .header(http::header::CONTENT_TYPE, "application/json")
        .header(http::header::ACCEPT, "application/json")
        .body(Full::new(Bytes::from(body.to_string())))
        .map_err(|e| fail(&e))?;
    let response = client
        .request(request)
        .await
        .map_err(|e| fail(&chain(&e)))?;
    let status = response.status();
    let bytes = response
        .into_body()
        .collect()
        .await
        .map_err(|e| fail(&e))?
        .to_bytes();
    if !status.is_success() {
        return Err(format!(
            "failed to call webhook: the server responded with {status}"
        ));
    }
    serde_json::from_slice(&bytes).map_err(|e| format!("failed to decode the review: {e}"))
}
