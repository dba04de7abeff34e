//! `pods/{name}/portforward` over WebSocket with Kubernetes' channel protocol
//! (`v4.channel.k8s.io`, `portforward.k8s.io`), as kube-rs and the Python client speak it.
//!
//! Each forwarded port `i` of the request's `ports` gets two channels: data on `2i`, errors on
//! `2i+1`. Every binary message starts with its channel byte; the first message of each
//! channel carries the port (two bytes, little endian). What the port reaches is up to the
//! server's [`PortForwarder`] (the simulated cluster's etcd members, say); a pod with nothing
//! listening gets its error on the error channel, as the kubelet reports one.
//!
//! Not yet: SPDY/3.1, alone or tunnelled in WebSocket (`SPDY/3.1+portforward.k8s.io`), which
//! kubectl speaks.

use crate::http::{error_response, Body};
use crate::status::ApiError;
use bytes::Bytes;
use futures::{SinkExt, StreamExt};
use http::{HeaderValue, Response, StatusCode};
use http_body_util::BodyExt;
use std::pin::Pin;
use std::sync::Arc;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio_tungstenite::tungstenite::protocol::{Message, Role};

/// A byte stream to a pod's port.
pub trait PodStream: AsyncRead + AsyncWrite + Send + Unpin + 'static {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin + 'static> PodStream for T {}

/// Opens a stream to port `port` of pod `namespace/name`, or says why there is nothing there.
pub type PortForwarder =
    Arc<dyn Fn(&str, &str, u16) -> Result<Pin<Box<dyn PodStream>>, String> + Send + Sync>;

/// The WebSocket subprotocols served, most preferred first.
const PROTOCOLS: [&str; 2] = ["v4.channel.k8s.io", "portforward.k8s.io"];

/// Answers a port-forward request: 101 and the forwarding, or a Status saying why not.
pub(crate) fn handle(
    forwarder: Option<&PortForwarder>,
    parts: &mut http::request::Parts,
    namespace: &str,
    pod: &str,
) -> Response<Body> {
    match upgrade(forwarder, parts, namespace, pod) {
        Ok(response) => response,
        Err(e) => error_response(&e),
    }
}

fn upgrade(
    forwarder: Option<&PortForwarder>,
    parts: &mut http::request::Parts,
    namespace: &str,
    pod: &str,
) -> Result<Response<Body>, ApiError> {
    let header = |name: &str| {
        parts
            .headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string()
    };
    let offered = header("sec-websocket-protocol");
    let protocol = offered
        .split(',')
        .map(str::trim)
        .find(|p| PROTOCOLS.contains(p))
        .map(str::to_string);
    let key = header("sec-websocket-key");
    let (Some(protocol), false) = (protocol, key.is_empty()) else {
        return Err(ApiError::bad_request(format!(
            "port-forward needs a WebSocket upgrade with subprotocol {} (offered: {offered:?}); SPDY is not served yet",
            PROTOCOLS.join(" or ")
        )));
    };
    let ports = ports(parts.uri.query().unwrap_or(""))?;
    let Some(forwarder) = forwarder.cloned() else {
        return Err(ApiError::bad_request(format!(
            "pods \"{pod}\" is simulated by infrasim and nothing listens in it"
        )));
    };
    let Some(on_upgrade) = parts.extensions.remove::<hyper::upgrade::OnUpgrade>() else {
        return Err(ApiError::bad_request("the connection cannot be upgraded"));
    };
    let (namespace, pod) = (namespace.to_string(), pod.to_string());
    tokio::spawn(async move {
        match on_upgrade.await {
            Ok(upgraded) => {
                let io = hyper_util::rt::TokioIo::new(upgraded);
                let ws =
                    tokio_tungstenite::WebSocketStream::from_raw_socket(io, Role::Server, None)
                        .await;
                forward(ws, forwarder, &namespace, &pod, &ports).await;
            }
            Err(e) => tracing::debug!(error = %e, "port-forward upgrade failed"),
        }
    });
    let accept = tokio_tungstenite::tungstenite::handshake::derive_accept_key(key.as_bytes());
    let mut response = Response::new(
        http_body_util::Empty::<Bytes>::new()
            .map_err(|n| match n {})
            .boxed_unsync(),
    );
    *response.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    let headers = response.headers_mut();
    headers.insert(
        http::header::CONNECTION,
        HeaderValue::from_static("Upgrade"),
    );
    headers.insert(http::header::UPGRADE, HeaderValue::from_static("websocket"));
    let value = |s: &str| HeaderValue::from_str(s).map_err(|e| ApiError::internal(e.to_string()));
    headers.insert("sec-websocket-accept", value(&accept)?);
    headers.insert("sec-websocket-protocol", value(&protocol)?);
    Ok(response)
}

