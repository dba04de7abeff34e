//! The server side of a SPDY session: the client opens streams, each with headers; the
//! server replies to each at once and hands it to the application, which reads what the
//! client sends on it and writes back until either side finishes or resets it.
//!
//! One task reads frames and routes them; one writer drains a queue of frames, so frames
//! leave in the order they were queued (a stream's SYN_REPLY always before its data) and
//! header blocks are compressed in the order they are sent, as the peer's zlib context needs.

use crate::frame::{self, Frame, FLAG_FIN, PROTOCOL_ERROR, REFUSED_STREAM};
use crate::headers::{Deflater, Headers, Inflater};
use crate::Error;
use bytes::{Bytes, BytesMut};
use std::collections::HashMap;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;

/// Data frames queued for one stream before the session stops reading (spdystream does no
/// flow control, so a slow consumer must slow the connection instead).
const STREAM_QUEUE: usize = 16;
/// Frames queued for the writer.
const WRITE_QUEUE: usize = 64;
/// Bytes gathered before one write to the transport.
const WRITE_BATCH: usize = 64 * 1024;

/// What the writer sends.
enum Outgoing {
    Reply { stream: u32 },
    Data { stream: u32, data: Bytes, fin: bool },
    Reset { stream: u32, status: u32 },
    Ping { id: u32 },
}

/// A stream the client opened.
pub struct Stream {
    id: u32,
    headers: Headers,
    reader: StreamReader,
    writer: StreamWriter,
}

impl Stream {
    /// The stream's ID (odd: the client's).
    pub fn id(&self) -> u32 {
        self.id
    }

    /// The value of header `name` (compared without case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// All the stream's headers.
    pub fn headers(&self) -> &Headers {
        &self.headers
    }

    /// Its two directions, to be driven apart.
    pub fn split(self) -> (StreamReader, StreamWriter) {
        (self.reader, self.writer)
    }
}

/// What the client sends on a stream.
pub struct StreamReader {
    incoming: mpsc::Receiver<Bytes>,
}

impl StreamReader {
    /// The next data, or `None` once the client finished or reset the stream, or went.
    pub async fn recv(&mut self) -> Option<Bytes> {
        self.incoming.recv().await
    }
}

/// Sends on a stream.
#[derive(Clone)]
pub struct StreamWriter {
    id: u32,
    out: mpsc::Sender<Outgoing>,
}

/// The session is gone: nothing more can be sent.
#[derive(Debug, thiserror::Error)]
#[error("the SPDY session has ended")]
pub struct Closed;

impl StreamWriter {
    /// Sends `data` (split into frames as needed).
    pub async fn send(&self, data: Bytes) -> Result<(), Closed> {
        self.queue(Outgoing::Data {
            stream: self.id,
            data,
            fin: false,
        })
        .await
    }

    /// Sends the stream's last frame: nothing more comes from this side.
    pub async fn finish(&self) -> Result<(), Closed> {
        self.queue(Outgoing::Data {
            stream: self.id,
            data: Bytes::new(),
            fin: true,
        })
        .await
    }

    /// Resets the stream with RST_STREAM `status`.
    pub async fn reset(&self, status: u32) -> Result<(), Closed> {
        self.queue(Outgoing::Reset {
            stream: self.id,
            status,
        })
        .await
    }

    async fn queue(&self, what: Outgoing) -> Result<(), Closed> {
        self.out.send(what).await.map_err(|_| Closed)
    }
}

/// A server session over `io`, and the streams its client opens. Nothing happens until
/// [`Connection::run`] is polled; dropping the receiver refuses further streams.
pub fn server<IO>(io: IO) -> (Connection<IO>, mpsc::Receiver<Stream>)
where
    IO: AsyncRead + AsyncWrite + Send + Unpin,
{
    let (opened, streams) = mpsc::channel(16);
    let (out, queue) = mpsc::channel(WRITE_QUEUE);
    let connection = Connection {
        io,
        opened,
        out,
        queue,
        streams: HashMap::new(),
        last_stream: 0,
        inflater: Inflater::default(),
    };
    (connection, streams)
}

