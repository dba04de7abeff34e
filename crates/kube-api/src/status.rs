//! API errors, rendered as Kubernetes `Status` objects with kube-apiserver's reasons and codes.

use infrasim_store::StoreError;
use serde_json::{json, Value};

/// An error answer: HTTP code, `Status.reason`, message and optional details.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    pub code: u16,
    pub reason: &'static str,
    pub message: String,
    pub details: Option<Value>,
}

impl ApiError {
    fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            code,
            reason,
            message: message.into(),
            details: None,
        }
    }

    /// Adds `details` (name, group, kind, causes).
    pub fn with_details(mut self, details: Value) -> Self {
        self.details = Some(details);
        self
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    pub fn unauthorized() -> Self {
        Self::new(401, "Unauthorized", "Unauthorized")
    }

    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(403, "Forbidden", message)
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(404, "NotFound", message)
    }

    /// A missing object, with the details kube-apiserver gives.
    pub fn object_not_found(group: &str, plural: &str, name: &str) -> Self {
        Self::not_found(format!("{} \"{name}\" not found", qualified(group, plural)))
            .with_details(json!({"name": name, "group": group, "kind": plural}))
    }

    pub fn method_not_allowed(message: impl Into<String>) -> Self {
        Self::new(405, "MethodNotAllowed", message)
    }

    pub fn conflict(message: impl Into<String>) -> Self {
        Self::new(409, "Conflict", message)
    }

    pub fn already_exists(group: &str, plural: &str, name: &str) -> Self {
        Self::new(
            409,
            "AlreadyExists",
            format!("{} \"{name}\" already exists", qualified(group, plural)),
        )
        .with_details(json!({"name": name, "group": group, "kind": plural}))
    }

    pub fn gone(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }

    pub fn too_large(limit: usize) -> Self {
        Self::new(
            413,
            "RequestEntityTooLarge",
            format!("Request entity too large: limit is {limit}"),
        )
    }

    pub fn unsupported_media_type(content_type: &str) -> Self {
        Self::new(
            415,
            "UnsupportedMediaType",
            format!("the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/vnd.kubernetes.protobuf (got {content_type:?})"),
        )
    }

    pub fn not_acceptable(accept: &str) -> Self {
        Self::new(
            406,
            "NotAcceptable",
            format!("the server was unable to respond with a content type that the client supports (requested {accept:?})"),
        )
    }

    /// 422 with one cause per invalid field.
    pub fn invalid(group: &str, kind: &str, name: &str, causes: Vec<(String, String)>) -> Self {
        let summary: Vec<String> = causes.iter().map(|(f, m)| format!("{f}: {m}")).collect();
        let causes: Vec<Value> = causes
            .iter()
            .map(|(field, message)| json!({"reason": "FieldValueInvalid", "message": message, "field": field}))
            .collect();
        let qualified_kind = if group.is_empty() {
            kind.to_string()
        } else {
            format!("{kind}.{group}")
        };
        Self::new(
            422,
            "Invalid",
            format!(
                "{qualified_kind} \"{name}\" is invalid: {}",
                summary.join(", ")
            ),
        )
        .with_details(json!({"name": name, "group": group, "kind": kind, "causes": causes}))
    }

    /// 422 without field causes (a patch that cannot apply).
    pub fn new_unprocessable(message: impl Into<String>) -> Self {
        Self::new(422, "Invalid", message)
    }

    /// 429: the request is refused for now and may be retried (an eviction a disruption
    /// budget forbids).
    pub fn too_many_requests(message: impl Into<String>) -> Self {
        Self::new(429, "TooManyRequests", message)
    }

    /// 503: the server cannot serve now (an injected fault, an unavailable backend).
    pub fn service_unavailable(message: impl Into<String>) -> Self {
        Self::new(503, "ServiceUnavailable", message)
    }

    pub fn timeout(message: impl Into<String>) -> Self {
        Self::new(504, "Timeout", message)
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(500, "InternalError", message)
    }

    /// 500 without a reason: an error of the storage passed on as it is, as kube-apiserver
    /// answers an etcd error it has no reason for.
    pub fn storage(message: impl Into<String>) -> Self {
        Self::new(500, "", message)
    }

    /// A refusal an admission webhook chose the code (and perhaps reason) of.
    pub fn from_webhook(code: u16, reason: Option<&str>, message: impl Into<String>) -> Self {
        const REASONS: [(u16, &str); 9] = [
            (400, "BadRequest"),
            (401, "Unauthorized"),
            (403, "Forbidden"),
            (404, "NotFound"),
            (409, "Conflict"),
            (422, "Invalid"),
            (429, "TooManyRequests"),
            (500, "InternalError"),
            (503, "ServiceUnavailable"),
        ];
        let reason = REASONS
            .iter()
            .find(|(_, r)| Some(*r) == reason)
            .or_else(|| REASONS.iter().find(|(c, _)| *c == code))
            .map(|(_, r)| *r)
            .unwrap_or("");
        Self::new(code, reason, message)
    }

    /// The `Status` object.
    pub fn to_status(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if let Some(d) = &self.details {
            status["details"] = d.clone();
        }
        status
    }

    /// Maps a store error for a request on `group`/`plural`.
    pub fn from_store(err: StoreError, group: &str, plural: &str) -> Self {
        match err {
            StoreError::NotFound { name, .. } => Self::object_not_found(group, plural, &name),
            StoreError::AlreadyExists { name, .. } => Self::already_exists(group, plural, &name),
            StoreError::Conflict { name, message, .. } => {
                Self::conflict(message).with_details(json!({"name": name, "group": group, "kind": plural}))
            }
            StoreError::Expired {
                requested,
                oldest_available,
            } => Self::gone(format!(
                "too old resource version: {requested} ({oldest_available})"
            )),
            StoreError::TooLargeResourceVersion { requested, current } => Self::timeout(format!(
                "Too large resource version: {requested}, current: {current}"
            ))
            .with_details(json!({"causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}], "retryAfterSeconds": 1})),
            StoreError::Invalid { name, message, .. } => {
                let kind = plural;
                Self::new(
                    422,
                    "Invalid",
                    format!("{} \"{name}\" is invalid: {message}", qualified(group, kind)),
                )
                .with_details(json!({"name": name, "group": group, "kind": kind}))
            }
            other => Self::internal(other.to_string()),
        }
    }
}

/// A `Status` (a failure, or a delete's or an eviction's success) as kube-apiserver writes
/// it: the fields in the order of the Go type (`kind`, `apiVersion`, `metadata`, `status`,
/// `message`, `reason`, `details`, `code`; details' `name`, `group`, `kind`, `uid`, `causes`,
/// `retryAfterSeconds`; a cause's `reason`, `message`, `field`), empty ones left out as Go's
/// `omitempty` leaves them, and a newline after it. Clients' tests compare these bytes, and
/// `serde_json` (without its order-keeping feature, which would cost every object) writes a
/// map's keys sorted.
pub fn status_bytes(status: &Value) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    write_ordered(status, &STATUS_FIELDS, &mut out);
    out.push(b'\n');
    out
}

const STATUS_FIELDS: [&str; 8] = [
    "kind",
    "apiVersion",
    "metadata",
    "status",
    "message",
    "reason",
    "details",
    "code",
];
const DETAILS_FIELDS: [&str; 6] = [
    "name",
    "group",
    "kind",
    "uid",
    "causes",
    "retryAfterSeconds",
];
const CAUSE_FIELDS: [&str; 3] = ["reason", "message", "field"];

/// `v`'s `fields` in that order, each left out when empty but `metadata` (written `{}`, as
/// Go writes an empty ListMeta); any other field after them, sorted.
fn write_ordered(v: &Value, fields: &[&str], out: &mut Vec<u8>) {
    let Some(map) = v.as_object() else {
        // A Value always serializes.
        out.extend(serde_json::to_vec(v).unwrap_or_default());
        return;
    };
    let empty = |v: &Value| match v {
        Value::Null => true,
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::Bool(b) => !b,
    };
    let rest = map.keys().filter(|k| !fields.contains(&k.as_str()));
    let keys = fields.iter().copied().chain(rest.map(String::as_str));
    out.push(b'{');
    let mut first = true;
    for key in keys {
        let Some(value) = map.get(key) else { continue };
        if key != "metadata" && empty(value) {
            continue;
        }
        if !first {
            out.push(b',');
        }
        first = false;
        out.extend(serde_json::to_vec(key).unwrap_or_default());
        out.push(b':');
        match (key, value) {
            ("details", d) => write_ordered(d, &DETAILS_FIELDS, out),
            ("causes", Value::Array(causes)) => {
                out.push(b'[');
                for (i, cause) in causes.iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    write_ordered(cause, &CAUSE_FIELDS, out);
                }
                out.push(b']');
            }
            (_, v) => out.extend(serde_json::to_vec(v).unwrap_or_default()),
        }
    }
    out.push(b'}');
}

