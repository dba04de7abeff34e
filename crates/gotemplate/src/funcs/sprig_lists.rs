//! sprig's list functions. Like sprig, they accept any slice and return `[]interface{}`,
//! and fail (sprig panics, the template reports it) when handed something else.

use std::rc::Rc;

use super::{def, i, list_items, to_int64, FnResult, Table, P};
use crate::value::{Elem, V};

pub fn register(t: &mut Table) {
    for name in ["list", "tuple"] {
        def(t, name, &[], Some(P::Any), |a| Ok(V::list(a)));
    }
    for name in ["append", "push", "mustAppend", "mustPush"] {
        def(t, name, &[P::Any, P::Any], None, |a| {
            let mut l = list_items(&a[0], "push")?.to_vec();
            l.push(a[1].clone());
            Ok(V::list(l))
        });
    }
    for name in ["prepend", "mustPrepend"] {
        def(t, name, &[P::Any, P::Any], None, |a| {
            let mut l = vec![a[1].clone()];
            l.extend(list_items(&a[0], "prepend")?.iter().cloned());
            Ok(V::list(l))
        });
    }
    for name in ["first", "mustFirst"] {
        def(t, name, &[P::Any], None, |a| {
            Ok(list_items(&a[0], "find first")?
                .first()
                .cloned()
                .unwrap_or(V::Nil))
        });
    }
    for name in ["last", "mustLast"] {
        def(t, name, &[P::Any], None, |a| {
            Ok(list_items(&a[0], "find last")?
                .last()
                .cloned()
                .unwrap_or(V::Nil))
        });
    }
    for name in ["rest", "mustRest"] {
        def(t, name, &[P::Any], None, |a| {
            let l = list_items(&a[0], "find rest")?;
            Ok(V::list(l.iter().skip(1).cloned().collect()))
        });
    }
    for name in ["initial", "mustInitial"] {
        def(t, name, &[P::Any], None, |a| {
            let l = list_items(&a[0], "find initial")?;
            Ok(V::list(
                l.iter().take(l.len().saturating_sub(1)).cloned().collect(),
            ))
        });
    }
    for name in ["reverse", "mustReverse"] {
        def(t, name, &[P::Any], None, |a| {
            Ok(V::list(
                list_items(&a[0], "find reverse")?
                    .iter()
                    .rev()
                    .cloned()
                    .collect(),
            ))
        });
    }
    register_filters(t);
}

/// Functions that select, reorder or generate elements.
fn register_filters(t: &mut Table) {
    for name in ["uniq", "mustUniq"] {
        def(t, name, &[P::Any], None, |a| {
            let mut out: Vec<V> = Vec::new();
            for x in list_items(&a[0], "find uniq")?.iter() {
                if !out.iter().any(|y| y.deep_equal(x)) {
                    out.push(x.clone());
                }
            }
            Ok(V::list(out))
        });
    }
    for name in ["without", "mustWithout"] {
        def(t, name, &[P::Any], Some(P::Any), |a| {
            let l = list_items(&a[0], "find without")?;
            Ok(V::list(
                l.iter()
                    .filter(|x| !a[1..].iter().any(|y| y.deep_equal(x)))
                    .cloned()
                    .collect(),
            ))
        });
    }
    for name in ["has", "mustHas"] {
        def(t, name, &[P::Any, P::Any], None, |a| {
            if a[1].is_nil() {
                return Ok(V::Bool(false));
            }
            let l = list_items(&a[1], "find has")?;
            Ok(V::Bool(l.iter().any(|x| x.deep_equal(&a[0]))))
        });
    }
    for name in ["compact", "mustCompact"] {
        def(t, name, &[P::Any], None, |a| {
            Ok(V::list(
                list_items(&a[0], "compact")?
                    .iter()
                    .filter(|x| !super::sprig_misc::empty(x))
                    .cloned()
                    .collect(),
            ))
        });
    }
    for name in ["slice", "mustSlice"] {
        def(t, name, &[P::Any], Some(P::Any), slice);
    }
    def(t, "concat", &[], Some(P::Any), |a| {
        let mut out = Vec::new();
        for l in &a {
            match l {
                V::List(items, _) => out.extend(items.iter().cloned()),
                other => return Err(format!("Cannot concat type {} as list", other.kind_name())),
            }
        }
        Ok(V::list(out))
    });
    for name in ["chunk", "mustChunk"] {
        def(t, name, &[P::Int, P::Any], None, chunk);
    }
    def(t, "until", &[P::Int], None, |a| {
        let n = i(&a[0]);
        until_step(0, n, if n < 0 { -1 } else { 1 })
    });
    def(t, "untilStep", &[P::Int, P::Int, P::Int], None, |a| {
        until_step(i(&a[0]), i(&a[1]), i(&a[2]))
    });
    def(t, "seq", &[], Some(P::Int), seq);
}

