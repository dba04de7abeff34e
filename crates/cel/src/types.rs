//! The CEL types the checker (`check`) reasons with: CEL's primitive types, lists and maps,
//! objects whose fields are known (the admission request, a namespace, a kind's OpenAPI
//! schema, a policy's variables), `dyn`, and `Unknown` for what this checker cannot type
//! (the result of a library function it does not model).
//!
//! `Unknown` is kept apart from `dyn` because kube-apiserver refuses a validation whose type
//! is `dyn` ("must evaluate to bool but got dyn"): only a type the checker is sure of may
//! refuse a policy; anything it cannot type passes.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

/// An object type: its name as cel-go prints it, and its fields (resolved on demand, since a
/// schema may be recursive).
pub trait Fields: Send + Sync {
    fn name(&self) -> String;
    /// The field's type; `None` when the object has no such field.
    fn field(&self, name: &str) -> Option<Ty>;
}

/// A CEL type.
#[derive(Clone)]
pub enum Ty {
    /// What the checker cannot type: never refused, never reported.
    Unknown,
    Dyn,
    Null,
    Bool,
    Int,
    Uint,
    Double,
    String,
    Bytes,
    Timestamp,
    Duration,
    /// A type value (`int`, `string`… used as identifiers).
    Type,
    List(Box<Ty>),
    Map(Box<Ty>, Box<Ty>),
    Object(Arc<dyn Fields>),
    /// A library object (`authorizer`): anything may be called on it.
    Opaque(&'static str),
}

impl Ty {
    /// Whether the checker knows this type for sure (it may then refuse what does not fit).
    pub fn known(&self) -> bool {
        !matches!(self, Ty::Unknown | Ty::Opaque(_))
    }

    /// A scalar type whose operator overloads are fixed: mismatches between two of these are
    /// reported as cel-go reports them.
    pub fn scalar(&self) -> bool {
        matches!(
            self,
            Ty::Bool
                | Ty::Int
                | Ty::Uint
                | Ty::Double
                | Ty::String
                | Ty::Bytes
                | Ty::Timestamp
                | Ty::Duration
        )
    }

    pub fn numeric(&self) -> bool {
        matches!(self, Ty::Int | Ty::Uint | Ty::Double)
    }

    /// Whether two types are the same (objects by name).
    pub fn same(&self, other: &Ty) -> bool {
        self.to_string() == other.to_string()
    }

    /// The type of an expression that is one of `a` or `b` (a conditional's branches, a
    /// list's elements): the type itself if they agree, else `dyn` (cel-go's most general).
    pub fn join(a: Ty, b: Ty) -> Ty {
        match (&a, &b) {
            (Ty::Unknown, _) | (_, Ty::Unknown) => Ty::Unknown,
            (Ty::Null, _) => b,
            (_, Ty::Null) => a,
            _ if a.same(&b) => a,
            _ => Ty::Dyn,
        }
    }
}

impl fmt::Display for Ty {
    /// cel-go's names for types, as its messages print them.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Ty::Unknown | Ty::Dyn => f.write_str("dyn"),
            Ty::Null => f.write_str("null_type"),
            Ty::Bool => f.write_str("bool"),
            Ty::Int => f.write_str("int"),
            Ty::Uint => f.write_str("uint"),
            Ty::Double => f.write_str("double"),
            Ty::String => f.write_str("string"),
            Ty::Bytes => f.write_str("bytes"),
            Ty::Timestamp => f.write_str("google.protobuf.Timestamp"),
            Ty::Duration => f.write_str("google.protobuf.Duration"),
            Ty::Type => f.write_str("type"),
            Ty::List(e) => write!(f, "list({e})"),
            Ty::Map(k, v) => write!(f, "map({k}, {v})"),
            Ty::Object(o) => f.write_str(&o.name()),
            Ty::Opaque(name) => f.write_str(name),
        }
    }
}

impl fmt::Debug for Ty {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// An object type with a fixed set of fields.
pub struct Record {
    pub name: String,
    pub fields: BTreeMap<String, Ty>,
}

impl Record {
    pub fn ty(name: &str, fields: Vec<(&str, Ty)>) -> Ty {
        Ty::Object(Arc::new(Record {
            name: name.to_string(),
            fields: fields
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect(),
        }))
    }
}

impl Fields for Record {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn field(&self, name: &str) -> Option<Ty> {
        self.fields.get(name).cloned()
    }
}

fn list(t: Ty) -> Ty {
    Ty::List(Box::new(t))
}

fn map(k: Ty, v: Ty) -> Ty {
    Ty::Map(Box::new(k), Box::new(v))
}

/// `request`: kube-apiserver's declared type of the admission request.
pub fn request() -> Ty {
    let gvk = Record::ty(
        "kubernetes.GroupVersionKind",
        vec![
            ("group", Ty::String),
            ("version", Ty::String),
            ("kind", Ty::String),
        ],
    );
    let gvr = Record::ty(
        "kubernetes.GroupVersionResource",
        vec![
            ("group", Ty::String),
            ("version", Ty::String),
            ("resource", Ty::String),
        ],
    );
    let user = Record::ty(
        "kubernetes.UserInfo",
        vec![
            ("username", Ty::String),
            ("uid", Ty::String),
            ("groups", list(Ty::String)),
            ("extra", map(Ty::String, list(Ty::String))),
        ],
    );
    Record::ty(
        "kubernetes.AdmissionRequest",
        vec![
            ("kind", gvk.clone()),
            ("resource", gvr.clone()),
            ("subResource", Ty::String),
            ("requestKind", gvk),
            ("requestResource", gvr),
            ("requestSubResource", Ty::String),
            ("name", Ty::String),
            ("namespace", Ty::String),
            ("operation", Ty::String),
            ("userInfo", user),
            ("dryRun", Ty::Bool),
            ("options", Ty::Dyn),
        ],
    )
}

/// `namespaceObject`: kube-apiserver's declared (trimmed) type of a Namespace.
pub fn namespace() -> Ty {
    let strings = || list(Ty::String);
    let condition = Record::ty(
        "kubernetes.NamespaceCondition",
        vec![
            ("status", Ty::String),
            ("type", Ty::String),
            ("lastTransitionTime", Ty::Timestamp),
            ("message", Ty::String),
            ("reason", Ty::String),
        ],
    );
    let metadata = Record::ty(
        "kubernetes.NamespaceMetadata",
        vec![
            ("name", Ty::String),
            ("generateName", Ty::String),
            ("namespace", Ty::String),
            ("labels", map(Ty::String, Ty::String)),
            ("annotations", map(Ty::String, Ty::String)),
            ("UID", Ty::String),
            ("creationTimestamp", Ty::Timestamp),
            ("deletionGracePeriodSeconds", Ty::Int),
            ("deletionTimestamp", Ty::Timestamp),
            ("generation", Ty::Int),
            ("resourceVersion", Ty::String),
            ("finalizers", strings()),
        ],
    );
    Record::ty(
        "kubernetes.Namespace",
        vec![
            ("metadata", metadata),
            (
                "spec",
                Record::ty("kubernetes.NamespaceSpec", vec![("finalizers", strings())]),
            ),
            (
                "status",
                Record::ty(
                    "kubernetes.NamespaceStatus",
                    vec![("conditions", list(condition)), ("phase", Ty::String)],
                ),
            ),
        ],
    )
}
