//! ValidatingAdmissionPolicies (`admissionregistration.k8s.io/v1`): CEL validations that a
//! ValidatingAdmissionPolicyBinding applies, checked in-process before the validating
//! webhooks. A binding names its policy, may narrow what it matches (`matchResources`),
//! names its parameters (`paramRef`) and what a failure does (`validationActions`: Deny
//! refuses the request, Warn adds a warning, Audit records nothing here).

use super::{matching, Subject};
use crate::context::Ctx;
use crate::rules::{evaluate, to_cel, Cel};
use crate::status::ApiError;
use crate::values::At;
use infrasim_store::{ObjectKey, ReadAt};
use serde_json::Value;
use std::sync::Arc;

const POLICIES: &str = "validatingadmissionpolicies.admissionregistration.k8s.io";
pub(super) const BINDINGS: &str = "validatingadmissionpolicybindings.admissionregistration.k8s.io";

/// Checks every bound policy that matches the request.
pub(super) fn validate(
    ctx: &Ctx,
    subject: &Subject<'_>,
    warnings: &mut Vec<String>,
) -> Result<(), ApiError> {
    let Ok(bindings) = ctx.state.group.snapshot(BINDINGS, ReadAt::Latest) else {
        return Ok(());
    };
    for binding in bindings.objects.values() {
        let Ok(binding) = binding.to_value() else {
            continue;
        };
        let policy_name = binding["spec"]["policyName"].as_str().unwrap_or("");
        let Some(policy) = ctx
            .state
            .group
            .get(POLICIES, &ObjectKey::new("", policy_name))
            .and_then(|p| p.to_value().ok())
        else {
            continue;
        };
        if !applies(ctx, &policy["spec"]["matchConstraints"], subject, true)
            || (!binding["spec"]["matchResources"].is_null()
                && !applies(ctx, &binding["spec"]["matchResources"], subject, false))
        {
            continue;
        }
        check(ctx, subject, &policy, &binding, warnings)?;
    }
    Ok(())
}

/// `matchConstraints` / `matchResources`: a resource rule matches (with its resourceNames),
/// no exclusion does, and the namespace and object selectors select. A binding's
/// `matchResources` without resource rules narrows by its selectors only (`rules_required`
/// is false for it).
fn applies(ctx: &Ctx, constraints: &Value, subject: &Subject<'_>, rules_required: bool) -> bool {
    let name = ctx.path.name.clone().unwrap_or_else(|| {
        subject
            .object
            .and_then(|o| o.at("/metadata/name"))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    });
    let rule_applies = |rule: &Value| {
        let names = rule["resourceNames"].as_array();
        matching::rule_matches(ctx, rule, subject.operation)
            && names.is_none_or(|n| n.is_empty() || n.iter().any(|x| x == name.as_str()))
    };
    let rules = |key: &str| constraints[key].as_array().cloned().unwrap_or_default();
    let included = rules("resourceRules");
    (included.iter().any(rule_applies) || (!rules_required && included.is_empty()))
        && !rules("excludeResourceRules").iter().any(rule_applies)
        && matching::namespace_selected(ctx, &constraints["namespaceSelector"], subject.object)
        && matching::object_selected(&constraints["objectSelector"], subject.object, subject.old)
}

