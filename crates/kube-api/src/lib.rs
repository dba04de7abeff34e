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
mod codec;
mod component_status;
mod context;
mod conversion;
pub mod crd;
pub mod csr;
mod event_versions;
pub mod eviction;
mod field_path;
mod filter;
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

/// Writing objects into a group the way the API would, for code that seeds clusters.
pub mod crud_support {
    use infrasim_store::{Group, StoreError};
    use serde_json::Value;

    /// Creates `object` in `resource`, defaulted as the API would default it (but for a
    /// Service's cluster IP, which the object must carry) and with the selectable fields its
    /// kind has; an existing object of that name is left as it is.
    pub fn store_object(group: &Group, resource: &str, mut object: Value) {
        let kind = kind_of(&object);
        crate::defaults::apply_stateless(&kind, &mut object);
        let derived = crate::object::derive(&kind, &object);
        match group.create(resource, object, derived) {
            Ok(_) | Err(StoreError::AlreadyExists { .. }) => {}
            Err(e) => tracing::warn!(resource, error = %e, "seeding an object"),
        }
    }

    fn kind_of(object: &Value) -> String {
        object
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    }

    /// What kube-apiserver's admission adds to a pod a controller creates (the tolerations
    /// of DefaultTolerationSeconds), for controllers that write pods in-process.
    pub fn admit_pod(pod: &mut Value) {
        if let Some(spec) = pod.get_mut("spec") {
            crate::defaults::default_toleration_seconds(spec);
        }
    }

    /// Creates `object` in `resource`, with its kind's selectable fields; for in-process
    /// controllers, which write as kube-controller-manager does but without HTTP.
    pub fn create(
        group: &Group,
        resource: &str,
        object: Value,
    ) -> Result<std::sync::Arc<infrasim_store::StoredObject>, StoreError> {
        let derived = crate::object::derive(&kind_of(&object), &object);
        group.create(resource, object, derived)
    }

    /// Replaces `object` in `resource` if it is still at resourceVersion `expected`.
    pub fn update(
        group: &Group,
        resource: &str,
        object: Value,
        expected: u64,
    ) -> Result<std::sync::Arc<infrasim_store::StoredObject>, StoreError> {
        let derived = crate::object::derive(&kind_of(&object), &object);
        group.update(resource, object, derived, Some(expected))
    }

    /// [`update`] over the object as `read` (stored and decoded): while it is still the
    /// stored one, the store compares against the caller's decoded copy rather than
    /// decoding it again.
    pub fn update_read(
        group: &Group,
        resource: &str,
        object: Value,
        read: infrasim_store::Read<'_>,
    ) -> Result<std::sync::Arc<infrasim_store::StoredObject>, StoreError> {
        let derived = crate::object::derive(&kind_of(&object), &object);
        let expected = read.object.meta.resource_version;
        group.update_read(resource, object, derived, Some(expected), read, false)
    }
}
mod defaults;
mod discovery;
mod ephemeral;
pub mod fuzzing;
mod handler;
pub mod http;
pub mod kubeconfig;
mod list;
mod namespaces;
mod openapi;
mod openapi_v2_proto;
pub mod pki;
mod pod_log;
pub mod portforward;
pub mod protobuf;
pub mod request;
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
pub use server::{ApiServer, ConnectionError, LocalService, WeakApiServer};
pub use sidecar::{Sidecar, SidecarBody, SidecarError, SidecarService};
pub use state::ApiConfig;
pub use system_writer::SystemWriter;
pub use tls::{client_tls_config, tls_config, ServeError};
