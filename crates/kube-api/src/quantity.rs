//! Resource quantities (`100m`, `2`, `1.5Gi`, `4029056Ki`, `1e3`): read as plain numbers, and
//! written in the forms metrics-server and kube-controller-manager write them.
//!
//! Reading goes through `f64`: the callers compare and add requests, limits and usage, where
//! a rounding in the ninth significant digit does not matter; kube-apiserver's exact decimal
//! arithmetic would matter for a quantity that must round-trip unchanged, which these never
//! do (an object's own quantities are stored as the client wrote them).

use serde_json::Value;

/// The suffixes apimachinery reads, binary before decimal so that `Mi` is not read as `M`.
const SUFFIXES: [(&str, f64); 14] = [
    ("Ki", 1024.0),
    ("Mi", 1_048_576.0),
    ("Gi", 1_073_741_824.0),
    ("Ti", 1_099_511_627_776.0),
    ("Pi", 1_125_899_906_842_624.0),
    ("Ei", 1_152_921_504_606_846_976.0),
    ("n", 1e-9),
    ("u", 1e-6),
    ("m", 1e-3),
    ("k", 1e3),
    ("M", 1e6),
    ("G", 1e9),
    ("T", 1e12),
    ("P", 1e15),
];

/// A quantity's value, or `None` if `text` is not one.
pub fn parse(text: &str) -> Option<f64> {
    let text = text.trim();
    for (suffix, factor) in SUFFIXES {
        if let Some(number) = text.strip_suffix(suffix) {
            return number.parse::<f64>().ok().map(|n| n * factor);
        }
    }
    if let Some(number) = text.strip_suffix('E') {
        return number.parse::<f64>().ok().map(|n| n * 1e18);
    }
    // Plain numbers and the exponent form (`1e3`, `5E-2`).
    text.parse::<f64>().ok().filter(|n| n.is_finite())
}

/// A JSON quantity (a string, or a number as YAML writes small ones) as a number; zero when
/// there is none or it does not read, as a missing request counts for nothing.
pub fn value(v: &Value) -> f64 {
    match v {
        Value::Number(n) => n.as_f64().unwrap_or(0.0),
        Value::String(s) => parse(s).unwrap_or(0.0),
        _ => 0.0,
    }
}

/// CPU in nanocores, as metrics-server reports it (`137226519n`).
pub fn nanocores(cores: f64) -> String {
    format!("{}n", (cores * 1e9).round().max(0.0) as u64)
}

/// Memory in kibibytes, as metrics-server reports it (`1283608Ki`).
pub fn kibibytes(bytes: f64) -> String {
    format!("{}Ki", (bytes / 1024.0).round().max(0.0) as u64)
}

/// A CPU amount in millicores (`250m`), as kube-controller-manager writes an HPA's average.
pub fn millicores(cores: f64) -> String {
    format!("{}m", (cores * 1000.0).round().max(0.0) as u64)
}

/// Bytes in the canonical form apimachinery gives a binary quantity: the largest binary
/// suffix that keeps the number whole (`512Mi`, `1536Ki`, `1000`).
pub fn bytes(bytes: f64) -> String {
    canonical(bytes, 1024, &["Ki", "Mi", "Gi", "Ti", "Pi", "Ei"])
}

/// A whole number in the canonical form apimachinery gives a decimal quantity: the largest
/// decimal suffix that keeps it whole (`50M`, `52428800`).
pub fn decimal(value: f64) -> String {
    canonical(value, 1000, &["k", "M", "G", "T", "P", "E"])
}

fn canonical(value: f64, base: u64, suffixes: &[&str]) -> String {
    let mut n = value.round().max(0.0) as u64;
    let mut suffix = "";
    for next in suffixes {
        if n == 0 || !n.is_multiple_of(base) {
            break;
        }
        n /= base;
        suffix = next;
    }
    format!("{n}{suffix}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_every_suffix_and_form() {
        assert_eq!(parse("100m"), Some(0.1));
        assert_eq!(parse("2"), Some(2.0));
        assert_eq!(parse("1.5Gi"), Some(1.5 * 1024.0 * 1024.0 * 1024.0));
        assert_eq!(parse("4Ki"), Some(4096.0));
        assert_eq!(parse("1e3"), Some(1000.0));
        assert_eq!(parse("2M"), Some(2e6));
        assert_eq!(parse("3E"), Some(3e18));
        assert!((parse("500n").unwrap() - 5e-7).abs() < 1e-18);
        assert_eq!(parse("lots"), None);
        assert_eq!(parse("1x"), None);
    }

    #[test]
    fn json_values_count_zero_when_unreadable() {
        assert_eq!(value(&json!("250m")), 0.25);
        assert_eq!(value(&json!(3)), 3.0);
        assert_eq!(value(&json!(null)), 0.0);
        assert_eq!(value(&json!("x")), 0.0);
    }

    #[test]
    fn writes_as_metrics_server_and_the_hpa_controller() {
        assert_eq!(nanocores(0.137226519), "137226519n");
        assert_eq!(kibibytes(1024.0 * 1024.0), "1024Ki");
        assert_eq!(millicores(0.2504), "250m");
        assert_eq!(bytes(512.0 * 1024.0 * 1024.0), "512Mi");
        assert_eq!(bytes(1536.0 * 1024.0), "1536Ki");
        assert_eq!(bytes(1000.0), "1000");
        assert_eq!(bytes(0.0), "0");
        assert_eq!(decimal(50_000_000.0), "50M");
        assert_eq!(decimal(52_428_800.0), "52428800");
    }
}
