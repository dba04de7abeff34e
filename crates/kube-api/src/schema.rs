//! Structural schemas of CustomResourceDefinition versions: validation with kube-apiserver's
//! field paths and messages, pruning of unknown fields, and defaulting.
//!
//! Written here rather than taken from a JSON Schema crate: Kubernetes' structural schemas add
//! pruning, defaulting and the `x-kubernetes-*` extensions, and clients read the exact error
//! wording, which a general validator does not produce.

use crate::field_path::FieldPath;
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::sync::Arc;

/// One schema node.
#[derive(Debug, Clone, Default)]
pub struct Node {
    ty: Option<String>,
    properties: BTreeMap<String, Node>,
    additional: Option<Box<Node>>,
    items: Option<Box<Node>>,
    required: Vec<String>,
    enumeration: Vec<Value>,
    default: Option<Value>,
    preserve_unknown: bool,
    int_or_string: bool,
    embedded_resource: bool,
    nullable: bool,
    minimum: Option<f64>,
    maximum: Option<f64>,
    min_length: Option<u64>,
    max_length: Option<u64>,
    min_items: Option<u64>,
    max_items: Option<u64>,
    /// `pattern`, compiled once (RE2 syntax, as kube-apiserver's Go regexp reads it).
    pattern: Option<regex::Regex>,
    /// `format` of a string (`date-time`, `uuid`, `ipv4`...).
    format: Option<String>,
    /// `x-kubernetes-list-type`: `atomic` (the default), `set` or `map`.
    list_type: Option<String>,
    /// `x-kubernetes-list-map-keys` of a `map` list.
    map_keys: Vec<String>,
    /// `x-kubernetes-validations`, compiled.
    rules: Arc<Vec<infrasim_cel::Rule>>,
    /// Whether this node or one below it has rules (the rule walk skips the rest).
    rules_below: bool,
}

/// How server-side apply merges and owns a list, by its `x-kubernetes-list-type`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ListMerge<'a> {
    /// Items are objects identified by these keys (`map`).
    Map(&'a [String]),
    /// Items are distinct scalars (`set`).
    Set,
    /// The list is one value (`atomic`, the default).
    Atomic,
}

impl Node {
    /// The schema of field `name` of an object this node describes: a property, or any key
    /// of a map (`additionalProperties`).
    pub fn field(&self, name: &str) -> Option<&Node> {
        self.properties.get(name).or(self.additional.as_deref())
    }

    /// The schema of a list's items.
    pub fn items(&self) -> Option<&Node> {
        self.items.as_deref()
    }

    /// How a list this node describes merges.
    pub fn list_merge(&self) -> ListMerge<'_> {
        match self.list_type.as_deref() {
            Some("map") if !self.map_keys.is_empty() => ListMerge::Map(&self.map_keys),
            Some("set") => ListMerge::Set,
            _ => ListMerge::Atomic,
        }
    }
}

/// A CRD version's schema.
#[derive(Debug, Clone)]
pub struct Schema {
    root: Node,
    /// Whether its rules could reach kube-apiserver's run-time cost limits, and so run
    /// metered (see [`infrasim_cel::within_runtime_limits`]).
    metered: bool,
}

/// Why a body does not fit its schema.
#[derive(Debug, Clone, PartialEq)]
pub enum SchemaError {
    /// Field-level problems: (field path, message), as 422 causes.
    Invalid(Vec<(String, String)>),
}

