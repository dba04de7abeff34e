//! sprig's regular-expression functions over Go's RE2 syntax. The `regex` crate speaks
//! the same syntax, except that its `\d`, `\w`, `\s` and `\b` are Unicode-aware where
//! Go's are ASCII-only, so those classes are rewritten before compiling.

use regex::{NoExpand, Regex};

use super::{def, i, s, FnResult, Table, P};
use crate::value::V;

pub fn register(t: &mut Table) {
    for (name, must) in [("regexMatch", false), ("mustRegexMatch", true)] {
        let f: fn(Vec<V>) -> FnResult = if must {
            |a| Ok(V::Bool(compile(s(&a[0]))?.is_match(s(&a[1]))))
        } else {
            |a| {
                Ok(V::Bool(
                    compile(s(&a[0])).is_ok_and(|r| r.is_match(s(&a[1]))),
                ))
            }
        };
        def(t, name, &[P::Str, P::Str], None, f);
    }
    for name in ["regexFindAll", "mustRegexFindAll"] {
        def(t, name, &[P::Str, P::Str, P::Int], None, |a| {
            let r = compile(s(&a[0]))?;
            let n = i(&a[2]);
            let text = s(&a[1]);
            let found: Vec<String> = if n < 0 {
                r.find_iter(text).map(|m| m.as_str().to_string()).collect()
            } else {
                r.find_iter(text)
                    .take(n as usize)
                    .map(|m| m.as_str().to_string())
                    .collect()
            };
            Ok(V::str_list(found))
        });
    }
    for name in ["regexFind", "mustRegexFind"] {
        def(t, name, &[P::Str, P::Str], None, |a| {
            let r = compile(s(&a[0]))?;
            Ok(V::str(r.find(s(&a[1])).map_or("", |m| m.as_str())))
        });
    }
    for name in ["regexReplaceAll", "mustRegexReplaceAll"] {
        def(t, name, &[P::Str, P::Str, P::Str], None, |a| {
            let r = compile(s(&a[0]))?;
            Ok(V::str(r.replace_all(s(&a[1]), s(&a[2])).into_owned()))
        });
    }
    for name in ["regexReplaceAllLiteral", "mustRegexReplaceAllLiteral"] {
        def(t, name, &[P::Str, P::Str, P::Str], None, |a| {
            let r = compile(s(&a[0]))?;
            Ok(V::str(
                r.replace_all(s(&a[1]), NoExpand(s(&a[2]))).into_owned(),
            ))
        });
    }
    for name in ["regexSplit", "mustRegexSplit"] {
        def(t, name, &[P::Str, P::Str, P::Int], None, |a| {
            let r = compile(s(&a[0]))?;
            Ok(V::str_list(split(&r, s(&a[0]), s(&a[1]), i(&a[2]))))
        });
    }
    def(t, "regexQuoteMeta", &[P::Str], None, |a| {
        Ok(V::str(quote_meta(s(&a[0]))))
    });
}

/// Go's `Regexp.Split`.
fn split(r: &Regex, expr: &str, text: &str, n: i64) -> Vec<String> {
    if n == 0 {
        return Vec::new();
    }
    if !expr.is_empty() && text.is_empty() {
        return vec![String::new()];
    }
    let matches: Vec<(usize, usize)> = r.find_iter(text).map(|m| (m.start(), m.end())).collect();
    let mut out = Vec::new();
    let (mut beg, mut end) = (0, 0);
    for (a, b) in matches {
        if n > 0 && out.len() as i64 == n - 1 {
            break;
        }
        end = a;
        if b != 0 {
            out.push(text[beg..end].to_string());
        }
        beg = b;
    }
    if end != text.len() {
        out.push(text[beg..].to_string());
    }
    out
}

/// Go's `regexp.QuoteMeta`: only the characters special to RE2 get a backslash.
fn quote_meta(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if r"\.+*?()|[]{}^$".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Compiles with Go's ASCII meaning of the Perl classes.
pub fn compile(expr: &str) -> Result<Regex, String> {
    Regex::new(&go_classes(expr))
        .map_err(|e| format!("error parsing regexp: {}", first_line(&e.to_string())))
}

fn first_line(s: &str) -> String {
    s.lines().last().unwrap_or(s).trim().to_string()
}

fn go_classes(expr: &str) -> String {
    let mut out = String::with_capacity(expr.len());
    let mut in_class = false;
    let mut cs = expr.chars().peekable();
    while let Some(c) = cs.next() {
        match c {
            '\\' => {
                let Some(n) = cs.next() else {
                    out.push('\\');
                    break;
                };
                let rep = match (n, in_class) {
                    ('d', false) => "[0-9]",
                    ('d', true) => "0-9",
                    ('D', false) => "[^0-9]",
                    ('w', false) => "[0-9A-Za-z_]",
                    ('w', true) => "0-9A-Za-z_",
                    ('W', false) => "[^0-9A-Za-z_]",
                    ('s', false) => r"[\t\n\f\r ]",
                    ('s', true) => r"\t\n\f\r ",
                    ('S', false) => r"[^\t\n\f\r ]",
                    ('b', false) => r"(?-u:\b)",
                    ('B', false) => r"(?-u:\B)",
                    _ => "",
                };
                if rep.is_empty() {
                    out.push('\\');
                    out.push(n);
                } else {
                    out.push_str(rep);
                }
            }
            '[' if !in_class => {
                in_class = true;
                out.push('[');
                if cs.peek() == Some(&'^') {
                    out.push('^');
                    cs.next();
                }
                if cs.peek() == Some(&']') {
                    out.push_str(r"\]");
                    cs.next();
                }
            }
            '[' if in_class && cs.peek() == Some(&':') => {
                out.push('[');
                for c2 in cs.by_ref() {
                    out.push(c2);
                    if c2 == ']' {
                        break;
                    }
                }
            }
            '[' => out.push_str(r"\["),
            ']' if in_class => {
                in_class = false;
                out.push(']');
            }
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replace_with_groups() {
        let r = compile("(name: address\n +value:).*").unwrap_or_else(|e| panic!("{e}"));
        let out = r.replace_all("- name: address\n  value: x\n", "$1 10.0.0.1");
        assert_eq!(out, "- name: address\n  value: 10.0.0.1\n");
        assert_eq!(quote_meta("a.b*c"), r"a\.b\*c");
    }
}
