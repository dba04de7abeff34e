//! The runtime cost of a rule, and kube-apiserver's limits on it: a rule (or
//! messageExpression) whose evaluation costs more than 1,000,000 is cancelled with `operation
//! cancelled: actual cost limit exceeded`, and the rules of one object together may cost at
//! most 10,000,000.
//!
//! The `cel` crate tracks no cost and has no hook in its interpreter, so a rule is run as a
//! rewritten copy of its expression that meters itself through two functions of its own
//! (named with `@`, which no rule can spell):
//! - `@cost(w, e)` charges `w` and evaluates `e`. It wraps what runs a variable number of
//!   times: each comprehension's loop condition (once per iteration, charged with the loop
//!   condition's and step's weight) and the lazily evaluated operands of `&&`, `||` and
//!   `?:`. Everything else runs at most once per evaluation of what contains it, so its
//!   weight is folded into its container's.
//! - `@sized(f, t, args…)` evaluates the operands of a call whose cost depends on its
//!   operands (named functions, `==`, `<`, `in`, `+`…), charges by their sizes, then calls
//!   `f` on the values.
//!
//! Weights follow cel-go's runtime costs (a variable or field path 1, a constant 0, a call
//! 1, a list literal 10, a map literal 30; string traversals a tenth of the length, `in` a
//! list its length, regex matching length × pattern length / 4), so rules cost here about
//! what kube-apiserver counts. Two charges are heavier because this interpreter does more
//! work: concatenating lists copies them (cel-go's lists concatenate in constant time), and
//! library functions that walk a list are charged its length. The count is exact for what
//! ran, so every evaluation stops after about a million steps, however its loops nest.

use super::Cel;
use cel::common::ast::{operators, CallExpr, Expr};
use cel::common::value::CelVal;
use cel::{Context, ExecutionError, FunctionContext, IdedExpr};
use std::cell::Cell;

/// kube-apiserver's limit on one evaluation (`PerCallLimit`).
pub const PER_CALL_LIMIT: u64 = 1_000_000;

/// kube-apiserver's budget for all the rules of one object (`RuntimeCELCostBudget`).
pub const RUNTIME_BUDGET: i64 = 10_000_000;

/// cel-go's error for an evaluation over its limit.
pub const LIMIT_EXCEEDED: &str = "operation cancelled: actual cost limit exceeded";

const COST: &str = "@cost";
const SIZED: &str = "@sized";

/// An expression rewritten to meter itself, and the cost of the part of it that always runs.
#[derive(Debug)]
pub struct Metered {
    expr: IdedExpr,
    base: u64,
}

/// What one metered evaluation gave and cost.
pub struct Run {
    pub result: Result<Cel, ExecutionError>,
    pub cost: u64,
    /// Whether the evaluation was cancelled for going over its limit.
    pub exceeded: bool,
}

thread_local! {
    /// The cost so far of the evaluation running on this thread, and its limit. Evaluations
    /// do not nest, and one runs on one thread from start to end.
    static METER: Cell<(u64, u64)> = const { Cell::new((0, u64::MAX)) };
}

impl Metered {
    pub fn new(expr: &IdedExpr) -> Metered {
        let (expr, base) = rewrite(expr);
        Metered { expr, base }
    }

    /// Evaluates the expression in `ctx`, cancelling it once it costs more than `limit`.
    pub fn run(&self, ctx: &Context, limit: u64) -> Run {
        METER.with(|m| m.set((self.base, limit)));
        let result = if self.base > limit {
            Err(ExecutionError::function_error(COST, LIMIT_EXCEEDED))
        } else {
            ctx.resolve(&self.expr)
        };
        let (cost, _) = METER.with(|m| m.replace((0, u64::MAX)));
        Run {
            result,
            cost,
            exceeded: cost > limit,
        }
    }
}

/// Registers the metering functions.
pub(super) fn register(ctx: &mut Context<'static>) {
    ctx.add_function(COST, metered);
    ctx.add_function(SIZED, sized);
}

fn charge(ftx: &FunctionContext, amount: u64) -> Result<(), ExecutionError> {
    let (cost, limit) = METER.with(|m| m.get());
    let cost = cost.saturating_add(amount);
    METER.with(|m| m.set((cost, limit)));
    if cost > limit {
        return Err(ftx.error(LIMIT_EXCEEDED));
    }
    Ok(())
}

