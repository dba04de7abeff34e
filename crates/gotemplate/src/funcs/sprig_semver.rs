//! sprig's `semver` and `semverCompare`, with Masterminds/semver v3 rules: loose version
//! parsing (`v` prefix, missing minor/patch), constraints with comparison operators,
//! `,`/space (and) and `||` (or), `~`, `^`, x-ranges and hyphen ranges, and the rule that
//! a pre-release version only satisfies constraints that carry a pre-release themselves.

use std::cmp::Ordering;
use std::sync::OnceLock;

use regex::Regex;

use super::{def, s, Table, P};
use crate::semver::{compare_prerelease, Version};
use crate::value::V;

pub fn register(t: &mut Table) {
    def(t, "semver", &[P::Str], None, |a| {
        Version::parse(s(&a[0])).map(|v| V::Semver(std::rc::Rc::new(v)))
    });
    def(t, "semverCompare", &[P::Str, P::Str], None, |a| {
        let c = Constraints::parse(s(&a[0]))?;
        let v = Version::parse(s(&a[1]))?;
        Ok(V::Bool(c.check(&v)))
    });
}

const CV: &str = r"v?([0-9|x|X|\*]+)(\.[0-9|x|X|\*]+)?(\.[0-9|x|X|\*]+)?(-([0-9A-Za-z\-]+(\.[0-9A-Za-z\-]+)*))?(\+([0-9A-Za-z\-]+(\.[0-9A-Za-z\-]+)*))?";
const OPS: &str = r"=||!=|>|<|>=|=>|<=|=<|~|~>|\^";

struct Regexes {
    constraint: Regex,
    range: Regex,
    find: Regex,
    valid: Regex,
}

fn regexes() -> Option<&'static Regexes> {
    static R: OnceLock<Option<Regexes>> = OnceLock::new();
    R.get_or_init(|| {
        Some(Regexes {
            constraint: Regex::new(&format!(r"^\s*({OPS})\s*({CV})\s*$")).ok()?,
            range: Regex::new(&format!(r"\s*({CV})\s+-\s+({CV})\s*")).ok()?,
            find: Regex::new(&format!(r"({OPS})\s*({CV})")).ok()?,
            valid: Regex::new(&format!(
                r"^(\s*({OPS})\s*({CV})\s*)((?:\s+|,\s*)({OPS})\s*({CV})\s*)*$"
            ))
            .ok()?,
        })
    })
    .as_ref()
}

struct Constraint {
    op: String,
    con: Version,
    minor_dirty: bool,
    patch_dirty: bool,
    dirty: bool,
}

struct Constraints(Vec<Vec<Constraint>>);

fn is_x(s: &str) -> bool {
    matches!(s, "x" | "X" | "*")
}

impl Constraints {
    fn parse(c: &str) -> Result<Constraints, String> {
        let re = regexes().ok_or("semver regexes")?;
        // Hyphen ranges become `>= a, <= b` first.
        let mut c = c.to_string();
        let ranges: Vec<(String, String, String)> = re
            .range
            .captures_iter(&c)
            .map(|m| {
                (
                    m[0].to_string(),
                    m[1].to_string(),
                    m.get(11).map_or("", |g| g.as_str()).to_string(),
                )
            })
            .collect();
        for (whole, a, b) in ranges {
            c = c.replacen(&whole, &format!(">= {a}, <= {b}"), 1);
        }
        let mut ors = Vec::new();
        for part in c.split("||") {
            if !re.valid.is_match(part) {
                return Err(format!("improper constraint: {part}"));
            }
            let mut found: Vec<&str> = re.find.find_iter(part).map(|m| m.as_str()).collect();
            if found.is_empty() {
                found.push(part);
            }
            let ands = found
                .into_iter()
                .map(parse_constraint)
                .collect::<Result<Vec<_>, _>>()?;
            ors.push(ands);
        }
        Ok(Constraints(ors))
    }

    fn check(&self, v: &Version) -> bool {
        self.0.iter().any(|ands| ands.iter().all(|c| c.check(v)))
    }
}

