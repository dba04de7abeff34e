//! What a scrape of the plane's metrics costs once `bench capi`'s clusters are up, for
//! `/metrics` and for the objects' state metrics (`/metrics/state`): the series and bytes,
//! the time to render them in the process, and the time a scraper waits for them over
//! HTTPS, as Prometheus asks for them (a client certificate in `system:monitoring`, one
//! connection, the body read to its end).

use crate::harness::Client;
use bytes::{Buf, Bytes};
use http_body_util::{BodyExt, Empty};
use infrasim_kube_api::pki::CertificateAuthority;
use infrasim_kube_api::ApiServer;
use infrasim_metrics::{Format, Metrics};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// The plane served over HTTPS for scrapes, and a scraper's client of it.
pub(crate) struct Scraper {
    addr: SocketAddr,
    client: Client,
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
            client: Client::new(ca, &cert, false)?,
        })
    }

    /// One scrape of `path` read to its end: its bytes, and the time from the request to the
    /// last byte.
    async fn scrape(&self, path: &str) -> anyhow::Result<Text> {
        let mut send = self.client.http1::<Empty<Bytes>>(self.addr).await?;
        let started = Instant::now();
        let req = http::Request::get(path)
            .header(http::header::HOST, "localhost")
            .header(http::header::ACCEPT, "text/plain;version=0.0.4")
            .body(Empty::new())?;
        let resp = send.send_request(req).await?;
        anyhow::ensure!(resp.status().is_success(), "{path}: {}", resp.status());
        let mut body = resp.into_body();
        // Only the bytes are counted: the time is the server's, not this reader's.
        let mut text = Text::default();
        while let Some(frame) = body.frame().await {
            if let Ok(data) = frame?.into_data() {
                text.bytes += data.remaining();
            }
        }
        text.took = started.elapsed();
        Ok(text)
    }
}

/// What a text was: its series (lines not starting with `#`), bytes, and how long it took.
#[derive(Debug, Default)]
struct Text {
    series: usize,
    bytes: usize,
    took: Duration,
    /// Whether the next byte starts a line (the text comes in pieces cut anywhere).
    mid_line: bool,
}

impl Text {
    fn count(&mut self, piece: &[u8]) {
        for &b in piece {
            if !self.mid_line && b != b'#' {
                self.series += 1;
            }
            self.mid_line = b != b'\n';
        }
        self.bytes += piece.len();
    }

    fn of(pieces: impl Iterator<Item = String>, started: Instant) -> Text {
        let mut text = Text::default();
        for piece in pieces {
            text.count(piece.as_bytes());
        }
        text.took = started.elapsed();
        text
    }
}

/// The best and the worst of three, with the first one's series and size, as a sentence.
fn summary(what: &str, times: &[Text]) -> String {
    let (series, bytes) = times.first().map_or((0, 0), |t| (t.series, t.bytes));
    let ms = |d: Option<Duration>| d.map_or(0.0, |d| d.as_secs_f64() * 1e3);
    format!(
        "{series} series, {:.1} MB, {what} in {:.0} to {:.0} ms",
        bytes as f64 / 1e6,
        ms(times.iter().map(|t| t.took).min()),
        ms(times.iter().map(|t| t.took).max()),
    )
}

/// The lines `bench capi` prints about its scrapes, three of each: rendered in the process,
/// then scraped over HTTPS.
pub(crate) async fn cost(metrics: &Metrics, scraper: &Scraper) -> anyhow::Result<String> {
    let mut lines = Vec::new();
    let mut paths = vec!["/metrics"];
    if metrics.state().objects() > 0 {
        lines.push(state_caught_up(metrics).await);
        paths.push("/metrics/state");
    }
    for path in paths {
        let mut rendered = Vec::new();
        let mut scraped = Vec::new();
        for _ in 0..3 {
            let started = Instant::now();
            rendered.push(match path {
                "/metrics" => Text::of(std::iter::once(metrics.render(Format::Classic)), started),
                _ => Text::of(
                    metrics.state().snapshot().chunks(Format::Classic, 1 << 20),
                    started,
                ),
            });
            scraped.push(scraper.scrape(path).await?);
        }
        lines.push(format!(
            "metrics: {path} is {}; scraped over HTTPS in {}",
            summary("rendered", &rendered),
            summary("read", &scraped)
                .rsplit(" in ")
                .next()
                .unwrap_or_default(),
        ));
    }
    Ok(lines.join("\n"))
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

    #[test]
    fn series_are_counted_across_pieces_cut_anywhere() {
        let mut text = Text::default();
        for piece in [
            "# HELP a x\n# TY",
            "PE a gauge\na 1\na",
            "{b=\"#\"} 2\n",
            "# EOF\n",
        ] {
            text.count(piece.as_bytes());
        }
        assert_eq!(text.series, 2);
        assert_eq!(text.bytes, 47);
    }
}
