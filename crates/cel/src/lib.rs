//! `x-kubernetes-validations`: CEL rules on a CRD schema's nodes, compiled with the schema and
//! checked on every write of a custom object, as kube-apiserver checks them.
//!
//! A rule sees the node's value as `self` and, on an update, the value at the same place in
//! the object as it was as `oldSelf`. A rule that reads `oldSelf` is a transition rule: it
//! runs only where an old value exists, unless it says `optionalOldSelf`, in which case it
//! also runs on creates with `oldSelf` null. A failing rule reports on the node's path (or
//! its `fieldPath`) with its `message`, its `messageExpression`'s result, or `failed rule:
//! <rule>`, in the form its `reason` names.
//!
//! CEL itself is the `cel` crate; here are the Kubernetes library functions real CRDs use on
//! top of it (lists: `isSorted`, `sum`, `indexOf`, `lastIndexOf`; strings: `lowerAscii`,
//! `upperAscii`, `trim`, `split`, `join`, `replace`, `substring`, `charAt`, `indexOf`,
//! `lastIndexOf`; regex: `find`, `findAll`), and the quantity, IP, CIDR, URL, format and sets
//! libraries and CEL's optional values in their own modules (`sets` also counts a string's
//! `size` in code points, as kube-apiserver does). A rule that calls a function
//! not implemented here is not enforced (and says so in the log) rather than refusing every
//! object.
//!
//! Rules run metered (the `cost` module): one evaluation is cancelled past kube-apiserver's
//! per-call cost limit, and an object's rules share its runtime budget, with
//! kube-apiserver's errors. Before that, when a CRD is written, each rule's worst-case cost
//! is estimated from the bounds its schema sets (the `decl`, `estimate` and `limits`
//! modules), and a CRD whose rules could cost too much is refused, as kube-apiserver
//! refuses it.

pub mod check;
mod cost;
// The cost estimator's parts are public for kube-api's conformance cases, which check a CRD's
// refusal and each rule's estimated cost side by side.
pub mod decl;
pub mod estimate;
mod format;
mod ip;
pub mod limits;
mod optional;
mod quantity;
mod sets;
pub mod types;
mod url;

use cel::extractors::{Arguments, This};
pub use cel::Value as Cel;
use cel::{Context, ExecutionError, FunctionContext, Program};
pub use limits::{estimated_cost_errors, within_runtime_limits};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};
pub use url::go_quote;

/// CEL's reserved words: no identifier, and a schema's property spelled like one is escaped
/// (`__in__`) to be named in a rule.
pub const RESERVED_WORDS: [&str; 21] = [
    "true",
    "false",
    "null",
    "in",
    "as",
    "break",
    "const",
    "continue",
    "else",
    "for",
    "function",
    "if",
    "import",
    "let",
    "loop",
    "package",
    "namespace",
    "return",
    "var",
    "void",
    "while",
];

/// One compiled rule.
#[derive(Debug)]
pub struct Rule {
    source: String,
    /// The rule, rewritten to count its cost as it runs.
    metered: cost::Metered,
    /// The rule as compiled, for schemas whose rules cannot reach the limits.
    plain: Program,
    message: Option<String>,
    /// `messageExpression`: as written, metered, and as compiled.
    message_expression: Option<(String, cost::Metered, Program)>,
    reason: Reason,
    /// `fieldPath`, as a suffix of the node's path (`.spec.x` → `spec.x` under the node).
    field_path: Option<String>,
    transition: bool,
    optional_old_self: bool,
    /// Functions the rule calls that this server does not implement (Kubernetes' semver or
    /// authz libraries, say): such a rule is not enforced, rather than refusing every object
    /// for want of a function kube-apiserver has.
    pub unsupported: Vec<String>,
}

/// The named functions a rule may call: CEL's standard ones (as the `cel` crate registers
/// them) and the Kubernetes library functions registered in [`ROOT`] (with those of the
/// `quantity`, `ip`, `url`, `optional` and `format` modules). Operators and macros (`has`, `all`, `exists`, `map`,
/// `filter`) are not calls by name.
const KNOWN_FUNCTIONS: [&str; 38] = [
    "contains",
    "size",
    "max",
    "min",
    "startsWith",
    "endsWith",
    "string",
    "bytes",
    "double",
    "int",
    "uint",
    "matches",
    "duration",
    "timestamp",
    "getFullYear",
    "getMonth",
    "getDayOfYear",
    "getDayOfMonth",
    "getDate",
    "getDayOfWeek",
    "getHours",
    "getMinutes",
    "getSeconds",
    "getMilliseconds",
    "isSorted",
    "sum",
    "indexOf",
    "lastIndexOf",
    "lowerAscii",
    "upperAscii",
    "trim",
    "split",
    "join",
    "replace",
    "substring",
    "charAt",
    "find",
    "findAll",
];

/// The functions `program` calls by name that are not in [`KNOWN_FUNCTIONS`].
fn unsupported(program: &Program) -> Vec<String> {
    let mut names: Vec<String> = program
        .references()
        .functions()
        .into_iter()
        .filter(|f| f.starts_with(|c: char| c.is_ascii_alphabetic()))
        .filter(|f| {
            !(KNOWN_FUNCTIONS.contains(f)
                || quantity::FUNCTIONS.contains(f)
                || ip::FUNCTIONS.contains(f)
                || url::FUNCTIONS.contains(f)
                || optional::FUNCTIONS.contains(f)
                || sets::FUNCTIONS.contains(f)
                || format::is_function(f))
        })
        .map(str::to_string)
        .collect();
    names.sort();
    names
}

