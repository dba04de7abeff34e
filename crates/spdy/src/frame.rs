//! SPDY/3.1 frames: parsed from the front of a byte buffer, encoded onto the end of one.
//!
//! Every frame has an 8-byte header. A control frame's starts with the control bit, the
//! version (3) and its type; a data frame's with the stream ID. Both end with 8 bits of flags
//! and a 24-bit payload length. Header blocks stay compressed here: their zlib contexts live
//! for the whole connection, one per direction, so [`crate::headers`] owns them.

use bytes::{Buf, BufMut, Bytes, BytesMut};

/// The SPDY version spoken.
pub const VERSION: u16 = 3;
/// Last frame of its sender on this stream.
pub const FLAG_FIN: u8 = 0x01;
/// Largest payload a frame can carry (the length field has 24 bits).
pub const MAX_PAYLOAD: usize = (1 << 24) - 1;

/// RST_STREAM status: the stream broke the protocol.
pub const PROTOCOL_ERROR: u32 = 1;
/// RST_STREAM status: the stream was refused before any processing.
pub const REFUSED_STREAM: u32 = 3;

const SYN_STREAM: u16 = 1;
const SYN_REPLY: u16 = 2;
const RST_STREAM: u16 = 3;
const SETTINGS: u16 = 4;
const PING: u16 = 6;
const GOAWAY: u16 = 7;
const HEADERS: u16 = 8;
const WINDOW_UPDATE: u16 = 9;

/// A frame; header blocks still compressed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    SynStream {
        stream: u32,
        associated: u32,
        priority: u8,
        flags: u8,
        block: Bytes,
    },
    SynReply {
        stream: u32,
        flags: u8,
        block: Bytes,
    },
    RstStream {
        stream: u32,
        status: u32,
    },
    /// Settings are advisory and spdystream sends none; only their count is kept.
    Settings {
        entries: u32,
    },
    Ping {
        id: u32,
    },
    GoAway {
        last_good: u32,
        status: u32,
    },
    Headers {
        stream: u32,
        flags: u8,
        block: Bytes,
    },
    WindowUpdate {
        stream: u32,
        delta: u32,
    },
    Data {
        stream: u32,
        flags: u8,
        data: Bytes,
    },
    /// A control frame type SPDY/3.1 does not define; receivers ignore these.
    Unknown {
        kind: u16,
    },
}

/// A frame that cannot be parsed.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum FrameError {
    #[error("SPDY version {0} is not spoken (only 3)")]
    Version(u16),
    #[error("{kind} frame with a {len}-byte payload")]
    Length { kind: &'static str, len: usize },
    #[error("{0} frame for stream 0")]
    ZeroStream(&'static str),
}

/// Takes one whole frame off the front of `buf`, or `None` if `buf` does not hold one yet.
pub fn parse(buf: &mut BytesMut) -> Result<Option<Frame>, FrameError> {
    if buf.len() < 8 {
        return Ok(None);
    }
    let len = u32::from_be_bytes([0, buf[5], buf[6], buf[7]]) as usize;
    if buf.len() < 8 + len {
        // Reserve the rest now so the reads that complete it need no reallocation.
        buf.reserve(8 + len - buf.len());
        return Ok(None);
    }
    let mut frame = buf.split_to(8 + len).freeze();
    let first = frame.get_u32();
    let flags_len = frame.get_u32();
    let flags = (flags_len >> 24) as u8;
    if first & 0x8000_0000 == 0 {
        let stream = first & 0x7fff_ffff;
        if stream == 0 {
            return Err(FrameError::ZeroStream("DATA"));
        }
        return Ok(Some(Frame::Data {
            stream,
            flags,
            data: frame,
        }));
    }
    let version = ((first >> 16) & 0x7fff) as u16;
    if version != VERSION {
        return Err(FrameError::Version(version));
    }
    control((first & 0xffff) as u16, flags, frame).map(Some)
}

/// A control frame's payload, by type.
fn control(kind: u16, flags: u8, mut p: Bytes) -> Result<Frame, FrameError> {
    let need = |name: &'static str, ok: bool, p: &Bytes| {
        if ok {
            Ok(())
        } else {
            Err(FrameError::Length {
                kind: name,
                len: p.len(),
            })
        }
    };
    let stream_id = |p: &mut Bytes| p.get_u32() & 0x7fff_ffff;
    Ok(match kind {
        SYN_STREAM => {
            need("SYN_STREAM", p.len() >= 10, &p)?;
            let stream = stream_id(&mut p);
            let associated = stream_id(&mut p);
            let priority = p.get_u8() >> 5;
            let _slot = p.get_u8();
            if stream == 0 {
                return Err(FrameError::ZeroStream("SYN_STREAM"));
            }
            Frame::SynStream {
                stream,
                associated,
                priority,
                flags,
                block: p,
            }
        }
        SYN_REPLY | HEADERS => {
            need("SYN_REPLY/HEADERS", p.len() >= 4, &p)?;
            let stream = stream_id(&mut p);
            if kind == SYN_REPLY {
                Frame::SynReply {
                    stream,
                    flags,
                    block: p,
                }
            } else {
                Frame::Headers {
                    stream,
                    flags,
                    block: p,
                }
            }
        }
        RST_STREAM => {
            need("RST_STREAM", p.len() == 8, &p)?;
            Frame::RstStream {
                stream: stream_id(&mut p),
                status: p.get_u32(),
            }
        }
        SETTINGS => {
            need("SETTINGS", p.len() >= 4, &p)?;
            let entries = p.get_u32();
            need("SETTINGS", p.len() as u64 == u64::from(entries) * 8, &p)?;
            Frame::Settings { entries }
        }
        PING => {
            need("PING", p.len() == 4, &p)?;
            Frame::Ping { id: p.get_u32() }
        }
        GOAWAY => {
            need("GOAWAY", p.len() == 8, &p)?;
            Frame::GoAway {
                last_good: stream_id(&mut p),
                status: p.get_u32(),
            }
        }
        WINDOW_UPDATE => {
            need("WINDOW_UPDATE", p.len() == 8, &p)?;
            Frame::WindowUpdate {
                stream: stream_id(&mut p),
                delta: p.get_u32() & 0x7fff_ffff,
            }
        }
        kind => Frame::Unknown { kind },
    })
}

