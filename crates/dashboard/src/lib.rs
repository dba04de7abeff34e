//! The live dashboard `infrasim up` serves on a port of its own: every cluster with its
//! phase, replicas and version (searched and paged, so 10,000 stay usable), a cluster's tree
//! with conditions and events, charts of the simulation (clusters by phase, time to
//! Available, request rates and latencies of the plane and the workload clusters,
//! reconciles and errors per controller), and the vCenters, VmGroups and SIPClusters.
//!
//! It reads the plane as any client does, through a `kube::Client` (in process for `up`),
//! and the process's own metrics; it writes nothing but the login Secrets it redeems.
//! HTTPS only, and every route but the sign-in page needs a session (see [`login`]).

pub mod clusters;
pub mod infra;
pub mod login;
pub mod samples;
pub mod server;
pub mod tree;

use hyper_util::rt::{TokioExecutor, TokioIo};
use infrasim_metrics::Metrics;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::net::TcpListener;

/// What the dashboard needs.
pub struct Config {
    /// A client of the plane, allowed to read everything shown and to delete the login
    /// Secrets in `kube-system`.
    pub client: kube::Client,
    /// The process's metrics, read back for the charts.
    pub metrics: Metrics,
    /// The TLS configuration to serve with.
    pub tls: Arc<rustls::ServerConfig>,
}

/// A running dashboard.
#[derive(Clone)]
pub struct Dashboard {
    url: String,
    client: kube::Client,
}

impl Dashboard {
    /// `https://HOST:PORT`, with loopback for an unspecified listening address.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Mints a fresh one-time login link.
    pub async fn login_link(&self) -> Result<String, login::LoginError> {
        let token = login::mint(&self.client).await?;
        Ok(login::link_for(&self.url, &token))
    }
}

/// The address a browser on this machine reaches `local` at.
pub fn url_for(local: SocketAddr) -> String {
    let ip = match local.ip() {
        ip if ip.is_unspecified() && ip.is_ipv4() => std::net::Ipv4Addr::LOCALHOST.into(),
        ip if ip.is_unspecified() => std::net::Ipv6Addr::LOCALHOST.into(),
        ip => ip,
    };
    format!("https://{}", SocketAddr::new(ip, local.port()))
}

/// Why the dashboard could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("reading the dashboard's listening address: {0}")]
    Listener(#[from] std::io::Error),
    #[error("recording the dashboard's address in the plane: {0}")]
    Plane(#[from] kube::Error),
}

/// Serves the dashboard on `listener` until the process ends, and records its address in
/// the plane for `infrasim dashboard`.
pub async fn serve(listener: TcpListener, config: Config) -> Result<Dashboard, StartError> {
    let url = url_for(listener.local_addr()?);
    let index = Arc::new(clusters::Index::default());
    index.watch(config.client.clone());
    let sampler = samples::Sampler::new(config.metrics);
    let (sampled_tx, sampled) = tokio::sync::watch::channel(0);
    tokio::spawn(sampler.clone().run(sampled_tx));
    let shared = Arc::new(server::Shared {
        client: config.client.clone(),
        sessions: login::Sessions::default(),
        index,
        sampler,
        sampled,
    });
    login::publish(&config.client, &url).await?;
    let acceptor = tokio_rustls::TlsAcceptor::from(config.tls);
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let (acceptor, shared) = (acceptor.clone(), shared.clone());
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let service = hyper::service::service_fn(move |req| {
                    let shared = shared.clone();
                    async move { Ok::<_, std::convert::Infallible>(server::answer(shared, req).await) }
                });
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(tls), service)
                    .await;
            });
        }
    });
    Ok(Dashboard {
        url,
        client: config.client,
    })
}
