//! Field errors as Kubernetes' `field.Error` renders them, and the 422 `Status` a webhook
//! answers with when an object breaks a rule: Cluster API's webhooks return
//! `apierrors.NewInvalid(GroupKind, name, errs)`, and clients (kubectl, `kubectl apply`'s
//! highlighting, controller-runtime's error checks) read its message, reason and causes.

use serde_json::{json, Value};

/// How a field is wrong.
#[derive(Debug, Clone, PartialEq)]
pub enum Kind {
    /// `Required value`.
    Required,
    /// `Forbidden`.
    Forbidden,
    /// `Invalid value: <v>`, with the value as Go's `%v` family would print it.
    Invalid(Shown),
    /// `Internal error`.
    Internal,
    /// An error worded whole elsewhere (a schema's `Invalid value: …: …`).
    Worded(String),
}

/// A value as a field error prints it.
#[derive(Debug, Clone, PartialEq)]
pub enum Shown {
    /// A JSON value: strings quoted, numbers and booleans bare, null as `null`.
    Json(Value),
    /// Text printed as it is (Go's `%#v` of a struct or a map, written by the rule).
    Raw(String),
}

/// One wrong field.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldError {
    pub path: String,
    pub kind: Kind,
    pub detail: String,
}

impl FieldError {
    pub fn required(path: impl Into<String>, detail: impl Into<String>) -> Self {
        Self::new(path, Kind::Required, detail)
    }

    pub fn forbidden(path: impl Into<String>, detail: impl Into<String>) -> Self {
        Self::new(path, Kind::Forbidden, detail)
    }

    pub fn invalid(path: impl Into<String>, value: Value, detail: impl Into<String>) -> Self {
        Self::new(path, Kind::Invalid(Shown::Json(value)), detail)
    }

    /// An invalid value printed as `shown` (Go's `%#v` of a map or a struct).
    pub fn invalid_shown(
        path: impl Into<String>,
        shown: impl Into<String>,
        detail: impl Into<String>,
    ) -> Self {
        Self::new(path, Kind::Invalid(Shown::Raw(shown.into())), detail)
    }

    pub fn internal(path: impl Into<String>, detail: impl Into<String>) -> Self {
        Self::new(path, Kind::Internal, detail)
    }

    /// An error the schema engine worded (its body, without the path).
    pub fn worded(path: impl Into<String>, body: impl Into<String>) -> Self {
        Self::new(path, Kind::Worded(body.into()), "")
    }

    fn new(path: impl Into<String>, kind: Kind, detail: impl Into<String>) -> Self {
        FieldError {
            path: path.into(),
            kind,
            detail: detail.into(),
        }
    }

    /// The cause's `type` in a Status's details.
    fn cause_type(&self) -> &'static str {
        match self.kind {
            Kind::Required => "FieldValueRequired",
            Kind::Forbidden => "FieldValueForbidden",
            Kind::Invalid(_) | Kind::Worded(_) => "FieldValueInvalid",
            Kind::Internal => "InternalError",
        }
    }

    /// The error without its path: `Invalid value: "x": must be …`.
    pub fn body(&self) -> String {
        let head = match &self.kind {
            Kind::Required => "Required value".to_string(),
            Kind::Forbidden => "Forbidden".to_string(),
            Kind::Internal => "Internal error".to_string(),
            Kind::Invalid(shown) => format!("Invalid value: {}", shown_text(shown)),
            Kind::Worded(body) => return body.clone(),
        };
        if self.detail.is_empty() {
            head
        } else {
            format!("{head}: {}", self.detail)
        }
    }
}

impl std::fmt::Display for FieldError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.path, self.body())
    }
}

fn shown_text(shown: &Shown) -> String {
    match shown {
        Shown::Raw(s) => s.clone(),
        Shown::Json(Value::String(s)) => go_quote(s),
        Shown::Json(Value::Null) => "null".to_string(),
        Shown::Json(v) => v.to_string(),
    }
}

