//! The API server: its handle, the request entry point, and the TLS listener.

use crate::auth::{Identity, TokenAuthenticator};
use crate::http::{error_response, Body, RequestBody};
use crate::pki::{CertificateAuthority, KeyedCert, PkiError, SigningKey};
use crate::resources::Registry;
use crate::sa_tokens::TokenIssuer;
use crate::sidecar::{EndpointBody, Issuer, Sidecar};
use crate::state::{ApiConfig, Forwarder, SidecarRoute, State};
use crate::status::ApiError;
use crate::tls::{tls_config_for, ServeError};
use futures::future::BoxFuture;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use infrasim_clock::SharedClock;
use infrasim_store::Group;
use rustls::pki_types::CertificateDer;
use std::collections::HashSet;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

/// A Kubernetes API server over one store group. Cheap to clone.
#[derive(Debug, Clone)]
pub struct ApiServer {
    pub(crate) state: Arc<State>,
}

/// See [`ApiServer::downgrade`].
#[derive(Debug, Clone)]
pub struct WeakApiServer(std::sync::Weak<State>);

impl WeakApiServer {
    /// The server, while it still exists.
    pub fn upgrade(&self) -> Option<ApiServer> {
        self.0.upgrade().map(|state| ApiServer { state })
    }
}

impl ApiServer {
    /// A server over `group`, creating the initial namespaces (and their default objects)
    /// if the group has none. Must run inside a tokio runtime: namespace deletion runs as
    /// tasks.
    pub fn new(
        group: Arc<Group>,
        ca: CertificateAuthority,
        clock: SharedClock,
        config: ApiConfig,
    ) -> Self {
        for (resource, field) in crate::selectors::INDEXED_FIELDS {
            group.index_field(resource, field);
        }
        let server = ApiServer {
            state: Arc::new(State {
                group,
                hooks: crate::controllers::HOOKS,
                registry: Arc::new(if config.resource_metrics {
                    Registry::builtin().with_resource_metrics()
                } else {
                    Registry::builtin()
                }),
                tokens: TokenAuthenticator::default(),
                ca,
                clock,
                config,
                terminating: Mutex::new(HashSet::new()),
                rbac: Default::default(),
                sidecar: std::sync::OnceLock::new(),
                port_forwarder: std::sync::OnceLock::new(),
                port_forwards: Default::default(),
                in_process_webhooks: Default::default(),
                webhook_configs: Default::default(),
                token_issuer: std::sync::OnceLock::new(),
                faults: Default::default(),
            }),
        };
        crate::controllers::start(&server.state);
        server
    }

    /// Serves `hook` in this process as the webhook Service `namespace/name`: admission and
    /// conversion webhooks configured with that Service reach it without a socket.
    pub fn serve_webhook_in_process(
        &self,
        namespace: &str,
        name: &str,
        hook: Arc<dyn crate::webhook::InProcessWebhook>,
    ) {
        self.state.in_process_webhooks.insert(namespace, name, hook);
    }

    /// A handle that does not keep the server alive (for what the server itself holds, such
    /// as its port forwarder, which would otherwise keep it forever).
    pub fn downgrade(&self) -> WeakApiServer {
        WeakApiServer(Arc::downgrade(&self.state))
    }

    /// The CA that signs this server's certificates and its clients'.
    pub fn ca(&self) -> &CertificateAuthority {
        &self.state.ca
    }

    /// A writer for a component of the cluster that writes in-process (a simulated
    /// controller, kubeadm's bootstrap) as `identity`, recording its changes under field
    /// manager `manager`, through the same pipeline as a client's request.
    pub fn system_writer(&self, identity: Identity, manager: &str) -> crate::SystemWriter {
        crate::SystemWriter::new(self.state.clone(), identity, manager)
    }

    /// The latency and errors this server injects into its requests (see
    /// [`crate::faults`]); set and cleared through the handle.
    pub fn faults(&self) -> &crate::faults::Faults {
        &self.state.faults
    }

    /// The store group this server serves.
    pub fn group(&self) -> &Arc<Group> {
        &self.state.group
    }

    /// Signs and verifies service-account tokens with `key` (kubeadm's `sa.key`) from now
    /// on. Set it before the server takes requests: a key set later than the first token
    /// is refused, since tokens already issued would stop verifying.
    pub fn set_service_account_key(&self, key: &SigningKey) -> Result<(), PkiError> {
        let issuer = TokenIssuer::new(key)?;
        self.state
            .token_issuer
            .set(issuer)
            .map_err(|_| PkiError::Invalid("the service-account key is already set".into()))
    }

    /// Accepts `token` as a bearer token for `identity`.
    pub fn add_token(&self, token: &str, identity: Identity) {
        self.state.tokens.add(token, identity);
    }

