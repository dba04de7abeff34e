//! The variables a ClusterClass patch sees: the Cluster's values for the class's variables,
//! the per-template overrides, and the `builtin` variable Cluster API computes from the
//! desired objects (`builtin.cluster.*`, `builtin.controlPlane.*`,
//! `builtin.machineDeployment.*`, with upstream's JSON names), and how a patch reads one
//! of them by path (`infraServer.url`, `list[0].name`).

use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, HashSet};

/// The name of the variable Cluster API fills itself.
pub const BUILTIN: &str = "builtin";

/// Variables by name, as a patch's templates see them.
pub type Variables = Map<String, Value>;

/// Annotations upstream leaves out of `builtin.*.metadata`: bookkeeping, not intent.
const HIDDEN_ANNOTATIONS: [&str; 2] = [
    "kubectl.kubernetes.io/last-applied-configuration",
    "cluster.x-k8s.io/conversion-data",
];

/// Labels and annotations as `builtin.*.metadata` carries them; `None` when both are empty,
/// as upstream leaves the field out then.
pub fn metadata(
    labels: &BTreeMap<String, String>,
    annotations: &BTreeMap<String, String>,
) -> Option<Value> {
    if labels.is_empty() && annotations.is_empty() {
        return None;
    }
    let mut meta = Map::new();
    if !labels.is_empty() {
        meta.insert("labels".into(), json!(labels));
    }
    let shown: BTreeMap<_, _> = annotations
        .iter()
        .filter(|(k, _)| !HIDDEN_ANNOTATIONS.contains(&k.as_str()))
        .collect();
    if !annotations.is_empty() {
        meta.insert("annotations".into(), json!(shown));
    }
    Some(Value::Object(meta))
}

/// The values of `list` (a topology's `variables` or an `overrides` list) for the variables
/// the class defines, by name.
pub fn values(list: Option<&Value>, defined: &HashSet<String>) -> Variables {
    list.and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|v| {
            let name = v.get("name")?.as_str()?;
            (name != BUILTIN && defined.contains(name)).then(|| {
                (
                    name.to_string(),
                    v.get("value").cloned().unwrap_or(Value::Null),
                )
            })
        })
        .collect()
}

/// `vars` with `builtin` set to `{key: value}` (`key` is `cluster`, `controlPlane` or
/// `machineDeployment`).
pub fn with_builtin(mut vars: Variables, key: &str, value: Value) -> Variables {
    vars.insert(BUILTIN.into(), json!({ key: value }));
    vars
}

/// A template's variables on top of the Cluster's: a template's value wins, and the two
/// `builtin`s are merged one level deep (the Cluster's `cluster` beside the template's
/// `controlPlane` or `machineDeployment`), as upstream merges them.
pub fn merge(global: &Variables, template: &Variables) -> Variables {
    let mut merged = global.clone();
    for (name, value) in template {
        match (name.as_str(), merged.get_mut(name)) {
            (BUILTIN, Some(Value::Object(have))) => {
                if let Value::Object(add) = value {
                    have.extend(add.clone());
                }
            }
            _ => {
                merged.insert(name.clone(), value.clone());
            }
        }
    }
    merged
}

/// Why a variable path could not be read, in upstream's words.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct LookupError(pub String);

/// One step of a variable path: a name and, for `name[i]`, an index.
fn segment(s: &str) -> Result<(&str, Option<usize>), String> {
    match (s.find('['), s.find(']')) {
        (None, None) => Ok((s, None)),
        (Some(open), Some(close)) if close > open => {
            let index = &s[open + 1..close];
            let i: i64 = index.parse().map_err(|_| {
                format!("failed to parse array index in path segment {s:?}: strconv.Atoi: parsing {index:?}: invalid syntax")
            })?;
            if i < 0 {
                return Err(format!("invalid array index {i} in path segment {s:?}"));
            }
            Ok((&s[..open], Some(i as usize)))
        }
        _ => Err(format!("failed to parse path segment {s:?}")),
    }
}

fn element(value: &Value, index: usize, path: &str, name: &str) -> Result<Value, LookupError> {
    let array = value.as_array().ok_or_else(|| {
        LookupError(format!(
            "variable {path:?} is invalid: failed to get array {name:?}: value doesn't contain array; it contains {}",
            kind(value)
        ))
    })?;
    array.get(index).cloned().ok_or_else(|| {
        LookupError(format!(
            "variable {path:?} is invalid: array does not have index {index}"
        ))
    })
}

