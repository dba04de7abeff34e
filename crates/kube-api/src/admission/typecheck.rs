//! The type checking kube-apiserver's ValidatingAdmissionPolicy status controller does: each
//! validation (and messageExpression) is checked against the schema of every kind the
//! policy's `matchConstraints` name (at most ten, sorted by group, version and kind), with
//! `object` and `oldObject` typed by it and `params` by the `paramKind`'s schema, and what
//! does not check is reported as an expression warning: its field path, and per kind the
//! checker's issues (`apps/v1, Kind=Deployment: ERROR: <input>:1:12: undefined field
//! 'replicass'` and the marked source line).
//!
//! Schemas are those `/openapi/v3` serves (k8s-openapi's for built-in kinds, a CRD's own
//! with ObjectMeta for its metadata), turned into CEL types as kube-apiserver's
//! `SchemaDeclType` turns them: objects with their properties, maps for
//! `additionalProperties`, `dyn` for int-or-string, and no field at all for a property
//! without a type.

use crate::openapi::kind_schema;
use crate::resources::ResourceInfo;
use crate::state::State;
use infrasim_cel::check::check;
use infrasim_cel::types::{self, Fields, Record, Ty};
use serde_json::{json, Map, Value};
use std::sync::Arc;

/// kube-apiserver checks at most this many kinds per policy.
const MAX_KINDS: usize = 10;

/// The expression warnings of `policy`, as its status's `typeChecking.expressionWarnings`
/// holds them.
pub(crate) fn expression_warnings(state: &State, policy: &Value) -> Vec<Value> {
    let spec = &policy["spec"];
    let kinds: Vec<(Arc<ResourceInfo>, Ty)> = kinds_to_check(state, spec)
        .into_iter()
        .filter_map(|r| {
            let ty = resource_type(&r)?;
            Some((r, ty))
        })
        .collect();
    let params = spec.get("paramKind").filter(|k| k.is_object()).map(|kind| {
        let api_version = kind["apiVersion"].as_str().unwrap_or("");
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        let kind = kind["kind"].as_str().unwrap_or("");
        state
            .registry
            .all()
            .into_iter()
            .find(|r| r.group == group && r.version == version && r.kind == kind)
            .and_then(|r| resource_type(&r))
            .unwrap_or(Ty::Dyn)
    });
    warnings_for(&kinds, spec, params.as_ref())
}

/// The expression warnings of a policy's validations checked against `kinds`.
fn warnings_for(
    kinds: &[(Arc<ResourceInfo>, Ty)],
    spec: &Value,
    params: Option<&Ty>,
) -> Vec<Value> {
    let mut warnings = Vec::new();
    let validations = spec["validations"].as_array().cloned().unwrap_or_default();
    for (i, validation) in validations.iter().enumerate() {
        for field in ["expression", "messageExpression"] {
            let Some(expression) = validation[field].as_str().filter(|e| !e.is_empty()) else {
                continue;
            };
            let issues: Vec<String> = kinds
                .iter()
                .filter_map(|(r, object)| {
                    let env = environment(spec, object, params);
                    let issues = check(expression, &env).err()?;
                    Some(format!(
                        "{}/{}, Kind={}: {issues}\n",
                        r.group, r.version, r.kind
                    ))
                })
                .collect();
            if !issues.is_empty() {
                warnings.push(json!({
                    "fieldRef": format!("spec.validations[{i}].{field}"),
                    "warning": issues.join("\n"),
                }));
            }
        }
    }
    warnings
}

