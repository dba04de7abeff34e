//! `pods/{name}/portforward`, in each of the three ways clients speak it:
//!
//! 1. WebSocket with subprotocol `SPDY/3.1+portforward.k8s.io`: SPDY frames tunnelled in
//!    binary messages ([`tunnel`], then [`spdy`]); what kubectl 1.31+ and KubeadmControlPlane
//!    try first.
//! 2. WebSocket with Kubernetes' channel protocol, `v4.channel.k8s.io` or
//!    `portforward.k8s.io` ([`channel`]): kube-rs and the Python client.
//! 3. A plain `Upgrade: SPDY/3.1` with `X-Stream-Protocol-Version: portforward.k8s.io`
//!    ([`spdy`]): kubectl's and KubeadmControlPlane's fallback.
//!
//! Clients fall back silently from one to the next, so the server counts the sessions of
//! each ([`Sessions`], served at `/metrics`) for tests to see which one was spoken. What a
//! port reaches is up to the server's [`PortForwarder`] (the simulated cluster's etcd
//! members, say); a pod with nothing listening gets its error on the error stream, as the
//! kubelet reports one.

mod channel;
mod spdy;
mod tunnel;

use crate::http::{error_response, Body};
use crate::status::ApiError;
use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode};
use http_body_util::BodyExt;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tokio::io::{AsyncRead, AsyncWrite};

/// A byte stream to a pod's port.
pub trait PodStream: AsyncRead + AsyncWrite + Send + Unpin + 'static {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin + 'static> PodStream for T {}

/// Opens a stream to port `port` of pod `namespace/name`, or says why there is nothing there.
pub type PortForwarder =
    Arc<dyn Fn(&str, &str, u16) -> Result<Pin<Box<dyn PodStream>>, String> + Send + Sync>;

/// The port-forward protocol a client negotiated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// SPDY/3.1 frames tunnelled in WebSocket binary messages.
    SpdyOverWebSocket,
    /// WebSocket channels, `v4.channel.k8s.io`.
    ChannelV4,
    /// WebSocket channels, `portforward.k8s.io` (the same framing as v4).
    Channel,
    /// SPDY/3.1 after a plain HTTP upgrade.
    Spdy,
}

impl Protocol {
    const ALL: [Protocol; 4] = [
        Protocol::SpdyOverWebSocket,
        Protocol::ChannelV4,
        Protocol::Channel,
        Protocol::Spdy,
    ];

    /// Its name on the wire (the WebSocket subprotocol, or the `Upgrade` value).
    pub fn name(self) -> &'static str {
        match self {
            Protocol::SpdyOverWebSocket => "SPDY/3.1+portforward.k8s.io",
            Protocol::ChannelV4 => "v4.channel.k8s.io",
            Protocol::Channel => "portforward.k8s.io",
            Protocol::Spdy => "SPDY/3.1",
        }
    }
}

/// The stream protocol a SPDY port-forward client must offer in `X-Stream-Protocol-Version`.
const SPDY_STREAM_PROTOCOL: &str = "portforward.k8s.io";

/// Port-forward sessions started, by protocol.
#[derive(Debug, Default)]
pub struct Sessions([AtomicU64; 4]);

