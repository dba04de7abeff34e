//! Go's `fmt` printing for template values: `%v` (what `{{ x }}` prints), `Sprint`,
//! `Sprintln` and `Sprintf` with the verbs, flags, widths and precisions templates use,
//! including Go's in-band error notes (`%!d(float64=5)`, `%!v(MISSING)`, `%!(EXTRA ...)`).

use crate::value::V;

/// The flags, width and precision of one verb.
#[derive(Clone, Copy, Default, Debug)]
struct Spec {
    minus: bool,
    plus: bool,
    sharp: bool,
    space: bool,
    zero: bool,
    width: Option<usize>,
    prec: Option<usize>,
}

/// `fmt.Sprint(v)` of one value: `%v`.
pub fn to_string(v: &V) -> String {
    let mut out = String::new();
    print_arg(&mut out, v, 'v', &Spec::default(), true);
    out
}

/// `fmt.Sprint(args...)`: spaces only between operands when neither is a string.
pub fn sprint(args: &[V]) -> String {
    let mut out = String::new();
    for (i, a) in args.iter().enumerate() {
        let is_str = |v: &V| matches!(v, V::Str(_));
        if i > 0 && !is_str(a) && !is_str(&args[i - 1]) {
            out.push(' ');
        }
        print_arg(&mut out, a, 'v', &Spec::default(), true);
    }
    out
}

/// `fmt.Sprintln(args...)`: always spaces, and a newline.
pub fn sprintln(args: &[V]) -> String {
    let parts: Vec<String> = args.iter().map(to_string).collect();
    format!("{}\n", parts.join(" "))
}

/// `fmt.Sprintf(format, args...)`.
pub fn sprintf(format: &str, args: &[V]) -> String {
    let mut out = String::new();
    let chars: Vec<char> = format.chars().collect();
    let mut i = 0;
    let mut argn = 0;
    let mut reordered = false;
    while i < chars.len() {
        if chars[i] != '%' {
            out.push(chars[i]);
            i += 1;
            continue;
        }
        i += 1;
        let mut spec = Spec::default();
        i = parse_flags(&chars, i, &mut spec);
        // An explicit argument index, `%[2]d`.
        let mut good_index = true;
        if let Some((n, next)) = arg_index(&chars, i) {
            i = next;
            reordered = true;
            match n {
                Some(n) if n >= 1 && n <= args.len() => argn = n - 1,
                _ => good_index = false,
            }
        }
        if chars.get(i) == Some(&'*') {
            i += 1;
            match args.get(argn) {
                Some(V::Int(w)) => {
                    if *w < 0 {
                        spec.minus = true;
                        spec.zero = false;
                    }
                    spec.width = Some(w.unsigned_abs() as usize);
                }
                _ => out.push_str("%!(BADWIDTH)"),
            }
            argn += 1;
        } else {
            let (n, next) = digits(&chars, i);
            spec.width = n;
            i = next;
        }
        if chars.get(i) == Some(&'.') {
            i += 1;
            if chars.get(i) == Some(&'*') {
                i += 1;
                match args.get(argn) {
                    Some(V::Int(p)) if *p >= 0 => spec.prec = Some(*p as usize),
                    _ => out.push_str("%!(BADPREC)"),
                }
                argn += 1;
            } else {
                let (n, next) = digits(&chars, i);
                spec.prec = Some(n.unwrap_or(0));
                i = next;
            }
        }
        let Some(&verb) = chars.get(i) else {
            out.push_str("%!(NOVERB)");
            break;
        };
        i += 1;
        if verb == '%' {
            out.push('%');
            continue;
        }
        // `%+v` asks for field names, which only structs have; it is not a sign flag.
        if verb == 'v' && spec.plus {
            spec.plus = false;
        }
        if !good_index {
            out.push_str(&format!("%!{verb}(BADINDEX)"));
            continue;
        }
        match args.get(argn) {
            None => out.push_str(&format!("%!{verb}(MISSING)")),
            Some(a) => {
                print_arg(&mut out, a, verb, &spec, true);
                argn += 1;
            }
        }
    }
    if !reordered && argn < args.len() {
        out.push_str("%!(EXTRA ");
        let extras: Vec<String> = args[argn..]
            .iter()
            .map(|a| {
                if a.is_nil() {
                    "<nil>".to_string()
                } else {
                    format!("{}={}", a.type_name(), to_string(a))
                }
            })
            .collect();
        out.push_str(&extras.join(", "));
        out.push(')');
    }
    out
}

