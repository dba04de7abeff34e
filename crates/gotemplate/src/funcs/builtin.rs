//! Go's predefined template functions: comparison, `len`, `index`, printing and escaping.
//! (`and`/`or` short-circuit in the executor; sprig's `slice` replaces the builtin one.)

use super::{def, s, FnResult, Table, P};
use crate::fmt;
use crate::value::{Elem, V};

pub fn register(t: &mut Table) {
    def(t, "and", &[P::Val], Some(P::Val), |_| Ok(V::Invalid));
    def(t, "or", &[P::Val], Some(P::Val), |_| Ok(V::Invalid));
    def(t, "not", &[P::Val], None, |a| Ok(V::Bool(!a[0].truth())));
    def(t, "len", &[P::Val], None, len);
    def(t, "index", &[P::Val], Some(P::Val), index);
    def(t, "print", &[], Some(P::Any), |a| {
        Ok(V::str(fmt::sprint(&a)))
    });
    def(t, "println", &[], Some(P::Any), |a| {
        Ok(V::str(fmt::sprintln(&a)))
    });
    def(t, "printf", &[P::Str], Some(P::Any), |a| {
        Ok(V::str(fmt::sprintf(s(&a[0]), &a[1..])))
    });
    def(t, "html", &[], Some(P::Any), |a| {
        Ok(V::str(html_escape(&eval_args(&a))))
    });
    def(t, "js", &[], Some(P::Any), |a| {
        Ok(V::str(js_escape(&eval_args(&a))))
    });
    def(t, "urlquery", &[], Some(P::Any), |a| {
        Ok(V::str(query_escape(&eval_args(&a))))
    });
    def(t, "call", &[P::Val], Some(P::Val), |a| {
        Err(format!("non-function of type {}", a[0].type_name()))
    });
    def(t, "eq", &[P::Val], Some(P::Val), |a| {
        eq(&a[0], &a[1..]).map(V::Bool)
    });
    def(t, "ne", &[P::Val, P::Val], None, |a| {
        eq(&a[0], &a[1..2]).map(|b| V::Bool(!b))
    });
    def(t, "lt", &[P::Val, P::Val], None, |a| {
        lt(&a[0], &a[1]).map(V::Bool)
    });
    def(t, "le", &[P::Val, P::Val], None, |a| {
        le(&a[0], &a[1]).map(V::Bool)
    });
    def(t, "gt", &[P::Val, P::Val], None, |a| {
        le(&a[0], &a[1]).map(|b| V::Bool(!b))
    });
    def(t, "ge", &[P::Val, P::Val], None, |a| {
        lt(&a[0], &a[1]).map(|b| V::Bool(!b))
    });
}

fn len(a: Vec<V>) -> FnResult {
    match &a[0] {
        V::Str(s) => Ok(V::Int(s.len() as i64)),
        V::List(l, _) => Ok(V::Int(l.len() as i64)),
        V::Map(m, _) => Ok(V::Int(m.borrow().len() as i64)),
        V::Invalid => Err("len of untyped nil".into()),
        V::Nil => Err("len of nil pointer".into()),
        other => Err(format!("len of type {}", other.type_name())),
    }
}

fn index(a: Vec<V>) -> FnResult {
    let mut item = a[0].clone();
    for idx in &a[1..] {
        item = match &item {
            V::List(l, _) => {
                let i = index_int(idx, l.len())?;
                l[i].clone()
            }
            V::Str(s) => {
                let i = index_int(idx, s.len())?;
                V::Int(i64::from(s.as_bytes()[i]))
            }
            V::Map(m, elem) => match idx {
                V::Str(k) => match m.borrow().get(&**k) {
                    Some(v) => v.clone(),
                    None if *elem == Elem::Str => V::str(""),
                    None => V::Nil,
                },
                V::Invalid | V::Nil => V::Nil,
                other => {
                    return Err(format!(
                        "value has type {}; should be string",
                        other.type_name()
                    ))
                }
            },
            V::Invalid => return Err("index of untyped nil".into()),
            V::Nil => return Err("index of nil pointer".into()),
            other => return Err(format!("can't index item of type {}", other.type_name())),
        };
    }
    Ok(item)
}