/// `@cost(w, e)`.
fn metered(ftx: &FunctionContext) -> Result<Cel, ExecutionError> {
    let [weight, inner] = &ftx.args[..] else {
        return Err(ftx.error("malformed"));
    };
    let Expr::Literal(CelVal::Int(w)) = weight.expr else {
        return Err(ftx.error("malformed"));
    };
    charge(ftx, w.unsigned_abs())?;
    ftx.ptx.resolve(inner)
}

/// `@sized(f, t, operands…)`: `t` is 1 when the first operand is the call's target.
fn sized(ftx: &FunctionContext) -> Result<Cel, ExecutionError> {
    let [name, target, operands @ ..] = &ftx.args[..] else {
        return Err(ftx.error("malformed"));
    };
    let (Expr::Literal(CelVal::String(name)), Expr::Literal(CelVal::Int(target))) =
        (&name.expr, &target.expr)
    else {
        return Err(ftx.error("malformed"));
    };
    let values = operands
        .iter()
        .map(|o| ftx.ptx.resolve(o))
        .collect::<Result<Vec<Cel>, _>>()?;
    charge(ftx, call_cost(name, &values))?;
    let mut scope = ftx.ptx.new_inner_scope();
    let mut idents = Vec::with_capacity(values.len());
    for (i, value) in values.into_iter().enumerate() {
        let ident = OPERANDS
            .get(i)
            .map_or_else(|| format!("@operand{i}"), |name| name.to_string());
        scope.add_variable_from_value(ident.clone(), value);
        idents.push(node(Expr::Ident(ident)));
    }
    let target = (*target == 1 && !idents.is_empty()).then(|| Box::new(idents.remove(0)));
    let call = CallExpr {
        func_name: name.clone(),
        target,
        args: idents,
    };
    scope.resolve(&node(Expr::Call(call)))
}

/// Names the operands of a sized call are bound to (no rule can spell them).
const OPERANDS: [&str; 4] = ["@operand0", "@operand1", "@operand2", "@operand3"];

/// Functions that cost 1 whatever their operands' sizes.
const CONSTANT_TIME: [&str; 9] = [
    "size",
    "hasValue",
    "value",
    "orValue",
    "or",
    "of",
    "ofNonZeroValue",
    "type",
    "dyn",
];

/// What a call costs, given its operands (the target first, when it has one).
fn call_cost(name: &str, operands: &[Cel]) -> u64 {
    let walk = |i: usize| operands.get(i).map_or(0, traversal);
    let tenth = |n: u64| n.div_ceil(10);
    match name {
        operators::EQUALS
        | operators::NOT_EQUALS
        | operators::LESS
        | operators::LESS_EQUALS
        | operators::GREATER
        | operators::GREATER_EQUALS => tenth(operands.iter().map(go_size).min().unwrap_or(0)),
        operators::IN => match operands.get(1) {
            Some(Cel::List(l)) => l.len() as u64,
            _ => 1,
        },
        operators::ADD => match operands.first() {
            // Charged a hundredth of the items copied: `map` and `filter` concatenate once
            // per item, so this keeps their copying (quadratic here) bounded under the limit
            // while letting them run over lists of thousands of items.
            Some(Cel::List(_)) => 1 + (walk(0) + walk(1)).div_ceil(100),
            Some(Cel::String(_) | Cel::Bytes(_)) => tenth(walk(0) + walk(1)),
            _ => 1,
        },
        "matches" | "find" | "findAll" => tenth(1 + walk(0)) * walk(1).div_ceil(4),
        "contains" if matches!(operands.first(), Some(Cel::String(_))) => {
            tenth(walk(0)) * tenth(walk(1))
        }
        "startsWith" | "endsWith" => tenth(walk(0)),
        _ if CONSTANT_TIME.contains(&name) => 1,
        _ => 1 + tenth(operands.iter().map(traversal).sum()),
    }
}

/// How much of a value a function walks through: a string's characters, a list's items.
fn traversal(v: &Cel) -> u64 {
    match v {
        Cel::String(s) => s.chars().count() as u64,
        Cel::Bytes(b) => b.len() as u64,
        Cel::List(l) => l.len() as u64,
        _ => 0,
    }
}