/// Reads the flags `#0+- `; returns the position after them.
fn parse_flags(chars: &[char], mut i: usize, spec: &mut Spec) -> usize {
    while let Some(c) = chars.get(i) {
        match c {
            '#' => spec.sharp = true,
            // Zero padding only ever goes on the left.
            '0' => spec.zero = !spec.minus,
            '+' => spec.plus = true,
            '-' => {
                spec.minus = true;
                spec.zero = false
            }
            ' ' => spec.space = true,
            _ => break,
        }
        i += 1;
    }
    i
}

fn digits(chars: &[char], mut i: usize) -> (Option<usize>, usize) {
    let start = i;
    let mut n: usize = 0;
    while let Some(d) = chars.get(i).and_then(|c| c.to_digit(10)) {
        n = n
            .saturating_mul(10)
            .saturating_add(d as usize)
            .min(1_000_000);
        i += 1;
    }
    ((i > start).then_some(n), i)
}

/// Parses `[n]` at `i`; returns the index (None when malformed) and the position after it.
fn arg_index(chars: &[char], i: usize) -> Option<(Option<usize>, usize)> {
    if chars.get(i) != Some(&'[') {
        return None;
    }
    let close = chars[i..].iter().position(|c| *c == ']').map(|p| p + i);
    match close {
        None => Some((None, chars.len())),
        Some(c) => {
            let s: String = chars[i + 1..c].iter().collect();
            Some((s.parse::<usize>().ok(), c + 1))
        }
    }
}

/// Prints one operand; `top` is false inside a slice or map, where a nil prints `<nil>`.
fn print_arg(out: &mut String, v: &V, verb: char, spec: &Spec, top: bool) {
    if verb == 'T' {
        pad(out, v.type_name(), spec);
        return;
    }
    match v {
        V::Invalid | V::Nil => {
            if !top || verb == 'v' {
                if top {
                    pad(out, "<nil>", spec);
                } else {
                    out.push_str("<nil>");
                }
            } else {
                out.push_str(&format!("%!{verb}(<nil>)"));
            }
        }
        V::Bool(b) => match verb {
            't' | 'v' => pad(out, if *b { "true" } else { "false" }, spec),
            _ => bad_verb(out, v, verb, spec),
        },
        V::Int(i) | V::Int64(i) => fmt_int(out, v, *i, verb, spec),
        V::Float(f) => fmt_float_verb(out, v, *f, verb, spec),
        V::Str(s) => fmt_str(out, v, s, verb, spec),
        V::Semver(sv) => match verb {
            'v' | 's' | 'q' | 'x' | 'X' => fmt_str(out, v, &sv.to_string(), verb, spec),
            _ => bad_verb(out, v, verb, spec),
        },
        V::List(items, _) => {
            out.push('[');
            for (n, item) in items.iter().enumerate() {
                if n > 0 {
                    out.push(' ');
                }
                print_arg(out, item, verb, spec, false);
            }
            out.push(']');
        }
        V::Map(m, _) => {
            out.push_str("map[");
            for (n, (k, val)) in m.borrow().iter().enumerate() {
                if n > 0 {
                    out.push(' ');
                }
                print_arg(out, &V::str(k.as_str()), verb, spec, false);
                out.push(':');
                print_arg(out, val, verb, spec, false);
            }
            out.push(']');
        }
    }
}

/// `%!verb(type=value)`, Go's note for a verb that does not fit the operand.
fn bad_verb(out: &mut String, v: &V, verb: char, spec: &Spec) {
    out.push_str("%!");
    out.push(verb);
    out.push('(');
    if v.is_nil() {
        out.push_str("<nil>");
    } else {
        out.push_str(v.type_name());
        out.push('=');
        print_arg(out, v, 'v', spec, true);
    }
    out.push(')');
}

/// Pads `s` to the width: spaces (or zeros with `0`) on the left, spaces on the right with `-`.
fn pad(out: &mut String, s: &str, spec: &Spec) {
    let n = s.chars().count();
    let w = spec.width.unwrap_or(0);
    if n >= w {
        out.push_str(s);
        return;
    }
    let fill = if spec.zero { '0' } else { ' ' };
    if spec.minus {
        out.push_str(s);
        out.extend(std::iter::repeat_n(' ', w - n));
    } else {
        out.extend(std::iter::repeat_n(fill, w - n));
        out.push_str(s);
    }
}

