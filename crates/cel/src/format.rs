//! Kubernetes' CEL format library: `format.named(name)` (an optional format),
//! `format.dns1123Label()` and the other direct constructors, and a format's
//! `validate(s)`, which is `optional.none()` for a valid string and otherwise an optional
//! list of what is wrong with it, in the words of kube-apiserver's validators (a rule's
//! `messageExpression` shows them to the user).
//!
//! The name formats are apimachinery's name and label validators as Kubernetes 1.33 (the
//! version this server reports) words them: lengths "must be no more than N characters"
//! (later releases say "bytes") and "a qualified name" (later "a valid label key"). The
//! `*Prefix` formats validate a `generateName` prefix, whose trailing dash apimachinery
//! masks by replacing the last two bytes with `a`. The OpenAPI formats are kube-openapi's
//! strfmt checks: `uri` is Go's `url.ParseRequestURI` (its error is the message), `uuid`,
//! `byte` (base64), `date` and `datetime` are patterns with fixed messages.
//!
//! A format travels as a typed value (see `typed` in the parent module) whose text is its
//! name.

use super::{optional, typed, typed_text, url, Cel};
use cel::extractors::This;
use cel::{ExecutionError, FunctionContext};
use regex::Regex;
use std::sync::{Arc, LazyLock};

/// The type key of a format value.
const KEY: &str = "@format";
/// What the variable `format` holds, so that `format.named(n)` has a receiver.
const LIBRARY_KEY: &str = "@format-library";

/// The formats, by the names `format.named` takes (each also a constructor of its own).
const NAMES: [&str; 13] = [
    "dns1123Label",
    "dns1123Subdomain",
    "dns1035Label",
    "qualifiedName",
    "dns1123LabelPrefix",
    "dns1123SubdomainPrefix",
    "dns1035LabelPrefix",
    "labelValue",
    "uri",
    "uuid",
    "byte",
    "date",
    "datetime",
];

/// Registers the library's functions, and the `format` receiver.
pub(super) fn register(ctx: &mut cel::Context<'static>) {
    ctx.add_variable_from_value("format", typed(LIBRARY_KEY, String::new()));
    ctx.add_function(
        "named",
        |ftx: &FunctionContext, This(lib): This<Cel>, name: Arc<String>| {
            library(ftx, &lib)?;
            Ok::<_, ExecutionError>(match NAMES.contains(&name.as_str()) {
                true => optional::some(typed(KEY, name.to_string())),
                false => optional::none(),
            })
        },
    );
    for name in NAMES {
        ctx.add_function(name, move |ftx: &FunctionContext, This(lib): This<Cel>| {
            library(ftx, &lib)?;
            Ok::<_, ExecutionError>(typed(KEY, name.to_string()))
        });
    }
    ctx.add_function(
        "validate",
        |ftx: &FunctionContext, This(f): This<Cel>, s: Arc<String>| {
            let name = typed_text(&f, KEY).ok_or_else(|| ftx.error("no such overload"))?;
            let problems = validate(name, &s);
            Ok::<_, ExecutionError>(if problems.is_empty() {
                optional::none()
            } else {
                let list = problems.into_iter().map(|p| Cel::String(Arc::new(p)));
                optional::some(Cel::List(Arc::new(list.collect())))
            })
        },
    );
}

/// The functions this library adds, for the list of functions rules may call.
pub(super) fn is_function(name: &str) -> bool {
    name == "named" || name == "validate" || NAMES.contains(&name)
}

fn library(ftx: &FunctionContext, v: &Cel) -> Result<(), ExecutionError> {
    match typed_text(v, LIBRARY_KEY) {
        Some(_) => Ok(()),
        None => Err(ftx.error("no such overload")),
    }
}

/// What is wrong with `s` as a string of format `name` (empty: nothing).
pub fn validate(name: &str, s: &str) -> Vec<String> {
    match name {
        "dns1123Label" => dns1123_label(s),
        "dns1123Subdomain" => dns1123_subdomain(s),
        "dns1035Label" => dns1035_label(s),
        "qualifiedName" => qualified_name(s),
        "dns1123LabelPrefix" => dns1123_label(&mask_trailing_dash(s)),
        "dns1123SubdomainPrefix" => dns1123_subdomain(&mask_trailing_dash(s)),
        "dns1035LabelPrefix" => dns1035_label(&mask_trailing_dash(s)),
        "labelValue" => label_value(s),
        "uri" => match url::parse_request_uri(s) {
            Ok(_) => Vec::new(),
            Err(e) => vec![e.to_string()],
        },
        "uuid" => fixed(UUID.is_match(s), "does not match the UUID format"),
        "byte" => fixed(BASE64.is_match(s), "invalid base64"),
        "date" => fixed(is_date(s), "invalid date"),
        "datetime" => fixed(is_datetime(s), "invalid datetime"),
        _ => Vec::new(),
    }
}

fn fixed(ok: bool, message: &str) -> Vec<String> {
    if ok {
        Vec::new()
    } else {
        vec![message.to_string()]
    }
}

