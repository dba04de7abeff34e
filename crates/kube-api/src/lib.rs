//! The Kubernetes HTTP API over an infrasim store group.
//!
//! [`ApiServer`] serves one [`infrasim_store::Group`] the way kube-apiserver serves etcd:
//! discovery, CRUD, list and watch with selectors and pagination, merge and JSON patches,
//! Tables for `kubectl get`, namespace lifecycle, `Status` errors with kube-apiserver's codes,
//! TLS with client-certificate and bearer-token authentication.
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use infrasim_kube_api::{ApiConfig, ApiServer, pki::CertificateAuthority};
//! use infrasim_store::{Store, StoreConfig};
//!
//! let store = Store::in_memory(StoreConfig::default());
//! let group = store.create_group("management")?;
//! let ca = CertificateAuthority::generate("infrasim-ca")?;
//! let server = ApiServer::new(group, ca.clone(), store.clock().clone(), ApiConfig::default());
//! let cert = ca.serving_cert("kube-apiserver", &["localhost".into()], &["127.0.0.1".parse()?])?;
//! let tls = server.tls_config(&cert)?;
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:6443").await?;
//! server.serve(listener, tls, std::future::pending()).await?;
//! # Ok(()) }
//! ```

/// The Kubernetes version the server reports (`/version`) unless configured otherwise.
pub const KUBERNETES_VERSION: &str = "v1.33.0";

mod access_review;
mod admission;
mod apiservices;
pub mod apply;
pub mod auth;
mod authn;
pub mod authz;
mod binding;
mod codec;
mod component_status;
mod context;
mod controllers;
mod conversion;
pub mod crd;
pub mod csr;
mod event_versions;
pub mod eviction;
mod field_path;
mod filter;
mod hpa_versions;
mod object;
mod rbac_cache;
pub mod sa_tokens;
pub mod schema;
mod state;
mod system_writer;
mod tls;
mod token_resources;
mod verbs;
mod write;

mod defaults;
mod discovery;
mod ephemeral;
pub mod faults;
pub mod fuzzing;
mod handler;
pub mod http;
pub mod kubeconfig;
mod list;
pub mod metrics;
mod namespaces;
mod openapi;
mod openapi_v2_proto;
pub mod pki;
mod pod_log;
pub mod portforward;
pub mod protobuf;
pub mod quantity;
pub mod request;
pub mod resource_metrics;
pub mod resources;
mod scale;
pub mod selectors;
mod server;
pub mod sidecar;
pub mod status;
pub mod strategic;
pub mod table;
pub mod validation;
pub mod values;
pub mod version;
mod watch;
pub mod webhook;

pub use auth::Identity;
pub use metrics::RequestMetrics;
pub use server::{ApiServer, ConnectionError, LocalService, WeakApiServer};
pub use sidecar::{Sidecar, SidecarBody, SidecarError, SidecarService};
pub use state::ApiConfig;
pub use system_writer::SystemWriter;
pub use tls::{client_tls_config, tls_config, ServeError};
