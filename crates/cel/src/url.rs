//! Kubernetes' CEL URL library: `url(s)`, `isURL(s)`, and a URL's `getScheme`, `getHost`,
//! `getHostname`, `getPort`, `getEscapedPath` and `getQuery`.
//!
//! kube-apiserver checks a string with Go's `url.ParseRequestURI` (an absolute URI or an
//! absolute path; what the OpenAPI `uri` format accepts too) and then reads its parts from
//! `url.Parse`, which also splits off a `#fragment`. Rules see the verdicts and the parts of
//! those two functions, so this module follows their grammar byte for byte: the scheme split,
//! the `?` and `//authority` splits, userinfo and host checks (a bracketed host must be an
//! IPv6 address, as Go since 1.24.8 requires), percent-decoding per component and Go's
//! re-escaping of the path, and Go's error texts (a rule's message can show them).
//!
//! A URL travels as a typed value (see `typed` in the parent module) whose text is Go's
//! `URL.String()` of it: kube-apiserver compares URLs by that string, and parsing it again
//! gives back the same parts.

use super::{typed, typed_text, Cel};
use cel::extractors::This;
use cel::{ExecutionError, FunctionContext};
use std::collections::HashMap;
use std::sync::Arc;

/// The type key of a URL value.
const KEY: &str = "@url";

/// Registers the library's functions.
pub(super) fn register(ctx: &mut cel::Context<'static>) {
    ctx.add_function("url", |ftx: &FunctionContext, s: Arc<String>| {
        to_url(&s).map_err(|e| ftx.error(e))
    });
    ctx.add_function("isURL", |s: Arc<String>| parse_request_uri(&s).is_ok());
    type Part = fn(&Url) -> String;
    for (name, part) in [
        ("getScheme", (|u: &Url| u.scheme.clone()) as Part),
        ("getHost", |u: &Url| lossy(&u.host)),
        ("getHostname", |u: &Url| lossy(split_host_port(&u.host).0)),
        ("getPort", |u: &Url| lossy(split_host_port(&u.host).1)),
        ("getEscapedPath", Url::escaped_path),
    ] {
        ctx.add_function(name, move |ftx: &FunctionContext, This(u): This<Cel>| {
            Ok::<_, ExecutionError>(Cel::String(Arc::new(part(&from_cel(ftx, &u)?))))
        });
    }
    ctx.add_function("getQuery", |ftx: &FunctionContext, This(u): This<Cel>| {
        Ok::<_, ExecutionError>(query_cel(&from_cel(ftx, &u)?.raw_query))
    });
}

/// The functions this library adds, for the list of functions rules may call.
pub(super) const FUNCTIONS: [&str; 8] = [
    "url",
    "isURL",
    "getScheme",
    "getHost",
    "getHostname",
    "getPort",
    "getEscapedPath",
    "getQuery",
];

/// `url(s)`: checked as a request URI, kept as Go's `url.Parse` reads it.
fn to_url(s: &str) -> Result<Cel, String> {
    let wrap = |e: ParseError| format!("URL parse error during conversion from string: {e}");
    parse_request_uri(s).map_err(wrap)?;
    Ok(typed(KEY, parse(s).map_err(wrap)?.to_string()))
}

fn from_cel(ftx: &FunctionContext, v: &Cel) -> Result<Url, ExecutionError> {
    typed_text(v, KEY)
        .and_then(|s| parse(s).ok())
        .ok_or_else(|| ftx.error("no such overload: not a URL"))
}

/// A query in "matrix" form: each key to all its values, keys and values unescaped.
fn query_cel(raw_query: &str) -> Cel {
    let mut values: HashMap<String, Vec<Cel>> = HashMap::new();
    for (k, v) in parse_query(raw_query) {
        values.entry(k).or_default().push(Cel::String(Arc::new(v)));
    }
    Cel::Map(cel::objects::Map {
        map: Arc::new(
            values
                .into_iter()
                .map(|(k, v)| {
                    (
                        cel::objects::Key::String(Arc::new(k)),
                        Cel::List(Arc::new(v)),
                    )
                })
                .collect(),
        ),
    })
}

