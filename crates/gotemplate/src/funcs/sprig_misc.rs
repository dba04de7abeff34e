//! sprig's defaults (`default`, `empty`, `coalesce`, `ternary`, `all`, `any`), JSON,
//! reflection (`typeOf`, `kindOf`, ...), paths and `fail`.

use super::{def, s, Table, P};
use crate::value::V;

pub fn register(t: &mut Table) {
    def(t, "default", &[P::Any], Some(P::Any), |a| {
        Ok(match a.get(1) {
            Some(g) if !empty(g) => g.clone(),
            _ => a[0].clone(),
        })
    });
    def(t, "empty", &[P::Any], None, |a| Ok(V::Bool(empty(&a[0]))));
    def(t, "coalesce", &[], Some(P::Any), |a| {
        Ok(a.iter().find(|v| !empty(v)).cloned().unwrap_or(V::Nil))
    });
    def(t, "all", &[], Some(P::Any), |a| {
        Ok(V::Bool(a.iter().all(|v| !empty(v))))
    });
    def(t, "any", &[], Some(P::Any), |a| {
        Ok(V::Bool(a.iter().any(|v| !empty(v))))
    });
    def(t, "ternary", &[P::Any, P::Any, P::Bool], None, |a| {
        Ok(if matches!(a[2], V::Bool(true)) {
            a[0].clone()
        } else {
            a[1].clone()
        })
    });
    for name in ["toJson", "mustToJson"] {
        def(t, name, &[P::Any], None, |a| {
            Ok(V::str(go_json(&a[0], false, true)))
        });
    }
    for name in ["toPrettyJson", "mustToPrettyJson"] {
        def(t, name, &[P::Any], None, |a| {
            Ok(V::str(go_json(&a[0], true, true)))
        });
    }
    for name in ["toRawJson", "mustToRawJson"] {
        def(t, name, &[P::Any], None, |a| {
            Ok(V::str(go_json(&a[0], false, false)))
        });
    }
    def(t, "fromJson", &[P::Str], None, |a| {
        Ok(
            serde_json::from_str::<serde_json::Value>(s(&a[0]))
                .map_or(V::Nil, |j| V::from_json(&j)),
        )
    });
    def(t, "mustFromJson", &[P::Str], None, |a| {
        serde_json::from_str::<serde_json::Value>(s(&a[0]))
            .map(|j| V::from_json(&j))
            .map_err(|e| e.to_string())
    });
    def(t, "typeOf", &[P::Any], None, |a| {
        Ok(V::str(a[0].type_name()))
    });
    def(t, "typeIs", &[P::Str, P::Any], None, |a| {
        Ok(V::Bool(s(&a[0]) == a[1].type_name()))
    });
    def(t, "typeIsLike", &[P::Str, P::Any], None, |a| {
        let (want, got) = (s(&a[0]), a[1].type_name());
        Ok(V::Bool(want == got || format!("*{want}") == got))
    });
    def(t, "kindOf", &[P::Any], None, |a| {
        Ok(V::str(a[0].kind_name()))
    });
    def(t, "kindIs", &[P::Str, P::Any], None, |a| {
        Ok(V::Bool(s(&a[0]) == a[1].kind_name()))
    });
    def(t, "deepEqual", &[P::Any, P::Any], None, |a| {
        Ok(V::Bool(a[0].deep_equal(&a[1])))
    });
    def(t, "fail", &[P::Str], None, |a| Err(s(&a[0]).to_string()));
    register_paths(t);
    def(t, "hello", &[], None, |_| Ok(V::str("Hello!")));
}

/// `path` (and, on Linux, the identical `path/filepath`) functions.
fn register_paths(t: &mut Table) {
    for name in ["base", "osBase"] {
        def(t, name, &[P::Str], None, |a| {
            Ok(V::str(path_base(s(&a[0]))))
        });
    }
    for name in ["clean", "osClean"] {
        def(t, name, &[P::Str], None, |a| {
            Ok(V::str(path_clean(s(&a[0]))))
        });
    }
    for name in ["dir", "osDir"] {
        def(t, name, &[P::Str], None, |a| {
            let p = s(&a[0]);
            Ok(V::str(path_clean(&p[..p.rfind('/').map_or(0, |i| i + 1)])))
        });
    }
    for name in ["ext", "osExt"] {
        def(t, name, &[P::Str], None, |a| {
            let p = s(&a[0]);
            let last = &p[p.rfind('/').map_or(0, |i| i + 1)..];
            Ok(V::str(last.rfind('.').map_or("", |i| &last[i..])))
        });
    }
    for name in ["isAbs", "osIsAbs"] {
        def(t, name, &[P::Str], None, |a| {
            Ok(V::Bool(s(&a[0]).starts_with('/')))
        });
    }
}

