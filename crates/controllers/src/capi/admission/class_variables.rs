//! A ClusterClass's variable definitions (`spec.variables`), checked as Cluster API's
//! ClusterClass webhook checks them: names present, unique, neither `builtin` nor dotted;
//! each schema structural (every property and item typed), its defaults, enums and
//! examples valid against itself, only the types a variable may have, and its CEL rules
//! compiling. A class whose definitions pass here is one whose Clusters' values the
//! Cluster webhook can default and check ([`super::variables`]).
//!
//! Errors sit at upstream's paths, `spec.variables[<name>]…`, with the schema at
//! `….schema.openAPIV3Schema`.

use super::field::{go_quote, FieldError};
use infrasim_kube_api::schema::{rule_compile_errors, Schema, SchemaError};
use serde_json::{json, Value};
use std::collections::HashSet;

/// The name upstream reserves for the builtin variables.
const BUILTIN: &str = "builtin";

/// The types a variable's schema may name, sorted as upstream lists them.
const TYPES: &[&str] = &["array", "boolean", "integer", "number", "object", "string"];

/// The errors of every variable `class` defines.
pub fn check(class: &Value) -> Vec<FieldError> {
    let variables: Vec<&Value> = class
        .pointer("/spec/variables")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .collect();
    let mut errors = Vec::new();
    let mut seen = HashSet::new();
    for v in &variables {
        let name = v["name"].as_str().unwrap_or("");
        if !seen.insert(name) {
            errors.push(FieldError::invalid(
                format!("spec.variables[{name}].name"),
                json!(name),
                format!(
                    "variable name must be unique. Variable with name {} is defined more than once",
                    go_quote(name)
                ),
            ));
        }
    }
    for v in &variables {
        let name = v["name"].as_str().unwrap_or("");
        let base = format!("spec.variables[{name}]");
        name_errors(name, &format!("{base}.name"), &mut errors);
        let schema = v
            .pointer("/schema/openAPIV3Schema")
            .cloned()
            .unwrap_or(json!({}));
        errors.extend(schema_errors(
            &schema,
            &format!("{base}.schema.openAPIV3Schema"),
        ));
    }
    errors
}

fn name_errors(name: &str, at: &str, errors: &mut Vec<FieldError>) {
    if name.is_empty() {
        errors.push(FieldError::required(at, "variable name must be defined"));
    }
    if name == BUILTIN {
        errors.push(FieldError::invalid(
            at,
            json!(name),
            format!("{} is a reserved variable name", go_quote(BUILTIN)),
        ));
    }
    if name.contains('.') {
        errors.push(FieldError::invalid(
            at,
            json!(name),
            "variable name cannot contain \".\"",
        ));
    }
}

/// One variable's schema, in upstream's order: structure first, then defaults, then the
/// schema's own rules; each stage stops the checks when it finds something.
fn schema_errors(schema: &Value, path: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    structural(schema, path, "object fields", &mut errors);
    if !errors.is_empty() {
        return errors;
    }
    visit(schema, path, &mut |node, at| {
        if let Some(default) = node.get("default") {
            errors.extend(value_errors(node, default, &format!("{at}.default")));
        }
    });
    if !errors.is_empty() {
        return errors;
    }
    rules(schema, path, &mut errors);
    for (field, message) in rule_compile_errors(schema, path) {
        errors.push(FieldError::worded(field, message));
    }
    if errors.is_empty() {
        if let Err(why) = Schema::from_openapi(&wrap(schema)) {
            errors.push(FieldError::invalid(
                path,
                json!(""),
                format!("failed to build validator: {why}"),
            ));
        }
    }
    errors
}

/// The schemas a node holds, with their paths: properties, items, additionalProperties.
fn children<'a>(node: &'a Value, path: &str) -> Vec<(&'a Value, String, &'static str)> {
    let mut out = Vec::new();
    if let Some(props) = node.get("properties").and_then(Value::as_object) {
        for (name, p) in props {
            out.push((p, format!("{path}.properties[{name}]"), "object fields"));
        }
    }
    if let Some(items) = node.get("items").filter(|i| i.is_object()) {
        out.push((items, format!("{path}.items"), "array items"));
    }
    if let Some(extra) = node.get("additionalProperties").filter(|i| i.is_object()) {
        out.push((
            extra,
            format!("{path}.additionalProperties"),
            "object fields",
        ));
    }
    out
}

