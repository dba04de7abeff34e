//! Header blocks: name/value pairs, zlib-compressed with the dictionary SPDY/3 defines.
//!
//! Each direction of a connection has one zlib stream for all its header blocks, each block
//! ending in a sync flush, so a block can refer back to earlier ones: a block can only be
//! read by the context that read every block before it, in order. Uncompressed, a block is a
//! 32-bit count, then per pair a 32-bit length and the lowercase name, a 32-bit length and
//! the value (several values joined by NUL).

use bytes::{Buf, BufMut, Bytes, BytesMut};
use flate2::{Compress, Compression, Decompress, FlushCompress, FlushDecompress, Status};
use std::sync::LazyLock;

/// A stream's headers, names lowercase, in the order they came.
pub type Headers = Vec<(String, String)>;

/// The largest header block accepted, uncompressed: far more than Kubernetes sends (three
/// short pairs), small enough that a hostile block cannot take memory.
const MAX_BLOCK: usize = 64 * 1024;

/// SPDY/3's header dictionary, in the words the specification builds it from: each word
/// prefixed with its 32-bit length, then the tail as it stands.
const DICTIONARY_WORDS: [&str; 65] = [
    "options",
    "head",
    "post",
    "put",
    "delete",
    "trace",
    "accept",
    "accept-charset",
    "accept-encoding",
    "accept-language",
    "accept-ranges",
    "age",
    "allow",
    "authorization",
    "cache-control",
    "connection",
    "content-base",
    "content-encoding",
    "content-language",
    "content-length",
    "content-location",
    "content-md5",
    "content-range",
    "content-type",
    "date",
    "etag",
    "expect",
    "expires",
    "from",
    "host",
    "if-match",
    "if-modified-since",
    "if-none-match",
    "if-range",
    "if-unmodified-since",
    "last-modified",
    "location",
    "max-forwards",
    "pragma",
    "proxy-authenticate",
    "proxy-authorization",
    "range",
    "referer",
    "retry-after",
    "server",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "user-agent",
    "vary",
    "via",
    "warning",
    "www-authenticate",
    "method",
    "get",
    "status",
    "200 OK",
    "version",
    "HTTP/1.1",
    "url",
    "public",
    "set-cookie",
    "keep-alive",
    "origin",
];

const DICTIONARY_TAIL: &str = concat!(
    "100101201202205206300302303304305306307402405406407408409410411412413414415416417502504505",
    "203 Non-Authoritative Information204 No Content301 Moved Permanently400 Bad Request",
    "401 Unauthorized403 Forbidden404 Not Found500 Internal Server Error501 Not Implemented",
    "503 Service UnavailableJan Feb Mar Apr May Jun Jul Aug Sept Oct Nov Dec 00:00:00 ",
    "Mon, Tue, Wed, Thu, Fri, Sat, Sun, GMTchunked,text/html,image/png,image/jpg,image/gif,",
    "application/xml,application/xhtml+xml,text/plain,text/javascript,publicprivatemax-age=",
    "gzip,deflate,sdchcharset=utf-8charset=iso-8859-1,utf-,*,enq=0.",
);

/// The dictionary's bytes.
static DICTIONARY: LazyLock<Vec<u8>> = LazyLock::new(|| {
    let mut d = Vec::with_capacity(1423);
    for word in DICTIONARY_WORDS {
        d.extend_from_slice(&(word.len() as u32).to_be_bytes());
        d.extend_from_slice(word.as_bytes());
    }
    d.extend_from_slice(DICTIONARY_TAIL.as_bytes());
    d
});

