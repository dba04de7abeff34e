//! A type checker for CEL expressions, standing in for cel-go's, which the `cel` crate does
//! not have. kube-apiserver compiles every expression of a ValidatingAdmissionPolicy in a
//! declared environment (refusing the policy when one does not compile or has the wrong
//! type), and its status controller checks the validations again against the schemas of the
//! kinds they match; both need the same answers: references to undeclared variables, fields
//! an object type does not have, operators applied to types they have no overload for, and
//! the type the expression yields.
//!
//! What real policies write is covered: field chains, `has()`, indexing, the comprehension
//! macros (their variables typed from the list or map they range over), literals, operators
//! and the common functions. A function this checker does not model yields `Unknown`, which
//! is never reported, so nothing valid is refused for want of a model.
//!
//! Issues are reported as cel-go words them, with the position of the offending token and
//! the source line marked under it. The `cel` crate keeps no positions in its AST, so the
//! expression is lexed here too, and the checker, walking the AST in source order, finds
//! each identifier and operator among the tokens in turn.

use super::types::Ty;
use cel::common::ast::{operators as op, CallExpr, ComprehensionExpr, EntryExpr, Expr, SelectExpr};
use cel::common::value::CelVal;
use cel::IdedExpr;
use std::collections::HashMap;

/// The names an expression may use, with their types.
pub type Env<'a> = [(&'a str, Ty)];

/// The names CEL's and Kubernetes' libraries call functions on, in the environments
/// kube-apiserver compiles expressions in (not variables of the expression's own).
const LIBRARY_RECEIVERS: [&str; 8] = [
    "format", "optional", "ip", "math", "strings", "base64", "sets", "lists",
];

/// Type-checks `source` in `env`: its type, or cel-go's report of every issue found (the
/// parser's errors if it does not parse).
pub fn check(source: &str, env: &Env<'_>) -> Result<Ty, String> {
    let program = cel::Program::compile(source).map_err(|errors| {
        let issues: Vec<String> = errors
            .errors
            .iter()
            .map(|e| {
                let line = usize::try_from(e.pos.0).unwrap_or(1).max(1);
                let column = usize::try_from(e.pos.1).unwrap_or(1).max(1) - 1;
                issue(source, line, column, &e.msg)
            })
            .collect();
        issues.join("\n")
    })?;
    let mut checker = Checker {
        tokens: Locator::new(source),
        // The libraries' receivers (`format.named(..)`, `sets.contains(..)`, …) come first,
        // so a declared variable of the same name hides them.
        scopes: LIBRARY_RECEIVERS
            .iter()
            .map(|n| (n.to_string(), Ty::Unknown))
            .chain(env.iter().map(|(n, t)| (n.to_string(), t.clone())))
            .collect(),
        issues: Vec::new(),
    };
    let ty = checker.expr(program.expression());
    if checker.issues.is_empty() {
        return Ok(ty);
    }
    Err(checker
        .issues
        .iter()
        .map(|(offset, message)| at_offset(source, *offset, message))
        .collect::<Vec<_>>()
        .join("\n"))
}

/// cel-go's display of an issue at a byte offset.
fn at_offset(source: &str, offset: usize, message: &str) -> String {
    let before = &source[..offset.min(source.len())];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    issue(source, line, before[line_start..].chars().count(), message)
}

/// `ERROR: <input>:line:col: message`, then the line and a marker under the column
/// (`column` counted from 0 in characters, shown from 1).
fn issue(source: &str, line: usize, column: usize, message: &str) -> String {
    let mut text = format!("ERROR: <input>:{line}:{}: {message}", column + 1);
    if let Some(snippet) = source.split('\n').nth(line - 1) {
        let snippet = snippet.replace('\t', " ");
        let marks: String = snippet
            .chars()
            .take(column)
            .map(|c| if c.len_utf8() > 1 { '\u{ff0e}' } else { '.' })
            .collect();
        text.push_str(&format!("\n | {snippet}\n | {marks}^"));
    }
    text
}

/// One token of the expression, as far as finding things again needs.
#[derive(Debug)]
struct Token {
    text: String,
    start: usize,
    ident: bool,
    /// For an identifier right after `.`, where the `.` is (cel-go reports a selection
    /// there).
    dot: Option<usize>,
}

