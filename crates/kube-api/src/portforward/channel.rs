//! Port-forward over WebSocket with Kubernetes' channel protocol (`v4.channel.k8s.io`,
//! `portforward.k8s.io`), as kube-rs and the Python client speak it.
//!
//! Each forwarded port `i` of the request's `ports` gets two channels: data on `2i`, errors
//! on `2i+1`. Every binary message starts with its channel byte; the first message of each
//! channel carries the port (two bytes, little endian).

use super::{PodStream, Target, Upgraded};
use futures::{SinkExt, StreamExt};
use std::pin::Pin;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_tungstenite::tungstenite::protocol::Message;

type Ws = tokio_tungstenite::WebSocketStream<Upgraded>;

/// Pumps bytes between the WebSocket's channels and each port's stream until the client goes.
pub(super) async fn forward(ws: Ws, target: Target, ports: &[u16]) {
    let (mut sink, mut source) = ws.split();
    let (out, mut outgoing) = tokio::sync::mpsc::channel::<Message>(64);
    let mut writers = Vec::new();
    let mut readers = Vec::new();
    for (i, port) in ports.iter().enumerate() {
        let (data, error) = ((2 * i) as u8, (2 * i + 1) as u8);
        let [lo, hi] = port.to_le_bytes();
        let _ = out.send(Message::binary(vec![data, lo, hi])).await;
        let _ = out.send(Message::binary(vec![error, lo, hi])).await;
        match target.open(*port) {
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