fn fmt_str(out: &mut String, v: &V, s: &str, verb: char, spec: &Spec) {
    match verb {
        'v' | 's' => {
            let s: String = match spec.prec {
                Some(p) => s.chars().take(p).collect(),
                None => s.to_string(),
            };
            pad(out, &s, spec)
        }
        'q' => {
            let s: String = match spec.prec {
                Some(p) => s.chars().take(p).collect(),
                None => s.to_string(),
            };
            let q = if spec.sharp && can_backquote(&s) {
                format!("`{s}`")
            } else {
                quote_with(&s, spec.plus)
            };
            pad(out, &q, spec)
        }
        'x' | 'X' => {
            let bytes = s.as_bytes();
            let bytes = match spec.prec {
                Some(p) if p < bytes.len() => &bytes[..p],
                _ => bytes,
            };
            pad(out, &hex_bytes(bytes, verb == 'X', spec), spec)
        }
        _ => bad_verb(out, v, verb, spec),
    }
}

fn hex_bytes(bytes: &[u8], upper: bool, spec: &Spec) -> String {
    let mut s = String::new();
    for (i, b) in bytes.iter().enumerate() {
        if spec.space && i > 0 {
            s.push(' ');
        }
        if spec.sharp && (spec.space || i == 0) {
            s.push_str(if upper { "0X" } else { "0x" });
        }
        if upper {
            s.push_str(&format!("{b:02X}"));
        } else {
            s.push_str(&format!("{b:02x}"));
        }
    }
    s
}

fn can_backquote(s: &str) -> bool {
    s.chars()
        .all(|c| c != '`' && c != '\u{FEFF}' && (c == '\t' || !c.is_control()))
}

/// Go's `strconv.Quote` (`ascii`: `QuoteToASCII`).
pub fn quote_with(s: &str, ascii: bool) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        push_escaped(&mut out, c, '"', ascii);
    }
    out.push('"');
    out
}

/// `strconv.Quote`.
pub fn quote(s: &str) -> String {
    quote_with(s, false)
}

fn push_escaped(out: &mut String, c: char, q: char, ascii: bool) {
    match c {
        '\u{7}' => out.push_str("\\a"),
        '\u{8}' => out.push_str("\\b"),
        '\u{c}' => out.push_str("\\f"),
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        '\u{b}' => out.push_str("\\v"),
        '\\' => out.push_str("\\\\"),
        c if c == q => {
            out.push('\\');
            out.push(c);
        }
        c if (c as u32) < 0x80 && is_print(c) => out.push(c),
        c if !ascii && is_print(c) => out.push(c),
        c if (c as u32) < 0x20 || c == '\u{7f}' => out.push_str(&format!("\\x{:02x}", c as u32)),
        c if (c as u32) < 0x10000 => out.push_str(&format!("\\u{:04x}", c as u32)),
        c => out.push_str(&format!("\\U{:08x}", c as u32)),
    }
}

/// An approximation of Go's `unicode.IsPrint`: graphic characters and the ASCII space,
/// but no other spaces, controls or format characters.
fn is_print(c: char) -> bool {
    if c == ' ' {
        return true;
    }
    if c.is_control() || c.is_whitespace() {
        return false;
    }
    !matches!(c as u32,
        0xAD | 0x600..=0x605 | 0x61C | 0x6DD | 0x70F | 0x180E | 0x200B..=0x200F
        | 0x2028..=0x202E | 0x2060..=0x206F | 0xFEFF | 0xFFF9..=0xFFFB
        | 0xD800..=0xDFFF | 0xE000..=0xF8FF | 0xFFFE | 0xFFFF)
}

fn fmt_int(out: &mut String, v: &V, i: i64, verb: char, spec: &Spec) {
    match verb {
        'v' | 'd' => fmt_integer(out, i, 10, false, spec),
        'b' => fmt_integer(out, i, 2, false, spec),
        'o' | 'O' => fmt_integer(out, i, 8, false, spec),
        'x' => fmt_integer(out, i, 16, false, spec),
        'X' => fmt_integer(out, i, 16, true, spec),
        'c' => pad(out, &char_of(i).to_string(), spec),
        'q' => {
            let c = char_of(i);
            let mut s = String::from('\'');
            push_escaped(&mut s, c, '\'', spec.plus);
            s.push('\'');
            pad(out, &s, spec)
        }
        'U' => {
            let mut s = format!("U+{:04X}", i);
            if spec.sharp {
                s.push_str(&format!(" '{}'", char_of(i)));
            }
            pad(out, &s, spec)
        }
        _ => bad_verb(out, v, verb, spec),
    }
}

