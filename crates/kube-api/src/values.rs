//! Reading the shapes Kubernetes objects share out of their JSON: string maps (labels,
//! selectors) and lists, `IntOrString` counts that may be percentages, and conditions. The API server's
//! eviction and the simulated clusters' controllers read objects the same way.

use serde_json::Value;
use std::collections::BTreeMap;

/// A JSON object of strings (labels, annotations, `matchLabels`, `nodeSelector`) as a map;
/// non-string values read as empty strings, anything else as an empty map.
pub fn string_map(v: Option<&Value>) -> BTreeMap<String, String> {
    v.and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_string()))
                .collect()
        })
        .unwrap_or_default()
}

/// A JSON array of strings (audiences, usages, groups) as a list; non-strings are skipped,
/// anything else is an empty list.
pub fn string_list(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// An `IntOrString` count (`3`, `"3"` or `"25%"`) resolved against `total`, percentages
/// rounded up or down as the caller's controller does; `None` when absent or malformed.
pub fn int_or_percent(v: Option<&Value>, total: i64, round_up: bool) -> Option<i64> {
    match v? {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => match s.strip_suffix('%') {
            Some(p) => {
                let percent = p.parse::<i64>().ok()?;
                Some(if round_up {
                    (percent * total + 99) / 100
                } else {
                    percent * total / 100
                })
            }
            None => s.parse().ok(),
        },
        _ => None,
    }
}

/// JSON-pointer reads that allocate nothing. `serde_json::Value::pointer` unescapes every token
/// into a new `String` (two `replace` calls each), and the controllers and the write path read
/// a few pointers per object they touch: at ten thousand clusters that was a few percent of the
/// CPU. Tokens with escapes (`~0`, `~1`) still go through serde_json.
pub trait At {
    /// The value at `pointer` (RFC 6901), as `Value::pointer` finds it.
    fn at(&self, pointer: &str) -> Option<&Value>;
}

impl At for Value {
    fn at(&self, pointer: &str) -> Option<&Value> {
        if pointer.is_empty() {
            return Some(self);
        }
        let rest = pointer.strip_prefix('/')?;
        if rest.contains('~') {
            return self.pointer(pointer);
        }
        rest.split('/')
            .try_fold(self, |target, token| match target {
                Value::Object(map) => map.get(token),
                Value::Array(list) => array_index(token).and_then(|i| list.get(i)),
                _ => None,
            })
    }
}

/// An array index token as RFC 6901 spells it: digits, no sign, no leading zero.
fn array_index(token: &str) -> Option<usize> {
    if token.starts_with('+') || (token.starts_with('0') && token.len() > 1) {
        return None;
    }
    token.parse().ok()
}

/// Whether `object`'s status has the condition `ty` with status `True`.
pub fn condition_true(object: &Value, ty: &str) -> bool {
    object
        .at("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|c| {
            c.get("type").and_then(Value::as_str) == Some(ty)
                && c.get("status").and_then(Value::as_str) == Some("True")
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn at_reads_what_pointer_reads() {
        let v = json!({"a": {"b/c": 1, "m~n": 2, "list": [10, 11]}, "": 3});
        for p in [
            "",
            "/a",
            "/a/b~1c",
            "/a/m~0n",
            "/a/list/1",
            "/a/list/01",
            "/a/list/+1",
            "/a/list/9",
            "/a/missing",
            "/",
            "a",
            "/a/list/x",
        ] {
            assert_eq!(v.at(p), v.pointer(p), "{p}");
        }
        assert_eq!(v.at("/a/list/1"), Some(&json!(11)));
    }

    #[test]
    fn counts_and_percentages() {
        assert_eq!(int_or_percent(Some(&json!(3)), 10, false), Some(3));
        assert_eq!(int_or_percent(Some(&json!("25%")), 10, true), Some(3));
        assert_eq!(int_or_percent(Some(&json!("25%")), 10, false), Some(2));
        assert_eq!(int_or_percent(Some(&json!("x%")), 10, false), None);
        assert_eq!(int_or_percent(None, 10, false), None);
    }
}