/// A server session's connection.
pub struct Connection<IO> {
    io: IO,
    opened: mpsc::Sender<Stream>,
    out: mpsc::Sender<Outgoing>,
    queue: mpsc::Receiver<Outgoing>,
    /// Where each open stream's incoming data goes, until the client finishes it.
    streams: HashMap<u32, mpsc::Sender<Bytes>>,
    last_stream: u32,
    inflater: Inflater,
}

impl<IO> Connection<IO>
where
    IO: AsyncRead + AsyncWrite + Send + Unpin,
{
    /// Serves the session until the client goes away (EOF or GOAWAY) or breaks the protocol.
    /// Every stream's reader then ends and its writer fails.
    pub async fn run(self) -> Result<(), Error> {
        let Connection {
            io,
            opened,
            out,
            queue,
            streams,
            last_stream,
            inflater,
        } = self;
        let (read, write) = tokio::io::split(io);
        let mut routing = Routing {
            opened,
            out,
            streams,
            last_stream,
            inflater,
        };
        tokio::select! {
            r = routing.read_frames(read) => r,
            r = write_frames(write, queue) => r,
        }
    }
}

/// The reading half's state.
struct Routing {
    opened: mpsc::Sender<Stream>,
    out: mpsc::Sender<Outgoing>,
    streams: HashMap<u32, mpsc::Sender<Bytes>>,
    last_stream: u32,
    inflater: Inflater,
}

impl Routing {
    async fn read_frames(&mut self, mut read: impl AsyncRead + Unpin) -> Result<(), Error> {
        let mut buf = BytesMut::with_capacity(16 * 1024);
        loop {
            while let Some(frame) = frame::parse(&mut buf)? {
                if !self.route(frame).await? {
                    return Ok(());
                }
            }
            if read.read_buf(&mut buf).await? == 0 {
                return Ok(());
            }
        }
    }

    /// Acts on one frame; `false` once the client has said goodbye.
    async fn route(&mut self, frame: Frame) -> Result<bool, Error> {
        match frame {
            Frame::SynStream {
                stream,
                flags,
                block,
                ..
            } => {
                // Decompressed even if refused: the next block depends on this one.
                let headers = self.inflater.headers(&block)?;
                self.open(stream, flags, headers).await;
            }
            Frame::SynReply { block, .. } | Frame::Headers { block, .. } => {
                // Neither means anything to a server of client streams, but both advance
                // the header context.
                self.inflater.headers(&block)?;
            }
            Frame::Data {
                stream,
                flags,
                data,
            } => {
                if let Some(tx) = self.streams.get(&stream) {
                    if !data.is_empty() && tx.send(data).await.is_err() {
                        // The application stopped reading: what else comes is dropped.
                        self.streams.remove(&stream);
                    }
                }
                if flags & FLAG_FIN != 0 {
                    self.streams.remove(&stream);
                }
            }
            Frame::RstStream { stream, .. } => {
                self.streams.remove(&stream);
            }
            // Odd IDs are the client's pings, answered with the same frame; even IDs would
            // answer the server's, and it sends none.
            Frame::Ping { id } if !id.is_multiple_of(2) => {
                let _ = self.out.send(Outgoing::Ping { id }).await;
            }
            Frame::GoAway { .. } => return Ok(false),
            Frame::Ping { .. }
            | Frame::Settings { .. }
            | Frame::WindowUpdate { .. }
            | Frame::Unknown { .. } => {}
        }
        Ok(true)
    }

