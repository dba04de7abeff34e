//! The function table: Go's builtins plus sprig's hermetic text functions, each with the
//! Go parameter kinds the executor checks arguments against (a JSON number is `float64`
//! and is refused where Go's function takes an `int` or a `string`).

use std::collections::HashMap;
use std::sync::OnceLock;

use crate::value::V;

pub mod builtin;
pub mod sprig_dicts;
pub mod sprig_lists;
pub mod sprig_math;
pub mod sprig_misc;
pub mod sprig_regex;
pub mod sprig_semver;
pub mod sprig_strings;

/// The Go type of a parameter, as far as argument checking needs it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum P {
    /// `interface{}`
    Any,
    /// `reflect.Value` (builtins that see the value unconverted, including "no value")
    Val,
    Int,
    Float,
    Str,
    Bool,
    /// `map[string]interface{}`
    Map,
}

impl P {
    pub fn go_name(self) -> &'static str {
        match self {
            P::Any => "interface {}",
            P::Val => "reflect.Value",
            P::Int => "int",
            P::Float => "float64",
            P::Str => "string",
            P::Bool => "bool",
            P::Map => "map[string]interface {}",
        }
    }
}

/// A function's result: a value, or the error Go's call would return (or panic with).
pub type FnResult = Result<V, String>;

/// One callable function.
pub struct FuncDef {
    pub params: &'static [P],
    pub variadic: Option<P>,
    pub f: fn(Vec<V>) -> FnResult,
}

/// The table a module fills.
pub type Table = HashMap<&'static str, FuncDef>;

/// Adds a function to a table.
pub fn def(
    t: &mut Table,
    name: &'static str,
    params: &'static [P],
    variadic: Option<P>,
    f: fn(Vec<V>) -> FnResult,
) {
    t.insert(
        name,
        FuncDef {
            params,
            variadic,
            f,
        },
    );
}

fn table() -> &'static Table {
    static T: OnceLock<Table> = OnceLock::new();
    T.get_or_init(|| {
        let mut t = Table::new();
        builtin::register(&mut t);
        // sprig's map is added with Funcs(), so its names (`slice`) win over builtins.
        sprig_strings::register(&mut t);
        sprig_lists::register(&mut t);
        sprig_dicts::register(&mut t);
        sprig_math::register(&mut t);
        sprig_regex::register(&mut t);
        sprig_semver::register(&mut t);
        sprig_misc::register(&mut t);
        t
    })
}

/// Finds a function by name.
pub fn lookup(name: &str) -> Option<&'static FuncDef> {
    table().get(name)
}

/// The string inside an argument already checked to be a `string`.
pub fn s(v: &V) -> &str {
    match v {
        V::Str(s) => s,
        _ => "",
    }
}

/// The integer inside an argument already checked to be an `int`/`int64`.
pub fn i(v: &V) -> i64 {
    match v {
        V::Int(i) | V::Int64(i) => *i,
        _ => 0,
    }
}

/// sprig's `strval`: strings as they are, anything else through `%v`.
pub fn strval(v: &V) -> String {
    match v {
        V::Str(s) => s.to_string(),
        V::Semver(sv) => sv.to_string(),
        v => crate::fmt::to_string(v),
    }
}

/// `cast.ToInt64`, which sprig's arithmetic uses: lenient, 0 when it cannot convert.
pub fn to_int64(v: &V) -> i64 {
    match v {
        V::Int(i) | V::Int64(i) => *i,
        V::Float(f) => go_f64_to_i64(*f),
        V::Bool(b) => i64::from(*b),
        V::Str(s) => parse_go_int(trim_zero_decimal(s)).unwrap_or(0),
        _ => 0,
    }
}

/// Go's float→int64 conversion on amd64: truncation, and the "indefinite" value when out of range.
pub fn go_f64_to_i64(f: f64) -> i64 {
    // 2^63 is exactly representable; everything at or above it overflows.
    if f.is_nan() || !(-9.223_372_036_854_776e18..9.223_372_036_854_776e18).contains(&f) {
        i64::MIN
    } else {
        f as i64
    }
}

/// `cast.ToFloat64`.
pub fn to_float64(v: &V) -> f64 {
    match v {
        V::Int(i) | V::Int64(i) => *i as f64,
        V::Float(f) => *f,
        V::Bool(b) => f64::from(u8::from(*b)),
        V::Str(s) => s
            .parse::<f64>()
            .ok()
            .filter(|_| !s.starts_with('+') || s.len() > 1)
            .unwrap_or(0.0),
        _ => 0.0,
    }
}

/// cast's `trimZeroDecimal`: "12.000" → "12".
fn trim_zero_decimal(s: &str) -> &str {
    let b = s.as_bytes();
    let mut found_zero = false;
    for i in (0..b.len()).rev() {
        match b[i] {
            b'.' => {
                if found_zero {
                    return &s[..i];
                }
            }
            b'0' => found_zero = true,
            _ => return s,
        }
    }
    s
}

/// `strconv.ParseInt(s, 0, 64)`.
pub fn parse_go_int(s: &str) -> Option<i64> {
    let (neg, body) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let lower = body.to_ascii_lowercase();
    let (radix, digits) = if let Some(r) = lower.strip_prefix("0x") {
        (16, r)
    } else if let Some(r) = lower.strip_prefix("0o") {
        (8, r)
    } else if let Some(r) = lower.strip_prefix("0b") {
        (2, r)
    } else if lower.len() > 1 && lower.starts_with('0') {
        (8, &lower[1..])
    } else {
        (10, lower.as_str())
    };
    if digits.is_empty() || digits.starts_with(['+', '-']) {
        return None;
    }
    let digits = digits.replace('_', "");
    let v = i128::from_str_radix(&digits, radix).ok()?;
    i64::try_from(if neg { -v } else { v }).ok()
}

/// The elements of a slice argument, or Go's "cannot X on type Y" error.
pub fn list_items(v: &V, what: &str) -> Result<std::rc::Rc<Vec<V>>, String> {
    match v {
        V::List(l, _) => Ok(l.clone()),
        V::Invalid | V::Nil => Err("reflect: call of reflect.Value.Type on zero Value".into()),
        other => Err(format!("Cannot {what} on type {}", other.kind_name())),
    }
}
