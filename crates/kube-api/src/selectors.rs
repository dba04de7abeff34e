//! Label selectors (equality and set-based) and field selectors, parsed as kube-apiserver
//! parses them, plus the per-kind selectable fields.
//!
//! Written here rather than taken from a crate: kube-rs has selector *builders* for clients,
//! but no parser of the query-string syntax a server receives.

use infrasim_store::{SelectableFields, StoredObject};
use serde_json::Value;
use std::collections::BTreeMap;

/// Labels a selector can be matched against: a stored object's, or a map built by a caller
/// (a node's labels as the scheduler sees them, a Pod template's).
pub trait LabelSet {
    /// The value of label `key`, if the set has it.
    fn label(&self, key: &str) -> Option<&str>;
}

impl LabelSet for BTreeMap<String, String> {
    fn label(&self, key: &str) -> Option<&str> {
        self.get(key).map(String::as_str)
    }
}

impl LabelSet for infrasim_store::Labels {
    fn label(&self, key: &str) -> Option<&str> {
        self.get(key)
    }
}

/// One requirement of a label selector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LabelRequirement {
    Equals(String, String),
    NotEquals(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    NotExists(String),
    GreaterThan(String, i64),
    LessThan(String, i64),
}

impl LabelRequirement {
    /// One `matchExpressions` entry of a `metav1.LabelSelector` (node selector terms share the
    /// shape, with `Gt` and `Lt`); `None` if it is malformed.
    pub fn from_expression(e: &Value) -> Option<Self> {
        let key = e.get("key")?.as_str()?.to_string();
        let values: Vec<String> = e
            .get("values")
            .and_then(Value::as_array)
            .map(|vs| {
                vs.iter()
                    .filter_map(|v| v.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        let number = || values.first().and_then(|v| v.parse::<i64>().ok());
        Some(match e.get("operator")?.as_str()? {
            "In" => LabelRequirement::In(key, values),
            "NotIn" => LabelRequirement::NotIn(key, values),
            "Exists" => LabelRequirement::Exists(key),
            "DoesNotExist" => LabelRequirement::NotExists(key),
            "Gt" => LabelRequirement::GreaterThan(key, number()?),
            "Lt" => LabelRequirement::LessThan(key, number()?),
            _ => return None,
        })
    }

    fn matches(&self, labels: &impl LabelSet) -> bool {
        let value = |k: &str| labels.label(k);
        let number = |k: &str| value(k).and_then(|v| v.parse::<i64>().ok());
        match self {
            LabelRequirement::Equals(k, v) => value(k) == Some(v.as_str()),
            LabelRequirement::NotEquals(k, v) => value(k) != Some(v.as_str()),
            LabelRequirement::In(k, vs) => value(k).is_some_and(|v| vs.iter().any(|w| w == v)),
            LabelRequirement::NotIn(k, vs) => !value(k).is_some_and(|v| vs.iter().any(|w| w == v)),
            LabelRequirement::Exists(k) => value(k).is_some(),
            LabelRequirement::NotExists(k) => value(k).is_none(),
            LabelRequirement::GreaterThan(k, n) => number(k).is_some_and(|v| v > *n),
            LabelRequirement::LessThan(k, n) => number(k).is_some_and(|v| v < *n),
        }
    }
}

/// A parsed `labelSelector`: all requirements must hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector(pub Vec<LabelRequirement>);

impl LabelSelector {
    /// A `metav1.LabelSelector` object (`matchLabels` and `matchExpressions`); `None` if an
    /// expression is malformed. An empty one selects everything.
    pub fn from_api(selector: &Value) -> Option<Self> {
        let mut reqs: Vec<LabelRequirement> =
            crate::values::string_map(selector.get("matchLabels"))
                .into_iter()
                .map(|(k, v)| LabelRequirement::Equals(k, v))
                .collect();
        for e in selector
            .get("matchExpressions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            reqs.push(LabelRequirement::from_expression(e)?);
        }
        Some(LabelSelector(reqs))
    }

    /// Parses the query-string form (`app=web,tier!=db,env in (a,b),!legacy`).
    pub fn parse(input: &str) -> Result<Self, String> {
        let mut reqs = Vec::new();
        for part in split_top_level(input) {
            let part = part.trim();
            if part.is_empty() {
                continue;
            }
            reqs.push(parse_requirement(part)?);
        }
        Ok(LabelSelector(reqs))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The labels every selected object must carry (`k=v`, or `k in (v)`), for the store's
    /// label index to narrow a list before the whole selector is applied.
    pub fn required_labels(&self) -> Vec<(&str, &str)> {
        self.0
            .iter()
            .filter_map(|r| match r {
                LabelRequirement::Equals(k, v) => Some((k.as_str(), v.as_str())),
                LabelRequirement::In(k, vs) if vs.len() == 1 => Some((k.as_str(), vs[0].as_str())),
                _ => None,
            })
            .collect()
    }

    pub fn matches(&self, labels: &impl LabelSet) -> bool {
        self.0.iter().all(|r| r.matches(labels))
    }
}

/// Splits on commas outside parentheses.
fn split_top_level(input: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut depth = 0i32;
    let mut start = 0;
    for (i, c) in input.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&input[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&input[start..]);
    parts
}

fn valid_key(key: &str) -> Result<String, String> {
    let key = key.trim();
    let (prefix, name) = match key.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    let name_ok = !name.is_empty()
        && name.len() <= 63
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric());
    let prefix_ok = prefix.is_none_or(|p| {
        !p.is_empty()
            && p.len() <= 253
            && p.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "-.".contains(c))
    });
    if name_ok && prefix_ok {
        Ok(key.to_string())
    } else {
        Err(format!("unable to parse requirement: invalid label key \"{key}\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"))
    }
}

fn valid_value(value: &str) -> Result<String, String> {
    let value = value.trim();
    let ok = value.is_empty()
        || (value.len() <= 63
            && value
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
            && value.starts_with(|c: char| c.is_ascii_alphanumeric())
            && value.ends_with(|c: char| c.is_ascii_alphanumeric()));
    if ok {
        Ok(value.to_string())
    } else {
        Err(format!("unable to parse requirement: invalid label value: \"{value}\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"))
    }
}

fn parse_set(rest: &str) -> Result<Vec<String>, String> {
    let rest = rest.trim();
    let inner = rest
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .ok_or_else(|| format!("unable to parse requirement: found '{rest}', expected: '('"))?;
    inner.split(',').map(valid_value).collect()
}

fn parse_requirement(part: &str) -> Result<LabelRequirement, String> {
    if let Some(key) = part.strip_prefix('!') {
        return Ok(LabelRequirement::NotExists(valid_key(key)?));
    }
    // Set-based: `key in (..)` / `key notin (..)`.
    let words: Vec<&str> = part.splitn(2, char::is_whitespace).collect();
    if words.len() == 2 {
        let rest = words[1].trim_start();
        if let Some(set) = rest.strip_prefix("notin") {
            return Ok(LabelRequirement::NotIn(
                valid_key(words[0])?,
                parse_set(set)?,
            ));
        }
        if let Some(set) = rest.strip_prefix("in") {
            return Ok(LabelRequirement::In(valid_key(words[0])?, parse_set(set)?));
        }
    }
    for (op, ctor) in [
        (
            "!=",
            LabelRequirement::NotEquals as fn(String, String) -> LabelRequirement,
        ),
        ("==", LabelRequirement::Equals),
        ("=", LabelRequirement::Equals),
    ] {
        if let Some((k, v)) = part.split_once(op) {
            return Ok(ctor(valid_key(k)?, valid_value(v)?));
        }
    }
    for (op, greater) in [(">", true), ("<", false)] {
        if let Some((k, v)) = part.split_once(op) {
            let n: i64 = v
                .trim()
                .parse()
                .map_err(|_| format!("unable to parse requirement: for 'Gt', 'Lt' operators, the value must be an integer (got {v:?})"))?;
            let key = valid_key(k)?;
            return Ok(if greater {
                LabelRequirement::GreaterThan(key, n)
            } else {
                LabelRequirement::LessThan(key, n)
            });
        }
    }
    if part.contains(char::is_whitespace) || part.contains('(') {
        return Err(format!(
            "unable to parse requirement: found '{part}', expected: in, notin, =, ==, !=, gt, lt"
        ));
    }
    Ok(LabelRequirement::Exists(valid_key(part)?))
}

/// A parsed `fieldSelector`: `field=value`, `field==value`, `field!=value`, comma-joined.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector(pub Vec<(String, bool, String)>);

impl FieldSelector {
    /// Parses and checks every field against the kind's selectable fields.
    pub fn parse(input: &str, kind: &str) -> Result<Self, String> {
        Self::parse_for(input, kind, None)
    }

    /// [`FieldSelector::parse`] for a resource stored as another kind: `label` maps each
    /// label of the served version to the stored kind's (`None`: not selectable).
    pub fn parse_for(
        input: &str,
        kind: &str,
        label: Option<fn(&str) -> Option<String>>,
    ) -> Result<Self, String> {
        let mut reqs = Vec::new();
        for part in input.split(',') {
            let part = part.trim();
            if part.is_empty() {
                continue;
            }
            let (field, equal, value) = if let Some((f, v)) = part.split_once("!=") {
                (f, false, v)
            } else if let Some((f, v)) = part.split_once("==") {
                (f, true, v)
            } else if let Some((f, v)) = part.split_once('=') {
                (f, true, v)
            } else {
                return Err(format!(
                    "invalid selector: '{part}'; can't understand '{part}'"
                ));
            };
            let mut field = field.trim().to_string();
            if let Some(label) = label {
                field = label(&field).ok_or(format!("field label not supported: {field}"))?;
            }
            let field = field.as_str();
            if field != "metadata.name"
                && field != "metadata.namespace"
                && !selectable_fields(kind).contains(&field)
            {
                return Err(format!("field label not supported: {field}"));
            }
            reqs.push((field.to_string(), equal, value.trim().to_string()));
        }
        Ok(FieldSelector(reqs))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The `field=value` pairs every selected object holds (the selector's equalities).
    pub fn required_fields(&self) -> Vec<(&str, &str)> {
        self.0
            .iter()
            .filter(|(_, equal, _)| *equal)
            .map(|(f, _, v)| (f.as_str(), v.as_str()))
            .collect()
    }

    pub fn matches(&self, object: &StoredObject) -> bool {
        self.0.iter().all(|(field, equal, value)| {
            let actual = object.field(field).unwrap_or("");
            (actual == value) == *equal
        })
    }
}

/// The stored resources' fields the store keeps an index of (by store key), for the field
/// selectors asked at every scale: kube-apiserver's watch cache indexes Pods by
/// `spec.nodeName` (each kubelet lists its own), and a tree of a cluster's objects asks for
/// each one's Events by `involvedObject.uid` (the dashboard; `kubectl describe` asks by
/// name, namespace and uid together).
pub const INDEXED_FIELDS: &[(&str, &str)] =
    &[("pods", "spec.nodeName"), ("events", "involvedObject.uid")];

/// The fields kube-apiserver lets a kind be selected by, beyond `metadata.name` and
/// `metadata.namespace`.
pub fn selectable_fields(kind: &str) -> &'static [&'static str] {
    match kind {
        "Pod" => &[
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "spec.hostNetwork",
            "status.phase",
            "status.podIP",
            "status.nominatedNodeName",
        ],
        "Event" => &[
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "source",
            "type",
        ],
        "Secret" => &["type"],
        "Namespace" => &["status.phase"],
        "Node" => &["spec.unschedulable"],
        "ReplicaSet" | "ReplicationController" => &["status.replicas"],
        "Job" => &["status.successful"],
        _ => &[],
    }
}

fn lookup<'a>(object: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.').try_fold(object, |v, seg| v.get(seg))
}

fn scalar(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        _ => String::new(),
    }
}