fn parse(v: &Value, depth: usize) -> Result<Node, String> {
    if depth > 64 {
        return Err("schema nests too deeply".into());
    }
    let Some(o) = v.as_object() else {
        return Ok(Node::default());
    };
    let num = |k: &str| o.get(k).and_then(Value::as_f64);
    let uint = |k: &str| o.get(k).and_then(Value::as_u64);
    let flag = |k: &str| o.get(k).and_then(Value::as_bool).unwrap_or(false);
    let strings = |k: &str| -> Vec<String> {
        let items = o.get(k).and_then(Value::as_array);
        items
            .into_iter()
            .flatten()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect()
    };
    let mut n = Node {
        ty: o.get("type").and_then(Value::as_str).map(str::to_string),
        required: strings("required"),
        enumeration: o
            .get("enum")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default(),
        default: o.get("default").cloned(),
        preserve_unknown: flag("x-kubernetes-preserve-unknown-fields"),
        int_or_string: flag("x-kubernetes-int-or-string"),
        embedded_resource: flag("x-kubernetes-embedded-resource"),
        nullable: flag("nullable"),
        minimum: num("minimum"),
        maximum: num("maximum"),
        min_length: uint("minLength"),
        max_length: uint("maxLength"),
        min_items: uint("minItems"),
        max_items: uint("maxItems"),
        pattern: match o.get("pattern").and_then(Value::as_str) {
            Some(p) => Some(
                regex::Regex::new(p).map_err(|e| format!("pattern {p:?} does not compile: {e}"))?,
            ),
            None => None,
        },
        format: o.get("format").and_then(Value::as_str).map(str::to_string),
        list_type: o
            .get("x-kubernetes-list-type")
            .and_then(Value::as_str)
            .map(str::to_string),
        map_keys: strings("x-kubernetes-list-map-keys"),
        ..Node::default()
    };
    if let Some(props) = o.get("properties").and_then(Value::as_object) {
        for (k, child) in props {
            n.properties.insert(k.clone(), parse(child, depth + 1)?);
        }
    }
    match o.get("additionalProperties") {
        Some(Value::Object(_)) => {
            n.additional = Some(Box::new(parse(&o["additionalProperties"], depth + 1)?))
        }
        Some(Value::Bool(true)) => n.preserve_unknown = true,
        _ => {}
    }
    if let Some(items) = o.get("items") {
        n.items = Some(Box::new(parse(items, depth + 1)?));
    }
    if let Some(rules) = o.get("x-kubernetes-validations").and_then(Value::as_array) {
        let compiled: Result<Vec<_>, String> = rules
            .iter()
            .enumerate()
            .map(|(i, r)| {
                infrasim_cel::Rule::compile(r)
                    .map_err(|e| format!("x-kubernetes-validations[{i}].{e}"))
            })
            .collect();
        n.rules = Arc::new(compiled?);
    }
    n.rules_below = !n.rules.is_empty()
        || n.properties.values().any(|c| c.rules_below)
        || n.additional.as_ref().is_some_and(|c| c.rules_below)
        || n.items.as_ref().is_some_and(|c| c.rules_below);
    Ok(n)
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn show(v: &Value) -> String {
    match v {
        Value::String(s) => format!("\"{s}\""),
        other => other.to_string(),
    }
}

/// The `x-kubernetes-validations` rules under `schema` that do not compile, as
/// kube-apiserver reports them when `schema` sits at `path` (`(field, message)` pairs): for
/// schemas other than a CRD's that embed CEL the same way, such as Cluster API's
/// ClusterClass variables.
pub fn rule_compile_errors(schema: &Value, path: &str) -> Vec<(String, String)> {
    infrasim_cel::compile_errors(schema, path)
}

impl Schema {
    /// The schema's root node (the object's).
    pub fn root(&self) -> &Node {
        &self.root
    }

    /// A schema from a version's `schema.openAPIV3Schema`; its rules, if it has any, run
    /// metered.
    pub fn from_openapi(v: &Value) -> Result<Schema, String> {
        let root = parse(v, 0)?;
        let metered = root.rules_below;
        Ok(Schema { root, metered })
    }

    /// The schema a served version checks its objects with: its rules run unmetered where
    /// their estimates keep them within the run-time limits. Estimating compiles every rule
    /// again, so it is done for the schemas that serve, not for those a CRD's validation or
    /// warnings only read.
    pub fn for_serving(v: &Value) -> Result<Schema, String> {
        let mut schema = Self::from_openapi(v)?;
        schema.metered = schema.metered && !infrasim_cel::within_runtime_limits(v);
        Ok(schema)
    }

    /// Prunes, defaults and validates a custom object. `apiVersion`, `kind` and `metadata`
    /// are the server's to check and pass through.
    pub fn normalize(&self, object: Value) -> Result<Value, SchemaError> {
        self.normalize_reporting(object).map(|(value, _)| value)
    }

    /// [`Schema::normalize`], and the paths of the fields it pruned because the schema does
    /// not know them (`spec.bogus`; fields set to null are not counted), for
    /// `fieldValidation`.
    pub fn normalize_reporting(&self, object: Value) -> Result<(Value, Vec<String>), SchemaError> {
        let (value, pruned, errors) = self.walk_all(object);
        if !errors.is_empty() {
            return Err(SchemaError::Invalid(errors));
        }
        Ok((value, pruned))
    }

    /// Prunes and defaults a custom object, leaving its validation for later: kube-apiserver
    /// decodes and defaults a custom object, runs the mutating admission webhooks, and only
    /// then validates it against the schema (a webhook may fill a required field). The
    /// paths of the pruned unknown fields come with it.
    pub fn prepare_reporting(&self, object: Value) -> (Value, Vec<String>) {
        let (value, pruned, _) = self.walk_all(object);
        (value, pruned)
    }

    /// What the schema refuses in `object` (one that [`Schema::prepare_reporting`] made):
    /// `(field, message)` causes of a 422.
    pub fn validate(&self, object: &Value) -> Vec<(String, String)> {
        self.walk_all(object.clone()).2
    }

    /// The object pruned and defaulted, the pruned unknown fields, and the errors.
    fn walk_all(&self, mut object: Value) -> (Value, Vec<String>, Vec<(String, String)>) {
        let mut errors = Vec::new();
        let mut pruned = Vec::new();
        let Some(obj) = object.as_object_mut() else {
            let errors = vec![("<root>".into(), "must be an object".into())];
            return (object, pruned, errors);
        };
        let system: Map<String, Value> = ["apiVersion", "kind", "metadata"]
            .iter()
            .filter_map(|k| obj.remove(*k).map(|v| (k.to_string(), v)))
            .collect();
        let mut rest = Value::Object(std::mem::take(obj));
        let mut report = Report {
            errors: &mut errors,
            pruned: &mut pruned,
        };
        walk(&self.root, &mut rest, &FieldPath::Root, &mut report, true);
        // Of what a schema says about `metadata`, kube-apiserver applies only its rules for
        // `name` and `generateName`; the rest of metadata is ObjectMeta's to validate.
        if let Some(meta) = self.root.properties.get("metadata") {
            for field in ["name", "generateName"] {
                if let (Some(rule), Some(value)) = (
                    meta.properties.get(field),
                    system.get("metadata").and_then(|m| m.get(field)),
                ) {
                    let mut value = value.clone();
                    let path = FieldPath::Key(&FieldPath::Key(&FieldPath::Root, "metadata"), field);
                    walk(rule, &mut value, &path, &mut report, false);
                }
            }
        }
        let mut out = system;
        if let Value::Object(m) = rest {
            out.extend(m);
        }
        (Value::Object(out), pruned, errors)
    }
}

/// What a walk finds: validation errors (path, message) and the paths of pruned fields.
struct Report<'a> {
    errors: &'a mut Vec<(String, String)>,
    pruned: &'a mut Vec<String>,
}

