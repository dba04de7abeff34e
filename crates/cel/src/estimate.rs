//! The worst-case cost of a rule, estimated before it ever runs, as cel-go's cost estimator
//! (`checker/cost.go`) and Kubernetes' library estimator (`cel/library/cost.go`) compute it
//! when a CRD is written: kube-apiserver refuses a CRD whose rules could cost too much on
//! the largest objects its schema allows.
//!
//! cel-go estimates over a type-checked expression; the `cel` crate has no checker, so the
//! types (and the bounds on sizes they carry, see the `decl` module) are followed here as
//! the estimate walks the expression: `self` is the rule's schema node, a field its
//! property, an item its list's items. Weights are cel-go's: a variable or field 1, a
//! constant 0, a call 1, a list literal 10, a map literal 30; a comprehension costs its
//! loop's condition and step once per element its range can hold; string functions are
//! charged a tenth of the longest string per character, regular expressions the string's
//! tenth times a quarter of the pattern.
//!
//! Sizes are found as cel-go finds them: a value reached from `self` by fields and items
//! has its schema node's bound; other values have the size their literal or the function
//! that made them gives. Like kube-apiserver's size estimator, which drops a path's first
//! element as if it were `self`, an item of a list that is not part of `self` (a literal, a
//! function's result) is sized as `self` is.

use super::decl::{union, Decl, Kind};
use cel::common::ast::{operators, CallExpr, ComprehensionExpr, EntryExpr, Expr, IdedExpr};
use cel::common::value::CelVal;
use std::rc::Rc;

/// cel-go's factor for walking a string or bytes, per character.
const STRING_TRAVERSAL: f64 = 0.1;
/// cel-go's guess of a regular expression's cost per character of its pattern.
const REGEX_LENGTH: f64 = 0.25;

/// Namespaces of library functions: `format.named(…)` is a call of `format.named`, not of
/// `named` on a variable `format`.
const NAMESPACES: [&str; 8] = [
    "format", "optional", "ip", "math", "strings", "base64", "sets", "lists",
];

/// The most `expr` can cost when `self` (and `oldSelf`) are values of `this`.
pub fn max_cost(expr: &IdedExpr, this: &Rc<Decl>) -> u64 {
    let mut estimator = Estimator {
        this: this.clone(),
        locals: Vec::new(),
    };
    estimator.expr(expr).cost
}

struct Estimator {
    this: Rc<Decl>,
    /// Comprehension variables in scope, innermost last.
    locals: Vec<Local>,
}

struct Local {
    name: String,
    ty: Rc<Decl>,
    path: Vec<String>,
}

/// One expression's estimate.
struct Est {
    cost: u64,
    /// Its type, with the sizes its own making gives it.
    ty: Rc<Decl>,
    /// The way to it from a variable, as cel-go tracks it: a variable, then fields, `@items`,
    /// `@keys` or `@values`. Empty for what a literal or a call makes.
    path: Vec<String>,
}

impl Est {
    fn made(cost: u64, ty: Rc<Decl>) -> Est {
        Est {
            cost,
            ty,
            path: Vec::new(),
        }
    }
}

fn add(a: u64, b: u64) -> u64 {
    a.saturating_add(b)
}

fn mul(a: u64, b: u64) -> u64 {
    a.saturating_mul(b)
}

/// `x × f`, rounded up, as cel-go's `multiplyByCostFactor` computes it in floating point.
fn factor(x: u64, f: f64) -> u64 {
    let x = x as f64;
    if x > 0.0 && f > 0.0 && x > u64::MAX as f64 / f {
        return u64::MAX;
    }
    let product = (x * f).ceil();
    if product >= 18_446_744_073_709_551_616.0 {
        u64::MAX
    } else {
        product as u64
    }
}

fn tenth(size: u64) -> u64 {
    factor(size, STRING_TRAVERSAL)
}

/// The type of a value a call computes: scalars have one element, others no known size.
fn computed(kind: Kind) -> Rc<Decl> {
    match kind {
        Kind::Bool | Kind::Int | Kind::Uint | Kind::Double | Kind::Duration | Kind::Timestamp => {
            Decl::scalar(kind)
        }
        _ => Decl::unbounded(kind),
    }
}

fn opaque(name: &'static str) -> Rc<Decl> {
    Decl::unbounded(Kind::Opaque(name, None))
}

fn optional_of(inner: Rc<Decl>) -> Rc<Decl> {
    Decl::unbounded(Kind::Opaque("optional", Some(inner)))
}

