//! The HTTPS listener the binary's own small servers share (Cluster API's webhooks for a
//! plane elsewhere, `--metrics-bind-address`): a certificate of a CA made at start, for the
//! address listened on, and each connection served by hyper on a task of its own.

use anyhow::Context;
use bytes::Bytes;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use infrasim_kube_api::pki::CertificateAuthority;
use std::future::Future;
use std::net::SocketAddr;
use tokio::net::TcpListener;

/// Listens on `listen` (for `what`, in errors) with a certificate named `name`, and answers
/// every request with `answer`; the address listened on and the CA that signed the
/// certificate. Callers present no client certificate.
pub async fn serve<F, Fut, B>(
    listen: SocketAddr,
    name: &str,
    what: &str,
    answer: F,
) -> anyhow::Result<(SocketAddr, CertificateAuthority)>
where
    F: Fn(http::Request<Incoming>) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = http::Response<B>> + Send + 'static,
    B: hyper::body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let ca = CertificateAuthority::generate(&format!("{name}-ca"))?;
    let listener = TcpListener::bind(listen)
        .await
        .with_context(|| format!("listening on {listen} for {what}"))?;
    let addr = listener.local_addr()?;
    let cert = ca.serving_cert(name, &["localhost".to_string()], &[addr.ip()])?;
    let acceptor = tokio_rustls::TlsAcceptor::from(infrasim_kube_api::tls_config(&ca, &cert)?);
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let (acceptor, answer) = (acceptor.clone(), answer.clone());
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let service = hyper::service::service_fn(move |req| {
                    let answered = answer(req);
                    async move { Ok::<_, std::convert::Infallible>(answered.await) }
                });
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(tls), service)
                    .await;
            });
        }
    });
    Ok((addr, ca))
}