/// Why Go's parser refused a URL, worded as Go words it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UrlError {
    #[error("net/url: invalid control character in URL")]
    ControlCharacter,
    #[error("empty url")]
    Empty,
    #[error("missing protocol scheme")]
    MissingScheme,
    #[error("invalid URI for request")]
    NotForRequest,
    #[error("first path segment in URL cannot contain colon")]
    ColonInFirstSegment,
    #[error("net/url: invalid userinfo")]
    InvalidUserinfo,
    #[error("missing ']' in host")]
    MissingBracket,
    #[error("invalid IP-literal")]
    InvalidIpLiteral,
    #[error("invalid host: ParseAddr({}): unable to parse IP", go_quote(.0))]
    InvalidHost(Vec<u8>),
    #[error("invalid port {} after host", go_quote(.0))]
    InvalidPort(Vec<u8>),
    #[error("invalid URL escape {}", go_quote(.0))]
    Escape(Vec<u8>),
    #[error("invalid character {} in host name", go_quote(.0))]
    HostCharacter(Vec<u8>),
}

/// Go's `*url.Error` for a parse: the operation, the URL and the reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("parse {}: {reason}", go_quote(.url.as_bytes()))]
pub struct ParseError {
    url: String,
    reason: UrlError,
}

/// The parts of a URL, as Go's `url.URL` holds them (decoded parts as bytes: a `%ff` escape
/// decodes to a byte that is not UTF-8 on its own).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Url {
    scheme: String,
    opaque: String,
    /// Username, and password if one was given.
    user: Option<(Vec<u8>, Option<Vec<u8>>)>,
    host: Vec<u8>,
    path: Vec<u8>,
    /// The path as written, when that is not the default escaping of `path`.
    raw_path: String,
    /// Whether the URL ends in a `?` with nothing after it.
    force_query: bool,
    raw_query: String,
    /// Whether a scheme was followed by a single `/` (no authority at all).
    omit_host: bool,
    fragment: Vec<u8>,
    raw_fragment: String,
}

/// Go's `url.ParseRequestURI`: an absolute URI or an absolute path, no fragment split.
pub fn parse_request_uri(raw: &str) -> Result<Url, ParseError> {
    parse_inner(raw.as_bytes(), true).map_err(|reason| ParseError {
        url: raw.to_string(),
        reason,
    })
}

/// Go's `url.Parse`: any URI reference, the fragment split off after the first `#`.
pub fn parse(raw: &str) -> Result<Url, ParseError> {
    let (before, fragment) = match raw.split_once('#') {
        Some((b, f)) => (b, Some(f)),
        None => (raw, None),
    };
    let mut url = parse_inner(before.as_bytes(), false).map_err(|reason| ParseError {
        url: before.to_string(),
        reason,
    })?;
    if let Some(f) = fragment.filter(|f| !f.is_empty()) {
        url.fragment = unescape(f.as_bytes(), Mode::Fragment).map_err(|reason| ParseError {
            url: raw.to_string(),
            reason,
        })?;
        if escape(&url.fragment, Mode::Fragment) != f {
            url.raw_fragment = f.to_string();
        }
    }
    Ok(url)
}

/// Go's `parse`; `via_request` admits only absolute URIs and absolute paths.
fn parse_inner(raw: &[u8], via_request: bool) -> Result<Url, UrlError> {
    if raw.iter().any(|&b| b < b' ' || b == 0x7f) {
        return Err(UrlError::ControlCharacter);
    }
    if raw.is_empty() && via_request {
        return Err(UrlError::Empty);
    }
    let mut url = Url::default();
    if raw == b"*" {
        url.path = b"*".to_vec();
        return Ok(url);
    }
    let (scheme, mut rest) = split_scheme(raw)?;
    url.scheme = String::from_utf8_lossy(scheme).to_ascii_lowercase();
    let questions = rest.iter().filter(|&&b| b == b'?').count();
    if rest.ends_with(b"?") && questions == 1 {
        url.force_query = true;
        rest = &rest[..rest.len() - 1];
    } else if let Some(q) = rest.iter().position(|&b| b == b'?') {
        url.raw_query = String::from_utf8_lossy(&rest[q + 1..]).into_owned();
        rest = &rest[..q];
    }
    if !rest.starts_with(b"/") {
        if !url.scheme.is_empty() {
            // A rootless path after a scheme is opaque (`mailto:x@y`).
            url.opaque = String::from_utf8_lossy(rest).into_owned();
            return Ok(url);
        }
        if via_request {
            return Err(UrlError::NotForRequest);
        }
        // `cache_object:foo/bar` is a malformed scheme, not a relative path.
        let segment = rest.split(|&b| b == b'/').next().unwrap_or_default();
        if segment.contains(&b':') {
            return Err(UrlError::ColonInFirstSegment);
        }
    }
    let authority_allowed = !url.scheme.is_empty() || (!via_request && !rest.starts_with(b"///"));
    if authority_allowed && rest.starts_with(b"//") {
        let after = &rest[2..];
        let end = after.iter().position(|&b| b == b'/').unwrap_or(after.len());
        let (user, host) = parse_authority(&after[..end])?;
        url.user = user;
        url.host = host;
        rest = &after[end..];
    } else if !url.scheme.is_empty() && rest.starts_with(b"/") {
        url.omit_host = true;
    }
    url.path = unescape(rest, Mode::Path)?;
    if escape(&url.path, Mode::Path).as_bytes() != rest {
        url.raw_path = String::from_utf8_lossy(rest).into_owned();
    }
    Ok(url)
}