fn literal(v: &CelVal) -> Rc<Decl> {
    let exact = |kind, n: usize| Decl::new(kind, n as u64, n as u64);
    match v {
        CelVal::String(s) => exact(Kind::String, s.chars().count()),
        CelVal::Bytes(b) => exact(Kind::Bytes, b.len()),
        CelVal::Boolean(_) => Decl::scalar(Kind::Bool),
        CelVal::Int(_) => Decl::scalar(Kind::Int),
        CelVal::UInt(_) => Decl::scalar(Kind::Uint),
        CelVal::Double(_) => Decl::scalar(Kind::Double),
        CelVal::Null => Decl::scalar(Kind::Null),
        _ => Decl::unbounded(Kind::Dyn),
    }
}

impl Estimator {
    fn expr(&mut self, e: &IdedExpr) -> Est {
        match &e.expr {
            Expr::Literal(v) => Est::made(0, literal(v)),
            Expr::Ident(name) => self.ident(name),
            Expr::Select(select) => {
                let operand = self.expr(&select.operand);
                if select.test {
                    // `has()`: kube-apiserver charges nothing for the test itself.
                    return Est::made(operand.cost, computed(Kind::Bool));
                }
                // Appended even to an empty path: upstream then sizes it from `self`.
                let mut path = operand.path.clone();
                path.push(select.field.clone());
                Est {
                    cost: add(operand.cost, 1),
                    ty: operand.ty.field(&select.field),
                    path,
                }
            }
            Expr::Call(call) => self.call(call),
            Expr::List(list) => {
                let (mut cost, mut item) = (10, Decl::new(Kind::Empty, 0, 0));
                for (i, element) in list.elements.iter().enumerate() {
                    let element = self.expr(element);
                    cost = add(cost, element.cost);
                    let sized = self.sized(&element);
                    item = if i == 0 { sized } else { union(&item, &sized) };
                }
                let n = list.elements.len() as u64;
                Est::made(cost, Decl::new(Kind::List(item), n, n))
            }
            Expr::Map(map) => self.map_literal(map.entries.iter().map(|e| &e.expr)),
            Expr::Struct(s) => {
                let mut cost = 40;
                for entry in &s.entries {
                    if let EntryExpr::StructField(field) = &entry.expr {
                        cost = add(cost, self.expr(&field.value).cost);
                    }
                }
                Est::made(cost, Decl::unbounded(Kind::Dyn))
            }
            Expr::Comprehension(c) => self.comprehension(c),
            Expr::Unspecified => Est::made(0, Decl::unbounded(Kind::Dyn)),
        }
    }

    fn ident(&self, name: &str) -> Est {
        if let Some(local) = self.locals.iter().rev().find(|l| l.name == name) {
            return Est {
                cost: 1,
                ty: local.ty.clone(),
                path: local.path.clone(),
            };
        }
        let ty = match name {
            "self" | "oldSelf" => self.this.clone(),
            _ => Decl::unbounded(Kind::Dyn),
        };
        Est {
            cost: 1,
            ty,
            path: vec![name.to_string()],
        }
    }

