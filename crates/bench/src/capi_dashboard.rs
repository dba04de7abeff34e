//! `bench capi --dashboard true`: the live dashboard served beside the plane as `infrasim up`
//! serves it (its watches run while the clusters come up, so their cost is in the run's CPU),
//! and once every cluster is Available, what a browser's requests cost at that size: the time
//! until the dashboard's index holds every cluster, then each route the page calls (one page
//! of rows, a search, the last page, a cluster's tree, the overview, the charts' series, the
//! infrastructure), each asked five times over one HTTPS connection with a session cookie,
//! as the page does.

use crate::harness::Client;
use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use infrasim_kube_api::pki::CertificateAuthority;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A dashboard serving the bench's plane, and a client of it.
pub(crate) struct Dashboard {
    addr: SocketAddr,
    login: String,
    client: Arc<Client>,
}

/// Starts the dashboard over `client`'s plane with `metrics` for its charts.
pub(crate) async fn start(
    client: &kube::Client,
    metrics: &infrasim_metrics::Metrics,
) -> anyhow::Result<Dashboard> {
    let listener = tokio::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
    let addr = listener.local_addr()?;
    let ca = CertificateAuthority::generate("bench-dashboard")?;
    let cert = ca.serving_cert("infrasim-dashboard", &["localhost".into()], &[addr.ip()])?;
    let config = infrasim_dashboard::Config {
        client: client.clone(),
        metrics: metrics.clone(),
        tls: infrasim_kube_api::tls_config(&ca, &cert)?,
    };
    let dashboard = infrasim_dashboard::serve(listener, config).await?;
    let link = dashboard.login_link().await?;
    // The link's path and query (`/login?token=…`), asked of the address directly.
    let login = link
        .split_once(&addr.to_string())
        .map(|(_, path)| path.to_string())
        .ok_or_else(|| anyhow::anyhow!("a login link of another address: {link}"))?;
    let visitor = ca.client_cert("bench", &[])?;
    Ok(Dashboard {
        addr,
        login,
        client: Arc::new(Client::new(&ca, &visitor, false)?),
    })
}

/// One route's answer: its size and the best and worst of five times.
struct Timed {
    bytes: usize,
    best: Duration,
    worst: Duration,
}

impl Dashboard {
    /// What the page's requests cost with `clusters` clusters up, as lines to print.
    pub(crate) async fn measure(&self, clusters: usize) -> anyhow::Result<String> {
        let mut send = self.client.http1::<Empty<Bytes>>(self.addr).await?;
        let (status, cookie, _) = get(&mut send, &self.login, None).await?;
        let cookie =
            cookie.ok_or_else(|| anyhow::anyhow!("the login link opened no session ({status})"))?;
        let cookie = Some(cookie.as_str());
        let started = Instant::now();
        // The index follows the plane's watch: given until it lists every cluster.
        let listed = loop {
            let (_, _, body) = get(&mut send, "/api/clusters?limit=1", cookie).await?;
            let total = serde_json::from_slice::<serde_json::Value>(&body)?["total"]
                .as_u64()
                .unwrap_or(0);
            if total as usize >= clusters || started.elapsed() > Duration::from_secs(60) {
                break total;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        let mut lines = vec![format!(
            "dashboard: the index listed {listed} clusters {:.1} s after every one was Available",
            started.elapsed().as_secs_f64()
        )];
        let last = clusters.saturating_sub(50);
        let one = format!("bench-{}", clusters / 2);
        let routes = [
            "/".to_string(),
            "/api/clusters?limit=50".to_string(),
            format!("/api/clusters?offset={last}&limit=50"),
            format!("/api/clusters?q={one}&limit=50"),
            "/api/clusters?q=no-such-cluster&limit=50".to_string(),
            format!("/api/clusters/default/{one}"),
            "/api/overview".to_string(),
            "/api/series".to_string(),
            "/api/infrastructure".to_string(),
        ];
        for route in routes {
            let t = timed(&mut send, &route, cookie).await?;
            lines.push(format!(
                "dashboard: GET {route}: {} bytes in {:.2} to {:.2} ms",
                t.bytes,
                t.best.as_secs_f64() * 1e3,
                t.worst.as_secs_f64() * 1e3
            ));
        }
        Ok(lines.join("\n"))
    }
}

async fn timed(
    send: &mut hyper::client::conn::http1::SendRequest<Empty<Bytes>>,
    path: &str,
    cookie: Option<&str>,
) -> anyhow::Result<Timed> {
    let mut times = Vec::new();
    let mut bytes = 0;
    for _ in 0..5 {
        let started = Instant::now();
        let (status, _, body) = get(send, path, cookie).await?;
        times.push(started.elapsed());
        anyhow::ensure!(status.is_success(), "GET {path}: {status}");
        bytes = body.len();
    }
    Ok(Timed {
        bytes,
        best: times.iter().min().copied().unwrap_or_default(),
        worst: times.iter().max().copied().unwrap_or_default(),
    })
}

/// GET `path` with the session `cookie`: the status, the session a `Set-Cookie` opened
/// (as `name=value`), and the body.
async fn get(
    send: &mut hyper::client::conn::http1::SendRequest<Empty<Bytes>>,
    path: &str,
    cookie: Option<&str>,
) -> anyhow::Result<(http::StatusCode, Option<String>, Bytes)> {
    let mut req = http::Request::get(path).header(http::header::HOST, "localhost");
    if let Some(cookie) = cookie {
        req = req.header(http::header::COOKIE, cookie);
    }
    send.ready().await?;
    let resp = send.send_request(req.body(Empty::new())?).await?;
    let status = resp.status();
    let session = resp
        .headers()
        .get(http::header::SET_COOKIE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .map(str::to_string);
    let body = resp.into_body().collect().await?.to_bytes();
    Ok((status, session, body))
}
