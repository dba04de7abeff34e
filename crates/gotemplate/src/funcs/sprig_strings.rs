//! sprig's string functions (with sprig's argument order: the subject string comes last,
//! so it can be piped in).

use sha1::Digest;

use super::{def, i, s, strval, FnResult, Table, P};
use crate::fmt;
use crate::value::{Elem, V};
use base64::Engine;

pub fn register(t: &mut Table) {
    register_trims(t);
    register_tests(t);
    register_quoting(t);
    register_layout(t);
    register_encodings(t);
    register_splits(t);
}

/// Case, cutting and trimming.
fn register_trims(t: &mut Table) {
    def(t, "trim", &[P::Str], None, |a| {
        Ok(V::str(s(&a[0]).trim_matches(go_space)))
    });
    def(t, "upper", &[P::Str], None, |a| {
        Ok(V::str(s(&a[0]).to_uppercase()))
    });
    def(t, "lower", &[P::Str], None, |a| {
        Ok(V::str(s(&a[0]).to_lowercase()))
    });
    def(t, "title", &[P::Str], None, |a| Ok(V::str(title(s(&a[0])))));
    def(t, "untitle", &[P::Str], None, |a| {
        Ok(V::str(untitle(s(&a[0]))))
    });
    def(t, "substr", &[P::Int, P::Int, P::Str], None, substr);
    def(t, "repeat", &[P::Int, P::Str], None, |a| {
        let n =
            usize::try_from(i(&a[0])).map_err(|_| "strings: negative Repeat count".to_string())?;
        if n.saturating_mul(s(&a[1]).len()) > 1 << 28 {
            return Err("strings: Repeat output length overflow".into());
        }
        Ok(V::str(s(&a[1]).repeat(n)))
    });
    for name in ["trimall", "trimAll"] {
        def(t, name, &[P::Str, P::Str], None, |a| {
            let cut = s(&a[0]);
            Ok(V::str(s(&a[1]).trim_matches(|c| cut.contains(c))))
        });
    }
    def(t, "trimSuffix", &[P::Str, P::Str], None, |a| {
        Ok(V::str(s(&a[1]).strip_suffix(s(&a[0])).unwrap_or(s(&a[1]))))
    });
    def(t, "trimPrefix", &[P::Str, P::Str], None, |a| {
        Ok(V::str(s(&a[1]).strip_prefix(s(&a[0])).unwrap_or(s(&a[1]))))
    });
    def(t, "nospace", &[P::Str], None, |a| {
        Ok(V::str(
            s(&a[0])
                .chars()
                .filter(|c| !go_space(*c))
                .collect::<String>(),
        ))
    });
}

/// Shortening, and tests of a string's content.
fn register_tests(t: &mut Table) {
    def(t, "trunc", &[P::Int, P::Str], None, trunc);
    def(t, "abbrev", &[P::Int, P::Str], None, |a| {
        let (w, st) = (i(&a[0]), s(&a[1]));
        if w < 4 || st.len() as i64 <= w {
            return Ok(V::str(st));
        }
        Ok(V::str(format!(
            "{}...",
            byte_slice(st, 0, (w - 3) as usize)
        )))
    });
    def(t, "contains", &[P::Str, P::Str], None, |a| {
        Ok(V::Bool(s(&a[1]).contains(s(&a[0]))))
    });
    def(t, "hasPrefix", &[P::Str, P::Str], None, |a| {
        Ok(V::Bool(s(&a[1]).starts_with(s(&a[0]))))
    });
    def(t, "hasSuffix", &[P::Str, P::Str], None, |a| {
        Ok(V::Bool(s(&a[1]).ends_with(s(&a[0]))))
    });
}

/// Quoting and concatenation of any values.
fn register_quoting(t: &mut Table) {
    def(t, "quote", &[], Some(P::Any), |a| {
        let q: Vec<String> = a
            .iter()
            .filter(|v| !v.is_nil())
            .map(|v| fmt::quote(&strval(v)))
            .collect();
        Ok(V::str(q.join(" ")))
    });
    def(t, "squote", &[], Some(P::Any), |a| {
        let q: Vec<String> = a
            .iter()
            .filter(|v| !v.is_nil())
            .map(|v| format!("'{}'", fmt::to_string(v)))
            .collect();
        Ok(V::str(q.join(" ")))
    });
    def(t, "cat", &[], Some(P::Any), |a| {
        let q: Vec<String> = a
            .iter()
            .filter(|v| !v.is_nil())
            .map(fmt::to_string)
            .collect();
        Ok(V::str(q.join(" ")))
    });
}

