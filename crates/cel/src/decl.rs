//! The types CEL rules see a CRD schema's values as, with the bounds kube-apiserver's cost
//! estimator reads from them (`SchemaDeclType` of k8s.io/apiserver's `cel/common`): how many
//! elements a value can hold at most, and the fewest bytes it takes in JSON.
//!
//! A string's bound is its `maxLength` × 4 (characters of up to four bytes), a list's its
//! `maxItems`, a map's its `maxProperties`. Where the schema sets none, the bound is what fits
//! in the largest request kube-apiserver accepts (3 MiB): a list of 3 MiB of its items at
//! their smallest, a string of 3 MiB. Scalars and objects have a bound of 0, as upstream
//! leaves them; values the estimator computes (literals, results) carry their own sizes.
//! The bounds are those of Kubernetes 1.33, the version this server reports.

use serde_json::Value;
use std::collections::BTreeMap;
use std::rc::Rc;

/// kube-apiserver's largest request (`MaxRequestSizeBytes`).
pub const MAX_REQUEST_BYTES: u64 = 3 * 1024 * 1024;

/// The most characters an unbounded string can have: the request less its two quotes.
const UNBOUNDED_STRING: u64 = MAX_REQUEST_BYTES - 2;

/// A CEL type, with the size bounds of its values.
#[derive(Debug, Clone)]
pub struct Decl {
    pub kind: Kind,
    /// The fewest elements a value holds (what `size()` gives: characters, items, entries).
    pub min: u64,
    /// The most elements a value holds; `u64::MAX` when nothing bounds it.
    pub max: u64,
    /// The fewest bytes a value takes in JSON (`MinSerializedSize`).
    pub min_json: u64,
}

#[derive(Debug, Clone)]
pub enum Kind {
    Bool,
    Int,
    Uint,
    Double,
    String,
    Bytes,
    Null,
    Duration,
    Timestamp,
    List(Rc<Decl>),
    /// Keys, then values.
    Map(Rc<Decl>, Rc<Decl>),
    /// An object of the schema, by property name.
    Object(Rc<BTreeMap<String, Rc<Decl>>>),
    /// A value of one of Kubernetes' library types (`quantity`, `url`, `optional`…).
    Opaque(&'static str, Option<Rc<Decl>>),
    /// The element type of an empty list or map: no value has it.
    Empty,
    /// Any type.
    Dyn,
}

impl Decl {
    pub fn new(kind: Kind, min: u64, max: u64) -> Rc<Decl> {
        Rc::new(Decl {
            kind,
            min,
            max,
            min_json: 0,
        })
    }

    /// A value of `kind` whose size nothing tells.
    pub fn unbounded(kind: Kind) -> Rc<Decl> {
        Decl::new(kind, 0, u64::MAX)
    }

    /// A value of `kind` of one element (a computed scalar, as cel-go sizes them).
    pub fn scalar(kind: Kind) -> Rc<Decl> {
        Decl::new(kind, 1, 1)
    }

    pub fn is_string_like(&self) -> bool {
        matches!(self.kind, Kind::String | Kind::Bytes | Kind::Dyn)
    }

    /// The type of a list's items or of a map's keys, as a comprehension sees them.
    pub fn iterated(&self) -> Rc<Decl> {
        match &self.kind {
            Kind::List(item) => item.clone(),
            Kind::Map(key, _) => key.clone(),
            _ => Decl::unbounded(Kind::Dyn),
        }
    }

    /// The type of a list's items or of a map's values, as indexing gives them.
    pub fn element(&self) -> Rc<Decl> {
        match &self.kind {
            Kind::List(item) | Kind::Map(_, item) => item.clone(),
            _ => Decl::unbounded(Kind::Dyn),
        }
    }