/// A value's size as cel-go's cost tracker takes it: its length, or 1 for a scalar.
fn go_size(v: &Cel) -> u64 {
    match v {
        Cel::String(s) => s.chars().count() as u64,
        Cel::Bytes(b) => b.len() as u64,
        Cel::List(l) => l.len() as u64,
        Cel::Map(m) => m.map.len() as u64,
        _ => 1,
    }
}

fn node(expr: Expr) -> IdedExpr {
    IdedExpr { id: 0, expr }
}

fn call(func_name: &str, args: Vec<IdedExpr>) -> IdedExpr {
    node(Expr::Call(CallExpr {
        func_name: func_name.to_string(),
        target: None,
        args,
    }))
}

fn literal(v: CelVal) -> IdedExpr {
    node(Expr::Literal(v))
}

/// `e` behind a charge of `weight`.
fn charged(weight: u64, e: IdedExpr) -> IdedExpr {
    let weight = i64::try_from(weight).unwrap_or(i64::MAX);
    call(COST, vec![literal(CelVal::Int(weight)), e])
}

/// The metering copy of `e`, and the weight of what of it runs whenever it runs.
fn rewrite(e: &IdedExpr) -> (IdedExpr, u64) {
    let rebuilt = |expr| IdedExpr { id: e.id, expr };
    match &e.expr {
        Expr::Literal(_) | Expr::Unspecified => (e.clone(), 0),
        Expr::Ident(_) => (e.clone(), 1),
        Expr::Struct(_) => (e.clone(), 40),
        Expr::Select(select) => {
            let (operand, w) = rewrite(&select.operand);
            // cel-go reads `a.b.c` as one attribute, costing 1 in all.
            let path = matches!(select.operand.expr, Expr::Ident(_) | Expr::Select(_));
            let own = u64::from(select.test || !path);
            let mut select = select.clone();
            select.operand = Box::new(operand);
            (rebuilt(Expr::Select(select)), w + own)
        }
        Expr::List(list) => {
            let mut list = list.clone();
            let w = rewrite_all(&mut list.elements);
            (rebuilt(Expr::List(list)), w + 10)
        }
        Expr::Map(map) => {
            let mut map = map.clone();
            let mut w = 30;
            for entry in &mut map.entries {
                if let cel::common::ast::EntryExpr::MapEntry(e) = &mut entry.expr {
                    let (key, wk) = rewrite(&e.key);
                    let (value, wv) = rewrite(&e.value);
                    (e.key, e.value) = (key, value);
                    w += wk + wv;
                }
            }
            (rebuilt(Expr::Map(map)), w)
        }
        Expr::Comprehension(c) => {
            let mut c = c.clone();
            let w = rewrite_in_place(&mut c.iter_range)
                + rewrite_in_place(&mut c.accu_init)
                + rewrite_in_place(&mut c.result);
            let (cond, wc) = rewrite(&c.loop_cond);
            let (step, ws) = rewrite(&c.loop_step);
            c.loop_cond = charged(wc + ws, cond);
            c.loop_step = step;
            (rebuilt(Expr::Comprehension(c)), w)
        }
        Expr::Call(c) => rewrite_call(e, c),
    }
}

fn rewrite_in_place(e: &mut IdedExpr) -> u64 {
    let (rewritten, w) = rewrite(e);
    *e = rewritten;
    w
}

fn rewrite_all(exprs: &mut [IdedExpr]) -> u64 {
    exprs.iter_mut().map(rewrite_in_place).sum()
}

