//! HTTP plumbing shared by the handlers: the response body type, JSON and Status responses,
//! bounded body reading, and content negotiation.

use crate::status::ApiError;
use bytes::Bytes;
use http::{HeaderMap, Response, StatusCode};
use http_body_util::{combinators::UnsyncBoxBody, BodyExt, Full};
use std::convert::Infallible;

/// The body of every response: a full buffer or a stream (watch).
pub type Body = UnsyncBoxBody<Bytes, Infallible>;

/// A handler's result: a response, or an error rendered as a `Status`.
pub type HandlerResult = Result<Response<Body>, ApiError>;

/// A complete body.
pub fn full(bytes: impl Into<Bytes>) -> Body {
    Full::new(bytes.into()).boxed_unsync()
}

/// A JSON document as a response with `code`, ended by the newline Go's JSON encoder ends
/// kube-apiserver's answers with (clients that compare bytes see the same ones).
pub fn json_bytes(code: u16, bytes: impl Into<Bytes>) -> Response<Body> {
    let document = JsonDocument {
        json: Some(bytes.into()),
        newline: true,
    };
    respond(code, document.boxed_unsync(), "application/json")
}

/// A response with an explicit content type (Tables, aggregated discovery, text), its body
/// sent as it is.
pub fn json_typed(code: u16, bytes: impl Into<Bytes>, content_type: &str) -> Response<Body> {
    respond(code, full(bytes), content_type)
}

/// A 200 response whose body is `pieces`, made on a blocking thread and sent each as it is
/// made: a text of gigabytes (the state metrics at 10,000 clusters) is never held whole,
/// and making it runs beside encrypting and sending it. At most four pieces wait to be
/// sent; when the client goes away, no more are made.
pub fn streamed(
    content_type: &str,
    pieces: impl Iterator<Item = String> + Send + 'static,
) -> Response<Body> {
    let (sender, receiver) = tokio::sync::mpsc::channel::<Bytes>(4);
    tokio::task::spawn_blocking(move || {
        for piece in pieces {
            if sender.blocking_send(Bytes::from(piece)).is_err() {
                break;
            }
        }
    });
    let frames = futures::stream::unfold(receiver, |mut receiver| async move {
        let piece = receiver.recv().await?;
        Some((Ok(http_body::Frame::data(piece)), receiver))
    });
    respond(
        200,
        http_body_util::StreamBody::new(frames).boxed_unsync(),
        content_type,
    )
}

fn respond(code: u16, body: Body, content_type: &str) -> Response<Body> {
    let mut resp = Response::new(body);
    *resp.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    if let Ok(v) = content_type.parse() {
        resp.headers_mut().insert(http::header::CONTENT_TYPE, v);
    }
    resp
}

/// A JSON document and its closing newline, sent as two frames: a stored object's bytes are
/// shared, and adding one byte to them would mean copying them all.
struct JsonDocument {
    json: Option<Bytes>,
    newline: bool,
}

impl http_body::Body for JsonDocument {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Bytes>, Infallible>>> {
        let this = self.get_mut();
        let next = match this.json.take() {
            Some(json) => Some(json),
            None if this.newline => {
                this.newline = false;
                Some(Bytes::from_static(b"\n"))
            }
            None => None,
        };
        std::task::Poll::Ready(next.map(|data| Ok(http_body::Frame::data(data))))
    }

    fn is_end_stream(&self) -> bool {
        self.json.is_none() && !self.newline
    }

    fn size_hint(&self) -> http_body::SizeHint {
        let len = self.json.as_ref().map_or(0, Bytes::len) + usize::from(self.newline);
        http_body::SizeHint::with_exact(len as u64)
    }
}

/// A built-in kind's JSON value as a response, in its Go type's field order (`kind`,
/// `apiVersion`, `metadata`, …) as kube-apiserver writes it.
pub fn json_value(code: u16, value: &serde_json::Value) -> Response<Body> {
    // Serializing a `Value` cannot fail.
    json_bytes(
        code,
        infrasim_store::to_vec_typed(value).unwrap_or_default(),
    )
}

/// An error as a `Status` response.
pub fn error_response(err: &ApiError) -> Response<Body> {
    status_response(err.code, &err.to_status())
}

/// A `Status` as a response, written as kube-apiserver writes it (newline included).
pub fn status_response(code: u16, status: &serde_json::Value) -> Response<Body> {
    json_typed(
        code,
        crate::status::status_bytes(status),
        "application/json",
    )
}

/// A request body from any transport (a socket's, or an in-process client's), as the one
/// type the handlers take. The handlers are not generic over the body: a generic handler would
/// be compiled again in every crate that serves a body type of its own.
pub type RequestBody = UnsyncBoxBody<Bytes, BodyError>;

/// Why a request body could not be read, from whichever transport carried it.
#[derive(Debug)]
pub struct BodyError(Box<dyn std::error::Error + Send + Sync>);

impl std::fmt::Display for BodyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for BodyError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
}

/// `req` with its body as a [`RequestBody`].
pub fn erase_body<B>(req: http::Request<B>) -> http::Request<RequestBody>
where
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: std::error::Error + Send + Sync + 'static,
{
    req.map(|body| body.map_err(|e| BodyError(Box::new(e))).boxed_unsync())
}

