//! One inline patch turned into JSON patches per template, as upstream's inline generator
//! does: a definition applies to the templates its selector matches (apiVersion, kind and
//! `matchResources`), the patch to none while its `enabledIf` does not render `true`, and
//! each JSON patch's value comes from `value`, a variable (by path) or a Go template
//! rendered with the variables and read as YAML.

use super::variables::{self, Variables};
use super::{Holder, Item};
use infrasim_gotemplate::Template;
use serde_json::{json, Value};

/// The JSON patches `patch` makes, by index into `items`; every item's error is collected
/// first, so one message names them all.
pub fn generate(
    patch: &Value,
    global: &Variables,
    items: &[Item],
) -> Result<Vec<(usize, Vec<Value>)>, String> {
    let definitions = patch
        .get("definitions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let enabled_if = patch.get("enabledIf").and_then(Value::as_str).unwrap_or("");
    let mut out = Vec::new();
    let mut errors = Vec::new();
    for (index, item) in items.iter().enumerate() {
        let matching: Vec<&Value> = definitions
            .iter()
            .filter(|d| matches(item, d.get("selector").unwrap_or(&Value::Null)))
            .collect();
        if matching.is_empty() {
            continue;
        }
        let kind = item.template["kind"].as_str().unwrap_or("");
        let vars = variables::merge(global, &item.variables);
        match enabled(enabled_if, &vars) {
            Ok(true) => {}
            Ok(false) => continue,
            Err(e) => {
                errors.push(format!(
                    "failed to calculate if patch is enabled for {kind:?}: {e}"
                ));
                continue;
            }
        }
        for definition in matching {
            match json_patches(definition, &vars) {
                Ok(ops) => out.push((index, ops)),
                Err(e) => errors.push(format!("failed to generate JSON patches for {kind:?}: {e}")),
            }
        }
    }
    match errors.len() {
        0 => Ok(out),
        1 => Err(errors.remove(0)),
        // Kubernetes' error aggregate prints a list.
        _ => Err(format!("[{}]", errors.join(", "))),
    }
}

/// Whether `selector` picks `item`.
fn matches(item: &Item, selector: &Value) -> bool {
    if item.template["apiVersion"] != selector["apiVersion"]
        || item.template["kind"] != selector["kind"]
    {
        return false;
    }
    let resources = &selector["matchResources"];
    let flag = |name: &str| resources[name].as_bool().unwrap_or(false);
    match &item.holder {
        Holder::InfrastructureCluster => flag("infrastructureCluster"),
        Holder::ControlPlane | Holder::ControlPlaneMachines => flag("controlPlane"),
        Holder::DeploymentBootstrap(_) | Holder::DeploymentInfrastructure(_) => {
            let class = item
                .variables
                .get(variables::BUILTIN)
                .and_then(|b| b.pointer("/machineDeployment/class"))
                .and_then(Value::as_str);
            let names = resources
                .pointer("/machineDeploymentClass/names")
                .and_then(Value::as_array);
            match (class, names) {
                (Some(class), Some(names)) => names
                    .iter()
                    .filter_map(Value::as_str)
                    .any(|n| name_matches(n, class)),
                _ => false,
            }
        }
    }
}

/// A MachineDeploymentClass name in a selector: `*`, an exact name, or a name with a
/// leading or trailing `*`.
fn name_matches(pattern: &str, class: &str) -> bool {
    if pattern == "*" || pattern == class {
        return true;
    }
    if let Some(suffix) = pattern.strip_prefix('*') {
        if class.ends_with(suffix) {
            return true;
        }
    }
    pattern
        .strip_suffix('*')
        .is_some_and(|prefix| class.starts_with(prefix))
}

/// A patch with no `enabledIf` is enabled; otherwise when the template renders `true`.
fn enabled(enabled_if: &str, vars: &Variables) -> Result<bool, String> {
    if enabled_if.is_empty() {
        return Ok(true);
    }
    let value = render(enabled_if, vars)
        .map_err(|e| format!("failed to calculate value for enabledIf: {e}"))?;
    Ok(value == Value::Bool(true))
}

fn json_patches(definition: &Value, vars: &Variables) -> Result<Vec<Value>, String> {
    let mut ops = Vec::new();
    for patch in definition
        .get("jsonPatches")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let op = patch["op"].as_str().unwrap_or("");
        let mut out = json!({"op": op, "path": patch["path"]});
        if op == "add" || op == "replace" {
            out["value"] = value(patch, vars)?;
        }
        ops.push(out);
    }
    Ok(ops)
}

/// A JSON patch's value.
fn value(patch: &Value, vars: &Variables) -> Result<Value, String> {
    let raw = patch.get("value").filter(|v| !v.is_null());
    let from = patch.get("valueFrom").filter(|v| !v.is_null());
    let variable = from
        .and_then(|f| f.get("variable"))
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty());
    let template = from
        .and_then(|f| f.get("template"))
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty());
    match (raw, from, variable, template) {
        (None, None, ..) => {
            Err("failed to calculate value: neither .value nor .valueFrom are set".into())
        }
        (Some(_), Some(_), ..) => {
            Err("failed to calculate value: both .value and .valueFrom are set".into())
        }
        (Some(v), None, ..) => Ok(v.clone()),
        (None, Some(_), None, None) => Err(
            "failed to calculate value: .valueFrom is set, but neither .valueFrom.variable nor .valueFrom.template are set".into(),
        ),
        (None, Some(_), Some(_), Some(_)) => Err(
            "failed to calculate value: .valueFrom is set, but both .valueFrom.variable and .valueFrom.template are set".into(),
        ),
        (None, Some(_), Some(path), None) => variables::lookup(vars, path)
            .map_err(|e| format!("failed to calculate value: {e}")),
        (None, Some(_), None, Some(template)) => {
            render(template, vars).map_err(|e| format!("failed to calculate value for template: {e}"))
        }
    }
}

/// Renders `template` with the variables as its data and reads the result as YAML (which
/// JSON is too), as upstream does.
fn render(template: &str, vars: &Variables) -> Result<Value, String> {
    let parsed = Template::parse("tpl", template)
        .map_err(|e| format!("failed to parse template: {template:?}: {e}"))?;
    let text = parsed
        .execute(&Value::Object(vars.clone()))
        .map_err(|e| format!("failed to render template: {template:?}: {e}"))?;
    if text.trim().is_empty() {
        return Ok(Value::Null);
    }
    serde_yaml::from_str::<Value>(&text)
        .map_err(|e| format!("failed to unmarshal rendered template: {text:?}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn class_names_match_exactly_or_by_a_leading_or_trailing_star() {
        assert!(name_matches("*", "default-worker"));
        assert!(name_matches("default-worker", "default-worker"));
        assert!(name_matches("*-worker", "default-worker"));
        assert!(name_matches("default-*", "default-worker"));
        assert!(!name_matches("other", "default-worker"));
        assert!(!name_matches("*-cp", "default-worker"));
    }

    #[test]
    fn value_needs_exactly_one_source() {
        let vars = Variables::new();
        assert!(value(&json!({"op": "add"}), &vars)
            .unwrap_err()
            .contains("neither .value nor .valueFrom"));
        assert!(
            value(&json!({"value": 1, "valueFrom": {"variable": "x"}}), &vars)
                .unwrap_err()
                .contains("both .value and .valueFrom")
        );
        assert!(value(&json!({"valueFrom": {}}), &vars)
            .unwrap_err()
            .contains("neither .valueFrom.variable nor .valueFrom.template"));
        assert_eq!(
            value(&json!({"value": {"a": 1}}), &vars),
            Ok(json!({"a": 1}))
        );
    }
}
