//! ValidatingAdmissionPolicies (`admissionregistration.k8s.io/v1`): CEL validations that a
//! ValidatingAdmissionPolicyBinding applies, checked in-process before the validating
//! webhooks. A binding names its policy, may narrow what it matches (`matchResources`),
//! names its parameters (`paramRef`) and what a failure does (`validationActions`: Deny
//! refuses the request, Warn adds a warning, Audit records an audit annotation). A policy's
//! `auditAnnotations` are evaluated for every request it applies to.
//!
//! This server has no audit log: audit annotations are written to its log (target `audit`),
//! but their evaluation, and the refusal an erring one causes, are kube-apiserver's.

use super::{matching, Subject};
use crate::context::Ctx;
use crate::status::ApiError;
use crate::values::At;
use infrasim_cel::{evaluate, to_cel, Cel};
use infrasim_store::{ObjectKey, ReadAt};
use serde_json::Value;
use std::sync::Arc;

pub(super) const POLICIES: &str = "validatingadmissionpolicies.admissionregistration.k8s.io";
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

/// What one binding's evaluation of its policy decided: refusals (in order; the first is
/// the answer), warnings, and the audit annotations it records.
struct Outcome<'a> {
    policy: &'a str,
    binding: &'a str,
    denied: Option<ApiError>,
}

impl Outcome<'_> {
    /// Records a refusal (`reason` as kube-apiserver's decision carries it); the first stays.
    fn deny(&mut self, message: &str, reason: &str) {
        if self.denied.is_some() {
            return;
        }
        let code = match reason {
            "Forbidden" => 403,
            "Unauthorized" => 401,
            "RequestEntityTooLarge" => 413,
            _ => 422,
        };
        let (policy, binding) = (self.policy, self.binding);
        self.denied = Some(ApiError::from_webhook(
            code,
            Some(if code == 422 { "Invalid" } else { reason }),
            format!("ValidatingAdmissionPolicy '{policy}' with binding '{binding}' denied request: {message}"),
        ));
    }
}

/// Evaluates one bound policy; refuses, warns or records as the binding says. Errors (an
/// expression that fails, parameters that cannot be found) refuse under `failurePolicy:
/// Fail` and are ignored under `Ignore`, as kube-apiserver's dispatcher decides.
fn check(
    ctx: &Ctx,
    subject: &Subject<'_>,
    policy: &Value,
    binding: &Value,
    warnings: &mut Vec<String>,
) -> Result<(), ApiError> {
    let mut outcome = Outcome {
        policy: policy["metadata"]["name"].as_str().unwrap_or(""),
        binding: binding["metadata"]["name"].as_str().unwrap_or(""),
        denied: None,
    };
    let spec = &policy["spec"];
    let ignore_errors = spec["failurePolicy"].as_str() == Some("Ignore");
    let params = match params(ctx, spec, binding) {
        Ok(p) => p,
        Err(None) => return Ok(()),
        Err(Some(_)) if ignore_errors => return Ok(()),
        Err(Some(why)) => {
            outcome.deny(&format!("failed to configure binding: {why}"), "Invalid");
            return outcome.denied.map_or(Ok(()), Err);
        }
    };
    let mut bound = bindings(ctx, subject, params);
    for condition in spec["matchConditions"].as_array().into_iter().flatten() {
        let expression = condition["expression"].as_str().unwrap_or("true");
        match evaluate(expression, &bound) {
            Ok(Cel::Bool(true)) => {}
            Ok(_) => return Ok(()),
            Err(_) if ignore_errors => return Ok(()),
            Err(e) => {
                outcome.deny(
                    &format!("expression '{expression}' resulted in error: {e}"),
                    "Invalid",
                );
                return outcome.denied.map_or(Ok(()), Err);
            }
        }
    }
    bound.push(("variables", variables(spec, &bound)));
    validations(&mut outcome, spec, binding, &bound, warnings);
    annotations(&mut outcome, spec, &bound, ignore_errors);
    outcome.denied.map_or(Ok(()), Err)
}