impl Frame {
    /// Appends the frame's bytes to `out`. Payloads over [`MAX_PAYLOAD`] are the caller's to
    /// split (see [`encode_data`]).
    pub fn encode(&self, out: &mut BytesMut) {
        match self {
            Frame::SynStream {
                stream,
                associated,
                priority,
                flags,
                block,
            } => {
                header(out, SYN_STREAM, *flags, 10 + block.len());
                out.put_u32(*stream);
                out.put_u32(*associated);
                out.put_u8(priority << 5);
                out.put_u8(0);
                out.put_slice(block);
            }
            Frame::SynReply {
                stream,
                flags,
                block,
            }
            | Frame::Headers {
                stream,
                flags,
                block,
            } => {
                let kind = if matches!(self, Frame::SynReply { .. }) {
                    SYN_REPLY
                } else {
                    HEADERS
                };
                header(out, kind, *flags, 4 + block.len());
                out.put_u32(*stream);
                out.put_slice(block);
            }
            Frame::RstStream { stream, status } => pair(out, RST_STREAM, *stream, *status),
            Frame::Settings { .. } => {
                header(out, SETTINGS, 0, 4);
                out.put_u32(0);
            }
            Frame::Ping { id } => {
                header(out, PING, 0, 4);
                out.put_u32(*id);
            }
            Frame::GoAway { last_good, status } => pair(out, GOAWAY, *last_good, *status),
            Frame::WindowUpdate { stream, delta } => pair(out, WINDOW_UPDATE, *stream, *delta),
            Frame::Data {
                stream,
                flags,
                data,
            } => {
                out.put_u32(stream & 0x7fff_ffff);
                out.put_u32(u32::from(*flags) << 24 | data.len() as u32);
                out.put_slice(data);
            }
            Frame::Unknown { kind } => header(out, *kind, 0, 0),
        }
    }
}

/// Appends `data` for `stream` as as many DATA frames as it needs; `fin` on the last (an
/// empty frame if `data` is empty).
pub fn encode_data(out: &mut BytesMut, stream: u32, data: &[u8], fin: bool) {
    let mut chunks = data.chunks(MAX_PAYLOAD).peekable();
    if chunks.peek().is_none() {
        out.put_u32(stream & 0x7fff_ffff);
        out.put_u32(u32::from(if fin { FLAG_FIN } else { 0 }) << 24);
        return;
    }
    while let Some(chunk) = chunks.next() {
        let flags = if fin && chunks.peek().is_none() {
            FLAG_FIN
        } else {
            0
        };
        out.put_u32(stream & 0x7fff_ffff);
        out.put_u32(u32::from(flags) << 24 | chunk.len() as u32);
        out.put_slice(chunk);
    }
}