const DNS1123_LABEL_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const DNS1123_SUBDOMAIN_FMT: &str =
    "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const DNS1035_LABEL_FMT: &str = "[a-z]([-a-z0-9]*[a-z0-9])?";
const QUALIFIED_NAME_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const LABEL_VALUE_FMT: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
const QUALIFIED_NAME_MSG: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";

/// A pattern matched against a whole string, as the validators anchor theirs.
fn whole(pattern: &str) -> Regex {
    Regex::new(&format!("^{pattern}$")).unwrap_or_else(|e| panic!("{pattern}: {e}"))
}

static DNS1123_LABEL: LazyLock<Regex> = LazyLock::new(|| whole(DNS1123_LABEL_FMT));
static DNS1123_SUBDOMAIN: LazyLock<Regex> = LazyLock::new(|| whole(DNS1123_SUBDOMAIN_FMT));
static DNS1035_LABEL: LazyLock<Regex> = LazyLock::new(|| whole(DNS1035_LABEL_FMT));
static QUALIFIED_NAME: LazyLock<Regex> = LazyLock::new(|| whole(QUALIFIED_NAME_FMT));
static LABEL_VALUE: LazyLock<Regex> = LazyLock::new(|| whole(LABEL_VALUE_FMT));
static UUID: LazyLock<Regex> =
    LazyLock::new(|| whole("(?i)[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}"));
static BASE64: LazyLock<Regex> = LazyLock::new(|| {
    whole("(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=|[A-Za-z0-9+/]{4})")
});
static TIME_OF_DAY: LazyLock<Regex> = LazyLock::new(|| {
    whole("([0-9]{2}):([0-9]{2}):([0-9]{2})(.[0-9]+)?(z|([+-][0-9]{2}:[0-9]{2}))")
});

fn max_len_error(n: usize) -> String {
    format!("must be no more than {n} characters")
}

/// A pattern failure: what was expected, examples, and the pattern.
fn regex_error(message: &str, pattern: &str, examples: &[&str]) -> String {
    let examples: String = examples
        .iter()
        .map(|e| format!("'{e}', "))
        .collect::<Vec<_>>()
        .join(" or ");
    if examples.is_empty() {
        format!("{message} (regex used for validation is '{pattern}')")
    } else {
        format!("{message} (e.g. {examples}regex used for validation is '{pattern}')")
    }
}

/// A `generateName` prefix as apimachinery validates it: a trailing dash of a prefix longer
/// than one byte is masked by putting `a` in place of its last two bytes.
fn mask_trailing_dash(s: &str) -> String {
    match s.as_bytes() {
        [rest @ .., _, b'-'] if s.len() > 1 => {
            let mut masked = rest.to_vec();
            masked.push(b'a');
            String::from_utf8_lossy(&masked).into_owned()
        }
        _ => s.to_string(),
    }
}

fn dns1123_label(s: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if s.len() > 63 {
        errors.push(max_len_error(63));
    }
    if !DNS1123_LABEL.is_match(s) {
        if DNS1123_SUBDOMAIN.is_match(s) {
            // A valid subdomain that is no label has dots (the length is checked above).
            errors.push("must not contain dots".to_string());
        } else {
            errors.push(regex_error("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character", DNS1123_LABEL_FMT, &["my-name", "123-abc"]));
        }
    }
    errors
}

fn dns1123_subdomain(s: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if s.len() > 253 {
        errors.push(max_len_error(253));
    }
    if !DNS1123_SUBDOMAIN.is_match(s) {
        errors.push(regex_error("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character", DNS1123_SUBDOMAIN_FMT, &["example.com"]));
    }
    errors
}

fn dns1035_label(s: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if s.len() > 63 {
        errors.push(max_len_error(63));
    }
    if !DNS1035_LABEL.is_match(s) {
        errors.push(regex_error("a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character", DNS1035_LABEL_FMT, &["my-name", "abc-123"]));
    }
    errors
}

/// `[prefix/]name`: a DNS subdomain prefix and a name of up to 63 alphanumerics, `-`, `_`
/// and `.`.
fn qualified_name(s: &str) -> Vec<String> {
    let name_error = || {
        regex_error(
            QUALIFIED_NAME_MSG,
            QUALIFIED_NAME_FMT,
            &["MyName", "my.name", "123-abc"],
        )
    };
    let parts: Vec<&str> = s.split('/').collect();
    let mut errors = Vec::new();
    let name = match parts[..] {
        [name] => name,
        [prefix, name] => {
            if prefix.is_empty() {
                errors.push("prefix part must be non-empty".to_string());
            } else {
                errors.extend(
                    dns1123_subdomain(prefix)
                        .into_iter()
                        .map(|e| format!("prefix part {e}")),
                );
            }
            name
        }
        _ => {
            return vec![format!("a qualified name {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')", name_error())];
        }
    };
    if name.is_empty() {
        errors.push("name part must be non-empty".to_string());
    } else if name.len() > 63 {
        errors.push(format!("name part {}", max_len_error(63)));
    }
    if !QUALIFIED_NAME.is_match(name) {
        errors.push(format!("name part {}", name_error()));
    }
    errors
}