impl Report<'_> {
    fn error(&mut self, path: &FieldPath<'_>, message: String) {
        self.errors.push((path.to_string(), message));
    }
}

impl Schema {
    /// The rules this server cannot enforce (they call functions it does not implement),
    /// each as `path: rule (functions)`.
    pub fn unenforced_rules(&self) -> Vec<String> {
        let mut out = Vec::new();
        unenforced(&self.root, "", &mut out);
        out
    }

    /// The `x-kubernetes-validations` failures of `new` (an object that passed
    /// [`Schema::normalize`]), given the object it replaces, if any.
    pub fn check_rules(&self, new: &Value, old: Option<&Value>) -> Vec<(String, String)> {
        let mut errors = Vec::new();
        if self.root.rules_below {
            let mut budget = match self.metered {
                true => infrasim_cel::Budget::default(),
                false => infrasim_cel::Budget::unmetered(),
            };
            check_rules(&self.root, new, old, "", &mut errors, &mut budget);
        }
        errors
    }
}

fn unenforced(node: &Node, path: &str, out: &mut Vec<String>) {
    if !node.rules_below {
        return;
    }
    for rule in node.rules.iter().filter(|r| !r.unsupported.is_empty()) {
        let at = if path.is_empty() { "<root>" } else { path };
        out.push(format!(
            "{at}: {} ({})",
            rule.source(),
            rule.unsupported.join(", ")
        ));
    }
    for (k, child) in &node.properties {
        unenforced(child, &join(path, k), out);
    }
    if let Some(child) = &node.additional {
        unenforced(child, &join(path, "*"), out);
    }
    if let Some(child) = &node.items {
        unenforced(child, &format!("{path}[*]"), out);
    }
}

