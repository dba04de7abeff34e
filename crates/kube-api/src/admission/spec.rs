//! Validation of ValidatingAdmissionPolicies and their bindings when they are written, as
//! kube-apiserver's registry validates them: required fields, supported values, rules, and
//! every CEL expression compiled in the environment it will run in (its variables, its
//! return type), so a policy that could never run is refused with 422 and kube-apiserver's
//! field paths and words rather than failing every request it matches.

use crate::validation::{is_dns1035_label, is_dns1123_subdomain, is_path_segment_name};
use infrasim_cel::check::check;
use infrasim_cel::types::{self, Record, Ty};
use serde_json::Value;
use std::collections::HashSet;

/// Field errors, as `(path, message)` in apimachinery's words.
#[derive(Default)]
pub(crate) struct Errors(pub Vec<(String, String)>);

impl Errors {
    fn required(&mut self, path: &str, detail: &str) {
        let message = if detail.is_empty() {
            "Required value".to_string()
        } else {
            format!("Required value: {detail}")
        };
        self.0.push((path.to_string(), message));
    }

    /// `Invalid value`, with the value as Go prints it (`shown`).
    fn invalid(&mut self, path: &str, shown: &str, detail: &str) {
        self.0.push((
            path.to_string(),
            format!("Invalid value: {shown}: {detail}"),
        ));
    }

    fn not_supported(&mut self, path: &str, value: &str, supported: &[&str]) {
        let list: Vec<String> = supported.iter().map(|s| quote(s)).collect();
        self.0.push((
            path.to_string(),
            format!(
                "Unsupported value: {}: supported values: {}",
                quote(value),
                list.join(", ")
            ),
        ));
    }

    fn duplicate(&mut self, path: &str, value: &str) {
        self.0.push((
            path.to_string(),
            format!("Duplicate value: {}", quote(value)),
        ));
    }

    fn forbidden(&mut self, path: &str, detail: &str) {
        self.0
            .push((path.to_string(), format!("Forbidden: {detail}")));
    }
}

/// A string as Go's `%q` prints it.
fn quote(s: &str) -> String {
    infrasim_cel::go_quote(s.as_bytes())
}

fn text<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or("")
}

fn items(v: &Value, key: &str) -> Vec<Value> {
    v.get(key)
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

/// What a policy's expressions may refer to, and what they must yield.
struct Scope<'a> {
    params: bool,
    authorizer: bool,
    variables: Option<&'a [(String, Ty)]>,
}

impl Scope<'_> {
    fn env(&self) -> Vec<(&str, Ty)> {
        let mut env = vec![
            ("object", Ty::Dyn),
            ("oldObject", Ty::Dyn),
            ("request", types::request()),
            ("namespaceObject", types::namespace()),
        ];
        if self.params {
            env.push(("params", Ty::Dyn));
        }
        if self.authorizer {
            env.push((
                "authorizer",
                Ty::Opaque("kubernetes.authorization.Authorizer"),
            ));
        }
        if let Some(vars) = self.variables {
            let fields = vars.iter().map(|(n, t)| (n.as_str(), t.clone())).collect();
            env.push(("variables", Record::ty("kubernetes.variables", fields)));
        }
        env
    }
}

/// Compiles `expression` at `path`; its type, after recording why it does not compile or
/// does not yield one of `returns` (`None` accepts any type).
fn compile(
    errors: &mut Errors,
    path: &str,
    expression: &str,
    scope: &Scope<'_>,
    returns: Option<&[Ty]>,
) -> Ty {
    match check(expression, &scope.env()) {
        Err(issues) => {
            errors.invalid(
                path,
                &quote(expression),
                &format!("compilation failed: {issues}"),
            );
            Ty::Unknown
        }
        Ok(ty) => {
            if let Some(returns) = returns {
                if ty.known() && !returns.iter().any(|r| r.same(&ty)) {
                    let detail = match returns {
                        [one] => format!("must evaluate to {one} but got {ty}"),
                        many => {
                            let names: Vec<String> = many.iter().map(Ty::to_string).collect();
                            format!("must evaluate to one of [{}] but got {ty}", names.join(" "))
                        }
                    };
                    errors.invalid(path, &quote(expression), &detail);
                }
            }
            ty
        }
    }
}

