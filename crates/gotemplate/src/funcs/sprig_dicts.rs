//! sprig's dictionary functions over `map[string]interface{}`. Maps are shared, so `set`
//! and `unset` change the map every holder sees, as in Go.

use std::collections::BTreeMap;

use super::{def, s, strval, FnResult, Table, P};
use crate::value::{Elem, V};

pub fn register(t: &mut Table) {
    def(t, "dict", &[], Some(P::Any), |a| {
        let mut m = BTreeMap::new();
        for pair in a.chunks(2) {
            let v = pair.get(1).cloned().unwrap_or_else(|| V::str(""));
            m.insert(strval(&pair[0]), v);
        }
        Ok(V::map(m))
    });
    def(t, "get", &[P::Map, P::Str], None, |a| {
        Ok(get(&a[0], s(&a[1])).unwrap_or_else(|| V::str("")))
    });
    def(t, "set", &[P::Map, P::Str, P::Any], None, |a| match &a[0] {
        V::Map(m, _) => {
            m.borrow_mut().insert(s(&a[1]).to_string(), a[2].clone());
            Ok(a[0].clone())
        }
        _ => Err("assignment to entry in nil map".into()),
    });
    def(t, "unset", &[P::Map, P::Str], None, |a| {
        if let V::Map(m, _) = &a[0] {
            m.borrow_mut().remove(s(&a[1]));
        }
        Ok(a[0].clone())
    });
    def(t, "hasKey", &[P::Map, P::Str], None, |a| {
        Ok(V::Bool(get(&a[0], s(&a[1])).is_some()))
    });
    def(t, "pluck", &[P::Str], Some(P::Map), |a| {
        Ok(V::list(
            a[1..].iter().filter_map(|m| get(m, s(&a[0]))).collect(),
        ))
    });
    def(t, "keys", &[], Some(P::Map), |a| {
        let mut k = Vec::new();
        for m in &a {
            k.extend(entries(m).into_iter().map(|(k, _)| k));
        }
        Ok(V::str_list(k))
    });
    def(t, "values", &[P::Map], None, |a| {
        Ok(V::list(
            entries(&a[0]).into_iter().map(|(_, v)| v).collect(),
        ))
    });
    def(t, "pick", &[P::Map], Some(P::Str), |a| {
        let m = entries(&a[0])
            .into_iter()
            .filter(|(k, _)| a[1..].iter().any(|x| s(x) == k))
            .collect();
        Ok(V::map(m))
    });
    def(t, "omit", &[P::Map], Some(P::Str), |a| {
        let m = entries(&a[0])
            .into_iter()
            .filter(|(k, _)| !a[1..].iter().any(|x| s(x) == k))
            .collect();
        Ok(V::map(m))
    });
    def(t, "dig", &[], Some(P::Any), dig);
    for name in ["deepCopy", "mustDeepCopy"] {
        def(t, name, &[P::Any], None, |a| Ok(deep_copy(&a[0])));
    }
}

fn get(m: &V, k: &str) -> Option<V> {
    match m {
        V::Map(m, _) => m.borrow().get(k).cloned(),
        _ => None,
    }
}

fn entries(m: &V) -> Vec<(String, V)> {
    match m {
        V::Map(m, _) => m
            .borrow()
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        _ => Vec::new(),
    }
}

fn dig(a: Vec<V>) -> FnResult {
    if a.len() < 3 {
        return Err("dig needs at least three arguments".into());
    }
    let n = a.len();
    let mut cur = match &a[n - 1] {
        m @ V::Map(_, Elem::Any) => m.clone(),
        other => {
            return Err(format!(
                "interface conversion: interface {{}} is {}, not map[string]interface {{}}",
                other.type_name()
            ))
        }
    };
    let default = a[n - 2].clone();
    let keys = &a[..n - 2];
    for (idx, k) in keys.iter().enumerate() {
        let V::Str(k) = k else {
            return Err(format!(
                "interface conversion: interface {{}} is {}, not string",
                k.type_name()
            ));
        };
        let Some(step) = get(&cur, k) else {
            return Ok(default);
        };
        if idx + 1 == keys.len() {
            return Ok(step);
        }
        match step {
            m @ V::Map(_, Elem::Any) => cur = m,
            other => {
                return Err(format!(
                    "interface conversion: interface {{}} is {}, not map[string]interface {{}}",
                    other.type_name()
                ))
            }
        }
    }
    Ok(default)
}

fn deep_copy(v: &V) -> V {
    match v {
        V::Map(m, e) => {
            let c = m
                .borrow()
                .iter()
                .map(|(k, v)| (k.clone(), deep_copy(v)))
                .collect();
            match V::map(c) {
                V::Map(m, _) => V::Map(m, *e),
                other => other,
            }
        }
        V::List(l, e) => V::List(std::rc::Rc::new(l.iter().map(deep_copy).collect()), *e),
        other => other.clone(),
    }
}
