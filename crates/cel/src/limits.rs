//! kube-apiserver's limits on the estimated cost of a CRD's rules, checked when the CRD is
//! written (apiextensions-apiserver's `validation.go` and `cel_validation.go`).
//!
//! A rule's estimate (the `estimate` module) is its cost on one value times how many values
//! its schema node can have in one object: the product of the `maxItems` and
//! `maxProperties` of the lists and maps above it, or, when one of them is unbounded, how
//! many of the node's smallest values fit in a 3 MiB request. A rule or messageExpression
//! (the latter not multiplied) over 10,000,000 is refused, and so are the schema's rules
//! together over 100,000,000, naming the (at most four) rules that contributed at least 1%.

use super::decl::{self, Decl, Kind, MAX_REQUEST_BYTES};
use super::estimate::max_cost;
use serde_json::Value;
use std::rc::Rc;

/// The most one rule may be estimated to cost (`StaticEstimatedCostLimit`).
pub const RULE_LIMIT: u64 = 10_000_000;

/// The most a schema's rules may be estimated to cost together
/// (`StaticEstimatedCRDCostLimit`).
pub const SCHEMA_LIMIT: u64 = 100_000_000;

/// The estimated-cost errors of the rules of `schema` (an `openAPIV3Schema` that compiles),
/// as `(field, message)` under `path`, the schema's own path in the CRD.
pub fn estimated_cost_errors(schema: &Value, path: &str) -> Vec<(String, String)> {
    let mut walk = Walk::default();
    walk.node(schema, decl::from_schema(schema, true), Some(1), path);
    let mut errors = walk.errors;
    if walk.total > SCHEMA_LIMIT {
        for (field, _) in walk.most_expensive {
            errors.push((field, "Forbidden: contributed to estimated rule cost total exceeding cost limit for entire OpenAPIv3 schema".to_string()));
        }
        let message = over_budget(
            "x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema",
            walk.total,
            SCHEMA_LIMIT,
        );
        errors.push((path.to_string(), format!("Forbidden: {message}")));
    }
    errors
}

/// Whether the rules of `schema` can never reach kube-apiserver's run-time limits: every
/// rule and messageExpression estimated within the per-call limit, and all of them, each as
/// often as it can run in one object, within the object's budget. cel-go's estimate bounds
/// the cost it counts as a rule runs, so such rules need no metering (which costs a rule's
/// evaluation about as much again).
pub fn within_runtime_limits(schema: &Value) -> bool {
    let mut walk = Walk::default();
    walk.node(schema, decl::from_schema(schema, true), Some(1), "");
    walk.single_max <= super::cost::PER_CALL_LIMIT
        && walk.runtime_total <= super::cost::RUNTIME_BUDGET.unsigned_abs()
}

/// Every rule's and messageExpression's estimate under `schema` as checked against the
/// limits (a rule's times how often it can run), by field under `path` (for the conformance
/// cases, which read the figures beside the verdict).
pub fn checked_costs(schema: &Value, path: &str) -> Vec<(String, u64)> {
    let mut walk = Walk::default();
    walk.node(schema, decl::from_schema(schema, true), Some(1), path);
    walk.checked
}

/// kube-apiserver's words for an estimate over its limit, with the factor it exceeds it by.
fn over_budget(what: &str, cost: u64, limit: u64) -> String {
    let exceed = cost as f64 / limit as f64;
    let factor = if exceed > 100.0 {
        "more than 100x".to_string()
    } else if exceed < 1.5 {
        format!("{exceed:.6}x")
    } else {
        format!("{exceed:.1}x")
    };
    format!("{what} exceeds budget by factor of {factor} (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)")
}

#[derive(Default)]
struct Walk {
    errors: Vec<(String, String)>,
    total: u64,
    /// The costliest single evaluation of a rule or messageExpression.
    single_max: u64,
    /// What all of them can cost together in one object (messageExpressions included, each
    /// as often as its rule can run).
    runtime_total: u64,
    /// The costliest expressions (at least 1% of the schema's limit), costliest first.
    most_expensive: Vec<(String, u64)>,
    /// Every expression's checked cost, by field (for tests against upstream's figures).
    /// Every checked cost by field (CRD writes are rare: kept always, read by the
    /// conformance cases).
    checked: Vec<(String, u64)>,
}