/// Splits `scheme:` off when the text starts with one (`[a-zA-Z][a-zA-Z0-9+-.]*:`).
fn split_scheme(raw: &[u8]) -> Result<(&[u8], &[u8]), UrlError> {
    for (i, &c) in raw.iter().enumerate() {
        match c {
            b'a'..=b'z' | b'A'..=b'Z' => {}
            b'0'..=b'9' | b'+' | b'-' | b'.' if i > 0 => {}
            b':' if i == 0 => return Err(UrlError::MissingScheme),
            b':' => return Ok((&raw[..i], &raw[i + 1..])),
            _ => return Ok((&[], raw)),
        }
    }
    Ok((&[], raw))
}

type User = Option<(Vec<u8>, Option<Vec<u8>>)>;

/// `[userinfo@]host[:port]`: the last `@` ends the userinfo.
fn parse_authority(authority: &[u8]) -> Result<(User, Vec<u8>), UrlError> {
    let at = authority.iter().rposition(|&b| b == b'@');
    let host = parse_host(at.map_or(authority, |i| &authority[i + 1..]))?;
    let Some(at) = at else {
        return Ok((None, host));
    };
    let userinfo = &authority[..at];
    let valid = |b: &u8| b.is_ascii_alphanumeric() || b"-._:~!$&'()*+,;=%@".contains(b);
    if !userinfo.iter().all(valid) {
        return Err(UrlError::InvalidUserinfo);
    }
    let user = match userinfo.iter().position(|&b| b == b':') {
        None => (unescape(userinfo, Mode::UserPassword)?, None),
        Some(colon) => (
            unescape(&userinfo[..colon], Mode::UserPassword)?,
            Some(unescape(&userinfo[colon + 1..], Mode::UserPassword)?),
        ),
    };
    Ok((Some(user), host))
}

/// `host[:port]`, decoded; a bracketed host must be an IPv6 address, with an optional zone
/// introduced by `%25`.
fn parse_host(host: &[u8]) -> Result<Vec<u8>, UrlError> {
    match host.iter().rposition(|&b| b == b'[') {
        Some(i) if i > 0 => Err(UrlError::InvalidIpLiteral),
        Some(_) => {
            let close = host
                .iter()
                .rposition(|&b| b == b']')
                .ok_or(UrlError::MissingBracket)?;
            let colon_port = &host[close + 1..];
            if !valid_optional_port(colon_port) {
                return Err(UrlError::InvalidPort(colon_port.to_vec()));
            }
            let colon_port = unescape(colon_port, Mode::Host)?;
            let inside = &host[1..close];
            let mut literal = match find(inside, b"%25") {
                Some(z) => {
                    let mut address = unescape(&inside[..z], Mode::Host)?;
                    address.extend(unescape(&inside[z..], Mode::Zone)?);
                    address
                }
                None => unescape(inside, Mode::Host)?,
            };
            check_ip_literal(&literal)?;
            literal.insert(0, b'[');
            literal.push(b']');
            literal.extend(colon_port);
            Ok(literal)
        }
        None => {
            if let Some(colon) = host.iter().rposition(|&b| b == b':') {
                if !valid_optional_port(&host[colon..]) {
                    return Err(UrlError::InvalidPort(host[colon..].to_vec()));
                }
            }
            unescape(host, Mode::Host)
        }
    }
}

/// What may sit between brackets: an IPv6 address (an IPv4-mapped one too), with a zone.
fn check_ip_literal(literal: &[u8]) -> Result<(), UrlError> {
    let text = String::from_utf8_lossy(literal);
    let (address, zone) = match text.split_once('%') {
        Some((a, z)) => (a, Some(z)),
        None => (&*text, None),
    };
    if zone.is_none() && address.parse::<std::net::Ipv4Addr>().is_ok() {
        return Err(UrlError::InvalidIpLiteral);
    }
    if address.parse::<std::net::Ipv6Addr>().is_err() || zone == Some("") {
        return Err(UrlError::InvalidHost(literal.to_vec()));
    }
    Ok(())
}

