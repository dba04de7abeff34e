//! CEL's optional values, as kube-apiserver enables them for rules (`cel.OptionalTypes`):
//! `optional.of(x)`, `optional.ofNonZeroValue(x)`, `optional.none()`, and an optional's
//! `hasValue()`, `value()`, `orValue(default)` and `or(other)`. The format library answers
//! with optionals, so `!format.dns1123Label().validate(self).hasValue()` needs them. The
//! `.?field` and `[?key]` syntax is not here: the `cel` crate's parser does not read it.
//!
//! The `cel` crate has no optional value, so one travels like the other library values, as
//! a map of one entry: from a key naming the type to a list holding the value, or empty for
//! none. `optional.none() == optional.none()`, and two optionals of equal values are equal.

use super::{typed, typed_text, Answer, Cel};
use cel::extractors::{Arguments, This};
use cel::{ExecutionError, FunctionContext};
use std::sync::Arc;

/// The type key of an optional value.
const KEY: &str = "@optional";
/// What the variable `optional` holds, so that `optional.of(x)` has a receiver.
const LIBRARY_KEY: &str = "@optional-library";

/// Registers the functions, and the `optional` receiver of `optional.of` and the like.
pub(super) fn register(ctx: &mut cel::Context<'static>) {
    ctx.add_variable_from_value("optional", typed(LIBRARY_KEY, String::new()));
    ctx.add_function(
        "of",
        |ftx: &FunctionContext, This(lib): This<Cel>, v: Cel| {
            library(ftx, &lib)?;
            Ok::<_, ExecutionError>(some(v))
        },
    );
    ctx.add_function(
        "ofNonZeroValue",
        |ftx: &FunctionContext, This(lib): This<Cel>, v: Cel| {
            library(ftx, &lib)?;
            Ok::<_, ExecutionError>(if is_zero(&v) { none() } else { some(v) })
        },
    );
    ctx.add_function("none", |ftx: &FunctionContext, This(lib): This<Cel>| {
        library(ftx, &lib)?;
        Ok::<_, ExecutionError>(none())
    });
    ctx.add_function("hasValue", |ftx: &FunctionContext, This(o): This<Cel>| {
        Ok::<_, ExecutionError>(Cel::Bool(inner(ftx, &o)?.is_some()))
    });
    ctx.add_function("value", |ftx: &FunctionContext, This(o): This<Cel>| {
        inner(ftx, &o)?.ok_or_else(|| ftx.error("optional.none() dereference"))
    });
    ctx.add_function(
        "orValue",
        |ftx: &FunctionContext, This(o): This<Cel>, d: Cel| {
            Ok::<_, ExecutionError>(inner(ftx, &o)?.unwrap_or(d))
        },
    );
    ctx.add_function("or", or);
}

/// The functions this module adds, for the list of functions rules may call.
pub(super) const FUNCTIONS: [&str; 7] = [
    "of",
    "ofNonZeroValue",
    "none",
    "hasValue",
    "value",
    "orValue",
    "or",
];

/// An optional holding `v`.
pub(super) fn some(v: Cel) -> Cel {
    wrap(vec![v])
}

/// The empty optional.
pub(super) fn none() -> Cel {
    wrap(Vec::new())
}

fn wrap(items: Vec<Cel>) -> Cel {
    let entry = (
        cel::objects::Key::String(Arc::new(KEY.into())),
        Cel::List(Arc::new(items)),
    );
    Cel::Map(cel::objects::Map {
        map: Arc::new([entry].into_iter().collect()),
    })
}

/// What an optional holds (`Some(None)` for none); `None` if `v` is not an optional.
fn unwrap(v: &Cel) -> Option<Option<Cel>> {
    let Cel::Map(m) = v else { return None };
    if m.map.len() != 1 {
        return None;
    }
    match m.map.get(&cel::objects::Key::String(Arc::new(KEY.into()))) {
        Some(Cel::List(items)) if items.len() <= 1 => Some(items.first().cloned()),
        _ => None,
    }
}

fn inner(ftx: &FunctionContext, v: &Cel) -> Result<Option<Cel>, ExecutionError> {
    unwrap(v).ok_or_else(|| ftx.error("no such overload: not an optional"))
}

fn library(ftx: &FunctionContext, v: &Cel) -> Result<(), ExecutionError> {
    match typed_text(v, LIBRARY_KEY) {
        Some(_) => Ok(()),
        None => Err(ftx.error("no such overload")),
    }
}

/// `a.or(b)`: `a` if it has a value, else `b` (which must be an optional too).
fn or(ftx: &FunctionContext, This(o): This<Cel>, Arguments(args): Arguments) -> Answer {
    let [other] = &args[..] else {
        return Err(ftx.error("one argument expected"));
    };
    inner(ftx, other)?;
    Ok(match inner(ftx, &o)? {
        Some(_) => o,
        None => other.clone(),
    })
}

/// Whether `v` is its type's zero value, as `optional.ofNonZeroValue` tests it.
fn is_zero(v: &Cel) -> bool {
    match v {
        Cel::Null => true,
        Cel::Bool(b) => !b,
        Cel::Int(i) => *i == 0,
        Cel::UInt(u) => *u == 0,
        Cel::Float(f) => *f == 0.0,
        Cel::String(s) => s.is_empty(),
        Cel::Bytes(b) => b.is_empty(),
        Cel::List(l) => l.is_empty(),
        Cel::Map(m) => m.map.is_empty(),
        Cel::Duration(d) => d.is_zero(),
        Cel::Timestamp(t) => t.timestamp() == 0 && t.timestamp_subsec_nanos() == 0,
        Cel::Function(..) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn optionals_are_values_or_none() {
        assert_eq!(unwrap(&some(Cel::Int(1))), Some(Some(Cel::Int(1))));
        assert_eq!(unwrap(&none()), Some(None));
        assert_eq!(unwrap(&Cel::Int(1)), None);
        assert_eq!(unwrap(&typed("@quantity", "1".into())), None);
        assert!(is_zero(&Cel::String(Arc::new(String::new()))) && !is_zero(&Cel::Bool(true)));
    }
}
