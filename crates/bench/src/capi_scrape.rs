//! What a scrape of the plane's metrics costs once `bench capi`'s clusters are up, for
//! `/metrics` and for the objects' state metrics (`/metrics/state`): the series and bytes,
//! the time to render them in the process, and the time a scraper waits for them over
//! HTTPS, as Prometheus asks for them (a client certificate in `system:monitoring`, one
//! connection, the body read to its end). The scraper runs on a thread of its own, as a
//! Prometheus is a process of its own: on the plane's runtime its reads would wait behind the
//! clusters' tasks, and the time would be the scraper's as much as the plane's.

use crate::harness::Client;
use bytes::{Buf, Bytes};
use http_body_util::{BodyExt, Empty};
use infrasim_kube_api::pki::CertificateAuthority;
use infrasim_kube_api::ApiServer;
use infrasim_metrics::{Format, Metrics};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The plane served over HTTPS for scrapes, and a scraper's client of it.
pub(crate) struct Scraper {
    addr: SocketAddr,
    client: Arc<Client>,
}

impl Scraper {
    /// Serves `server` on a loopback port for as long as the process lives.
    pub(crate) async fn start(
        server: &ApiServer,
        ca: &CertificateAuthority,
    ) -> anyhow::Result<Self> {
        let (addr, _, stop) = crate::harness::serve(server, ca).await?;
        // The bench exits when it is done; the listener lives until then.
        std::mem::forget(stop);
        let cert = ca.client_cert("bench-scraper", &["system:monitoring"])?;
        Ok(Scraper {
            addr,
            client: Arc::new(Client::new(ca, &cert, false)?),
        })
    }

    /// One scrape of `path` read to its end, on a thread and runtime of its own: its bytes,
    /// and the time from the request to the last byte.
    async fn scrape(&self, path: String) -> anyhow::Result<Timed> {
        let (client, addr) = (self.client.clone(), self.addr);
        tokio::task::spawn_blocking(move || {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?
                .block_on(scrape_with(&client, addr, &path))
        })
        .await?
    }
}

async fn scrape_with(client: &Client, addr: SocketAddr, path: &str) -> anyhow::Result<Timed> {
    let mut send = client.http1::<Empty<Bytes>>(addr).await?;
    let started = Instant::now();
    let req = http::Request::get(path)
        .header(http::header::HOST, "localhost")
        .header(http::header::ACCEPT, "text/plain;version=0.0.4")
        .body(Empty::new())?;
    let resp = send.send_request(req).await?;
    anyhow::ensure!(resp.status().is_success(), "{path}: {}", resp.status());
    let mut body = resp.into_body();
    // Only the bytes are counted: the time is the server's, not this reader's.
    let mut bytes = 0;
    while let Some(frame) = body.frame().await {
        if let Ok(data) = frame?.into_data() {
            bytes += data.remaining();
        }
    }
    Ok(Timed {
        bytes,
        took: started.elapsed(),
    })
}

/// A text's size and the time it took to make or read.
#[derive(Debug, Clone, Copy)]
struct Timed {
    bytes: usize,
    took: Duration,
}

/// The text of `path` in pieces, as the plane makes it: one for `/metrics`, 1 MB pieces for
/// `/metrics/state`.
fn render(metrics: &Metrics, path: &str) -> Box<dyn Iterator<Item = String>> {
    match path {
        "/metrics" => Box::new(std::iter::once(metrics.render(Format::Classic))),
        _ => Box::new(metrics.state().snapshot().chunks(Format::Classic, 1 << 20)),
    }
}

/// Renders `path` once, timing that alone (the pieces' lengths summed, nothing read).
fn timed_render(metrics: &Metrics, path: &str) -> Timed {
    let started = Instant::now();
    let bytes = render(metrics, path).map(|piece| piece.len()).sum();
    Timed {
        bytes,
        took: started.elapsed(),
    }
}

/// The series in `path`'s text: its lines that are not comments. Pieces end between lines.
fn series(metrics: &Metrics, path: &str) -> usize {
    render(metrics, path)
        .map(|piece| piece.lines().filter(|l| !l.starts_with('#')).count())
        .sum()
}