/// Runs the rules of `node` and below; `old` is the value at the same place before. Stops
/// once the object's cost budget is exhausted, as kube-apiserver does.
fn check_rules(
    node: &Node,
    new: &Value,
    old: Option<&Value>,
    path: &str,
    errors: &mut Vec<(String, String)>,
    budget: &mut infrasim_cel::Budget,
) {
    if !node.rules.is_empty() {
        let ty = node.ty.as_deref().unwrap_or("object");
        infrasim_cel::check(&node.rules, ty, path, new, old, errors, budget);
    }
    match new {
        Value::Object(map) => {
            for (k, v) in map {
                let child = node.properties.get(k).or(node.additional.as_deref());
                if let Some(child) = child.filter(|c| c.rules_below) {
                    if budget.exhausted() {
                        return;
                    }
                    let old = old.and_then(|o| o.get(k));
                    check_rules(child, v, old, &join(path, k), errors, budget);
                }
            }
        }
        Value::Array(items) => {
            let Some(item) = node.items.as_deref().filter(|i| i.rules_below) else {
                return;
            };
            for (i, v) in items.iter().enumerate() {
                if budget.exhausted() {
                    return;
                }
                let old = old_item(node, v, old);
                check_rules(item, v, old, &format!("{path}[{i}]"), errors, budget);
            }
        }
        _ => {}
    }
}

/// The old item an item of a list corresponds to: the one with the same keys in a `map`
/// list, the same value in a `set`; none in an atomic list, whose items have no identity.
fn old_item<'a>(node: &Node, item: &Value, old: Option<&'a Value>) -> Option<&'a Value> {
    let old = old?.as_array()?;
    match node.list_type.as_deref() {
        Some("map") => old
            .iter()
            .find(|o| node.map_keys.iter().all(|k| o.get(k) == item.get(k))),
        Some("set") => old.iter().find(|o| *o == item),
        _ => None,
    }
}

fn join(prefix: &str, key: &str) -> String {
    if prefix.is_empty() {
        key.to_string()
    } else {
        format!("{prefix}.{key}")
    }
}

/// Prunes and defaults `value` in place and records validation errors at `path`.
fn walk(node: &Node, value: &mut Value, path: &FieldPath<'_>, report: &mut Report<'_>, root: bool) {
    if !check_type(node, value, path, report, root) {
        return;
    }
    if !node.enumeration.is_empty() && !node.enumeration.contains(value) {
        let supported: Vec<String> = node.enumeration.iter().map(show).collect();
        report.error(
            path,
            format!(
                "Unsupported value: {}: supported values: {}",
                show(value),
                supported.join(", ")
            ),
        );
    }
    match value {
        Value::Object(map) => object(node, map, path, report, root),
        Value::Array(items) => array(node, items, path, report),
        Value::String(s) => string(node, s, path, report),
        Value::Number(n) => number(node, n, path, report),
        _ => {}
    }
}

/// Whether the walk goes on into `value`: not for a null, an int-or-string, or a value of
/// the wrong type, since no other constraint of the node applies to them.
fn check_type(
    node: &Node,
    value: &Value,
    path: &FieldPath<'_>,
    report: &mut Report<'_>,
    root: bool,
) -> bool {
    if value.is_null() {
        if !node.nullable && !root {
            report.error(
                path,
                format!(
                    "Invalid value: \"null\": {path} in body must be of type {}: \"null\"",
                    node.ty.as_deref().unwrap_or("object")
                ),
            );
        }
        return false;
    }
    if node.int_or_string {
        if !(value.is_string() || value.is_i64() || value.is_u64()) {
            report.error(
                path,
                format!(
                    "Invalid value: {}: {path} in body must be of type integer,string: {:?}",
                    show(value),
                    type_name(value)
                ),
            );
        }
        return false;
    }
    if let Some(ty) = node.ty.as_deref() {
        let actual = type_name(value);
        let ok = actual == ty || (ty == "number" && actual == "integer");
        if !ok {
            report.error(path, format!("Invalid value: \"{actual}\": {path} in body must be of type {ty}: \"{actual}\""));
            return false;
        }
    }
    true
}

/// A list's length bounds, then its items walked in place, then their uniqueness.
fn array(node: &Node, items: &mut [Value], path: &FieldPath<'_>, report: &mut Report<'_>) {
    let len = items.len() as u64;
    if node.min_items.is_some_and(|m| len < m) {
        report.error(
            path,
            format!(
                "Invalid value: {len}: {path} in body should have at least {} items",
                node.min_items.unwrap_or(0)
            ),
        );
    }
    if node.max_items.is_some_and(|m| len > m) {
        report.error(
            path,
            format!(
                "Too many: {len}: must have at most {} items",
                node.max_items.unwrap_or(0)
            ),
        );
    }
    if let Some(item) = &node.items {
        for (i, v) in items.iter_mut().enumerate() {
            walk(item, v, &FieldPath::Index(path, i), report, false);
        }
    }
    unique_items(node, items, path, report);
}

