//! Validation of what every object must satisfy: its name, per the rule its kind uses, and
//! its labels. Failures are 422 Invalid with one cause per field, as kube-apiserver reports.

use crate::status::ApiError;
use crate::values::At;
use serde_json::{json, Value};

/// DNS-1123 subdomain: at most 253 lower-case alphanumerics, `-` and `.`, alphanumeric at
/// both ends of each dot-separated part. Unlike DNS, kube-apiserver sets no 63-character limit
/// on a part, so a 69-character Secret name with no dot is valid.
pub fn is_dns1123_subdomain(s: &str) -> bool {
    !s.is_empty() && s.len() <= 253 && s.split('.').all(subdomain_part)
}

fn subdomain_part(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// DNS-1123 label: at most 63 lower-case alphanumerics or `-`, alphanumeric at both ends.
pub fn is_dns1123_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// DNS-1035 label: a DNS-1123 label that starts with a letter.
pub fn is_dns1035_label(s: &str) -> bool {
    is_dns1123_label(s) && s.starts_with(|c: char| c.is_ascii_lowercase())
}

/// apimachinery's `IsQualifiedName`: an optional DNS-1123-subdomain prefix and `/`, then up
/// to 63 alphanumerics, `-`, `_` or `.`, alphanumeric at both ends (label keys, Cluster API's
/// selector names).
pub fn is_qualified_name(s: &str) -> bool {
    let (prefix, name) = match s.split('/').collect::<Vec<_>>().as_slice() {
        [name] => (None, *name),
        [prefix, name] => (Some(*prefix), *name),
        _ => return false,
    };
    prefix.is_none_or(is_dns1123_subdomain)
        && !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric())
}

/// A name usable as a path segment (RBAC names such as `system:controller:x`).
pub fn is_path_segment_name(s: &str) -> bool {
    !s.is_empty() && s != "." && s != ".." && !s.contains('/') && !s.contains('%')
}

fn name_problem(kind: &str, name: &str) -> Option<String> {
    let (ok, rule) = match kind {
        "Namespace" => (
            is_dns1123_label(name),
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
        ),
        "Service" => (
            is_dns1035_label(name),
            "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')",
        ),
        // An APIService is named `version.group` (`v1.` for the core group), which its own
        // validation checks against its spec.
        "Role" | "ClusterRole" | "RoleBinding" | "ClusterRoleBinding" | "APIService" => (
            is_path_segment_name(name),
            "may not be '.' or '..' and may not contain '/' or '%'",
        ),
        _ => (
            is_dns1123_subdomain(name),
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
        ),
    };
    (!ok).then(|| format!("Invalid value: \"{name}\": {rule}"))
}

fn label_key_ok(key: &str) -> bool {
    let (prefix, name) = match key.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    let name_ok = !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric());
    name_ok && prefix.is_none_or(is_dns1123_subdomain)
}

fn label_value_ok(value: &str) -> bool {
    value.is_empty()
        || (value.len() <= 63
            && value
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
            && value.starts_with(|c: char| c.is_ascii_alphanumeric())
            && value.ends_with(|c: char| c.is_ascii_alphanumeric()))
}

/// Checks the metadata rules every object must satisfy.
pub fn validate(kind: &str, group: &str, object: &Value) -> Result<(), ApiError> {
    let name = object
        .at("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    let mut causes = Vec::new();
    if name.is_empty() {
        causes.push((
            "metadata.name".to_string(),
            "Required value: name or generateName is required".to_string(),
        ));
    } else if let Some(problem) = name_problem(kind, name) {
        causes.push(("metadata.name".to_string(), problem));
    }
    if let Some(labels) = object.at("/metadata/labels").and_then(Value::as_object) {
        for (k, v) in labels {
            if !label_key_ok(k) {
                causes.push((
                    "metadata.labels".to_string(),
                    format!("Invalid value: \"{k}\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"),
                ));
            }
            match v.as_str() {
                Some(s) if label_value_ok(s) => {}
                _ => causes.push((
                    "metadata.labels".to_string(),
                    format!("Invalid value: {v}: a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"),
                )),
            }
        }
    }
    if causes.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid(group, kind, name, causes))
    }
}