/// Empty, or `:` and digits.
fn valid_optional_port(port: &[u8]) -> bool {
    match port.split_first() {
        None => true,
        Some((b':', digits)) => digits.iter().all(u8::is_ascii_digit),
        Some(_) => false,
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// Host and port of `host[:port]`, the brackets of an IPv6 host removed; a port that is not
/// all digits stays part of the host (Go's `Hostname` and `Port`).
fn split_host_port(host_port: &[u8]) -> (&[u8], &[u8]) {
    let (mut host, mut port) = (host_port, &[][..]);
    if let Some(colon) = host_port.iter().rposition(|&b| b == b':') {
        if valid_optional_port(&host_port[colon..]) {
            (host, port) = (&host_port[..colon], &host_port[colon + 1..]);
        }
    }
    if host.len() >= 2 && host.starts_with(b"[") && host.ends_with(b"]") {
        host = &host[1..host.len() - 1];
    }
    (host, port)
}

fn lossy(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `key=value` pairs separated by `&`, unescaped as form values (`+` is a space). Pairs Go
/// drops are dropped: those with a `;`, and those with a bad escape.
pub fn parse_query(raw: &str) -> Vec<(String, String)> {
    raw.split('&')
        .filter(|pair| !pair.is_empty() && !pair.contains(';'))
        .filter_map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            let k = unescape(k.as_bytes(), Mode::QueryComponent).ok()?;
            let v = unescape(v.as_bytes(), Mode::QueryComponent).ok()?;
            Some((lossy(&k), lossy(&v)))
        })
        .collect()
}

/// Which part of a URL a text is, for escaping and unescaping.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Path,
    Host,
    Zone,
    UserPassword,
    QueryComponent,
    Fragment,
}

/// Whether byte `c` must be percent-escaped in a part of kind `mode` (Go's `shouldEscape`,
/// RFC 3986 with Go's exceptions).
fn should_escape(c: u8, mode: Mode) -> bool {
    if c.is_ascii_alphanumeric() {
        return false;
    }
    if matches!(mode, Mode::Host | Mode::Zone) && b"!$&'()*+,;=:[]<>\"".contains(&c) {
        // Sub-delims, `:` before a port, brackets of IPv6, and the few characters a host
        // can carry only as themselves.
        return false;
    }
    match c {
        b'-' | b'_' | b'.' | b'~' => false,
        b'$' | b'&' | b'+' | b',' | b'/' | b':' | b';' | b'=' | b'?' | b'@' => match mode {
            Mode::Path => c == b'?',
            Mode::UserPassword => matches!(c, b'@' | b'/' | b'?' | b':'),
            Mode::QueryComponent => true,
            Mode::Fragment => false,
            Mode::Host | Mode::Zone => true,
        },
        b'!' | b'(' | b')' | b'*' if mode == Mode::Fragment => false,
        _ => true,
    }
}

/// Percent-decodes `s` as a part of kind `mode`, refusing what Go refuses: a `%` without two
/// hex digits; in a host, escapes of ASCII bytes (except `%25`) and bytes a host cannot have.
fn unescape(s: &[u8], mode: Mode) -> Result<Vec<u8>, UrlError> {
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        match s[i] {
            b'%' => {
                let hex = |j: usize| s.get(j).and_then(|c| (*c as char).to_digit(16));
                let (Some(hi), Some(lo)) = (hex(i + 1), hex(i + 2)) else {
                    return Err(UrlError::Escape(s[i..s.len().min(i + 3)].to_vec()));
                };
                let escaped = &s[i..i + 3];
                let byte = (hi * 16 + lo) as u8;
                let ascii_in_host = mode == Mode::Host && hi < 8 && escaped != b"%25";
                let bad_in_zone = mode == Mode::Zone
                    && escaped != b"%25"
                    && byte != b' '
                    && should_escape(byte, Mode::Host);
                if ascii_in_host || bad_in_zone {
                    return Err(UrlError::Escape(escaped.to_vec()));
                }
                out.push(byte);
                i += 3;
            }
            b'+' => {
                out.push(if mode == Mode::QueryComponent {
                    b' '
                } else {
                    b'+'
                });
                i += 1;
            }
            c => {
                if matches!(mode, Mode::Host | Mode::Zone) && c < 0x80 && should_escape(c, mode) {
                    return Err(UrlError::HostCharacter(vec![c]));
                }
                out.push(c);
                i += 1;
            }
        }
    }
    Ok(out)
}