/// fastjson's name for a value's type, which upstream's message carries.
fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(true) => "true",
        Value::Bool(false) => "false",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// The value at `path` (`name`, `name.field.sub`, `name[2].field`), as upstream's
/// `GetVariableValue` reads it for `valueFrom.variable`.
pub fn lookup(vars: &Variables, path: &str) -> Result<Value, LookupError> {
    let mut parts = path.split('.');
    let first = parts.next().unwrap_or("");
    let (name, index) =
        segment(first).map_err(|e| LookupError(format!("variable {path:?} is invalid: {e}")))?;
    let mut value = vars
        .get(name)
        .cloned()
        .ok_or_else(|| LookupError(format!("variable {first:?} does not exist")))?;
    if let Some(i) = index {
        value = element(&value, i, path, name)?;
    }
    for part in parts {
        let (field, index) = segment(part)
            .map_err(|e| LookupError(format!("variable {path:?} has invalid syntax: {e}")))?;
        value = value.get(field).cloned().ok_or_else(|| {
            LookupError(format!(
                "variable {path:?} does not exist: failed to lookup segment {field:?}"
            ))
        })?;
        if let Some(i) = index {
            value = element(&value, i, path, field)?;
        }
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars() -> Variables {
        json!({
            "infraServer": {"url": "https://vc", "thumbprint": "AB:CD"},
            "list": [{"name": "a"}, {"name": "b"}],
            "builtin": {"cluster": {"name": "c1"}},
        })
        .as_object()
        .cloned()
        .unwrap_or_default()
    }

    #[test]
    fn paths_reach_nested_fields_and_array_elements() {
        assert_eq!(lookup(&vars(), "infraServer.url"), Ok(json!("https://vc")));
        assert_eq!(lookup(&vars(), "list[1].name"), Ok(json!("b")));
        assert_eq!(lookup(&vars(), "list[0]"), Ok(json!({"name": "a"})));
        assert_eq!(lookup(&vars(), "builtin.cluster.name"), Ok(json!("c1")));
    }

    #[test]
    fn missing_variables_fields_and_indexes_are_named() {
        assert_eq!(
            lookup(&vars(), "sshKey").unwrap_err().0,
            "variable \"sshKey\" does not exist"
        );
        assert_eq!(
            lookup(&vars(), "infraServer.port").unwrap_err().0,
            "variable \"infraServer.port\" does not exist: failed to lookup segment \"port\""
        );
        assert_eq!(
            lookup(&vars(), "list[5]").unwrap_err().0,
            "variable \"list[5]\" is invalid: array does not have index 5"
        );
        assert!(lookup(&vars(), "list[x]").is_err());
        assert!(lookup(&vars(), "list[0").is_err());
    }

    #[test]
    fn builtins_merge_one_level_deep_and_template_values_win() {
        let global = vars();
        let template = json!({"builtin": {"controlPlane": {"name": "cp"}}, "list": []})
            .as_object()
            .cloned()
            .unwrap_or_default();
        let merged = merge(&global, &template);
        assert_eq!(
            merged["builtin"],
            json!({"cluster": {"name": "c1"}, "controlPlane": {"name": "cp"}})
        );
        assert_eq!(merged["list"], json!([]));
    }

    #[test]
    fn only_defined_variables_are_passed_and_builtin_is_never_taken_from_the_cluster() {
        let defined: HashSet<String> = ["a".to_string(), "builtin".to_string()].into();
        let list = json!([{"name": "a", "value": 1}, {"name": "b", "value": 2}, {"name": "builtin", "value": {}}]);
        assert_eq!(
            Value::Object(values(Some(&list), &defined)),
            json!({"a": 1})
        );
    }

    #[test]
    fn metadata_hides_bookkeeping_annotations_and_is_absent_when_empty() {
        assert_eq!(metadata(&BTreeMap::new(), &BTreeMap::new()), None);
        let labels = BTreeMap::from([("l".to_string(), "v".to_string())]);
        let annotations = BTreeMap::from([
            ("a".to_string(), "1".to_string()),
            (HIDDEN_ANNOTATIONS[0].to_string(), "{}".to_string()),
        ]);
        assert_eq!(
            metadata(&labels, &annotations),
            Some(json!({"labels": {"l": "v"}, "annotations": {"a": "1"}}))
        );
    }
}