fn slice(a: Vec<V>) -> FnResult {
    let V::List(l, elem) = &a[0] else {
        if a[0].is_nil() {
            return Err("reflect: call of reflect.Value.Type on zero Value".into());
        }
        return Err(format!(
            "list should be type of slice or array but {}",
            a[0].kind_name()
        ));
    };
    if l.is_empty() {
        return Ok(V::Nil);
    }
    let start = a.get(1).map_or(0, to_int64);
    let end = a.get(2).map_or(l.len() as i64, to_int64);
    if start < 0 || end < start || end > l.len() as i64 {
        return Err(format!("reflect: slice index out of range [{start}:{end}]"));
    }
    Ok(V::List(
        Rc::new(l[start as usize..end as usize].to_vec()),
        *elem,
    ))
}

fn chunk(a: Vec<V>) -> FnResult {
    let size = i(&a[0]);
    let l = list_items(&a[1], "chunk")?;
    if size <= 0 {
        return Err("runtime error: integer divide by zero".into());
    }
    if l.is_empty() {
        return Ok(V::list(vec![V::list(Vec::new())]));
    }
    Ok(V::list(
        l.chunks(size as usize)
            .map(|c| V::list(c.to_vec()))
            .collect(),
    ))
}

fn ints(v: Vec<i64>) -> V {
    V::List(Rc::new(v.into_iter().map(V::Int).collect()), Elem::Int)
}

fn step_values(start: i64, stop: i64, step: i64) -> Result<Vec<i64>, String> {
    let mut v = Vec::new();
    let mut x = start;
    let limit = 10_000_000;
    if stop < start {
        if step >= 0 {
            return Ok(v);
        }
        while x > stop {
            v.push(x);
            x = x.saturating_add(step);
            if v.len() > limit {
                return Err("untilStep: too many values".into());
            }
        }
        return Ok(v);
    }
    if step <= 0 {
        return Ok(v);
    }
    while x < stop {
        v.push(x);
        x = x.saturating_add(step);
        if v.len() > limit {
            return Err("untilStep: too many values".into());
        }
    }
    Ok(v)
}

fn until_step(start: i64, stop: i64, step: i64) -> FnResult {
    step_values(start, stop, step).map(ints)
}

fn seq(a: Vec<V>) -> FnResult {
    let p: Vec<i64> = a.iter().map(i).collect();
    let vals = match p.as_slice() {
        [end] => {
            let inc = if *end < 1 { -1 } else { 1 };
            step_values(1, end + inc, inc)?
        }
        [start, end] => {
            let step = if end < start { -1 } else { 1 };
            step_values(*start, end + step, step)?
        }
        [start, step, end] => {
            let inc = if end < start { -1 } else { 1 };
            if end < start && *step > 0 {
                Vec::new()
            } else {
                step_values(*start, end + inc, *step)?
            }
        }
        _ => Vec::new(),
    };
    let s: Vec<String> = vals.iter().map(i64::to_string).collect();
    Ok(V::str(s.join(" ")))
}
