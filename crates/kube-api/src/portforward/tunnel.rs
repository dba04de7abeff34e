//! SPDY tunnelled in WebSocket (`SPDY/3.1+portforward.k8s.io`): the client writes its SPDY
//! bytes as binary messages, cut wherever its writes fell, so the messages mean nothing on
//! their own; joined, they are the byte stream a plain SPDY upgrade would carry.

use super::Upgraded;
use futures::{SinkExt, StreamExt};
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};
use tokio_tungstenite::tungstenite::protocol::Message;

/// Bytes between the two ends, per direction.
const BUFFER: usize = 64 * 1024;

/// The byte stream inside `ws`: what the client sends is read from it, and what is written
/// to it goes to the client as binary messages. It ends when either side closes.
pub(super) fn byte_stream(ws: tokio_tungstenite::WebSocketStream<Upgraded>) -> DuplexStream {
    let (ours, theirs) = tokio::io::duplex(BUFFER);
    tokio::spawn(pump(ws, theirs));
    ours
}

async fn pump(ws: tokio_tungstenite::WebSocketStream<Upgraded>, io: DuplexStream) {
    let (mut sink, mut source) = ws.split();
    let (mut read, mut write) = tokio::io::split(io);
    let inbound = async {
        while let Some(Ok(message)) = source.next().await {
            match message {
                Message::Binary(bytes) => {
                    if write.write_all(&bytes).await.is_err() {
                        return;
                    }
                }
                // A tunnel carries only binary messages, as client-go's tunnelling
                // connection insists on its side too.
                Message::Text(_) | Message::Close(_) => return,
                Message::Ping(_) | Message::Pong(_) | Message::Frame(_) => {}
            }
        }
    };
    let outbound = async {
        let mut buf = vec![0u8; 32 * 1024];
        loop {
            match read.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if sink.send(Message::binary(buf[..n].to_vec())).await.is_err() {
                        return;
                    }
                }
            }
        }
        let _ = sink.close().await;
    };
    // Either side ending ends the tunnel: dropping the byte stream's far end is what tells
    // the SPDY session the client went.
    tokio::select! {
        _ = inbound => {}
        _ = outbound => {}
    }
}