/// How a failing rule is reported (`reason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reason {
    Invalid,
    Forbidden,
    Required,
    Duplicate,
}

/// The functions every rule can call: CEL's standard ones and Kubernetes' libraries.
static ROOT: LazyLock<Context<'static>> = LazyLock::new(|| {
    let mut ctx = Context::default();
    ctx.add_function("isSorted", is_sorted);
    ctx.add_function("sum", sum);
    ctx.add_function("indexOf", index_of);
    ctx.add_function("lastIndexOf", last_index_of);
    ctx.add_function("lowerAscii", |This(s): This<Arc<String>>| {
        s.to_ascii_lowercase()
    });
    ctx.add_function("upperAscii", |This(s): This<Arc<String>>| {
        s.to_ascii_uppercase()
    });
    ctx.add_function("trim", |This(s): This<Arc<String>>| s.trim().to_string());
    ctx.add_function("split", split);
    ctx.add_function("join", join);
    ctx.add_function("replace", replace);
    ctx.add_function("substring", substring);
    ctx.add_function("charAt", char_at);
    ctx.add_function("find", find);
    ctx.add_function("findAll", find_all);
    quantity::register(&mut ctx);
    ip::register(&mut ctx);
    url::register(&mut ctx);
    optional::register(&mut ctx);
    format::register(&mut ctx);
    sets::register(&mut ctx);
    cost::register(&mut ctx);
    ctx
});

impl Rule {
    /// A rule from one entry of `x-kubernetes-validations`; the reason it cannot compile.
    pub fn compile(entry: &Value) -> Result<Rule, String> {
        let text = |k: &str| entry.get(k).and_then(Value::as_str).map(str::to_string);
        let source = text("rule").ok_or("rule: Required value")?;
        let program = Program::compile(&source).map_err(|e| format!("compilation failed: {e}"))?;
        let message_expression = match text("messageExpression") {
            Some(m) => {
                let compiled = Program::compile(&m)
                    .map_err(|e| format!("messageExpression compilation failed: {e}"))?;
                let metered = cost::Metered::new(compiled.expression());
                Some((m, metered, compiled))
            }
            None => None,
        };
        let reason = match text("reason").as_deref() {
            None | Some("FieldValueInvalid") => Reason::Invalid,
            Some("FieldValueForbidden") => Reason::Forbidden,
            Some("FieldValueRequired") => Reason::Required,
            Some("FieldValueDuplicate") => Reason::Duplicate,
            Some(other) => return Err(format!(
                "reason: Unsupported value: \"{other}\": supported values: \"FieldValueDuplicate\", \"FieldValueForbidden\", \"FieldValueInvalid\", \"FieldValueRequired\""
            )),
        };
        let transition = program.references().has_variable("oldSelf");
        let unsupported = unsupported(&program);
        if !unsupported.is_empty() {
            tracing::warn!(rule = %source, functions = ?unsupported, "a CEL rule calls functions infrasim does not implement; it is not enforced");
        }
        Ok(Rule {
            unsupported,
            message: text("message"),
            message_expression,
            reason,
            field_path: text("fieldPath").map(|p| p.trim_start_matches('.').to_string()),
            transition,
            optional_old_self: entry
                .get("optionalOldSelf")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            metered: cost::Metered::new(program.expression()),
            plain: program,
            source,
        })
    }

    /// The rule as written.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// How kube-apiserver names the rule in errors about it: its message, else the rule.
    fn error_string(&self) -> &str {
        match self.message.as_deref().map(str::trim) {
            Some(m) if !m.is_empty() => m,
            _ => self.source.trim(),
        }
    }

    /// Whether the rule runs at a node whose old value is `old` (`None`: a create, or a
    /// place the old object did not have).
    fn applies(&self, old: Option<&Value>) -> bool {
        self.unsupported.is_empty() && (!self.transition || old.is_some() || self.optional_old_self)
    }
}

/// The rules under `schema` (at `path` in the CRD) that do not compile, each at its own
/// `….x-kubernetes-validations[i].rule` with the rule as Go prints it, as kube-apiserver
/// reports them.
pub fn compile_errors(schema: &Value, path: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let children = ["additionalProperties", "items"]
        .iter()
        .filter_map(|k| {
            Some((
                format!("{path}.{k}"),
                schema.get(*k).filter(|v| v.is_object())?,
            ))
        })
        .chain(
            schema
                .get("properties")
                .and_then(Value::as_object)
                .into_iter()
                .flatten()
                .map(|(name, p)| (format!("{path}.properties[{name}]"), p)),
        );
    for (at, child) in children {
        out.extend(compile_errors(child, &at));
    }
    let rules = schema
        .get("x-kubernetes-validations")
        .and_then(Value::as_array);
    for (i, entry) in rules.into_iter().flatten().enumerate() {
        if let Err(why) = Rule::compile(entry) {
            let text = |k: &str| {
                go_quote(
                    entry
                        .get(k)
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .as_bytes(),
                )
            };
            let shown = format!(
                "apiextensions.ValidationRule{{Rule:{}, Message:{}, MessageExpression:{}, Reason:(*apiextensions.FieldValueErrorReason)(nil), FieldPath:{}, OptionalOldSelf:(*bool)(nil)}}",
                text("rule"), text("message"), text("messageExpression"), text("fieldPath")
            );
            out.push((
                format!("{path}.x-kubernetes-validations[{i}].rule"),
                format!("Invalid value: {shown}: {why}"),
            ));
        }
    }
    out
}