    fn map_literal<'a>(&mut self, entries: impl Iterator<Item = &'a EntryExpr>) -> Est {
        let mut cost = 30;
        let (mut key, mut value) = (Decl::new(Kind::Empty, 0, 0), Decl::new(Kind::Empty, 0, 0));
        let mut n = 0;
        for entry in entries {
            if let EntryExpr::MapEntry(entry) = entry {
                let (k, v) = (self.expr(&entry.key), self.expr(&entry.value));
                cost = add(cost, add(k.cost, v.cost));
                let (k, v) = (self.sized(&k), self.sized(&v));
                (key, value) = if n == 0 {
                    (k, v)
                } else {
                    (union(&key, &k), union(&value, &v))
                };
                n += 1;
            }
        }
        Est::made(cost, Decl::new(Kind::Map(key, value), n, n))
    }

    /// The value's type with the size cel-go finds for it: its schema node's bound when
    /// its path leads to one (from `self`, whatever the path's first element), else what
    /// its making gave it.
    fn sized(&self, e: &Est) -> Rc<Decl> {
        match self.resolve(&e.path) {
            Some(node) if !Rc::ptr_eq(&node, &e.ty) => Rc::new(Decl {
                min: 0,
                max: node.max,
                ..(*e.ty).clone()
            }),
            _ => e.ty.clone(),
        }
    }

    /// The schema node a path leads to, its first element taken as `self`.
    fn resolve(&self, path: &[String]) -> Option<Rc<Decl>> {
        let (_, rest) = path.split_first()?;
        let mut node = self.this.clone();
        for step in rest {
            node = match (step.as_str(), &node.kind) {
                ("@items" | "@values", Kind::List(item) | Kind::Map(_, item)) => item.clone(),
                ("@keys", Kind::Map(key, _)) => key.clone(),
                (field, Kind::Object(fields)) => fields.get(field)?.clone(),
                _ => return None,
            };
        }
        Some(node)
    }

    fn comprehension(&mut self, c: &ComprehensionExpr) -> Est {
        let range = self.expr(&c.iter_range);
        let init = self.expr(&c.accu_init);
        let mut cost = add(range.cost, init.cost);
        let range_ty = self.sized(&range);
        self.locals.push(Local {
            name: c.accu_var.clone(),
            ty: init.ty.clone(),
            path: init.path.clone(),
        });
        let is_list = matches!(range_ty.kind, Kind::List(_));
        let with_path = |step: &str| {
            let mut path = range.path.clone();
            path.push(step.to_string());
            path
        };
        let iteration = match &c.iter_var2 {
            None => vec![(
                c.iter_var.clone(),
                range_ty.iterated(),
                with_path(if is_list { "@items" } else { "@keys" }),
            )],
            Some(second) => vec![
                (
                    c.iter_var.clone(),
                    if is_list {
                        Decl::scalar(Kind::Int)
                    } else {
                        range_ty.iterated()
                    },
                    with_path(if is_list { "@indices" } else { "@keys" }),
                ),
                (
                    second.clone(),
                    range_ty.element(),
                    with_path(if is_list { "@items" } else { "@values" }),
                ),
            ],
        };
        let bound = iteration.len();
        for (name, ty, path) in iteration {
            self.locals.push(Local { name, ty, path });
        }
        let condition = self.expr(&c.loop_cond);
        let step = self.expr(&c.loop_step);
        let per_element = add(condition.cost, step.cost);
        let step = step.ty;
        self.locals.truncate(self.locals.len() - bound);
        let result = self.expr(&c.result);
        self.locals.pop();
        cost = add(cost, add(result.cost, mul(range_ty.max, per_element)));
        // `map` and `filter` build a list as long as the range.
        let ty = match (&c.accu_init.expr, &step.kind) {
            (Expr::List(_), Kind::List(item)) => {
                Decl::new(Kind::List(item.clone()), range_ty.min, range_ty.max)
            }
            (Expr::List(_) | Expr::Map(_), _) => {
                let mut ty = (*result.ty).clone();
                (ty.min, ty.max) = (range_ty.min, range_ty.max);
                Rc::new(ty)
            }
            _ => result.ty,
        };
        Est::made(cost, ty)
    }

    fn call(&mut self, call: &CallExpr) -> Est {
        if let Some(est) = self.optional_macro(call) {
            return est;
        }
        let name = call.func_name.as_str();
        match name {
            operators::LOGICAL_AND | operators::LOGICAL_OR => {
                let cost = call.args.iter().map(|a| self.expr(a).cost).fold(0, add);
                return Est::made(cost, computed(Kind::Bool));
            }
            operators::CONDITIONAL if call.args.len() == 3 => {
                let condition = self.expr(&call.args[0]);
                let (yes, no) = (self.expr(&call.args[1]), self.expr(&call.args[2]));
                let ty = union(&self.sized(&yes), &self.sized(&no));
                return Est::made(add(condition.cost, yes.cost.max(no.cost)), ty);
            }
            "dyn" if call.args.len() == 1 => {
                let arg = self.expr(&call.args[0]);
                return Est::made(add(arg.cost, 1), self.sized(&arg));
            }
            _ => {}
        }
        // A library function named by its namespace is a global call, not a method.
        let namespaced = match call.target.as_deref().map(|t| &t.expr) {
            Some(Expr::Ident(ns))
                if NAMESPACES.contains(&ns.as_str())
                    && !self.locals.iter().any(|l| &l.name == ns) =>
            {
                Some(format!("{ns}.{name}"))
            }
            _ => None,
        };
        let target = match namespaced {
            Some(_) => None,
            None => call.target.as_deref().map(|t| self.expr(t)),
        };
        let args: Vec<Est> = call.args.iter().map(|a| self.expr(a)).collect();
        let operands = add(
            target.as_ref().map_or(0, |t| t.cost),
            args.iter().map(|a| a.cost).fold(0, add),
        );
        let name = namespaced.as_deref().unwrap_or(name);
        let (cost, ty, path) = self.function(name, target.as_ref(), &args, &call.args);
        Est {
            cost: add(operands, cost),
            ty,
            path,
        }
    }

    /// `o.optMap(v, e)` and `o.optFlatMap(v, e)`, which the `cel` crate parses as calls but
    /// cel-go expands as macros (`cel/library.go`), so upstream estimates the expansion:
    /// `o.hasValue() ? optional.of(cel.bind(v, o.value(), e)) : optional.none()` (without
    /// `optional.of` for `optFlatMap`). `o` is costed twice; the bind costs its empty range
    /// (10); `v` is a local with no path and the size of `o.value()`, unknown but for scalars.
    fn optional_macro(&mut self, call: &CallExpr) -> Option<Est> {
        let name = call.func_name.as_str();
        if !matches!(name, "optMap" | "optFlatMap") || call.args.len() != 2 {
            return None;
        }
        let target = call.target.as_deref()?;
        let Expr::Ident(var) = &call.args[0].expr else {
            return None;
        };
        let optional = self.expr(target);
        let inner = match &optional.ty.kind {
            Kind::Opaque("optional", Some(inner)) => inner.kind.clone(),
            other => other.clone(),
        };
        self.locals.push(Local {
            name: var.clone(),
            ty: computed(inner),
            path: Vec::new(),
        });
        let mapped = self.expr(&call.args[1]);
        self.locals.pop();
        let value = add(optional.cost, 1);
        let bind = add(add(10, value), mapped.cost);
        let (present, ty) = match name {
            "optMap" => (add(bind, 1), optional_of(self.sized(&mapped))),
            _ => (bind, mapped.ty),
        };
        // `hasValue()` on the target, then the costlier branch (`optional.none()` costs 1).
        Some(Est::made(add(value, present.max(1)), ty))
    }

    /// What a call itself costs, and the type (and path) of what it gives.
    fn function(
        &self,
        name: &str,
        target: Option<&Est>,
        args: &[Est],
        exprs: &[IdedExpr],
    ) -> (u64, Rc<Decl>, Vec<String>) {
        if name == operators::INDEX && args.len() == 2 {
            let container = &args[0];
            let step = match container.ty.kind {
                Kind::Map(..) => "@values",
                _ => "@items",
            };
            let mut path = container.path.clone();
            path.push(step.to_string());
            // A list or map literal knows its elements' sizes; anything else is sized by
            // its path, which (as upstream) resolves from `self` even when it did not
            // start there.
            let element = self.sized(container).element();
            let literal =
                container.path.is_empty() && matches!(exprs[0].expr, Expr::List(_) | Expr::Map(_));
            return (1, element, if literal { Vec::new() } else { path });
        }
        let target_ty = target.map(|t| self.sized(t));
        let arg_tys: Vec<Rc<Decl>> = args.iter().map(|a| self.sized(a)).collect();
        let items = target.and_then(|t| self.list_items(t));
        let call = Call {
            target: target_ty.as_ref(),
            args: &arg_tys,
            exprs,
            items: items.as_ref(),
        };
        let (cost, ty) = library(name, &call)
            .or_else(|| standard(name, &call))
            .unwrap_or_else(|| (1, result_type(name, &call)));
        (cost, ty, Vec::new())
    }

    /// The items of a list, sized by their schema node when the list has one (as
    /// Kubernetes' estimator finds them for `isSorted`, `join`…); unknown otherwise.
    fn list_items(&self, list: &Est) -> Option<Rc<Decl>> {
        let Kind::List(item) = &list.ty.kind else {
            return None;
        };
        if list.path.is_empty() {
            return Some(Rc::new(Decl {
                min: 0,
                max: u64::MAX,
                ..(**item).clone()
            }));
        }
        let mut path = list.path.clone();
        path.push("@items".into());
        Some(
            self.resolve(&path)
                .unwrap_or_else(|| Decl::unbounded(item.kind.clone())),
        )
    }
}