/// The expression's identifiers and operators, found in source order.
struct Locator {
    tokens: Vec<Token>,
    idents: usize,
    ops: HashMap<String, usize>,
}

impl Locator {
    fn new(source: &str) -> Locator {
        Locator {
            tokens: lex(source),
            idents: 0,
            ops: HashMap::new(),
        }
    }

    /// The next identifier spelled `name`: its offset, and that of the `.` before it.
    fn ident(&mut self, name: &str) -> Option<(usize, Option<usize>)> {
        let found = self.tokens[self.idents..]
            .iter()
            .position(|t| t.ident && t.text == name)?;
        let token = &self.tokens[self.idents + found];
        self.idents += found + 1;
        Some((token.start, token.dot))
    }

    /// The next identifier, whatever it is (a macro's name).
    fn peek_ident(&self) -> Option<&str> {
        self.tokens[self.idents..]
            .iter()
            .find(|t| t.ident)
            .map(|t| t.text.as_str())
    }

    /// The next operator spelled `text`.
    fn op(&mut self, text: &str) -> Option<usize> {
        let from = self.ops.get(text).copied().unwrap_or(0);
        let found = self.tokens[from..]
            .iter()
            .position(|t| !t.ident && t.text == text)?;
        self.ops.insert(text.to_string(), from + found + 1);
        Some(self.tokens[from + found].start)
    }
}

/// Splits CEL source into tokens: identifiers, operators and punctuation; literals and
/// comments are skipped (a `.` or a name inside a string is not one of the expression's).
fn lex(source: &str) -> Vec<Token> {
    let bytes = source.as_bytes();
    let mut tokens: Vec<Token> = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        let start = i;
        if c.is_ascii_whitespace() {
            i += 1;
        } else if source[i..].starts_with("//") {
            i = source[i..].find('\n').map_or(bytes.len(), |n| i + n);
        } else if c.is_ascii_digit()
            || (c == b'.' && bytes.get(i + 1).is_some_and(u8::is_ascii_digit))
        {
            i = number_end(bytes, i);
        } else if c == b'\'' || c == b'"' {
            i = string_end(source, i, false);
        } else if c.is_ascii_alphabetic() || c == b'_' {
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                i += 1;
            }
            let word = &source[start..i];
            let prefix = word.len() <= 2 && word.chars().all(|c| "rRbB".contains(c));
            if prefix && matches!(bytes.get(i), Some(b'\'' | b'"')) {
                i = string_end(source, i, word.contains(['r', 'R']));
                continue;
            }
            if matches!(word, "true" | "false" | "null") {
                continue;
            }
            let dot = tokens.last().filter(|t| t.text == ".").map(|t| t.start);
            tokens.push(Token {
                text: word.to_string(),
                start,
                ident: word != "in",
                dot,
            });
        } else {
            let two = source.get(i..i + 2).unwrap_or("");
            let len = if ["==", "!=", "<=", ">=", "&&", "||"].contains(&two) {
                2
            } else {
                source[i..].chars().next().map_or(1, char::len_utf8)
            };
            tokens.push(Token {
                text: source[i..i + len].to_string(),
                start,
                ident: false,
                dot: None,
            });
            i += len;
        }
    }
    tokens
}

fn number_end(bytes: &[u8], mut i: usize) -> usize {
    if bytes[i] == b'0' && matches!(bytes.get(i + 1), Some(b'x' | b'X')) {
        i += 2;
        while i < bytes.len() && bytes[i].is_ascii_hexdigit() {
            i += 1;
        }
    } else {
        let digits = |mut i: usize| {
            while i < bytes.len() && bytes[i].is_ascii_digit() {
                i += 1;
            }
            i
        };
        i = digits(i);
        if bytes.get(i) == Some(&b'.') && bytes.get(i + 1).is_some_and(u8::is_ascii_digit) {
            i = digits(i + 1);
        }
        if matches!(bytes.get(i), Some(b'e' | b'E')) {
            i += 1;
            if matches!(bytes.get(i), Some(b'+' | b'-')) {
                i += 1;
            }
            i = digits(i);
        }
    }
    if matches!(bytes.get(i), Some(b'u' | b'U')) {
        i += 1;
    }
    i
}