/// Indentation, replacement and plurals.
fn register_layout(t: &mut Table) {
    def(t, "indent", &[P::Int, P::Str], None, |a| {
        Ok(V::str(indent(i(&a[0]), s(&a[1]))))
    });
    def(t, "nindent", &[P::Int, P::Str], None, |a| {
        Ok(V::str(format!("\n{}", indent(i(&a[0]), s(&a[1])))))
    });
    def(t, "replace", &[P::Str, P::Str, P::Str], None, |a| {
        Ok(V::str(go_replace(s(&a[2]), s(&a[0]), s(&a[1]))))
    });
    def(t, "plural", &[P::Str, P::Str, P::Int], None, |a| {
        Ok(if i(&a[2]) == 1 {
            a[0].clone()
        } else {
            a[1].clone()
        })
    });
}

/// Hashes, encodings and conversions to string.
fn register_encodings(t: &mut Table) {
    def(t, "sha1sum", &[P::Str], None, |a| {
        Ok(V::str(hex(&sha1::Sha1::digest(s(&a[0]).as_bytes()))))
    });
    def(t, "sha256sum", &[P::Str], None, |a| {
        Ok(V::str(hex(&sha2::Sha256::digest(s(&a[0]).as_bytes()))))
    });
    def(t, "adler32sum", &[P::Str], None, |a| {
        Ok(V::str(adler32(s(&a[0]).as_bytes()).to_string()))
    });
    def(t, "toString", &[P::Any], None, |a| {
        Ok(V::str(strval(&a[0])))
    });
    def(t, "b64enc", &[P::Str], None, |a| {
        Ok(V::str(
            base64::engine::general_purpose::STANDARD.encode(s(&a[0])),
        ))
    });
    def(t, "b64dec", &[P::Str], None, |a| {
        Ok(V::str(
            match base64::engine::general_purpose::STANDARD.decode(s(&a[0])) {
                Ok(b) => String::from_utf8_lossy(&b).into_owned(),
                Err(e) => b64_error(&e),
            },
        ))
    });
    def(t, "b32enc", &[P::Str], None, |a| {
        Ok(V::str(data_encoding::BASE32.encode(s(&a[0]).as_bytes())))
    });
    def(t, "b32dec", &[P::Str], None, |a| {
        Ok(V::str(
            match data_encoding::BASE32.decode(s(&a[0]).as_bytes()) {
                Ok(b) => String::from_utf8_lossy(&b).into_owned(),
                Err(e) => format!("illegal base32 data at input byte {}", e.position),
            },
        ))
    });
}

/// Splitting and joining.
fn register_splits(t: &mut Table) {
    def(t, "split", &[P::Str, P::Str], None, |a| {
        Ok(indexed_map(go_split(s(&a[1]), s(&a[0]), -1)))
    });
    def(t, "splitn", &[P::Str, P::Int, P::Str], None, |a| {
        Ok(indexed_map(go_split(s(&a[2]), s(&a[0]), i(&a[1]))))
    });
    def(t, "splitList", &[P::Str, P::Str], None, |a| {
        Ok(V::str_list(go_split(s(&a[1]), s(&a[0]), -1)))
    });
    def(t, "toStrings", &[P::Any], None, |a| {
        Ok(V::str_list(strslice(&a[0])))
    });
    def(t, "join", &[P::Str, P::Any], None, |a| {
        Ok(V::str(strslice(&a[1]).join(s(&a[0]))))
    });
    def(t, "sortAlpha", &[P::Any], None, |a| {
        let mut l = match &a[0] {
            V::List(..) => strslice(&a[0]),
            v => vec![strval(v)],
        };
        l.sort();
        Ok(V::str_list(l))
    });
}

/// Go's `unicode.IsSpace`.
pub fn go_space(c: char) -> bool {
    matches!(
        c,
        '\t' | '\n' | '\u{b}' | '\u{c}' | '\r' | ' ' | '\u{85}' | '\u{a0}'
    ) || (c as u32 > 0xff && c.is_whitespace())
}

/// Slices a string by bytes as Go does, keeping valid UTF-8 (a cut rune becomes U+FFFD).
fn byte_slice(st: &str, a: usize, b: usize) -> String {
    String::from_utf8_lossy(&st.as_bytes()[a..b]).into_owned()
}