/// sprig's `empty`: nil, false, 0, "" and empty collections.
pub fn empty(v: &V) -> bool {
    !v.truth()
}

/// Go's `encoding/json` output: map keys sorted, floats in Go's format, `<>&` escaped
/// unless raw, and U+2028/U+2029 always escaped.
fn go_json(v: &V, pretty: bool, escape_html: bool) -> String {
    let mut out = String::new();
    if pretty {
        write_pretty(&mut out, v, 0);
    } else {
        write_json(&mut out, v);
    }
    let out = out
        .replace('\u{2028}', "\\u2028")
        .replace('\u{2029}', "\\u2029");
    if !escape_html {
        return out;
    }
    out.replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
}

/// Go's JSON number format for float64: shortest digits, exponent form only outside
/// [1e-6, 1e21), with a two-digit-free exponent (`1e-7`, `1e+21`).
fn json_float(f: f64) -> String {
    let a = f.abs();
    if a != 0.0 && !(1e-6..1e21).contains(&a) {
        let s = format!("{f:e}");
        match s.split_once('e') {
            Some((m, e)) if e.starts_with('-') => format!("{m}e{e}"),
            Some((m, e)) => format!("{m}e+{e}"),
            None => s,
        }
    } else {
        format!("{f}")
    }
}

fn write_scalar(out: &mut String, v: &V) {
    match v {
        V::Float(f) if f.is_finite() => out.push_str(&json_float(*f)),
        other => out.push_str(&serde_json::to_string(&other.to_json()).unwrap_or_default()),
    }
}

fn write_json(out: &mut String, v: &V) {
    match v {
        V::List(l, _) => {
            out.push('[');
            for (i, x) in l.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_json(out, x);
            }
            out.push(']');
        }
        V::Map(m, _) => {
            out.push('{');
            for (i, (k, x)) in m.borrow().iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&serde_json::to_string(k).unwrap_or_default());
                out.push(':');
                write_json(out, x);
            }
            out.push('}');
        }
        other => write_scalar(out, other),
    }
}

/// `json.MarshalIndent(v, "", "  ")`: empty collections stay `[]`/`{}`.
fn write_pretty(out: &mut String, v: &V, depth: usize) {
    let ind = "  ".repeat(depth + 1);
    let end = "  ".repeat(depth);
    match v {
        V::List(l, _) if !l.is_empty() => {
            out.push_str("[\n");
            for (i, x) in l.iter().enumerate() {
                if i > 0 {
                    out.push_str(",\n");
                }
                out.push_str(&ind);
                write_pretty(out, x, depth + 1);
            }
            out.push_str(&format!("\n{end}]"));
        }
        V::Map(m, _) if !m.borrow().is_empty() => {
            out.push_str("{\n");
            for (i, (k, x)) in m.borrow().iter().enumerate() {
                if i > 0 {
                    out.push_str(",\n");
                }
                out.push_str(&format!(
                    "{ind}{}: ",
                    serde_json::to_string(k).unwrap_or_default()
                ));
                write_pretty(out, x, depth + 1);
            }
            out.push_str(&format!("\n{end}}}"));
        }
        other => write_json(out, other),
    }
}

/// Go's `path.Base`.
fn path_base(p: &str) -> String {
    if p.is_empty() {
        return ".".into();
    }
    let t = p.trim_end_matches('/');
    if t.is_empty() {
        return "/".into();
    }
    t.rsplit('/').next().unwrap_or(t).to_string()
}

/// Go's `path.Clean`: the shortest equivalent path, lexically.
fn path_clean(p: &str) -> String {
    if p.is_empty() {
        return ".".into();
    }
    let rooted = p.starts_with('/');
    let mut parts: Vec<&str> = Vec::new();
    for el in p.split('/') {
        match el {
            "" | "." => {}
            ".." => {
                if parts.last().is_some_and(|l| *l != "..") {
                    parts.pop();
                } else if !rooted {
                    parts.push("..");
                }
            }
            e => parts.push(e),
        }
    }
    let joined = parts.join("/");
    match (rooted, joined.is_empty()) {
        (true, _) => format!("/{joined}"),
        (false, true) => ".".into(),
        (false, false) => joined,
    }
}