    /// Handles one request from a client already identified by its certificate (or not).
    /// Never panics into the connection: a panic in a handler becomes a 500 Status.
    ///
    /// Only the body's type is generic here: the request is handled by [`Self::handle_erased`]
    /// (see it for why).
    pub fn handle<B>(
        &self,
        req: http::Request<B>,
        cert_identity: Option<Identity>,
    ) -> BoxFuture<'static, http::Response<Body>>
    where
        B: http_body::Body<Data = bytes::Bytes> + Send + 'static,
        B::Error: std::error::Error + Send + Sync + 'static,
    {
        self.handle_erased(crate::http::erase_body(req), cert_identity)
    }

    /// [`Self::handle`] for a body already erased. It returns a boxed future on purpose: an
    /// `async fn`'s state machine is compiled again in every crate that polls it (it is never
    /// shared as a compiled symbol), and this one holds the whole handler tree. Boxed here,
    /// it is compiled once, in this crate; `inline(never)` keeps it so.
    #[inline(never)]
    pub fn handle_erased(
        &self,
        req: http::Request<RequestBody>,
        cert_identity: Option<Identity>,
    ) -> BoxFuture<'static, http::Response<Body>> {
        let state = self.state.clone();
        let fut = crate::handler::handle(state, req, cert_identity);
        Box::pin(async move {
            match futures::FutureExt::catch_unwind(std::panic::AssertUnwindSafe(fut)).await {
                Ok(resp) => resp,
                Err(_) => {
                    tracing::error!("request handler panicked");
                    error_response(&ApiError::internal(
                        "an internal error occurred while handling the request",
                    ))
                }
            }
        })
    }

    /// A rustls configuration serving `cert` and verifying client certificates against the
    /// server's CA (clients without one may still use a bearer token), and against the
    /// sidecar's CA if it has one.
    pub fn tls_config(&self, cert: &KeyedCert) -> Result<Arc<rustls::ServerConfig>, ServeError> {
        let mut cas = vec![self.state.ca.cert_pem.as_str()];
        if let Some(route) = self.state.sidecar.get() {
            cas.push(route.sidecar.client_ca_pem.as_str());
        }
        tls_config_for(&cas, cert)
    }

    /// Port-forward sessions started with `protocol` since the server started.
    pub fn port_forward_sessions(&self, protocol: crate::portforward::Protocol) -> u64 {
        self.state.port_forwards.count(protocol)
    }

    /// Lets `pods/{name}/portforward` reach what `forwarder` opens (once; later calls are
    /// ignored).
    pub fn set_port_forwarder(&self, forwarder: crate::portforward::PortForwarder) {
        let _ = self.state.port_forwarder.set(Forwarder(forwarder));
    }

    /// Serves `sidecar` beside the API on this server's connections. Set it before making
    /// the TLS configuration, which must accept the sidecar's client certificates.
    pub fn set_sidecar(&self, sidecar: Sidecar) -> Result<(), ServeError> {
        let route = SidecarRoute {
            sidecar_ca: Issuer::new(&sidecar.client_ca_pem)?,
            api_ca: Issuer::new(&self.state.ca.cert_pem)?,
            sidecar,
        };
        self.state
            .sidecar
            .set(route)
            .map_err(|_| ServeError::Tls("the server already has a sidecar".into()))
    }

    /// Serves HTTPS on `listener` until `shutdown` completes; then the listener closes and so
    /// do the connections it accepted, as when an API server goes away.
    ///
    /// Boxed, as [`Self::handle_erased`] is and for the same reason: the accept loop polls
    /// every connection's handler.
    pub fn serve(
        self,
        listener: TcpListener,
        tls: Arc<rustls::ServerConfig>,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> BoxFuture<'static, Result<(), ServeError>> {
        self.serve_until(listener, tls, Box::pin(shutdown))
    }

    #[inline(never)]
    fn serve_until(
        self,
        listener: TcpListener,
        tls: Arc<rustls::ServerConfig>,
        shutdown: BoxFuture<'static, ()>,
    ) -> BoxFuture<'static, Result<(), ServeError>> {
        Box::pin(self.accept_loop(listener, tls, shutdown))
    }

    async fn accept_loop(
        self,
        listener: TcpListener,
        tls: Arc<rustls::ServerConfig>,
        shutdown: BoxFuture<'static, ()>,
    ) -> Result<(), ServeError> {
        let acceptor = TlsAcceptor::from(tls);
        // Dropped on return: every connection task sees it and ends.
        let (_closing, closed) = tokio::sync::watch::channel(());
        let mut shutdown = shutdown;
        loop {
            let (tcp, peer) = tokio::select! {
                _ = &mut shutdown => return Ok(()),
                accepted = listener.accept() => match accepted {
                    Ok(a) => a,
                    Err(e) => {
                        // Out of file descriptors and the like: back off, do not spin.
                        tracing::warn!(error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                },
            };
            let server = self.clone();
            let acceptor = acceptor.clone();
            let mut closed = closed.clone();
            tokio::spawn(async move {
                tokio::select! {
                    result = server.serve_connection(acceptor, tcp, peer) => {
                        if let Err(e) = result {
                            tracing::debug!(%peer, error = %e, "connection ended with an error");
                        }
                    }
                    // The listener is gone: drop the connection.
                    _ = closed.changed() => {}
                }
            });
        }
    }

    async fn serve_connection(
        self,
        acceptor: TlsAcceptor,
        tcp: tokio::net::TcpStream,
        peer: SocketAddr,
    ) -> Result<(), ConnectionError> {
        let _ = tcp.set_nodelay(true);
        let tls = tokio::time::timeout(Duration::from_secs(10), acceptor.accept(tcp)).await??;
        self.serve_established(tls, peer).await
    }

    /// Serves one connection whose TLS handshake is done (with this server's configuration;
    /// a listener shared by several servers picks the server by the client's server name
    /// first). The client is identified by the certificate it presented, if any.
    ///
    /// Only the transport's type is generic here; the connection is served by a boxed future
    /// compiled in this crate (see [`Self::handle_erased`] for why).
    pub fn serve_established<IO>(
        self,
        tls: tokio_rustls::server::TlsStream<IO>,
        peer: SocketAddr,
    ) -> BoxFuture<'static, Result<(), ConnectionError>>
    where
        IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static,
    {
        let chain: Vec<CertificateDer<'static>> = tls
            .get_ref()
            .1
            .peer_certificates()
            .map(|c| c.iter().map(|c| c.clone().into_owned()).collect())
            .unwrap_or_default();
        self.serve_stream(Box::new(tls), chain, peer)
    }

    #[inline(never)]
    fn serve_stream(
        self,
        stream: Box<dyn Transport>,
        chain: Vec<CertificateDer<'static>>,
        peer: SocketAddr,
    ) -> BoxFuture<'static, Result<(), ConnectionError>> {
        let sidecar = self.state.sidecar.get();
        // With a sidecar the handshake accepted either CA's certificates: only the API's CA
        // makes an API identity, only the sidecar's opens the sidecar.
        let (api_cert, sidecar_cert) = match sidecar {
            None => (true, false),
            Some(route) => crate::sidecar::issued_by(&route.api_ca, &route.sidecar_ca, &chain),
        };
        let identity = chain
            .first()
            .filter(|_| api_cert)
            .and_then(Identity::from_certificate);
        tracing::trace!(%peer, ?identity, "connection");
        let service = service_fn(move |req: http::Request<Incoming>| {
            let server = self.clone();
            let identity = identity.clone();
            async move {
                Ok::<_, std::convert::Infallible>(server.route(req, identity, sidecar_cert).await)
            }
        });
        Box::pin(async move {
            hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                .serve_connection_with_upgrades(TokioIo::new(stream), service)
                .await?;
            Ok(())
        })
    }
}