/// Evaluates a boolean CEL `expression` with `variables` bound (admission match conditions).
pub fn evaluate_bool(expression: &str, variables: &[(&str, Value)]) -> Result<bool, String> {
    let bound: Vec<(&str, Cel)> = variables.iter().map(|(n, v)| (*n, to_cel(v))).collect();
    match evaluate(expression, &bound)? {
        Cel::Bool(b) => Ok(b),
        other => Err(format!("not a bool: {:?}", other.type_of())),
    }
}

/// Evaluates a CEL `expression` with CEL values bound to names (admission policies, whose
/// `variables` are themselves CEL values).
pub fn evaluate(expression: &str, bound: &[(&str, Cel)]) -> Result<Cel, String> {
    let program = compiled(expression)?;
    let mut scope = ROOT.new_inner_scope();
    for (name, value) in bound {
        scope.add_variable_from_value(*name, value.clone());
    }
    program.execute(&scope).map_err(|e| e.to_string())
}

/// Expressions of admission policies and match conditions, compiled once: they are read
/// from stored objects on every write they apply to, and parsing is most of their cost.
static PROGRAMS: LazyLock<Mutex<HashMap<String, Arc<Program>>>> = LazyLock::new(Default::default);

/// Compiled expressions kept at most; past this the cache starts over (policies change rarely).
const PROGRAMS_KEPT: usize = 4096;

fn compiled(expression: &str) -> Result<Arc<Program>, String> {
    let mut programs = PROGRAMS.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(program) = programs.get(expression) {
        return Ok(program.clone());
    }
    let program = Arc::new(Program::compile(expression).map_err(|e| e.to_string())?);
    if programs.len() >= PROGRAMS_KEPT {
        programs.clear();
    }
    programs.insert(expression.to_string(), program.clone());
    Ok(program)
}

/// What is left of the cost budget of one object's rules (kube-apiserver's
/// `RuntimeCELCostBudget`): each rule and messageExpression that runs spends what it cost;
/// once it is spent, no further rule of the object runs. The rules of a schema whose
/// estimates keep them within every limit ([`within_runtime_limits`]) run unmetered.
#[derive(Debug)]
pub struct Budget {
    left: i64,
    metered: bool,
}

impl Default for Budget {
    fn default() -> Self {
        Budget {
            left: cost::RUNTIME_BUDGET,
            metered: true,
        }
    }
}

impl Budget {
    /// The budget of an object whose schema's rules cannot reach the limits: nothing to
    /// count.
    pub fn unmetered() -> Self {
        Budget {
            metered: false,
            ..Budget::default()
        }
    }

    /// Whether the budget ran out: no further rule runs.
    pub fn exhausted(&self) -> bool {
        self.left < 0
    }

    /// Spends `cost`; false (and the budget exhausted) if that is more than is left.
    fn spend(&mut self, cost: u64) -> bool {
        match i64::try_from(cost) {
            Ok(c) if c <= self.left => {
                self.left -= c;
                true
            }
            _ => {
                self.left = -1;
                false
            }
        }
    }

    /// Runs `metered` (or `plain`, unmetered) in `scope`.
    fn run(&self, metered: &cost::Metered, plain: &Program, scope: &Context) -> cost::Run {
        match self.metered {
            true => metered.run(scope, cost::PER_CALL_LIMIT),
            false => cost::Run {
                result: plain.execute(scope),
                cost: 0,
                exceeded: false,
            },
        }
    }
}

const OUT_OF_BUDGET: &str =
    "validation failed due to running out of cost budget, no further validation rules will be run";

/// Checks `rules` of a node of OpenAPI type `ty` at `path`: `(field, message)` per failure.
/// Cost errors end the checking of the object, as `budget` then says.
pub fn check(
    rules: &[Rule],
    ty: &str,
    path: &str,
    new: &Value,
    old: Option<&Value>,
    errors: &mut Vec<(String, String)>,
    budget: &mut Budget,
) {
    let applicable: Vec<&Rule> = rules.iter().filter(|r| r.applies(old)).collect();
    if applicable.is_empty() {
        return;
    }
    let node = if path.is_empty() { "<root>" } else { path };
    let invalid = |detail: &str| format!("Invalid value: \"{ty}\": {detail}");
    if budget.left <= 0 {
        budget.left = -1;
        errors.push((node.to_string(), invalid(OUT_OF_BUDGET)));
        return;
    }
    let mut scope = ROOT.new_inner_scope();
    scope.add_variable_from_value("self", to_cel(new));
    scope.add_variable_from_value("oldSelf", old.map(to_cel).unwrap_or(Cel::Null));
    for rule in applicable {
        let run = budget.run(&rule.metered, &rule.plain, &scope);
        if !budget.spend(run.cost) {
            errors.push((node.to_string(), invalid(OUT_OF_BUDGET)));
            return;
        }
        if run.exceeded {
            budget.left = -1;
            let detail = format!(
                "'{}': no further validation rules will be run due to call cost exceeds limit for rule: {}",
                cost::LIMIT_EXCEEDED,
                rule.error_string()
            );
            errors.push((node.to_string(), invalid(&detail)));
            return;
        }
        let field = match &rule.field_path {
            Some(suffix) if path.is_empty() => suffix.clone(),
            Some(suffix) => format!("{path}.{suffix}"),
            None => node.to_string(),
        };
        let failure = match run.result {
            Ok(Cel::Bool(true)) => continue,
            Ok(Cel::Bool(false)) => match message(rule, &scope, budget) {
                Ok(m) => m,
                Err(detail) => {
                    errors.push((field, invalid(&detail)));
                    return;
                }
            },
            Ok(other) => format!(
                "rule evaluation error: the rule must return a bool, not {:?}",
                other.type_of()
            ),
            Err(e) => evaluation_error(&e, rule),
        };
        let text = match rule.reason {
            Reason::Invalid => invalid(&failure),
            Reason::Forbidden => format!("Forbidden: {failure}"),
            Reason::Required => format!("Required value: {failure}"),
            Reason::Duplicate => format!("Duplicate value: \"{ty}\""),
        };
        errors.push((field, text));
    }
}

