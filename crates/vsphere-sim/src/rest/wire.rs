//! A REST request and its answer as every service reads and writes them: the two spellings
//! (`/rest`, `/api`), the request, the answer in the spelling's shape (values wrapped or
//! bare, vAPI errors), and the reading of JSON bodies. Below the services and their router,
//! it knows none of them.

use serde_json::{json, Value};

/// Which of the two spellings a request used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    Rest,
    Api,
}

/// One REST request, as the services read it.
pub struct Request<'a> {
    pub method: &'a http::Method,
    /// The path after `/rest` or `/api` (`/com/vmware/cis/session`, `/session`).
    pub path: &'a str,
    /// `~action`, for `/rest` operations that are not plain CRUD (`?~action=get`).
    pub action: Option<&'a str>,
    /// The whole query string (`library_id=…`), when there is one.
    pub query: Option<&'a str>,
    pub headers: &'a http::HeaderMap,
    pub body: &'a [u8],
}

/// A REST answer: status and JSON body (empty for none).
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub body: String,
}

impl Answer {
    /// A successful answer carrying `value`, wrapped as the spelling wants it.
    pub(super) fn value(form: Form, status: u16, value: Value) -> Answer {
        let body = match form {
            Form::Rest => json!({ "value": value }),
            Form::Api => value,
        };
        Answer {
            status,
            body: body.to_string(),
        }
    }

    /// A successful answer with no body.
    pub(super) fn empty(status: u16) -> Answer {
        Answer {
            status,
            body: String::new(),
        }
    }

    /// A vAPI standard error (`unauthenticated`, `not_found`, `invalid_argument`, …) with
    /// its message, in the spelling's error shape.
    pub(super) fn error(form: Form, status: u16, kind: &str, id: &str, message: &str) -> Answer {
        let messages = json!([{"args": [], "default_message": message, "id": id}]);
        let body = match form {
            Form::Rest => json!({
                "type": format!("com.vmware.vapi.std.errors.{kind}"),
                "value": {"messages": messages},
            }),
            Form::Api => json!({"error_type": kind.to_ascii_uppercase(), "messages": messages}),
        };
        Answer {
            status,
            body: body.to_string(),
        }
    }

    pub(super) fn unauthenticated(form: Form) -> Answer {
        Answer::error(
            form,
            401,
            "unauthenticated",
            "com.vmware.vapi.endpoint.method.authentication.required",
            "Authentication required.",
        )
    }

    /// 400 `invalid_argument`: the request's arguments are wrong (not JSON, a field missing).
    pub(super) fn invalid(form: Form, message: &str) -> Answer {
        Answer::error(
            form,
            400,
            "invalid_argument",
            "com.vmware.vapi.std.errors.invalid_argument",
            message,
        )
    }

    /// 400 `already_exists`: a name the service keeps unique is taken.
    pub(super) fn already_exists(form: Form, message: &str) -> Answer {
        Answer::error(
            form,
            400,
            "already_exists",
            "com.vmware.vapi.std.errors.already_exists",
            message,
        )
    }

    /// 404 `not_found` for a service's object `what` (`Category`, `Library`) called `id`.
    pub(super) fn missing(form: Form, what: &str, id: &str) -> Answer {
        Answer::error(
            form,
            404,
            "not_found",
            "com.vmware.vapi.std.errors.not_found",
            &format!("{what} with identifier {id} does not exist."),
        )
    }

    pub(super) fn not_found(form: Form, what: &str) -> Answer {
        Answer::error(
            form,
            404,
            "not_found",
            "com.vmware.vapi.rest.httpNotFound",
            &format!("Not found: {what}"),
        )
    }
}

/// A request's JSON body (`{}` for none); a body that is not JSON is refused with 400.
pub(super) fn json_body(form: Form, body: &[u8]) -> Result<Value, Answer> {
    if body.is_empty() {
        return Ok(json!({}));
    }
    serde_json::from_slice(body)
        .map_err(|e| Answer::invalid(form, &format!("the request body is not JSON: {e}")))
}

/// A request's spec: `/rest` wraps it (`create_spec`, `update_spec`), `/api` sends it bare.
pub(super) fn spec<'a>(body: &'a Value, wrapper: &str) -> &'a Value {
    body.get(wrapper).unwrap_or(body)
}

/// String field `key` of a JSON object, empty when absent.
pub(super) fn text(v: &Value, key: &str) -> String {
    v.get(key).and_then(Value::as_str).unwrap_or("").to_string()
}

/// The strings of array field `key` of a request body (`tag_ids`, `vms`, …).
pub(super) fn strings(body: &Value, key: &str) -> Vec<String> {
    body.get(key)
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_take_the_shape_of_their_spelling() {
        let rest: Value = serde_json::from_str(&Answer::unauthenticated(Form::Rest).body).unwrap();
        assert_eq!(rest["type"], "com.vmware.vapi.std.errors.unauthenticated");
        assert_eq!(
            rest["value"]["messages"][0]["default_message"],
            "Authentication required."
        );
        let api: Value = serde_json::from_str(&Answer::unauthenticated(Form::Api).body).unwrap();
        assert_eq!(api["error_type"], "UNAUTHENTICATED");
    }
}