/// The checks of a ValidatingAdmissionPolicy.
pub(crate) fn validate_policy(policy: &Value) -> Vec<(String, String)> {
    let mut errors = Errors::default();
    let spec = policy.get("spec").unwrap_or(&Value::Null);
    let name = text(&policy["metadata"], "name");
    match spec.get("failurePolicy").and_then(Value::as_str) {
        None => errors.required("spec.failurePolicy", ""),
        Some(p) if !["Fail", "Ignore"].contains(&p) => {
            errors.not_supported("spec.failurePolicy", p, &["Fail", "Ignore"])
        }
        Some(_) => {}
    }
    let params = spec.get("paramKind").is_some_and(Value::is_object);
    if params {
        param_kind(&mut errors, &spec["paramKind"]);
    }
    match spec.get("matchConstraints").filter(|m| m.is_object()) {
        None => errors.required("spec.matchConstraints", ""),
        Some(constraints) => {
            match_resources(&mut errors, constraints, "spec.matchConstraints");
            if items(constraints, "resourceRules").is_empty() {
                errors.required("spec.matchConstraints.resourceRules", "");
            }
        }
    }
    let conditions = Scope {
        params,
        authorizer: true,
        variables: None,
    };
    match_conditions(&mut errors, &items(spec, "matchConditions"), &conditions);
    let variables = variables(&mut errors, &items(spec, "variables"), params);
    let declared = (!items(spec, "variables").is_empty()).then_some(variables.as_slice());
    let validations = items(spec, "validations");
    let annotations = items(spec, "auditAnnotations");
    if validations.is_empty() && annotations.is_empty() {
        let why = "validations or auditAnnotations must contain at least one item";
        errors.required("spec.validations", why);
        errors.required("spec.auditAnnotations", why);
        return errors.0;
    }
    for (i, v) in validations.iter().enumerate() {
        validation(
            &mut errors,
            v,
            &format!("spec.validations[{i}]"),
            params,
            declared,
        );
    }
    audit_annotations(&mut errors, name, &annotations, params, declared);
    errors.0
}

fn param_kind(errors: &mut Errors, kind: &Value) {
    let api_version = text(kind, "apiVersion");
    if api_version.is_empty() {
        errors.required("spec.paramKind.apiVersion", "");
    } else {
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        if api_version.matches('/').count() > 1 {
            let detail = format!("unexpected GroupVersion string: {api_version}");
            errors.invalid("spec.paramKind.apiVersion", &quote(api_version), &detail);
        } else if !group.is_empty() && !is_dns1123_subdomain(group) {
            errors.invalid(
                "spec.paramKind.apiVersion",
                &quote(group),
                DNS1123_SUBDOMAIN,
            );
        } else if version.is_empty() {
            let detail = "version must be specified";
            errors.invalid("spec.paramKind.apiVersion", &quote(api_version), detail);
        } else if !is_dns1035_label(version) {
            errors.invalid("spec.paramKind.apiVersion", &quote(version), DNS1035_LABEL);
        }
    }
    let kind = text(kind, "kind");
    if kind.is_empty() {
        errors.required("spec.paramKind.kind", "");
    } else if !is_dns1035_label(&kind.to_lowercase()) {
        let detail = format!("may have mixed case, but should otherwise match: {DNS1035_LABEL}");
        errors.invalid("spec.paramKind.kind", &quote(kind), &detail);
    }
}

const DNS1035_LABEL: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')";
const DNS1123_SUBDOMAIN: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const QUALIFIED_NAME: &str = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";

/// apimachinery's `IsQualifiedName`: its complaints about `value`.
fn qualified_name_problems(value: &str) -> Vec<String> {
    let (prefix, name) = match value.split('/').collect::<Vec<_>>().as_slice() {
        [name] => (None, *name),
        [prefix, name] => (Some(*prefix), *name),
        _ => return vec![format!("a qualified name {}", &QUALIFIED_NAME[10..])],
    };
    let mut problems = Vec::new();
    if let Some(prefix) = prefix {
        if prefix.is_empty() {
            problems.push("prefix part must be non-empty".to_string());
        } else if !is_dns1123_subdomain(prefix) {
            problems.push(format!("prefix part {DNS1123_SUBDOMAIN}"));
        }
    }
    let well_formed = name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric());
    if name.is_empty() {
        problems.push("name part must be non-empty".to_string());
    } else if name.len() > 63 {
        problems.push("name part must be no more than 63 characters".to_string());
    }
    if !name.is_empty() && !well_formed {
        problems.push(QUALIFIED_NAME.to_string());
    }
    problems
}