/// A call's operands, as the cost functions see them.
struct Call<'a> {
    target: Option<&'a Rc<Decl>>,
    args: &'a [Rc<Decl>],
    exprs: &'a [IdedExpr],
    /// The items of a list target.
    items: Option<&'a Rc<Decl>>,
}

impl Call<'_> {
    fn arg(&self, i: usize) -> Option<&Rc<Decl>> {
        self.args.get(i)
    }
}

/// Kubernetes' estimates of its library functions (k8s.io/apiserver `library.CostEstimator`).
fn library(name: &str, call: &Call) -> Option<(u64, Rc<Decl>)> {
    let bool_ = || computed(Kind::Bool);
    let int = || computed(Kind::Int);
    Some(match name {
        "isSorted" | "sum" | "max" | "min" | "indexOf" | "lastIndexOf" | "includes" => {
            let target = call.target?;
            let result = match name {
                "isSorted" | "includes" => bool_(),
                "indexOf" | "lastIndexOf" => int(),
                _ => computed(target.element().kind.clone()),
            };
            match call.items {
                Some(item) => {
                    let mut each = 1;
                    if matches!(item.kind, Kind::String | Kind::Bytes) {
                        each = add(each, tenth(item.max));
                    }
                    (mul(target.max, each), result)
                }
                None if name == "includes" => (target.max, result),
                None => (tenth(target.max), result),
            }
        }
        "url" => {
            let arg = call.arg(0)?;
            let url = Decl::new(Kind::Opaque("url", None), arg.min, arg.max);
            (tenth(arg.max), url)
        }
        "lowerAscii" | "upperAscii" | "substring" | "trim" => {
            let target = call.target?;
            let result = Decl::new(Kind::String, target.min, target.max);
            (tenth(target.max), result)
        }
        "replace" => replace(call)?,
        "split" => {
            let target = call.target?;
            let limit = match call.exprs.get(1).map(|e| &e.expr) {
                Some(Expr::Literal(CelVal::Int(n))) => u64::try_from(*n).unwrap_or(u64::MAX),
                _ => target.max,
            };
            let parts = Decl::new(Kind::List(Decl::unbounded(Kind::String)), 0, limit);
            (factor(target.max, 2.0 * STRING_TRAVERSAL), parts)
        }
        "join" => join(call)?,
        "find" | "findAll" => {
            let (target, pattern) = (call.target?, call.arg(0)?);
            let cost = mul(tenth(add(target.max, 1)), factor(pattern.max, REGEX_LENGTH));
            let found = match name {
                "find" => Kind::String,
                _ => Kind::List(Decl::unbounded(Kind::String)),
            };
            (cost, Decl::new(found, 0, target.max))
        }
        _ => return ip_and_others(name, call),
    })
}

