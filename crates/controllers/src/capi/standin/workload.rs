//! Clients of workload clusters, made from the `<cluster>-kubeconfig` secret as Cluster API's
//! controllers make theirs: what they read there (Nodes, kubeadm's ConfigMap) and change
//! (cordons, evictions, kube-proxy) goes through the cluster's own endpoint and credentials.

use crate::capi::core::Cluster;
use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;
use kube::{Client, ResourceExt};
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

/// How long a connection to a workload cluster stays open unused. A controller reaches a
/// cluster in bursts while its machines come up and rarely after; kube's default client keeps
/// idle connections with no timer to close them, so ten thousand clusters would hold twenty
/// thousand sockets (both ends live in this process when the cloud is embedded) and run out
/// of file descriptors.
const IDLE_CONNECTION: Duration = Duration::from_secs(5);

/// How long connecting (TCP and TLS) to a workload cluster may take, and how long a connection
/// may stay silent while an answer is due. Without them a request to a cluster that accepted
/// the TCP connection but never answers (a listener out of file descriptors leaves connections
/// in its backlog) waits forever, and kube-runtime runs nothing else for that object while its
/// reconcile waits: at ten thousand clusters this left Machines stuck for good. kube's default
/// client sets such timeouts on its connector; ours is built by hand for the idle timer.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
const SILENCE_TIMEOUT: Duration = Duration::from_secs(30);

/// Why a workload cluster cannot be reached.
#[derive(Debug, thiserror::Error)]
pub enum WorkloadError {
    #[error(transparent)]
    Kube(#[from] kube::Error),
    #[error("no kubeconfig secret {0} yet")]
    NoSecret(String),
    #[error("the kubeconfig in {secret} is unusable: {why}")]
    Unusable { secret: String, why: String },
}

/// How long what was read from a cluster's secrets (a workload client made from the
/// kubeconfig, the CA of the certificate secrets) is used without reading them again. Cluster
/// API reads them when it connects, or through a caching client; here they are looked at again
/// now and then, so a rotated secret is picked up, but not on every reconcile (the kubeconfig
/// alone was a sixth of the stand-in's requests).
pub(super) const SECRET_RECHECK: Duration = Duration::from_secs(10);

/// One client per workload cluster, kept while its kubeconfig secret is unchanged.
#[derive(Default)]
pub struct WorkloadClients {
    clients: Mutex<HashMap<(String, String), Known>>,
}

/// A cluster's client, the secret's resourceVersion it was made from and when that was read.
struct Known {
    version: String,
    client: Client,
    read_at: std::time::Instant,
}

impl WorkloadClients {
    /// A client of cluster `name` in `namespace`.
    pub async fn get(
        &self,
        mgmt: &Client,
        namespace: &str,
        name: &str,
    ) -> Result<Client, WorkloadError> {
        let secret_name = format!("{name}-kubeconfig");
        let key = (namespace.to_string(), name.to_string());
        if let Some(known) = self.lock().get(&key) {
            if known.read_at.elapsed() < SECRET_RECHECK {
                return Ok(known.client.clone());
            }
        }
        let secrets: Api<Secret> = Api::namespaced(mgmt.clone(), namespace);
        let secret = secrets
            .get_opt(&secret_name)
            .await?
            .ok_or_else(|| WorkloadError::NoSecret(secret_name.clone()))?;
        let version = secret.resource_version().unwrap_or_default();
        if let Some(known) = self.lock().get_mut(&key) {
            if known.version == version {
                known.read_at = std::time::Instant::now();
                return Ok(known.client.clone());
            }
        }
        let unusable = |why: String| WorkloadError::Unusable {
            secret: secret_name.clone(),
            why,
        };
        let yaml = secret
            .data
            .as_ref()
            .and_then(|d| d.get("value"))
            .and_then(|b| String::from_utf8(b.0.clone()).ok())
            .ok_or_else(|| unusable("no `value` key".into()))?;
        let kubeconfig =
            kube::config::Kubeconfig::from_yaml(&yaml).map_err(|e| unusable(e.to_string()))?;
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
            .await
            .map_err(|e| unusable(e.to_string()))?;
        let client = connect(config).map_err(|e| unusable(e.to_string()))?;
        let known = Known {
            version,
            client: client.clone(),
            read_at: std::time::Instant::now(),
        };
        self.lock().insert(key, known);
        Ok(client)
    }

    /// A client of `cluster`'s workload cluster.
    pub async fn of(&self, mgmt: &Client, cluster: &Cluster) -> Result<Client, WorkloadError> {
        let ns = cluster.namespace().unwrap_or_default();
        self.get(mgmt, &ns, &cluster.name_any()).await
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(String, String), Known>> {
        // The map holds no invariant a panic halfway could break.
        self.clients.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Forgets a cluster's client (the cluster is gone).
    pub fn forget(&self, namespace: &str, name: &str) {
        self.lock()
            .remove(&(namespace.to_string(), name.to_string()));
    }
}

/// A client for `config` whose idle connections close after [`IDLE_CONNECTION`]: kube's
/// default stack (base URI, credentials, TLS from the kubeconfig, connect and read timeouts)
/// over a connection pool with a timer.
fn connect(config: kube::Config) -> Result<Client, kube::Error> {
    use kube::client::ConfigExt;
    let mut https = hyper_timeout::TimeoutConnector::new(config.rustls_https_connector()?);
    https.set_connect_timeout(Some(CONNECT_TIMEOUT));
    https.set_read_timeout(Some(SILENCE_TIMEOUT));
    https.set_write_timeout(Some(SILENCE_TIMEOUT));
    client_over(&config, https)
}

/// A client for `config` that connects with `connector` (which carries the TLS), through
/// kube's layers (base URI, credentials), over a pool whose idle connections close after
/// [`IDLE_CONNECTION`].
pub fn client_over<C>(config: &kube::Config, connector: C) -> Result<Client, kube::Error>
where
    C: hyper_util::client::legacy::connect::Connect + Clone + Send + Sync + 'static,
{
    use kube::client::ConfigExt;
    let pool = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .pool_timer(hyper_util::rt::TokioTimer::new())
        .pool_idle_timeout(IDLE_CONNECTION)
        .build::<_, kube::client::Body>(connector);
    let service = tower::ServiceBuilder::new()
        .layer(config.base_uri_layer())
        .option_layer(config.auth_layer()?)
        .map_err(tower::BoxError::from)
        .service(pool);
    Ok(Client::new(service, config.default_namespace.clone()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Node;

    /// A server that takes the TCP connection and never says a word: the request fails once
    /// the connect timeout passes instead of waiting forever. The clock is paused, so the test
    /// waits no real time: it fails by the outer hour running out first.
    #[tokio::test(start_paused = true)]
    async fn a_cluster_that_never_answers_fails_the_request() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let silent = tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((socket, _)) = listener.accept().await {
                held.push(socket);
            }
        });
        let mut config = kube::Config::new(format!("https://127.0.0.1:{port}").parse().unwrap());
        config.accept_invalid_certs = true;
        let nodes: Api<Node> = Api::all(connect(config).unwrap());
        let outcome = tokio::time::timeout(Duration::from_secs(3600), nodes.get_opt("n")).await;
        silent.abort();
        let answer = outcome.expect("the request was still waiting after an hour");
        assert!(answer.is_err(), "a silent server answered: {answer:?}");
    }
}
