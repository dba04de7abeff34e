//! `/openapi/v2` in protobuf, as client-go's `OpenAPISchema()` asks for it (`Accept:
//! application/com.github.proto-openapi.spec.v2@v1.0+protobuf`): the Swagger 2.0 document
//! encoded as gnostic's `openapi.v2.Document`.
//!
//! The messages below declare only what the document we serve uses, with gnostic's field
//! numbers (its `OpenAPIv2.proto`); values without a schema of their own (defaults, enums,
//! vendor extensions) travel as `Any.yaml`, which readers parse as YAML: JSON text is valid
//! YAML, so they are written as JSON.

use serde_json::{Map, Value};

#[derive(Clone, PartialEq, prost::Message)]
pub struct Document {
    #[prost(string, tag = "1")]
    pub swagger: String,
    #[prost(message, optional, tag = "2")]
    pub info: Option<Info>,
    #[prost(string, tag = "3")]
    pub host: String,
    #[prost(string, tag = "4")]
    pub base_path: String,
    #[prost(string, repeated, tag = "5")]
    pub schemes: Vec<String>,
    #[prost(string, repeated, tag = "6")]
    pub consumes: Vec<String>,
    #[prost(string, repeated, tag = "7")]
    pub produces: Vec<String>,
    #[prost(message, optional, tag = "8")]
    pub paths: Option<Paths>,
    #[prost(message, optional, tag = "9")]
    pub definitions: Option<Definitions>,
    #[prost(message, repeated, tag = "16")]
    pub vendor_extension: Vec<NamedAny>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Info {
    #[prost(string, tag = "1")]
    pub title: String,
    #[prost(string, tag = "2")]
    pub version: String,
    #[prost(string, tag = "3")]
    pub description: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Any {
    #[prost(string, tag = "2")]
    pub yaml: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct NamedAny {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(message, optional, tag = "2")]
    pub value: Option<Any>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Paths {
    #[prost(message, repeated, tag = "1")]
    pub vendor_extension: Vec<NamedAny>,
    #[prost(message, repeated, tag = "2")]
    pub path: Vec<NamedPathItem>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct NamedPathItem {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(message, optional, tag = "2")]
    pub value: Option<PathItem>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct PathItem {
    #[prost(message, optional, tag = "2")]
    pub get: Option<Operation>,
    #[prost(message, optional, tag = "3")]
    pub put: Option<Operation>,
    #[prost(message, optional, tag = "4")]
    pub post: Option<Operation>,
    #[prost(message, optional, tag = "5")]
    pub delete: Option<Operation>,
    #[prost(message, optional, tag = "8")]
    pub patch: Option<Operation>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Operation {
    #[prost(string, repeated, tag = "1")]
    pub tags: Vec<String>,
    #[prost(string, tag = "3")]
    pub description: String,
    #[prost(string, tag = "5")]
    pub operation_id: String,
    #[prost(string, repeated, tag = "6")]
    pub produces: Vec<String>,
    #[prost(string, repeated, tag = "7")]
    pub consumes: Vec<String>,
    #[prost(message, repeated, tag = "8")]
    pub parameters: Vec<ParametersItem>,
    #[prost(message, optional, tag = "9")]
    pub responses: Option<Responses>,
    #[prost(message, repeated, tag = "13")]
    pub vendor_extension: Vec<NamedAny>,
}

/// `ParametersItem { oneof { Parameter parameter = 1; ... } }`, holding a
/// `Parameter { oneof { ...; NonBodyParameter non_body_parameter = 2; } }`, holding a
/// `NonBodyParameter { oneof { ...; QueryParameterSubSchema query_parameter_sub_schema = 3; } }`:
/// the only kind of parameter the document has (query parameters).
#[derive(Clone, PartialEq, prost::Message)]
pub struct ParametersItem {
    #[prost(message, optional, tag = "1")]
    pub parameter: Option<Parameter>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Parameter {
    #[prost(message, optional, tag = "2")]
    pub non_body_parameter: Option<NonBodyParameter>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct NonBodyParameter {
    #[prost(message, optional, tag = "3")]
    pub query_parameter_sub_schema: Option<QueryParameterSubSchema>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct QueryParameterSubSchema {
    #[prost(bool, tag = "1")]
    pub required: bool,
    #[prost(string, tag = "2")]
    pub r#in: String,
    #[prost(string, tag = "3")]
    pub description: String,
    #[prost(string, tag = "4")]
    pub name: String,
    #[prost(string, tag = "6")]
    pub r#type: String,
    #[prost(bool, tag = "20")]
    pub unique_items: bool,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Responses {
    #[prost(message, repeated, tag = "1")]
    pub response_code: Vec<NamedResponseValue>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct NamedResponseValue {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(message, optional, tag = "2")]
    pub value: Option<ResponseValue>,
}

/// `ResponseValue { oneof { Response response = 1; JsonReference json_reference = 2; } }`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ResponseValue {
    #[prost(message, optional, tag = "1")]
    pub response: Option<Response>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Response {
    #[prost(string, tag = "1")]
    pub description: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Definitions {
    #[prost(message, repeated, tag = "1")]
    pub additional_properties: Vec<NamedSchema>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct NamedSchema {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(message, optional, tag = "2")]
    pub value: Option<Schema>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Schema {
    #[prost(string, tag = "1")]
    pub r#ref: String,
    #[prost(string, tag = "2")]
    pub format: String,
    #[prost(string, tag = "3")]
    pub title: String,
    #[prost(string, tag = "4")]
    pub description: String,
    #[prost(message, optional, tag = "5")]
    pub default: Option<Any>,
    #[prost(double, tag = "6")]
    pub multiple_of: f64,
    #[prost(double, tag = "7")]
    pub maximum: f64,
    #[prost(bool, tag = "8")]
    pub exclusive_maximum: bool,
    #[prost(double, tag = "9")]
    pub minimum: f64,
    #[prost(bool, tag = "10")]
    pub exclusive_minimum: bool,
    #[prost(int64, tag = "11")]
    pub max_length: i64,
    #[prost(int64, tag = "12")]
    pub min_length: i64,
    #[prost(string, tag = "13")]
    pub pattern: String,
    #[prost(int64, tag = "14")]
    pub max_items: i64,
    #[prost(int64, tag = "15")]
    pub min_items: i64,
    #[prost(bool, tag = "16")]
    pub unique_items: bool,
    #[prost(int64, tag = "17")]
    pub max_properties: i64,
    #[prost(int64, tag = "18")]
    pub min_properties: i64,
    #[prost(string, repeated, tag = "19")]
    pub required: Vec<String>,
    #[prost(message, repeated, tag = "20")]
    pub r#enum: Vec<Any>,
    #[prost(message, optional, tag = "21")]
    pub additional_properties: Option<AdditionalPropertiesItem>,
    #[prost(message, optional, tag = "22")]
    pub r#type: Option<TypeItem>,
    #[prost(message, optional, tag = "23")]
    pub items: Option<ItemsItem>,
    #[prost(message, repeated, tag = "24")]
    pub all_of: Vec<Schema>,
    #[prost(message, optional, tag = "25")]
    pub properties: Option<Properties>,
    #[prost(bool, tag = "27")]
    pub read_only: bool,
    #[prost(message, optional, tag = "30")]
    pub example: Option<Any>,
    #[prost(message, repeated, tag = "31")]
    pub vendor_extension: Vec<NamedAny>,
}

/// `AdditionalPropertiesItem { oneof { Schema schema = 1; bool boolean = 2; } }`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct AdditionalPropertiesItem {
    #[prost(oneof = "additional_properties::Oneof", tags = "1, 2")]
    pub oneof: Option<additional_properties::Oneof>,
}

pub mod additional_properties {
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub enum Oneof {
        #[prost(message, tag = "1", boxed)]
        Schema(Box<super::Schema>),
        #[prost(bool, tag = "2")]
        Boolean(bool),
    }
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct TypeItem {
    #[prost(string, repeated, tag = "1")]
    pub value: Vec<String>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ItemsItem {
    #[prost(message, repeated, tag = "1")]
    pub schema: Vec<Schema>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Properties {
    #[prost(message, repeated, tag = "1")]
    pub additional_properties: Vec<NamedSchema>,
}

fn any(v: &Value) -> Any {
    Any {
        yaml: v.to_string(),
    }
}

/// The `x-…` keys of a JSON object, as vendor extensions.
fn extensions(m: &Map<String, Value>) -> Vec<NamedAny> {
    m.iter()
        .filter(|(k, _)| k.starts_with("x-"))
        .map(|(k, v)| NamedAny {
            name: k.clone(),
            value: Some(any(v)),
        })
        .collect()
}

fn string(m: &Map<String, Value>, k: &str) -> String {
    m.get(k).and_then(Value::as_str).unwrap_or("").to_string()
}

fn strings(v: Option<&Value>) -> Vec<String> {
    match v {
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(a)) => a
            .iter()
            .filter_map(|x| x.as_str().map(str::to_string))
            .collect(),
        _ => Vec::new(),
    }
}

/// A JSON Schema (Swagger 2.0 flavour) as gnostic's `Schema`.
pub fn schema(v: &Value) -> Schema {
    let Some(m) = v.as_object() else {
        return Schema::default();
    };
    let f = |k: &str| m.get(k).and_then(Value::as_f64).unwrap_or(0.0);
    let i = |k: &str| m.get(k).and_then(Value::as_i64).unwrap_or(0);
    let b = |k: &str| m.get(k).and_then(Value::as_bool).unwrap_or(false);
    let named = |k: &str| -> Vec<NamedSchema> {
        m.get(k)
            .and_then(Value::as_object)
            .map(|props| {
                props
                    .iter()
                    .map(|(name, s)| NamedSchema {
                        name: name.clone(),
                        value: Some(schema(s)),
                    })
                    .collect()
            })
            .unwrap_or_default()
    };
    let types = strings(m.get("type"));
    Schema {
        r#ref: string(m, "$ref"),
        format: string(m, "format"),
        title: string(m, "title"),
        description: string(m, "description"),
        default: m.get("default").map(any),
        multiple_of: f("multipleOf"),
        maximum: f("maximum"),
        exclusive_maximum: b("exclusiveMaximum"),
        minimum: f("minimum"),
        exclusive_minimum: b("exclusiveMinimum"),
        max_length: i("maxLength"),
        min_length: i("minLength"),
        pattern: string(m, "pattern"),
        max_items: i("maxItems"),
        min_items: i("minItems"),
        unique_items: b("uniqueItems"),
        max_properties: i("maxProperties"),
        min_properties: i("minProperties"),
        required: strings(m.get("required")),
        r#enum: m
            .get("enum")
            .and_then(Value::as_array)
            .map(|a| a.iter().map(any).collect())
            .unwrap_or_default(),
        additional_properties: match m.get("additionalProperties") {
            Some(Value::Bool(allowed)) => Some(AdditionalPropertiesItem {
                oneof: Some(additional_properties::Oneof::Boolean(*allowed)),
            }),
            Some(s @ Value::Object(_)) => Some(AdditionalPropertiesItem {
                oneof: Some(additional_properties::Oneof::Schema(Box::new(schema(s)))),
            }),
            _ => None,
        },
        // JSON Schema's `null` member of a type list has no Swagger 2.0 counterpart.
        r#type: (!types.is_empty()).then(|| TypeItem {
            value: types.into_iter().filter(|t| t != "null").collect(),
        }),
        items: match m.get("items") {
            Some(Value::Array(a)) => Some(ItemsItem {
                schema: a.iter().map(schema).collect(),
            }),
            Some(s @ Value::Object(_)) => Some(ItemsItem {
                schema: vec![schema(s)],
            }),
            _ => None,
        },
        all_of: m
            .get("allOf")
            .and_then(Value::as_array)
            .map(|a| a.iter().map(schema).collect())
            .unwrap_or_default(),
        properties: m.get("properties").map(|_| Properties {
            additional_properties: named("properties"),
        }),
        read_only: b("readOnly"),
        example: m.get("example").map(any),
        vendor_extension: extensions(m),
    }
}

fn operation(v: &Value) -> Option<Operation> {
    let m = v.as_object()?;
    let parameters = m
        .get("parameters")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_object)
        .map(|p| ParametersItem {
            parameter: Some(Parameter {
                non_body_parameter: Some(NonBodyParameter {
                    query_parameter_sub_schema: Some(QueryParameterSubSchema {
                        required: p.get("required").and_then(Value::as_bool).unwrap_or(false),
                        r#in: string(p, "in"),
                        description: string(p, "description"),
                        name: string(p, "name"),
                        r#type: string(p, "type"),
                        unique_items: p
                            .get("uniqueItems")
                            .and_then(Value::as_bool)
                            .unwrap_or(false),
                    }),
                }),
            }),
        })
        .collect();
    let responses = m
        .get("responses")
        .and_then(Value::as_object)
        .map(|r| Responses {
            response_code: r
                .iter()
                .map(|(code, resp)| NamedResponseValue {
                    name: code.clone(),
                    value: Some(ResponseValue {
                        response: Some(Response {
                            description: resp
                                .get("description")
                                .and_then(Value::as_str)
                                .unwrap_or("")
                                .to_string(),
                        }),
                    }),
                })
                .collect(),
        });
    Some(Operation {
        tags: strings(m.get("tags")),
        description: string(m, "description"),
        operation_id: string(m, "operationId"),
        produces: strings(m.get("produces")),
        consumes: strings(m.get("consumes")),
        parameters,
        responses,
        vendor_extension: extensions(m),
    })
}

/// The Swagger 2.0 document (JSON) as a gnostic `Document`.
pub fn document(doc: &Value) -> Document {
    let empty = Map::new();
    let m = doc.as_object().unwrap_or(&empty);
    let info = m.get("info").and_then(Value::as_object).map(|i| Info {
        title: string(i, "title"),
        version: string(i, "version"),
        description: string(i, "description"),
    });
    let paths = m.get("paths").and_then(Value::as_object).map(|p| Paths {
        vendor_extension: Vec::new(),
        path: p
            .iter()
            .map(|(name, item)| NamedPathItem {
                name: name.clone(),
                value: Some(PathItem {
                    get: item.get("get").and_then(operation),
                    put: item.get("put").and_then(operation),
                    post: item.get("post").and_then(operation),
                    delete: item.get("delete").and_then(operation),
                    patch: item.get("patch").and_then(operation),
                }),
            })
            .collect(),
    });
    let definitions = m
        .get("definitions")
        .and_then(Value::as_object)
        .map(|d| Definitions {
            additional_properties: d
                .iter()
                .map(|(name, s)| NamedSchema {
                    name: name.clone(),
                    value: Some(schema(s)),
                })
                .collect(),
        });
    Document {
        swagger: string(m, "swagger"),
        info,
        host: string(m, "host"),
        base_path: string(m, "basePath"),
        schemes: strings(m.get("schemes")),
        consumes: strings(m.get("consumes")),
        produces: strings(m.get("produces")),
        paths,
        definitions,
        vendor_extension: extensions(m),
    }
}

/// The protobuf encoding of the Swagger 2.0 document `doc`.
pub fn encode(doc: &Value) -> Vec<u8> {
    prost::Message::encode_to_vec(&document(doc))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_swagger_document_survives_the_encoding() {
        let doc = json!({
            "swagger": "2.0",
            "info": {"title": "Kubernetes", "version": "v1.31.0"},
            "paths": {"/api/v1/pods": {"get": {"operationId": "listPods",
                "parameters": [{"name": "limit", "in": "query", "type": "string", "uniqueItems": true}],
                "responses": {"200": {"description": "OK"}}}}},
            "definitions": {"io.k8s.api.core.v1.Pod": {
                "type": "object", "description": "a pod", "required": ["spec"],
                "properties": {
                    "spec": {"$ref": "#/definitions/io.k8s.api.core.v1.PodSpec", "description": "its spec"},
                    "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                    "phase": {"type": "string", "enum": ["Pending", "Running"], "default": "Pending"},
                    "ports": {"type": "array", "items": {"type": "integer", "format": "int32"}},
                },
                "x-kubernetes-group-version-kind": [{"group": "", "kind": "Pod", "version": "v1"}],
            }},
        });
        let bytes = encode(&doc);
        let back = <Document as prost::Message>::decode(bytes.as_slice()).unwrap();
        assert_eq!(back.swagger, "2.0");
        let op = back.paths.unwrap().path[0]
            .value
            .clone()
            .unwrap()
            .get
            .unwrap();
        assert_eq!(op.operation_id, "listPods");
        let q = op.parameters[0]
            .parameter
            .clone()
            .unwrap()
            .non_body_parameter
            .unwrap()
            .query_parameter_sub_schema
            .unwrap();
        assert_eq!(
            (q.name.as_str(), q.r#in.as_str(), q.unique_items),
            ("limit", "query", true)
        );
        let pod = back.definitions.unwrap().additional_properties[0].clone();
        assert_eq!(pod.name, "io.k8s.api.core.v1.Pod");
        let pod = pod.value.unwrap();
        assert_eq!(pod.r#type.unwrap().value, ["object"]);
        let props = pod.properties.unwrap().additional_properties;
        let get = |n: &str| {
            props
                .iter()
                .find(|p| p.name == n)
                .unwrap()
                .value
                .clone()
                .unwrap()
        };
        assert_eq!(
            get("spec").r#ref,
            "#/definitions/io.k8s.api.core.v1.PodSpec"
        );
        assert!(matches!(
            get("labels").additional_properties.unwrap().oneof,
            Some(additional_properties::Oneof::Schema(ref s)) if s.r#type.as_ref().unwrap().value == ["string"]
        ));
        assert_eq!(get("phase").r#enum.len(), 2);
        assert_eq!(get("phase").default.unwrap().yaml, "\"Pending\"");
        assert_eq!(get("ports").items.unwrap().schema[0].format, "int32");
        let gvk = &pod.vendor_extension[0];
        assert_eq!(gvk.name, "x-kubernetes-group-version-kind");
        let parsed: Value = serde_json::from_str(&gvk.value.clone().unwrap().yaml).unwrap();
        assert_eq!(parsed[0]["kind"], "Pod");
    }
}