/// A header block that cannot be read or written.
#[derive(Debug, thiserror::Error)]
pub enum HeaderError {
    #[error("zlib: {0}")]
    Zlib(String),
    #[error("the block asks for a dictionary other than SPDY/3's (Adler-32 {0:#010x})")]
    Dictionary(u32),
    #[error("the block is larger than {MAX_BLOCK} bytes uncompressed")]
    TooLarge,
    #[error("the block ends inside its {0}")]
    Truncated(&'static str),
    #[error("a header name or value is not UTF-8")]
    NotUtf8,
}

/// Compresses the header blocks of one direction of a connection.
pub struct Deflater(Compress);

impl Default for Deflater {
    fn default() -> Self {
        let mut compress = Compress::new(Compression::default(), true);
        // Before the first byte, so the stream's header announces the dictionary; this
        // cannot fail on a fresh zlib stream.
        let _ = compress.set_dictionary(&DICTIONARY);
        Deflater(compress)
    }
}

impl Deflater {
    /// The compressed block of `headers`.
    pub fn block<'a>(
        &mut self,
        headers: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<Bytes, HeaderError> {
        let mut plain = BytesMut::new();
        let mut count = 0u32;
        plain.put_u32(0);
        for (name, value) in headers {
            count += 1;
            plain.put_u32(name.len() as u32);
            plain.put_slice(name.to_ascii_lowercase().as_bytes());
            plain.put_u32(value.len() as u32);
            plain.put_slice(value.as_bytes());
        }
        plain[..4].copy_from_slice(&count.to_be_bytes());
        let mut out = Vec::with_capacity(plain.len() + 64);
        let mut input = &plain[..];
        loop {
            let before = self.0.total_in();
            self.0
                .compress_vec(input, &mut out, FlushCompress::Sync)
                .map_err(|e| HeaderError::Zlib(e.to_string()))?;
            input = &input[(self.0.total_in() - before) as usize..];
            // A sync flush is complete once the output buffer was not filled up.
            if input.is_empty() && out.len() < out.capacity() {
                return Ok(out.into());
            }
            out.reserve(out.capacity().max(64));
        }
    }
}

/// Decompresses the header blocks of one direction of a connection.
pub struct Inflater(Decompress);

impl Default for Inflater {
    fn default() -> Self {
        Inflater(Decompress::new(true))
    }
}

impl Inflater {
    /// The headers of the next block of the connection.
    pub fn headers(&mut self, block: &[u8]) -> Result<Headers, HeaderError> {
        parse_block(self.inflate(block)?)
    }

