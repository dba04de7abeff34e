//! OpenAPI. `/openapi/v3`: the index of group/version documents and, per group/version, the
//! paths and operations served (with the `x-kubernetes-group-version-kind` extensions and the
//! `fieldValidation` parameter kubectl looks for before it relies on server-side validation)
//! and the component schemas `kubectl explain` reads: k8s-openapi's schemas for built-in kinds,
//! each CRD version's own. `/openapi/v2`: the same as one Swagger 2.0 document, in JSON or in
//! gnostic's protobuf encoding (see `openapi_v2_proto`).

use crate::http::{json_value, HandlerResult};
use crate::resources::{ResourceInfo, SchemaSource};
use crate::state::State;
use crate::status::ApiError;
use serde_json::{json, Map, Value};

fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// `GET /openapi/v3` or `/openapi/v3/{api/v1 | apis/g/v}`.
pub(crate) fn serve(state: &State, rest: &str, headers: &http::HeaderMap) -> HandlerResult {
    let rest = rest.trim_matches('/');
    if rest == "v2" {
        return serve_v2(state, headers);
    }
    if rest.is_empty() || rest == "v3" {
        let mut paths = Map::new();
        for (group, versions) in state.registry.groups() {
            for version in versions {
                let p = gv_path(&group, &version);
                paths.insert(
                    p.clone(),
                    json!({"serverRelativeURL": format!("/openapi/v3/{p}?hash={}", hash(state))}),
                );
            }
        }
        return Ok(json_value(200, &json!({"paths": paths})));
    }
    let Some(gv) = rest.strip_prefix("v3/") else {
        return Err(ApiError::not_found(
            "the server could not find the requested resource",
        ));
    };
    let (group, version) = match gv.split('/').collect::<Vec<_>>().as_slice() {
        ["api", v] => (String::new(), v.to_string()),
        ["apis", g, v] => (g.to_string(), v.to_string()),
        _ => {
            return Err(ApiError::not_found(
                "the server could not find the requested resource",
            ))
        }
    };
    let mut paths = Map::new();
    let resources = state.registry.in_group_version(&group, &version);
    for r in &resources {
        add_paths(&mut paths, r);
    }
    if paths.is_empty() {
        return Err(ApiError::not_found(
            "the server could not find the requested resource",
        ));
    }
    Ok(json_value(
        200,
        &json!({
            "openapi": "3.0.0",
            "info": {"title": "Kubernetes", "version": state.config.kubernetes_version},
            "paths": paths,
            "components": {"schemas": schemas(&resources)},
        }),
    ))
}

/// The component schemas of a group/version: k8s-openapi's schemas for built-in kinds (with
/// everything they reference), each CRD version's own schema, and on each kind the
/// `x-kubernetes-group-version-kind` extension `kubectl explain` finds it by.
fn schemas(resources: &[std::sync::Arc<ResourceInfo>]) -> Value {
    schemas_with(resources, schemars::generate::SchemaSettings::openapi3())
}

fn schemas_with(
    resources: &[std::sync::Arc<ResourceInfo>],
    settings: schemars::generate::SchemaSettings,
) -> Value {
    let mut generator = settings.into_generator();
    let mut kinds: Vec<(String, &ResourceInfo)> = Vec::new();
    let mut inline = Map::new();
    for r in resources {
        match &r.schema {
            SchemaSource::Typed(f) => {
                let reference = f(&mut generator);
                if let Some(name) = reference
                    .get("$ref")
                    .and_then(Value::as_str)
                    .and_then(|s| s.rsplit('/').next())
                {
                    kinds.push((name.to_string(), r));
                }
            }
            SchemaSource::Inline(schema) => {
                let name = format!("{}.{}.{}", reverse_domain(&r.group), r.version, r.kind);
                let mut schema = schema.clone();
                schema["x-kubernetes-group-version-kind"] =
                    json!([{"group": r.group, "version": r.version, "kind": r.kind}]);
                inline.insert(name, schema);
            }
        }
    }
    let mut definitions = generator.take_definitions(true);
    for (name, r) in kinds {
        if let Some(schema) = definitions.get_mut(&name) {
            schema["x-kubernetes-group-version-kind"] =
                json!([{"group": r.group, "version": r.version, "kind": r.kind}]);
        }
    }
    definitions.extend(inline);
    Value::Object(definitions)
}