/// Percent-escapes what a part of kind `mode` cannot carry as itself.
fn escape(s: &[u8], mode: Mode) -> String {
    let mut out = String::with_capacity(s.len());
    for &c in s {
        if c == b' ' && mode == Mode::QueryComponent {
            out.push('+');
        } else if should_escape(c, mode) {
            out.push_str(&format!("%{c:02X}"));
        } else {
            out.push(c as char);
        }
    }
    out
}

/// Whether `s` is already a valid escaping for a part of kind `mode` (Go's `validEncoded`).
fn valid_encoded(s: &str, mode: Mode) -> bool {
    s.bytes()
        .all(|c| b"!$&'()*+,;=:@[]%".contains(&c) || !should_escape(c, mode))
}

impl Url {
    /// The path as sent on the wire: as written when that is a valid escaping of it, else
    /// Go's default escaping.
    pub fn escaped_path(&self) -> String {
        if !self.raw_path.is_empty()
            && valid_encoded(&self.raw_path, Mode::Path)
            && unescape(self.raw_path.as_bytes(), Mode::Path).is_ok_and(|p| p == self.path)
        {
            return self.raw_path.clone();
        }
        if self.path == b"*" {
            return "*".to_string();
        }
        escape(&self.path, Mode::Path)
    }

    fn escaped_fragment(&self) -> String {
        if !self.raw_fragment.is_empty()
            && valid_encoded(&self.raw_fragment, Mode::Fragment)
            && unescape(self.raw_fragment.as_bytes(), Mode::Fragment)
                .is_ok_and(|f| f == self.fragment)
        {
            return self.raw_fragment.clone();
        }
        escape(&self.fragment, Mode::Fragment)
    }
}

/// Go's `URL.String()`.
impl std::fmt::Display for Url {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut out = String::new();
        if !self.scheme.is_empty() {
            out.push_str(&self.scheme);
            out.push(':');
        }
        if !self.opaque.is_empty() {
            out.push_str(&self.opaque);
        } else {
            let has_authority = !self.host.is_empty() || self.user.is_some();
            if !self.scheme.is_empty() || has_authority {
                if has_authority || (!self.path.is_empty() && !self.omit_host) {
                    out.push_str("//");
                }
                if let Some((name, password)) = &self.user {
                    out.push_str(&escape(name, Mode::UserPassword));
                    if let Some(p) = password {
                        out.push(':');
                        out.push_str(&escape(p, Mode::UserPassword));
                    }
                    out.push('@');
                }
                out.push_str(&escape(&self.host, Mode::Host));
            }
            let path = self.escaped_path();
            if !path.is_empty() && !path.starts_with('/') && !self.host.is_empty() {
                out.push('/');
            }
            if out.is_empty() && path.split('/').next().is_some_and(|s| s.contains(':')) {
                // A first segment with a colon would read back as a scheme.
                out.push_str("./");
            }
            out.push_str(&path);
        }
        if self.force_query || !self.raw_query.is_empty() {
            out.push('?');
            out.push_str(&self.raw_query);
        }
        if !self.fragment.is_empty() {
            out.push('#');
            out.push_str(&self.escaped_fragment());
        }
        f.write_str(&out)
    }
}

