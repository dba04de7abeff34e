//! Schema pieces kube-derive cannot infer from a Rust type.

use schemars::{json_schema, Schema, SchemaGenerator};

/// An object whose content the API server keeps as it is
/// (`x-kubernetes-preserve-unknown-fields`): for parts of upstream kinds these controllers
/// carry but do not read, such as a KubeadmConfigSpec or a docker backend.
pub fn preserve_unknown(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true,
    })
}

/// A list of `metav1.Condition`, merged by `type` as kube-apiserver merges it.
pub fn conditions(gen: &mut SchemaGenerator) -> Schema {
    let item = gen.subschema_for::<crate::conditions::Condition>();
    json_schema!({
        "type": "array",
        "items": item,
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["type"],
    })
}

/// A list of objects kept as they are.
pub fn preserve_unknown_list(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "array",
        "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
    })
}
