//! What every request handler reads: the server's shared [`State`], and its tunables.
//! Below the handlers and the server alike, so that neither needs the other to name it.

use crate::auth::TokenAuthenticator;
use crate::pki::{CertificateAuthority, SigningKey};
use crate::rbac_cache::RbacCache;
use crate::resources::Registry;
use crate::sa_tokens::TokenIssuer;
use crate::sidecar::{Issuer, Sidecar};
use crate::status::ApiError;
use infrasim_clock::SharedClock;
use infrasim_store::Group;
use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Tunables of an API server.
#[derive(Debug, Clone)]
pub struct ApiConfig {
    /// The largest request body accepted (kube-apiserver: 3 MiB).
    pub max_body_bytes: usize,
    /// How often a watch that asked for bookmarks gets one.
    pub bookmark_interval: Duration,
    /// The Kubernetes version reported by `/version` (`v1.33.0`).
    pub kubernetes_version: String,
    /// Where the server counts its requests; `None` counts nothing.
    pub metrics: Option<crate::metrics::RequestMetrics>,
    /// Whether the server serves `metrics.k8s.io` (`kubectl top`, HPAs) from the usage it
    /// simulates for its pods and nodes: on for a simulated workload cluster, off for a
    /// management plane, which has no nodes to measure.
    pub resource_metrics: bool,
}

impl Default for ApiConfig {
    fn default() -> Self {
        ApiConfig {
            max_body_bytes: 3 * 1024 * 1024,
            bookmark_interval: Duration::from_secs(30),
            kubernetes_version: crate::KUBERNETES_VERSION.into(),
            metrics: None,
            resource_metrics: false,
        }
    }
}

/// What `pods/portforward` reaches (a closure, so its debug form is only its name).
pub(crate) struct Forwarder(pub crate::portforward::PortForwarder);

impl std::fmt::Debug for Forwarder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PortForwarder")
    }
}

/// A sidecar and the CAs that decide who reaches which side.
#[derive(Debug)]
pub(crate) struct SidecarRoute {
    pub sidecar: Sidecar,
    pub sidecar_ca: Issuer,
    pub api_ca: Issuer,
}

/// What the server's in-process controllers (`crate::controllers`) do when the registry
/// writes one of the kinds they follow. Function pointers, so that the registry below calls
/// up into the controllers above without importing them. They run at once, so a client sees
/// a new namespace's `default` ServiceAccount as soon as the namespace.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Hooks {
    /// A namespace was created: its default objects.
    pub namespace_created: fn(&Arc<State>, &str),
    /// A namespace turned Terminating: its content goes, then the namespace.
    pub namespace_terminating: fn(&Arc<State>, &str),
    /// A CRD was written: its resources served, its status.
    pub crd_written: fn(&Arc<State>, &str),
    /// A CRD's deletion started: its objects go, then the CRD.
    pub crd_deleting: fn(&Arc<State>, &str),
    /// A Secret of type `kubernetes.io/service-account-token` was written (namespace, name):
    /// its token, if it has none yet.
    pub token_secret_written: fn(&Arc<State>, &str, &str),
    /// A ServiceAccount was created (namespace, name): the token Secrets that name it.
    pub service_account_created: fn(&Arc<State>, &str, &str),
}

/// Everything a request handler reads.
#[derive(Debug)]
pub(crate) struct State {
    pub group: Arc<Group>,
    /// The in-process controllers' share of writes (see [`Hooks`]).
    pub hooks: Hooks,
    pub registry: Arc<Registry>,
    pub tokens: TokenAuthenticator,
    pub ca: CertificateAuthority,
    pub clock: SharedClock,
    pub config: ApiConfig,
    /// Namespaces whose content is being deleted by a running task.
    pub terminating: Mutex<HashSet<String>>,
    /// The decoded RBAC objects, until one changes.
    pub rbac: RbacCache,
    /// A protocol served beside the API, with the issuers that tell its clients from the
    /// API's (set once, before the TLS configuration is made).
    pub sidecar: std::sync::OnceLock<SidecarRoute>,
    /// What `pods/portforward` reaches, if anything listens in this server's pods.
    pub port_forwarder: std::sync::OnceLock<Forwarder>,
    /// Port-forward sessions started, by protocol.
    pub port_forwards: crate::portforward::Sessions,
    /// Webhook servers that live in this process, by the Service they stand for.
    pub in_process_webhooks: Arc<crate::webhook::InProcessWebhooks>,
    /// The admission webhook configurations, decoded.
    pub webhook_configs: crate::admission::webhooks::ConfigCache,
    /// What signs and verifies service-account tokens: the key set with
    /// `ApiServer::set_service_account_key`, or one generated at first use.
    pub token_issuer: std::sync::OnceLock<TokenIssuer>,
    /// The latency and errors injected into requests, while a fault is in force.
    pub faults: crate::faults::Faults,
}

impl State {
    /// The service-account token issuer, generating a key if none was set.
    pub fn token_issuer(&self) -> Result<&TokenIssuer, ApiError> {
        if let Some(issuer) = self.token_issuer.get() {
            return Ok(issuer);
        }
        let fresh = SigningKey::generate()
            .and_then(|key| TokenIssuer::new(&key))
            .map_err(|e| ApiError::internal(format!("service-account key: {e}")))?;
        Ok(self.token_issuer.get_or_init(|| fresh))
    }

    /// Where this server's webhooks are reached.
    pub fn webhooks(&self) -> crate::webhook::Reach {
        crate::webhook::Reach {
            group: self.group.clone(),
            in_process: self.in_process_webhooks.clone(),
        }
    }
}