/// The policy's validations, each failure acted on as the binding's `validationActions` say.
fn validations(
    outcome: &mut Outcome<'_>,
    spec: &Value,
    binding: &Value,
    bound: &[(&str, Cel)],
    warnings: &mut Vec<String>,
) {
    let ignore_errors = spec["failurePolicy"].as_str() == Some("Ignore");
    let actions: Vec<&str> = binding["spec"]["validationActions"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    for (index, validation) in spec["validations"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let expression = validation["expression"].as_str().unwrap_or("true");
        // An error is a refusal without the validation's reason (so 422 Invalid).
        let (message, reason) = match evaluate(expression, bound) {
            Ok(Cel::Bool(true)) => continue,
            Ok(Cel::Bool(false)) => (
                failure_message(validation, bound),
                validation["reason"].as_str().unwrap_or("Invalid"),
            ),
            Ok(_) | Err(_) if ignore_errors => continue,
            Ok(other) => (
                format!(
                    "expression '{expression}' resulted in a {:?}, not a bool",
                    other.type_of()
                ),
                "Invalid",
            ),
            Err(e) => (
                format!("expression '{expression}' resulted in error: {e}"),
                "Invalid",
            ),
        };
        for action in &actions {
            match *action {
                "Deny" => outcome.deny(&message, reason),
                "Warn" => warnings.push(format!(
                    "Validation failed for ValidatingAdmissionPolicy '{}' with binding '{}': {message}",
                    outcome.policy, outcome.binding
                )),
                "Audit" => audit(
                    "validation.policy.admission.k8s.io/validation_failure",
                    &serde_json::json!([{"message": message, "policy": outcome.policy,
                        "binding": outcome.binding, "expressionIndex": index,
                        "validationActions": actions}])
                    .to_string(),
                ),
                _ => {}
            }
        }
    }
}

/// The policy's `auditAnnotations`: a string result is recorded (under `<policy>/<key>`, at
/// most 10 KiB of it), an empty one or null is skipped; an error refuses the request under
/// `failurePolicy: Fail`, and a result of another type always does.
fn annotations(
    outcome: &mut Outcome<'_>,
    spec: &Value,
    bound: &[(&str, Cel)],
    ignore_errors: bool,
) {
    for annotation in spec["auditAnnotations"].as_array().into_iter().flatten() {
        let key = annotation["key"].as_str().unwrap_or("");
        let expression = annotation["valueExpression"].as_str().unwrap_or("null");
        match evaluate(expression.trim(), bound) {
            Ok(Cel::String(value)) => {
                let value = value.trim();
                if !value.is_empty() {
                    let end = (0..=value.len().min(MAX_ANNOTATION))
                        .rev()
                        .find(|i| value.is_char_boundary(*i))
                        .unwrap_or(0);
                    audit(&format!("{}/{key}", outcome.policy), &value[..end]);
                }
            }
            Ok(Cel::Null) => {}
            Err(_) if ignore_errors => {}
            Err(e) => outcome.deny(&format!("expression '{}' resulted in error: {e}", expression.trim()), "Invalid"),
            Ok(other) => outcome.deny(
                &format!(
                    "valueExpression '{expression}' resulted in unsupported return type: {}. Return type must be either string or null.",
                    cel_type_name(&other)
                ),
                "Invalid",
            ),
        }
    }
}

/// kube-apiserver's limit on an audit annotation's value.
const MAX_ANNOTATION: usize = 10 * 1024;

/// Records an audit annotation. This server keeps no audit log: the annotation goes to the
/// server's log, under the `audit` target, where kube-apiserver's audit event would carry it.
fn audit(key: &str, value: &str) {
    tracing::info!(target: "audit", annotation = key, value, "admission audit annotation");
}

/// cel-go's name of a value's type, as its messages print it.
fn cel_type_name(value: &Cel) -> &'static str {
    match value {
        Cel::Bool(_) => "bool",
        Cel::Int(_) => "int",
        Cel::UInt(_) => "uint",
        Cel::Float(_) => "double",
        Cel::String(_) => "string",
        Cel::Bytes(_) => "bytes",
        Cel::List(_) => "list",
        Cel::Map(_) => "map",
        Cel::Null => "null_type",
        Cel::Timestamp(_) => "google.protobuf.Timestamp",
        Cel::Duration(_) => "google.protobuf.Duration",
        _ => "dyn",
    }
}

/// kube-apiserver's limit on a messageExpression's result.
const MAX_MESSAGE: usize = 5 * 1024;

/// A failed validation's words: its messageExpression's string (trimmed; not if empty, on
/// several lines or too long), its message, or the expression itself.
fn failure_message(validation: &Value, bound: &[(&str, Cel)]) -> String {
    if let Some(expression) = validation["messageExpression"].as_str() {
        if let Ok(Cel::String(s)) = evaluate(expression, bound) {
            let s = s.trim();
            if !s.is_empty() && !s.contains('\n') && s.len() <= MAX_MESSAGE {
                return s.to_string();
            }
        }
    }
    match validation["message"].as_str().map(str::trim) {
        Some(m) if !m.is_empty() => m.to_string(),
        _ => format!(
            "failed expression: {}",
            validation["expression"].as_str().unwrap_or("").trim()
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
            "no params found for policy binding with `Deny` parameterNotFoundAction".into(),
        )),
    }
}