impl Walk {
    /// Checks the rules below `schema` (at `path`), then its own. `this` is the type of its
    /// values; `cardinality` how many of them one object can hold (`None`: unbounded).
    fn node(
        &mut self,
        schema: &Value,
        this: Option<Rc<Decl>>,
        cardinality: Option<u64>,
        path: &str,
    ) {
        let below = cardinality.and_then(|c| spread(schema).map(|s| c.saturating_mul(s)));
        if let Some(values) = schema.get("additionalProperties").filter(|v| v.is_object()) {
            let ty = match this.as_deref().map(|t| &t.kind) {
                Some(Kind::Map(_, value)) => Some(value.clone()),
                _ => decl::from_schema(values, embedded(values)),
            };
            self.node(values, ty, below, &format!("{path}.additionalProperties"));
        }
        if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
            let mut names: Vec<&String> = properties.keys().collect();
            names.sort();
            for name in names {
                let property = &properties[name];
                let ty = match this.as_deref().map(|t| &t.kind) {
                    Some(Kind::Object(fields)) if fields.contains_key(name) => {
                        fields.get(name).cloned()
                    }
                    _ => decl::from_schema(property, embedded(property)),
                };
                self.node(property, ty, below, &format!("{path}.properties[{name}]"));
            }
        }
        if let Some(items) = schema.get("items").filter(|v| v.is_object()) {
            let ty = match this.as_deref().map(|t| &t.kind) {
                Some(Kind::List(item)) => Some(item.clone()),
                _ => decl::from_schema(items, embedded(items)),
            };
            self.node(items, ty, below, &format!("{path}.items"));
        }
        let rules = schema
            .get("x-kubernetes-validations")
            .and_then(Value::as_array);
        for (i, rule) in rules.into_iter().flatten().enumerate() {
            let this = this.clone().unwrap_or_else(|| Decl::unbounded(Kind::Dyn));
            self.rule(
                rule,
                &this,
                cardinality,
                &format!("{path}.x-kubernetes-validations[{i}]"),
            );
        }
    }

    fn rule(&mut self, rule: &Value, this: &Rc<Decl>, cardinality: Option<u64>, path: &str) {
        // How often the rule can run in one object.
        let times = cardinality.unwrap_or(MAX_REQUEST_BYTES / (this.min_json + 1));
        for key in ["rule", "messageExpression"] {
            let Some(source) = rule.get(key).and_then(Value::as_str) else {
                continue;
            };
            // One that does not compile is another error's to report (the CRD is refused).
            let Ok(program) = cel::Program::compile(source) else {
                self.single_max = u64::MAX;
                continue;
            };
            let once = max_cost(program.expression(), this);
            self.single_max = self.single_max.max(once);
            let all = once.saturating_mul(times);
            self.runtime_total = self.runtime_total.saturating_add(all);
            // kube-apiserver limits a rule as often as it runs, a messageExpression once.
            match key {
                "rule" => self.check(format!("{path}.rule"), "estimated rule cost", all),
                _ => self.check(
                    format!("{path}.messageExpression"),
                    "estimated messageExpression cost",
                    once,
                ),
            }
        }
    }

    fn check(&mut self, field: String, what: &str, cost: u64) {
        self.checked.push((field.clone(), cost));
        if cost > RULE_LIMIT {
            let message = over_budget(what, cost, RULE_LIMIT);
            self.errors
                .push((field.clone(), format!("Forbidden: {message}")));
        }
        self.total = self.total.saturating_add(cost);
        if cost < SCHEMA_LIMIT / 100 {
            return;
        }
        self.most_expensive.push((field, cost));
        self.most_expensive
            .sort_by_key(|(_, cost)| std::cmp::Reverse(*cost));
        self.most_expensive.truncate(4);
    }
}

fn embedded(schema: &Value) -> bool {
    schema
        .get("x-kubernetes-embedded-resource")
        .and_then(Value::as_bool)
        .unwrap_or(false)
}