/// The end of the string literal opening at `i` (a quote), triple-quoted or not.
fn string_end(source: &str, i: usize, raw: bool) -> usize {
    let bytes = source.as_bytes();
    let quote = bytes[i];
    let triple = bytes.get(i..i + 3) == Some(&[quote, quote, quote][..]);
    let mut j = if triple { i + 3 } else { i + 1 };
    while j < bytes.len() {
        if bytes[j] == b'\\' && !raw {
            j += 2;
            continue;
        }
        if triple {
            if bytes.get(j..j + 3) == Some(&[quote, quote, quote][..]) {
                return j + 3;
            }
        } else if bytes[j] == quote {
            return j + 1;
        }
        j += 1;
    }
    bytes.len()
}

/// The identifiers cel-go declares as type values.
const TYPE_NAMES: [&str; 11] = [
    "int",
    "uint",
    "double",
    "bool",
    "string",
    "bytes",
    "list",
    "map",
    "null_type",
    "type",
    "dyn",
];

struct Checker {
    tokens: Locator,
    /// Declared names and comprehension variables, innermost last.
    scopes: Vec<(String, Ty)>,
    issues: Vec<(usize, String)>,
}

impl Checker {
    fn report(&mut self, at: Option<usize>, message: String) {
        self.issues.push((at.unwrap_or(0), message));
    }