/// `MatchResources`: match policy, selectors present, and each rule's shape.
fn match_resources(errors: &mut Errors, m: &Value, path: &str) {
    match m.get("matchPolicy").and_then(Value::as_str) {
        None => errors.required(&format!("{path}.matchPolicy"), ""),
        Some(p) if !["Equivalent", "Exact"].contains(&p) => {
            errors.not_supported(&format!("{path}.matchPolicy"), p, &["Equivalent", "Exact"])
        }
        Some(_) => {}
    }
    for selector in ["namespaceSelector", "objectSelector"] {
        if !m.get(selector).is_some_and(Value::is_object) {
            errors.required(&format!("{path}.{selector}"), "");
        }
    }
    for key in ["resourceRules", "excludeResourceRules"] {
        for (i, rule) in items(m, key).iter().enumerate() {
            named_rule(errors, rule, &format!("{path}.{key}[{i}]"));
        }
    }
}

/// `NamedRuleWithOperations`: resource names, operations, groups, versions, resources, scope.
fn named_rule(errors: &mut Errors, rule: &Value, path: &str) {
    let mut seen = HashSet::new();
    for (i, name) in items(rule, "resourceNames").iter().enumerate() {
        let name = name.as_str().unwrap_or("");
        let at = format!("{path}.resourceNames[{i}]");
        if !is_path_segment_name(name) {
            errors.invalid(&at, &quote(name), "may not contain '/'");
        }
        if !seen.insert(name.to_string()) {
            errors.duplicate(&at, name);
        }
    }
    let list = |key: &str| -> Vec<String> {
        items(rule, key)
            .iter()
            .map(|v| v.as_str().unwrap_or("").to_string())
            .collect()
    };
    let shown = |l: &[String], ty: &str| {
        let quoted: Vec<String> = l.iter().map(|s| quote(s)).collect();
        format!("{ty}{{{}}}", quoted.join(", "))
    };
    let operations = list("operations");
    if operations.is_empty() {
        errors.required(&format!("{path}.operations"), "");
    }
    if operations.len() > 1 && operations.iter().any(|o| o == "*") {
        let value = shown(&operations, "[]admissionregistration.OperationType");
        errors.invalid(
            &format!("{path}.operations"),
            &value,
            "if '*' is present, must not specify other operations",
        );
    }
    const OPERATIONS: [&str; 5] = ["*", "CONNECT", "CREATE", "DELETE", "UPDATE"];
    for (i, o) in operations.iter().enumerate() {
        if !OPERATIONS.contains(&o.as_str()) {
            errors.not_supported(&format!("{path}.operations[{i}]"), o, &OPERATIONS);
        }
    }
    for (key, what) in [("apiGroups", "API groups"), ("apiVersions", "API versions")] {
        let values = list(key);
        if values.is_empty() {
            errors.required(&format!("{path}.{key}"), "");
        }
        if values.len() > 1 && values.iter().any(|v| v == "*") {
            let detail = format!("if '*' is present, must not specify other {what}");
            errors.invalid(
                &format!("{path}.{key}"),
                &shown(&values, "[]string"),
                &detail,
            );
        }
    }
    for (i, v) in list("apiVersions").iter().enumerate() {
        if v.is_empty() {
            errors.required(&format!("{path}.apiVersions[{i}]"), "");
        }
    }
    resources(errors, &list("resources"), &format!("{path}.resources"));
    if let Some(scope) = rule.get("scope").and_then(Value::as_str) {
        if !["*", "Cluster", "Namespaced"].contains(&scope) {
            errors.not_supported(
                &format!("{path}.scope"),
                scope,
                &["*", "Cluster", "Namespaced"],
            );
        }
    }
}