/// kube-apiserver's words for a rule whose evaluation failed: cel-go's error, then the
/// rule's message (or the rule).
fn evaluation_error(e: &ExecutionError, rule: &Rule) -> String {
    let error = match e {
        ExecutionError::FunctionError { message, .. } => message.clone(),
        ExecutionError::NoSuchKey(key) => format!("no such key: {key}"),
        ExecutionError::NoSuchOverload => "no such overload".to_string(),
        ExecutionError::DivisionByZero(_) => "division by zero".to_string(),
        other => other.to_string(),
    };
    let rule = rule.error_string();
    if error.starts_with("no such overload") {
        return format!("'{error}': call arguments did not match a supported operator, function or macro signature for rule: {rule}");
    }
    format!("{error} evaluating rule: {rule}")
}

/// A failed rule's message: its messageExpression's string if that yields a non-empty one,
/// else its message, else the rule itself. `Err` when the messageExpression's cost ends the
/// checking (the budget is then exhausted).
fn message(rule: &Rule, scope: &Context, budget: &mut Budget) -> Result<String, String> {
    if let Some((source, metered, plain)) = &rule.message_expression {
        let run = budget.run(metered, plain, scope);
        if !budget.spend(run.cost) {
            return Err("messageExpression evaluation failed due to running out of cost budget, no further validation rules will be run".to_string());
        }
        if run.exceeded {
            budget.left = -1;
            return Err(format!(
                "no further validation rules will be run due to call cost exceeds limit for messageExpression: {}",
                url::go_quote(source.as_bytes())
            ));
        }
        if let Ok(Cel::String(s)) = run.result {
            if !s.trim().is_empty() {
                return Ok(s.to_string());
            }
        }
    }
    Ok(rule
        .message
        .clone()
        .unwrap_or_else(|| format!("failed rule: {}", rule.source)))
}

/// A JSON value as CEL sees it: integers are `int` (as Kubernetes' int64 fields), objects
/// maps with string keys.
pub fn to_cel(v: &Value) -> Cel {
    match v {
        Value::Null => Cel::Null,
        Value::Bool(b) => Cel::Bool(*b),
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => Cel::Int(i),
            (None, Some(u)) => Cel::UInt(u),
            _ => Cel::Float(n.as_f64().unwrap_or(0.0)),
        },
        Value::String(s) => Cel::String(Arc::new(s.clone())),
        Value::Array(items) => Cel::List(Arc::new(items.iter().map(to_cel).collect())),
        Value::Object(map) => Cel::Map(cel::objects::Map {
            map: Arc::new(
                map.iter()
                    .map(|(k, v)| (cel::objects::Key::String(Arc::new(k.clone())), to_cel(v)))
                    .collect(),
            ),
        }),
    }
}

/// What a library function answers.
type Answer = std::result::Result<Cel, ExecutionError>;

/// A value of a library type (a quantity, an IP address, a CIDR): the `cel` crate's values
/// are a closed set with no opaque variant, so such a value travels as a map with one entry,
/// from a key naming its type to its canonical text. Equal values are then equal maps, so
/// `==` compares them by value.
fn typed(key: &str, text: String) -> Cel {
    let entry = (
        cel::objects::Key::String(Arc::new(key.into())),
        Cel::String(Arc::new(text)),
    );
    Cel::Map(cel::objects::Map {
        map: Arc::new([entry].into_iter().collect()),
    })
}

/// The canonical text of a value [`typed`] under `key`; `None` for anything else.
fn typed_text<'a>(v: &'a Cel, key: &str) -> Option<&'a str> {
    match v {
        Cel::Map(m) if m.map.len() == 1 => {
            match m.map.get(&cel::objects::Key::String(Arc::new(key.into()))) {
                Some(Cel::String(s)) => Some(s.as_str()),
                _ => None,
            }
        }
        _ => None,
    }
}

fn is_sorted(This(list): This<Arc<Vec<Cel>>>) -> Answer {
    Ok(Cel::Bool(list.windows(2).all(|w| {
        w[0].partial_cmp(&w[1]).is_some_and(|o| o.is_le())
    })))
}

fn sum(ftx: &FunctionContext, This(list): This<Arc<Vec<Cel>>>) -> Answer {
    let mut total = match list.first() {
        None | Some(Cel::Int(_)) => Cel::Int(0),
        Some(Cel::UInt(_)) => Cel::UInt(0),
        Some(Cel::Float(_)) => Cel::Float(0.0),
        Some(other) => return Err(ftx.error(format!("cannot sum {:?}", other.type_of()))),
    };
    for x in list.iter() {
        total = match (&total, x) {
            (Cel::Int(a), Cel::Int(b)) => Cel::Int(a.checked_add(*b).ok_or(ftx.error("overflow"))?),
            (Cel::UInt(a), Cel::UInt(b)) => {
                Cel::UInt(a.checked_add(*b).ok_or(ftx.error("overflow"))?)
            }
            (Cel::Float(a), Cel::Float(b)) => Cel::Float(a + b),
            _ => return Err(ftx.error("sum of mixed types")),
        };
    }
    Ok(total)
}