/// A string's length, format and pattern, in the order kube-apiserver reports them.
fn string(node: &Node, s: &str, path: &FieldPath<'_>, report: &mut Report<'_>) {
    let len = s.chars().count() as u64;
    if node.min_length.is_some_and(|m| len < m) {
        report.error(
            path,
            format!(
                "Invalid value: \"{s}\": {path} in body should be at least {} chars long",
                node.min_length.unwrap_or(0)
            ),
        );
    }
    if let Some(format) = node.format.as_deref().filter(|f| !format_ok(f, s)) {
        report.error(
            path,
            format!("Invalid value: \"{s}\": {path} in body must be of type {format}: \"{s}\""),
        );
    }
    if let Some(pattern) = node.pattern.as_ref().filter(|p| !p.is_match(s)) {
        report.error(
            path,
            format!(
                "Invalid value: \"{s}\": {path} in body should match '{}'",
                pattern.as_str()
            ),
        );
    }
    if node.max_length.is_some_and(|m| len > m) {
        report.error(
            path,
            format!(
                "Too long: may not be more than {} bytes",
                node.max_length.unwrap_or(0)
            ),
        );
    }
}

/// A number's inclusive bounds.
fn number(node: &Node, n: &serde_json::Number, path: &FieldPath<'_>, report: &mut Report<'_>) {
    let x = n.as_f64().unwrap_or(0.0);
    if let Some(min) = node.minimum.filter(|m| x < *m) {
        report.error(
            path,
            format!("Invalid value: {n}: {path} in body should be greater than or equal to {min}"),
        );
    }
    if let Some(max) = node.maximum.filter(|m| x > *m) {
        report.error(
            path,
            format!("Invalid value: {n}: {path} in body should be less than or equal to {max}"),
        );
    }
}

/// An embedded resource (`x-kubernetes-embedded-resource`) names its kind and version, and
/// its metadata is an object, as kube-apiserver checks it (an empty object is allowed: a
/// template being built).
fn embedded_identity(map: &Map<String, Value>, path: &FieldPath<'_>, report: &mut Report<'_>) {
    if map.is_empty() {
        return;
    }
    for field in ["apiVersion", "kind"] {
        match map.get(field) {
            Some(Value::String(s)) if !s.is_empty() => {}
            _ => report.error(
                &FieldPath::Key(path, field),
                "Required value: must not be empty".to_string(),
            ),
        }
    }
    if map.get("metadata").is_some_and(|m| !m.is_object()) {
        report.error(
            &FieldPath::Key(path, "metadata"),
            "Invalid value: must be an object".to_string(),
        );
    }
}

/// Whether `s` is a string of `format`, for the formats kube-apiserver checks; any other
/// format is a description only.
fn format_ok(format: &str, s: &str) -> bool {
    use base64::Engine;
    let hex_groups = |s: &str, lens: &[usize]| {
        let parts: Vec<&str> = s.split('-').collect();
        parts.len() == lens.len()
            && parts
                .iter()
                .zip(lens)
                .all(|(p, n)| p.len() == *n && p.bytes().all(|b| b.is_ascii_hexdigit()))
    };
    match format {
        "date-time" | "datetime" => chrono::DateTime::parse_from_rfc3339(s).is_ok(),
        "date" => chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d").is_ok(),
        "byte" => base64::engine::general_purpose::STANDARD.decode(s).is_ok(),
        "uuid" | "uuid3" | "uuid4" | "uuid5" => hex_groups(s, &[8, 4, 4, 4, 12]),
        "ipv4" => s.parse::<std::net::Ipv4Addr>().is_ok(),
        "ipv6" => s.parse::<std::net::Ipv6Addr>().is_ok(),
        "cidr" => s.split_once('/').is_some_and(|(ip, bits)| {
            let max = match ip.parse::<std::net::IpAddr>() {
                Ok(std::net::IpAddr::V4(_)) => 32,
                Ok(std::net::IpAddr::V6(_)) => 128,
                Err(_) => return false,
            };
            bits.parse::<u8>().is_ok_and(|b| b <= max)
        }),
        "hostname" => {
            !s.is_empty()
                && s.len() <= 253
                && s.split('.').all(|label| {
                    !label.is_empty()
                        && label.len() <= 63
                        && label
                            .bytes()
                            .all(|b| b.is_ascii_alphanumeric() || b == b'-')
                        && !label.starts_with('-')
                        && !label.ends_with('-')
                })
        }
        "email" => s
            .split_once('@')
            .is_some_and(|(user, host)| !user.is_empty() && host.contains('.')),
        _ => true,
    }
}