    fn lookup(&self, name: &str) -> Option<Ty> {
        self.scopes
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, t)| t.clone())
    }

    fn expr(&mut self, e: &IdedExpr) -> Ty {
        match &e.expr {
            Expr::Ident(name) => self.ident(name),
            Expr::Literal(value) => literal(value),
            Expr::Select(select) => self.select(select),
            Expr::Call(call) => self.call(call),
            Expr::List(list) => {
                let types: Vec<Ty> = list.elements.iter().map(|x| self.expr(x)).collect();
                let element = types.into_iter().reduce(Ty::join).unwrap_or(Ty::Dyn);
                Ty::List(Box::new(element))
            }
            Expr::Map(map) => {
                let (mut keys, mut values) = (Vec::new(), Vec::new());
                for entry in &map.entries {
                    match &entry.expr {
                        EntryExpr::MapEntry(m) => {
                            keys.push(self.expr(&m.key));
                            values.push(self.expr(&m.value));
                        }
                        EntryExpr::StructField(f) => {
                            self.expr(&f.value);
                        }
                    }
                }
                let join = |v: Vec<Ty>| v.into_iter().reduce(Ty::join).unwrap_or(Ty::Dyn);
                Ty::Map(Box::new(join(keys)), Box::new(join(values)))
            }
            Expr::Struct(s) => {
                for entry in &s.entries {
                    if let EntryExpr::StructField(f) = &entry.expr {
                        self.expr(&f.value);
                    }
                }
                Ty::Unknown
            }
            Expr::Comprehension(c) => self.comprehension(c),
            Expr::Unspecified => Ty::Unknown,
        }
    }

    fn ident(&mut self, name: &str) -> Ty {
        // The macros' accumulator is no token of the source.
        if name.starts_with('@') {
            return self.lookup(name).unwrap_or(Ty::Unknown);
        }
        let at = self.tokens.ident(name).map(|(at, _)| at);
        if let Some(ty) = self.lookup(name) {
            return ty;
        }
        if TYPE_NAMES.contains(&name) {
            return Ty::Type;
        }
        self.report(
            at,
            format!("undeclared reference to '{name}' (in container '')"),
        );
        Ty::Unknown
    }

    fn select(&mut self, select: &SelectExpr) -> Ty {
        let operand = self.expr(&select.operand);
        let at = self
            .tokens
            .ident(&select.field)
            .map(|(at, dot)| dot.unwrap_or(at));
        let field = match operand {
            Ty::Object(object) => match object.field(&select.field) {
                Some(t) => t,
                None => {
                    self.report(at, format!("undefined field '{}'", select.field));
                    Ty::Unknown
                }
            },
            Ty::Map(key, value) if matches!(*key, Ty::String | Ty::Dyn | Ty::Unknown) => *value,
            Ty::Dyn => Ty::Dyn,
            Ty::Unknown | Ty::Opaque(_) | Ty::Map(..) => Ty::Unknown,
            other => {
                self.report(
                    at,
                    format!("type '{other}' does not support field selection"),
                );
                Ty::Unknown
            }
        };
        if select.test {
            Ty::Bool
        } else {
            field
        }
    }

    fn call(&mut self, call: &CallExpr) -> Ty {
        if let Some(target) = &call.target {
            let receiver = self.expr(target);
            self.tokens.ident(&call.func_name);
            let args: Vec<Ty> = call.args.iter().map(|a| self.expr(a)).collect();
            return method(&call.func_name, &receiver, &args);
        }
        let name = call.func_name.as_str();
        match (name, call.args.as_slice()) {
            (op::LOGICAL_NOT | op::NEGATE, [arg]) => {
                self.tokens.op(&name[..1]);
                let t = self.expr(arg);
                if name == op::LOGICAL_NOT {
                    Ty::Bool
                } else {
                    t
                }
            }
            (op::CONDITIONAL, [c, a, b]) => {
                self.expr(c);
                let (a, b) = (self.expr(a), self.expr(b));
                Ty::join(a, b)
            }
            (op::INDEX | op::OPT_INDEX, [a, i]) => {
                let (a, i) = (self.expr(a), self.expr(i));
                index(&a, &i)
            }
            (op::NOT_STRICTLY_FALSE, [arg]) => {
                self.expr(arg);
                Ty::Bool
            }
            (_, [a, b]) if binary_token(name).is_some() => {
                let a = self.expr(a);
                let at = binary_token(name).and_then(|t| self.tokens.op(t));
                let b = self.expr(b);
                self.binary(name, a, b, at)
            }
            _ => {
                self.tokens.ident(name);
                let args: Vec<Ty> = call.args.iter().map(|a| self.expr(a)).collect();
                function(name, &args)
            }
        }
    }

    /// A binary operator's type, reporting operands it has no overload for.
    fn binary(&mut self, name: &str, a: Ty, b: Ty, at: Option<usize>) -> Ty {
        let result = match name {
            op::EQUALS | op::NOT_EQUALS => {
                let fits = a.same(&b) || (a.numeric() && b.numeric());
                fits.then_some(Ty::Bool)
            }
            op::LESS | op::LESS_EQUALS | op::GREATER | op::GREATER_EQUALS => {
                let ordered = !matches!(a, Ty::Bool | Ty::Bytes) || a.same(&b);
                (ordered && (a.same(&b) || (a.numeric() && b.numeric()))).then_some(Ty::Bool)
            }
            op::LOGICAL_AND | op::LOGICAL_OR => {
                (matches!(a, Ty::Bool) && matches!(b, Ty::Bool)).then_some(Ty::Bool)
            }
            op::IN => Some(Ty::Bool),
            _ => arithmetic(name, &a, &b),
        };
        match result {
            Some(t) => t,
            None if a.scalar() && b.scalar() => {
                self.report(
                    at,
                    format!("found no matching overload for '{name}' applied to '({a}, {b})'"),
                );
                Ty::Unknown
            }
            None => match name {
                op::EQUALS
                | op::NOT_EQUALS
                | op::LESS
                | op::LESS_EQUALS
                | op::GREATER
                | op::GREATER_EQUALS
                | op::LOGICAL_AND
                | op::LOGICAL_OR => Ty::Bool,
                _ if a.known() && b.known() && !a.scalar() && !b.scalar() => Ty::Dyn,
                _ => Ty::Unknown,
            },
        }
    }

    /// A macro: its variables typed from what it ranges over, its body checked, its type.
    fn comprehension(&mut self, c: &ComprehensionExpr) -> Ty {
        let range = self.expr(&c.iter_range);
        let macro_name = self.tokens.peek_ident().unwrap_or("").to_string();
        self.tokens.ident(&macro_name);
        self.tokens.ident(&c.iter_var);
        let (first, second) = match &range {
            Ty::List(element) => (Ty::Int, (**element).clone()),
            Ty::Map(key, value) => ((**key).clone(), (**value).clone()),
            _ => (Ty::Unknown, Ty::Unknown),
        };
        let mut pushed = 1;
        match &c.iter_var2 {
            Some(second_var) => {
                self.tokens.ident(second_var);
                self.scopes.push((c.iter_var.clone(), first));
                self.scopes.push((second_var.clone(), second.clone()));
                pushed += 1;
            }
            None if matches!(range, Ty::Map(..)) => self.scopes.push((c.iter_var.clone(), first)),
            None => self.scopes.push((c.iter_var.clone(), second.clone())),
        }
        let element = self.lookup(&c.iter_var).unwrap_or(Ty::Unknown);
        let ty = match body(c, &macro_name) {
            Some(parts) => {
                let types: Vec<Ty> = parts.iter().map(|p| self.expr(p)).collect();
                match macro_name.as_str() {
                    op::MAP => Ty::List(Box::new(types.last().cloned().unwrap_or(Ty::Unknown))),
                    op::FILTER => Ty::List(Box::new(element)),
                    _ => Ty::Bool,
                }
            }
            None => {
                self.scopes.push((c.accu_var.clone(), Ty::Unknown));
                self.expr(&c.loop_step);
                self.scopes.pop();
                Ty::Unknown
            }
        };
        for _ in 0..pushed {
            self.scopes.pop();
        }
        ty
    }
}

