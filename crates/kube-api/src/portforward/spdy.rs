//! Port-forward over a SPDY session (plain or tunnelled), as the kubelet serves it.
//!
//! For each forwarded connection the client opens two streams with the same `requestid`
//! header: `streamtype: error`, which it half-closes at once and reads the failure from, and
//! `streamtype: data`, which carries the bytes; both name the pod's `port`. The server
//! forwards once it has both, and finishes both when the pod's side closes. Clients too old
//! to send `requestid` are paired by stream ID (the data stream follows its error stream).

use super::Target;
use bytes::Bytes;
use infrasim_spdy::{Stream, StreamReader, StreamWriter};
use std::collections::HashMap;
use std::sync::Arc;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::task::JoinSet;

/// Streams waiting for their other half, at most (a client that opens only halves is
/// refused beyond this, not remembered forever).
const MAX_UNPAIRED: usize = 256;

/// One forwarded connection's streams, as they arrive.
#[derive(Default)]
struct Pair {
    error: Option<Stream>,
    data: Option<Stream>,
}

/// Serves a port-forward SPDY session on `io` until the client goes; every forward it
/// started stops with it.
pub(super) async fn forward<IO>(io: IO, target: Target)
where
    IO: AsyncRead + AsyncWrite + Send + Unpin,
{
    let (connection, mut streams) = infrasim_spdy::server(io);
    let target = Arc::new(target);
    let mut unpaired: HashMap<String, Pair> = HashMap::new();
    let mut forwards = JoinSet::new();
    let session = connection.run();
    tokio::pin!(session);
    loop {
        tokio::select! {
            ended = &mut session => {
                if let Err(e) = ended {
                    tracing::debug!(error = %e, "port-forward SPDY session ended with an error");
                }
                break;
            }
            Some(stream) = streams.recv() => {
                if let Some((error, data)) = pair_up(&mut unpaired, stream).await {
                    forwards.spawn(forward_pair(error, data, target.clone()));
                }
            }
            Some(_) = forwards.join_next(), if !forwards.is_empty() => {}
        }
    }
}

/// Files `stream` with its request; the request's two streams once both are there.
async fn pair_up(unpaired: &mut HashMap<String, Pair>, stream: Stream) -> Option<(Stream, Stream)> {
    let kind = stream.header("streamtype").unwrap_or("").to_string();
    let request = match stream.header("requestid") {
        Some(id) => id.to_string(),
        None if kind == "data" => stream.id().saturating_sub(2).to_string(),
        None => stream.id().to_string(),
    };
    if !unpaired.contains_key(&request) && unpaired.len() >= MAX_UNPAIRED {
        refuse(stream).await;
        return None;
    }
    let pair = unpaired.entry(request.clone()).or_default();
    let slot = match kind.as_str() {
        "error" => &mut pair.error,
        "data" => &mut pair.data,
        _ => {
            tracing::debug!(kind, "port-forward stream of unknown type");
            refuse(stream).await;
            return None;
        }
    };
    if slot.is_some() {
        // A second stream of the same type for one request: the first stays.
        refuse(stream).await;
        return None;
    }
    *slot = Some(stream);
    if pair.error.is_some() && pair.data.is_some() {
        let pair = unpaired.remove(&request)?;
        return Some((pair.error?, pair.data?));
    }
    None
}

async fn refuse(stream: Stream) {
    let (_, writer) = stream.split();
    let _ = writer.reset(infrasim_spdy::frame::PROTOCOL_ERROR).await;
}

/// Forwards one connection: the data stream to the pod's port, a failure on the error
/// stream; both finished when the pod's side closes.
async fn forward_pair(error: Stream, data: Stream, target: Arc<Target>) {
    let (_, errors) = error.split();
    let port = data.header("port").map(super::port);
    let (data_in, data_out) = data.split();
    let opened = match port {
        Some(Ok(port)) => target.open(port),
        Some(Err(why)) => Err(why),
        None => Err("the data stream names no port".to_string()),
    };
    match opened {
        Ok(pod) => pump(pod, data_in, &data_out).await,
        Err(why) => {
            let _ = errors.send(Bytes::from(why)).await;
        }
    }
    let _ = data_out.finish().await;
    let _ = errors.finish().await;
}

/// Bytes both ways until the pod's side closes (the client's FIN only half-closes it).
async fn pump(
    pod: std::pin::Pin<Box<dyn super::PodStream>>,
    mut from_client: StreamReader,
    to_client: &StreamWriter,
) {
    let (mut read, mut write) = tokio::io::split(pod);
    let inbound = async {
        while let Some(bytes) = from_client.recv().await {
            if write.write_all(&bytes).await.is_err() {
                break;
            }
        }
        let _ = write.shutdown().await;
        // Done sending; what the pod still says is the outbound half's.
        std::future::pending::<()>().await
    };
    let outbound = async {
        let mut buf = vec![0u8; 32 * 1024];
        loop {
            match read.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => {
                    if to_client
                        .send(Bytes::copy_from_slice(&buf[..n]))
                        .await
                        .is_err()
                    {
                        return;
                    }
                }
            }
        }
    };
    tokio::select! {
        _ = inbound => {}
        _ = outbound => {}
    }
}