impl Sessions {
    fn started(&self, protocol: Protocol) {
        self.0[protocol as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// Sessions started with `protocol` since the server started.
    pub fn count(&self, protocol: Protocol) -> u64 {
        self.0[protocol as usize].load(Ordering::Relaxed)
    }

    /// The counts in Prometheus' text format, or in OpenMetrics (whose counter families are
    /// named without their samples' `_total`).
    pub(crate) fn metrics(&self, openmetrics: bool) -> String {
        let family = if openmetrics {
            "infrasim_port_forward_sessions"
        } else {
            "infrasim_port_forward_sessions_total"
        };
        let mut text = format!(
            "# HELP {family} Port-forward sessions started, by the protocol the client negotiated.\n\
             # TYPE {family} counter\n",
        );
        for p in Protocol::ALL {
            text.push_str(&format!(
                "infrasim_port_forward_sessions_total{{protocol=\"{}\"}} {}\n",
                p.name(),
                self.count(p)
            ));
        }
        text
    }
}

/// One port-forward request: whom it forwards to, and what the server counts.
pub(crate) struct Request<'a> {
    pub forwarder: Option<&'a PortForwarder>,
    pub sessions: &'a Sessions,
    pub namespace: &'a str,
    pub pod: &'a str,
}

/// Answers a port-forward request: 101 and the forwarding, or a Status saying why not.
pub(crate) fn handle(request: Request<'_>, parts: &mut http::request::Parts) -> Response<Body> {
    match upgrade(request, parts) {
        Ok(response) => response,
        Err(e) => error_response(&e),
    }
}

fn upgrade(
    request: Request<'_>,
    parts: &mut http::request::Parts,
) -> Result<Response<Body>, ApiError> {
    let header = |name: &str| -> Vec<String> {
        parts
            .headers
            .get_all(name)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
            .collect()
    };
    let websocket_key = header("sec-websocket-key").into_iter().next();
    let upgrade_to = header("upgrade");
    let (protocol, accept) = if let Some(key) = websocket_key {
        let offered = header("sec-websocket-protocol");
        let protocol = [
            Protocol::SpdyOverWebSocket,
            Protocol::ChannelV4,
            Protocol::Channel,
        ]
        .into_iter()
        .find(|p| offered.iter().any(|o| o == p.name()))
        .ok_or_else(|| {
            ApiError::bad_request(format!(
                "port-forward over WebSocket needs subprotocol {}, {} or {} (offered: {offered:?})",
                Protocol::SpdyOverWebSocket.name(),
                Protocol::ChannelV4.name(),
                Protocol::Channel.name()
            ))
        })?;
        (protocol, Some(key))
    } else if upgrade_to
        .iter()
        .any(|u| u.eq_ignore_ascii_case("SPDY/3.1"))
    {
        let offered = header("x-stream-protocol-version");
        // As the kubelet: a client that names no stream protocol gets the only one there is.
        if !offered.is_empty() && !offered.iter().any(|o| o == SPDY_STREAM_PROTOCOL) {
            return Err(ApiError::forbidden(format!(
                "unable to upgrade: unable to negotiate protocol: client supports {offered:?}, server supports [\"{SPDY_STREAM_PROTOCOL}\"]"
            )));
        }
        (Protocol::Spdy, None)
    } else {
        return Err(ApiError::bad_request("Upgrade request required"));
    };
    let ports = if protocol == Protocol::Spdy || protocol == Protocol::SpdyOverWebSocket {
        // SPDY clients name each stream's port in its headers; the query is optional.
        ports(parts.uri.query().unwrap_or("")).unwrap_or_default()
    } else {
        ports(parts.uri.query().unwrap_or(""))?
    };
    let Some(forwarder) = request.forwarder.cloned() else {
        return Err(ApiError::bad_request(format!(
            "pods \"{}\" is simulated by infrasim and nothing listens in it",
            request.pod
        )));
    };
    let Some(on_upgrade) = parts.extensions.remove::<hyper::upgrade::OnUpgrade>() else {
        return Err(ApiError::bad_request("the connection cannot be upgraded"));
    };
    request.sessions.started(protocol);
    let target = Target {
        forwarder,
        namespace: request.namespace.to_string(),
        pod: request.pod.to_string(),
    };
    tokio::spawn(async move {
        match on_upgrade.await {
            Ok(upgraded) => {
                serve(
                    protocol,
                    hyper_util::rt::TokioIo::new(upgraded),
                    target,
                    ports,
                )
                .await
            }
            Err(e) => tracing::debug!(error = %e, "port-forward upgrade failed"),
        }
    });
    switching_protocols(protocol, accept.as_deref())
}

/// Where a session's streams go.
pub(crate) struct Target {
    pub forwarder: PortForwarder,
    pub namespace: String,
    pub pod: String,
}

impl Target {
    fn open(&self, port: u16) -> Result<Pin<Box<dyn PodStream>>, String> {
        (self.forwarder)(&self.namespace, &self.pod, port)
    }
}

type Upgraded = hyper_util::rt::TokioIo<hyper::upgrade::Upgraded>;

async fn serve(protocol: Protocol, io: Upgraded, target: Target, ports: Vec<u16>) {
    use tokio_tungstenite::tungstenite::protocol::Role;
    match protocol {
        Protocol::Spdy => spdy::forward(io, target).await,
        Protocol::SpdyOverWebSocket => {
            let ws =
                tokio_tungstenite::WebSocketStream::from_raw_socket(io, Role::Server, None).await;
            spdy::forward(tunnel::byte_stream(ws), target).await
        }
        Protocol::ChannelV4 | Protocol::Channel => {
            let ws =
                tokio_tungstenite::WebSocketStream::from_raw_socket(io, Role::Server, None).await;
            channel::forward(ws, target, &ports).await
        }
    }
}

/// The 101 answer: a WebSocket handshake's (with the chosen subprotocol), or SPDY's.
fn switching_protocols(
    protocol: Protocol,
    websocket_key: Option<&str>,
) -> Result<Response<Body>, ApiError> {
    let mut response = Response::new(
        http_body_util::Empty::<Bytes>::new()
            .map_err(|n| match n {})
            .boxed_unsync(),
    );
    *response.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    let value = |s: &str| HeaderValue::from_str(s).map_err(|e| ApiError::internal(e.to_string()));
    let headers = response.headers_mut();
    headers.insert(
        http::header::CONNECTION,
        HeaderValue::from_static("Upgrade"),
    );
    match websocket_key {
        Some(key) => {
            let accept =
                tokio_tungstenite::tungstenite::handshake::derive_accept_key(key.as_bytes());
            headers.insert(http::header::UPGRADE, HeaderValue::from_static("websocket"));
            headers.insert("sec-websocket-accept", value(&accept)?);
            headers.insert("sec-websocket-protocol", value(protocol.name())?);
        }
        None => {
            headers.insert(http::header::UPGRADE, HeaderValue::from_static("SPDY/3.1"));
            headers.insert("x-stream-protocol-version", value(SPDY_STREAM_PROTOCOL)?);
        }
    }
    Ok(response)
}

/// The `ports` of the query (`ports=2379&ports=6443` or `ports=2379,6443`).
fn ports(query: &str) -> Result<Vec<u16>, ApiError> {
    let mut ports = Vec::new();
    for (k, v) in form_urlencoded::parse(query.as_bytes()) {
        if k == "ports" {
            for p in v.split(',').filter(|p| !p.is_empty()) {
                ports.push(port(p).map_err(ApiError::bad_request)?);
            }
        }
    }
    if ports.is_empty() {
        return Err(ApiError::bad_request(
            "at least one port must be given (ports=N)",
        ));
    }
    Ok(ports)
}

/// One port number, 1 to 65535.
fn port(text: &str) -> Result<u16, String> {
    match text.trim().parse::<u16>() {
        Ok(port) if port > 0 => Ok(port),
        _ => Err(format!("invalid port {text:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_come_from_repeated_or_comma_separated_parameters() {
        assert_eq!(ports("ports=2379&ports=6443").ok(), Some(vec![2379, 6443]));
        assert_eq!(ports("ports=2379,6443").ok(), Some(vec![2379, 6443]));
        assert!(ports("").is_err());
        assert!(ports("ports=0").is_err());
        assert!(ports("ports=http").is_err());
    }

    #[test]
    fn sessions_are_counted_per_protocol_in_prometheus_text() {
        let sessions = Sessions::default();
        sessions.started(Protocol::Spdy);
        sessions.started(Protocol::Spdy);
        sessions.started(Protocol::SpdyOverWebSocket);
        assert_eq!(sessions.count(Protocol::Spdy), 2);
        assert_eq!(sessions.count(Protocol::ChannelV4), 0);
        let text = sessions.metrics(false);
        assert!(text.contains("infrasim_port_forward_sessions_total{protocol=\"SPDY/3.1\"} 2\n"));
        assert!(text.contains(
            "infrasim_port_forward_sessions_total{protocol=\"SPDY/3.1+portforward.k8s.io\"} 1\n"
        ));
        assert!(text.contains("# TYPE infrasim_port_forward_sessions_total counter\n"));
    }
}