/// The expressions a macro's user wrote, in source order, picked out of its expansion by
/// the expansion's shape; `None` for a shape not known here.
fn body<'e>(c: &'e ComprehensionExpr, macro_name: &str) -> Option<Vec<&'e IdedExpr>> {
    let Expr::Call(step) = &c.loop_step.expr else {
        return None;
    };
    let is_accu = |e: &IdedExpr| matches!(&e.expr, Expr::Ident(n) if *n == c.accu_var);
    match (step.func_name.as_str(), step.args.as_slice()) {
        (op::LOGICAL_AND | op::LOGICAL_OR, [accu, p]) if is_accu(accu) => Some(vec![p]),
        (op::CONDITIONAL, [p, then, _]) => match (&then.expr, macro_name) {
            (Expr::Call(add), op::MAP) => match add.args.as_slice() {
                [_, list] => match &list.expr {
                    Expr::List(l) => Some(vec![p, l.elements.first()?]),
                    _ => None,
                },
                _ => None,
            },
            _ => Some(vec![p]),
        },
        (op::ADD, [accu, list]) if is_accu(accu) => match &list.expr {
            Expr::List(l) => Some(vec![l.elements.first()?]),
            _ => None,
        },
        _ => None,
    }
}

/// The source token of a binary operator.
fn binary_token(name: &str) -> Option<&'static str> {
    Some(match name {
        op::EQUALS => "==",
        op::NOT_EQUALS => "!=",
        op::LESS => "<",
        op::LESS_EQUALS => "<=",
        op::GREATER => ">",
        op::GREATER_EQUALS => ">=",
        op::LOGICAL_AND => "&&",
        op::LOGICAL_OR => "||",
        op::ADD => "+",
        op::SUBSTRACT => "-",
        op::MULTIPLY => "*",
        op::DIVIDE => "/",
        op::MODULO => "%",
        op::IN => "in",
        _ => return None,
    })
}

/// `+ - * / %` on two operands: the result, or `None` when no overload takes them.
fn arithmetic(name: &str, a: &Ty, b: &Ty) -> Option<Ty> {
    use Ty::*;
    let same_number = a.same(b) && a.numeric();
    match (name, a, b) {
        (_, Dyn | Unknown | Opaque(_), _) | (_, _, Dyn | Unknown | Opaque(_)) => Some(Unknown),
        (op::ADD, String, String) => Some(String),
        (op::ADD, Bytes, Bytes) => Some(Bytes),
        (op::ADD, List(x), List(y)) => Some(List(Box::new(Ty::join((**x).clone(), (**y).clone())))),
        (op::ADD, Timestamp, Duration) | (op::ADD, Duration, Timestamp) => Some(Timestamp),
        (op::ADD | op::SUBSTRACT, Duration, Duration) => Some(Duration),
        (op::SUBSTRACT, Timestamp, Timestamp) => Some(Duration),
        (op::SUBSTRACT, Timestamp, Duration) => Some(Timestamp),
        (op::MODULO, Double, _) => None,
        (op::ADD | op::SUBSTRACT | op::MULTIPLY | op::DIVIDE | op::MODULO, _, _) if same_number => {
            Some(a.clone())
        }
        _ => None,
    }
}