/// `replace`: a walk of the string and the making of the result, whose size depends on how
/// often the shortest match can be replaced by the longest replacement.
fn replace(call: &Call) -> Option<(u64, Rc<Decl>)> {
    let (s, from, to) = (call.target?, call.arg(0)?, call.arg(1)?);
    let max = if from.min == 0 {
        let count = if s.max < u64::MAX { s.max + 1 } else { s.max };
        add(mul(count, to.max), s.max)
    } else if to.max <= from.min {
        s.max
    } else {
        mul(s.max.div_ceil(from.min), to.max)
    };
    let cost = factor(s.max, 2.0 * STRING_TRAVERSAL);
    Some((cost, Decl::new(Kind::String, 0, max)))
}

/// `join`: the result's length, every item at its longest with separators between.
fn join(call: &Call) -> Option<(u64, Rc<Decl>)> {
    let list = call.target?;
    let mut size = call.items.map_or(0, |item| mul(list.max, item.max));
    if let Some(separator) = call.arg(0) {
        size = add(size, mul(separator.max, list.max.saturating_sub(1)));
    }
    Some((tenth(size), Decl::new(Kind::String, 0, size)))
}

/// The IP, CIDR, quantity, format and URL libraries, and equality of their values.
fn ip_and_others(name: &str, call: &Call) -> Option<(u64, Rc<Decl>)> {
    let bool_ = || computed(Kind::Bool);
    let parsed = |ty| Some((tenth(call.arg(0)?.max), ty));
    // Comparing two addresses of 4 or 16 bytes.
    let compare = tenth(32);
    let parse_string = |i: usize| match call.arg(i) {
        Some(a) if matches!(a.kind, Kind::String) => tenth(a.max),
        _ => 0,
    };
    match name {
        "cidr" => parsed(opaque("cidr")),
        "isIP" | "isCIDR" | "isQuantity" | "isSemver" => parsed(bool_()),
        "quantity" => parsed(opaque("quantity")),
        "semver" => parsed(opaque("semver")),
        "ip" if call
            .target
            .is_some_and(|t| matches!(t.kind, Kind::Opaque("cidr", _))) =>
        {
            Some((1, opaque("ip")))
        }
        "ip" => parsed(opaque("ip")),
        "ip.isCanonical" => Some((factor(call.arg(0)?.max, 2.0 * STRING_TRAVERSAL), bool_())),
        "masked" => Some((1, opaque("cidr"))),
        "prefixLength" | "family" => Some((1, computed(Kind::Int))),
        "isUnspecified"
        | "isLoopback"
        | "isLinkLocalMulticast"
        | "isLinkLocalUnicast"
        | "isGlobalUnicast" => Some((1, bool_())),
        "containsIP" if call.arg(0).is_some() => Some((add(compare, parse_string(0)), bool_())),
        "containsCIDR" if call.arg(0).is_some() => {
            let cost = add(add(compare, tenth(16)), 1);
            Some((add(cost, parse_string(0)), bool_()))
        }
        "validate" => {
            let checked = tenth(call.arg(0)?.max);
            let list = Decl::unbounded(Kind::List(Decl::unbounded(Kind::String)));
            Some((factor(checked, 128.0 * REGEX_LENGTH), optional_of(list)))
        }
        "format.named" => Some((1, optional_of(opaque("format")))),
        // cel-go's sets extension: the call, and every element of one list compared with
        // every one of the other (twice for equivalence).
        "sets.contains" | "sets.intersects" => {
            Some((add(1, mul(call.arg(0)?.max, call.arg(1)?.max)), bool_()))
        }
        "sets.equivalent" => Some((
            add(1, mul(2, mul(call.arg(0)?.max, call.arg(1)?.max))),
            bool_(),
        )),
        "sign" | "asInteger" | "compareTo" | "major" | "minor" | "patch" => {
            Some((1, computed(Kind::Int)))
        }
        "isInteger" | "isGreaterThan" | "isLessThan" => Some((1, bool_())),
        "asApproximateFloat" => Some((1, computed(Kind::Double))),
        "add" | "sub" => Some((1, opaque("quantity"))),
        "getScheme" | "getHostname" | "getHost" | "getPort" | "getEscapedPath" => {
            Some((1, Decl::unbounded(Kind::String)))
        }
        "getQuery" => {
            let values = Decl::unbounded(Kind::List(Decl::unbounded(Kind::String)));
            Some((
                1,
                Decl::unbounded(Kind::Map(Decl::unbounded(Kind::String), values)),
            ))
        }
        operators::EQUALS => opaque_equality(call),
        _ => None,
    }
}

