//! Which webhooks a request goes to: a webhook's `rules` (operations, groups, versions,
//! resources and subresources, scope), its `namespaceSelector` and `objectSelector`, and its
//! `matchConditions` (CEL over `object`, `oldObject` and `request`).

use super::{Subject, Webhook};
use crate::context::Ctx;
use crate::resources::ResourceInfo;
use crate::selectors::LabelSelector;
use crate::values::At;
use infrasim_store::ObjectKey;
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;

/// An admission operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Operation {
    Create,
    Update,
    Delete,
}

impl Operation {
    pub fn name(self) -> &'static str {
        match self {
            Operation::Create => "CREATE",
            Operation::Update => "UPDATE",
            Operation::Delete => "DELETE",
        }
    }

    /// The options kind a review names for this operation.
    pub fn options_kind(self) -> &'static str {
        match self {
            Operation::Create => "CreateOptions",
            Operation::Update => "UpdateOptions",
            Operation::Delete => "DeleteOptions",
        }
    }
}

/// Whether `hook` is called for this request (`object` as it stands now), and in which
/// version it sees the object: the request's (`Some(None)`), or, under `matchPolicy:
/// Equivalent`, another version of the resource its rules name (`Some(Some(…))`).
pub(crate) fn matches(
    ctx: &Ctx,
    hook: &Webhook,
    subject: &Subject,
    object: Option<&Value>,
) -> Option<Option<Arc<ResourceInfo>>> {
    let rules = hook.spec["rules"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    let exact = rules
        .iter()
        .any(|r| rule_matches(ctx, r, subject.operation));
    let target = match exact {
        true => None,
        false if hook.spec["matchPolicy"].as_str() == Some("Exact") => return None,
        false => Some(
            rules
                .iter()
                .find_map(|r| equivalent(ctx, r, subject.operation))?,
        ),
    };
    let selected = namespace_selected(ctx, &hook.spec["namespaceSelector"], object)
        && object_selected(&hook.spec["objectSelector"], object, subject.old)
        && conditions_hold(ctx, hook, subject, object);
    selected.then_some(target)
}

/// The version of the request's resource `rule` names, when it names another version of
/// the same group and resource (a custom resource served in several versions): the first
/// of its `apiVersions` the server serves, as kube-apiserver's equivalence matching picks.
fn equivalent(ctx: &Ctx, rule: &Value, operation: Operation) -> Option<Arc<ResourceInfo>> {
    let info = &ctx.info;
    if !info.custom || ctx.path.subresource.as_deref() == Some("scale") {
        return None;
    }
    strings(&rule["apiVersions"])
        .into_iter()
        .filter(|v| *v != "*" && *v != info.version)
        .find_map(|version| {
            let other = ctx
                .state
                .registry
                .find(&info.group, version, &info.plural)?;
            let subresource = ctx.path.subresource.as_deref();
            rule_matches_for(&other, subresource, rule, operation).then_some(other)
        })
}

fn strings(v: &Value) -> Vec<&str> {
    v.as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

pub(super) fn rule_matches(ctx: &Ctx, rule: &Value, operation: Operation) -> bool {
    rule_matches_for(&ctx.info, ctx.path.subresource.as_deref(), rule, operation)
}

/// Whether `rule` names `operation` on `info` (through `subresource`, if any).
fn rule_matches_for(
    info: &ResourceInfo,
    subresource: Option<&str>,
    rule: &Value,
    operation: Operation,
) -> bool {
    // Every write matches every webhook's rules, so this reads the rule in place and
    // allocates nothing.
    let names = |field: &str| {
        rule[field]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
    };
    let any = |field: &str, want: &str| names(field).any(|x| x == "*" || x == want);
    let resource_ok = names("resources").any(|r| match (r.split_once('/'), subresource) {
        (None, None) => r == "*" || r == info.plural,
        (Some((res, sub)), Some(want)) => {
            (res == "*" || res == info.plural) && (sub == "*" || sub == want)
        }
        (Some((res, sub)), None) => res == "*" && sub == "*",
        (None, Some(_)) => false,
    });
    let scope_ok = match rule["scope"].as_str().unwrap_or("*") {
        "Cluster" => !info.namespaced,
        "Namespaced" => info.namespaced,
        _ => true,
    };
    any("operations", operation.name())
        && any("apiGroups", &info.group)
        && any("apiVersions", &info.version)
        && resource_ok
        && scope_ok
}

fn labels(object: Option<&Value>) -> BTreeMap<String, String> {
    object
        .and_then(|o| o.at("/metadata/labels"))
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

/// A `metav1.LabelSelector` (matchLabels and matchExpressions) against `labels`; an empty or
/// absent selector matches everything.
fn selected(selector: &Value, labels: &BTreeMap<String, String>) -> bool {
    let text = crate::selectors::selector_string(Some(selector));
    LabelSelector::parse(&text).is_ok_and(|s| s.matches(labels))
}

/// The namespace's labels decide for namespaced objects, a Namespace's own for itself;
/// other cluster-scoped objects are always selected.
pub(super) fn namespace_selected(ctx: &Ctx, selector: &Value, object: Option<&Value>) -> bool {
    if selector.is_null() {
        return true;
    }
    if ctx.info.kind == "Namespace" && !ctx.info.custom {
        return selected(selector, &labels(object));
    }
    if !ctx.info.namespaced {
        return true;
    }
    let namespace = ctx
        .state
        .group
        .get("namespaces", &ObjectKey::new("", ctx.namespace()))
        .and_then(|ns| ns.to_value().ok());
    selected(selector, &labels(namespace.as_ref()))
}

/// The object selector matches the new object or the old one.
pub(super) fn object_selected(
    selector: &Value,
    object: Option<&Value>,
    old: Option<&Value>,
) -> bool {
    selector.is_null()
        || (object.is_some() && selected(selector, &labels(object)))
        || (old.is_some() && selected(selector, &labels(old)))
}

/// `matchConditions`: every expression must be true; one that errors counts as a match
/// (the webhook then decides, as kube-apiserver leaves it to the failure policy).
fn conditions_hold(ctx: &Ctx, hook: &Webhook, subject: &Subject, object: Option<&Value>) -> bool {
    let Some(conditions) = hook.spec["matchConditions"].as_array() else {
        return true;
    };
    let request = super::request_attributes(ctx, subject);
    conditions.iter().all(|c| {
        let expression = c["expression"].as_str().unwrap_or("true");
        infrasim_cel::evaluate_bool(
            expression,
            &[
                ("object", object.cloned().unwrap_or(Value::Null)),
                ("oldObject", subject.old.cloned().unwrap_or(Value::Null)),
                ("request", request.clone()),
            ],
        )
        .unwrap_or(true)
    })
}

#[cfg(test)]
mod tests {
    use super::{rule_matches_for, Operation};
    use crate::resources::Registry;
    use serde_json::json;

    /// Whether a rule naming `resources` (every group, version and operation) matches a
    /// create of pods, through `subresource` if given.
    fn matches(resources: &[&str], subresource: Option<&str>) -> bool {
        let registry = Registry::builtin();
        let pods = registry.find("", "v1", "pods").expect("pods are built in");
        let rule = json!({
            "apiGroups": ["*"], "apiVersions": ["*"], "operations": ["CREATE"],
            "resources": resources,
        });
        rule_matches_for(&pods, subresource, &rule, Operation::Create)
    }

    #[test]
    fn resources_match_as_kube_apiserver_reads_them() {
        // The main resource: by name, or `*`, or `*/*`; never through a subresource rule.
        assert!(matches(&["pods"], None));
        assert!(matches(&["*"], None));
        assert!(matches(&["*/*"], None));
        assert!(!matches(&["pods/status"], None));
        assert!(!matches(&["pods/*"], None));
        assert!(!matches(&["services"], None));
        // A subresource: by `pods/binding`, `pods/*`, `*/binding` or `*/*`; `pods` and `*`
        // name the main resource only.
        assert!(matches(&["pods/binding"], Some("binding")));
        assert!(matches(&["pods/*"], Some("binding")));
        assert!(matches(&["*/binding"], Some("binding")));
        assert!(matches(&["*/*"], Some("binding")));
        assert!(!matches(&["pods"], Some("binding")));
        assert!(!matches(&["*"], Some("binding")));
        assert!(!matches(&["pods/status"], Some("binding")));
        assert!(!matches(&["services/*"], Some("binding")));
    }

    #[test]
    fn a_rule_names_the_operation_group_and_version() {
        let registry = Registry::builtin();
        let pods = registry.find("", "v1", "pods").expect("pods are built in");
        let rule = |field: &str, value: &str| {
            let mut rule = json!({
                "apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                "resources": ["pods"],
            });
            rule[field] = json!([value]);
            rule_matches_for(&pods, None, &rule, Operation::Create)
        };
        assert!(rule("operations", "*"));
        assert!(!rule("operations", "UPDATE"));
        assert!(!rule("apiGroups", "apps"));
        assert!(!rule("apiVersions", "v2"));
        assert!(rule("apiVersions", "*"));
    }
}