    /// The type of field `name` (as a rule spells it, escaped) of an object or map.
    pub fn field(&self, name: &str) -> Rc<Decl> {
        match &self.kind {
            Kind::Object(fields) => fields
                .get(name)
                .or_else(|| fields.get(&unescape(name)))
                .cloned()
                .unwrap_or_else(|| Decl::unbounded(Kind::Dyn)),
            Kind::Map(_, value) => value.clone(),
            _ => Decl::unbounded(Kind::Dyn),
        }
    }
}

/// Either of two types, with the sizes of both (a conditional's branches, a list's items).
pub fn union(a: &Rc<Decl>, b: &Rc<Decl>) -> Rc<Decl> {
    let kind = match (&a.kind, &b.kind) {
        (Kind::Empty, _) => b.kind.clone(),
        (_, Kind::Empty) => a.kind.clone(),
        (Kind::List(x), Kind::List(y)) => Kind::List(union(x, y)),
        (Kind::Map(k1, v1), Kind::Map(k2, v2)) => Kind::Map(union(k1, k2), union(v1, v2)),
        (x, y) if std::mem::discriminant(x) == std::mem::discriminant(y) => x.clone(),
        _ => Kind::Dyn,
    };
    Rc::new(Decl {
        kind,
        min: a.min.min(b.min),
        max: a.max.max(b.max),
        min_json: a.min_json.min(b.min_json),
    })
}

/// A property name as a rule spells it, unescaped (kube-apiserver's `cel.Escape`: `-` is
/// `__dash__`, `.` `__dot__`, `/` `__slash__`, `__` `__underscores__`, a reserved word
/// `__word__`).
fn unescape(name: &str) -> String {
    let Some(inner) = name.strip_prefix("__").and_then(|n| n.strip_suffix("__")) else {
        return unescape_parts(name);
    };
    if !inner.contains("__") && reserved(inner) {
        return inner.to_string();
    }
    unescape_parts(name)
}

fn unescape_parts(name: &str) -> String {
    name.replace("__underscores__", "\u{0}")
        .replace("__dash__", "-")
        .replace("__dot__", ".")
        .replace("__slash__", "/")
        .replace('\u{0}', "__")
}

/// CEL's type names, which a property spelled like one escapes too.
const TYPE_NAMES: [&str; 5] = ["int", "uint", "double", "bool", "string"];

/// Whether a property named `name` is escaped: CEL's reserved words and its type names.
fn reserved(name: &str) -> bool {
    super::RESERVED_WORDS.contains(&name) || TYPE_NAMES.contains(&name)
}

/// The type of values of `schema`; `None` where CEL sees none (a node without a type). A
/// resource root (the schema's root, an embedded resource) also has `apiVersion`, `kind`
/// and `metadata.name`/`generateName`, as kube-apiserver declares them.
pub fn from_schema(schema: &Value, resource_root: bool) -> Option<Rc<Decl>> {
    let flag = |k: &str| schema.get(k).and_then(Value::as_bool).unwrap_or(false);
    let max_length = schema.get("maxLength").and_then(Value::as_i64);
    if flag("x-kubernetes-int-or-string") {
        // Kubernetes 1.33 (the version this server is) ignores an int-or-string's
        // `maxLength` here; later releases bound it.
        return Some(sized(Kind::Dyn, UNBOUNDED_STRING, 1));
    }
    if resource_root && !has_type_and_object_meta(schema) {
        return from_schema(&with_type_and_object_meta(schema), false);
    }
    let embedded = |v: &Value| {
        v.get("x-kubernetes-embedded-resource")
            .and_then(Value::as_bool)
            .unwrap_or(false)
    };
    match schema.get("type").and_then(Value::as_str)? {
        "array" => {
            let items = schema.get("items")?;
            let item = from_schema(items, embedded(items))?;
            let max = match schema.get("maxItems").and_then(Value::as_i64) {
                Some(m) => positive(m),
                None => UNBOUNDED_STRING / (item.min_json + 1),
            };
            Some(sized(Kind::List(item), max, 2))
        }
        "object" => object(schema, embedded),
        "string" => Some(string(schema, max_length)),
        "boolean" => Some(sized(Kind::Bool, 0, 4)),
        "number" => Some(sized(Kind::Double, 0, 1)),
        "integer" => Some(sized(Kind::Int, 0, 1)),
        _ => None,
    }
}

fn positive(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

fn sized(kind: Kind, max: u64, min_json: u64) -> Rc<Decl> {
    Rc::new(Decl {
        kind,
        min: 0,
        max,
        min_json,
    })
}

fn object(schema: &Value, embedded: impl Fn(&Value) -> bool) -> Option<Rc<Decl>> {
    if let Some(values) = schema.get("additionalProperties").filter(|v| v.is_object()) {
        let value = from_schema(values, embedded(values))?;
        let max = match schema.get("maxProperties").and_then(Value::as_i64) {
            Some(m) => positive(m),
            None => UNBOUNDED_STRING / (value.min_json + 6),
        };
        let key = sized(Kind::String, 0, 2);
        return Some(sized(Kind::Map(key, value), max, 2));
    }
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let mut fields = BTreeMap::new();
    let mut min_json = 2;
    let properties = schema.get("properties").and_then(Value::as_object);
    for (name, property) in properties.into_iter().flatten() {
        let Some(field) = from_schema(property, embedded(property)) else {
            continue;
        };
        if required.contains(&name.as_str()) && property.get("default").is_none() {
            min_json += name.len() as u64 + field.min_json + 4;
        }
        fields.insert(name.clone(), field);
    }
    Some(sized(Kind::Object(Rc::new(fields)), 0, min_json))
}

/// A string, or the type a string `format` makes of it.
fn string(schema: &Value, max_length: Option<i64>) -> Rc<Decl> {
    match schema.get("format").and_then(Value::as_str) {
        Some("byte") => {
            let max = max_length.map_or(UNBOUNDED_STRING, positive);
            return sized(Kind::Bytes, max, 2);
        }
        // Longest and shortest RFC 3339 durations, dates and times, in quotes.
        Some("duration") => return sized(Kind::Duration, 32, 3),
        Some("date") => return sized(Kind::Timestamp, 12, 12),
        Some("date-time") => return sized(Kind::Timestamp, 32, 21),
        _ => {}
    }
    let longest_enum = schema.get("enum").and_then(Value::as_array).map(|values| {
        let lengths = values.iter().filter_map(Value::as_str).map(str::len);
        lengths.max().unwrap_or(0) as u64
    });
    let max = match (max_length, longest_enum) {
        (Some(m), _) => positive(m).saturating_mul(4),
        (None, Some(longest)) => longest,
        (None, None) => UNBOUNDED_STRING,
    };
    sized(Kind::String, max, 2)
}

fn has_type_and_object_meta(schema: &Value) -> bool {
    let ty = |path: &str| schema.pointer(path).and_then(Value::as_str);
    ty("/properties/kind/type") == Some("string")
        && ty("/properties/apiVersion/type") == Some("string")
        && ty("/properties/metadata/type") == Some("object")
        && ty("/properties/metadata/properties/name/type") == Some("string")
        && ty("/properties/metadata/properties/generateName/type") == Some("string")
}

/// `schema` with `apiVersion`, `kind` and `metadata` as kube-apiserver gives every resource.
fn with_type_and_object_meta(schema: &Value) -> Value {
    let mut out = schema.clone();
    let string = serde_json::json!({"type": "string"});
    let meta = serde_json::json!({"type": "object",
        "properties": {"name": {"type": "string"}, "generateName": {"type": "string"}}});
    if let Some(o) = out.as_object_mut() {
        let properties = o
            .entry("properties")
            .or_insert_with(|| Value::Object(Default::default()));
        if let Some(p) = properties.as_object_mut() {
            p.insert("kind".into(), string.clone());
            p.insert("apiVersion".into(), string);
            p.insert("metadata".into(), meta);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn bounds_come_from_the_schema_or_the_request_size() {
        let list = from_schema(
            &json!({"type": "array", "items": {"type": "string"}}),
            false,
        );
        let list = list.expect("a type");
        // 3 MiB of `"",` items.
        assert_eq!(list.max, 1_048_575);
        assert_eq!(list.element().max, 3_145_726);
        let bounded = json!({"type": "array", "maxItems": 10,
            "items": {"type": "string", "maxLength": 5}});
        let bounded = from_schema(&bounded, false).expect("a type");
        assert_eq!((bounded.max, bounded.element().max), (10, 20));
        // An object's smallest JSON counts its required fields.
        let object = json!({"type": "object", "required": ["required"],
            "properties": {"required": {"type": "string"}, "optional": {"type": "string"}}});
        assert_eq!(from_schema(&object, false).expect("a type").min_json, 16);
        let map = json!({"type": "object", "additionalProperties": {"type": "string"}});
        assert_eq!(from_schema(&map, false).expect("a type").max, 393_215);
        let enumerated = json!({"type": "string", "enum": ["A", "LongValue"]});
        assert_eq!(from_schema(&enumerated, false).expect("a type").max, 9);
    }

    #[test]
    fn a_resource_root_has_its_name_and_escaped_fields_are_found() {
        let root = json!({"type": "object", "properties": {"x-y": {"type": "integer"}}});
        let root = from_schema(&root, true).expect("a type");
        assert_eq!(root.field("metadata").field("name").max, 3_145_726);
        assert!(matches!(root.field("x__dash__y").kind, Kind::Int));
        assert!(matches!(root.field("nope").kind, Kind::Dyn));
    }
}