fn parse_constraint(c: &str) -> Result<Constraint, String> {
    let re = regexes().ok_or("semver regexes")?;
    if c.is_empty() {
        return Ok(Constraint {
            op: String::new(),
            con: Version::parse("0.0.0")?,
            minor_dirty: false,
            patch_dirty: false,
            dirty: true,
        });
    }
    let m = re
        .constraint
        .captures(c)
        .ok_or_else(|| format!("improper constraint: {c}"))?;
    let g = |i: usize| m.get(i).map_or("", |x| x.as_str());
    let (mut minor_dirty, mut patch_dirty, mut dirty) = (false, false, false);
    let ver = if is_x(g(3)) || g(3).is_empty() {
        dirty = true;
        format!("0.0.0{}", g(6))
    } else if is_x(g(4).trim_start_matches('.')) || g(4).is_empty() {
        minor_dirty = true;
        dirty = true;
        format!("{}.0.0{}", g(3), g(6))
    } else if is_x(g(5).trim_start_matches('.')) || g(5).is_empty() {
        dirty = true;
        patch_dirty = true;
        format!("{}{}.0{}", g(3), g(4), g(6))
    } else {
        g(2).to_string()
    };
    let con = Version::parse(&ver).map_err(|_| "constraint Parser Error".to_string())?;
    Ok(Constraint {
        op: g(1).to_string(),
        con,
        minor_dirty,
        patch_dirty,
        dirty,
    })
}

impl Constraint {
    fn check(&self, v: &Version) -> bool {
        let c = &self.con;
        // A pre-release only matches constraints that name a pre-release.
        if !v.pre.is_empty() && c.pre.is_empty() && self.op != "!=" {
            return false;
        }
        match self.op.as_str() {
            "" | "=" => self.tilde_or_equal(v),
            "!=" => self.not_equal(v),
            ">" => self.greater(v),
            "<" => v.compare(c) == Ordering::Less,
            ">=" | "=>" => v.compare(c) != Ordering::Less,
            "<=" | "=<" => self.less_equal(v),
            "~" | "~>" => self.tilde(v),
            "^" => self.caret(v),
            _ => false,
        }
    }

    fn not_equal(&self, v: &Version) -> bool {
        let c = &self.con;
        if self.dirty {
            if !v.pre.is_empty() && c.pre.is_empty() {
                return false;
            }
            if c.major != v.major {
                return true;
            }
            if c.minor != v.minor && !self.minor_dirty {
                return true;
            } else if self.minor_dirty {
                return false;
            } else if c.patch != v.patch && !self.patch_dirty {
                return true;
            } else if self.patch_dirty {
                if !v.pre.is_empty() || !c.pre.is_empty() {
                    return compare_prerelease(&v.pre, &c.pre) != Ordering::Equal;
                }
                return false;
            }
        }
        v.compare(c) != Ordering::Equal
    }

    fn greater(&self, v: &Version) -> bool {
        let c = &self.con;
        if !self.dirty {
            return v.compare(c) == Ordering::Greater;
        }
        if v.major != c.major {
            return v.major > c.major;
        }
        if self.minor_dirty {
            return false;
        }
        if self.patch_dirty {
            return v.minor > c.minor;
        }
        v.compare(c) == Ordering::Greater
    }

    fn less_equal(&self, v: &Version) -> bool {
        let c = &self.con;
        if !self.dirty {
            return v.compare(c) != Ordering::Greater;
        }
        if v.major > c.major {
            return false;
        }
        !(v.major == c.major && v.minor > c.minor && !self.minor_dirty)
    }

    fn tilde(&self, v: &Version) -> bool {
        let c = &self.con;
        if v.compare(c) == Ordering::Less {
            return false;
        }
        if c.major == 0 && c.minor == 0 && c.patch == 0 && !self.minor_dirty && !self.patch_dirty {
            return true;
        }
        if v.major != c.major {
            return false;
        }
        v.minor == c.minor || self.minor_dirty
    }

    fn tilde_or_equal(&self, v: &Version) -> bool {
        if self.dirty {
            return self.tilde(v);
        }
        v.compare(&self.con) == Ordering::Equal
    }

    fn caret(&self, v: &Version) -> bool {
        let c = &self.con;
        if v.compare(c) == Ordering::Less {
            return false;
        }
        if c.major > 0 || self.minor_dirty {
            return v.major == c.major;
        }
        if v.major > 0 {
            return false;
        }
        if c.minor > 0 || self.patch_dirty {
            return v.minor == c.minor;
        }
        if v.minor > 0 {
            return false;
        }
        c.patch == v.patch
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(c: &str, v: &str) -> bool {
        let c = Constraints::parse(c).unwrap_or_else(|e| panic!("{e}"));
        c.check(&Version::parse(v).unwrap_or_else(|e| panic!("{e}")))
    }

    #[test]
    fn constraints() {
        assert!(check(">= v1.24.0-0", "v1.28.0"));
        assert!(check(">= v1.24.0-0", "v1.24.0-rc.1"));
        assert!(!check(">= v1.24.0", "v1.25.0-rc.1"));
        assert!(check("~1.2", "1.2.9"));
        assert!(!check("~1.2.3", "1.3.0"));
        assert!(check("^1.2", "1.9.0"));
        assert!(check("1.2 - 1.4", "1.4.3"));
        assert!(check("<1.0 || >=2.0", "2.1.0"));
        assert!(check("1.x", "1.7.0"));
    }
}