/// `==` of two library values: constant for addresses and quantities, by length for
/// formats and URLs.
fn opaque_equality(call: &Call) -> Option<(u64, Rc<Decl>)> {
    let (Kind::Opaque(left, _), Kind::Opaque(right, _)) = (&call.arg(0)?.kind, &call.arg(1)?.kind)
    else {
        return None;
    };
    if left != right {
        return None;
    }
    let cost = match *left {
        "ip" | "cidr" | "quantity" | "semver" => 1,
        "format" => tenth(64),
        // Upstream sizes both sides by the right one.
        "url" => tenth(call.arg(1)?.max),
        _ => return None,
    };
    Some((cost, computed(Kind::Bool)))
}

/// cel-go's estimates of its standard functions whose cost depends on their operands.
fn standard(name: &str, call: &Call) -> Option<(u64, Rc<Decl>)> {
    let bool_ = || computed(Kind::Bool);
    let two = || Some((call.arg(0)?, call.arg(1)?));
    Some(match name {
        "string" if matches!(call.arg(0)?.kind, Kind::Bytes) => {
            let b = call.arg(0)?;
            (tenth(b.max), Decl::new(Kind::String, b.min / 4, b.max))
        }
        "bytes" if matches!(call.arg(0)?.kind, Kind::String) => {
            let s = call.arg(0)?;
            (tenth(s.max), Decl::new(Kind::Bytes, s.min, mul(s.max, 4)))
        }
        "startsWith" | "endsWith" if call.target.is_some() => (tenth(call.arg(0)?.max), bool_()),
        // cel-go's `ExtFormatString` (the strings extension's `'…'.format([…])`): a walk of
        // the format string, whatever the arguments; its result has no known size.
        "format" if call.target.is_some_and(|t| matches!(t.kind, Kind::String)) => {
            (tenth(call.target?.max), Decl::unbounded(Kind::String))
        }
        operators::IN => {
            let (_, container) = two()?;
            match container.kind {
                Kind::Map(..) => (1, bool_()),
                _ => (factor(container.max, 1.0), bool_()),
            }
        }
        "matches" if call.target.is_some() => {
            let (s, pattern) = (call.target?, call.arg(0)?);
            let cost = mul(tenth(add(s.max, 1)), factor(pattern.max, REGEX_LENGTH));
            (cost, bool_())
        }
        "contains" if call.target.is_some_and(|t| t.is_string_like()) => {
            let (s, part) = (call.target?, call.arg(0)?);
            (mul(tenth(s.max), tenth(part.max)), bool_())
        }
        operators::ADD => {
            let (left, right) = two()?;
            let (min, max) = (add(left.min, right.min), add(left.max, right.max));
            match (&left.kind, &right.kind) {
                (Kind::List(a), Kind::List(b)) => (1, Decl::new(Kind::List(union(a, b)), min, max)),
                (Kind::String | Kind::Bytes, _) | (_, Kind::String | Kind::Bytes) => {
                    (tenth(max), Decl::new(left.kind.clone(), min, max))
                }
                _ => return None,
            }
        }
        operators::EQUALS | operators::NOT_EQUALS => {
            let (left, right) = two()?;
            (tenth(left.max.min(right.max)), bool_())
        }
        operators::LESS
        | operators::LESS_EQUALS
        | operators::GREATER
        | operators::GREATER_EQUALS => {
            let (left, right) = two()?;
            if !(left.is_string_like() || right.is_string_like()) {
                return None;
            }
            (tenth(left.max.min(right.max)), bool_())
        }
        _ => return None,
    })
}

