//! `metav1.Duration` (Go's duration text, `"10m0s"`) against v1beta2's whole seconds, signed
//! as Go allows, over the Go duration parser and printer the controllers already have.

use crate::capi::infra::timing::{go_duration, parse_go_duration};

/// The whole seconds of a Go duration such as `"1h30m"`, `"90s"` or `"1.5h"` (truncated,
/// as upstream's `ConvertToSeconds` does), or `None` if it is not one.
pub(crate) fn to_seconds(text: &str) -> Option<i64> {
    let (negative, magnitude) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text.strip_prefix('+').unwrap_or(text)),
    };
    if magnitude.is_empty() {
        return None;
    }
    let seconds = i64::try_from(parse_go_duration(magnitude).ok()?.as_secs()).ok()?;
    Some(if negative { -seconds } else { seconds })
}

/// `seconds` as Go prints a duration: `"1h0m0s"`, `"10m0s"`, `"30s"`, `"0s"`.
pub(crate) fn from_seconds(seconds: i64) -> String {
    let sign = if seconds < 0 { "-" } else { "" };
    // Beyond what chrono holds (not a timeout anyone sets), the longest it holds.
    let magnitude =
        chrono::Duration::try_seconds(seconds.saturating_abs()).unwrap_or(chrono::Duration::MAX);
    format!("{sign}{}", go_duration(magnitude))
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
        assert!(from_seconds(i64::MIN).starts_with('-'));
    }
}