fn visit(node: &Value, path: &str, f: &mut impl FnMut(&Value, &str)) {
    f(node, path);
    for (child, at, _) in children(node, path) {
        visit(child, &at, f);
    }
}

/// A structural schema types every node, unless it keeps unknown fields or is an
/// int-or-string.
fn structural(node: &Value, path: &str, holder: &str, errors: &mut Vec<FieldError>) {
    let flag = |k: &str| node.get(k).and_then(Value::as_bool).unwrap_or(false);
    let typed = node
        .get("type")
        .and_then(Value::as_str)
        .is_some_and(|t| !t.is_empty());
    if !typed
        && !flag("x-kubernetes-preserve-unknown-fields")
        && !flag("x-kubernetes-int-or-string")
    {
        errors.push(FieldError::required(
            format!("{path}.type"),
            format!("must not be empty for specified {holder}"),
        ));
    }
    for (child, at, what) in children(node, path) {
        structural(child, &at, what, errors);
    }
}

/// What upstream's schema walk refuses: a type a variable may not have (the walk stops
/// there), properties beside additionalProperties, enum values and examples the schema
/// itself refuses.
fn rules(node: &Value, path: &str, errors: &mut Vec<FieldError>) {
    let kind = node.get("type").and_then(Value::as_str).unwrap_or("");
    if !kind.is_empty() && !TYPES.contains(&kind) {
        let supported: Vec<String> = TYPES.iter().map(|t| go_quote(t)).collect();
        errors.push(FieldError::worded(
            format!("{path}.type"),
            format!(
                "Unsupported value: {}: supported values: {}",
                go_quote(kind),
                supported.join(", ")
            ),
        ));
        return;
    }
    if let Some(example) = node.get("example") {
        errors.extend(value_errors(node, example, &format!("{path}.example")));
    }
    let values = node.get("enum").and_then(Value::as_array);
    for (i, value) in values.into_iter().flatten().enumerate() {
        if !value.is_null() {
            errors.extend(value_errors(node, value, &format!("{path}.enum[{i}]")));
        }
    }
    if node
        .get("additionalProperties")
        .is_some_and(Value::is_object)
        && node
            .get("properties")
            .and_then(Value::as_object)
            .is_some_and(|p| !p.is_empty())
    {
        errors.push(FieldError::forbidden(
            path,
            "additionalProperties and properties are mutually exclusive",
        ));
    }
    for (child, at, _) in children(node, path) {
        rules(child, &at, errors);
    }
}

/// A schema wrapped as the one property `v` of an object: the schema engine checks
/// objects, and a variable's value may be anything.
fn wrap(node: &Value) -> Value {
    json!({"type": "object", "properties": {"v": node}})
}

