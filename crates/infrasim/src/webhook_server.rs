//! Cluster API's webhooks for a plane in another process (`infrasim controller
//! --webhook-listen`): the conversion and admission webhooks the embedded core serves in
//! `infrasim up`'s own engine, here over HTTPS with a certificate of a CA made at start, so
//! the plane's webhook configurations and CRDs reach them by URL, trusting that CA.

use base64::Engine;
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use infrasim_controllers::capi::admission::{CoreWebhooks, Reach};
use infrasim_kube_api::webhook::InProcessWebhook;
use std::net::SocketAddr;
use std::sync::Arc;

/// The largest review accepted (kube-apiserver sends at most a 3 MiB object, twice).
const MAX_REVIEW: usize = 8 << 20;

/// Serves `hooks` on `listen`; how the plane reaches them.
pub async fn serve(listen: SocketAddr, hooks: Arc<CoreWebhooks>) -> anyhow::Result<Reach> {
    // Callers present no certificate (kube-apiserver's webhook client has none to give).
    let answer = move |req| {
        let answered = answer(hooks.clone(), req);
        async move { answered.await.unwrap_or_else(|never| match never {}) }
    };
    let (addr, ca) =
        crate::https::serve(listen, "infrasim-webhooks", "the webhooks", answer).await?;
    Ok(Reach::Url {
        base: format!("https://{addr}"),
        ca_bundle: base64::engine::general_purpose::STANDARD.encode(&ca.cert_pem),
    })
}

/// One review POSTed to a webhook's path, answered as JSON (a review the hooks cannot
/// answer is a 400 naming why, as controller-runtime's server answers one).
async fn answer(
    hooks: Arc<CoreWebhooks>,
    req: http::Request<Incoming>,
) -> Result<http::Response<Full<Bytes>>, std::convert::Infallible> {
    let path = req.uri().path().to_string();
    let reply = |code: u16, body: Vec<u8>| {
        let mut resp = http::Response::new(Full::new(Bytes::from(body)));
        *resp.status_mut() = http::StatusCode::from_u16(code).unwrap_or_default();
        resp.headers_mut().insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static("application/json"),
        );
        Ok(resp)
    };
    if req.method() != http::Method::POST {
        return reply(405, b"{\"error\":\"only POST\"}".to_vec());
    }
    let body = match Limited::new(req.into_body(), MAX_REVIEW).collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) => {
            return reply(
                413,
                format!("{{\"error\":{:?}}}", e.to_string()).into_bytes(),
            )
        }
    };
    let review: serde_json::Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => {
            return reply(
                400,
                format!("{{\"error\":{:?}}}", e.to_string()).into_bytes(),
            )
        }
    };
    match hooks.review(&path, review).await {
        Ok(answer) => reply(200, serde_json::to_vec(&answer).unwrap_or_default()),
        Err(why) => reply(
            400,
            serde_json::to_vec(&serde_json::json!({"error": why})).unwrap_or_default(),
        ),
    }
}
