//! KubeadmConfig's and KubeadmConfigTemplate's validating webhooks
//! (`validation.kubeadmconfig.bootstrap.cluster.x-k8s.io`, and the template's), and the
//! rules of a `KubeadmConfigSpec` the KubeadmControlPlane's webhook applies too. Cluster API
//! v1.11 defaults neither (the template's defaulter changes only the topology controller's
//! dry runs, which this stand-in does not make).

use super::field::FieldError;
use super::review::{Review, Verdict};
use serde_json::{json, Value};
use std::collections::HashSet;

const GROUP: &str = "bootstrap.cluster.x-k8s.io";

/// KubeadmConfig: its spec's rules.
pub fn validate_config(review: &Review) -> Verdict {
    let mut errors = Vec::new();
    validate_spec(review.object.pointer("/spec"), "spec", &mut errors);
    Verdict::of(GROUP, "KubeadmConfig", errors)
}

/// KubeadmConfigTemplate: its template's spec's rules.
pub fn validate_template(review: &Review) -> Verdict {
    let mut errors = Vec::new();
    validate_spec(
        review.object.pointer("/spec/template/spec"),
        "spec.template.spec",
        &mut errors,
    );
    Verdict::of(GROUP, "KubeadmConfigTemplate", errors)
}

/// A `KubeadmConfigSpec`'s rules: files and users take their content one way, file paths
/// are unique, secret sources name a secret and a key, ignition needs its feature gate
/// (off, as by default), and a discovery kubeconfig authenticates one way.
pub fn validate_spec(spec: Option<&Value>, prefix: &str, errors: &mut Vec<FieldError>) {
    let Some(spec) = spec else { return };
    let mut paths = HashSet::new();
    for (i, file) in items(spec, "files").enumerate() {
        let at = format!("{prefix}.files[{i}]");
        if file.get("content").is_some_and(|c| !c.is_null())
            && file.get("contentFrom").is_some_and(|c| !c.is_null())
        {
            errors.push(FieldError::invalid_shown(
                &at,
                file.to_string(),
                "only one of content or contentFrom may be specified for a single file",
            ));
        }
        secret_source(
            file.pointer("/contentFrom/secret"),
            &format!("{at}.contentFrom.secret"),
            "file",
            errors,
        );
        let path = file["path"].as_str().unwrap_or("");
        if !paths.insert(path.to_string()) {
            errors.push(FieldError::invalid(
                format!("{at}.path"),
                json!(path),
                "path property must be unique among all files",
            ));
        }
    }
    for (i, user) in items(spec, "users").enumerate() {
        let at = format!("{prefix}.users[{i}]");
        if user.get("passwd").is_some_and(|c| !c.is_null())
            && user.get("passwdFrom").is_some_and(|c| !c.is_null())
        {
            errors.push(FieldError::invalid_shown(
                &at,
                user.to_string(),
                "only one of passwd or passwdFrom may be specified for a single user",
            ));
        }
        // Upstream words a password source's errors as a file source's.
        secret_source(
            user.pointer("/passwdFrom/secret"),
            &format!("{at}.passwdFrom.secret"),
            "file",
            errors,
        );
    }
    if spec["format"].as_str() == Some("ignition") {
        errors.push(FieldError::forbidden(
            format!("{prefix}.format"),
            "can be set only if the KubeadmBootstrapFormatIgnition feature gate is enabled",
        ));
    }
    if spec.get("ignition").is_some_and(|i| !i.is_null()) {
        errors.push(FieldError::forbidden(
            format!("{prefix}.ignition"),
            "can be set only if the KubeadmBootstrapFormatIgnition feature gate is enabled",
        ));
    }
    let user = spec.pointer("/joinConfiguration/discovery/file/kubeConfig/user");
    if let Some(user) = user {
        let set = |k: &str| user.get(k).is_some_and(|v| !v.is_null());
        if set("authProvider") && set("exec") {
            errors.push(FieldError::invalid_shown(
                format!("{prefix}.joinConfiguration.discovery.file.kubeConfig.user"),
                user.to_string(),
                "only one of authProvider or exec must be defined",
            ));
        }
    }
}

fn items<'a>(spec: &'a Value, key: &str) -> impl Iterator<Item = &'a Value> {
    spec.get(key)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
}

/// A secret a file or a password is read from names both the Secret and its key.
fn secret_source(secret: Option<&Value>, at: &str, what: &str, errors: &mut Vec<FieldError>) {
    let Some(secret) = secret else { return };
    for field in ["name", "key"] {
        if secret[field].as_str().unwrap_or("").is_empty() {
            errors.push(FieldError::required(
                format!("{at}.{field}"),
                format!("secret {what} source must specify non-empty secret {field}"),
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_and_users_take_their_content_one_way() {
        let spec = json!({
            "files": [{"path": "/a", "content": "x", "contentFrom": {"secret": {"name": "s", "key": "k"}}},
                      {"path": "/a", "contentFrom": {"secret": {"name": "", "key": "k"}}}],
            "users": [{"name": "u", "passwd": "p", "passwdFrom": {"secret": {"name": "s", "key": "k"}}}],
        });
        let mut errors = Vec::new();
        validate_spec(Some(&spec), "spec", &mut errors);
        let paths: Vec<&str> = errors.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "spec.files[0]",
                "spec.files[1].contentFrom.secret.name",
                "spec.files[1].path",
                "spec.users[0]"
            ]
        );
        assert_eq!(
            errors[1].to_string(),
            "spec.files[1].contentFrom.secret.name: Required value: secret file source must specify non-empty secret name"
        );
    }
}
