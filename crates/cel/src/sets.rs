//! Kubernetes' CEL sets library (on since Kubernetes 1.29): `sets.contains(a, b)` (every
//! element of `b` is in `a`), `sets.equivalent(a, b)` (each contains the other) and
//! `sets.intersects(a, b)` (they share an element), over lists taken as sets. And the string
//! `size` kube-apiserver's CEL counts: code points, where the `cel` crate counts bytes.
//!
//! `contains` is also CEL's own method on strings, lists and maps, so the library's one
//! takes over the name and hands any other receiver to the `cel` crate's function; the
//! library's receiver is the variable `sets`, a typed value as the other libraries' are.

use super::{typed, typed_text, Cel};
use cel::extractors::{Arguments, This};
use cel::{ExecutionError, FunctionContext};
use std::sync::Arc;

/// What the variable `sets` holds, so that `sets.contains(a, b)` has a receiver.
const LIBRARY_KEY: &str = "@sets-library";

/// The library's functions beyond CEL's own (`contains` is one of CEL's).
pub(super) const FUNCTIONS: [&str; 2] = ["equivalent", "intersects"];

/// Registers the library and the `sets` receiver, and `size` as kube-apiserver counts.
pub(super) fn register(ctx: &mut cel::Context<'static>) {
    ctx.add_variable_from_value("sets", typed(LIBRARY_KEY, String::new()));
    ctx.add_function("contains", contains);
    ctx.add_function(
        "equivalent",
        |ftx: &FunctionContext, This(lib): This<Cel>| {
            let (a, b) = operands(ftx, &lib)?;
            Ok::<_, ExecutionError>(all_in(&a, &b) && all_in(&b, &a))
        },
    );
    ctx.add_function(
        "intersects",
        |ftx: &FunctionContext, This(lib): This<Cel>| {
            let (a, b) = operands(ftx, &lib)?;
            Ok::<_, ExecutionError>(b.iter().any(|x| a.contains(x)))
        },
    );
    ctx.add_function("size", size);
}

/// `sets.contains(a, b)`, or CEL's own `contains` on any other receiver.
fn contains(
    ftx: &FunctionContext,
    This(this): This<Cel>,
    Arguments(args): Arguments,
) -> Result<Cel, ExecutionError> {
    if typed_text(&this, LIBRARY_KEY).is_some() {
        let (a, b) = operands(ftx, &this)?;
        return Ok(Cel::Bool(all_in(&a, &b)));
    }
    match &args[..] {
        [arg] => cel::functions::contains(This(this), arg.clone()),
        _ => Err(ftx.error("no such overload: contains")),
    }
}

/// A list a library function takes.
type List = Arc<Vec<Cel>>;

/// The two lists a library function was called with on the `sets` receiver.
fn operands(ftx: &FunctionContext, lib: &Cel) -> Result<(List, List), ExecutionError> {
    if typed_text(lib, LIBRARY_KEY).is_none() {
        return Err(ftx.error("no such overload"));
    }
    let list = |i: usize| match ftx.args.get(i).map(|a| ftx.ptx.resolve(a)) {
        Some(Ok(Cel::List(l))) => Ok(l),
        Some(Err(e)) => Err(e),
        _ => Err(ftx.error("no such overload: sets functions take two lists")),
    };
    Ok((list(0)?, list(1)?))
}

/// Whether every element of `b` is in `a`.
fn all_in(a: &[Cel], b: &[Cel]) -> bool {
    b.iter().all(|x| a.contains(x))
}

/// `size` of a string in code points, as kube-apiserver's CEL counts it; of anything else as
/// the `cel` crate counts it.
fn size(ftx: &FunctionContext, This(this): This<Cel>) -> Result<i64, ExecutionError> {
    match &this {
        Cel::String(s) => Ok(s.chars().count() as i64),
        _ => cel::functions::size(ftx, This(this)),
    }
}

#[cfg(test)]
mod tests {
    use crate::evaluate_bool;
    use serde_json::json;

    fn holds(expression: &str) -> bool {
        evaluate_bool(expression, &[("self", json!(["a", "b", "c"]))]).unwrap()
    }

    #[test]
    fn the_sets_library_as_kubernetes_defines_it() {
        assert!(holds("sets.contains(self, ['a', 'c'])"));
        assert!(!holds("sets.contains(self, ['a', 'd'])"));
        assert!(holds("sets.contains(self, [])"));
        assert!(holds("sets.equivalent(self, ['c', 'b', 'a', 'a'])"));
        assert!(!holds("sets.equivalent(self, ['a', 'b'])"));
        assert!(holds("sets.intersects(self, ['x', 'b'])"));
        assert!(!holds("sets.intersects(self, ['x'])"));
    }

    #[test]
    fn cel_s_own_contains_still_works_on_other_receivers() {
        assert!(holds("self.contains('b') && 'abc'.contains('bc')"));
        assert!(holds("{'k': 1}.contains('k')"));
        assert!(!holds("self.contains('z')"));
    }

    #[test]
    fn a_string_s_size_counts_code_points() {
        let ok = |e: &str| evaluate_bool(e, &[("self", json!("héllo"))]).unwrap();
        assert!(ok("size(self) == 5 && self.size() == 5"));
        assert!(ok("size(b'ab') == 2 && size([1, 2]) == 2"));
    }
}