/// A rule's `resources`: present, and wildcards not mixed with what they cover.
fn resources(errors: &mut Errors, resources: &[String], path: &str) {
    if resources.is_empty() {
        errors.required(path, "");
    }
    let (mut any_sub_of, mut sub_of_any) = (HashSet::new(), HashSet::new());
    let (mut double, mut single, mut plain) = (false, false, false);
    for (i, r) in resources.iter().enumerate() {
        let at = format!("{path}[{i}]");
        if r.is_empty() {
            errors.required(&at, "");
            continue;
        }
        double |= r == "*/*";
        single |= r == "*";
        let Some((res, sub)) = r.split_once('/') else {
            plain = r != "*";
            continue;
        };
        if any_sub_of.contains(res) {
            errors.invalid(
                &at,
                &quote(r),
                &format!("if '{res}/*' is present, must not specify {r}"),
            );
        }
        if sub_of_any.contains(sub) {
            errors.invalid(
                &at,
                &quote(r),
                &format!("if '*/{sub}' is present, must not specify {r}"),
            );
        }
        if sub == "*" {
            any_sub_of.insert(res.to_string());
        }
        if res == "*" {
            sub_of_any.insert(sub.to_string());
        }
    }
    let quoted: Vec<String> = resources.iter().map(|s| quote(s)).collect();
    let shown = format!("[]string{{{}}}", quoted.join(", "));
    if resources.len() > 1 && double {
        errors.invalid(
            path,
            &shown,
            "if '*/*' is present, must not specify other resources",
        );
    }
    if single && plain {
        errors.invalid(
            path,
            &shown,
            "if '*' is present, must not specify other resources without subresources",
        );
    }
}

fn match_conditions(errors: &mut Errors, conditions: &[Value], scope: &Scope<'_>) {
    if conditions.len() > 64 {
        errors.0.push((
            "spec.matchConditions".into(),
            format!("Too many: {}: must have at most 64 items", conditions.len()),
        ));
    }
    let mut names = HashSet::new();
    for (i, c) in conditions.iter().enumerate() {
        let path = format!("spec.matchConditions[{i}]");
        let expression = text(c, "expression").trim();
        if expression.is_empty() {
            errors.required(&format!("{path}.expression"), "");
        } else {
            compile(
                errors,
                &format!("{path}.expression"),
                expression,
                scope,
                Some(&[Ty::Bool]),
            );
        }
        let name = text(c, "name");
        if name.is_empty() {
            errors.required(&format!("{path}.name"), "");
        } else {
            for problem in qualified_name_problems(name) {
                errors.invalid(&format!("{path}.name"), &quote(name), &problem);
            }
            if !names.insert(name) {
                errors.duplicate(&format!("{path}.name"), name);
            }
        }
    }
}

/// CEL's identifiers, less its reserved words.
fn is_cel_identifier(name: &str) -> bool {
    name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !infrasim_cel::RESERVED_WORDS.contains(&name)
}

/// The policy's variables, each compiled seeing those before it; their names and types.
fn variables(errors: &mut Errors, variables: &[Value], params: bool) -> Vec<(String, Ty)> {
    let mut declared: Vec<(String, Ty)> = Vec::new();
    for (i, v) in variables.iter().enumerate() {
        let path = format!("spec.variables[{i}]");
        let name = text(v, "name");
        if name.trim().is_empty() {
            errors.required(&format!("{path}.name"), "name is not specified");
        } else if !is_cel_identifier(name) {
            errors.invalid(
                &format!("{path}.name"),
                &quote(name),
                "name is not a valid CEL identifier",
            );
        }
        let expression = text(v, "expression");
        let ty = if expression.trim().is_empty() {
            errors.required(&format!("{path}.expression"), "expression is not specified");
            Ty::Unknown
        } else {
            let scope = Scope {
                params,
                authorizer: true,
                variables: Some(&declared),
            };
            compile(
                errors,
                &format!("{path}.expression"),
                expression,
                &scope,
                None,
            )
        };
        declared.push((name.to_string(), ty));
    }
    declared
}

