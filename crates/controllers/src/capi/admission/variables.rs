//! A Cluster topology's variables against its ClusterClass's definitions, as Cluster API's
//! Cluster defaulting webhook handles them: values get their schema's nested defaults, a
//! defined variable the Cluster leaves out is added when its schema has a top-level default,
//! and a variable the class does not define, one set twice, a required one missing or a
//! value its schema refuses is an error at upstream's path.
//!
//! Upstream reads the definitions from the class's status (where its controller collects
//! them, with those of external patches); the stand-in has no external patches, so they are
//! the class's `spec.variables`.

use super::field::FieldError;
use infrasim_kube_api::schema::{Schema, SchemaError};
use serde_json::{json, Value};
use std::collections::HashSet;

/// One variable the class defines.
struct Definition {
    name: String,
    required: bool,
    /// The variable's schema, wrapped as the `value` property of an object (the schema
    /// engine defaults and validates objects).
    schema: Option<Schema>,
    default: Option<Value>,
}

fn definitions(class: &Value) -> Vec<Definition> {
    class
        .pointer("/spec/variables")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|v| {
            let openapi = v
                .pointer("/schema/openAPIV3Schema")
                .cloned()
                .unwrap_or(json!({}));
            let wrapped = json!({"type": "object", "properties": {"value": openapi}});
            Definition {
                name: v["name"].as_str().unwrap_or("").to_string(),
                required: v["required"].as_bool().unwrap_or(false),
                schema: Schema::from_openapi(&wrapped).ok(),
                default: openapi.get("default").cloned(),
            }
        })
        .collect()
}

/// Defaults and checks the Cluster's variables (`spec.topology.variables`, and the
/// control plane's and each MachineDeployment's overrides) against `class`.
pub fn default_and_check(cluster: &mut Value, class: &Value) -> Vec<FieldError> {
    let defined = definitions(class);
    let mut errors = Vec::new();
    if let Some(list) = cluster.pointer_mut("/spec/topology/variables") {
        walk(list, &defined, "spec.topology.variables", true, &mut errors);
    } else {
        let mut list = json!([]);
        walk(
            &mut list,
            &defined,
            "spec.topology.variables",
            true,
            &mut errors,
        );
        if list.as_array().is_some_and(|l| !l.is_empty()) {
            if let Some(t) = cluster
                .pointer_mut("/spec/topology")
                .and_then(Value::as_object_mut)
            {
                t.insert("variables".into(), list);
            }
        }
    }
    if let Some(o) = cluster.pointer_mut("/spec/topology/controlPlane/variables/overrides") {
        walk(
            o,
            &defined,
            "spec.topology.controlPlane.variables.overrides",
            false,
            &mut errors,
        );
    }
    let mds = cluster
        .pointer_mut("/spec/topology/workers/machineDeployments")
        .and_then(Value::as_array_mut);
    for md in mds.into_iter().flatten() {
        let name = md["name"].as_str().unwrap_or("").to_string();
        if let Some(o) = md.pointer_mut("/variables/overrides") {
            let path =
                format!("spec.topology.workers.machineDeployments[{name}].variables.overrides");
            walk(o, &defined, &path, false, &mut errors);
        }
    }
    errors
}

/// One list of variables: each value defaulted and checked; at the Cluster's own level
/// (`top`), the missing ones with a default added and the missing required ones named.
fn walk(
    list: &mut Value,
    defined: &[Definition],
    path: &str,
    top: bool,
    errors: &mut Vec<FieldError>,
) {
    let Some(items) = list.as_array_mut() else {
        return;
    };
    let mut seen = HashSet::new();
    for item in items.iter_mut() {
        let name = item["name"].as_str().unwrap_or("").to_string();
        let at = format!("{path}[{name}]");
        if !seen.insert(name.clone()) {
            errors.push(FieldError::invalid(
                &at,
                json!(name),
                format!("variable {name:?} is set more than once"),
            ));
            continue;
        }
        let Some(def) = defined.iter().find(|d| d.name == name) else {
            errors.push(FieldError::invalid(
                &at,
                json!(name),
                "variable is not defined",
            ));
            continue;
        };
        let Some(schema) = &def.schema else { continue };
        let value = item.get("value").cloned().unwrap_or(Value::Null);
        match schema.normalize(json!({"value": value})) {
            Ok(defaulted) => item["value"] = defaulted["value"].clone(),
            Err(SchemaError::Invalid(causes)) => {
                for (field, message) in causes {
                    let rest = field.strip_prefix("value").unwrap_or(&field);
                    errors.push(FieldError::worded(format!("{at}.value{rest}"), message));
                }
            }
        }
    }
    if !top {
        return;
    }
    for def in defined {
        if seen.contains(&def.name) {
            continue;
        }
        match &def.default {
            Some(default) => {
                // The default gets the nested defaults of its schema too, as structural
                // defaulting walks into what it just set.
                let value = def
                    .schema
                    .as_ref()
                    .and_then(|s| s.normalize(json!({"value": default})).ok())
                    .map_or(default.clone(), |v| v["value"].clone());
                items.push(json!({"name": def.name, "value": value}));
            }
            None if def.required => errors.push(FieldError::required(
                path,
                format!("required variable {:?} must be set", def.name),
            )),
            None => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class() -> Value {
        json!({"spec": {"variables": [
            {"name": "cpu", "required": true, "schema": {"openAPIV3Schema": {"type": "integer", "minimum": 1}}},
            {"name": "image", "required": false, "schema": {"openAPIV3Schema": {
                "type": "object", "default": {"repository": "registry.k8s.io"},
                "properties": {"repository": {"type": "string"}, "pull": {"type": "string", "default": "IfNotPresent"}}}}},
        ]}})
    }

    #[test]
    fn missing_variables_with_a_default_are_added_and_values_get_nested_defaults() {
        let mut cluster =
            json!({"spec": {"topology": {"variables": [{"name": "cpu", "value": 2}]}}});
        assert!(default_and_check(&mut cluster, &class()).is_empty());
        assert_eq!(
            cluster["spec"]["topology"]["variables"],
            json!([{"name": "cpu", "value": 2},
                   {"name": "image", "value": {"repository": "registry.k8s.io", "pull": "IfNotPresent"}}])
        );
    }

    #[test]
    fn undefined_repeated_missing_and_invalid_variables_are_named() {
        let mut cluster = json!({"spec": {"topology": {"variables": [
            {"name": "gpu", "value": 1}, {"name": "image", "value": {}}, {"name": "image", "value": {}}]}}});
        let texts: Vec<String> = default_and_check(&mut cluster, &class())
            .iter()
            .map(|e| e.to_string())
            .collect();
        assert_eq!(texts, [
            "spec.topology.variables[gpu]: Invalid value: \"gpu\": variable is not defined",
            "spec.topology.variables[image]: Invalid value: \"image\": variable \"image\" is set more than once",
            "spec.topology.variables: Required value: required variable \"cpu\" must be set",
        ]);
        let mut low = json!({"spec": {"topology": {"variables": [{"name": "cpu", "value": 0}]}}});
        let errors = default_and_check(&mut low, &class());
        assert_eq!(errors.len(), 1);
        assert!(
            errors[0]
                .path
                .starts_with("spec.topology.variables[cpu].value"),
            "{errors:?}"
        );
    }
}