/// What kube-apiserver says when a pod update changes more than it may.
const POD_UPDATE_FORBIDDEN: &str = "Forbidden: pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)";

/// A pod's spec with what an update may change put back as it was, so what remains must be
/// equal: container and init-container images, a lowered (or first) positive
/// activeDeadlineSeconds, added tolerations, removed scheduling gates, a negative grace period
/// raised to 1.
fn pod_spec_masked(old: &Value, new: &Value) -> Value {
    let mut masked = new.clone();
    for list in ["containers", "initContainers"] {
        let (Some(old_list), Some(new_list)) = (
            old.get(list).and_then(Value::as_array),
            masked.get_mut(list).and_then(Value::as_array_mut),
        ) else {
            continue;
        };
        if old_list.len() == new_list.len() {
            for (o, n) in old_list.iter().zip(new_list.iter_mut()) {
                if let Some(image) = o.get("image") {
                    n["image"] = image.clone();
                }
            }
        }
    }
    let deadline = |v: &Value| v.get("activeDeadlineSeconds").and_then(Value::as_i64);
    if let Some(n) = deadline(new) {
        if n > 0 && deadline(old).is_none_or(|o| n <= o) {
            match old.get("activeDeadlineSeconds") {
                Some(o) => masked["activeDeadlineSeconds"] = o.clone(),
                None => {
                    if let Some(m) = masked.as_object_mut() {
                        m.remove("activeDeadlineSeconds");
                    }
                }
            }
        }
    }
    let list = |v: &Value, k: &str| {
        v.get(k)
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    let (old_tol, new_tol) = (list(old, "tolerations"), list(new, "tolerations"));
    if old_tol.iter().all(|t| new_tol.contains(t)) {
        masked["tolerations"] = json!(old_tol);
    }
    let (old_gates, new_gates) = (list(old, "schedulingGates"), list(new, "schedulingGates"));
    if new_gates.iter().all(|g| old_gates.contains(g)) {
        masked["schedulingGates"] = json!(old_gates);
    }
    let grace = |v: &Value| {
        v.get("terminationGracePeriodSeconds")
            .and_then(Value::as_i64)
    };
    if grace(old).is_some_and(|g| g < 0) && grace(new) == Some(1) {
        masked["terminationGracePeriodSeconds"] = old["terminationGracePeriodSeconds"].clone();
    }
    // Absent and empty lists compare equal.
    for k in ["tolerations", "schedulingGates"] {
        if masked
            .get(k)
            .and_then(Value::as_array)
            .is_some_and(|a| a.is_empty())
            && old.get(k).is_none()
        {
            if let Some(m) = masked.as_object_mut() {
                m.remove(k);
            }
        }
    }
    masked
}

/// Checks what an update may not change: most of a pod's spec, the data of an immutable
/// ConfigMap or Secret.
pub fn validate_update(kind: &str, group: &str, old: &Value, new: &Value) -> Result<(), ApiError> {
    if kind == "Pod" && group.is_empty() {
        let null = Value::Null;
        let (old_spec, new_spec) = (
            old.get("spec").unwrap_or(&null),
            new.get("spec").unwrap_or(&null),
        );
        // Most pod updates (every status report) leave the spec as it was: nothing to mask.
        if old_spec != new_spec && pod_spec_masked(old_spec, new_spec) != *old_spec {
            let name = new
                .at("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or("");
            return Err(ApiError::invalid(
                group,
                kind,
                name,
                vec![("spec".to_string(), POD_UPDATE_FORBIDDEN.to_string())],
            ));
        }
        return Ok(());
    }
    if !matches!(kind, "ConfigMap" | "Secret") || !group.is_empty() {
        return Ok(());
    }
    if old.get("immutable").and_then(Value::as_bool) != Some(true) {
        return Ok(());
    }
    let name = new
        .at("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    let mut causes = Vec::new();
    if new.get("immutable").and_then(Value::as_bool) != Some(true) {
        causes.push((
            "immutable".to_string(),
            "Forbidden: field is immutable when `immutable` is set".to_string(),
        ));
    }
    for field in ["data", "binaryData", "stringData"] {
        let (o, n) = (
            old.get(field).filter(|v| !v.is_null()),
            new.get(field).filter(|v| !v.is_null()),
        );
        let empty =
            |v: Option<&Value>| v.is_none_or(|v| v.as_object().is_some_and(|m| m.is_empty()));
        if o != n && !(empty(o) && empty(n)) {
            causes.push((
                field.to_string(),
                "Forbidden: field is immutable when `immutable` is set".to_string(),
            ));
        }
    }
    if causes.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid(group, kind, name, causes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn pod_updates_change_only_what_kube_apiserver_allows() {
        let pod = |spec: Value| json!({"metadata": {"name": "p"}, "spec": spec});
        let old = pod(json!({
            "containers": [{"name": "c", "image": "nginx:1"}],
            "tolerations": [{"key": "a", "operator": "Exists"}],
            "activeDeadlineSeconds": 100,
        }));
        let allowed = [json!({"containers": [{"name": "c", "image": "nginx:2"}],
                   "tolerations": [{"key": "a", "operator": "Exists"}, {"key": "b", "operator": "Exists"}],
                   "activeDeadlineSeconds": 50})];
        for spec in allowed {
            assert!(validate_update("Pod", "", &old, &pod(spec)).is_ok());
        }
        let forbidden = [
            // another command, a removed toleration, a raised deadline, another container
            json!({"containers": [{"name": "c", "image": "nginx:1", "command": ["sh"]}],
                   "tolerations": [{"key": "a", "operator": "Exists"}], "activeDeadlineSeconds": 100}),
            json!({"containers": [{"name": "c", "image": "nginx:1"}], "activeDeadlineSeconds": 100}),
            json!({"containers": [{"name": "c", "image": "nginx:1"}],
                   "tolerations": [{"key": "a", "operator": "Exists"}], "activeDeadlineSeconds": 200}),
            json!({"containers": [{"name": "c", "image": "nginx:1"}, {"name": "d", "image": "x"}],
                   "tolerations": [{"key": "a", "operator": "Exists"}], "activeDeadlineSeconds": 100}),
        ];
        for spec in forbidden {
            let err = validate_update("Pod", "", &old, &pod(spec.clone())).unwrap_err();
            assert_eq!(err.code, 422, "{spec}");
            assert!(err.message.contains("pod updates may not change fields"));
        }
    }

    #[test]
    fn names_follow_their_kind_rules() {
        assert!(validate("ConfigMap", "", &json!({"metadata": {"name": "a.b-c"}})).is_ok());
        let err =
            validate("ConfigMap", "", &json!({"metadata": {"name": "Bad_Name"}})).unwrap_err();
        assert_eq!(err.code, 422);
        assert_eq!(
            err.details.as_ref().unwrap()["causes"][0]["field"],
            "metadata.name"
        );
        assert!(validate("Namespace", "", &json!({"metadata": {"name": "a.b"}})).is_err());
        // A subdomain's parts may be longer than a DNS label (kube-apiserver's rule); the whole
        // may not pass 253.
        let long = "a".repeat(70);
        assert!(validate("Secret", "", &json!({"metadata": {"name": long}})).is_ok());
        let too_long = "a".repeat(254);
        assert!(validate("Secret", "", &json!({"metadata": {"name": too_long}})).is_err());
        assert!(validate("Namespace", "", &json!({"metadata": {"name": long}})).is_err());
        assert!(validate("Service", "", &json!({"metadata": {"name": "1abc"}})).is_err());
        assert!(validate(
            "ClusterRole",
            "rbac.authorization.k8s.io",
            &json!({"metadata": {"name": "system:x"}})
        )
        .is_ok());
        assert!(validate("Pod", "", &json!({"metadata": {}})).is_err());
        assert!(validate(
            "Pod",
            "",
            &json!({"metadata": {"name": "p", "labels": {"a": "-x"}}})
        )
        .is_err());
    }
}