/// How many values of each child one value of `schema` holds at most: a list's `maxItems`,
/// a map's `maxProperties`, an object's one; `None` when unbounded.
fn spread(schema: &Value) -> Option<u64> {
    let bound = |key: &str| {
        let n = schema.get(key).and_then(Value::as_i64)?;
        Some(u64::try_from(n).unwrap_or(0))
    };
    match schema.get("type").and_then(Value::as_str) {
        Some("object") if schema.get("additionalProperties").is_some() => bound("maxProperties"),
        Some("array") => bound("maxItems"),
        _ => Some(1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const PREFIX: &str = "spec.validation.openAPIV3Schema";

    fn nested(list_max: Option<u64>, map_max: Option<u64>, key_max: Option<u64>) -> Value {
        let mut key = json!({"type": "string"});
        if let Some(m) = key_max {
            key["maxLength"] = json!(m);
        }
        let mut map = json!({"type": "object", "additionalProperties": {"type": "object",
            "required": ["key"], "properties": {"key": key}}});
        if let Some(m) = map_max {
            map["maxProperties"] = json!(m);
        }
        let mut list = json!({"type": "array", "items": map,
            "x-kubernetes-validations": [{"rule": "self.all(x, x.all(y, x[y].key == x[y].key))"}]});
        if let Some(m) = list_max {
            list["maxItems"] = json!(m);
        }
        json!({"type": "object", "properties": {"value": list}})
    }

    #[test]
    fn bounded_rules_need_no_metering_and_others_do() {
        // Bounded: each evaluation and all of them together stay within the limits.
        assert!(within_runtime_limits(&nested(Some(10), Some(10), Some(10))));
        // Unbounded lists: a single evaluation could exceed the per-call limit.
        assert!(!within_runtime_limits(&nested(None, None, None)));
        // Within the per-call limit each time, but not when it runs on every item of a list
        // as long as a request can hold.
        let many = json!({"type": "array", "items": {"type": "string", "maxLength": 1000,
            "x-kubernetes-validations": [{"rule": "self.contains('abc')"}]}});
        assert!(!within_runtime_limits(&many));
        let few = json!({"type": "array", "maxItems": 100, "items": {"type": "string",
            "maxLength": 1000, "x-kubernetes-validations": [{"rule": "self.contains('abc')"}]}});
        assert!(within_runtime_limits(&few));
        // A messageExpression counts too (a concatenation of strings as long as a request
        // can hold, on each of 100 items).
        let message = json!({"type": "array", "maxItems": 100, "items": {"type": "string",
            "x-kubernetes-validations": [{"rule": "true", "messageExpression": "self + self"}]}});
        assert!(!within_runtime_limits(&message));
    }

    /// kube-apiserver's own cases (apiextensions-apiserver `TestValidateCustomResourceDefinitionValidation`).
    #[test]
    fn a_rule_nested_over_unbounded_lists_is_refused_and_bounded_ones_are_not() {
        let errors = estimated_cost_errors(&nested(None, None, None), PREFIX);
        let rule =
            "spec.validation.openAPIV3Schema.properties[value].x-kubernetes-validations[0].rule";
        let fields: Vec<&str> = errors.iter().map(|(f, _)| f.as_str()).collect();
        assert_eq!(fields, [rule, rule, PREFIX]);
        assert_eq!(errors[0].1, "Forbidden: estimated rule cost exceeds budget by factor of more than 100x (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)");
        assert_eq!(errors[1].1, "Forbidden: contributed to estimated rule cost total exceeding cost limit for entire OpenAPIv3 schema");
        assert_eq!(errors[2].1, "Forbidden: x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema exceeds budget by factor of more than 100x (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)");
        assert_eq!(
            estimated_cost_errors(&nested(None, None, Some(10)), PREFIX).len(),
            3
        );
        assert!(estimated_cost_errors(&nested(Some(10), Some(10), Some(10)), PREFIX).is_empty());
        let numbers = json!({"type": "object", "properties": {"value": {
            "type": "array", "maxItems": 4, "x-kubernetes-validations": [{"rule": "self.all(x, x.all(y, x[y].key == x[y].key))"}],
            "items": {"type": "object", "additionalProperties": {"type": "object",
                "required": ["key"], "properties": {"key": {"type": "number"}}}}}}});
        assert!(estimated_cost_errors(&numbers, PREFIX).is_empty());
    }

    #[test]
    fn rules_are_multiplied_by_how_often_they_can_run_and_summed() {
        let keyword = json!([{"rule": "self.contains('keyword')"}]);
        let schema = json!({"type": "object", "properties": {
            "list": {"type": "array", "maxItems": 100000, "items": {"type": "string",
                "maxLength": 5000, "x-kubernetes-validations": keyword}},
            "map": {"type": "object", "maxProperties": 1000, "additionalProperties": {
                "type": "string", "maxLength": 5000, "x-kubernetes-validations": keyword}},
            "field": {"type": "integer", "x-kubernetes-validations": [{"rule": "self > 50 && self < 100"}]}}});
        let errors = estimated_cost_errors(&schema, PREFIX);
        let list = "spec.validation.openAPIV3Schema.properties[list].items.x-kubernetes-validations[0].rule";
        let map = "spec.validation.openAPIV3Schema.properties[map].additionalProperties.x-kubernetes-validations[0].rule";
        let fields: Vec<&str> = errors.iter().map(|(f, _)| f.as_str()).collect();
        assert_eq!(fields, [list, list, map, PREFIX]);
        // 2,001 per string, 100,000 strings: 20x the rule limit.
        assert!(
            errors[0].1.contains("by factor of 20.0x"),
            "{}",
            errors[0].1
        );
        assert!(errors[3].1.contains("by factor of 2.0x"), "{}", errors[3].1);
    }

    #[test]
    fn a_typical_crds_rules_are_accepted() {
        let schema = json!({"type": "object", "properties": {"spec": {
        "type": "object",
        "x-kubernetes-validations": [
            {"rule": "self.minReplicas <= self.maxReplicas", "message": "min over max"},
            {"rule": "!has(self.endpoint) || isURL(self.endpoint)"},
            {"rule": "self.ports.all(p, p.port > 0 && p.port < 65536)"},
            {"rule": "self.ports.map(p, p.name).all(n, self.ports.exists_one(q, q.name == n))"},
        ],
        "properties": {
            "minReplicas": {"type": "integer"},
            "maxReplicas": {"type": "integer"},
            "endpoint": {"type": "string", "maxLength": 2048},
            "name": {"type": "string", "maxLength": 63, "x-kubernetes-validations": [
                {"rule": "!format.dns1123Label().validate(self).hasValue()",
                 "messageExpression": "self + ' is not a DNS label'"},
                {"rule": "self.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')"},
                {"rule": "self == oldSelf", "message": "immutable"}]},
            "ports": {"type": "array", "maxItems": 64, "items": {"type": "object",
                "required": ["name", "port"], "properties": {
                    "name": {"type": "string", "maxLength": 15},
                    "port": {"type": "integer"}}}},
            "labels": {"type": "object", "maxProperties": 64,
                "additionalProperties": {"type": "string", "maxLength": 63},
                "x-kubernetes-validations": [{"rule": "self.all(k, k.startsWith('example.com/') || !k.contains('/'))"}]},
            "tags": {"type": "array", "items": {"type": "string", "maxLength": 63,
                "x-kubernetes-validations": [{"rule": "self.size() > 0"}]}},
        }}}});
        assert_eq!(estimated_cost_errors(&schema, PREFIX), []);
        // Upstream knows nothing of the size of what `validate` finds wrong, so joining it
        // is estimated at the most a list of strings could hold: refused, as there.
        let mut joined = schema.clone();
        joined["properties"]["spec"]["properties"]["name"]["x-kubernetes-validations"][0]
            ["messageExpression"] =
            json!("format.dns1123Label().validate(self).value().join(', ')");
        let errors = estimated_cost_errors(&joined, PREFIX);
        assert_eq!(errors[0].0, "spec.validation.openAPIV3Schema.properties[spec].properties[name].x-kubernetes-validations[0].messageExpression");
        assert!(errors[0].1.starts_with("Forbidden: estimated messageExpression cost exceeds budget by factor of more than 100x"));
    }

    #[test]
    fn the_factor_is_worded_as_upstream_words_it() {
        let message = over_budget("estimated rule cost", 11_000_000, RULE_LIMIT);
        assert!(message.contains("by factor of 1.100000x"), "{message}");
        assert!(over_budget("x", 25_000_000, RULE_LIMIT).contains("of 2.5x"));
    }
}