/// Reads a request body of at most `limit` bytes; a larger one is a 413.
pub async fn read_body<B>(body: B, headers: &HeaderMap, limit: usize) -> Result<Bytes, ApiError>
where
    B: http_body::Body<Data = Bytes>,
    B::Error: std::error::Error + Send + Sync + 'static,
{
    let declared = headers
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let mut body = std::pin::pin!(body);
    let mut collected = bytes::BytesMut::new();
    let mut over = declared.is_some_and(|len| len > limit as u64);
    let mut seen = 0usize;
    while let Some(frame) = body.frame().await {
        let frame =
            frame.map_err(|e| ApiError::bad_request(format!("reading request body: {e}")))?;
        let Some(data) = frame.data_ref() else {
            continue;
        };
        seen += data.len();
        if over || seen > limit {
            // Too large: read on, discarding, so a client that sends its whole body before
            // reading the answer (most do) gets the 413 instead of a cut connection; past
            // the drain limit the connection is cut after all.
            over = true;
            collected.clear();
            if seen > DRAIN_LIMIT {
                break;
            }
            continue;
        }
        collected.extend_from_slice(data);
    }
    if over {
        return Err(ApiError::too_large(limit));
    }
    Ok(collected.freeze())
}

/// How much of an oversized body is read (and dropped) before answering 413.
const DRAIN_LIMIT: usize = 64 * 1024 * 1024;

/// How the client wants the answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Plain JSON objects.
    Json,
    /// `meta.k8s.io` Tables (`kubectl get`), in the named API version.
    Table(&'static str),
    /// Aggregated discovery (`apidiscovery.k8s.io/v2` or `v2beta1`).
    AggregatedDiscovery(&'static str),
    /// Metadata only (`PartialObjectMetadata` and `PartialObjectMetadataList` in the named
    /// `meta.k8s.io` version), as metadata watchers (kube-rs `owns`, controller-runtime's
    /// metadata client) read objects they only need the owners and labels of.
    Metadata(&'static str),
}

/// An object's metadata alone, as `PartialObjectMetadata` in `api_version`.
pub fn partial_metadata(object: &serde_json::Value, api_version: &str) -> serde_json::Value {
    serde_json::json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": api_version,
        "metadata": object.get("metadata").cloned().unwrap_or(serde_json::Value::Null),
    })
}

/// Picks the first media type in `Accept` the server can produce. `None` when only
/// unsupported types (protobuf, CBOR) are acceptable.
pub fn negotiate(headers: &HeaderMap) -> Option<Format> {
    let accept = headers
        .get(http::header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if accept.trim().is_empty() {
        return Some(Format::Json);
    }
    for item in accept.split(',') {
        let mut parts = item.split(';').map(str::trim);
        let media = parts.next().unwrap_or("");
        let params: Vec<(&str, &str)> = parts.filter_map(|p| p.split_once('=')).collect();
        let param = |k: &str| params.iter().find(|(pk, _)| *pk == k).map(|(_, v)| *v);
        if media != "application/json" && media != "*/*" && media != "application/*" {
            continue;
        }
        match (param("as"), param("g"), param("v")) {
            (None, _, _) => return Some(Format::Json),
            (Some("Table"), Some("meta.k8s.io"), Some("v1")) => {
                return Some(Format::Table("meta.k8s.io/v1"))
            }
            (Some("Table"), Some("meta.k8s.io"), Some("v1beta1")) => {
                return Some(Format::Table("meta.k8s.io/v1beta1"))
            }
            (Some("APIGroupDiscoveryList"), Some("apidiscovery.k8s.io"), Some("v2")) => {
                return Some(Format::AggregatedDiscovery("v2"))
            }
            (Some("APIGroupDiscoveryList"), Some("apidiscovery.k8s.io"), Some("v2beta1")) => {
                return Some(Format::AggregatedDiscovery("v2beta1"))
            }
            (
                Some("PartialObjectMetadata" | "PartialObjectMetadataList"),
                Some("meta.k8s.io"),
                Some("v1"),
            ) => return Some(Format::Metadata("meta.k8s.io/v1")),
            (
                Some("PartialObjectMetadata" | "PartialObjectMetadataList"),
                Some("meta.k8s.io"),
                Some("v1beta1"),
            ) => return Some(Format::Metadata("meta.k8s.io/v1beta1")),
            _ => continue,
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn accept(s: &str) -> Option<Format> {
        let mut h = HeaderMap::new();
        h.insert(http::header::ACCEPT, s.parse().unwrap());
        negotiate(&h)
    }

    #[test]
    fn kubectl_accept_headers() {
        assert_eq!(
            accept("application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"),
            Some(Format::Table("meta.k8s.io/v1"))
        );
        assert_eq!(
            accept("application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"),
            Some(Format::AggregatedDiscovery("v2"))
        );
        assert_eq!(
            accept("application/vnd.kubernetes.protobuf, */*"),
            Some(Format::Json)
        );
        assert_eq!(
            accept("application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"),
            Some(Format::Metadata("meta.k8s.io/v1"))
        );
        assert_eq!(accept("application/vnd.kubernetes.protobuf"), None);
        assert_eq!(accept("application/json;as=Foo;g=x;v=y"), None);
    }
}