fn char_of(i: i64) -> char {
    u32::try_from(i)
        .ok()
        .and_then(char::from_u32)
        .unwrap_or('\u{FFFD}')
}

/// Go's `fmtInteger`: precision is a minimum digit count; `0` pads to the width after the sign.
fn fmt_integer(out: &mut String, i: i64, base: u32, upper: bool, spec: &Spec) {
    let neg = i < 0;
    let u = i.unsigned_abs();
    let mut prec = 0usize;
    if let Some(p) = spec.prec {
        prec = p;
        if p == 0 && u == 0 {
            let mut s = *spec;
            s.zero = false;
            pad(out, "", &s);
            return;
        }
    } else if spec.zero && spec.width.is_some() {
        prec = spec.width.unwrap_or(0);
        if neg || spec.plus || spec.space {
            prec = prec.saturating_sub(1);
        }
    }
    let mut digits = match base {
        2 => format!("{u:b}"),
        8 => format!("{u:o}"),
        16 if upper => format!("{u:X}"),
        16 => format!("{u:x}"),
        _ => u.to_string(),
    };
    while digits.len() < prec {
        digits.insert(0, '0');
    }
    if spec.sharp {
        match base {
            2 => digits.insert_str(0, "0b"),
            8 if !digits.starts_with('0') => digits.insert(0, '0'),
            16 if upper => digits.insert_str(0, "0X"),
            16 => digits.insert_str(0, "0x"),
            _ => {}
        }
    }
    if neg {
        digits.insert(0, '-');
    } else if spec.plus {
        digits.insert(0, '+');
    } else if spec.space {
        digits.insert(0, ' ');
    }
    let mut s = *spec;
    s.zero = false;
    pad(out, &digits, &s);
}

fn fmt_float_verb(out: &mut String, v: &V, f: f64, verb: char, spec: &Spec) {
    match verb {
        'v' => fmt_float(out, f, 'g', spec.prec, spec),
        'e' | 'E' | 'f' | 'F' => fmt_float(out, f, verb, Some(spec.prec.unwrap_or(6)), spec),
        'g' | 'G' => fmt_float(out, f, verb, spec.prec, spec),
        _ => bad_verb(out, v, verb, spec),
    }
}

/// Go's `fmt.fmtFloat`: strconv formatting, then sign and padding rules.
fn fmt_float(out: &mut String, f: f64, verb: char, prec: Option<usize>, spec: &Spec) {
    let body = if f.is_nan() {
        "NaN".to_string()
    } else if f.is_infinite() {
        "Inf".to_string()
    } else {
        format_float(f.abs(), verb, prec)
    };
    let sign = if f.is_sign_negative() && !f.is_nan() {
        "-"
    } else if spec.plus {
        "+"
    } else if spec.space {
        " "
    } else {
        ""
    };
    let special = !f.is_finite();
    let sign = if f.is_infinite() && sign.is_empty() {
        "+"
    } else {
        sign
    };
    let sign = if special && f.is_nan() && !spec.plus && !spec.space {
        ""
    } else {
        sign
    };
    let num = format!("{sign}{body}");
    let w = spec.width.unwrap_or(0);
    if spec.zero && !special && !spec.minus && w > num.len() {
        out.push_str(sign);
        out.extend(std::iter::repeat_n('0', w - num.len()));
        out.push_str(&body);
        return;
    }
    let mut s = *spec;
    if special {
        s.zero = false;
    }
    pad(out, &num, &s);
}