/// One kind's schema as `/openapi/v3` publishes it, with the definitions its references
/// (`#/components/schemas/<name>`) point into. A CRD's `metadata` is ObjectMeta's, as
/// kube-apiserver publishes it for custom resources.
pub(crate) fn kind_schema(r: &ResourceInfo) -> (Value, Map<String, Value>) {
    let mut generator = schemars::generate::SchemaSettings::openapi3().into_generator();
    let root = match &r.schema {
        SchemaSource::Typed(f) => Value::from(f(&mut generator)),
        SchemaSource::Inline(schema) => {
            let meta = generator
                .subschema_for::<k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta>();
            let mut schema = schema.clone();
            if schema.is_object() {
                schema["properties"]["metadata"] = Value::from(meta);
            }
            schema
        }
    };
    (root, generator.take_definitions(true))
}

/// The media type of the protobuf encoding, and the older spelling clients still send.
const V2_PROTOBUF: &str = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf";
const V2_PROTOBUF_OLD: &str = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";

/// `GET /openapi/v2`: the Swagger 2.0 document of every served kind, in JSON or, for clients
/// that ask for it (client-go's `OpenAPISchema()`), in gnostic's protobuf encoding. The first
/// acceptable media type of `Accept` wins.
fn serve_v2(state: &State, headers: &http::HeaderMap) -> HandlerResult {
    let accept = headers
        .get(http::header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let wanted = if accept.trim().is_empty() {
        Some(false)
    } else {
        accept
            .split(',')
            .find_map(|a| match a.split(';').next().unwrap_or("").trim() {
                "application/json" | "*/*" | "application/*" => Some(false),
                V2_PROTOBUF | V2_PROTOBUF_OLD => Some(true),
                _ => None,
            })
    };
    let Some(protobuf) = wanted else {
        return Err(ApiError::not_acceptable(accept));
    };
    let doc = v2_document(state);
    if protobuf {
        // kube-apiserver answers the protobuf flavour as octet-stream: the `@` of the media
        // type clients ask for is not valid in a Content-Type, and client-go parses it.
        return Ok(crate::http::json_typed(
            200,
            crate::openapi_v2_proto::encode(&doc),
            "application/octet-stream",
        ));
    }
    Ok(json_value(200, &doc))
}

/// The Swagger 2.0 document of every served kind.
fn v2_document(state: &State) -> Value {
    let resources = state.registry.all();
    let mut paths = Map::new();
    for r in &resources {
        add_paths(&mut paths, r);
    }
    // Swagger 2.0 parameters carry their type directly, not in a schema.
    for path in paths.values_mut() {
        for op in path
            .as_object_mut()
            .into_iter()
            .flat_map(|m| m.values_mut())
        {
            for param in op
                .get_mut("parameters")
                .and_then(Value::as_array_mut)
                .into_iter()
                .flatten()
            {
                if let Some(schema) = param.as_object_mut().and_then(|p| p.remove("schema")) {
                    if let (Some(p), Some(schema)) = (param.as_object_mut(), schema.as_object()) {
                        p.extend(schema.clone());
                    }
                }
            }
        }
    }
    let mut settings = schemars::generate::SchemaSettings::draft07();
    settings.definitions_path = "/definitions".into();
    let mut definitions = schemas_with(&resources, settings);
    swagger2_refs(&mut definitions);
    json!({
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": state.config.kubernetes_version},
        "paths": paths,
        "definitions": definitions,
    })
}

/// Swagger 2.0 as Kubernetes writes it: a field that refers to a definition carries `$ref`
/// beside its description, where JSON Schema draft 7 (what schemars writes) wraps the reference
/// in a one-element `allOf`. Readers of the v2 document (kube-openapi's proto models, behind
/// `kubectl explain --output=plaintext-openapiv2`) only follow a direct `$ref`.
fn swagger2_refs(v: &mut Value) {
    match v {
        Value::Object(m) => {
            let single_ref = m
                .get("allOf")
                .and_then(Value::as_array)
                .filter(|a| a.len() == 1)
                .and_then(|a| a[0].as_object())
                .filter(|o| o.len() == 1)
                .and_then(|o| o.get("$ref"))
                .cloned();
            if let Some(reference) = single_ref {
                m.remove("allOf");
                m.insert("$ref".into(), reference);
            }
            for child in m.values_mut() {
                swagger2_refs(child);
            }
        }
        Value::Array(a) => a.iter_mut().for_each(swagger2_refs),
        _ => {}
    }
}

/// `example.com` → `com.example`, as Kubernetes names CRD schemas.
fn reverse_domain(group: &str) -> String {
    group.split('.').rev().collect::<Vec<_>>().join(".")
}

/// A stable tag for the documents: they change only with the binary.
fn hash(state: &State) -> String {
    let n: usize = state.registry.all().len();
    format!("{:016X}", n as u64 ^ 0x1f5e_a11c_e000_0000)
}

fn query_param(name: &str) -> Value {
    json!({"name": name, "in": "query", "schema": {"type": "string", "uniqueItems": true}})
}

fn operation(r: &ResourceInfo, action: &str, id: &str, params: &[&str]) -> Value {
    json!({
        "operationId": id,
        "parameters": params.iter().map(|p| query_param(p)).collect::<Vec<_>>(),
        "responses": {"200": {"description": "OK"}, "401": {"description": "Unauthorized"}},
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": {"group": r.group, "version": r.version, "kind": r.kind},
    })
}

fn add_paths(paths: &mut Map<String, Value>, r: &ResourceInfo) {
    let base = format!("/{}", gv_path(&r.group, &r.version));
    let collection = if r.namespaced {
        format!("{base}/namespaces/{{namespace}}/{}", r.plural)
    } else {
        format!("{base}/{}", r.plural)
    };
    let item = format!("{collection}/{{name}}");
    let write = ["dryRun", "fieldManager", "fieldValidation", "pretty"];
    let list = [
        "allowWatchBookmarks",
        "continue",
        "fieldSelector",
        "labelSelector",
        "limit",
        "resourceVersion",
        "resourceVersionMatch",
        "sendInitialEvents",
        "timeoutSeconds",
        "watch",
    ];
    paths.insert(
        collection,
        json!({
            "get": operation(r, "list", &format!("list{}", r.kind), &list),
            "post": operation(r, "post", &format!("create{}", r.kind), &write),
            "delete": operation(r, "deletecollection", &format!("deletecollection{}", r.kind), &list),
        }),
    );
    paths.insert(
        item.clone(),
        json!({
            "get": operation(r, "get", &format!("read{}", r.kind), &["pretty"]),
            "put": operation(r, "put", &format!("replace{}", r.kind), &write),
            "patch": operation(r, "patch", &format!("patch{}", r.kind), &["dryRun", "fieldManager", "fieldValidation", "force", "pretty"]),
            "delete": operation(r, "delete", &format!("delete{}", r.kind), &["dryRun", "gracePeriodSeconds", "propagationPolicy"]),
        }),
    );
    if r.has_status {
        paths.insert(
            format!("{item}/status"),
            json!({
                "get": operation(r, "get", &format!("read{}Status", r.kind), &["pretty"]),
                "put": operation(r, "put", &format!("replace{}Status", r.kind), &write),
                "patch": operation(r, "patch", &format!("patch{}Status", r.kind), &["dryRun", "fieldManager", "fieldValidation", "force", "pretty"]),
            }),
        );
    }
}
