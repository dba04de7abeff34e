//! CustomResourceDefinitions: registering their resources at run time (discovery, routing,
//! OpenAPI and tables follow at once), their `Established` and `NamesAccepted` conditions,
//! and the cleanup of their objects when one is deleted.

#[cfg(test)]
mod conformance;
use crate::resources::{Normalize, PrinterColumn, ResourceInfo};
use crate::status::ApiError;
use crate::values::At;
use serde_json::{json, Value};
use std::sync::Arc;

/// The finalizer kube-apiserver puts on every CRD so its objects go before it does.
pub const CLEANUP_FINALIZER: &str = "customresourcecleanup.apiextensions.k8s.io";

pub(crate) const STORE_KEY: &str = "customresourcedefinitions.apiextensions.k8s.io";

fn s<'a>(v: &'a Value, path: &str) -> &'a str {
    v.at(path).and_then(Value::as_str).unwrap_or("")
}

fn strings(v: &Value, path: &str) -> Vec<String> {
    v.at(path)
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// Checks what kube-apiserver checks of a CRD before storing it; returns the 422 causes.
pub(crate) fn validate(crd: &Value) -> Vec<(String, String)> {
    let mut causes = names_and_scope_causes(crd);
    let versions = crd
        .at("/spec/versions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    causes.extend(storage_version_causes(&versions));
    causes.extend(schema_causes(&versions));
    causes.extend(conversion_causes(crd));
    causes
}

/// The group, names and scope a CRD's resource is registered and routed by.
fn names_and_scope_causes(crd: &Value) -> Vec<(String, String)> {
    let mut causes = Vec::new();
    let group = s(crd, "/spec/group");
    let plural = s(crd, "/spec/names/plural");
    let name = s(crd, "/metadata/name");
    if group.is_empty() || !group.contains('.') {
        causes.push((
            "spec.group".into(),
            format!("Invalid value: \"{group}\": should be a domain with at least one dot"),
        ));
    }
    if plural.is_empty() {
        causes.push(("spec.names.plural".into(), "Required value".into()));
    }
    if s(crd, "/spec/names/kind").is_empty() {
        causes.push(("spec.names.kind".into(), "Required value".into()));
    }
    if name != format!("{plural}.{group}") {
        causes.push((
            "metadata.name".into(),
            format!("Invalid value: \"{name}\": must be spec.names.plural+\".\"+spec.group"),
        ));
    }
    if !matches!(s(crd, "/spec/scope"), "Namespaced" | "Cluster") {
        causes.push((
            "spec.scope".into(),
            format!(
                "Unsupported value: \"{}\": supported values: \"Cluster\", \"Namespaced\"",
                s(crd, "/spec/scope")
            ),
        ));
    }
    causes
}

/// Objects are stored in exactly one version, so exactly one must be marked for storage.
fn storage_version_causes(versions: &[Value]) -> Vec<(String, String)> {
    let mut causes = Vec::new();
    if versions.is_empty() {
        causes.push((
            "spec.versions".into(),
            "Invalid value: null: must have exactly one version marked as storage version".into(),
        ));
    }
    let storage = versions
        .iter()
        .filter(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
        .count();
    if !versions.is_empty() && storage != 1 {
        causes.push((
            "spec.versions".into(),
            "Invalid value: must have exactly one version marked as storage version".into(),
        ));
    }
    causes
}

/// The versions' schemas that do not compile, then the estimated costs of the rules of
/// those that do.
fn schema_causes(versions: &[Value]) -> Vec<(String, String)> {
    let mut causes = Vec::new();
    let mut compiled = Vec::new();
    for (i, v) in versions.iter().enumerate() {
        if let Some(schema) = v.at("/schema/openAPIV3Schema") {
            match crate::schema::Schema::from_openapi(schema) {
                Ok(_) => compiled.push((i, schema)),
                Err(e) => {
                    // One schema for every version is kube-apiserver's `spec.validation`
                    // (its internal form hoists it there), and named so.
                    let shared = versions
                        .iter()
                        .all(|v| v.at("/schema/openAPIV3Schema") == Some(schema));
                    if shared && i > 0 {
                        continue;
                    }
                    let path = match shared {
                        true => "spec.validation.openAPIV3Schema".to_string(),
                        false => format!("spec.versions[{i}].schema.openAPIV3Schema"),
                    };
                    // A rule that does not compile is named where it is; other faults of
                    // the schema at the schema.
                    let rules = infrasim_cel::compile_errors(schema, &path);
                    if rules.is_empty() {
                        causes.push((path, format!("Invalid value: {e}")));
                    } else {
                        causes.extend(rules);
                    }
                }
            }
        }
    }
    causes.extend(estimated_costs(versions, &compiled));
    causes
}

/// A conversion webhook must be reachable and speak `ConversionReview` v1.
fn conversion_causes(crd: &Value) -> Vec<(String, String)> {
    let mut causes = Vec::new();
    match s(crd, "/spec/conversion/strategy") {
        "" | "None" => {}
        "Webhook" => {
            let config = crd.at("/spec/conversion/webhook/clientConfig");
            if config.is_none_or(|c| c.get("url").is_none() && c.get("service").is_none()) {
                causes.push((
                    "spec.conversion.webhook.clientConfig".into(),
                    "Required value: required when strategy is set to Webhook".into(),
                ));
            }
            let versions = crd.at("/spec/conversion/webhook/conversionReviewVersions");
            if !versions
                .and_then(Value::as_array)
                .is_some_and(|v| v.iter().any(|v| v == "v1"))
            {
                causes.push((
                    "spec.conversion.webhook.conversionReviewVersions".into(),
                    "Unsupported value: must include at least one of v1".into(),
                ));
            }
        }
        other => causes.push((
            "spec.conversion.strategy".into(),
            format!("Unsupported value: \"{other}\": supported values: \"None\", \"Webhook\""),
        )),
    }
    causes
}

/// The estimated-cost errors of the rules of the versions' schemas that compile
/// (`(index, schema)`). kube-apiserver checks a schema all versions share once, as its
/// internal form's top-level `spec.validation`, and others at their version.
fn estimated_costs(versions: &[Value], compiled: &[(usize, &Value)]) -> Vec<(String, String)> {
    let shared = !versions.is_empty()
        && compiled.len() == versions.len()
        && compiled.iter().all(|(_, s)| *s == compiled[0].1);
    if shared {
        return infrasim_cel::estimated_cost_errors(
            compiled[0].1,
            "spec.validation.openAPIV3Schema",
        );
    }
    compiled
        .iter()
        .flat_map(|(i, schema)| {
            let path = format!("spec.versions[{i}].schema.openAPIV3Schema");
            infrasim_cel::estimated_cost_errors(schema, &path)
        })
        .collect()
}

/// The resources a CRD serves, one per served version.
pub(crate) fn resources(crd: &Value) -> Vec<ResourceInfo> {
    let group = s(crd, "/spec/group").to_string();
    let plural = s(crd, "/spec/names/plural").to_string();
    let kind = s(crd, "/spec/names/kind").to_string();
    let singular = match s(crd, "/spec/names/singular") {
        "" => kind.to_ascii_lowercase(),
        x => x.to_string(),
    };
    let list_kind = match s(crd, "/spec/names/listKind") {
        "" => format!("{kind}List"),
        x => x.to_string(),
    };
    let namespaced = s(crd, "/spec/scope") == "Namespaced";
    let storage = crd
        .at("/spec/versions")
        .and_then(Value::as_array)
        .and_then(|vs| {
            vs.iter()
                .find(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
        })
        .and_then(|v| v.get("name").and_then(Value::as_str))
        .map(|v| format!("{group}/{v}"));
    let conversion = (s(crd, "/spec/conversion/strategy") == "Webhook")
        .then(|| crd.at("/spec/conversion/webhook/clientConfig").cloned())
        .flatten()
        .map(Arc::new);
    let versions = crd
        .at("/spec/versions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    versions
        .iter()
        .filter(|v| v.get("served").and_then(Value::as_bool).unwrap_or(true))
        .filter_map(|v| {
            let version = v.get("name")?.as_str()?.to_string();
            let schema = v.at("/schema/openAPIV3Schema").cloned().unwrap_or_else(
                || json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}),
            );
            let openapi = schema.clone();
            let schema = crate::schema::Schema::for_serving(&schema).ok()?;
            let columns = v
                .get("additionalPrinterColumns")
                .and_then(Value::as_array)
                .map(|cols| {
                    cols.iter()
                        .map(|c| PrinterColumn {
                            name: s(c, "/name").to_string(),
                            ty: s(c, "/type").to_string(),
                            json_path: s(c, "/jsonPath").to_string(),
                            priority: c.get("priority").and_then(Value::as_i64).unwrap_or(0),
                            description: s(c, "/description").to_string(),
                            format: s(c, "/format").to_string(),
                        })
                        .collect()
                })
                .unwrap_or_default();
            Some(ResourceInfo {
                api_version: format!("{group}/{version}"),
                group: group.clone(),
                version,
                kind: kind.clone(),
                list_kind: list_kind.clone(),
                plural: plural.clone(),
                singular: singular.clone(),
                namespaced,
                short_names: strings(crd, "/spec/names/shortNames"),
                categories: strings(crd, "/spec/names/categories"),
                has_status: v.at("/subresources/status").is_some(),
                store_key: format!("{plural}.{group}"),
                normalize: Normalize::Schema(Arc::new(schema)),
                printer_columns: Some(columns),
                custom: true,
                computed: None,
                scale: v
                    .at("/subresources/scale")
                    .map(|sc| crate::resources::ScalePaths {
                        spec: s(sc, "/specReplicasPath").to_string(),
                        status: s(sc, "/statusReplicasPath").to_string(),
                        selector: sc
                            .get("labelSelectorPath")
                            .and_then(Value::as_str)
                            .map(str::to_string),
                    }),
                schema: crate::resources::SchemaSource::Inline(openapi),
                storage_version: storage.clone(),
                conversion: conversion.clone(),
                deprecation: deprecation(crd, v),
                // apiextensions-apiserver's custom resource storage does not set
                // ReturnDeletedObject: a delete answers with a Status.
                stored_as: None,
                returns_deleted: false,
            })
        })
        .collect()
}

/// The warning kube-apiserver gives for each request to a deprecated version `v` of `crd`:
/// its `deprecationWarning`, or "<group>/<version> <Kind> is deprecated", naming the
/// highest-priority served version that is not deprecated and ranks above it.
fn deprecation(crd: &Value, v: &Value) -> Option<String> {
    if v.get("deprecated").and_then(Value::as_bool) != Some(true) {
        return None;
    }
    if let Some(text) = v.get("deprecationWarning").and_then(Value::as_str) {
        return Some(text.to_string());
    }
    let (group, kind) = (s(crd, "/spec/group"), s(crd, "/spec/names/kind"));
    let name = s(v, "/name");
    let mut message = format!("{group}/{name} {kind} is deprecated");
    let newer = crd
        .at("/spec/versions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|o| o.get("served").and_then(Value::as_bool) != Some(false))
        .filter(|o| o.get("deprecated").and_then(Value::as_bool) != Some(true))
        .map(|o| s(o, "/name"))
        .filter(|o| crate::version::priority_order(o, name).is_lt())
        .min_by(|a, b| crate::version::priority_order(a, b));
    if let Some(newer) = newer {
        message.push_str(&format!("; use {group}/{newer} {kind}"));
    }
    Some(message)
}

/// Warnings for a CRD's author: the CEL rules this server will not enforce, because they
/// call functions it does not implement.
pub(crate) fn warnings(crd: &Value) -> Vec<String> {
    let versions = crd.at("/spec/versions").and_then(Value::as_array);
    let mut out = Vec::new();
    for v in versions.into_iter().flatten() {
        let Some(schema) = v.at("/schema/openAPIV3Schema") else {
            continue;
        };
        let name = v.get("name").and_then(Value::as_str).unwrap_or("");
        if let Ok(schema) = crate::schema::Schema::from_openapi(schema) {
            out.extend(schema.unenforced_rules().into_iter().map(|r| {
                format!("version {name}: x-kubernetes-validations rule not enforced by infrasim, which lacks its functions: {r}")
            }));
        }
    }
    out
}

/// The finalizer every new CRD gets.
pub(crate) fn add_finalizer(crd: &mut Value) {
    let meta = &mut crd["metadata"];
    let list = meta
        .as_object_mut()
        .map(|m| m.entry("finalizers").or_insert_with(|| json!([])));
    if let Some(Value::Array(list)) = list {
        if !list.iter().any(|f| f.as_str() == Some(CLEANUP_FINALIZER)) {
            list.push(json!(CLEANUP_FINALIZER));
        }
    }
}

/// A CRD failed validation: 422 with its causes.
pub(crate) fn invalid(name: &str, causes: Vec<(String, String)>) -> ApiError {
    ApiError::invalid(
        "apiextensions.k8s.io",
        "CustomResourceDefinition",
        name,
        causes,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crd(versions: Value) -> Value {
        json!({"spec": {"group": "example.com", "names": {"kind": "Widget"}, "versions": versions}})
    }

    #[test]
    fn a_crd_whose_rules_could_cost_too_much_is_refused_at_its_schemas_path() {
        let schema = |max_items: Option<u64>| {
            let mut list = json!({"type": "array", "items": {"type": "array", "items": {"type": "string"}},
                "x-kubernetes-validations": [{"rule": "self.all(x, x.all(y, y.startsWith('a')))"}]});
            if let Some(m) = max_items {
                list["maxItems"] = json!(m);
                list["items"]["maxItems"] = json!(m);
            }
            json!({"openAPIV3Schema": {"type": "object", "properties": {"spec": {"type": "object",
                "properties": {"lists": list}}}}})
        };
        let named = |versions: Value| {
            let mut c = crd(versions);
            c["metadata"] = json!({"name": "widgets.example.com"});
            c["spec"]["names"]["plural"] = json!("widgets");
            c["spec"]["scope"] = json!("Namespaced");
            c
        };
        let one =
            named(json!([{"name": "v1", "served": true, "storage": true, "schema": schema(None)}]));
        let rule =
            ".openAPIV3Schema.properties[spec].properties[lists].x-kubernetes-validations[0].rule";
        let causes = validate(&one);
        assert_eq!(causes[0].0, format!("spec.validation{rule}"), "{causes:?}");
        assert!(causes[0].1.starts_with(
            "Forbidden: estimated rule cost exceeds budget by factor of more than 100x"
        ));
        assert_eq!(
            causes.last().map(|c| c.0.as_str()),
            Some("spec.validation.openAPIV3Schema")
        );
        let bounded = named(
            json!([{"name": "v1", "served": true, "storage": true, "schema": schema(Some(100))}]),
        );
        assert_eq!(validate(&bounded), []);
        // Versions with schemas of their own are checked at their own paths.
        let two = named(json!([
            {"name": "v1", "served": true, "storage": true, "schema": schema(Some(100))},
            {"name": "v2", "served": true, "storage": false, "schema": schema(None)}]));
        let causes = validate(&two);
        assert_eq!(
            causes[0].0,
            format!("spec.versions[1].schema{rule}"),
            "{causes:?}"
        );
    }

    #[test]
    fn a_deprecated_version_names_the_best_newer_one() {
        let c = crd(json!([
            {"name": "v1alpha1", "deprecated": true},
            {"name": "v1beta1", "served": true},
            {"name": "v1", "served": true},
            {"name": "v2", "served": false},
        ]));
        let versions = c.at("/spec/versions").unwrap().as_array().unwrap();
        assert_eq!(
            deprecation(&c, &versions[0]).as_deref(),
            Some("example.com/v1alpha1 Widget is deprecated; use example.com/v1 Widget")
        );
        assert_eq!(deprecation(&c, &versions[1]), None);
    }

    #[test]
    fn a_deprecation_warning_of_its_own_wins() {
        let c = crd(json!([{"name": "v1", "deprecated": true, "deprecationWarning": "gone soon"}]));
        let v = &c.at("/spec/versions").unwrap()[0];
        assert_eq!(deprecation(&c, v).as_deref(), Some("gone soon"));
        let c = crd(json!([{"name": "v1", "deprecated": true}]));
        let v = &c.at("/spec/versions").unwrap()[0];
        assert_eq!(
            deprecation(&c, v).as_deref(),
            Some("example.com/v1 Widget is deprecated")
        );
    }
}