/// The type of what a constant-cost call gives.
fn result_type(name: &str, call: &Call) -> Rc<Decl> {
    let first = || {
        call.target
            .or(call.arg(0))
            .map_or(Kind::Dyn, |t| t.kind.clone())
    };
    match name {
        operators::LOGICAL_NOT
        | operators::NOT_STRICTLY_FALSE
        | operators::EQUALS
        | operators::NOT_EQUALS
        | operators::LESS
        | operators::LESS_EQUALS
        | operators::GREATER
        | operators::GREATER_EQUALS
        | operators::IN
        | "matches"
        | "contains"
        | "startsWith"
        | "endsWith"
        | "isURL"
        | "hasValue" => computed(Kind::Bool),
        "size" | "int" | "getFullYear" | "getMonth" | "getDayOfYear" | "getDayOfMonth"
        | "getDate" | "getDayOfWeek" | "getHours" | "getMinutes" | "getSeconds"
        | "getMilliseconds" => computed(Kind::Int),
        "uint" => computed(Kind::Uint),
        "double" => computed(Kind::Double),
        "string" | "charAt" => Decl::unbounded(Kind::String),
        "duration" => computed(Kind::Duration),
        "timestamp" => computed(Kind::Timestamp),
        operators::ADD
        | operators::SUBSTRACT
        | operators::MULTIPLY
        | operators::DIVIDE
        | operators::MODULO
        | operators::NEGATE => computed(first()),
        "optional.of" | "optional.ofNonZeroValue" => optional_of(
            call.arg(0)
                .cloned()
                .unwrap_or_else(|| Decl::unbounded(Kind::Dyn)),
        ),
        "optional.none" => optional_of(Decl::unbounded(Kind::Dyn)),
        "value" | "orValue" => match call.target.map(|t| &t.kind) {
            Some(Kind::Opaque("optional", Some(inner))) => inner.clone(),
            _ => Decl::unbounded(Kind::Dyn),
        },
        "or" => call
            .target
            .cloned()
            .unwrap_or_else(|| Decl::unbounded(Kind::Dyn)),
        _ if name.starts_with("format.") => opaque("format"),
        _ => Decl::unbounded(Kind::Dyn),
    }
}

#[cfg(test)]
mod tests {
    use super::super::decl::from_schema;
    use super::*;
    use serde_json::{json, Value};

    fn cost(schema: Value, rule: &str) -> u64 {
        let this = from_schema(&schema, false).expect("a type");
        let program = cel::Program::compile(rule).expect("compiles");
        max_cost(program.expression(), &this)
    }

    fn items(ty: &str, max: Option<u64>) -> Value {
        let mut list = json!({"type": "array", "items": {"type": ty}});
        if let Some(m) = max {
            list["maxItems"] = json!(m);
        }
        list
    }

    fn string(max: Option<u64>) -> Value {
        match max {
            Some(m) => json!({"type": "string", "maxLength": m}),
            None => json!({"type": "string"}),
        }
    }

    fn map_of(value: Value, max: Option<u64>) -> Value {
        let mut map = json!({"type": "object", "additionalProperties": value});
        if let Some(m) = max {
            map["maxProperties"] = json!(m);
        }
        map
    }