/// What a validation sees when checked against one kind: `object` and `oldObject` of its
/// type, `params` of the paramKind's, and the policy's variables typed in order.
fn environment(spec: &Value, object: &Ty, params: Option<&Ty>) -> Vec<(&'static str, Ty)> {
    let mut env = vec![
        ("object", object.clone()),
        ("oldObject", object.clone()),
        ("request", types::request()),
        ("namespaceObject", types::namespace()),
        (
            "authorizer",
            Ty::Opaque("kubernetes.authorization.Authorizer"),
        ),
    ];
    if let Some(params) = params {
        env.push(("params", params.clone()));
    }
    let mut variables: Vec<(String, Ty)> = Vec::new();
    for variable in spec["variables"].as_array().into_iter().flatten() {
        let name = variable["name"].as_str().unwrap_or("").to_string();
        let mut scope = env.clone();
        scope.push(("variables", variables_type(&variables)));
        let expression = variable["expression"].as_str().unwrap_or("");
        let ty = check(expression, &scope).unwrap_or(Ty::Unknown);
        variables.push((name, ty));
    }
    env.push(("variables", variables_type(&variables)));
    env
}

fn variables_type(variables: &[(String, Ty)]) -> Ty {
    let fields = variables
        .iter()
        .map(|(n, t)| (n.as_str(), t.clone()))
        .collect();
    Record::ty("kubernetes.variables", fields)
}