/// A string as Go's `%q` prints it: quoted, with `"` and `\` escaped and bytes that are not
/// printable UTF-8 written as escapes.
pub fn go_quote(bytes: &[u8]) -> String {
    let mut out = String::from("\"");
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                '\x07' => out.push_str("\\a"),
                '\x08' => out.push_str("\\b"),
                '\x0c' => out.push_str("\\f"),
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\t' => out.push_str("\\t"),
                '\x0b' => out.push_str("\\v"),
                c if (c as u32) < 0x20 || c == '\x7f' => {
                    out.push_str(&format!("\\x{:02x}", c as u32))
                }
                c if c.is_control() => out.push_str(&format!("\\u{:04x}", c as u32)),
                c => out.push(c),
            }
        }
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(s: &str) -> Url {
        let text = match to_url(s) {
            Ok(v) => typed_text(&v, KEY).map(str::to_string),
            Err(e) => panic!("{s}: {e}"),
        };
        parse(&text.unwrap_or_default()).expect("the canonical text parses")
    }

    #[test]
    fn requests_uris_are_absolute_uris_or_absolute_paths() {
        for ok in [
            "https://user:pass@example.com:80/path?query=val#fragment",
            "/absolute-path",
            "http://[::1]:8080/x",
            "http://[fe80::1%25en0]/",
            "mailto:someone@example.com",
            "https://example.com/path with spaces/",
            "*",
        ] {
            assert!(parse_request_uri(ok).is_ok(), "{ok}");
        }
        for (bad, why) in [
            (
                "https://a:b:c/",
                "parse \"https://a:b:c/\": invalid port \":c\" after host",
            ),
            (
                "../relative-path",
                "parse \"../relative-path\": invalid URI for request",
            ),
            ("", "parse \"\": empty url"),
            ("://x", "parse \"://x\": missing protocol scheme"),
            (
                "http://x/\n",
                "parse \"http://x/\\n\": net/url: invalid control character in URL",
            ),
            (
                "http://ex ample.com/",
                "parse \"http://ex ample.com/\": invalid character \" \" in host name",
            ),
            (
                "http://x/%zz",
                "parse \"http://x/%zz\": invalid URL escape \"%zz\"",
            ),
            (
                "http://[::1/",
                "parse \"http://[::1/\": missing ']' in host",
            ),
            (
                "http://[1.2.3.4]/",
                "parse \"http://[1.2.3.4]/\": invalid IP-literal",
            ),
            (
                "http://a[::1]/",
                "parse \"http://a[::1]/\": invalid IP-literal",
            ),
            (
                "http://ü@x/",
                "parse \"http://ü@x/\": net/url: invalid userinfo",
            ),
        ] {
            let err = parse_request_uri(bad).map(|u| u.to_string());
            assert_eq!(
                err.map_err(|e| e.to_string()),
                Err(why.to_string()),
                "{bad}"
            );
        }
    }

    #[test]
    fn parts_are_go_urls_parts() {
        let u = parts("https://user:pass@example.com:80/path?query=val#fragment");
        assert_eq!(u.scheme, "https");
        assert_eq!(u.host, b"example.com:80");
        assert_eq!(u.raw_query, "query=val");
        assert_eq!(u.fragment, b"fragment");
        assert_eq!(parts("/path").scheme, "");
        let v6 = parts("https://[::1]:80/");
        assert_eq!(v6.host, b"[::1]:80");
        assert_eq!(split_host_port(&v6.host), (&b"::1"[..], &b"80"[..]));
        assert_eq!(
            split_host_port(b"example.com:x"),
            (&b"example.com:x"[..], &b""[..])
        );
        assert_eq!(
            parts("https://example.com/path with spaces/").escaped_path(),
            "/path%20with%20spaces/"
        );
        assert_eq!(parts("https://example.com/a%2fb").escaped_path(), "/a%2fb");
        assert_eq!(parts("https://example.com").escaped_path(), "");
        assert_eq!(
            parse_query("k1=a&k2=b&k2=c&bad=%zz&semi=1;2&&plus=a+b"),
            [
                ("k1".to_string(), "a".to_string()),
                ("k2".to_string(), "b".to_string()),
                ("k2".to_string(), "c".to_string()),
                ("plus".to_string(), "a b".to_string()),
            ]
        );
    }

    #[test]
    fn canonical_text_is_go_string() {
        for (written, canonical) in [
            (
                "HTTPS://Example.com/a b?x=1#f g",
                "https://Example.com/a%20b?x=1#f%20g",
            ),
            ("https://example.com/path?", "https://example.com/path?"),
            ("https://u%40:p@x/", "https://u%40:p@x/"),
            ("file:///etc/hosts", "file:///etc/hosts"),
            ("mailto:a@b", "mailto:a@b"),
            ("/x/../y", "/x/../y"),
        ] {
            let v = to_url(written).map_err(|e| e.to_string());
            let text = v.as_ref().map(|v| typed_text(v, KEY).map(str::to_string));
            assert_eq!(text, Ok(Some(canonical.to_string())), "{written}");
        }
    }

    #[test]
    fn go_quote_escapes_like_go() {
        assert_eq!(go_quote(b"a\"b\\c\n\x01"), "\"a\\\"b\\\\c\\n\\x01\"");
        assert_eq!(go_quote("é".as_bytes()), "\"é\"");
        assert_eq!(go_quote(b"%z\xc3"), "\"%z\\xc3\"");
    }
}
