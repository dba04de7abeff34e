//! The dashboard's HTTPS routes. The page and its assets are compiled into the binary (no
//! request leaves the machine); everything under `/api/` needs a session, opened by a
//! one-time link at `/login`; `/api/stream` is a server-sent event stream that tells the
//! page when the clusters changed and when a new sample was taken, so it refetches only
//! what it shows.

use crate::login::{self, Sessions, Token};
use crate::{clusters::Index, infra, samples::Sampler, tree};
use bytes::Bytes;
use futures::StreamExt;
use http::{header, Method, Response, StatusCode};
use http_body_util::{combinators::BoxBody, BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub type Body = BoxBody<Bytes, Infallible>;

const INDEX_HTML: &str = include_str!("../assets/index.html");
const APP_JS: &str = include_str!("../assets/app.js");
const STYLE_CSS: &str = include_str!("../assets/style.css");
const FAVICON_SVG: &str = include_str!("../assets/favicon.svg");

/// The most rows one page of the list may ask for.
pub const MAX_PAGE: usize = 500;
/// How often the event stream says it is alive when nothing changed.
const KEEPALIVE: Duration = Duration::from_secs(15);

/// What the routes share.
pub struct Shared {
    pub client: kube::Client,
    pub sessions: Sessions,
    pub index: Arc<Index>,
    pub sampler: Arc<Sampler>,
    pub sampled: tokio::sync::watch::Receiver<u64>,
}

fn full(body: impl Into<Bytes>) -> Body {
    Full::new(body.into()).boxed()
}

/// A response with the headers every answer carries: nothing embeds the page, nothing
/// loads from elsewhere, the login link never leaves in a Referer.
fn respond(code: StatusCode, content_type: &str, body: Body) -> Response<Body> {
    let mut resp = Response::new(body);
    *resp.status_mut() = code;
    let headers = resp.headers_mut();
    let set = |headers: &mut http::HeaderMap, name, value: &str| {
        if let Ok(v) = http::HeaderValue::from_str(value) {
            headers.insert(name, v);
        }
    };
    set(headers, header::CONTENT_TYPE, content_type);
    set(
        headers,
        header::CONTENT_SECURITY_POLICY,
        "default-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
    );
    set(headers, header::X_CONTENT_TYPE_OPTIONS, "nosniff");
    set(headers, header::REFERRER_POLICY, "no-referrer");
    set(headers, header::CACHE_CONTROL, "no-store");
    resp
}

fn json(value: &impl serde::Serialize) -> Response<Body> {
    match serde_json::to_vec(value) {
        Ok(bytes) => respond(StatusCode::OK, "application/json", full(bytes)),
        Err(e) => problem(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
    }
}

fn problem(code: StatusCode, message: &str) -> Response<Body> {
    let body = serde_json::json!({"code": code.as_u16(), "message": message});
    respond(code, "application/json", full(body.to_string()))
}

/// The page a visitor without a session sees.
fn sign_in_page(code: StatusCode, why: &str) -> Response<Body> {
    let escaped = why
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;");
    let body = format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>infrasim: sign in</title>\
         <link rel=\"icon\" href=\"/favicon.svg\"><link rel=\"stylesheet\" href=\"/style.css\"></head>\
         <body><main class=\"signin\"><h1>infrasim</h1><p>{escaped}</p>\
         <p>Open the link <code>infrasim up</code> printed, or get a fresh one with \
         <code>infrasim dashboard --kubeconfig KUBECONFIG</code>. Each link opens one session, once.</p>\
         </main></body></html>"
    );
    respond(code, "text/html; charset=utf-8", full(body))
}

/// Answers one request.
pub async fn answer(shared: Arc<Shared>, req: http::Request<Incoming>) -> Response<Body> {
    if req.method() != Method::GET {
        return problem(
            StatusCode::METHOD_NOT_ALLOWED,
            "the dashboard only reads: GET",
        );
    }
    let path = req.uri().path().to_string();
    let query = req.uri().query().unwrap_or("").to_string();
    match path.as_str() {
        "/style.css" => return respond(StatusCode::OK, "text/css; charset=utf-8", full(STYLE_CSS)),
        "/favicon.svg" => return respond(StatusCode::OK, "image/svg+xml", full(FAVICON_SVG)),
        "/login" => return login(&shared, &query).await,
        _ => {}
    }
    let cookie = req
        .headers()
        .get(header::COOKIE)
        .and_then(|v| v.to_str().ok());
    if !shared.sessions.admits(cookie, Instant::now()) {
        return match path.as_str() {
            "/" => sign_in_page(StatusCode::UNAUTHORIZED, "You are not signed in."),
            _ => problem(
                StatusCode::UNAUTHORIZED,
                "no session: open a login link first",
            ),
        };
    }
    shared.sampler.looked();
    route(&shared, &path, &query).await
}

async fn route(shared: &Arc<Shared>, path: &str, query: &str) -> Response<Body> {
    let param = |name: &str| {
        form_urlencoded::parse(query.as_bytes())
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.into_owned())
    };
    let number =
        |name: &str, default: usize| param(name).and_then(|v| v.parse().ok()).unwrap_or(default);
    match path {
        "/" => respond(StatusCode::OK, "text/html; charset=utf-8", full(INDEX_HTML)),
        "/app.js" => respond(
            StatusCode::OK,
            "text/javascript; charset=utf-8",
            full(APP_JS),
        ),
        "/api/clusters" => {
            let q = param("q").unwrap_or_default();
            json(
                &shared
                    .index
                    .page(&q, number("offset", 0), number("limit", 50).min(MAX_PAGE)),
            )
        }
        "/api/overview" => json(&serde_json::json!({
            "phases": shared.index.phases(),
            "generation": shared.index.generation(),
        })),
        "/api/series" => json(&shared.sampler.series()),
        "/api/infrastructure" => {
            let series = shared.sampler.series();
            match infra::infrastructure(&shared.client, series.last()).await {
                Ok(found) => json(&found),
                Err(e) => problem(StatusCode::BAD_GATEWAY, &e.to_string()),
            }
        }
        "/api/stream" => stream(shared.clone()),
        _ => match path
            .strip_prefix("/api/clusters/")
            .and_then(|r| r.split_once('/'))
        {
            Some((ns, name)) => cluster_tree(shared, ns, name).await,
            None => problem(StatusCode::NOT_FOUND, "not found"),
        },
    }
}

