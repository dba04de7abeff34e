//! Versions as Masterminds/semver v3 reads them (sprig's `semver` makes one): loose parsing
//! (a `v` prefix, a missing minor or patch), the canonical `String` beside the `Original`,
//! and precedence with pre-release identifiers compared part by part. A leaf module: the
//! template value holds a version, and sprig's constraint functions compare them.

use std::cmp::Ordering;
use std::sync::OnceLock;

use regex::Regex;

fn version_regex() -> Option<&'static Regex> {
    static R: OnceLock<Option<Regex>> = OnceLock::new();
    R.get_or_init(|| {
        Regex::new(r"^v?([0-9]+)(\.[0-9]+)?(\.[0-9]+)?(-([0-9A-Za-z\-]+(\.[0-9A-Za-z\-]+)*))?(\+([0-9A-Za-z\-]+(\.[0-9A-Za-z\-]+)*))?$").ok()
    })
    .as_ref()
}

/// A parsed version, printed canonically by `String` and kept verbatim by `Original`.
#[derive(Debug, Clone, PartialEq)]
pub struct Version {
    pub major: u64,
    pub minor: u64,
    pub patch: u64,
    pub pre: String,
    pub metadata: String,
    pub original: String,
}

impl std::fmt::Display for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)?;
        if !self.pre.is_empty() {
            write!(f, "-{}", self.pre)?;
        }
        if !self.metadata.is_empty() {
            write!(f, "+{}", self.metadata)?;
        }
        Ok(())
    }
}

fn ident_ok(p: &str) -> bool {
    p.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
}

impl Version {
    pub fn parse(v: &str) -> Result<Version, String> {
        let re = version_regex().ok_or("semver regexes")?;
        let m = re.captures(v).ok_or("Invalid Semantic Version")?;
        let seg = |i: usize| -> Result<u64, String> {
            match m.get(i) {
                None => Ok(0),
                Some(g) => g
                    .as_str()
                    .trim_start_matches('.')
                    .parse::<u64>()
                    .map_err(|e| format!("Error parsing version segment: {e}")),
            }
        };
        let pre = m.get(5).map_or("", |g| g.as_str()).to_string();
        for p in pre.split('.').filter(|_| !pre.is_empty()) {
            if p.bytes().all(|b| b.is_ascii_digit()) {
                if p.len() > 1 && p.starts_with('0') {
                    return Err("Version segment starts with 0".into());
                }
            } else if !ident_ok(p) {
                return Err("Invalid Prerelease string".into());
            }
        }
        Ok(Version {
            major: seg(1)?,
            minor: seg(2)?,
            patch: seg(3)?,
            pre,
            metadata: m.get(8).map_or("", |g| g.as_str()).to_string(),
            original: v.to_string(),
        })
    }

    pub fn compare(&self, o: &Version) -> Ordering {
        let c = (self.major, self.minor, self.patch).cmp(&(o.major, o.minor, o.patch));
        if c != Ordering::Equal {
            return c;
        }
        match (self.pre.is_empty(), o.pre.is_empty()) {
            (true, true) => Ordering::Equal,
            (true, false) => Ordering::Greater,
            (false, true) => Ordering::Less,
            _ => compare_prerelease(&self.pre, &o.pre),
        }
    }
}

pub fn compare_prerelease(a: &str, b: &str) -> Ordering {
    let sa: Vec<&str> = a.split('.').collect();
    let sb: Vec<&str> = b.split('.').collect();
    for i in 0..sa.len().max(sb.len()) {
        let x = sa.get(i).copied().unwrap_or("");
        let y = sb.get(i).copied().unwrap_or("");
        let d = compare_pre_part(x, y);
        if d != Ordering::Equal {
            return d;
        }
    }
    Ordering::Equal
}

fn compare_pre_part(s: &str, o: &str) -> Ordering {
    if s == o {
        return Ordering::Equal;
    }
    if s.is_empty() {
        return Ordering::Less;
    }
    if o.is_empty() {
        return Ordering::Greater;
    }
    match (s.parse::<u64>(), o.parse::<u64>()) {
        (Err(_), Err(_)) => {
            if s > o {
                Ordering::Greater
            } else {
                Ordering::Less
            }
        }
        (Ok(_), Err(_)) => Ordering::Less,
        (Err(_), Ok(_)) => Ordering::Greater,
        (Ok(x), Ok(y)) => {
            if x > y {
                Ordering::Greater
            } else {
                Ordering::Less
            }
        }
    }
}
