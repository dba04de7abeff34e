//! sprig's defaults (`default`, `empty`, `coalesce`, `ternary`, `all`, `any`), JSON,
//! reflection (`typeOf`, `kindOf`, ...), paths and `fail`.

use super::{def, s, strval, Table, P};
use crate::value::V;

pub fn register(t: &mut Table) {
    def(t, "default", &[P::Any], Some(P::Any), |a| {
        Ok(match a.get(1) {
            Some(g) if !empty(g) => g.clone(),
            _ => a[0].clone(),
        })
    });
    def(t, "empty", &[P::Any], None, |a| Ok(V::Bool(empty(&a[0]))));
    def(t, "coalesce", &[], Some(P::Any), |a| Ok(a.iter().find(|v| !empty(v)).cloned().unwrap_or(V::Nil)));
    def(t, "all", &[], Some(P::Any), |a| Ok(V::Bool(a.iter().all(|v| !empty(v)))));
    def(t, "any", &[], Some(P::Any), |a| Ok(V::Bool(a.iter().any(|v| !empty(v)))));
    def(t, "ternary", &[P::Any, P::Any, P::Bool], None, |a| {
        Ok(if matches!(a[2], V::Bool(true)) { a[0].clone() } else { a[1].clone() })
    });
    for name in ["toJson", "mustToJson"] {
        def(t, name, &[P::Any], None, |a| Ok(V::str(go_json(&a[0], false, true))));
    }
    for name in ["toPrettyJson", "mustToPrettyJson"] {
        def(t, name, &[P::Any], None, |a| Ok(V::str(go_json(&a[0], true, true))));
    }
    for name in ["toRawJson", "mustToRawJson"] {
        def(t, name, &[P::Any], None, |a| Ok(V::str(go_json(&a[0], false, false))));
    }
    def(t, "fromJson", &[P::Str], None, |a| {
        Ok(serde_json::from_str::<serde_json::Value>(s(&a[0])).map_or(V::Nil, |j| V::from_json(&j)))
    });
    def(t, "mustFromJson", &[P::Str], None, |a| {
        serde_json::from_str::<serde_json::Value>(s(&a[0]))
            .map(|j| V::from_json(&j))
            .map_err(|e| e.to_string())
    });
    def(t, "typeOf", &[P::Any], None, |a| Ok(V::str(a[0].type_name())));
    def(t, "typeIs", &[P::Str, P::Any], None, |a| Ok(V::Bool(s(&a[0]) == a[1].type_name())));
    def(t, "typeIsLike", &[P::Str, P::Any], None, |a| {
        let (want, got) = (s(&a[0]), a[1].type_name());
        Ok(V::Bool(want == got || format!("*{want}") == got))
    });
    def(t, "kindOf", &[P::Any], None, |a| Ok(V::str(a[0].kind_name())));
    def(t, "kindIs", &[P::Str, P::Any], None, |a| Ok(V::Bool(s(&a[0]) == a[1].kind_name())));
    def(t, "deepEqual", &[P::Any, P::Any], None, |a| Ok(V::Bool(a[0].deep_equal(&a[1]))));
    def(t, "fail", &[P::Str], None, |a| Err(s(&a[0]).to_string()));
    def(t, "base", &[P::Str], None, |a| Ok(V::str(path_base(s(&a[0])))));
    def(t, "hello", &[], None, |_| Ok(V::str("Hello!")));
    let _ = strval;
}

/// sprig's `empty`: nil, false, 0, "" and empty collections.
pub fn empty(v: &V) -> bool {
    !v.truth()
}

/// Go's `encoding/json` output: HTML-escaped unless raw, maps with sorted keys.
fn go_json(v: &V, pretty: bool, escape_html: bool) -> String {
    let j = v.to_json();
    let out = if pretty {
        serde_json::to_string_pretty(&j).unwrap_or_default()
    } else {
        serde_json::to_string(&j).unwrap_or_default()
    };
    let out = go_floats(&out, v);
    if !escape_html {
        return out;
    }
    out.replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
        .replace('\u{2028}', "\\u2028")
        .replace('\u{2029}', "\\u2029")
}

/// serde_json prints integral floats as `6443.0`; Go prints `6443`.
fn go_floats(out: &str, v: &V) -> String {
    if !has_float(v) {
        return out.to_string();
    }
    // Re-serialize with Go's float formatting by walking the value.
    let mut s = String::new();
    write_json(&mut s, v);
    if out.contains('\n') {
        // Pretty output: reformat from the compact Go-style text.
        if let Ok(j) = serde_json::from_str::<serde_json::Value>(&s) {
            let _ = j;
        }
        return pretty_from_compact(v, 0);
    }
    s
}

fn has_float(v: &V) -> bool {
    match v {
        V::Float(_) => true,
        V::List(l, _) => l.iter().any(has_float),
        V::Map(m, _) => m.borrow().values().any(has_float),
        _ => false,
    }
}

/// Go's JSON number format for float64: shortest, `%e` form only outside [1e-6, 1e21).
fn json_float(f: f64) -> String {
    let a = f.abs();
    if a != 0.0 && !(1e-6..1e21).contains(&a) {
        let s = crate::fmt::format_float(a, 'e', None);
        let (m, e) = s.split_once('e').unwrap_or((&s, "+00"));
        let e = if let Some(x) = e.strip_prefix("-0") { format!("-{x}") } else { e.trim_start_matches('+').trim_start_matches('0').to_string() };
        let e = if e.is_empty() { "0".to_string() } else { e };
        let e = if e.starts_with('-') { e } else { format!("+{e}") };
        format!("{}{m}e{e}", if f < 0.0 { "-" } else { "" })
    } else {
        let mut b = ryu_like(f);
        if b == "-0" {
            b = "-0".into();
        }
        b
    }
}

fn ryu_like(f: f64) -> String {
    let s = format!("{f}");
    s
}

fn write_json(out: &mut String, v: &V) {
    match v {
        V::Float(f) if f.is_finite() => out.push_str(&json_float(*f)),
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
        other => out.push_str(&serde_json::to_string(&other.to_json()).unwrap_or_default()),
    }
}

fn pretty_from_compact(v: &V, depth: usize) -> String {
    let ind = "  ".repeat(depth + 1);
    let end = "  ".repeat(depth);
    match v {
        V::List(l, _) if !l.is_empty() => {
            let items: Vec<String> = l.iter().map(|x| format!("{ind}{}", pretty_from_compact(x, depth + 1))).collect();
            format!("[\n{}\n{end}]", items.join(",\n"))
        }
        V::Map(m, _) if !m.borrow().is_empty() => {
            let items: Vec<String> = m
                .borrow()
                .iter()
                .map(|(k, x)| format!("{ind}{}: {}", serde_json::to_string(k).unwrap_or_default(), pretty_from_compact(x, depth + 1)))
                .collect();
            format!("{{\n{}\n{end}}}", items.join(",\n"))
        }
        other => {
            let mut s = String::new();
            write_json(&mut s, other);
            s
        }
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