/// Extracts the selectable fields of an object when it is written.
pub fn extract_fields(kind: &str, object: &Value) -> SelectableFields {
    let names = selectable_fields(kind);
    let values = names.iter().map(|path| match (kind, *path) {
        // Unset booleans select as "false", as the Go zero value does.
        (_, "spec.hostNetwork") | (_, "spec.unschedulable") => lookup(object, path)
            .map(scalar)
            .unwrap_or_else(|| "false".into()),
        ("Event", "source") => lookup(object, "source.component")
            .or_else(|| lookup(object, "reportingComponent"))
            .map(scalar)
            .unwrap_or_default(),
        ("ReplicaSet" | "ReplicationController", "status.replicas")
        | ("Job", "status.successful") => lookup(object, path)
            .map(scalar)
            .unwrap_or_else(|| "0".into()),
        _ => lookup(object, path).map(scalar).unwrap_or_default(),
    });
    SelectableFields::with_names(names, values)
}

/// A label selector as the string kubectl shows (`app=web,tier in (a,b),!legacy`).
pub(crate) fn selector_string(sel: Option<&serde_json::Value>) -> String {
    let Some(sel) = sel else { return String::new() };
    let mut parts: Vec<String> = Vec::new();
    let labels = sel.get("matchLabels").unwrap_or(sel);
    if let Some(m) = labels.as_object() {
        for (k, v) in m {
            if let Some(v) = v.as_str() {
                parts.push(format!("{k}={v}"));
            }
        }
    }
    let exprs = sel
        .get("matchExpressions")
        .and_then(serde_json::Value::as_array);
    for e in exprs.into_iter().flatten() {
        let text = |k: &str| e.get(k).and_then(serde_json::Value::as_str).unwrap_or("");
        let values: Vec<&str> = e
            .get("values")
            .and_then(serde_json::Value::as_array)
            .map(|v| v.iter().filter_map(serde_json::Value::as_str).collect())
            .unwrap_or_default();
        let key = text("key");
        parts.push(match text("operator") {
            "In" => format!("{key} in ({})", values.join(",")),
            "NotIn" => format!("{key} notin ({})", values.join(",")),
            "Exists" => key.to_string(),
            "DoesNotExist" => format!("!{key}"),
            op => format!("{key} {op}"),
        });
    }
    parts.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn a_required_label_is_an_equality_or_a_single_value_set() {
        let required = |s: &str| -> Vec<String> {
            LabelSelector::parse(s)
                .unwrap()
                .required_labels()
                .into_iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect()
        };
        assert_eq!(required("a!=1,b=2"), ["b=2"]);
        assert_eq!(required("a in (x),c=d"), ["a=x", "c=d"]);
        assert!(required("a in (x,y),!b,c!=d").is_empty());
        assert!(required("").is_empty());
    }

    #[test]
    fn label_selector_forms() {
        let l = labels(&[("app", "web"), ("tier", "front"), ("n", "5")]);
        let yes = [
            "app=web",
            "app==web",
            "tier!=db",
            "app in (web, api)",
            "tier notin (db)",
            "app",
            "!legacy",
            "app=web,tier in (front)",
            "n>3",
            "missing!=x",
        ];
        for s in yes {
            assert!(LabelSelector::parse(s).unwrap().matches(&l), "{s}");
        }
        let no = [
            "app=api",
            "app notin (web)",
            "!app",
            "legacy",
            "n<3",
            "app in (a,b)",
        ];
        for s in no {
            assert!(!LabelSelector::parse(s).unwrap().matches(&l), "{s}");
        }
        assert!(LabelSelector::parse("app in web").is_err());
        assert!(LabelSelector::parse("a b c").is_err());
        assert!(LabelSelector::parse("-bad=x").is_err());
    }

    #[test]
    fn field_selector_rejects_unknown_fields() {
        assert!(FieldSelector::parse("spec.nodeName=n1", "Pod").is_ok());
        assert!(FieldSelector::parse("metadata.name!=x", "ConfigMap").is_ok());
        let err = FieldSelector::parse("spec.nodeName=n1", "ConfigMap").unwrap_err();
        assert_eq!(err, "field label not supported: spec.nodeName");
    }

    #[test]
    fn fields_are_extracted_with_go_zero_values() {
        let pod = serde_json::json!({"spec": {"nodeName": "n1"}, "status": {"phase": "Running"}});
        let f = extract_fields("Pod", &pod);
        let get = |k: &str| f.get(k).map(str::to_string);
        assert_eq!(get("spec.nodeName").as_deref(), Some("n1"));
        assert_eq!(get("status.phase").as_deref(), Some("Running"));
        assert_eq!(get("spec.hostNetwork").as_deref(), Some("false"));
    }
}