/// Decimal digits of a positive finite `f` (no trailing zeros) and the decimal point
/// position: `f = 0.d1d2... * 10^dp`. `sig` rounds to that many significant digits.
fn decimal_digits(f: f64, sig: Option<usize>) -> (Vec<u8>, i32) {
    if f == 0.0 {
        return (Vec::new(), 0);
    }
    let s = match sig {
        None => format!("{f:e}"),
        Some(n) => format!("{:.*e}", n.max(1) - 1, f),
    };
    let (mant, exp) = s.split_once('e').unwrap_or((&s, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let mut d: Vec<u8> = mant.bytes().filter(u8::is_ascii_digit).collect();
    while d.len() > 1 && d.last() == Some(&b'0') {
        d.pop();
    }
    if d == [b'0'] {
        return (Vec::new(), 0);
    }
    (d, exp + 1)
}

/// `strconv.FormatFloat` of a non-negative finite value for `e`, `f`, `g` (and capitals).
pub fn format_float(f: f64, verb: char, prec: Option<usize>) -> String {
    match verb {
        'f' | 'F' => format!("{:.*}", prec.unwrap_or(6), f),
        'e' | 'E' => {
            let p = prec.unwrap_or(6);
            let (d, dp) = decimal_digits(f, Some(p + 1));
            fmt_e(&d, dp, p, verb == 'E')
        }
        _ => {
            let upper = verb == 'G';
            let (d, dp, p, shortest) = match prec {
                None => {
                    let (d, dp) = decimal_digits(f, None);
                    let n = d.len();
                    (d, dp, n, true)
                }
                Some(p) => {
                    let p = p.max(1);
                    let (d, dp) = decimal_digits(f, Some(p));
                    (d, dp, p, false)
                }
            };
            let nd = d.len() as i32;
            let mut eprec = p as i32;
            if eprec > nd && nd >= dp {
                eprec = nd;
            }
            if shortest {
                eprec = 6;
            }
            let exp = dp - 1;
            if exp < -4 || exp >= eprec {
                let p = (p as i32).min(nd).max(1);
                return fmt_e(&d, dp, (p - 1) as usize, upper);
            }
            let p = if p as i32 > dp { nd } else { p as i32 };
            fmt_f(&d, dp, (p - dp).max(0) as usize)
        }
    }
}

fn fmt_e(d: &[u8], dp: i32, prec: usize, upper: bool) -> String {
    let mut s = String::new();
    s.push(d.first().map_or('0', |c| *c as char));
    if prec > 0 {
        s.push('.');
        for i in 1..=prec {
            s.push(d.get(i).map_or('0', |c| *c as char));
        }
    }
    let exp = if d.is_empty() { 0 } else { dp - 1 };
    s.push(if upper { 'E' } else { 'e' });
    s.push(if exp < 0 { '-' } else { '+' });
    s.push_str(&format!("{:02}", exp.abs()));
    s
}

fn fmt_f(d: &[u8], dp: i32, prec: usize) -> String {
    let mut s = String::new();
    if dp > 0 {
        for i in 0..dp as usize {
            s.push(d.get(i).map_or('0', |c| *c as char));
        }
    } else {
        s.push('0');
    }
    if prec > 0 {
        s.push('.');
        for i in 0..prec as i32 {
            let j = dp + i;
            let c = if j >= 0 { d.get(j as usize) } else { None };
            s.push(c.map_or('0', |c| *c as char));
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(x: f64) -> String {
        to_string(&V::Float(x))
    }

    #[test]
    fn floats_print_like_go() {
        assert_eq!(f(6443.0), "6443");
        assert_eq!(f(1e6), "1e+06");
        assert_eq!(f(123456.0), "123456");
        assert_eq!(f(0.5), "0.5");
        assert_eq!(f(1e-5), "1e-05");
        assert_eq!(f(0.0001), "0.0001");
        assert_eq!(f(1234567.0), "1.234567e+06");
        assert_eq!(f(-2.5), "-2.5");
        assert_eq!(f(0.0), "0");
    }

    #[test]
    fn printf_verbs() {
        let s = |x: &str| V::str(x);
        assert_eq!(sprintf("%q", &[s("a\nb\"")]), "\"a\\nb\\\"\"");
        assert_eq!(sprintf("%d", &[V::Float(5.0)]), "%!d(float64=5)");
        assert_eq!(
            sprintf("%05d|%-4d|%x", &[V::Int(42), V::Int(7), V::Int(255)]),
            "00042|7   |ff"
        );
        assert_eq!(
            sprintf(
                "%.2f %e %g",
                &[V::Float(2.71925), V::Float(1234.5), V::Float(0.000012)]
            ),
            "2.72 1.234500e+03 1.2e-05"
        );
        assert_eq!(sprintf("%s %s", &[s("a")]), "a %!s(MISSING)");
        assert_eq!(sprintf("%s", &[s("a"), V::Int(1)]), "a%!(EXTRA int=1)");
        assert_eq!(
            sprintf("%v", &[V::list(vec![s("a"), V::Nil, V::Float(2.0)])]),
            "[a <nil> 2]"
        );
        assert_eq!(sprintf("100%%", &[]), "100%");
    }
}