fn validation(
    errors: &mut Errors,
    v: &Value,
    path: &str,
    params: bool,
    variables: Option<&[(String, Ty)]>,
) {
    let expression = text(v, "expression");
    let scope = Scope {
        params,
        authorizer: true,
        variables,
    };
    if expression.trim().is_empty() {
        errors.required(&format!("{path}.expression"), "expression is not specified");
    } else {
        compile(
            errors,
            &format!("{path}.expression"),
            expression,
            &scope,
            Some(&[Ty::Bool]),
        );
    }
    if let Some(m) = v.get("messageExpression").and_then(Value::as_str) {
        let at = format!("{path}.messageExpression");
        if !m.is_empty() && m.trim().is_empty() {
            errors.invalid(&at, &quote(m), "must be non-empty if specified");
        } else if !m.is_empty() {
            let scope = Scope {
                authorizer: false,
                ..scope
            };
            compile(errors, &at, m, &scope, Some(&[Ty::String]));
        }
    }
    if let Some(message) = v.get("message").and_then(Value::as_str) {
        let at = format!("{path}.message");
        if !message.is_empty() && message.trim().is_empty() {
            errors.invalid(
                &at,
                &quote(message),
                "message must be non-empty if specified",
            );
        } else if message.trim().contains(['\n', '\r']) {
            errors.invalid(&at, &quote(message), "message must not contain line breaks");
        }
    }
    if let Some(reason) = v.get("reason").and_then(Value::as_str) {
        const REASONS: [&str; 3] = ["Forbidden", "Invalid", "RequestEntityTooLarge"];
        if !REASONS.contains(&reason) {
            errors.not_supported(&format!("{path}.reason"), reason, &REASONS);
        }
    }
}

fn audit_annotations(
    errors: &mut Errors,
    policy_name: &str,
    annotations: &[Value],
    params: bool,
    variables: Option<&[(String, Ty)]>,
) {
    if annotations.len() > 20 {
        // Go prints the list with `%#v`.
        let shown: Vec<String> = annotations
            .iter()
            .map(|a| {
                format!(
                    "admissionregistration.AuditAnnotation{{Key:{}, ValueExpression:{}}}",
                    quote(text(a, "key")),
                    quote(text(a, "valueExpression"))
                )
            })
            .collect();
        let shown = format!(
            "[]admissionregistration.AuditAnnotation{{{}}}",
            shown.join(", ")
        );
        let detail = "must not have more than 20 auditAnnotations";
        errors.invalid("spec.auditAnnotations", &shown, detail);
    }
    let mut keys = HashSet::new();
    for (i, a) in annotations.iter().enumerate() {
        let path = format!("spec.auditAnnotations[{i}]");
        let key = text(a, "key");
        if policy_name.is_empty() {
            errors.invalid(
                &format!("{path}.key"),
                &quote(key),
                "requires metadata.name be non-empty",
            );
        } else {
            let qualified = format!("{policy_name}/{key}");
            for problem in qualified_name_problems(&qualified) {
                errors.invalid(&format!("{path}.key"), &quote(&qualified), &problem);
            }
        }
        let expression = text(a, "valueExpression");
        let at = format!("{path}.valueExpression");
        if expression.trim().is_empty() {
            errors.required(&at, "valueExpression is not specified");
        } else if expression.trim().len() > 5 * 1024 {
            errors.required(&at, "must not exceed 5120 bytes in length");
        } else {
            let scope = Scope {
                params,
                authorizer: true,
                variables,
            };
            compile(
                errors,
                &at,
                expression.trim(),
                &scope,
                Some(&[Ty::String, Ty::Null]),
            );
        }
        if !keys.insert(key) {
            errors.duplicate(&format!("{path}.key"), key);
        }
    }
}

/// The checks of a ValidatingAdmissionPolicyBinding.
pub(crate) fn validate_binding(binding: &Value) -> Vec<(String, String)> {
    let mut errors = Errors::default();
    let spec = binding.get("spec").unwrap_or(&Value::Null);
    let policy = text(spec, "policyName");
    if policy.is_empty() {
        errors.required("spec.policyName", "");
    } else if !is_dns1123_subdomain(policy) {
        errors.invalid("spec.policyName", &quote(policy), DNS1123_SUBDOMAIN);
    }
    if let Some(reference) = spec.get("paramRef").filter(|r| r.is_object()) {
        param_ref(&mut errors, reference);
    }
    if let Some(m) = spec.get("matchResources").filter(|m| m.is_object()) {
        // kube-apiserver's path for these errors is spelled so.
        match_resources(&mut errors, m, "spec.matchResouces");
    }
    validation_actions(&mut errors, &items(spec, "validationActions"));
    errors.0
}