async fn cluster_tree(shared: &Shared, ns: &str, name: &str) -> Response<Body> {
    match tree::tree(&shared.client, ns, name).await {
        Ok(Some(tree)) => json(&tree),
        Ok(None) => problem(StatusCode::NOT_FOUND, &format!("no cluster {ns}/{name}")),
        Err(e) => problem(StatusCode::BAD_GATEWAY, &e.to_string()),
    }
}

/// Redeems the link's token, and sends the browser to the page with its session cookie.
async fn login(shared: &Shared, query: &str) -> Response<Body> {
    let token = form_urlencoded::parse(query.as_bytes())
        .find(|(k, _)| k == "token")
        .and_then(|(_, v)| Token::parse(&v));
    let Some(token) = token else {
        return sign_in_page(StatusCode::UNAUTHORIZED, "That login link is malformed.");
    };
    match login::redeem(&shared.client, &token).await {
        Ok(()) => {
            let session = shared.sessions.open(Instant::now());
            let mut resp = respond(StatusCode::SEE_OTHER, "text/plain", full(""));
            if let Ok(cookie) = http::HeaderValue::from_str(&login::set_cookie(&session)) {
                resp.headers_mut().insert(header::SET_COOKIE, cookie);
            }
            resp.headers_mut()
                .insert(header::LOCATION, http::HeaderValue::from_static("/"));
            resp
        }
        Err(e @ login::LoginError::Plane(_)) => {
            tracing::warn!(error = %e, "redeeming a dashboard login link");
            sign_in_page(
                StatusCode::BAD_GATEWAY,
                "The plane could not be asked about that link.",
            )
        }
        Err(e) => sign_in_page(
            StatusCode::UNAUTHORIZED,
            &format!("{}.", capitalized(&e.to_string())),
        ),
    }
}