/// `x-kubernetes-list-type: set` items and `map` items' keys must not repeat; each repeat is
/// reported at its index, as kube-apiserver reports it.
fn unique_items(node: &Node, items: &[Value], path: &FieldPath<'_>, report: &mut Report<'_>) {
    let key = |item: &Value| -> Value {
        match node.list_type.as_deref() {
            Some("map") => Value::Object(
                node.map_keys
                    .iter()
                    .map(|k| (k.clone(), item.get(k).cloned().unwrap_or(Value::Null)))
                    .collect(),
            ),
            _ => item.clone(),
        }
    };
    if !matches!(node.list_type.as_deref(), Some("set" | "map")) {
        return;
    }
    let mut seen: Vec<Value> = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let k = key(item);
        if seen.contains(&k) {
            let shown = match &k {
                Value::Object(m) if node.list_type.as_deref() == Some("map") => go_map(m),
                other => show(other),
            };
            report.error(
                &FieldPath::Index(path, i),
                format!("Duplicate value: {shown}"),
            );
        } else {
            seen.push(k);
        }
    }
}

/// A map's keys as Go prints a `map[string]interface{}` with `%#v` (keys sorted).
fn go_map(m: &Map<String, Value>) -> String {
    let mut keys: Vec<&String> = m.keys().collect();
    keys.sort();
    let pairs: Vec<String> = keys
        .into_iter()
        .map(|k| format!("\"{k}\":{}", show(&m[k])))
        .collect();
    format!("map[string]interface {{}}{{{}}}", pairs.join(", "))
}