/// `plural.group`, or `plural` for the core group.
pub fn qualified(group: &str, plural: &str) -> String {
    if group.is_empty() {
        plural.to_string()
    } else {
        format!("{plural}.{group}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_status_is_written_as_kube_apiserver_writes_it() {
        let err = ApiError::already_exists("", "services", "mock-2");
        let bytes = status_bytes(&err.to_status());
        // The Python client's own end-to-end suite compares these bytes.
        let expected = concat!(
            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","#,
            r#""message":"services \"mock-2\" already exists","reason":"AlreadyExists","#,
            r#""details":{"name":"mock-2","kind":"services"},"code":409}"#,
            "\n"
        );
        assert_eq!(String::from_utf8(bytes).unwrap(), expected);
        let invalid = ApiError::invalid(
            "apps",
            "Deployment",
            "web",
            vec![(
                "spec.replicas".into(),
                "Invalid value: -1: must be >= 0".into(),
            )],
        );
        let text = String::from_utf8(status_bytes(&invalid.to_status())).unwrap();
        assert!(
            text.contains(r#""details":{"name":"web","group":"apps","kind":"Deployment","causes":[{"reason":"FieldValueInvalid","message":"#),
            "{text}"
        );
        assert!(
            text.ends_with("\"field\":\"spec.replicas\"}]},\"code\":422}\n"),
            "{text}"
        );
    }
}