    /// A new stream: replied to and handed to the application, or reset if it breaks the
    /// rules (client stream IDs are odd and increase) or the application takes no more.
    async fn open(&mut self, stream: u32, flags: u8, headers: Headers) {
        if stream.is_multiple_of(2) || stream <= self.last_stream {
            tracing::debug!(stream, "SPDY stream ID out of order");
            let _ = self
                .out
                .send(Outgoing::Reset {
                    stream,
                    status: PROTOCOL_ERROR,
                })
                .await;
            return;
        }
        self.last_stream = stream;
        let (tx, incoming) = mpsc::channel(STREAM_QUEUE);
        if flags & FLAG_FIN == 0 {
            self.streams.insert(stream, tx);
        }
        let _ = self.out.send(Outgoing::Reply { stream }).await;
        let opened = Stream {
            id: stream,
            headers,
            reader: StreamReader { incoming },
            writer: StreamWriter {
                id: stream,
                out: self.out.clone(),
            },
        };
        if self.opened.send(opened).await.is_err() {
            self.streams.remove(&stream);
            let _ = self
                .out
                .send(Outgoing::Reset {
                    stream,
                    status: REFUSED_STREAM,
                })
                .await;
        }
    }
}

/// Writes queued frames in order, batching what is queued at once into one write.
async fn write_frames(
    mut write: impl AsyncWrite + Unpin,
    mut queue: mpsc::Receiver<Outgoing>,
) -> Result<(), Error> {
    let mut deflater = Deflater::default();
    let mut buf = BytesMut::with_capacity(16 * 1024);
    while let Some(first) = queue.recv().await {
        encode(&mut deflater, &mut buf, first)?;
        while buf.len() < WRITE_BATCH {
            match queue.try_recv() {
                Ok(next) => encode(&mut deflater, &mut buf, next)?,
                Err(_) => break,
            }
        }
        write.write_all(&buf).await?;
        write.flush().await?;
        buf.clear();
    }
    // Every sender is gone, the reading half's among them: it has ended, and so does this.
    Ok(())
}

