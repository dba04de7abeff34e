//! Kubernetes' CEL quantity library: `quantity(s)`, `isQuantity(s)`, and a quantity's `sign`,
//! `isInteger`, `asInteger`, `asApproximateFloat`, `add`, `sub`, `isLessThan`,
//! `isGreaterThan` and `compareTo`, over resource.Quantity's grammar (a decimal number, then a
//! decimal SI suffix `n u m k M G T P E`, a binary one `Ki … Ei`, or an exponent `e3`/`E-2`).
//!
//! A quantity travels as a typed value (see `typed` in the parent module) whose text is its
//! value in nano-units (kube-apiserver rounds every quantity up to 10^-9, so that is exact):
//! `==` then compares quantities by value as Kubernetes' does
//! (`quantity("200M") == quantity("0.2G")`). Values are i128 nano-units: past about 10^29 a
//! quantity is refused as out of range (kube-apiserver's arbitrary-precision decimals go
//! further; no real field does).

use super::{typed, typed_text, Answer, Cel};
use cel::extractors::{Arguments, This};
use cel::{ExecutionError, FunctionContext};
use std::cmp::Ordering;
use std::sync::Arc;

/// The type key of a quantity value.
const KEY: &str = "@quantity";

/// Nano-units in one unit.
const NANO: i128 = 1_000_000_000;

/// Registers the library's functions.
pub(super) fn register(ctx: &mut cel::Context<'static>) {
    ctx.add_function("quantity", |ftx: &FunctionContext, s: Arc<String>| {
        parse(&s).map(to_cel).map_err(|e| ftx.error(e))
    });
    ctx.add_function("isQuantity", |s: Arc<String>| parse(&s).is_ok());
    ctx.add_function("sign", |ftx: &FunctionContext, This(q): This<Cel>| {
        Ok::<_, ExecutionError>(Cel::Int(from_cel(ftx, &q)?.signum() as i64))
    });
    ctx.add_function("isInteger", |ftx: &FunctionContext, This(q): This<Cel>| {
        Ok::<_, ExecutionError>(Cel::Bool(as_integer(from_cel(ftx, &q)?).is_some()))
    });
    ctx.add_function("asInteger", |ftx: &FunctionContext, This(q): This<Cel>| {
        as_integer(from_cel(ftx, &q)?)
            .map(Cel::Int)
            .ok_or_else(|| ftx.error("cannot convert value to integer"))
    });
    ctx.add_function(
        "asApproximateFloat",
        |ftx: &FunctionContext, This(q): This<Cel>| {
            Ok::<_, ExecutionError>(Cel::Float(from_cel(ftx, &q)? as f64 / NANO as f64))
        },
    );
    ctx.add_function(
        "add",
        |ftx: &FunctionContext, This(q): This<Cel>, Arguments(a): Arguments| {
            arithmetic(ftx, &q, &a, i128::checked_add)
        },
    );
    ctx.add_function(
        "sub",
        |ftx: &FunctionContext, This(q): This<Cel>, Arguments(a): Arguments| {
            arithmetic(ftx, &q, &a, i128::checked_sub)
        },
    );
    ctx.add_function(
        "compareTo",
        |ftx: &FunctionContext, This(q): This<Cel>, o: Cel| {
            Ok::<_, ExecutionError>(Cel::Int(compare(ftx, &q, &o)? as i64))
        },
    );
    ctx.add_function(
        "isLessThan",
        |ftx: &FunctionContext, This(q): This<Cel>, o: Cel| {
            Ok::<_, ExecutionError>(Cel::Bool(compare(ftx, &q, &o)? == Ordering::Less))
        },
    );
    ctx.add_function(
        "isGreaterThan",
        |ftx: &FunctionContext, This(q): This<Cel>, o: Cel| {
            Ok::<_, ExecutionError>(Cel::Bool(compare(ftx, &q, &o)? == Ordering::Greater))
        },
    );
}

/// The functions this library adds, for the list of functions rules may call.
pub(super) const FUNCTIONS: [&str; 11] = [
    "quantity",
    "isQuantity",
    "sign",
    "isInteger",
    "asInteger",
    "asApproximateFloat",
    "add",
    "sub",
    "compareTo",
    "isLessThan",
    "isGreaterThan",
];

fn to_cel(nanos: i128) -> Cel {
    typed(KEY, nanos.to_string())
}

/// The nano-units of a quantity value; an error for anything else.
fn from_cel(ftx: &FunctionContext, v: &Cel) -> Result<i128, ExecutionError> {
    typed_text(v, KEY)
        .and_then(|s| s.parse::<i128>().ok())
        .ok_or_else(|| {
            ftx.error(format!(
                "no such overload: {:?} is not a quantity",
                v.type_of()
            ))
        })
}

fn compare(ftx: &FunctionContext, a: &Cel, b: &Cel) -> Result<Ordering, ExecutionError> {
    Ok(from_cel(ftx, a)?.cmp(&from_cel(ftx, b)?))
}