fn header(out: &mut BytesMut, kind: u16, flags: u8, len: usize) {
    out.put_u16(0x8000 | VERSION);
    out.put_u16(kind);
    out.put_u32(u32::from(flags) << 24 | (len as u32 & 0x00ff_ffff));
}

fn pair(out: &mut BytesMut, kind: u16, first: u32, second: u32) {
    header(out, kind, 0, 8);
    out.put_u32(first & 0x7fff_ffff);
    out.put_u32(second);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(frame: Frame) {
        let mut buf = BytesMut::new();
        frame.encode(&mut buf);
        let len = buf.len();
        // Not yet whole: nothing taken.
        let mut partial = BytesMut::from(&buf[..len - 1]);
        assert_eq!(parse(&mut partial), Ok(None));
        assert_eq!(partial.len(), len - 1);
        assert_eq!(parse(&mut buf), Ok(Some(frame)));
        assert!(buf.is_empty());
    }

    #[test]
    fn frames_survive_encoding_and_parsing() {
        round_trip(Frame::SynStream {
            stream: 1,
            associated: 0,
            priority: 7,
            flags: FLAG_FIN,
            block: Bytes::from_static(b"\x78\x01"),
        });
        round_trip(Frame::SynReply {
            stream: 3,
            flags: 0,
            block: Bytes::from_static(b"abc"),
        });
        round_trip(Frame::RstStream {
            stream: 5,
            status: REFUSED_STREAM,
        });
        round_trip(Frame::Ping { id: 1 });
        round_trip(Frame::GoAway {
            last_good: 9,
            status: 0,
        });
        round_trip(Frame::WindowUpdate {
            stream: 1,
            delta: 65536,
        });
        round_trip(Frame::Settings { entries: 0 });
        round_trip(Frame::Data {
            stream: 7,
            flags: FLAG_FIN,
            data: Bytes::from_static(b"hello"),
        });
    }

    #[test]
    fn a_control_frame_has_the_layout_of_the_spec() {
        let mut buf = BytesMut::new();
        Frame::Ping { id: 0x01020304 }.encode(&mut buf);
        assert_eq!(
            &buf[..],
            b"\x80\x03\x00\x06\x00\x00\x00\x04\x01\x02\x03\x04"
        );
        buf.clear();
        encode_data(&mut buf, 3, b"", true);
        assert_eq!(&buf[..], b"\x00\x00\x00\x03\x01\x00\x00\x00");
    }

    #[test]
    fn bad_frames_are_errors_and_unknown_types_are_skippable() {
        let mut v2 = BytesMut::from(&b"\x80\x02\x00\x06\x00\x00\x00\x04\x00\x00\x00\x01"[..]);
        assert_eq!(parse(&mut v2), Err(FrameError::Version(2)));
        let mut short_ping = BytesMut::from(&b"\x80\x03\x00\x06\x00\x00\x00\x02\x00\x01"[..]);
        assert!(matches!(
            parse(&mut short_ping),
            Err(FrameError::Length { kind: "PING", .. })
        ));
        let mut zero = BytesMut::from(&b"\x00\x00\x00\x00\x00\x00\x00\x00"[..]);
        assert_eq!(parse(&mut zero), Err(FrameError::ZeroStream("DATA")));
        let mut unknown = BytesMut::from(&b"\x80\x03\x00\x0a\x00\x00\x00\x02zz"[..]);
        assert_eq!(parse(&mut unknown), Ok(Some(Frame::Unknown { kind: 10 })));
    }

    #[test]
    fn data_larger_than_a_frame_is_split_with_fin_on_the_last() {
        let data = vec![7u8; MAX_PAYLOAD + 10];
        let mut buf = BytesMut::new();
        encode_data(&mut buf, 1, &data, true);
        let Some(Frame::Data { flags, data: a, .. }) = parse(&mut buf).ok().flatten() else {
            panic!("first frame");
        };
        assert_eq!((flags, a.len()), (0, MAX_PAYLOAD));
        let Some(Frame::Data { flags, data: b, .. }) = parse(&mut buf).ok().flatten() else {
            panic!("second frame");
        };
        assert_eq!((flags, b.len()), (FLAG_FIN, 10));
    }
}
