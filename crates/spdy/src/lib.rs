//! SPDY/3.1 as Kubernetes' streaming protocols speak it.
//!
//! kubectl and Cluster API's KubeadmControlPlane forward ports over SPDY/3.1, either after a
//! plain HTTP `Upgrade: SPDY/3.1` or tunnelled in WebSocket binary messages
//! (`SPDY/3.1+portforward.k8s.io`). Their side is Go's `moby/spdystream`; this crate is the
//! server side of that conversation, over any byte stream.
//!
//! Written here rather than taken from crates.io because no maintained Rust crate speaks SPDY
//! (the protocol was retired in favour of HTTP/2, and only Kubernetes still uses it). It is
//! small because spdystream uses little of SPDY: streams opened by the client, data both ways,
//! FIN and RST, PING; no flow control (spdystream ignores WINDOW_UPDATE and never sends one),
//! no server push.
//!
//! - [`frame`]: the frames, parsed from and encoded into byte buffers.
//! - [`headers`]: header blocks and their connection-long zlib contexts.
//! - [`session`]: a server session: streams the client opens, with data in and out.

pub mod frame;
pub mod headers;
pub mod session;

pub use headers::Headers;
pub use session::{server, Connection, Stream, StreamReader, StreamWriter};

/// What ends a session with an error.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("SPDY framing: {0}")]
    Frame(#[from] frame::FrameError),
    #[error("SPDY header block: {0}")]
    Headers(#[from] headers::HeaderError),
    #[error(transparent)]
    Io(#[from] std::io::Error),
}