/// `add` and `sub`: with a quantity, or with an int (a count of units).
fn arithmetic(
    ftx: &FunctionContext,
    q: &Cel,
    args: &[Cel],
    op: fn(i128, i128) -> Option<i128>,
) -> Answer {
    let q = from_cel(ftx, q)?;
    let other = match args {
        [Cel::Int(i)] => i128::from(*i) * NANO,
        [other] => from_cel(ftx, other)?,
        _ => return Err(ftx.error("expected one argument")),
    };
    op(q, other)
        .map(to_cel)
        .ok_or_else(|| ftx.error("quantity out of range"))
}

/// The value as an int64, if it is a whole number that fits.
fn as_integer(nanos: i128) -> Option<i64> {
    match nanos % NANO {
        0 => i64::try_from(nanos / NANO).ok(),
        _ => None,
    }
}

/// Why a string is not a quantity, in resource.ParseQuantity's words.
const FORMAT_WRONG: &str =
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";

/// A quantity string's value in nano-units, rounded up (away from zero) as kube-apiserver
/// rounds what is finer than 10^-9.
pub fn parse(s: &str) -> Result<i128, String> {
    let (negative, rest) = match s.as_bytes().first() {
        None => return Err(FORMAT_WRONG.into()),
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        Some(_) => (false, s),
    };
    let int_end = rest
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len());
    let (whole, rest) = rest.split_at(int_end);
    let (fraction, suffix) = match rest.strip_prefix('.') {
        Some(after) => {
            let end = after
                .find(|c: char| !c.is_ascii_digit())
                .unwrap_or(after.len());
            after.split_at(end)
        }
        None => ("", rest),
    };
    if whole.is_empty() && fraction.is_empty() {
        return Err(FORMAT_WRONG.into());
    }
    let (base, exponent) = interpret(suffix)?;
    let out_of_range = || "quantity out of range".to_string();
    let digits: i128 = format!("{whole}{fraction}")
        .trim_start_matches('0')
        .parse()
        .or_else(|e: std::num::ParseIntError| match e.kind() {
            std::num::IntErrorKind::Empty => Ok(0),
            _ => Err(out_of_range()),
        })?;
    // value = digits / 10^len(fraction) * base^exponent, in units of 10^-9.
    let (mut numerator, mut denominator) = (digits, 1i128);
    let mut scale = |power: i32, base: i128| -> Result<(), String> {
        let factor = base
            .checked_pow(power.unsigned_abs())
            .ok_or_else(out_of_range)?;
        if power >= 0 {
            numerator = numerator.checked_mul(factor).ok_or_else(out_of_range)?;
        } else {
            denominator = denominator.checked_mul(factor).ok_or_else(out_of_range)?;
        }
        Ok(())
    };
    scale(9 - fraction.len() as i32, 10)?;
    scale(exponent, base)?;
    // Rounded up, away from zero, to a whole nano-unit.
    let nanos = numerator / denominator + i128::from(numerator % denominator != 0);
    Ok(if negative { -nanos } else { nanos })
}

/// A suffix's base and exponent.
fn interpret(suffix: &str) -> Result<(i128, i32), String> {
    let decimal = |e| Ok((10, e));
    match suffix {
        "" => decimal(0),
        "n" => decimal(-9),
        "u" => decimal(-6),
        "m" => decimal(-3),
        "k" => decimal(3),
        "M" => decimal(6),
        "G" => decimal(9),
        "T" => decimal(12),
        "P" => decimal(15),
        "E" => decimal(18),
        "Ki" => Ok((2, 10)),
        "Mi" => Ok((2, 20)),
        "Gi" => Ok((2, 30)),
        "Ti" => Ok((2, 40)),
        "Pi" => Ok((2, 50)),
        "Ei" => Ok((2, 60)),
        _ => match suffix.strip_prefix(['e', 'E']).map(str::parse::<i32>) {
            Some(Ok(e))
                if suffix[1..]
                    .starts_with(|c: char| c.is_ascii_digit() || c == '-' || c == '+') =>
            {
                decimal(e)
            }
            _ => Err("unable to parse quantity's suffix".into()),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities_parse_to_their_value_in_nano_units() {
        assert_eq!(parse("1"), Ok(NANO));
        assert_eq!(parse("1.5G"), Ok(1_500_000_000 * NANO));
        assert_eq!(parse("200M"), parse("0.2G"));
        assert_eq!(parse("1Ki"), Ok(1024 * NANO));
        assert_eq!(parse("1.5Gi"), Ok(1_610_612_736 * NANO));
        assert_eq!(parse("100m"), Ok(NANO / 10));
        assert_eq!(parse("-2k"), Ok(-2000 * NANO));
        assert_eq!(parse("1e3"), Ok(1000 * NANO));
        assert_eq!(parse("1E-3"), Ok(NANO / 1000));
        assert_eq!(parse("1.G"), Ok(1_000_000_000 * NANO));
        // Finer than a nano-unit rounds up, away from zero.
        assert_eq!(parse("0.1n"), Ok(1));
        assert_eq!(parse("-0.1n"), Ok(-1));
        assert_eq!(parse("0"), Ok(0));
    }

    #[test]
    fn strings_that_are_not_quantities_are_refused() {
        for bad in [
            "", "200K", "Three", "Mi", "1,3G", "1.5.5", "1e", "1Ki2", "--1", "1 ",
        ] {
            assert!(parse(bad).is_err(), "{bad:?} parsed");
        }
    }
}