/// The `ports` of the query (`ports=2379&ports=6443` or `ports=2379,6443`).
fn ports(query: &str) -> Result<Vec<u16>, ApiError> {
    let mut ports = Vec::new();
    for (k, v) in form_urlencoded::parse(query.as_bytes()) {
        if k == "ports" {
            for p in v.split(',').filter(|p| !p.is_empty()) {
                match p.trim().parse::<u16>() {
                    Ok(port) if port > 0 => ports.push(port),
                    _ => return Err(ApiError::bad_request(format!("invalid port {p:?}"))),
                }
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

type Ws = tokio_tungstenite::WebSocketStream<hyper_util::rt::TokioIo<hyper::upgrade::Upgraded>>;

/// Pumps bytes between the WebSocket's channels and each port's stream until the client goes.
async fn forward(ws: Ws, forwarder: PortForwarder, namespace: &str, pod: &str, ports: &[u16]) {
    let (mut sink, mut source) = ws.split();
    let (out, mut outgoing) = tokio::sync::mpsc::channel::<Message>(64);
    let mut writers = Vec::new();
    let mut readers = Vec::new();
    for (i, port) in ports.iter().enumerate() {
        let (data, error) = ((2 * i) as u8, (2 * i + 1) as u8);
        let [lo, hi] = port.to_le_bytes();
        let _ = out.send(Message::binary(vec![data, lo, hi])).await;
        let _ = out.send(Message::binary(vec![error, lo, hi])).await;
        match forwarder(namespace, pod, *port) {
            Ok(stream) => {
                let (read, write) = tokio::io::split(stream);
                writers.push(Some(write));
                readers.push(tokio::spawn(pump_out(read, data, out.clone())));
            }
            Err(why) => {
                writers.push(None);
                let mut message = vec![error];
                message.extend_from_slice(why.as_bytes());
                let _ = out.send(Message::binary(message)).await;
            }
        }
    }
    drop(out);
    let sending = tokio::spawn(async move {
        while let Some(m) = outgoing.recv().await {
            if sink.send(m).await.is_err() {
                return;
            }
        }
        let _ = sink.close().await;
    });
    while let Some(Ok(message)) = source.next().await {
        let Message::Binary(bytes) = message else {
            if matches!(message, Message::Close(_)) {
                break;
            }
            continue;
        };
        let Some((&channel, payload)) = bytes.split_first() else {
            continue;
        };
        // Data channels are even; what a client sends on an error channel means nothing.
        let Some(Some(writer)) = writers
            .get_mut(channel as usize / 2)
            .filter(|_| channel % 2 == 0)
        else {
            continue;
        };
        if payload.is_empty() {
            continue;
        }
        if writer.write_all(payload).await.is_err() {
            writers[channel as usize / 2] = None;
        }
    }
    // The client is gone: the ports' streams close, and with them their readers.
    drop(writers);
    for r in readers {
        r.abort();
    }
    sending.abort();
}

/// Sends what a port's stream says on its data channel.
async fn pump_out(
    mut read: tokio::io::ReadHalf<Pin<Box<dyn PodStream>>>,
    channel: u8,
    out: tokio::sync::mpsc::Sender<Message>,
) {
    let mut buf = vec![0u8; 32 * 1024];
    loop {
        match read.read(&mut buf[1..]).await {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                buf[0] = channel;
                if out.send(Message::binary(buf[..=n].to_vec())).await.is_err() {
                    return;
                }
            }
        }
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
}
