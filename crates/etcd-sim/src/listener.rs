//! Serving a member over TLS on its own listener, HTTP/2 only, as etcd serves clients.

use futures::future::BoxFuture;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::service::TowerToHyperService;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

/// Serves `routes` (see [`crate::MemberService::routes`]) on `listener` with `tls` until
/// `shutdown` completes. The TLS configuration decides who may connect (etcd requires a
/// client certificate signed by its CA).
///
/// The serving itself is a boxed future compiled in this crate: an `async fn`'s state
/// machine (here, with tonic's and hyper's server under it) would be compiled again in every
/// crate that polls it.
pub fn serve(
    routes: tonic::service::Routes,
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> BoxFuture<'static, std::io::Result<()>> {
    serve_until(routes, listener, tls, Box::pin(shutdown))
}

#[inline(never)]
fn serve_until(
    routes: tonic::service::Routes,
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    shutdown: BoxFuture<'static, ()>,
) -> BoxFuture<'static, std::io::Result<()>> {
    Box::pin(accept_loop(routes, listener, tls, shutdown))
}

async fn accept_loop(
    routes: tonic::service::Routes,
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    mut shutdown: BoxFuture<'static, ()>,
) -> std::io::Result<()> {
    loop {
        let (tcp, peer) = tokio::select! {
            _ = &mut shutdown => return Ok(()),
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    tracing::warn!(error = %e, "etcd accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        tokio::spawn(serve_connection(
            routes.clone(),
            tcp,
            tls.clone(),
            peer.to_string(),
        ));
    }
}

/// Serves one client connection (a socket, or the stream of a port-forward): the TLS
/// handshake with `tls`, then HTTP/2 until the client goes. Only the transport's type is
/// generic: the connection is served by a boxed future compiled here (see [`serve`]).
pub fn serve_connection<IO>(
    routes: tonic::service::Routes,
    io: IO,
    tls: Arc<rustls::ServerConfig>,
    peer: String,
) -> BoxFuture<'static, ()>
where
    IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static,
{
    serve_stream(routes, Box::new(io), tls, peer)
}

/// What a connection is carried on, as one type.
trait Transport: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin {}

impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin> Transport for T {}

#[inline(never)]
fn serve_stream(
    routes: tonic::service::Routes,
    io: Box<dyn Transport>,
    tls: Arc<rustls::ServerConfig>,
    peer: String,
) -> BoxFuture<'static, ()> {
    Box::pin(handshake_and_serve(routes, io, tls, peer))
}

async fn handshake_and_serve(
    routes: tonic::service::Routes,
    io: Box<dyn Transport>,
    tls: Arc<rustls::ServerConfig>,
    peer: String,
) {
    let acceptor = TlsAcceptor::from(tls);
    let Ok(Ok(tls)) = tokio::time::timeout(Duration::from_secs(10), acceptor.accept(io)).await
    else {
        tracing::debug!(%peer, "etcd TLS handshake failed");
        return;
    };
    let served = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
        .serve_connection(TokioIo::new(tls), TowerToHyperService::new(routes))
        .await;
    if let Err(e) = served {
        tracing::debug!(%peer, error = %e, "etcd connection ended with an error");
    }
}

/// A TLS configuration as kubeadm gives etcd: the member's serving certificate, and client
/// certificates required and verified against the etcd CA (`--client-cert-auth`).
pub fn tls_config(
    ca_pem: &str,
    cert_pem: &str,
    key_pem: &str,
) -> Result<Arc<rustls::ServerConfig>, rustls::Error> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let bad = |e: &dyn std::fmt::Display| rustls::Error::General(e.to_string());
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    for ca in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(ca.map_err(|e| bad(&e))?)?;
    }
    let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
        Arc::new(roots),
        provider.clone(),
    )
    .build()
    .map_err(|e| bad(&e))?;
    let chain = CertificateDer::pem_slice_iter(cert_pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| bad(&e))?;
    let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes()).map_err(|e| bad(&e))?;
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain, key)?;
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok(Arc::new(config))
}