/// `indexOf` of a list (an element) or of a string (a substring, in code points).
fn index_of(ftx: &FunctionContext, This(this): This<Cel>, Arguments(args): Arguments) -> Answer {
    position(ftx, this, &args, false)
}

fn last_index_of(
    ftx: &FunctionContext,
    This(this): This<Cel>,
    Arguments(args): Arguments,
) -> Answer {
    position(ftx, this, &args, true)
}

fn position(ftx: &FunctionContext, this: Cel, args: &[Cel], last: bool) -> Answer {
    let wanted = args
        .first()
        .ok_or_else(|| ftx.error("one argument expected"))?;
    let found = match (&this, wanted) {
        (Cel::List(list), x) => {
            let mut hits = list
                .iter()
                .enumerate()
                .filter(|(_, v)| *v == x)
                .map(|(i, _)| i);
            if last {
                hits.next_back()
            } else {
                hits.next()
            }
        }
        (Cel::String(s), Cel::String(sub)) => {
            let byte = if last {
                s.rfind(sub.as_str())
            } else {
                s.find(sub.as_str())
            };
            byte.map(|b| s[..b].chars().count())
        }
        _ => return Err(ftx.error(format!("indexOf of {:?}", this.type_of()))),
    };
    Ok(Cel::Int(found.map(|i| i as i64).unwrap_or(-1)))
}

fn split(This(s): This<Arc<String>>, separator: Arc<String>) -> Answer {
    Ok(Cel::List(Arc::new(
        s.split(separator.as_str())
            .map(|p| Cel::String(Arc::new(p.to_string())))
            .collect(),
    )))
}

fn join(
    ftx: &FunctionContext,
    This(list): This<Arc<Vec<Cel>>>,
    Arguments(args): Arguments,
) -> Answer {
    let separator = match args.first() {
        Some(Cel::String(s)) => s.to_string(),
        None => String::new(),
        Some(_) => return Err(ftx.error("the separator must be a string")),
    };
    let parts: std::result::Result<Vec<String>, ExecutionError> = list
        .iter()
        .map(|v| match v {
            Cel::String(s) => Ok(s.to_string()),
            _ => Err(ftx.error("join of a list that is not all strings")),
        })
        .collect();
    Ok(Cel::String(Arc::new(parts?.join(&separator))))
}

fn replace(This(s): This<Arc<String>>, from: Arc<String>, to: Arc<String>) -> String {
    s.replace(from.as_str(), to.as_str())
}

fn substring(
    ftx: &FunctionContext,
    This(s): This<Arc<String>>,
    Arguments(args): Arguments,
) -> Answer {
    let chars: Vec<char> = s.chars().collect();
    let index = |i: usize| -> std::result::Result<Option<usize>, ExecutionError> {
        match args.get(i) {
            Some(Cel::Int(n)) if *n >= 0 && (*n as usize) <= chars.len() => Ok(Some(*n as usize)),
            None => Ok(None),
            Some(other) => Err(ftx.error(format!("index out of range: {other:?}"))),
        }
    };
    let start = index(0)?.ok_or_else(|| ftx.error("a start index is required"))?;
    let end = index(1)?.unwrap_or(chars.len());
    if start > end {
        return Err(ftx.error(format!(
            "invalid substring range. start: {start}, end: {end}"
        )));
    }
    Ok(Cel::String(Arc::new(chars[start..end].iter().collect())))
}

fn char_at(ftx: &FunctionContext, This(s): This<Arc<String>>, i: i64) -> Answer {
    let count = s.chars().count() as i64;
    if i < 0 || i > count {
        return Err(ftx.error(format!("index out of range: {i}")));
    }
    let c = s.chars().nth(i as usize).map(String::from);
    Ok(Cel::String(Arc::new(c.unwrap_or_default())))
}

fn find(ftx: &FunctionContext, This(s): This<Arc<String>>, pattern: Arc<String>) -> Answer {
    let re = regex::Regex::new(&pattern).map_err(|e| ftx.error(e))?;
    let found = re.find(&s).map(|m| m.as_str().to_string());
    Ok(Cel::String(Arc::new(found.unwrap_or_default())))
}

