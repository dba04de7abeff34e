//! `metav1.Duration` (Go's duration text, `"10m0s"`) against v1beta2's whole seconds: Go's
//! `time.ParseDuration` and `Duration.String`, which no crate here speaks. Only what the
//! conversions need: seconds out, seconds in.

/// The whole seconds of a Go duration such as `"1h30m"`, `"90s"` or `"1.5h"` (truncated,
/// as upstream's `ConvertToSeconds` does), or `None` if it is not one.
pub(crate) fn to_seconds(text: &str) -> Option<i64> {
    let (negative, mut rest) = match text.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, text.strip_prefix('+').unwrap_or(text)),
    };
    if rest == "0" {
        return Some(0);
    }
    if rest.is_empty() {
        return None;
    }
    let mut nanos: f64 = 0.0;
    while !rest.is_empty() {
        let number_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let number: f64 = rest[..number_end].parse().ok()?;
        rest = &rest[number_end..];
        let unit_end = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let scale = match &rest[..unit_end] {
            "ns" => 1.0,
            "us" | "µs" | "μs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            _ => return None,
        };
        nanos += number * scale;
        rest = &rest[unit_end..];
    }
    let seconds = (nanos / 1e9).trunc() as i64;
    Some(if negative { -seconds } else { seconds })
}

/// `seconds` as Go prints a duration: `"1h0m0s"`, `"10m0s"`, `"30s"`, `"0s"`.
pub(crate) fn from_seconds(seconds: i64) -> String {
    let sign = if seconds < 0 { "-" } else { "" };
    let s = seconds.unsigned_abs();
    let (h, m, s) = (s / 3600, (s % 3600) / 60, s % 60);
    if h > 0 {
        format!("{sign}{h}h{m}m{s}s")
    } else if m > 0 {
        format!("{sign}{m}m{s}s")
    } else {
        format!("{sign}{s}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_what_go_parses() {
        assert_eq!(to_seconds("10m"), Some(600));
        assert_eq!(to_seconds("1h30m"), Some(5400));
        assert_eq!(to_seconds("1.5h"), Some(5400));
        assert_eq!(to_seconds("90s"), Some(90));
        assert_eq!(to_seconds("1500ms"), Some(1));
        assert_eq!(to_seconds("0"), Some(0));
        assert_eq!(to_seconds("-2m"), Some(-120));
        assert_eq!(to_seconds("10"), None);
        assert_eq!(to_seconds("5d"), None);
        assert_eq!(to_seconds(""), None);
    }

    #[test]
    fn prints_as_go_prints() {
        assert_eq!(from_seconds(3600), "1h0m0s");
        assert_eq!(from_seconds(600), "10m0s");
        assert_eq!(from_seconds(30), "30s");
        assert_eq!(from_seconds(0), "0s");
        assert_eq!(from_seconds(3725), "1h2m5s");
        assert_eq!(from_seconds(-90), "-1m30s");
    }
}
