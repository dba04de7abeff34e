//! The values a template computes with, modelled on the Go types that `encoding/json`
//! produces (maps, `[]interface{}`, `float64`, strings, bools, nil) plus the few concrete
//! types that template literals and sprig functions return (`int`, `int64`, `[]string`,
//! `map[string]string`, `[]int`, `*semver.Version`).
//!
//! Go distinguishes "no value at all" (an invalid `reflect.Value`, printed `<no value>`)
//! from "an `interface{}` holding nil" (printed `<nil>`); both are kept apart here because
//! field access, printing and argument checks treat them differently.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

use crate::semver::Version;

/// A Go map; shared by reference like Go's, so sprig's `set`/`unset` are seen by every holder.
pub type MapRef = Rc<RefCell<BTreeMap<String, V>>>;

/// The element type of a slice or map, which only matters to `typeOf` and argument checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Elem {
    /// `interface{}`
    Any,
    /// `string`
    Str,
    /// `int`
    Int,
}

/// One Go value.
#[derive(Clone, Debug)]
pub enum V {
    /// The invalid `reflect.Value`: a missing map key, or a nil that lost its interface.
    Invalid,
    /// An `interface{}` holding nil (a JSON null inside a map or slice).
    Nil,
    Bool(bool),
    /// Go `int`.
    Int(i64),
    /// Go `int64`.
    Int64(i64),
    Float(f64),
    Str(Rc<str>),
    List(Rc<Vec<V>>, Elem),
    Map(MapRef, Elem),
    Semver(Rc<Version>),
}

impl V {
    pub fn str(s: impl Into<Rc<str>>) -> V {
        V::Str(s.into())
    }

    pub fn list(items: Vec<V>) -> V {
        V::List(Rc::new(items), Elem::Any)
    }

    pub fn str_list(items: Vec<String>) -> V {
        V::List(Rc::new(items.into_iter().map(V::str).collect()), Elem::Str)
    }

    pub fn map(m: BTreeMap<String, V>) -> V {
        V::Map(Rc::new(RefCell::new(m)), Elem::Any)
    }

    /// Converts JSON the way `encoding/json` unmarshals into `interface{}`.
    pub fn from_json(j: &serde_json::Value) -> V {
        use serde_json::Value as J;
        match j {
            J::Null => V::Nil,
            J::Bool(b) => V::Bool(*b),
            J::Number(n) => V::Float(n.as_f64().unwrap_or(0.0)),
            J::String(s) => V::str(s.as_str()),
            J::Array(a) => V::list(a.iter().map(V::from_json).collect()),
            J::Object(o) => V::map(
                o.iter()
                    .map(|(k, v)| (k.clone(), V::from_json(v)))
                    .collect(),
            ),
        }
    }

    /// Converts back to JSON for `toJson` (Go's encoding of the same value).
    pub fn to_json(&self) -> serde_json::Value {
        use serde_json::Value as J;
        match self {
            V::Invalid | V::Nil => J::Null,
            V::Bool(b) => J::Bool(*b),
            V::Int(i) | V::Int64(i) => J::from(*i),
            V::Float(f) => serde_json::Number::from_f64(*f).map_or(J::Null, J::Number),
            V::Str(s) => J::String(s.to_string()),
            V::List(l, _) => J::Array(l.iter().map(V::to_json).collect()),
            V::Map(m, _) => J::Object(
                m.borrow()
                    .iter()
                    .map(|(k, v)| (k.clone(), v.to_json()))
                    .collect(),
            ),
            V::Semver(v) => {
                let mut o = serde_json::Map::new();
                o.insert("Original".into(), J::String(v.original.clone()));
                J::Object(o)
            }
        }
    }

    /// Go's `%T`.
    pub fn type_name(&self) -> &'static str {
        match self {
            V::Invalid | V::Nil => "<nil>",
            V::Bool(_) => "bool",
            V::Int(_) => "int",
            V::Int64(_) => "int64",
            V::Float(_) => "float64",
            V::Str(_) => "string",
            V::List(_, Elem::Any) => "[]interface {}",
            V::List(_, Elem::Str) => "[]string",
            V::List(_, Elem::Int) => "[]int",
            V::Map(_, Elem::Str) => "map[string]string",
            V::Map(_, _) => "map[string]interface {}",
            V::Semver(_) => "*semver.Version",
        }
    }

    /// `reflect.Kind.String()` of the value.
    pub fn kind_name(&self) -> &'static str {
        match self {
            V::Invalid | V::Nil => "invalid",
            V::Bool(_) => "bool",
            V::Int(_) => "int",
            V::Int64(_) => "int64",
            V::Float(_) => "float64",
            V::Str(_) => "string",
            V::List(..) => "slice",
            V::Map(..) => "map",
            V::Semver(_) => "ptr",
        }
    }

    /// Go's template truthiness (`isTrue`): zero values are false.
    pub fn truth(&self) -> bool {
        match self {
            V::Invalid | V::Nil => false,
            V::Bool(b) => *b,
            V::Int(i) | V::Int64(i) => *i != 0,
            V::Float(f) => *f != 0.0,
            V::Str(s) => !s.is_empty(),
            V::List(l, _) => !l.is_empty(),
            V::Map(m, _) => !m.borrow().is_empty(),
            V::Semver(_) => true,
        }
    }

    /// Is this a nil of any sort (what Go's `x == nil` on an `interface{}` would say)?
    pub fn is_nil(&self) -> bool {
        matches!(self, V::Invalid | V::Nil)
    }

    /// Go's `reflect.DeepEqual` on the values as `interface{}`.
    pub fn deep_equal(&self, other: &V) -> bool {
        match (self, other) {
            (a, b) if a.is_nil() && b.is_nil() => true,
            (V::Bool(a), V::Bool(b)) => a == b,
            (V::Int(a), V::Int(b)) | (V::Int64(a), V::Int64(b)) => a == b,
            (V::Float(a), V::Float(b)) => a == b,
            (V::Str(a), V::Str(b)) => a == b,
            (V::List(a, ea), V::List(b, eb)) => {
                ea == eb
                    && a.len() == b.len()
                    && a.iter().zip(b.iter()).all(|(x, y)| x.deep_equal(y))
            }
            (V::Map(a, ea), V::Map(b, eb)) => {
                if ea != eb {
                    return false;
                }
                let (a, b) = (a.borrow(), b.borrow());
                a.len() == b.len()
                    && a.iter()
                        .all(|(k, v)| b.get(k).is_some_and(|w| v.deep_equal(w)))
            }
            (V::Semver(a), V::Semver(b)) => Rc::ptr_eq(a, b) || a == b,
            _ => false,
        }
    }
}

/// The methods a template can call on a `*semver.Version` (`.Major`, `.Original`, ...).
pub fn semver_method(v: &Version, name: &str) -> Option<V> {
    Some(match name {
        "Major" => V::Int(v.major as i64),
        "Minor" => V::Int(v.minor as i64),
        "Patch" => V::Int(v.patch as i64),
        "Prerelease" => V::str(v.pre.as_str()),
        "Metadata" => V::str(v.metadata.as_str()),
        "Original" => V::str(v.original.as_str()),
        "String" => V::str(v.to_string()),
        _ => return None,
    })
}