/// The kinds a policy's resource rules name: rules with wildcard groups or versions are
/// skipped, as are wildcard resources and subresources.
fn kinds_to_check(state: &State, spec: &Value) -> Vec<Arc<ResourceInfo>> {
    let mut found: Vec<Arc<ResourceInfo>> = Vec::new();
    let rules = spec["matchConstraints"]["resourceRules"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    for rule in rules {
        let list = |key: &str| -> Option<Vec<String>> {
            let mut values: Vec<String> = rule[key]
                .as_array()?
                .iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect();
            values.sort();
            Some(values)
        };
        let (Some(groups), Some(versions), Some(mut resources)) =
            (list("apiGroups"), list("apiVersions"), list("resources"))
        else {
            continue;
        };
        if groups.iter().chain(&versions).any(|v| v.contains('*')) {
            continue;
        }
        resources.retain(|r| !r.contains(['*', '/']));
        for group in &groups {
            for version in &versions {
                for resource in &resources {
                    let Some(r) = state.registry.find(group, version, resource) else {
                        continue;
                    };
                    if !found
                        .iter()
                        .any(|f| f.kind == r.kind && f.group == r.group && f.version == r.version)
                    {
                        found.push(r);
                    }
                    if found.len() == MAX_KINDS {
                        return sorted(found);
                    }
                }
            }
        }
    }
    sorted(found)
}

fn sorted(mut kinds: Vec<Arc<ResourceInfo>>) -> Vec<Arc<ResourceInfo>> {
    kinds.sort_by(|a, b| (&a.group, &a.version, &a.kind).cmp(&(&b.group, &b.version, &b.kind)));
    kinds
}

/// The CEL type of a kind's objects, from its published schema.
fn resource_type(r: &ResourceInfo) -> Option<Ty> {
    let (root, definitions) = kind_schema(r);
    let schema = Schema {
        definitions: Arc::new(definitions),
    };
    schema.decl_type(&root, true, &r.kind)
}

/// A kind's schema and the definitions its references point into.
#[derive(Clone)]
struct Schema {
    definitions: Arc<Map<String, Value>>,
}

impl Schema {
    /// `schema` with its references followed (`$ref`, and a lone `allOf` entry).
    fn resolve(&self, schema: &Value) -> Value {
        let mut current = schema.clone();
        for _ in 0..32 {
            if let Some(reference) = current.get("$ref").and_then(Value::as_str) {
                let name = reference.rsplit('/').next().unwrap_or("");
                match self.definitions.get(name) {
                    Some(target) => current = target.clone(),
                    None => return Value::Null,
                }
            } else if let Some([only]) = current
                .get("allOf")
                .and_then(Value::as_array)
                .map(Vec::as_slice)
            {
                if current.get("type").is_some() {
                    break;
                }
                current = only.clone();
            } else {
                break;
            }
        }
        current
    }

    /// kube-apiserver's `SchemaDeclType`: the CEL type of a schema node, `None` when the
    /// node is not exposed to CEL (no type). `root` adds what every resource has.
    fn decl_type(&self, schema: &Value, root: bool, path: &str) -> Option<Ty> {
        let mut s = self.resolve(schema);
        if s.get("x-kubernetes-int-or-string").and_then(Value::as_bool) == Some(true) {
            return Some(Ty::Dyn);
        }
        if root {
            s = self.with_type_and_object_meta(s);
        }
        let embedded = |v: &Value| {
            self.resolve(v)
                .get("x-kubernetes-embedded-resource")
                .and_then(Value::as_bool)
                == Some(true)
        };
        match s.get("type").and_then(Value::as_str)? {
            "array" => {
                let items = s.get("items")?;
                let item = self.decl_type(items, embedded(items), path)?;
                Some(Ty::List(Box::new(item)))
            }
            "object" => match s.get("additionalProperties").filter(|a| a.is_object()) {
                Some(values) => {
                    let value = self.decl_type(values, embedded(values), path)?;
                    Some(Ty::Map(Box::new(Ty::String), Box::new(value)))
                }
                None => Some(Ty::Object(Arc::new(SchemaObject {
                    schema: self.clone(),
                    node: s,
                    path: path.to_string(),
                }))),
            },
            "string" => Some(match s.get("format").and_then(Value::as_str) {
                Some("byte") => Ty::Bytes,
                Some("duration") => Ty::Duration,
                Some("date" | "date-time") => Ty::Timestamp,
                _ => Ty::String,
            }),
            "boolean" => Some(Ty::Bool),
            "number" => Some(Ty::Double),
            "integer" => Some(Ty::Int),
            _ => None,
        }
    }

    /// What a resource's schema always has: `apiVersion`, `kind` and `metadata.name` and
    /// `generateName` (only those, when the schema's metadata does not say more).
    fn with_type_and_object_meta(&self, mut s: Value) -> Value {
        let props = |v: &Value, key: &str| self.resolve(&v["properties"][key]);
        let is = |v: &Value, ty: &str| v.get("type").and_then(Value::as_str) == Some(ty);
        let meta = props(&s, "metadata");
        let complete = is(&props(&s, "kind"), "string")
            && is(&props(&s, "apiVersion"), "string")
            && is(&meta, "object")
            && is(&props(&meta, "name"), "string")
            && is(&props(&meta, "generateName"), "string");
        if !complete && s.is_object() {
            s["properties"]["kind"] = json!({"type": "string"});
            s["properties"]["apiVersion"] = json!({"type": "string"});
            s["properties"]["metadata"] = json!({"type": "object", "properties": {
                "name": {"type": "string"}, "generateName": {"type": "string"}}});
        }
        s
    }
}

/// An object type read from a schema node, its fields typed when asked for.
struct SchemaObject {
    schema: Schema,
    node: Value,
    path: String,
}

impl Fields for SchemaObject {
    fn name(&self) -> String {
        self.path.clone()
    }

    fn field(&self, name: &str) -> Option<Ty> {
        // kube-apiserver exposes properties named like CEL's reserved words as `__name__`;
        // both spellings are taken here.
        let plain = name
            .strip_prefix("__")
            .and_then(|n| n.strip_suffix("__"))
            .unwrap_or(name);
        let property = self.node["properties"].get(plain)?;
        let embedded = self
            .schema
            .resolve(property)
            .get("x-kubernetes-embedded-resource")
            == Some(&Value::Bool(true));
        let path = format!("{}.{plain}", self.path);
        self.schema.decl_type(property, embedded, &path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::Registry;

    fn deployment_policy(expression: &str) -> Value {
        json!({"spec": {"matchConstraints": {"resourceRules": [
            {"apiGroups": ["apps"], "apiVersions": ["v1"], "resources": ["deployments", "deployments/scale"]},
            {"apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}]},
            "validations": [{"expression": expression, "messageExpression": "'n: ' + object.metadata.namee"}]}})
    }

    /// The warnings of a policy over pods and deployments.
    fn warnings(expression: &str) -> Vec<Value> {
        let registry = Registry::builtin();
        let policy = deployment_policy(expression);
        let kinds: Vec<(Arc<ResourceInfo>, Ty)> =
            [("", "v1", "pods"), ("apps", "v1", "deployments")]
                .into_iter()
                .filter_map(|(g, v, r)| registry.find(g, v, r))
                .map(|info| {
                    let ty = resource_type(&info).expect("a schema");
                    (info, ty)
                })
                .collect();
        warnings_for(&kinds, &policy["spec"], None)
    }

    #[test]
    fn built_in_schemas_type_objects() {
        let registry = Registry::builtin();
        let info = registry
            .find("apps", "v1", "deployments")
            .expect("deployments");
        let ty = resource_type(&info).expect("a type");
        let env = [("object", ty)];
        for (source, expected) in [
            ("object.spec.replicas", "int"),
            ("object.metadata.labels", "map(string, string)"),
            (
                "object.metadata.creationTimestamp",
                "google.protobuf.Timestamp",
            ),
            ("object.spec.template.spec.containers[0].image", "string"),
            (
                "object.spec.template.spec.containers.map(c, c.name)",
                "list(string)",
            ),
            ("object.spec.strategy.rollingUpdate.maxSurge", "dyn"),
            ("object.apiVersion", "string"),
        ] {
            match check(source, &env) {
                Ok(t) => assert_eq!(t.to_string(), expected, "{source}"),
                Err(e) => panic!("{source}: {e}"),
            }
        }
    }

    #[test]
    fn typos_are_warned_per_kind_with_kube_apiserver_words() {
        let w = warnings("object.spec.replicass > 1");
        assert_eq!(w.len(), 2, "{w:?}");
        assert_eq!(w[0]["fieldRef"], "spec.validations[0].expression");
        assert_eq!(
            w[0]["warning"],
            "/v1, Kind=Pod: ERROR: <input>:1:12: undefined field 'replicass'\n | object.spec.replicass > 1\n | ...........^\n\napps/v1, Kind=Deployment: ERROR: <input>:1:12: undefined field 'replicass'\n | object.spec.replicass > 1\n | ...........^\n"
        );
        assert_eq!(w[1]["fieldRef"], "spec.validations[0].messageExpression");
        assert!(
            w[1]["warning"]
                .as_str()
                .unwrap_or("")
                .contains("undefined field 'namee'"),
            "{w:?}"
        );
    }

    #[test]
    fn a_field_every_kind_has_checks_clean() {
        let w = warnings("object.metadata.name.startsWith('web') && has(object.metadata.labels)");
        assert_eq!(w.len(), 1, "only the messageExpression: {w:?}");
    }

    #[test]
    fn custom_schemas_become_types_as_schema_decl_type_makes_them() {
        let schema = Schema {
            definitions: Arc::new(Map::new()),
        };
        let crd = json!({"type": "object", "properties": {
            "spec": {"type": "object", "properties": {
                "size": {"x-kubernetes-int-or-string": true},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "raw": {"x-kubernetes-preserve-unknown-fields": true},
                "opaque": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                "template": {"type": "object", "x-kubernetes-embedded-resource": true}}}}});
        let ty = schema.decl_type(&crd, true, "Widget").expect("an object");
        let env = [("object", ty)];
        let typed = |source: &str| check(source, &env).map(|t| t.to_string());
        assert_eq!(typed("object.spec.size").ok().as_deref(), Some("dyn"));
        assert_eq!(
            typed("object.spec.labels['a']").ok().as_deref(),
            Some("string")
        );
        // What every resource has is there even when the schema does not say it.
        assert_eq!(
            typed("object.metadata.name").ok().as_deref(),
            Some("string")
        );
        assert_eq!(
            typed("object.spec.template.kind").ok().as_deref(),
            Some("string")
        );
        // A property without a type is not exposed; an object's unknown fields are not.
        for source in [
            "object.spec.raw",
            "object.spec.opaque.anything",
            "object.metadata.labels",
        ] {
            let err = typed(source).err().unwrap_or_default();
            assert!(err.contains("undefined field"), "{source}: {err}");
        }
    }
}