/// What a connection is carried on once its TLS handshake is done, as one type (see
/// [`ApiServer::serve_established`]).
trait Transport: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin {}

impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin> Transport for T {}

/// Why a connection ended badly.
pub type ConnectionError = Box<dyn std::error::Error + Send + Sync>;

impl ApiServer {
    /// Sends a request of a connection to the sidecar (if it is one, and the connection's
    /// certificate may use it) or to the API.
    async fn route(
        &self,
        req: http::Request<Incoming>,
        identity: Option<Identity>,
        sidecar_cert: bool,
    ) -> http::Response<EndpointBody> {
        let sidecar = self
            .state
            .sidecar
            .get()
            .filter(|r| crate::sidecar::wants(&r.sidecar, &req))
            .map(|r| (r.sidecar.service.clone(), r.sidecar.refuse));
        match sidecar {
            Some((serve, _)) if sidecar_cert => serve(req).await.map(EndpointBody::Sidecar),
            Some((_, refuse)) => refuse().map(EndpointBody::Sidecar),
            None => self.handle(req, identity).await.map(EndpointBody::Api),
        }
    }
}

impl ApiServer {
    /// This server as a tower service for clients in the same process (the controllers
    /// inside `infrasim up` build a `kube::Client` over it): every request is made as
    /// `identity`, with no socket and no TLS between them, and goes through the same
    /// authorization, admission and storage as a request over the network.
    pub fn local_service(&self, identity: Identity) -> LocalService {
        LocalService {
            server: self.clone(),
            identity,
        }
    }
}

/// See [`ApiServer::local_service`].
#[derive(Debug, Clone)]
pub struct LocalService {
    server: ApiServer,
    identity: Identity,
}

impl<B> tower_service::Service<http::Request<B>> for LocalService
where
    B: http_body::Body<Data = bytes::Bytes> + Send + 'static,
    B::Error: std::error::Error + Send + Sync + 'static,
{
    type Response = http::Response<Body>;
    type Error = std::convert::Infallible;
    type Future = std::pin::Pin<
        Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send + 'static>,
    >;

    fn poll_ready(
        &mut self,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        let server = self.server.clone();
        let identity = self.identity.clone();
        let handled = server.handle(req, Some(identity));
        Box::pin(async move { Ok(handled.await) })
    }
}