fn index(container: &Ty, key: &Ty) -> Ty {
    match container {
        Ty::List(element) => (**element).clone(),
        Ty::Map(_, value) => (**value).clone(),
        Ty::Dyn if key.known() => Ty::Dyn,
        _ => Ty::Unknown,
    }
}

fn literal(value: &CelVal) -> Ty {
    match value {
        CelVal::Boolean(_) => Ty::Bool,
        CelVal::Int(_) => Ty::Int,
        CelVal::UInt(_) => Ty::Uint,
        CelVal::Double(_) => Ty::Double,
        CelVal::String(_) => Ty::String,
        CelVal::Bytes(_) => Ty::Bytes,
        CelVal::Null => Ty::Null,
        _ => Ty::Unknown,
    }
}

/// The type of a global function's result, for the functions whose result type does not
/// depend on their operands.
fn function(name: &str, args: &[Ty]) -> Ty {
    match name {
        "size" | "int" => Ty::Int,
        "uint" => Ty::Uint,
        "double" => Ty::Double,
        "string" => Ty::String,
        "bytes" => Ty::Bytes,
        "bool" | "matches" => Ty::Bool,
        "timestamp" => Ty::Timestamp,
        "duration" => Ty::Duration,
        "type" => Ty::Type,
        "dyn" => Ty::Dyn,
        _ if name.starts_with("is") => Ty::Bool,
        _ => {
            let _ = args;
            Ty::Unknown
        }
    }
}