fn param_ref(errors: &mut Errors, reference: &Value) {
    let name = text(reference, "name");
    let selector = reference.get("selector").is_some_and(|s| !s.is_null());
    if !name.is_empty() {
        if !is_path_segment_name(name) {
            errors.invalid("spec.paramRef.name", &quote(name), "may not contain '/'");
        }
        if selector {
            errors.forbidden(
                "spec.paramRef.name",
                "name and selector are mutually exclusive",
            );
        }
    }
    if selector && !name.is_empty() {
        errors.forbidden(
            "spec.paramRef.selector",
            "name and selector are mutually exclusive",
        );
    }
    if name.is_empty() && !selector {
        errors.required("spec.paramRef", "one of name or selector must be specified");
    }
    match text(reference, "parameterNotFoundAction") {
        "" => errors.required("spec.paramRef.parameterNotFoundAction", ""),
        "Deny" | "Allow" => {}
        other => errors.not_supported(
            "spec.paramRef.parameterNotFoundAction",
            other,
            &["Deny", "Allow"],
        ),
    }
}

fn validation_actions(errors: &mut Errors, actions: &[Value]) {
    const ACTIONS: [&str; 3] = ["Audit", "Deny", "Warn"];
    let path = "spec.validationActions";
    let mut seen = HashSet::new();
    let names: Vec<&str> = actions.iter().map(|a| a.as_str().unwrap_or("")).collect();
    for (i, action) in names.iter().enumerate() {
        if !ACTIONS.contains(action) {
            errors.not_supported(&format!("{path}[{i}]"), action, &ACTIONS);
        }
        if !seen.insert(*action) {
            errors.duplicate(&format!("{path}[{i}]"), action);
        }
    }
    if seen.contains("Deny") && seen.contains("Warn") {
        let quoted: Vec<String> = names.iter().map(|s| quote(s)).collect();
        let shown = format!(
            "[]admissionregistration.ValidationAction{{{}}}",
            quoted.join(", ")
        );
        errors.invalid(path, &shown, "must not contain both Deny and Warn (repeating the same validation failure information in the API response and headers serves no purpose)");
    }
    if seen.is_empty() {
        errors.required(path, "at least one validation action is required");
    }
}

#[cfg(test)]
mod tests {
    use super::{validate_binding, validate_policy};
    use serde_json::{json, Value};

    fn policy(spec: Value) -> Value {
        let mut base = json!({"failurePolicy": "Fail",
            "matchConstraints": {"matchPolicy": "Equivalent", "namespaceSelector": {}, "objectSelector": {},
                "resourceRules": [{"apiGroups": ["apps"], "apiVersions": ["v1"],
                    "operations": ["CREATE"], "resources": ["deployments"]}]}});
        for (k, v) in spec.as_object().into_iter().flatten() {
            base[k] = v.clone();
        }
        json!({"metadata": {"name": "p"}, "spec": base})
    }

    fn errors(spec: Value) -> Vec<String> {
        validate_policy(&policy(spec))
            .into_iter()
            .map(|(f, m)| format!("{f}: {m}"))
            .collect()
    }

    #[test]
    fn a_well_formed_policy_passes() {
        let ok = errors(
            json!({"paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
            "matchConditions": [{"name": "not-system", "expression": "!request.userInfo.username.startsWith('system:')"}],
            "variables": [{"name": "replicas", "expression": "object.spec.replicas"},
                          {"name": "big", "expression": "variables.replicas > 5"}],
            "validations": [{"expression": "!variables.big || params.data.allow == 'yes'",
                             "messageExpression": "'too many: ' + string(variables.replicas)"}],
            "auditAnnotations": [{"key": "replicas", "valueExpression": "string(object.spec.replicas)"}]}),
        );
        assert!(ok.is_empty(), "{ok:?}");
    }