fn object(
    node: &Node,
    map: &mut Map<String, Value>,
    path: &FieldPath<'_>,
    report: &mut Report<'_>,
    root: bool,
) {
    // Embedded resources keep their own apiVersion, kind and metadata.
    let keep_system = node.embedded_resource;
    // Defaults first, so required checks see them.
    for (k, child) in &node.properties {
        if !map.contains_key(k) {
            if let Some(d) = &child.default {
                map.insert(k.clone(), d.clone());
            }
        }
    }
    // Prune what the schema does not know, unless told to keep it.
    if !node.preserve_unknown && node.additional.is_none() {
        let known = |k: &String| {
            node.properties.contains_key(k)
                || (keep_system && matches!(k.as_str(), "apiVersion" | "kind" | "metadata"))
        };
        map.retain(|k, v| {
            let keep = known(k);
            if !keep && !v.is_null() {
                report.pruned.push(FieldPath::Key(path, k).to_string());
            }
            keep
        });
    }
    if keep_system {
        embedded_identity(map, path, report);
    }
    for req in &node.required {
        // The object's apiVersion, kind and metadata are checked apart from its schema (see
        // `Schema::normalize`), so a root schema that requires them is satisfied.
        let system = root && matches!(req.as_str(), "apiVersion" | "kind" | "metadata");
        if !system && !map.contains_key(req) {
            report.error(&FieldPath::Key(path, req), "Required value".to_string());
        }
    }
    for (k, v) in map.iter_mut() {
        let child = node.properties.get(k).or(node.additional.as_deref());
        if let Some(child) = child {
            walk(child, v, &FieldPath::Key(path, k), report, false);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Schema {
        Schema::from_openapi(&json!({
            "type": "object",
            "properties": {
                "spec": {
                    "type": "object",
                    "required": ["image"],
                    "properties": {
                        "image": {"type": "string", "minLength": 1},
                        "replicas": {"type": "integer", "minimum": 0, "maximum": 10, "default": 1},
                        "mode": {"type": "string", "enum": ["fast", "safe"]},
                        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                        "port": {"x-kubernetes-int-or-string": true},
                        "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
                    }
                },
                "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}}
            }
        }))
        .unwrap()
    }

    #[test]
    fn prunes_defaults_and_keeps_what_it_should() {
        let out = schema()
            .normalize(json!({
                "apiVersion": "x/v1", "kind": "W", "metadata": {"name": "a"},
                "spec": {"image": "nginx", "bogus": 1, "labels": {"a": "b"}, "port": "http",
                         "extra": {"anything": {"goes": true}}},
                "unknownTop": true
            }))
            .unwrap();
        assert_eq!(out["spec"]["replicas"], 1);
        assert!(out["spec"].get("bogus").is_none());
        assert!(out.get("unknownTop").is_none());
        assert_eq!(out["spec"]["extra"]["anything"]["goes"], true);
        assert_eq!(out["metadata"]["name"], "a");
        assert_eq!(out["spec"]["labels"]["a"], "b");
    }

    #[test]
    fn says_which_fields_it_pruned() {
        let s = Schema::from_openapi(&json!({
            "type": "object",
            "properties": {"spec": {"type": "object", "properties": {
                "items": {"type": "array", "items": {"type": "object", "properties": {
                    "name": {"type": "string"}}}},
                "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}
        }))
        .unwrap();
        let (out, mut pruned) = s
            .normalize_reporting(json!({
                "metadata": {"name": "a", "bogusMeta": 1},
                "spec": {"items": [{"name": "x"}, {"name": "y", "size": 3}],
                         "gone": null, "extra": {"kept": 1}},
                "top": "x"
            }))
            .unwrap();
        // A field set to null is dropped without a word, as kube-apiserver drops it;
        // metadata is ObjectMeta's to check, not the schema's.
        pruned.sort();
        assert_eq!(
            pruned,
            vec!["spec.items[1].size".to_string(), "top".to_string()]
        );
        assert_eq!(out["spec"]["extra"]["kept"], 1);
        assert!(out["spec"]["items"][1].get("size").is_none());
    }

    #[test]
    fn reports_field_paths_like_kube_apiserver() {
        let err = schema()
            .normalize(json!({"spec": {"replicas": "three", "mode": "slow", "labels": {"a": 1}}}))
            .unwrap_err();
        let SchemaError::Invalid(causes) = err;
        let fields: Vec<&str> = causes.iter().map(|(f, _)| f.as_str()).collect();
        assert!(fields.contains(&"spec.image"), "{causes:?}");
        assert!(fields.contains(&"spec.replicas"));
        assert!(fields.contains(&"spec.mode"));
        assert!(fields.contains(&"spec.labels.a"));
        let replicas = causes.iter().find(|(f, _)| f == "spec.replicas").unwrap();
        assert_eq!(
            replicas.1,
            "Invalid value: \"string\": spec.replicas in body must be of type integer: \"string\""
        );
        let err = schema()
            .normalize(json!({"spec": {"image": "x", "replicas": 11}}))
            .unwrap_err();
        let SchemaError::Invalid(causes) = err;
        assert_eq!(
            causes[0].1,
            "Invalid value: 11: spec.replicas in body should be less than or equal to 10"
        );
    }

    #[test]
    fn patterns_and_list_uniqueness_are_enforced_with_kube_apiservers_words() {
        let schema = Schema::from_openapi(&json!({
            "type": "object",
            "properties": {"spec": {"type": "object", "properties": {
                "name": {"type": "string", "pattern": "^[a-z]+$"},
                "tags": {"type": "array", "x-kubernetes-list-type": "set",
                         "items": {"type": "string"}},
                "ports": {"type": "array", "x-kubernetes-list-type": "map",
                          "x-kubernetes-list-map-keys": ["name"],
                          "items": {"type": "object", "properties": {
                              "name": {"type": "string"}, "port": {"type": "integer"}}}}
            }}}
        }))
        .unwrap();
        let err = schema
            .normalize(json!({"spec": {
                "name": "Not-Lower",
                "tags": ["a", "b", "a"],
                "ports": [{"name": "http", "port": 80}, {"name": "http", "port": 81}]
            }}))
            .unwrap_err();
        let SchemaError::Invalid(causes) = err;
        let found = |field: &str| {
            causes
                .iter()
                .find(|(f, _)| f == field)
                .map(|(_, m)| m.as_str())
                .unwrap_or_else(|| panic!("no cause on {field}: {causes:?}"))
        };
        assert_eq!(
            found("spec.name"),
            "Invalid value: \"Not-Lower\": spec.name in body should match '^[a-z]+$'"
        );
        assert_eq!(found("spec.tags[2]"), "Duplicate value: \"a\"");
        assert_eq!(
            found("spec.ports[1]"),
            "Duplicate value: map[string]interface {}{\"name\":\"http\"}"
        );
        assert!(schema
            .normalize(json!({"spec": {"name": "ok", "tags": ["a", "b"],
                                       "ports": [{"name": "a"}, {"name": "b"}]}}))
            .is_ok());
        // A pattern that does not compile makes the schema unusable, not every object valid.
        assert!(Schema::from_openapi(&json!({"type": "string", "pattern": "("})).is_err());
    }

    #[test]
    fn a_schema_that_describes_metadata_checks_only_name_and_generate_name() {
        let schema = Schema::from_openapi(&json!({
            "type": "object",
            "required": ["apiVersion", "kind", "metadata", "spec"],
            "properties": {
                "apiVersion": {"type": "string"},
                "kind": {"type": "string"},
                "metadata": {"type": "object", "properties": {
                    "name": {"type": "string", "maxLength": 8}}},
                "spec": {"type": "object"}
            }
        }))
        .unwrap();
        let ok = schema.normalize(json!({"apiVersion": "x/v1", "kind": "W",
            "metadata": {"name": "short", "labels": {"a": "b"}}, "spec": {}}));
        let ok = ok.expect("metadata and the system fields satisfy the root's required list");
        assert_eq!(ok["metadata"]["labels"]["a"], "b");
        let long = schema.normalize(json!({"apiVersion": "x/v1", "kind": "W",
            "metadata": {"name": "far-too-long"}, "spec": {}}));
        let Err(SchemaError::Invalid(causes)) = long else {
            panic!("a name longer than the schema allows passed");
        };
        assert_eq!(causes[0].0, "metadata.name");
        let missing = schema.normalize(json!({"apiVersion": "x/v1", "kind": "W",
            "metadata": {"name": "a"}}));
        assert!(matches!(missing, Err(SchemaError::Invalid(c)) if c[0].0 == "spec"));
    }

    #[test]
    fn string_formats_are_checked_as_kube_apiserver_checks_them() {
        for (format, good, bad) in [
            ("date-time", "2026-11-24T10:00:00Z", "yesterday"),
            ("date", "2026-11-24", "24/11/2026"),
            ("byte", "aGVsbG8=", "not base64!"),
            ("uuid", "0f8fad5b-d9cb-469f-a165-70867728950e", "0f8fad5b"),
            ("ipv4", "10.0.0.1", "10.0.0.256"),
            ("ipv6", "fd00::1", "fd00:::1"),
            ("cidr", "10.0.0.0/8", "10.0.0.0/33"),
            ("hostname", "node-1.example.com", "-bad-.example.com"),
        ] {
            assert!(format_ok(format, good), "{format}: {good}");
            assert!(!format_ok(format, bad), "{format}: {bad}");
        }
        assert!(
            format_ok("int32", "anything"),
            "unknown formats describe only"
        );
        let schema = Schema::from_openapi(&json!({"type": "object", "properties": {
            "when": {"type": "string", "format": "date-time"}}}))
        .unwrap();
        let Err(SchemaError::Invalid(causes)) = schema.normalize(json!({"when": "soon"})) else {
            panic!("a bad date-time passed");
        };
        assert_eq!(
            causes,
            [(
                "when".to_string(),
                "Invalid value: \"soon\": when in body must be of type date-time: \"soon\""
                    .to_string()
            )]
        );
    }

    #[test]
    fn embedded_resources_name_their_kind_and_version() {
        let schema = Schema::from_openapi(&json!({"type": "object", "properties": {
            "template": {"type": "object", "x-kubernetes-embedded-resource": true,
                         "x-kubernetes-preserve-unknown-fields": true}}}))
        .unwrap();
        let ok = schema.normalize(json!({"template": {"apiVersion": "v1", "kind": "Pod",
                                                      "metadata": {"name": "p"}}}));
        assert_eq!(ok.unwrap()["template"]["metadata"]["name"], "p");
        assert!(schema.normalize(json!({"template": {}})).is_ok());
        let Err(SchemaError::Invalid(causes)) =
            schema.normalize(json!({"template": {"kind": "Pod"}}))
        else {
            panic!("an embedded resource without apiVersion passed");
        };
        assert_eq!(
            causes,
            [(
                "template.apiVersion".to_string(),
                "Required value: must not be empty".to_string()
            )]
        );
    }
}