/// A string quoted as Go's `%q` quotes it (JSON's escapes agree for what labels and names
/// hold).
pub fn go_quote(s: &str) -> String {
    Value::String(s.to_string()).to_string()
}

/// Go's `%#v` of a `map[string]string`: keys sorted, as `fmt` prints maps.
pub fn go_string_map(map: Option<&serde_json::Map<String, Value>>) -> String {
    let Some(map) = map else {
        return "map[string]string(nil)".to_string();
    };
    let mut pairs: Vec<(&String, &Value)> = map.iter().collect();
    pairs.sort_by(|a, b| a.0.cmp(b.0));
    let inner: Vec<String> = pairs
        .iter()
        .map(|(k, v)| format!("{}:{}", go_quote(k), go_quote(v.as_str().unwrap_or(""))))
        .collect();
    format!("map[string]string{{{}}}", inner.join(", "))
}

/// The errors as one message, as apimachinery aggregates them: duplicates dropped, one
/// alone, several in brackets.
pub fn aggregate(errors: &[FieldError]) -> String {
    let mut texts: Vec<String> = Vec::new();
    for e in errors {
        let t = e.to_string();
        if !texts.contains(&t) {
            texts.push(t);
        }
    }
    match texts.len() {
        1 => texts.remove(0),
        _ => format!("[{}]", texts.join(", ")),
    }
}

/// The 422 `Status` of `errors` on the object `name` of `kind` in `group`.
pub fn invalid_status(group: &str, kind: &str, name: &str, errors: &[FieldError]) -> Value {
    let causes: Vec<Value> = errors
        .iter()
        .map(|e| json!({"type": e.cause_type(), "message": e.body(), "field": e.path}))
        .collect();
    json!({
        "apiVersion": "v1", "kind": "Status", "metadata": {}, "status": "Failure",
        "message": format!("{kind}.{group} {} is invalid: {}", go_quote(name), aggregate(errors)),
        "reason": "Invalid",
        "details": {"name": name, "group": group, "kind": kind, "causes": causes},
        "code": 422,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_read_as_apimachinery_prints_them() {
        let e = FieldError::forbidden("spec.clusterName", "field is immutable");
        assert_eq!(
            e.to_string(),
            "spec.clusterName: Forbidden: field is immutable"
        );
        let e = FieldError::invalid(
            "spec.template.spec.version",
            json!("1.31"),
            "must be a valid semantic version",
        );
        assert_eq!(
            e.to_string(),
            "spec.template.spec.version: Invalid value: \"1.31\": must be a valid semantic version"
        );
        assert_eq!(
            FieldError::required("spec.bootstrap", "").to_string(),
            "spec.bootstrap: Required value"
        );
    }

    #[test]
    fn a_status_names_the_object_and_each_cause() {
        let errors = [
            FieldError::forbidden("spec.clusterName", "field is immutable"),
            FieldError::forbidden("spec.clusterName", "field is immutable"),
            FieldError::invalid("spec.replicas", json!(-1), "must be positive"),
        ];
        let s = invalid_status("cluster.x-k8s.io", "MachineDeployment", "md-0", &errors);
        assert_eq!(
            s["message"],
            "MachineDeployment.cluster.x-k8s.io \"md-0\" is invalid: [spec.clusterName: Forbidden: field is immutable, spec.replicas: Invalid value: -1: must be positive]"
        );
        assert_eq!(s["code"], 422);
        assert_eq!(s["details"]["causes"][2]["type"], "FieldValueInvalid");
        assert_eq!(
            s["details"]["causes"][2]["message"],
            "Invalid value: -1: must be positive"
        );
    }

    #[test]
    fn maps_print_sorted_as_go_does() {
        let m = json!({"b": "2", "a": "1"});
        assert_eq!(
            go_string_map(m.as_object()),
            "map[string]string{\"a\":\"1\", \"b\":\"2\"}"
        );
    }
}
