//! sprig's arithmetic: integer operations on `cast.ToInt64` of anything (a JSON 2.7 is 2),
//! and the few float ones.

use super::{def, i, to_float64, to_int64, FnResult, Table, P};
use crate::value::V;

pub fn register(t: &mut Table) {
    def(t, "add1", &[P::Any], None, |a| {
        Ok(V::Int64(to_int64(&a[0]).wrapping_add(1)))
    });
    def(t, "add", &[], Some(P::Any), |a| {
        Ok(V::Int64(
            a.iter().fold(0i64, |s, x| s.wrapping_add(to_int64(x))),
        ))
    });
    def(t, "sub", &[P::Any, P::Any], None, |a| {
        Ok(V::Int64(to_int64(&a[0]).wrapping_sub(to_int64(&a[1]))))
    });
    def(t, "div", &[P::Any, P::Any], None, |a| {
        let d = to_int64(&a[1]);
        if d == 0 {
            return Err("runtime error: integer divide by zero".into());
        }
        Ok(V::Int64(to_int64(&a[0]).wrapping_div(d)))
    });
    def(t, "mod", &[P::Any, P::Any], None, |a| {
        let d = to_int64(&a[1]);
        if d == 0 {
            return Err("runtime error: integer divide by zero".into());
        }
        Ok(V::Int64(to_int64(&a[0]).wrapping_rem(d)))
    });
    def(t, "mul", &[P::Any], Some(P::Any), |a| {
        Ok(V::Int64(
            a.iter().fold(1i64, |s, x| s.wrapping_mul(to_int64(x))),
        ))
    });
    for name in ["max", "biggest"] {
        def(t, name, &[P::Any], Some(P::Any), |a| {
            Ok(V::Int64(a.iter().map(to_int64).max().unwrap_or(0)))
        });
    }
    def(t, "min", &[P::Any], Some(P::Any), |a| {
        Ok(V::Int64(a.iter().map(to_int64).min().unwrap_or(0)))
    });
    def(t, "maxf", &[P::Any], Some(P::Any), |a| {
        Ok(V::Float(
            a.iter().map(to_float64).fold(f64::NEG_INFINITY, go_max),
        ))
    });
    def(t, "minf", &[P::Any], Some(P::Any), |a| {
        Ok(V::Float(
            a.iter().map(to_float64).fold(f64::INFINITY, go_min),
        ))
    });
    def(t, "floor", &[P::Any], None, |a| {
        Ok(V::Float(to_float64(&a[0]).floor()))
    });
    def(t, "ceil", &[P::Any], None, |a| {
        Ok(V::Float(to_float64(&a[0]).ceil()))
    });
    def(t, "round", &[P::Any, P::Int], Some(P::Float), round);
    def(t, "int", &[P::Any], None, |a| Ok(V::Int(to_int64(&a[0]))));
    def(t, "int64", &[P::Any], None, |a| {
        Ok(V::Int64(to_int64(&a[0])))
    });
    def(t, "float64", &[P::Any], None, |a| {
        Ok(V::Float(to_float64(&a[0])))
    });
    def(t, "atoi", &[P::Str], None, |a| {
        let st = super::s(&a[0]);
        let digits = st.strip_prefix(['+', '-']).unwrap_or(st);
        let ok = !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit());
        Ok(V::Int(if ok {
            st.parse::<i64>().unwrap_or(0)
        } else {
            0
        }))
    });
    def(t, "toDecimal", &[P::Any], None, |a| {
        let st = crate::fmt::to_string(&a[0]);
        let ok = !st.is_empty()
            && st
                .trim_start_matches(['+', '-'])
                .bytes()
                .all(|b| (b'0'..=b'7').contains(&b));
        Ok(V::Int64(if ok {
            i64::from_str_radix(&st, 8).unwrap_or(0)
        } else {
            0
        }))
    });
}

fn go_max(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else {
        a.max(b)
    }
}

fn go_min(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else {
        a.min(b)
    }
}

/// sprig's `round`: rounds half up (or at `roundOn`) to `places` decimals.
fn round(a: Vec<V>) -> FnResult {
    let val = to_float64(&a[0]);
    let places = i(&a[1]) as f64;
    let round_on = match a.get(2) {
        Some(V::Float(f)) => *f,
        _ => 0.5,
    };
    let pow = 10f64.powf(places);
    let digit = pow * val;
    let frac = digit.fract();
    let r = if frac >= round_on {
        digit.ceil()
    } else {
        digit.floor()
    };
    Ok(V::Float(r / pow))
}