fn index_int(idx: &V, len: usize) -> Result<usize, String> {
    let i = match idx {
        V::Int(i) | V::Int64(i) => *i,
        V::Invalid | V::Nil => return Err("cannot index slice/array with nil".into()),
        other => {
            return Err(format!(
                "cannot index slice/array with type {}",
                other.type_name()
            ))
        }
    };
    if i < 0 || i as usize >= len {
        return Err(format!("index out of range: {i}"));
    }
    Ok(i as usize)
}

/// The string `html`, `js` and `urlquery` escape: a lone string, else `Sprint` of the args
/// with "no value" spelled out.
fn eval_args(a: &[V]) -> String {
    if let [V::Str(s)] = a {
        return s.to_string();
    }
    let printable: Vec<V> = a
        .iter()
        .map(|v| {
            if v.is_nil() {
                V::str("<no value>")
            } else {
                v.clone()
            }
        })
        .collect();
    fmt::sprint(&printable)
}

fn html_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '"' => out.push_str("&#34;"),
            '\'' => out.push_str("&#39;"),
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '\0' => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}

fn js_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\'' => out.push_str("\\'"),
            '"' => out.push_str("\\\""),
            '<' => out.push_str("\\u003C"),
            '>' => out.push_str("\\u003E"),
            '&' => out.push_str("\\u0026"),
            '=' => out.push_str("\\u003D"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

fn query_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(b as char)
            }
            b' ' => out.push('+'),
            b => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// The basic kinds Go's comparison functions accept.
#[derive(PartialEq, Clone, Copy)]
enum Kind {
    Bool,
    Int,
    Float,
    Str,
    /// Not a basic kind (including no value).
    Other,
}

fn kind(v: &V) -> Kind {
    match v {
        V::Bool(_) => Kind::Bool,
        V::Int(_) | V::Int64(_) => Kind::Int,
        V::Float(_) => Kind::Float,
        V::Str(_) => Kind::Str,
        _ => Kind::Other,
    }
}

const BAD_COMPARISON: &str = "incompatible types for comparison";
const BAD_TYPE: &str = "invalid type for comparison";

fn eq(a: &V, others: &[V]) -> Result<bool, String> {
    if others.is_empty() {
        return Err("missing argument for comparison".into());
    }
    let k1 = kind(a);
    for b in others {
        let k2 = kind(b);
        let truth = if k1 != k2 {
            if !a.is_nil() && !b.is_nil() {
                return Err(BAD_COMPARISON.into());
            }
            false
        } else {
            match (a, b) {
                (V::Bool(x), V::Bool(y)) => x == y,
                (V::Float(x), V::Float(y)) => x == y,
                (V::Str(x), V::Str(y)) => x == y,
                (x, y) if k1 == Kind::Int => super::i(x) == super::i(y),
                (x, y) => eq_other(x, y)?,
            }
        };
        if truth {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Equality of non-basic values: nils compare, slices and maps cannot.
fn eq_other(a: &V, b: &V) -> Result<bool, String> {
    let same_kind = std::mem::discriminant(a) == std::mem::discriminant(b);
    if !(same_kind || a.is_nil() || b.is_nil()) {
        return Err(format!(
            "non-comparable types {}: {}",
            a.type_name(),
            b.type_name()
        ));
    }
    if a.is_nil() || b.is_nil() {
        return Ok(a.is_nil() == b.is_nil());
    }
    match (a, b) {
        (V::Semver(x), V::Semver(y)) => Ok(std::rc::Rc::ptr_eq(x, y)),
        _ => Err(format!("non-comparable type {}", b.type_name())),
    }
}

fn lt(a: &V, b: &V) -> Result<bool, String> {
    let (k1, k2) = (kind(a), kind(b));
    if k1 == Kind::Other || k2 == Kind::Other {
        return Err(BAD_TYPE.into());
    }
    if k1 != k2 {
        return Err(BAD_COMPARISON.into());
    }
    match (a, b) {
        (V::Bool(_), _) => Err(BAD_TYPE.into()),
        (V::Float(x), V::Float(y)) => Ok(x < y),
        (V::Str(x), V::Str(y)) => Ok(x < y),
        (x, y) => Ok(super::i(x) < super::i(y)),
    }
}

fn le(a: &V, b: &V) -> Result<bool, String> {
    Ok(lt(a, b)? || eq(a, std::slice::from_ref(b))?)
}