fn encode(deflater: &mut Deflater, buf: &mut BytesMut, what: Outgoing) -> Result<(), Error> {
    match what {
        Outgoing::Reply { stream } => Frame::SynReply {
            stream,
            flags: 0,
            block: deflater.block([])?,
        }
        .encode(buf),
        Outgoing::Data { stream, data, fin } => frame::encode_data(buf, stream, &data, fin),
        Outgoing::Reset { stream, status } => Frame::RstStream { stream, status }.encode(buf),
        Outgoing::Ping { id } => Frame::Ping { id }.encode(buf),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::headers::Deflater;

    /// The client's half: frames written and read by hand, header blocks by our own
    /// compressor (the headers module's tests read another zlib's).
    struct Client {
        io: tokio::io::DuplexStream,
        deflater: Deflater,
        inflater: Inflater,
        buf: BytesMut,
    }

    impl Client {
        async fn send(&mut self, frame: Frame) {
            let mut buf = BytesMut::new();
            frame.encode(&mut buf);
            self.io.write_all(&buf).await.expect("write");
        }

        async fn open(&mut self, stream: u32, flags: u8, headers: &[(&str, &str)]) {
            let block = self.deflater.block(headers.iter().copied()).expect("block");
            self.send(Frame::SynStream {
                stream,
                associated: 0,
                priority: 0,
                flags,
                block,
            })
            .await;
        }

        async fn next(&mut self) -> Option<Frame> {
            loop {
                if let Some(frame) = frame::parse(&mut self.buf).expect("frame") {
                    if let Frame::SynReply { block, .. } = &frame {
                        self.inflater.headers(block).expect("reply headers");
                    }
                    return Some(frame);
                }
                if self.io.read_buf(&mut self.buf).await.expect("read") == 0 {
                    return None;
                }
            }
        }
    }

    fn start() -> (Client, mpsc::Receiver<Stream>, tokio::task::JoinHandle<()>) {
        let (client, server_io) = tokio::io::duplex(64 * 1024);
        let (connection, streams) = server(server_io);
        let task = tokio::spawn(async move {
            let _ = connection.run().await;
        });
        let client = Client {
            io: client,
            deflater: Deflater::default(),
            inflater: Inflater::default(),
            buf: BytesMut::new(),
        };
        (client, streams, task)
    }

    #[tokio::test]
    async fn each_stream_is_replied_to_and_handed_over_with_its_headers() {
        let (mut client, mut streams, _task) = start();
        client
            .open(1, 0, &[("streamtype", "error"), ("port", "2379")])
            .await;
        client
            .open(3, 0, &[("streamtype", "data"), ("port", "2379")])
            .await;
        for (id, kind) in [(1, "error"), (3, "data")] {
            let stream = streams.recv().await.expect("stream");
            assert_eq!((stream.id(), stream.header("StreamType")), (id, Some(kind)));
            assert_eq!(stream.header("port"), Some("2379"));
            // The reply's (empty) header block must read in the client's context.
            let Some(Frame::SynReply { stream, flags, .. }) = client.next().await else {
                panic!("no SYN_REPLY for stream {id}");
            };
            assert_eq!((stream, flags), (id, 0));
        }
    }

    #[tokio::test]
    async fn data_fin_and_pings() {
        let (mut client, mut streams, _task) = start();
        client.open(1, 0, &[("port", "1")]).await;
        let (mut reader, writer) = streams.recv().await.expect("stream").split();
        assert!(matches!(
            client.next().await,
            Some(Frame::SynReply { stream: 1, .. })
        ));
        client
            .send(Frame::Data {
                stream: 1,
                flags: 0,
                data: Bytes::from_static(b"ping?"),
            })
            .await;
        assert_eq!(reader.recv().await.as_deref(), Some(&b"ping?"[..]));
        writer
            .send(Bytes::from_static(b"pong!"))
            .await
            .expect("send");
        writer.finish().await.expect("finish");
        assert_eq!(
            client.next().await,
            Some(Frame::Data {
                stream: 1,
                flags: 0,
                data: Bytes::from_static(b"pong!")
            })
        );
        assert_eq!(
            client.next().await,
            Some(Frame::Data {
                stream: 1,
                flags: FLAG_FIN,
                data: Bytes::new()
            })
        );
        // The client's FIN ends what the application reads.
        client
            .send(Frame::Data {
                stream: 1,
                flags: FLAG_FIN,
                data: Bytes::new(),
            })
            .await;
        assert_eq!(reader.recv().await, None);
        // Client pings (odd IDs) come back as they went.
        client.send(Frame::Ping { id: 7 }).await;
        assert_eq!(client.next().await, Some(Frame::Ping { id: 7 }));
    }

    #[tokio::test]
    async fn streams_out_of_order_are_reset_and_goaway_ends_the_session() {
        let (mut client, mut streams, task) = start();
        client.open(3, 0, &[("port", "1")]).await;
        let _three = streams.recv().await.expect("stream 3");
        assert!(matches!(
            client.next().await,
            Some(Frame::SynReply { stream: 3, .. })
        ));
        // Lower than the last, then even: both refused, and the header context still follows.
        client.open(1, 0, &[("port", "2")]).await;
        assert_eq!(
            client.next().await,
            Some(Frame::RstStream {
                stream: 1,
                status: PROTOCOL_ERROR
            })
        );
        client.open(4, 0, &[("port", "3")]).await;
        assert_eq!(
            client.next().await,
            Some(Frame::RstStream {
                stream: 4,
                status: PROTOCOL_ERROR
            })
        );
        client.open(5, 0, &[("port", "4")]).await;
        let five = streams.recv().await.expect("stream 5");
        assert_eq!(five.header("port"), Some("4"));
        client
            .send(Frame::GoAway {
                last_good: 0,
                status: 0,
            })
            .await;
        task.await.expect("session ends");
        let (mut reader, writer) = five.split();
        assert_eq!(reader.recv().await, None);
        assert!(writer.send(Bytes::from_static(b"late")).await.is_err());
    }

    #[tokio::test]
    async fn a_broken_frame_ends_the_session_with_an_error() {
        let (client, server_io) = tokio::io::duplex(1024);
        let (connection, _streams) = server(server_io);
        let mut client = client;
        client
            .write_all(b"\x80\x02\x00\x06\x00\x00\x00\x04\x00\x00\x00\x01")
            .await
            .expect("write");
        assert!(matches!(connection.run().await, Err(Error::Frame(_))));
    }
}