fn label_value(s: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if s.len() > 63 {
        errors.push(max_len_error(63));
    }
    if !LABEL_VALUE.is_match(s) {
        errors.push(regex_error("a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character", LABEL_VALUE_FMT, &["MyValue", "my_value", "12345"]));
    }
    errors
}

/// `YYYY-MM-DD` with a day that exists, as Go's `time.Parse("2006-01-02", s)` takes it.
fn is_date(s: &str) -> bool {
    let b = s.as_bytes();
    let digits = |r: std::ops::Range<usize>| b[r].iter().all(u8::is_ascii_digit);
    if b.len() != 10
        || b[4] != b'-'
        || b[7] != b'-'
        || !digits(0..4)
        || !digits(5..7)
        || !digits(8..10)
    {
        return false;
    }
    let number = |r: std::ops::Range<usize>| s[r].parse::<u32>().unwrap_or(0);
    chrono::NaiveDate::from_ymd_opt(number(0..4) as i32, number(5..7), number(8..10)).is_some()
}

/// kube-openapi's date-time check: lower-cased and split at `t`, a date, then a time of day
/// with an offset (or `z`) whose hour, minute and second are in range.
fn is_datetime(s: &str) -> bool {
    if s.len() < 4 {
        return false;
    }
    let lower = s.to_lowercase();
    let parts: Vec<&str> = lower.split('t').collect();
    if parts.len() < 2 || !is_date(parts[0]) {
        return false;
    }
    let Some(time) = TIME_OF_DAY.captures(parts[1]) else {
        return false;
    };
    let field = |i: usize| time.get(i).map_or("", |m| m.as_str());
    field(1) <= "23" && field(2) <= "59" && field(3) <= "59"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn name_formats_answer_in_apimachinerys_words() {
        assert!(validate("dns1123Label", "my-label-name").is_empty());
        assert_eq!(validate("dns1123Label", "a.b"), ["must not contain dots"]);
        assert_eq!(
            validate("dns1123Label", &"A".repeat(64)),
            [
                "must be no more than 63 characters",
                "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
            ]
        );
        assert!(validate("dns1123Subdomain", "apiextensions.k8s.io").is_empty());
        assert!(validate("dns1035Label", "1abc")[0].starts_with("a DNS-1035 label must"));
        assert!(validate("qualifiedName", "apiextensions.k8s.io/v1beta1").is_empty());
        assert_eq!(
            validate("qualifiedName", "/x"),
            ["prefix part must be non-empty"]
        );
        assert!(validate("qualifiedName", "a/b/c")[0].starts_with("a qualified name must consist"));
        assert!(validate("qualifiedName", "Bad_/x")[0]
            .starts_with("prefix part a lowercase RFC 1123 subdomain"));
        assert_eq!(
            validate("qualifiedName", "x/")[0],
            "name part must be non-empty"
        );
        assert!(
            validate("labelValue", "").is_empty() && validate("labelValue", "my_value").is_empty()
        );
        assert!(
            validate("labelValue", "-x")[0].starts_with("a valid label must be an empty string")
        );
    }

    #[test]
    fn prefixes_may_end_in_a_dash() {
        assert!(validate("dns1123LabelPrefix", "my-label-prefix-").is_empty());
        assert!(validate("dns1123SubdomainPrefix", "mysubdomain.prefix.-").is_empty());
        assert!(validate("dns1035LabelPrefix", "my-label-prefix-").is_empty());
        assert!(!validate("dns1123LabelPrefix", "-").is_empty());
        // apimachinery masks the last two bytes: "a.-" is checked as "aa".
        assert_eq!(mask_trailing_dash("a.-"), "aa");
    }

    #[test]
    fn openapi_formats_follow_kube_openapi() {
        assert!(validate("uri", "http://example.com").is_empty());
        assert_eq!(
            validate("uri", "../x"),
            ["parse \"../x\": invalid URI for request"]
        );
        assert!(validate("uuid", "123e4567-e89b-12d3-a456-426614174000").is_empty());
        assert!(validate("uuid", "123E4567E89B12D3A456426614174000").is_empty());
        assert_eq!(
            validate("uuid", "123e4567"),
            ["does not match the UUID format"]
        );
        assert!(validate("byte", "aGVsbG8=").is_empty());
        assert_eq!(validate("byte", "aGVsbG8"), ["invalid base64"]);
        assert_eq!(validate("byte", ""), ["invalid base64"]);
        assert!(validate("date", "2021-01-01").is_empty());
        assert_eq!(validate("date", "2021-02-30"), ["invalid date"]);
        assert_eq!(validate("date", "2021-1-01"), ["invalid date"]);
        assert!(validate("datetime", "2021-01-01T00:00:00Z").is_empty());
        assert!(validate("datetime", "2021-01-01t23:59:59.5+01:00").is_empty());
        assert_eq!(
            validate("datetime", "2021-01-01T24:00:00Z"),
            ["invalid datetime"]
        );
        assert_eq!(validate("datetime", "2021-01-01"), ["invalid datetime"]);
    }
}