    fn inflate(&mut self, mut input: &[u8]) -> Result<Bytes, HeaderError> {
        let mut out = Vec::with_capacity(input.len() * 4 + 64);
        loop {
            let (in_before, out_before) = (self.0.total_in(), self.0.total_out());
            let status = self
                .0
                .decompress_vec(input, &mut out, FlushDecompress::Sync);
            input = &input[(self.0.total_in() - in_before) as usize..];
            match status {
                Ok(Status::StreamEnd) => return Ok(out.into()),
                Ok(_) if input.is_empty() && out.len() < out.capacity() => return Ok(out.into()),
                Ok(_) => {
                    let progressed =
                        self.0.total_in() != in_before || self.0.total_out() != out_before;
                    if !progressed && out.len() < out.capacity() {
                        return Err(HeaderError::Truncated("compressed data"));
                    }
                }
                Err(e) => match e.needs_dictionary() {
                    Some(adler) if adler == dictionary_adler() => self
                        .0
                        .set_dictionary(&DICTIONARY)
                        .map(|_| ())
                        .map_err(|e| HeaderError::Zlib(e.to_string()))?,
                    Some(adler) => return Err(HeaderError::Dictionary(adler)),
                    None => return Err(HeaderError::Zlib(e.to_string())),
                },
            }
            if out.len() == out.capacity() {
                if out.len() >= MAX_BLOCK {
                    return Err(HeaderError::TooLarge);
                }
                out.reserve(out.capacity().max(256));
            }
        }
    }
}

/// The Adler-32 checksum zlib names the dictionary by.
fn dictionary_adler() -> u32 {
    let (mut a, mut b) = (1u32, 0u32);
    for &byte in DICTIONARY.iter() {
        a = (a + u32::from(byte)) % 65521;
        b = (b + a) % 65521;
    }
    b << 16 | a
}

fn parse_block(mut block: Bytes) -> Result<Headers, HeaderError> {
    let take_u32 = |b: &mut Bytes, what| {
        if b.len() < 4 {
            return Err(HeaderError::Truncated(what));
        }
        Ok(b.get_u32() as usize)
    };
    let take_str = |b: &mut Bytes, what| {
        let len = take_u32(b, what)?;
        if b.len() < len {
            return Err(HeaderError::Truncated(what));
        }
        String::from_utf8(b.split_to(len).to_vec()).map_err(|_| HeaderError::NotUtf8)
    };
    let count = take_u32(&mut block, "header count")?;
    // Each pair takes at least 8 bytes: a count larger than that is a lie, not an allocation.
    let mut headers = Vec::with_capacity(count.min(block.len() / 8));
    for _ in 0..count {
        let name = take_str(&mut block, "header name")?.to_ascii_lowercase();
        let value = take_str(&mut block, "header value")?;
        headers.push((name, value));
    }
    Ok(headers)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap_or(0))
            .collect()
    }

    fn pairs(h: &Headers) -> Vec<(&str, &str)> {
        h.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect()
    }

    #[test]
    fn the_dictionary_is_spdy3s() {
        // Length and Adler-32 of the dictionary every SPDY/3 peer uses (the checksum appears
        // in each compressed header stream's zlib header).
        assert_eq!(DICTIONARY.len(), 1423);
        assert_eq!(dictionary_adler(), 0xe3c6_a7c2);
    }

    #[test]
    fn blocks_compressed_by_another_zlib_are_read_in_order() {
        // Two blocks as a port-forward client sends them, compressed by CPython's zlib with
        // the SPDY dictionary: the second is mostly back-references into the first.
        let first = hex("78f9e3c6a7c202253a703a2b294a4dcc851625aca9a0808614cb45e01c60646c6e09a4398b20d198094ade8c0600000000ffff");
        let second = hex("c2aa19540e2512d60b000000ffff");
        let mut inflater = Inflater::default();
        let h = inflater.headers(&first).expect("first block");
        assert_eq!(
            pairs(&h),
            [
                ("streamtype", "error"),
                ("port", "2379"),
                ("requestid", "0")
            ]
        );
        let h = inflater.headers(&second).expect("second block");
        assert_eq!(
            pairs(&h),
            [("streamtype", "data"), ("port", "2379"), ("requestid", "0")]
        );
        // Read out of order, the second block means nothing.
        assert!(Inflater::default().headers(&second).is_err());
    }

    #[test]
    fn what_the_deflater_writes_the_inflater_reads_block_after_block() {
        let (mut deflater, mut inflater) = (Deflater::default(), Inflater::default());
        for i in 0..50 {
            let port = format!("{}", 2000 + i);
            let block = deflater
                .block([("StreamType", "data"), ("port", port.as_str())])
                .expect("deflate");
            let h = inflater.headers(&block).expect("inflate");
            assert_eq!(pairs(&h), [("streamtype", "data"), ("port", port.as_str())]);
        }
        let empty = deflater.block([]).expect("empty block");
        assert!(inflater.headers(&empty).expect("inflate").is_empty());
    }

    #[test]
    fn lying_blocks_are_errors() {
        let (mut deflater, mut inflater) = (Deflater::default(), Inflater::default());
        let block = deflater.block([("a", "b")]).expect("deflate");
        assert!(inflater.headers(&block[..block.len() - 6]).is_err());
        assert!(matches!(
            parse_block(Bytes::from_static(b"\x00\x00\x00\x02\x00\x00\x00\x01a")),
            Err(HeaderError::Truncated(_))
        ));
        assert!(matches!(
            parse_block(Bytes::from_static(b"\xff\xff\xff\xff")),
            Err(HeaderError::Truncated(_))
        ));
    }
}
