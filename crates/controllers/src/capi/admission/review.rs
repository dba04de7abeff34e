//! One `AdmissionReview`: what a handler is asked (the object, the old one, the operation)
//! and how its verdict is answered (allowed, with a JSON patch of what defaulting changed and
//! any warnings; or refused with a `Status`), as controller-runtime's webhook server answers.

use super::field::{invalid_status, FieldError};
use base64::Engine;
use serde_json::{json, Value};

/// The operation under review.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    Create,
    Update,
    Delete,
    Connect,
}

/// What a webhook is asked about.
#[derive(Debug, Clone)]
pub struct Review {
    pub operation: Operation,
    /// The object as it would be stored (the old one for a delete).
    pub object: Value,
    /// The object it replaces (updates and deletes).
    pub old: Option<Value>,
    pub namespace: String,
    pub name: String,
    pub dry_run: bool,
    pub sub_resource: Option<String>,
}

#[cfg(test)]
impl Review {
    /// A review of `object`, named `name` in `default`: an update of `old` when there is one,
    /// else a create.
    pub fn of(name: &str, object: Value, old: Option<Value>) -> Review {
        Review {
            operation: if old.is_some() {
                Operation::Update
            } else {
                Operation::Create
            },
            object,
            old,
            namespace: "default".into(),
            name: name.into(),
            dry_run: false,
            sub_resource: None,
        }
    }
}

impl Review {
    /// The review in `request` (an AdmissionReview's), or why it cannot be read.
    pub fn from_request(request: &Value) -> Result<Review, String> {
        let operation = match request["operation"].as_str() {
            Some("CREATE") => Operation::Create,
            Some("UPDATE") => Operation::Update,
            Some("DELETE") => Operation::Delete,
            Some("CONNECT") => Operation::Connect,
            other => return Err(format!("unknown operation {other:?}")),
        };
        let some = |v: &Value| (!v.is_null()).then(|| v.clone());
        let old = some(&request["oldObject"]);
        let object = match some(&request["object"]) {
            Some(o) => o,
            None if operation == Operation::Delete => old.clone().unwrap_or(Value::Null),
            None => return Err("the request has no object".to_string()),
        };
        let text = |k: &str| request[k].as_str().unwrap_or("").to_string();
        Ok(Review {
            operation,
            object,
            old,
            namespace: text("namespace"),
            name: text("name"),
            dry_run: request["dryRun"].as_bool().unwrap_or(false),
            sub_resource: request["subResource"].as_str().map(str::to_string),
        })
    }

    pub fn is_create(&self) -> bool {
        self.operation == Operation::Create
    }

    /// The object's name (the request's, else the object's own).
    pub fn object_name(&self) -> String {
        if !self.name.is_empty() {
            return self.name.clone();
        }
        self.object["metadata"]["name"]
            .as_str()
            .unwrap_or("")
            .to_string()
    }
}

/// A handler's answer.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Admitted as it is (or as defaulting changed it), with warnings.
    Allowed { warnings: Vec<String> },
    /// Refused because fields are wrong: a 422 naming them, under the webhook's kind.
    Invalid {
        group: &'static str,
        kind: &'static str,
        errors: Vec<FieldError>,
    },
    /// Refused for another reason (`code` 403 when a handler returns a plain error, as
    /// controller-runtime answers it; 500 when it could not decide).
    Denied { code: u16, message: String },
}

impl Verdict {
    pub fn allowed() -> Self {
        Verdict::Allowed {
            warnings: Vec::new(),
        }
    }

    /// Allowed if `errors` is empty, else Invalid.
    pub fn of(group: &'static str, kind: &'static str, errors: Vec<FieldError>) -> Self {
        if errors.is_empty() {
            Verdict::allowed()
        } else {
            Verdict::Invalid {
                group,
                kind,
                errors,
            }
        }
    }

    /// A plain error, as controller-runtime's `admission.Denied`.
    pub fn denied(message: impl Into<String>) -> Self {
        Verdict::Denied {
            code: 403,
            message: message.into(),
        }
    }

    /// Adds warnings to an allowed verdict (a refusal carries none).
    pub fn with_warnings(self, more: Vec<String>) -> Self {
        match self {
            Verdict::Allowed { mut warnings } => {
                warnings.extend(more);
                Verdict::Allowed { warnings }
            }
            other => other,
        }
    }
}

/// The `response` of an AdmissionReview for request `uid`: the verdict, and for an allowed
/// mutation the JSON patch from `before` to `after`.
pub fn response(
    uid: &Value,
    name: &str,
    verdict: Verdict,
    before: &Value,
    after: Option<&Value>,
) -> Value {
    match verdict {
        Verdict::Allowed { warnings } => {
            let mut r = json!({"uid": uid, "allowed": true});
            if !warnings.is_empty() {
                r["warnings"] = json!(warnings);
            }
            if let Some(after) = after.filter(|a| *a != before) {
                let patch = json_patch::diff(before, after);
                let bytes = serde_json::to_vec(&patch).unwrap_or_default();
                r["patchType"] = json!("JSONPatch");
                r["patch"] = json!(base64::engine::general_purpose::STANDARD.encode(bytes));
            }
            r
        }
        Verdict::Invalid {
            group,
            kind,
            errors,
        } => json!({"uid": uid, "allowed": false,
                    "status": invalid_status(group, kind, name, &errors)}),
        Verdict::Denied { code, message } => {
            let reason = match code {
                403 => "Forbidden",
                400 => "BadRequest",
                _ => "InternalError",
            };
            json!({"uid": uid, "allowed": false,
                   "status": {"metadata": {}, "status": "Failure", "message": message,
                              "reason": reason, "code": code}})
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mutation_is_answered_with_the_patch_of_what_changed() {
        let before = json!({"spec": {"a": 1}});
        let after = json!({"spec": {"a": 1, "b": 2}});
        let r = response(&json!("u"), "x", Verdict::allowed(), &before, Some(&after));
        assert_eq!(r["allowed"], true);
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(r["patch"].as_str().unwrap())
            .unwrap();
        let patch: json_patch::Patch = serde_json::from_slice(&bytes).unwrap();
        let mut patched = before.clone();
        json_patch::patch(&mut patched, &patch).unwrap();
        assert_eq!(patched, after);
        let same = response(&json!("u"), "x", Verdict::allowed(), &before, Some(&before));
        assert!(same.get("patch").is_none(), "nothing changed, no patch");
    }

    #[test]
    fn a_delete_is_reviewed_on_its_old_object() {
        let r = Review::from_request(&json!({"operation": "DELETE", "name": "c",
            "oldObject": {"metadata": {"name": "c"}}}))
        .unwrap();
        assert_eq!(r.object["metadata"]["name"], "c");
        assert_eq!(r.object_name(), "c");
    }
}