fn find_all(
    ftx: &FunctionContext,
    This(s): This<Arc<String>>,
    Arguments(args): Arguments,
) -> Answer {
    let Some(Cel::String(pattern)) = args.first() else {
        return Err(ftx.error("a regular expression is required"));
    };
    let re = regex::Regex::new(pattern).map_err(|e| ftx.error(e))?;
    let limit = match args.get(1) {
        Some(Cel::Int(n)) if *n >= 0 => *n as usize,
        _ => usize::MAX,
    };
    Ok(Cel::List(Arc::new(
        re.find_iter(&s)
            .take(limit)
            .map(|m| Cel::String(Arc::new(m.as_str().to_string())))
            .collect(),
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(rule: Value, new: Value, old: Option<Value>) -> Vec<(String, String)> {
        let rule = Rule::compile(&rule).expect("compiles");
        let mut errors = Vec::new();
        let mut budget = Budget::default();
        check(
            &[rule],
            "object",
            "spec",
            &new,
            old.as_ref(),
            &mut errors,
            &mut budget,
        );
        errors
    }

    #[test]
    fn failing_rules_report_like_kube_apiserver() {
        let rule = json!({"rule": "self.replicas <= self.maxReplicas"});
        assert!(run(rule.clone(), json!({"replicas": 1, "maxReplicas": 2}), None).is_empty());
        assert_eq!(
            run(rule, json!({"replicas": 3, "maxReplicas": 2}), None),
            [(
                "spec".to_string(),
                "Invalid value: \"object\": failed rule: self.replicas <= self.maxReplicas"
                    .to_string()
            )]
        );
        let with_message = json!({"rule": "self.replicas <= self.maxReplicas",
            "messageExpression": "'replicas ' + string(self.replicas) + ' over the maximum'",
            "reason": "FieldValueForbidden", "fieldPath": ".replicas"});
        assert_eq!(
            run(with_message, json!({"replicas": 3, "maxReplicas": 2}), None),
            [(
                "spec.replicas".to_string(),
                "Forbidden: replicas 3 over the maximum".to_string()
            )]
        );
    }

    #[test]
    fn transition_rules_run_only_where_there_is_an_old_value() {
        let immutable = json!({"rule": "self == oldSelf", "message": "is immutable"});
        assert!(run(immutable.clone(), json!("a"), None).is_empty());
        assert!(run(immutable.clone(), json!("a"), Some(json!("a"))).is_empty());
        assert_eq!(
            run(immutable, json!("b"), Some(json!("a")))[0].1,
            "Invalid value: \"object\": is immutable"
        );
        let optional =
            json!({"rule": "oldSelf == null || self >= oldSelf", "optionalOldSelf": true});
        assert!(run(optional.clone(), json!(1), None).is_empty());
        assert_eq!(run(optional, json!(1), Some(json!(2))).len(), 1);
    }

    #[test]
    fn kubernetes_library_functions() {
        for rule in [
            "[1, 2, 3].isSorted() && ![3, 1].isSorted()",
            "[1, 2, 3].sum() == 6",
            "[1, 2, 1].indexOf(1) == 0 && [1, 2, 1].lastIndexOf(1) == 2",
            "'Hello'.lowerAscii() == 'hello' && 'Hello'.upperAscii() == 'HELLO'",
            "' x '.trim() == 'x' && 'a,b'.split(',').join('-') == 'a-b'",
            "'abcdef'.substring(1, 3) == 'bc' && 'abc'.charAt(1) == 'b'",
            "'abc'.indexOf('c') == 2 && 'a.b.c'.replace('.', '/') == 'a/b/c'",
            "'v1.2.3'.find('[0-9]+') == '1' && size('a1b22'.findAll('[0-9]+')) == 2",
            "self.all(x, x > 0) && self.exists(x, x == 2) && self.map(x, x * 2) == [2, 4]",
        ] {
            let errors = run(json!({"rule": rule}), json!([1, 2]), None);
            assert!(errors.is_empty(), "{rule}: {errors:?}");
        }
    }

    #[test]
    fn quantity_library() {
        for rule in [
            "quantity('200M') == quantity('0.2G') && quantity('1Gi') != quantity('1G')",
            "quantity('200M').compareTo(quantity('0.2G')) == 0",
            "quantity('50M').compareTo(quantity('50Mi')) == -1",
            "quantity('150Mi').isGreaterThan(quantity('100Mi'))",
            "quantity('50M').isLessThan(quantity('100M'))",
            "isQuantity('1.3Gi') && !isQuantity('200K') && !isQuantity('Three')",
            "quantity('50k').asInteger() == 50000 && !quantity('1.5').isInteger()",
            "quantity('50k').sub(20000).asApproximateFloat() == 30000.0",
            "quantity('50k').add(20).sub(quantity('100k')).sub(-50000) == quantity('20')",
            "quantity('-3').sign() == -1 && quantity('0').sign() == 0",
            "quantity(self.limit).isGreaterThan(quantity(self.request))",
        ] {
            let errors = run(
                json!({"rule": rule}),
                json!({"limit": "2Gi", "request": "1500Mi"}),
                None,
            );
            assert!(errors.is_empty(), "{rule}: {errors:?}");
        }
        let errors = run(
            json!({"rule": "quantity(self.x).sign() >= 0"}),
            json!({"x": "12K"}),
            None,
        );
        assert!(
            errors[0].1.contains("unable to parse quantity's suffix"),
            "{errors:?}"
        );
        let errors = run(
            json!({"rule": "quantity('9999999999999999999G').asInteger() > 0"}),
            json!({}),
            None,
        );
        assert!(
            errors[0].1.contains("cannot convert value to integer"),
            "{errors:?}"
        );
    }

    #[test]
    fn ip_and_cidr_libraries() {
        for rule in [
            "isIP('10.0.0.1') && !isIP('10.0.0.01') && !isIP('::ffff:1.2.3.4')",
            "ip('10.0.0.1').family() == 4 && ip('::1').family() == 6",
            "ip('::1').isLoopback() && ip('0.0.0.0').isUnspecified()",
            "ip('fe80::1').isLinkLocalUnicast() && ip('224.0.0.1').isLinkLocalMulticast()",
            "ip('10.0.0.1').isGlobalUnicast() && !ip('127.0.0.1').isGlobalUnicast()",
            "ip('2001:db8::1') == ip('2001:0db8:0:0::1')",
            "ip.isCanonical('2001:db8::1') && !ip.isCanonical('2001:0db8::1')",
            "cidr('10.0.0.0/8').containsIP('10.1.2.3') && !cidr('10.0.0.0/8').containsIP(ip('11.0.0.1'))",
            "cidr('10.0.0.0/8').containsCIDR('10.1.0.0/16') && !cidr('10.1.0.0/16').containsCIDR('10.0.0.0/8')",
            "cidr('192.168.0.1/24').ip() == ip('192.168.0.1')",
            "cidr('192.168.0.1/24').masked() == cidr('192.168.0.0/24')",
            "cidr('192.168.0.0/24').prefixLength() == 24 && isCIDR('::/0') && !isCIDR('10.0.0.0/33')",
            "self.pods.all(p, isCIDR(p)) && cidr(self.pods[0]).containsIP(self.node)",
        ] {
            let errors = run(
                json!({"rule": rule}),
                json!({"pods": ["10.244.0.0/16"], "node": "10.244.1.7"}),
                None,
            );
            assert!(errors.is_empty(), "{rule}: {errors:?}");
        }
        let errors = run(
            json!({"rule": "ip(self).family() == 4"}),
            json!("10.0.0.1%eth0"),
            None,
        );
        assert!(
            errors[0].1.contains("zone value is not allowed"),
            "{errors:?}"
        );
    }

    #[test]
    fn url_library() {
        // The examples of kube-apiserver's urls.go, each as a rule.
        for rule in [
            "isURL('https://user:pass@example.com:80/path?query=val#fragment')",
            "isURL('/absolute-path')",
            "!isURL('https://a:b:c/') && !isURL('../relative-path')",
            "url('/path').getScheme() == ''",
            "url('https://example.com/').getScheme() == 'https'",
            "url('https://example.com:80/').getHost() == 'example.com:80'",
            "url('https://example.com/').getHost() == 'example.com'",
            "url('https://[::1]:80/').getHost() == '[::1]:80'",
            "url('https://[::1]/').getHost() == '[::1]'",
            "url('/path').getHost() == ''",
            "url('https://example.com:80/').getHostname() == 'example.com'",
            "url('https://127.0.0.1:80/').getHostname() == '127.0.0.1'",
            "url('https://[::1]:80/').getHostname() == '::1'",
            "url('/path').getHostname() == ''",
            "url('https://example.com:80/').getPort() == '80'",
            "url('https://example.com/').getPort() == ''",
            "url('/path').getPort() == ''",
            "url('https://example.com/path').getEscapedPath() == '/path'",
            "url('https://example.com/path with spaces/').getEscapedPath() == '/path%20with%20spaces/'",
            "url('https://example.com').getEscapedPath() == ''",
            "url('https://example.com/path?k1=a&k2=b&k2=c').getQuery() == {'k1': ['a'], 'k2': ['b', 'c']}",
            "url('https://example.com/path?key with spaces=value with spaces').getQuery() == {'key with spaces': ['value with spaces']}",
            "url('https://example.com/path?').getQuery() == {}",
            "url('https://example.com/path').getQuery() == {}",
            "url('HTTPS://example.com/a b') == url('https://example.com/a%20b')",
            "url('https://example.com/#x').getEscapedPath() == '/'",
            "url(self.endpoint).getScheme() in ['http', 'https']",
        ] {
            let errors = run(
                json!({"rule": rule}),
                json!({"endpoint": "https://svc.ns:8443/hook"}),
                None,
            );
            assert!(errors.is_empty(), "{rule}: {errors:?}");
        }
        for (rule, error) in [
            ("url('https://a:b:c/').getHost() == ''", "URL parse error during conversion from string: parse \"https://a:b:c/\": invalid port \":c\" after host"),
            ("url('../relative-path').getHost() == ''", "parse \"../relative-path\": invalid URI for request"),
        ] {
            let errors = run(json!({"rule": rule}), json!({}), None);
            assert!(errors.len() == 1 && errors[0].1.contains(error), "{rule}: {errors:?}");
        }
        // As kube-apiserver words an evaluation error: cel-go's error, then the rule.
        let errors = run(
            json!({"rule": "url(self).getScheme() == 'https'", "message": "an https URL"}),
            json!("../x"),
            None,
        );
        assert_eq!(
            errors[0].1,
            "Invalid value: \"object\": URL parse error during conversion from string: parse \"../x\": invalid URI for request evaluating rule: an https URL"
        );
    }

    #[test]
    fn format_library_and_optionals() {
        for rule in [
            "!format.dns1123Label().validate(self.name).hasValue()",
            "format.dns1123Label().validate(self.bad).hasValue()",
            "format.named('dns1123Subdomain').value().validate('apiextensions.k8s.io') == optional.none()",
            "!format.named('nope').hasValue() && format.named('uuid').hasValue()",
            "format.dns1123Label().validate('a.b').value() == ['must not contain dots']",
            "format.qualifiedName().validate('apiextensions.k8s.io/v1beta1').orValue(['ok']) == ['ok']",
            "format.dns1123LabelPrefix().validate('my-label-prefix-') == optional.none()",
            "format.dns1123SubdomainPrefix().validate('mysubdomain.prefix.-') == optional.none()",
            "format.dns1035LabelPrefix().validate('my-label-prefix-') == optional.none()",
            "format.dns1035Label().validate('my-label-name') == optional.none()",
            "!format.labelValue().validate('my_value').hasValue()",
            "!format.uri().validate('http://example.com').hasValue()",
            "!format.uuid().validate('123e4567-e89b-12d3-a456-426614174000').hasValue()",
            "!format.byte().validate('aGVsbG8=').hasValue()",
            "!format.date().validate('2021-01-01').hasValue()",
            "!format.datetime().validate('2021-01-01T00:00:00Z').hasValue()",
            "format.uri() == format.named('uri').value() && format.uri() != format.uuid()",
            "optional.of(1).value() == 1 && optional.none().orValue(2) == 2",
            "optional.ofNonZeroValue('').or(optional.of('x')).value() == 'x'",
            "optional.of(0).hasValue() && !optional.ofNonZeroValue(0).hasValue()",
        ] {
            let errors = run(json!({"rule": rule}), json!({"name": "web-1", "bad": "Web_1"}), None);
            assert!(errors.is_empty(), "{rule}: {errors:?}");
        }
        let rule = json!({"rule": "!format.dns1123Label().validate(self).hasValue()",
            "messageExpression": "format.dns1123Label().validate(self).value().join(', ')"});
        let errors = run(rule, json!("a.b"), None);
        assert_eq!(
            errors[0].1,
            "Invalid value: \"object\": must not contain dots"
        );
        let errors = run(
            json!({"rule": "optional.none().value() == 1"}),
            json!({}),
            None,
        );
        assert!(
            errors[0].1.contains("optional.none() dereference"),
            "{errors:?}"
        );
    }

    #[test]
    fn rules_over_the_cost_limit_are_cancelled_as_kube_apiserver_cancels_them() {
        let nested = "self.all(x, self.all(y, self.all(z, true)))";
        let list: Vec<i64> = (0..100).collect();
        let rules = [
            json!({"rule": nested, "message": " too costly "}),
            json!({"rule": "false"}),
        ];
        let rules: Vec<Rule> = rules
            .iter()
            .map(|r| Rule::compile(r).expect("compiles"))
            .collect();
        let (mut errors, mut budget) = (Vec::new(), Budget::default());
        check(
            &rules,
            "array",
            "spec.items",
            &json!(list),
            None,
            &mut errors,
            &mut budget,
        );
        assert_eq!(
            errors,
            [(
                "spec.items".to_string(),
                "Invalid value: \"array\": 'operation cancelled: actual cost limit exceeded': no further validation rules will be run due to call cost exceeds limit for rule: too costly".to_string()
            )]
        );
        assert!(budget.exhausted());
        let small: Vec<i64> = (0..10).collect();
        assert!(run(json!({"rule": nested}), json!(small), None).is_empty());
        let costly_message = json!({"rule": "false", "fieldPath": ".x",
            "messageExpression": format!("{nested} ? 'a' : 'b'")});
        assert_eq!(
            run(costly_message, json!(list), None),
            [(
                "spec.x".to_string(),
                format!("Invalid value: \"object\": no further validation rules will be run due to call cost exceeds limit for messageExpression: \"{nested} ? 'a' : 'b'\"")
            )]
        );
    }

    #[test]
    fn an_objects_rules_share_one_cost_budget() {
        let rule = Rule::compile(&json!({"rule": "self.all(x, x >= 0)"})).expect("compiles");
        let (mut errors, mut budget) = (
            Vec::new(),
            Budget {
                left: 60,
                metered: true,
            },
        );
        let out = "Invalid value: \"array\": validation failed due to running out of cost budget, no further validation rules will be run";
        // The walk over the object stops once the budget is exhausted, as schema.rs does.
        for path in ["a", "b", "c"] {
            if budget.exhausted() {
                break;
            }
            check(
                std::slice::from_ref(&rule),
                "array",
                path,
                &json!((0..10).collect::<Vec<_>>()),
                None,
                &mut errors,
                &mut budget,
            );
        }
        assert_eq!(errors, [("b".to_string(), out.to_string())]);
        assert!(budget.exhausted());
        let mut budget = Budget {
            left: 0,
            metered: true,
        };
        check(
            std::slice::from_ref(&rule),
            "array",
            "",
            &json!([]),
            None,
            &mut errors,
            &mut budget,
        );
        assert_eq!(errors[1], ("<root>".to_string(), out.to_string()));
    }

    #[test]
    fn rules_that_cannot_compile_or_return_no_bool_are_errors() {
        assert!(Rule::compile(&json!({"rule": "self.a ==="})).is_err());
        assert!(Rule::compile(&json!({"rule": "true", "reason": "Nope"})).is_err());
        let errors = run(json!({"rule": "self.missing > 1"}), json!({}), None);
        assert_eq!(
            errors[0].1,
            "Invalid value: \"object\": no such key: missing evaluating rule: self.missing > 1"
        );
        let errors = run(json!({"rule": "1"}), json!({}), None);
        assert!(errors[0].1.contains("must return a bool"), "{errors:?}");
    }

    #[test]
    fn rules_calling_functions_not_implemented_here_are_not_enforced() {
        let rule = Rule::compile(&json!({"rule": "self.endpoint.frobnicate() && self.size > 0"}))
            .expect("compiles");
        assert_eq!(rule.unsupported, ["frobnicate"]);
        let mut errors = Vec::new();
        check(
            &[rule],
            "object",
            "spec",
            &json!({"size": 0}),
            None,
            &mut errors,
            &mut Budget::default(),
        );
        assert!(errors.is_empty(), "{errors:?}");
        let known = Rule::compile(&json!({"rule": "self.x.startsWith('a') && [1].all(i, i > 0)"}))
            .expect("compiles");
        assert!(known.unsupported.is_empty(), "{:?}", known.unsupported);
    }
}