/// "12 to 40 ms": the best and the worst of `times`.
fn range(times: &[Timed]) -> String {
    let ms = |d: Option<Duration>| d.map_or(0.0, |d| d.as_secs_f64() * 1e3);
    format!(
        "{:.0} to {:.0} ms",
        ms(times.iter().map(|t| t.took).min()),
        ms(times.iter().map(|t| t.took).max()),
    )
}

/// The lines `bench capi` prints about its scrapes: per path, its series and size, three
/// renders in the process, then three scrapes over HTTPS.
pub(crate) async fn cost(metrics: &Metrics, scraper: &Scraper) -> anyhow::Result<String> {
    let mut lines = Vec::new();
    let mut paths = vec!["/metrics"];
    if metrics.state().objects() > 0 {
        lines.push(state_caught_up(metrics).await);
        paths.push("/metrics/state");
    }
    for &path in &paths {
        let rendered: Vec<Timed> = (0..3).map(|_| timed_render(metrics, path)).collect();
        let mut scraped = Vec::new();
        for _ in 0..3 {
            scraped.push(scraper.scrape(path.to_string()).await?);
        }
        anyhow::ensure!(
            scraped.iter().all(|s| s.bytes > 0),
            "{path} answered no text"
        );
        lines.push(format!(
            "metrics: {path} is {} series, {:.1} MB, rendered in {}; scraped over HTTPS in {}",
            series(metrics, path),
            rendered[0].bytes as f64 / 1e6,
            range(&rendered),
            range(&scraped),
        ));
    }
    if paths.contains(&"/metrics/state") {
        lines.push(sharded(scraper, 4).await?);
    }
    Ok(lines.join("\n"))
}

/// `/metrics/state` scraped in `total` shards at once, as a Prometheus scrapes the targets
/// of one job: the time until the last is read, and each one's size.
async fn sharded(scraper: &Scraper, total: u32) -> anyhow::Result<String> {
    let started = Instant::now();
    let shards = futures::future::try_join_all(
        (0..total)
            .map(|i| scraper.scrape(format!("/metrics/state?shard={i}&total_shards={total}"))),
    )
    .await?;
    let sizes: Vec<String> = shards
        .iter()
        .map(|s| format!("{:.0} MB", s.bytes as f64 / 1e6))
        .collect();
    Ok(format!(
        "metrics: /metrics/state in {total} shards scraped at once in {:.0} ms ({}; each {})",
        started.elapsed().as_secs_f64() * 1e3,
        sizes.join(", "),
        range(&shards),
    ))
}
/// Waits until the state metrics hold still (their count of objects unchanged for a second,
/// at most a minute: they follow the informers, which may be behind the last writes), and
/// says how long that was.
async fn state_caught_up(metrics: &Metrics) -> String {
    let started = Instant::now();
    let mut seen = metrics.state().objects();
    let mut still_since = Instant::now();
    while still_since.elapsed() < Duration::from_secs(1)
        && started.elapsed() < Duration::from_secs(60)
    {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let now = metrics.state().objects();
        if now != seen {
            (seen, still_since) = (now, Instant::now());
        }
    }
    format!(
        "metrics: state of {seen} objects, the last of them {:.1} s after every Cluster was \
         Available",
        still_since.duration_since(started).as_secs_f64()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use infrasim_metrics::state::{Each, Resource};

    #[test]
    fn a_render_is_counted_as_its_series_and_bytes() {
        let metrics = Metrics::new();
        let kind = metrics.state().add(
            Resource::new("g", "v1", "K", "k")
                .label("name", &["metadata", "name"])
                .family(
                    "info",
                    "Objects.",
                    Each::info(&[]).label("n", &["spec", "n"]),
                ),
        );
        for i in 0..3 {
            let object =
                serde_json::json!({"metadata": {"name": format!("o{i}")}, "spec": {"n": i}});
            metrics.state().set(kind, &format!("o{i}"), &object);
        }
        assert_eq!(series(&metrics, "/metrics/state"), 3);
        let whole = metrics.state().render(Format::Classic);
        assert_eq!(whole.lines().count(), 5, "{whole}");
        assert_eq!(timed_render(&metrics, "/metrics/state").bytes, whole.len());
    }
}