fn substr(a: Vec<V>) -> FnResult {
    let (start, end, st) = (i(&a[0]), i(&a[1]), s(&a[2]));
    let len = st.len() as i64;
    let oob = |x: i64, y: i64| format!("runtime error: slice bounds out of range [{x}:{y}]");
    if start < 0 {
        if end < 0 || end > len {
            return Err(oob(0, end));
        }
        return Ok(V::str(byte_slice(st, 0, end as usize)));
    }
    if end < 0 || end > len {
        if start > len {
            return Err(oob(start, len));
        }
        return Ok(V::str(byte_slice(st, start as usize, len as usize)));
    }
    if start > end {
        return Err(oob(start, end));
    }
    Ok(V::str(byte_slice(st, start as usize, end as usize)))
}

fn trunc(a: Vec<V>) -> FnResult {
    let (c, st) = (i(&a[0]), s(&a[1]));
    let len = st.len() as i64;
    if c < 0 && len + c > 0 {
        return Ok(V::str(byte_slice(st, (len + c) as usize, len as usize)));
    }
    if c >= 0 && len > c {
        return Ok(V::str(byte_slice(st, 0, c as usize)));
    }
    Ok(V::str(st))
}

/// Go's `strings.Title`: upper-cases the first letter of each word.
fn title(st: &str) -> String {
    let mut prev = ' ';
    st.chars()
        .map(|c| {
            let sep = if prev.is_ascii() {
                !(prev.is_ascii_alphanumeric() || prev == '_')
            } else if prev.is_alphanumeric() {
                false
            } else {
                go_space(prev)
            };
            prev = c;
            if sep {
                c.to_uppercase().next().unwrap_or(c)
            } else {
                c
            }
        })
        .collect()
}

/// goutils' `Uncapitalize`: lower-cases the first letter of each space-separated word.
fn untitle(st: &str) -> String {
    let mut next = true;
    st.chars()
        .map(|c| {
            if go_space(c) {
                next = true;
                c
            } else if next {
                next = false;
                c.to_lowercase().next().unwrap_or(c)
            } else {
                c
            }
        })
        .collect()
}

fn indent(n: i64, st: &str) -> String {
    let pad = " ".repeat(n.clamp(0, 1 << 20) as usize);
    format!("{pad}{}", st.replace('\n', &format!("\n{pad}")))
}

/// Go's `strings.Replace(s, old, new, -1)`: an empty `old` inserts between runes.
fn go_replace(st: &str, old: &str, new: &str) -> String {
    if old.is_empty() {
        let mut out = String::from(new);
        for c in st.chars() {
            out.push(c);
            out.push_str(new);
        }
        return out;
    }
    st.replace(old, new)
}

/// Go's `strings.SplitN` (n < 0: all); an empty separator splits into runes.
pub fn go_split(st: &str, sep: &str, n: i64) -> Vec<String> {
    if n == 0 {
        return Vec::new();
    }
    if sep.is_empty() {
        let chars: Vec<String> = st.chars().map(String::from).collect();
        if n > 0 && chars.len() as i64 > n {
            let k = (n - 1) as usize;
            let mut out: Vec<String> = chars[..k].to_vec();
            out.push(chars[k..].concat());
            return out;
        }
        return chars;
    }
    if n < 0 {
        return st.split(sep).map(String::from).collect();
    }
    st.splitn(n as usize, sep).map(String::from).collect()
}

/// sprig's `split` result: `map[string]string` keyed `_0`, `_1`, ...
fn indexed_map(parts: Vec<String>) -> V {
    let m = parts
        .into_iter()
        .enumerate()
        .map(|(n, p)| (format!("_{n}"), V::str(p)))
        .collect();
    match V::map(m) {
        V::Map(m, _) => V::Map(m, Elem::Str),
        v => v,
    }
}

/// sprig's `strslice`: a list's non-nil elements as strings; a non-list as one string.
pub fn strslice(v: &V) -> Vec<String> {
    match v {
        V::List(l, _) => l.iter().filter(|x| !x.is_nil()).map(strval).collect(),
        V::Invalid | V::Nil => Vec::new(),
        v => vec![strval(v)],
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn adler32(b: &[u8]) -> u32 {
    let (mut a, mut s2) = (1u32, 0u32);
    for x in b {
        a = (a + u32::from(*x)) % 65521;
        s2 = (s2 + a) % 65521;
    }
    (s2 << 16) | a
}

fn b64_error(e: &base64::DecodeError) -> String {
    use base64::DecodeError as D;
    let at = match e {
        D::InvalidByte(o, _) | D::InvalidLastSymbol(o, _) => *o,
        D::InvalidLength(n) => *n,
        D::InvalidPadding => 0,
    };
    format!("illegal base64 data at input byte {at}")
}
