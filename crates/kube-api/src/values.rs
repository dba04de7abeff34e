//! Reading the shapes Kubernetes objects share out of their JSON: string maps (labels,
//! selectors), `IntOrString` counts that may be percentages, and conditions. The API server's
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

/// Whether `object`'s status has the condition `ty` with status `True`.
pub fn condition_true(object: &Value, ty: &str) -> bool {
    object
        .pointer("/status/conditions")
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
    fn counts_and_percentages() {
        assert_eq!(int_or_percent(Some(&json!(3)), 10, false), Some(3));
        assert_eq!(int_or_percent(Some(&json!("25%")), 10, true), Some(3));
        assert_eq!(int_or_percent(Some(&json!("25%")), 10, false), Some(2));
        assert_eq!(int_or_percent(Some(&json!("x%")), 10, false), None);
        assert_eq!(int_or_percent(None, 10, false), None);
    }
}