    /// Cases of kube-apiserver's own cost estimation tests (apiextensions-apiserver
    /// `TestCostEstimation`), with the costs it expects, unbounded and bounded.
    #[test]
    fn estimates_match_kube_apiservers() {
        let all = "self.all(x, true)";
        type Case<'a> = (&'a dyn Fn(Option<u64>) -> Value, &'a str, u64, u64, u64);
        let cases: [Case; 17] = [
            (&|m| items("number", m), all, 4_718_591, 10, 32),
            (&|m| items("string", m), all, 3_145_727, 20, 62),
            (&|m| items("boolean", m), all, 1_887_437, 5, 17),
            (
                &|m| map_of(json!({"type": "number"}), m),
                all,
                1_348_169,
                10,
                32,
            ),
            (
                &|m| map_of(json!({"type": "string"}), m),
                all,
                1_179_647,
                3,
                11,
            ),
            (&string, "self.contains('test')", 314_574, 10, 5),
            (&string, "self.startsWith('test')", 2, 15, 2),
            (
                &string,
                r#"size(self + "hello") > size("hello")"#,
                314_578,
                4,
                7,
            ),
            (&|m| items("number", m), "self[1] == 0.0", 2, 5000, 2),
            (
                &|m| items("string", m),
                "self[1] == self[1]",
                314_577,
                8,
                314_577,
            ),
            (&string, r#"self.matches("x")"#, 314_574, 50, 22),
            (
                &string,
                r#""".matches("(((((((((())))))))))[0-9]")"#,
                7,
                10,
                7,
            ),
            (
                &|m| items("number", m),
                "self.all(x, x == 0.0)",
                6_291_454,
                3 * 1024 * 2048,
                25_165_826,
            ),
            (&string, "self.find('[0-9]+') == ''", 629_147, 10, 11),
            (&string, "self.lowerAscii() == 'lower!'", 314_575, 10, 6),
            (
                &|m| map_of(json!({"type": "integer"}), m),
                "oldSelf.size() == self.size()",
                5,
                10,
                5,
            ),
            (
                &|m| map_of(string(m), m),
                "self.all(x, x.contains(self[x]))",
                2_752_507,
                10,
                72,
            ),
        ];
        for (schema, rule, unbounded, bound, bounded) in cases {
            assert_eq!(cost(schema(None), rule), unbounded, "{rule}");
            assert_eq!(
                cost(schema(Some(bound)), rule),
                bounded,
                "{rule} at {bound}"
            );
        }
        let nested = "self.all(x, self.all(y, self.all(z, true)))";
        assert_eq!(cost(items("number", Some(10)), nested), 3552);
        let objects = json!({"type": "array", "items": {"type": "object", "required": ["required"],
            "properties": {"required": {"type": "string"}, "optional": {"type": "string"}}}});
        assert_eq!(cost(objects, all), 555_128);
    }

    /// kube-apiserver's estimates for the sets library (apiserver `cost_test.go`).
    #[test]
    fn sets_estimates_match_kube_apiservers() {
        let any = json!({"type": "string"});
        assert_eq!(cost(any.clone(), "sets.intersects([1], [1])"), 22);
        assert_eq!(cost(any.clone(), "sets.equivalent([1], [1u, 1.0])"), 25);
        assert_eq!(cost(any, "sets.equivalent([1, 2, 3], [3u, 2.0, 1])"), 39);
        // Over lists of the object, by their bounds.
        assert_eq!(
            cost(items("string", Some(10)), "sets.contains(self, self)"),
            1 + 1 + 1 + 100
        );
    }

    #[test]
    fn library_estimates_match_kube_apiservers() {
        let strings = |m: Option<u64>| {
            let mut list = items("string", m);
            if let Some(m) = m {
                list["items"]["maxLength"] = json!(m);
            }
            list
        };
        assert_eq!(
            cost(strings(None), "self.join(' ') == 'aa bb'"),
            329_853_068_905
        );
        assert_eq!(cost(strings(Some(10)), "self.join(' ') == 'aa bb'"), 43);
        assert_eq!(
            cost(strings(None), "self.isSorted() == true"),
            329_854_432_052
        );
        assert_eq!(cost(strings(Some(10)), "self.isSorted() == true"), 52);
        let replace = |m: u64| {
            json!({"type": "object", "properties": {
                "str": {"type": "string", "maxLength": m},
                "before": {"type": "string", "maxLength": 2},
                "after": {"type": "string", "maxLength": 4}}})
        };
        let rule = "self.str.replace(self.before, self.after) == 'does not matter'";
        assert_eq!(cost(replace(4), rule), 12);
        let split = json!({"type": "object", "properties": {
            "str": {"type": "string", "maxLength": 10},
            "separator": {"type": "string", "maxLength": 10}}});
        assert_eq!(cost(split, "self.str.split(self.separator) == []"), 22);
        let int_or_strings = json!({"type": "array", "maxItems": 10,
            "items": {"x-kubernetes-int-or-string": true, "maxLength": 20}});
        assert_eq!(cost(int_or_strings, "self[0] == 5"), 3);
        let nested = json!({"type": "array", "items": {"type": "object",
            "additionalProperties": {"type": "object", "required": ["required"],
                "properties": {"required": {"type": "string"}, "optional": {"type": "string"}}}}});
        assert_eq!(
            cost(nested, r#"self.all(x, x["y"].required == "z")"#),
            7_340_027
        );
    }

    #[test]
    fn library_functions_are_charged_by_their_operands() {
        let named = json!({"type": "string", "maxLength": 63});
        // The format's validation: a tenth of 252 characters, times 128 × 0.25; `format`
        // itself is a namespace, not a variable.
        let rule = "!format.dns1123Label().validate(self).hasValue()";
        assert_eq!(cost(named.clone(), rule), 26 * 32 + 1 + 1 + 1 + 1);
        assert!(cost(string(None), rule) > 10_000_000);
        assert_eq!(cost(named.clone(), "isURL(self)"), 2);
        // url(): a tenth of the string; getScheme: 1; `in` a list of two: 2, plus its 10.
        assert_eq!(
            cost(named, "url(self).getScheme() in ['http', 'https']"),
            1 + 26 + 1 + 10 + 2
        );
    }
}