    #[test]
    fn expressions_that_do_not_compile_are_refused_at_their_paths() {
        let e = errors(json!({"validations": [{"expression": "object.spec.replicas >"}]}));
        assert_eq!(e.len(), 1, "{e:?}");
        assert!(e[0].starts_with("spec.validations[0].expression: Invalid value: \"object.spec.replicas >\": compilation failed: ERROR: <input>:1:23: Syntax error: mismatched input '<EOF>'"), "{e:?}");
        let e = errors(json!({"validations": [{"expression": "params.x == 1"}]}));
        assert!(
            e[0].contains("undeclared reference to 'params' (in container '')"),
            "{e:?}"
        );
        let e = errors(json!({"validations": [{"expression": "object.spec.replicas"}]}));
        assert_eq!(e, ["spec.validations[0].expression: Invalid value: \"object.spec.replicas\": must evaluate to bool but got dyn"]);
        let e = errors(json!({"validations": [{"expression": "true", "messageExpression": "1"}]}));
        assert_eq!(e, ["spec.validations[0].messageExpression: Invalid value: \"1\": must evaluate to string but got int"]);
        let e = errors(
            json!({"matchConditions": [{"name": "x", "expression": "variables.a"}],
            "variables": [{"name": "a", "expression": "true"}], "validations": [{"expression": "variables.b"}]}),
        );
        assert!(e[0].starts_with("spec.matchConditions[0].expression: Invalid value: \"variables.a\": compilation failed: ERROR: <input>:1:1: undeclared reference to 'variables'"), "{e:?}");
        assert!(e[1].contains("undefined field 'b'"), "{e:?}");
        let e = errors(json!({"auditAnnotations": [{"key": "k", "valueExpression": "1"}]}));
        assert_eq!(e, ["spec.auditAnnotations[0].valueExpression: Invalid value: \"1\": must evaluate to one of [string null_type] but got int"]);
    }

    #[test]
    fn required_fields_and_audit_annotation_keys() {
        let e = validate_policy(&json!({"metadata": {"name": "p"}, "spec": {}}));
        let fields: Vec<&str> = e.iter().map(|(f, _)| f.as_str()).collect();
        assert_eq!(
            fields,
            [
                "spec.failurePolicy",
                "spec.matchConstraints",
                "spec.validations",
                "spec.auditAnnotations"
            ]
        );
        let e = errors(json!({"auditAnnotations": [
            {"key": "same", "valueExpression": "'a'"}, {"key": "same", "valueExpression": "'b'"},
            {"key": "bad key", "valueExpression": "null"}]}));
        assert_eq!(
            e[0],
            "spec.auditAnnotations[1].key: Duplicate value: \"same\""
        );
        assert!(e[1].starts_with("spec.auditAnnotations[2].key: Invalid value: \"p/bad key\": name part must consist of"), "{e:?}");
        let e = errors(
            json!({"validations": [{"expression": "true", "reason": "Teapot", "message": "a\nb"}]}),
        );
        assert_eq!(e, ["spec.validations[0].message: Invalid value: \"a\\nb\": message must not contain line breaks",
            "spec.validations[0].reason: Unsupported value: \"Teapot\": supported values: \"Forbidden\", \"Invalid\", \"RequestEntityTooLarge\""]);
    }

    #[test]
    fn bindings_are_checked_as_kube_apiserver_checks_them() {
        let e = validate_binding(
            &json!({"spec": {"policyName": "p", "validationActions": ["Deny", "Warn"]}}),
        );
        assert_eq!(e, [("spec.validationActions".to_string(), "Invalid value: []admissionregistration.ValidationAction{\"Deny\", \"Warn\"}: must not contain both Deny and Warn (repeating the same validation failure information in the API response and headers serves no purpose)".to_string())]);
        let e = validate_binding(
            &json!({"spec": {"validationActions": [], "paramRef": {"name": "x"}}}),
        );
        let shown: Vec<String> = e.iter().map(|(f, m)| format!("{f}: {m}")).collect();
        assert_eq!(shown, ["spec.policyName: Required value",
            "spec.paramRef.parameterNotFoundAction: Required value",
            "spec.validationActions: Required value: at least one validation action is required"]);
    }
}
