//! One shared listener for every cluster, routing by TLS server name: the client's ClientHello
//! names the cluster (`<cluster>.<SNI_SUFFIX>`), and the handshake is then completed with that
//! cluster's own configuration (its serving certificate, its CA for client certificates), so
//! one process serves more clusters than it has ports. A kubeconfig reaches a cluster through
//! it with `tls-server-name`. Names no serving cluster answers to are closed at once: there is
//! no default cluster.

use infrasim_kube_api::ApiServer;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, RwLock};
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio_rustls::LazyConfigAcceptor;

/// The domain under which clusters are named on the shared listener.
pub const SNI_SUFFIX: &str = "clusters.infrasim";

/// The server name of cluster `name` on the shared listener.
pub fn server_name(cluster: &str) -> String {
    format!("{cluster}.{SNI_SUFFIX}")
}

#[derive(Clone)]
struct Route {
    server: ApiServer,
    tls: Arc<rustls::ServerConfig>,
    /// Changes (its sender is dropped) when the cluster's endpoint closes: the connections
    /// made through the shared listener close with it.
    closed: watch::Receiver<()>,
}

/// The clusters the shared listener currently serves, by server name. A cluster is routed
/// while its endpoint is open (from its first API server to its last).
#[derive(Default)]
pub(crate) struct Router {
    routes: RwLock<HashMap<String, Route>>,
}

impl Router {
    /// Routes `cluster`'s name to its server until [`Router::remove`], or until the returned
    /// sender is dropped, which also closes the connections made meanwhile.
    pub fn insert(
        &self,
        cluster: &str,
        server: ApiServer,
        tls: Arc<rustls::ServerConfig>,
    ) -> watch::Sender<()> {
        let (open, closed) = watch::channel(());
        self.routes
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(
                server_name(cluster),
                Route {
                    server,
                    tls,
                    closed,
                },
            );
        open
    }

    pub fn remove(&self, cluster: &str) {
        self.routes
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&server_name(cluster));
    }

    fn route(&self, name: &str) -> Option<Route> {
        self.routes
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(&name.to_ascii_lowercase())
            .cloned()
    }

    /// Accepts connections on `listener` for as long as the process runs.
    pub async fn serve(self: Arc<Self>, listener: TcpListener) {
        loop {
            let (tcp, peer) = match listener.accept().await {
                Ok(a) => a,
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed on the shared endpoint");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            let router = self.clone();
            tokio::spawn(async move {
                if let Err(e) = router.connection(tcp, peer).await {
                    tracing::debug!(%peer, error = %e, "shared-endpoint connection ended");
                }
            });
        }
    }

    async fn connection(
        &self,
        tcp: tokio::net::TcpStream,
        peer: SocketAddr,
    ) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        let _ = tcp.set_nodelay(true);
        let acceptor = LazyConfigAcceptor::new(rustls::server::Acceptor::default(), tcp);
        let start = tokio::time::timeout(Duration::from_secs(10), acceptor).await??;
        let name = start.client_hello().server_name().map(str::to_string);
        let Some(route) = name.as_deref().and_then(|n| self.route(n)) else {
            // Dropping the handshake closes the connection: unknown names get nothing.
            tracing::debug!(%peer, ?name, "no cluster answers to this server name");
            return Ok(());
        };
        let tls =
            tokio::time::timeout(Duration::from_secs(10), start.into_stream(route.tls)).await??;
        let mut closed = route.closed;
        tokio::select! {
            result = route.server.serve_established(tls, peer) => result,
            _ = closed.changed() => Ok(()),
        }
    }
}