/// The type of a method's result, for the methods whose result type is fixed.
fn method(name: &str, receiver: &Ty, args: &[Ty]) -> Ty {
    match name {
        "size" | "indexOf" | "lastIndexOf" => Ty::Int,
        "contains" | "startsWith" | "endsWith" | "matches" | "hasValue" => Ty::Bool,
        "containsIP" | "containsCIDR" => Ty::Bool,
        "lowerAscii" | "upperAscii" | "trim" | "replace" | "substring" | "charAt" | "join" => {
            Ty::String
        }
        "split" | "findAll" => Ty::List(Box::new(Ty::String)),
        "getFullYear" | "getMonth" | "getDayOfYear" | "getDayOfMonth" | "getDate"
        | "getDayOfWeek" | "getHours" | "getMinutes" | "getSeconds" | "getMilliseconds" => Ty::Int,
        _ if name.starts_with("is") => Ty::Bool,
        _ => {
            let _ = (receiver, args);
            Ty::Unknown
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::types::{self, Record, Ty};
    use super::check;

    fn env() -> Vec<(&'static str, Ty)> {
        let spec = Record::ty(
            "Deployment.spec",
            vec![
                ("replicas", Ty::Int),
                ("paused", Ty::Bool),
                (
                    "template",
                    Record::ty(
                        "Deployment.spec.template",
                        vec![(
                            "containers",
                            Ty::List(Box::new(Record::ty(
                                "Container",
                                vec![("name", Ty::String), ("image", Ty::String)],
                            ))),
                        )],
                    ),
                ),
                (
                    "labels",
                    Ty::Map(Box::new(Ty::String), Box::new(Ty::String)),
                ),
            ],
        );
        let object = Record::ty("Deployment", vec![("spec", spec)]);
        vec![
            ("object", object.clone()),
            ("oldObject", object),
            ("request", types::request()),
            ("namespaceObject", types::namespace()),
        ]
    }

    #[test]
    fn undefined_fields_are_reported_where_cel_go_reports_them() {
        let err = check("object.spec.replicass > 1", &env()).unwrap_err();
        assert_eq!(
            err,
            "ERROR: <input>:1:12: undefined field 'replicass'\n | object.spec.replicass > 1\n | ...........^"
        );
        // Inside a macro, the variable has the element's type.
        let err = check(
            "object.spec.template.containers.all(c, c.imagee != '')",
            &env(),
        )
        .unwrap_err();
        assert!(
            err.starts_with("ERROR: <input>:1:41: undefined field 'imagee'"),
            "{err}"
        );
        // The same name twice: the second one is found.
        let err = check(
            "object.spec.replicas == 1 && oldObject.spec.replicas.x == 1",
            &env(),
        )
        .unwrap_err();
        assert!(
            err.starts_with("ERROR: <input>:1:53: type 'int' does not support field selection"),
            "{err}"
        );
    }

    #[test]
    fn well_typed_expressions_have_their_type() {
        let e = env();
        for (source, ty) in [
            ("object.spec.replicas <= 5", "bool"),
            ("has(object.spec.paused) && object.spec.paused", "bool"),
            (
                "object.spec.template.containers.map(c, c.name)",
                "list(string)",
            ),
            (
                "object.spec.template.containers.filter(c, c.image.startsWith('x'))",
                "list(Container)",
            ),
            ("object.spec.labels['app']", "string"),
            ("'a' in object.spec.labels", "bool"),
            ("request.userInfo.username + '!'", "string"),
            ("namespaceObject.metadata.labels", "map(string, string)"),
            ("[1, 2].exists_one(x, x > 1)", "bool"),
            ("object.spec.labels.all(k, k.size() < 10)", "bool"),
            (
                "size(object.spec.template.containers) > 0 ? 'a' : 'b'",
                "string",
            ),
        ] {
            match check(source, &e) {
                Ok(t) => assert_eq!(t.to_string(), ty, "{source}"),
                Err(err) => panic!("{source}: {err}"),
            }
        }
    }

    #[test]
    fn the_libraries_receivers_are_declared() {
        let env: Vec<(&str, Ty)> = vec![("object", Ty::Unknown)];
        for source in [
            "sets.contains(object.a, object.b)",
            "!format.dns1123Label().validate(object.name).hasValue()",
            "optional.of(1).hasValue()",
        ] {
            assert!(
                check(source, &env).is_ok(),
                "{source}: {:?}",
                check(source, &env)
            );
        }
    }

    #[test]
    fn undeclared_names_and_mismatched_operands_are_reported() {
        let err = check("params.x == 1", &env()).unwrap_err();
        assert_eq!(
            err,
            "ERROR: <input>:1:1: undeclared reference to 'params' (in container '')\n | params.x == 1\n | ^"
        );
        let err = check("object.spec.replicas == 'three'", &env()).unwrap_err();
        assert!(
            err.starts_with("ERROR: <input>:1:22: found no matching overload for '_==_' applied to '(int, string)'"),
            "{err}"
        );
        let err = check("request.nmae == ''", &env()).unwrap_err();
        assert!(err.contains("undefined field 'nmae'"), "{err}");
        // Strings that hold dots and names are not mistaken for the expression's own.
        let err = check("'object.spec.x' == object.spec.x", &env()).unwrap_err();
        assert!(
            err.starts_with("ERROR: <input>:1:31: undefined field 'x'"),
            "{err}"
        );
    }

    #[test]
    fn parse_errors_are_cel_go_shaped() {
        let err = check("object.spec.replicas >", &env()).unwrap_err();
        assert_eq!(
            err,
            "ERROR: <input>:1:23: Syntax error: mismatched input '<EOF>' expecting {'[', '{', '(', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER}\n | object.spec.replicas >\n | ......................^"
        );
    }

    #[test]
    fn what_cannot_be_typed_is_not_reported() {
        let e = vec![
            ("object", Ty::Dyn),
            (
                "authorizer",
                Ty::Opaque("kubernetes.authorization.Authorizer"),
            ),
        ];
        for source in [
            "object.spec.anything.at.all == 'x'",
            "authorizer.group('').resource('pods').check('create').allowed()",
            "object.spec.x.someLibraryFunction() == 1",
            "quantity(object.x).isLessThan(quantity('1'))",
        ] {
            assert!(check(source, &e).is_ok(), "{source}");
        }
        assert_eq!(
            check("object.spec.x", &e).ok().map(|t| t.to_string()),
            Some("dyn".into())
        );
    }
}