/// Evaluates one bound policy; refuses or warns as the binding says.
fn check(
    ctx: &Ctx,
    subject: &Subject<'_>,
    policy: &Value,
    binding: &Value,
    warnings: &mut Vec<String>,
) -> Result<(), ApiError> {
    let (policy_name, binding_name) = (
        policy["metadata"]["name"].as_str().unwrap_or(""),
        binding["metadata"]["name"].as_str().unwrap_or(""),
    );
    let spec = &policy["spec"];
    let ignore_errors = spec["failurePolicy"].as_str() == Some("Ignore");
    let actions: Vec<&str> = binding["spec"]["validationActions"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let refuse = |message: String, code: u16, reason: &str| {
        ApiError::from_webhook(
            code,
            Some(reason),
            format!("ValidatingAdmissionPolicy '{policy_name}' with binding '{binding_name}' denied request: {message}"),
        )
    };
    let params = match params(ctx, spec, binding) {
        Ok(p) => p,
        Err(None) => return Ok(()),
        Err(Some(why)) => return Err(refuse(why, 403, "Forbidden")),
    };
    let mut bound = bindings(ctx, subject, params);
    for condition in spec["matchConditions"].as_array().into_iter().flatten() {
        let expression = condition["expression"].as_str().unwrap_or("true");
        match evaluate(expression, &bound) {
            Ok(Cel::Bool(true)) => {}
            Ok(_) => return Ok(()),
            Err(_) if ignore_errors => return Ok(()),
            Err(e) => {
                return Err(refuse(
                    format!("expression '{expression}' resulted in error: {e}"),
                    403,
                    "Forbidden",
                ))
            }
        }
    }
    bound.push(("variables", variables(spec, &bound)));
    for validation in spec["validations"].as_array().into_iter().flatten() {
        let expression = validation["expression"].as_str().unwrap_or("true");
        let message = match evaluate(expression, &bound) {
            Ok(Cel::Bool(true)) => continue,
            Ok(Cel::Bool(false)) => failure_message(validation, &bound),
            Ok(_) | Err(_) if ignore_errors => continue,
            Ok(other) => format!(
                "expression '{expression}' resulted in a {:?}, not a bool",
                other.type_of()
            ),
            Err(e) => format!("expression '{expression}' resulted in error: {e}"),
        };
        if actions.contains(&"Warn") {
            warnings.push(format!(
                "Validation failed for ValidatingAdmissionPolicy '{policy_name}' with binding '{binding_name}': {message}"
            ));
        }
        if actions.contains(&"Deny") {
            let (code, reason) = match validation["reason"].as_str().unwrap_or("Invalid") {
                "Unauthorized" => (401, "Unauthorized"),
                "Forbidden" => (403, "Forbidden"),
                "RequestEntityTooLarge" => (413, "RequestEntityTooLarge"),
                _ => (422, "Invalid"),
            };
            return Err(refuse(message, code, reason));
        }
    }
    Ok(())
}

/// A failed validation's words: its messageExpression's string, its message, or the
/// expression itself.
fn failure_message(validation: &Value, bound: &[(&str, Cel)]) -> String {
    if let Some(expression) = validation["messageExpression"].as_str() {
        if let Ok(Cel::String(s)) = evaluate(expression, bound) {
            if !s.trim().is_empty() {
                return s.to_string();
            }
        }
    }
    match validation["message"].as_str() {
        Some(m) if !m.is_empty() => m.to_string(),
        _ => format!(
            "failed expression: {}",
            validation["expression"].as_str().unwrap_or("")
        ),
    }
}

/// The names a policy's expressions see.
fn bindings<'a>(ctx: &Ctx, subject: &Subject<'_>, params: Value) -> Vec<(&'a str, Cel)> {
    let namespace = ctx
        .state
        .group
        .get("namespaces", &ObjectKey::new("", ctx.namespace()))
        .and_then(|n| n.to_value().ok())
        .unwrap_or(Value::Null);
    let request = super::request_attributes(ctx, subject);
    vec![
        ("object", to_cel(&super::seen(ctx, subject.object))),
        ("oldObject", to_cel(&super::seen(ctx, subject.old))),
        ("request", to_cel(&request)),
        ("params", to_cel(&params)),
        ("namespaceObject", to_cel(&namespace)),
    ]
}

/// The policy's `variables`, each evaluated once, in order (later ones may read earlier
/// ones); one that fails is absent.
fn variables(spec: &Value, bound: &[(&str, Cel)]) -> Cel {
    let mut values: Vec<(String, Cel)> = Vec::new();
    for variable in spec["variables"].as_array().into_iter().flatten() {
        let (Some(name), Some(expression)) =
            (variable["name"].as_str(), variable["expression"].as_str())
        else {
            continue;
        };
        let mut scope: Vec<(&str, Cel)> = bound.to_vec();
        scope.push(("variables", map(&values)));
        if let Ok(value) = evaluate(expression, &scope) {
            values.push((name.to_string(), value));
        }
    }
    map(&values)
}

fn map(entries: &[(String, Cel)]) -> Cel {
    Cel::Map(cel::objects::Map {
        map: Arc::new(
            entries
                .iter()
                .map(|(k, v)| (cel::objects::Key::String(Arc::new(k.clone())), v.clone()))
                .collect(),
        ),
    })
}

/// The binding's parameters: the object its `paramRef` names, of the policy's `paramKind`.
/// `Err(None)` when none is found and the binding allows that; `Err(Some(why))` to refuse.
fn params(ctx: &Ctx, spec: &Value, binding: &Value) -> Result<Value, Option<String>> {
    let Some(kind) = spec["paramKind"].as_object() else {
        return Ok(Value::Null);
    };
    let reference = &binding["spec"]["paramRef"];
    let api_version = kind.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    let kind = kind.get("kind").and_then(Value::as_str).unwrap_or("");
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let found = ctx
        .state
        .registry
        .all()
        .into_iter()
        .find(|r| r.group == group && r.version == version && r.kind == kind)
        .and_then(|info| {
            let namespace = reference["namespace"]
                .as_str()
                .unwrap_or(if info.namespaced { ctx.namespace() } else { "" });
            let name = reference["name"].as_str()?;
            ctx.state
                .group
                .get(&info.store_key, &ObjectKey::new(namespace, name))
                .and_then(|o| o.to_value().ok())
        });
    match found {
        Some(p) => Ok(p),
        None if reference["parameterNotFoundAction"].as_str() == Some("Allow") => Err(None),
        None => Err(Some(
            "failed to configure binding: no params found for policy binding with `Deny` parameterNotFoundAction".into(),
        )),
    }
}