/// `value` checked against `node`, its errors at `at` (the engine's own wording, its `v`
/// renamed to the value's place in the class).
fn value_errors(node: &Value, value: &Value, at: &str) -> Vec<FieldError> {
    let Ok(schema) = Schema::from_openapi(&wrap(node)) else {
        return Vec::new();
    };
    match schema.normalize(json!({"v": value})) {
        Ok(_) => Vec::new(),
        Err(SchemaError::Invalid(causes)) => causes
            .into_iter()
            .map(|(field, message)| {
                let rest = field.strip_prefix('v').unwrap_or(&field);
                let renamed = format!("{at}{rest}");
                let message =
                    message.replace(&format!("{field} in body"), &format!("{renamed} in body"));
                FieldError::worded(renamed, message)
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(variables: Value) -> Vec<String> {
        check(&json!({"spec": {"variables": variables}}))
            .iter()
            .map(|e| e.to_string())
            .collect()
    }

    fn var(name: &str, schema: Value) -> Value {
        json!({"name": name, "required": false, "schema": {"openAPIV3Schema": schema}})
    }

    #[test]
    fn upstreams_in_memory_class_variables_pass() {
        let t = texts(json!([
            var(
                "etcdImageTag",
                json!({"type": "string", "default": "", "example": "3.5.3-0"})
            ),
            var("coreDNSImageTag", json!({"type": "string", "default": ""})),
            var(
                "kubeadmControlPlaneMaxSurge",
                json!({"type": "string", "default": ""})
            ),
            var(
                "sizes",
                json!({"type": "object", "additionalProperties": {"type": "integer", "minimum": 1}})
            ),
            var(
                "labels",
                json!({"type": "array", "items": {"type": "string", "enum": ["a", "b"]},
                "x-kubernetes-validations": [{"rule": "self.size() < 3"}]})
            ),
        ]));
        assert_eq!(t, Vec::<String>::new());
    }

    #[test]
    fn names_are_checked_as_upstream_words_them() {
        let s = json!({"type": "string"});
        let t = texts(json!([
            var("", s.clone()),
            var("builtin", s.clone()),
            var("a.b", s.clone()),
            var("a.b", s)
        ]));
        assert_eq!(t, [
            "spec.variables[a.b].name: Invalid value: \"a.b\": variable name must be unique. Variable with name \"a.b\" is defined more than once",
            "spec.variables[].name: Required value: variable name must be defined",
            "spec.variables[builtin].name: Invalid value: \"builtin\": \"builtin\" is a reserved variable name",
            "spec.variables[a.b].name: Invalid value: \"a.b\": variable name cannot contain \".\"",
            "spec.variables[a.b].name: Invalid value: \"a.b\": variable name cannot contain \".\"",
        ]);
    }

    #[test]
    fn schemas_must_be_structural_typed_and_valid_against_themselves() {
        let t = texts(json!([var(
            "x",
            json!({"type": "object", "properties": {"a": {}}})
        )]));
        assert_eq!(t, ["spec.variables[x].schema.openAPIV3Schema.properties[a].type: Required value: must not be empty for specified object fields"]);
        let t = texts(json!([var(
            "x",
            json!({"type": "integer", "minimum": 1, "default": 0})
        )]));
        assert_eq!(t, ["spec.variables[x].schema.openAPIV3Schema.default: Invalid value: 0: spec.variables[x].schema.openAPIV3Schema.default in body should be greater than or equal to 1"]);
        let t = texts(json!([var("x", json!({"type": "null"}))]));
        assert_eq!(t, ["spec.variables[x].schema.openAPIV3Schema.type: Unsupported value: \"null\": supported values: \"array\", \"boolean\", \"integer\", \"number\", \"object\", \"string\""]);
        let t = texts(json!([var(
            "x",
            json!({"type": "string", "enum": ["ok", 3]})
        )]));
        assert_eq!(t.len(), 1, "{t:?}");
        assert!(
            t[0].starts_with("spec.variables[x].schema.openAPIV3Schema.enum[1]: "),
            "{t:?}"
        );
        let t = texts(json!([var(
            "x",
            json!({"type": "object", "properties": {"a": {"type": "string"}},
            "additionalProperties": {"type": "string"}})
        )]));
        assert_eq!(t, ["spec.variables[x].schema.openAPIV3Schema: Forbidden: additionalProperties and properties are mutually exclusive"]);
    }

    #[test]
    fn a_rule_that_does_not_compile_is_named_where_it_is() {
        let t = texts(json!([var(
            "x",
            json!({"type": "object", "properties": {"n": {"type": "integer",
            "x-kubernetes-validations": [{"rule": "self.bogus("}]}}})
        )]));
        assert_eq!(t.len(), 1, "{t:?}");
        assert!(t[0].starts_with("spec.variables[x].schema.openAPIV3Schema.properties[n].x-kubernetes-validations[0].rule: Invalid value: apiextensions.ValidationRule{Rule:\"self.bogus(\""), "{t:?}");
    }
}