fn capitalized(text: &str) -> String {
    let mut chars = text.chars();
    chars
        .next()
        .map(|c| c.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}

/// What the event stream keeps between two events.
struct Watching {
    index: Arc<Index>,
    sampler: Arc<Sampler>,
    sampled: tokio::sync::watch::Receiver<u64>,
    generation: Option<u64>,
    /// When the last `clusters` event went.
    told: Option<Instant>,
    quiet_since: Instant,
}

/// The least time between two `clusters` events: at 10,000 clusters coming up the index
/// changes thousands of times a second, and the page needs to hear it about once.
const CLUSTERS_EVERY: Duration = Duration::from_secs(1);

impl Watching {
    fn new(shared: &Shared) -> Self {
        Watching {
            index: shared.index.clone(),
            sampler: shared.sampler.clone(),
            sampled: shared.sampled.clone(),
            generation: None,
            told: None,
            quiet_since: Instant::now(),
        }
    }

    /// The next event, once there is one.
    async fn next(&mut self) -> String {
        loop {
            self.sampler.looked();
            if self.sampled.has_changed().unwrap_or(false) {
                let n = *self.sampled.borrow_and_update();
                self.quiet_since = Instant::now();
                return format!("event: sample\ndata: {n}\n\n");
            }
            let generation = self.index.generation();
            let since = self.told.map(|t| t.elapsed()).unwrap_or(CLUSTERS_EVERY);
            if self.generation != Some(generation) && since >= CLUSTERS_EVERY {
                self.generation = Some(generation);
                self.told = Some(Instant::now());
                self.quiet_since = Instant::now();
                return format!("event: clusters\ndata: {generation}\n\n");
            }
            if self.quiet_since.elapsed() >= KEEPALIVE {
                self.quiet_since = Instant::now();
                return ": still here\n\n".to_string();
            }
            let pause = CLUSTERS_EVERY
                .saturating_sub(since)
                .max(Duration::from_millis(100));
            let pause = if self.generation == Some(generation) {
                CLUSTERS_EVERY
            } else {
                pause
            };
            match tokio::time::timeout(pause, self.sampled.changed()).await {
                // `changed` marked the sample seen: it is told here, not by the check above.
                Ok(Ok(())) => {
                    let n = *self.sampled.borrow();
                    self.quiet_since = Instant::now();
                    return format!("event: sample\ndata: {n}\n\n");
                }
                // The sampler is gone (the process is stopping): no busy loop meanwhile.
                Ok(Err(_)) => tokio::time::sleep(CLUSTERS_EVERY).await,
                Err(_) => {}
            }
        }
    }
}

/// Server-sent events: `sample` when the charts have a new sample, `clusters` when the list
/// changed (at most once per [`CLUSTERS_EVERY`]), a comment every [`KEEPALIVE`] otherwise.
fn stream(shared: Arc<Shared>) -> Response<Body> {
    let watching = Watching::new(&shared);
    let events = futures::stream::unfold(watching, |mut w| async move {
        let event = w.next().await;
        Some((event, w))
    });
    let frames = events.map(|text| Ok::<_, Infallible>(Frame::data(Bytes::from(text))));
    respond(
        StatusCode::OK,
        "text/event-stream",
        BodyExt::boxed(StreamBody::new(frames)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use infrasim_metrics::Metrics;

    fn watching() -> (Watching, tokio::sync::watch::Sender<u64>) {
        let (tx, sampled) = tokio::sync::watch::channel(0);
        let watching = Watching {
            index: Arc::new(Index::default()),
            sampler: Sampler::new(Metrics::new()),
            sampled,
            generation: None,
            told: None,
            quiet_since: Instant::now(),
        };
        (watching, tx)
    }

    #[tokio::test]
    async fn the_stream_tells_of_samples_taken_while_it_waits_and_of_changed_clusters() {
        let (mut w, tx) = watching();
        assert_eq!(w.next().await, "event: clusters\ndata: 0\n\n");
        // Nothing changed: the stream waits, and a sample taken meanwhile is told.
        let sampler = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(200)).await;
            tx.send_replace(1);
            tx
        });
        let told = tokio::time::timeout(Duration::from_secs(5), w.next()).await;
        assert_eq!(told.ok().as_deref(), Some("event: sample\ndata: 1\n\n"));
        let tx = sampler.await.expect("the sampler task");
        // A sample taken while nobody waits is told too.
        tx.send_replace(2);
        assert_eq!(w.next().await, "event: sample\ndata: 2\n\n");
        let cluster: kube::api::DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
            "metadata": {"namespace": "ns", "name": "c"},
        }))
        .expect("a cluster");
        w.index.put(&cluster);
        let told = tokio::time::timeout(Duration::from_secs(5), w.next()).await;
        assert_eq!(told.ok().as_deref(), Some("event: clusters\ndata: 1\n\n"));
        assert!(
            !w.sampler.idle(),
            "a page listening keeps the sampler going"
        );
    }
}