/// Calls: lazy operands are charged when they run, sized calls when they are made.
fn rewrite_call(e: &IdedExpr, c: &CallExpr) -> (IdedExpr, u64) {
    let mut c = c.clone();
    let lazy_from = match c.func_name.as_str() {
        operators::LOGICAL_AND | operators::LOGICAL_OR => Some(1),
        operators::CONDITIONAL => Some(1),
        _ => None,
    };
    if let Some(first_lazy) = lazy_from {
        let mut w = 0;
        for (i, arg) in c.args.iter_mut().enumerate() {
            let (rewritten, wa) = rewrite(arg);
            if i < first_lazy {
                *arg = rewritten;
                w += wa;
            } else {
                *arg = charged(wa, rewritten);
            }
        }
        return (
            IdedExpr {
                id: e.id,
                expr: Expr::Call(c),
            },
            w,
        );
    }
    let sized = matches!(
        c.func_name.as_str(),
        operators::EQUALS
            | operators::NOT_EQUALS
            | operators::LESS
            | operators::LESS_EQUALS
            | operators::GREATER
            | operators::GREATER_EQUALS
            | operators::IN
            | operators::ADD
    ) || c.func_name.starts_with(|ch: char| ch.is_ascii_alphabetic());
    let w_target = c.target.as_deref_mut().map_or(0, rewrite_in_place);
    let w = w_target + rewrite_all(&mut c.args);
    if !sized {
        return (
            IdedExpr {
                id: e.id,
                expr: Expr::Call(c),
            },
            w + 1,
        );
    }
    let has_target = c.target.is_some();
    let mut operands: Vec<IdedExpr> = c.target.map(|t| *t).into_iter().collect();
    operands.extend(c.args);
    let mut args = vec![
        literal(CelVal::String(c.func_name)),
        literal(CelVal::Int(i64::from(has_target))),
    ];
    args.extend(operands);
    (call(SIZED, args), w)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cost(source: &str, this: Cel) -> (Result<Cel, ExecutionError>, u64) {
        let program = cel::Program::compile(source).expect("compiles");
        let metered = Metered::new(program.expression());
        let mut ctx = Context::default();
        register(&mut ctx);
        ctx.add_variable_from_value("self", this);
        let run = metered.run(&ctx, PER_CALL_LIMIT);
        (run.result, run.cost)
    }

    fn ints(n: i64) -> Cel {
        Cel::List(std::sync::Arc::new((0..n).map(Cel::Int).collect()))
    }

    #[test]
    fn costs_follow_what_runs() {
        assert_eq!(cost("1 + 2 == 3", Cel::Null), (Ok(Cel::Bool(true)), 2));
        assert_eq!(cost("self.a.b", Cel::Null).1, 1);
        // The right of `||` runs only when the left is false.
        assert_eq!(cost("true || self.x == 1", Cel::Null).1, 0);
        assert_eq!(cost("false || [1] == [1]", Cel::Null).1, 21);
        // Per iteration of `all`: the condition (a call and a variable), and the step.
        // `self` and the result once; per item the condition (a call and a variable), the
        // step's variable, and the predicate (a variable and a comparison).
        assert_eq!(
            cost("self.all(x, x >= 0)", ints(10)),
            (Ok(Cel::Bool(true)), 52)
        );
        assert_eq!(cost("self.all(x, x >= 0)", ints(20)).1, 102);
        // `exists` stops at the first hit.
        let first_hit = cost("self.exists(x, x == 0)", ints(2)).1;
        assert_eq!(
            cost("self.exists(x, x == 0)", ints(1000)),
            (Ok(Cel::Bool(true)), first_hit)
        );
    }

    #[test]
    fn an_evaluation_over_the_limit_is_cancelled() {
        let (result, spent) = cost("self.all(x, self.all(y, self.all(z, true)))", ints(200));
        assert!(
            spent > PER_CALL_LIMIT && spent < PER_CALL_LIMIT + 100,
            "{spent}"
        );
        let message = result.map_err(|e| e.to_string());
        assert!(message.is_err_and(|e| e.contains(LIMIT_EXCEEDED)));
        assert_eq!(
            cost("self.all(x, self.all(y, true))", ints(200)).0,
            Ok(Cel::Bool(true))
        );
        // Membership in a list costs its length, so a loop of them is quadratic.
        assert!(cost("self.all(x, x in self)", ints(2000)).1 > PER_CALL_LIMIT);
    }

    #[test]
    fn sized_calls_give_what_the_call_gives() {
        let text = Cel::String(std::sync::Arc::new("a".repeat(100)));
        assert_eq!(
            cost("self.startsWith('a') && size(self) == 100", text.clone()).0,
            Ok(Cel::Bool(true))
        );
        assert_eq!(
            cost("self + 'b'", Cel::String(std::sync::Arc::new("a".into()))).0,
            Ok(Cel::String(std::sync::Arc::new("ab".into())))
        );
        // The variable, then ceil(101 / 10) × ceil(4 / 4) for the match.
        assert_eq!(cost("self.matches('^a+$')", text).1, 12);
    }
}
