//! A ClusterClass's `spec.patches`, checked as Cluster API's ClusterClass webhook checks
//! them before any Cluster is patched: names present and unique, inline definitions or an
//! external extension (never both, and external ones only with the RuntimeSDK feature,
//! which the stand-in does not offer), each JSON patch an `add`/`replace`/`remove` under
//! `/spec` whose value comes from exactly one of `value` and `valueFrom`, a `valueFrom`
//! variable the class defines (or one of the builtins), and selectors that match one of the
//! class's templates; `enabledIf` and every `valueFrom.template` must parse as Go templates
//! (with sprig's functions, as [`infrasim_gotemplate`] knows them).

use super::field::{go_quote, FieldError};
use infrasim_kube_api::validation::is_qualified_name;
use serde_json::{json, Value};
use std::collections::HashSet;

/// The name a patch may not take: upstream reserves it for variables defined inline.
const INLINE: &str = "inline";

/// The errors of every patch of `class`.
pub fn check(class: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let mut names = HashSet::new();
    let patches = class.pointer("/spec/patches").and_then(Value::as_array);
    for (i, patch) in patches.into_iter().flatten().enumerate() {
        let path = format!("spec.patches[{i}]");
        let name = patch["name"].as_str().unwrap_or("");
        name_errors(name, &names, &path, &mut errors);
        if let Some(enabled_if) = patch["enabledIf"].as_str().filter(|s| !s.is_empty()) {
            template_error(
                "enabledIf",
                enabled_if,
                &format!("{path}.enabledIf"),
                &mut errors,
            );
        }
        definitions(patch, class, &path, &mut errors);
        names.insert(name.to_string());
    }
    errors
}

fn name_errors(name: &str, seen: &HashSet<String>, path: &str, errors: &mut Vec<FieldError>) {
    let at = format!("{path}.name");
    if name.is_empty() {
        errors.push(FieldError::required(&at, "patch name must be defined"));
    }
    if name == INLINE {
        errors.push(FieldError::required(
            &at,
            format!(
                "{} can not be used as the name of a patch",
                go_quote(INLINE)
            ),
        ));
    }
    if seen.contains(name) {
        errors.push(FieldError::invalid(
            &at,
            json!(name),
            format!(
                "patch names must be unique. Patch with name {} is defined more than once",
                go_quote(name)
            ),
        ));
    }
}

/// Go's `json.MarshalIndent(v, "", "  ")`, which upstream prints a patch or selector with.
fn pretty(v: &Value) -> String {
    serde_json::to_string_pretty(v).unwrap_or_default()
}

fn definitions(patch: &Value, class: &Value, path: &str, errors: &mut Vec<FieldError>) {
    let defined = patch.get("definitions").filter(|d| !d.is_null());
    let external = patch.get("external").filter(|d| !d.is_null());
    match (defined, external) {
        (None, None) => errors.push(FieldError::required(
            path,
            "one of definitions or external must be defined",
        )),
        (Some(_), Some(_)) => errors.push(FieldError::invalid_shown(
            path,
            go_quote(&pretty(patch)),
            "only one of definitions or external can be defined",
        )),
        _ => {}
    }
    let list = defined.and_then(Value::as_array);
    for (i, definition) in list.into_iter().flatten().enumerate() {
        let at = format!("{path}.definitions[{i}]");
        let patches = definition.get("jsonPatches").and_then(Value::as_array);
        for (j, p) in patches.into_iter().flatten().enumerate() {
            json_patch(p, class, &format!("{at}.jsonPatches[{j}]"), errors);
        }
        let selector = definition.get("selector").cloned().unwrap_or(json!({}));
        selectors(&selector, class, &format!("{at}.selector"), errors);
    }
    if let Some(external) = external {
        errors.push(FieldError::forbidden(
            format!("{path}.external"),
            "patch.external can be used only if the RuntimeSDK feature flag is enabled",
        ));
        let text = |k: &str| external.get(k).and_then(Value::as_str).unwrap_or("");
        if text("validateTopologyExtension").is_empty()
            && text("generatePatchesExtension").is_empty()
        {
            errors.push(FieldError::invalid_shown(
                format!("{path}.external"),
                go_quote(&pretty(external)),
                "one of validateTopologyExtension and generatePatchesExtension must be defined",
            ));
        }
    }
}

/// One JSON patch of a definition.
fn json_patch(patch: &Value, class: &Value, path: &str, errors: &mut Vec<FieldError>) {
    let op = patch["op"].as_str().unwrap_or("");
    let target = patch["path"].as_str().unwrap_or("");
    let shown = go_quote(&pretty(patch));
    if !matches!(op, "add" | "replace" | "remove") {
        errors.push(FieldError::worded(
            format!("{path}.op"),
            format!(
                "Unsupported value: {shown}: supported values: \"add\", \"remove\", \"replace\""
            ),
        ));
    }
    if !target.starts_with("/spec") {
        errors.push(FieldError::invalid_shown(
            format!("{path}.path"),
            shown.clone(),
            "jsonPatch path must start with \"/spec\"",
        ));
    }
    index_access(op, target, &format!("{path}.path"), errors);
    if op != "add" && op != "replace" {
        return;
    }
    let value = patch.get("value").filter(|v| !v.is_null());
    let from = patch.get("valueFrom").filter(|v| !v.is_null());
    match (value, from) {
        (None, None) => errors.push(FieldError::invalid_shown(
            path,
            shown,
            "jsonPatch must define one of value or valueFrom",
        )),
        (Some(_), Some(_)) => errors.push(FieldError::invalid_shown(
            path,
            shown,
            "jsonPatch can not define both value and valueFrom",
        )),
        _ => {}
    }
    if let Some(from) = from {
        value_from(from, class, &format!("{path}.valueFrom"), errors);
    }
}

/// Array elements: an `add` may only prepend (`0`) or append (`-`); a `replace` or
/// `remove` may not address an element at all, as the list's order is not the class's.
fn index_access(op: &str, target: &str, path: &str, errors: &mut Vec<FieldError>) {
    for part in target.split('/') {
        // Go's strconv.Atoi: an optional sign, then digits.
        let digits = part.strip_prefix(['+', '-']).unwrap_or(part);
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let zero = digits.bytes().all(|b| b == b'0');
        if op == "add" && !zero {
            errors.push(FieldError::invalid(
                path,
                json!(target),
                "arrays can only be accessed using \"0\" (prepend) or \"-\" (append)",
            ));
        }
        if op == "replace" || op == "remove" {
            errors.push(FieldError::invalid(
                path,
                json!(target),
                format!("elements in arrays can not be accessed in a {op} operation"),
            ));
        }
    }
}

fn value_from(from: &Value, class: &Value, path: &str, errors: &mut Vec<FieldError>) {
    let template = from["template"].as_str().unwrap_or("");
    let variable = from["variable"].as_str().unwrap_or("");
    let shown = go_quote(&pretty(from));
    if template.is_empty() && variable.is_empty() {
        errors.push(FieldError::invalid_shown(
            path,
            shown.clone(),
            "valueFrom must set either template or variable",
        ));
    }
    if !template.is_empty() && !variable.is_empty() {
        errors.push(FieldError::invalid_shown(
            path,
            shown,
            "valueFrom can not set both template and variable",
        ));
    }
    if !template.is_empty() {
        template_error(
            "valueFrom.template",
            template,
            &format!("{path}.template"),
            errors,
        );
    }
    if variable.is_empty() {
        return;
    }
    let at = format!("{path}.variable");
    if variable.starts_with("builtin.") {
        if !BUILTINS.contains(&variable) {
            errors.push(FieldError::invalid(
                at,
                json!(variable),
                "not a defined builtin variable",
            ));
        }
        return;
    }
    // The variable's own name: what comes before its first `.` or `[`.
    let name = variable.split(['.', '[']).find(|s| !s.is_empty());
    let defined = class
        .pointer("/spec/variables")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|v| Some(v["name"].as_str().unwrap_or("")) == name);
    if !defined {
        errors.push(FieldError::invalid(
            at,
            json!(variable),
            format!("variable with name {variable} cannot be found"),
        ));
    }
}

/// A template that does not parse, with the parser's words.
fn template_error(name: &str, template: &str, at: &str, errors: &mut Vec<FieldError>) {
    if let Err(e) = infrasim_gotemplate::Template::parse(name, template) {
        errors.push(FieldError::invalid(
            at,
            json!(template),
            format!("template can not be parsed: {e}"),
        ));
    }
}

/// The builtin variables a patch may read, as Cluster API v1.11 defines them.
const BUILTINS: &[&str] = &[
    "builtin",
    "builtin.cluster",
    "builtin.cluster.name",
    "builtin.cluster.namespace",
    "builtin.cluster.uid",
    "builtin.cluster.metadata.labels",
    "builtin.cluster.metadata.annotations",
    "builtin.cluster.topology",
    "builtin.cluster.topology.classRef.name",
    "builtin.cluster.topology.classRef.namespace",
    "builtin.cluster.topology.class",
    "builtin.cluster.topology.classNamespace",
    "builtin.cluster.topology.version",
    "builtin.cluster.network",
    "builtin.cluster.network.serviceDomain",
    "builtin.cluster.network.services",
    "builtin.cluster.network.pods",
    "builtin.controlPlane",
    "builtin.controlPlane.name",
    "builtin.controlPlane.replicas",
    "builtin.controlPlane.version",
    "builtin.controlPlane.metadata.labels",
    "builtin.controlPlane.metadata.annotations",
    "builtin.controlPlane.machineTemplate.infrastructureRef.name",
    "builtin.machineDeployment",
    "builtin.machineDeployment.class",
    "builtin.machineDeployment.name",
    "builtin.machineDeployment.replicas",
    "builtin.machineDeployment.topologyName",
    "builtin.machineDeployment.version",
    "builtin.machineDeployment.metadata.labels",
    "builtin.machineDeployment.metadata.annotations",
    "builtin.machineDeployment.bootstrap.configRef.name",
    "builtin.machineDeployment.infrastructureRef.name",
    "builtin.machinePool",
    "builtin.machinePool.class",
    "builtin.machinePool.name",
    "builtin.machinePool.replicas",
    "builtin.machinePool.topologyName",
    "builtin.machinePool.version",
    "builtin.machinePool.metadata.labels",
    "builtin.machinePool.metadata.annotations",
    "builtin.machinePool.bootstrap.configRef.name",
    "builtin.machinePool.infrastructureRef.name",
];

/// Does the selector's apiVersion and kind name the template at `pointer` of the class?
fn matches_template(selector: &Value, class: &Value, pointer: &str) -> bool {
    let r = class.pointer(pointer);
    let field = |v: Option<&Value>, k: &str| {
        v.and_then(|v| v.get(k))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    field(Some(selector), "kind") == field(r, "kind")
        && field(Some(selector), "apiVersion") == field(r, "apiVersion")
}

/// A selector enables at least one target, and each target it enables matches a template.
fn selectors(selector: &Value, class: &Value, path: &str, errors: &mut Vec<FieldError>) {
    let flag = |k: &str| {
        selector
            .pointer(&format!("/matchResources/{k}"))
            .and_then(Value::as_bool)
            .unwrap_or(false)
    };
    let names = |k: &str| -> Vec<String> {
        selector
            .pointer(&format!("/matchResources/{k}/names"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|n| n.as_str().unwrap_or("").to_string())
            .collect()
    };
    let (md_names, mp_names) = (names("machineDeploymentClass"), names("machinePoolClass"));
    if !flag("infrastructureCluster")
        && !flag("controlPlane")
        && md_names.is_empty()
        && mp_names.is_empty()
    {
        errors.push(FieldError::invalid_shown(
            path,
            go_quote(&pretty(selector)),
            "no selector enabled",
        ));
        return;
    }
    if flag("infrastructureCluster")
        && !matches_template(selector, class, "/spec/infrastructure/templateRef")
    {
        errors.push(FieldError::invalid(
            format!("{path}.matchResources.infrastructureCluster"),
            json!(true),
            "selector is enabled but does not match the infrastructure ref",
        ));
    }
    if flag("controlPlane")
        && !matches_template(selector, class, "/spec/controlPlane/templateRef")
        && !(class
            .pointer("/spec/controlPlane/machineInfrastructure/templateRef")
            .is_some()
            && matches_template(
                selector,
                class,
                "/spec/controlPlane/machineInfrastructure/templateRef",
            ))
    {
        errors.push(FieldError::invalid(
            format!("{path}.matchResources.controlPlane"),
            json!(true),
            "selector is enabled but matches neither the controlPlane ref nor the controlPlane machineInfrastructure ref",
        ));
    }
    worker_names(
        selector,
        class,
        path,
        "machineDeploymentClass",
        &md_names,
        errors,
    );
    worker_names(selector, class, path, "machinePoolClass", &mp_names, errors);
}

/// The worker classes a selector names (`*` may open or close a name) each match a class
/// whose bootstrap or infrastructure template the selector's kind names.
fn worker_names(
    selector: &Value,
    class: &Value,
    path: &str,
    resource: &str,
    names: &[String],
    errors: &mut Vec<FieldError>,
) {
    let list = match resource {
        "machineDeploymentClass" => "machineDeployments",
        _ => "machinePools",
    };
    let workers: Vec<Value> = class
        .pointer(&format!("/spec/workers/{list}"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for (i, name) in names.iter().enumerate() {
        let at = format!("{path}.matchResources.{resource}.names[{i}]");
        if let Some(e) = selector_name_error(name, &at) {
            errors.push(e);
            break;
        }
        let matched = workers.iter().enumerate().any(|(w, worker)| {
            let class_name = worker["class"].as_str().unwrap_or("");
            let named = name == class_name
                || name == "*"
                || name
                    .strip_prefix('*')
                    .is_some_and(|s| class_name.ends_with(s))
                || name
                    .strip_suffix('*')
                    .is_some_and(|s| class_name.starts_with(s));
            named
                && ["infrastructure", "bootstrap"].iter().any(|part| {
                    let pointer = format!("/spec/workers/{list}/{w}/{part}/templateRef");
                    matches_template(selector, class, &pointer)
                })
        });
        if !matched {
            let what = match resource {
                "machineDeploymentClass" => "MachineDeployment",
                _ => "MachinePool",
            };
            errors.push(FieldError::invalid(
                at,
                json!(name),
                format!("selector is enabled but matches neither the bootstrap ref nor the infrastructure ref of a {what} class"),
            ));
        }
    }
}

/// A name with a wildcard has one `*`, at its start or end, and is otherwise a qualified
/// name.
fn selector_name_error(name: &str, at: &str) -> Option<FieldError> {
    if !name.contains('*') {
        return None;
    }
    let detail = if name.matches('*').count() > 1 {
        "selector can at most contain a single \"*\" rune"
    } else if !name.starts_with('*') && !name.ends_with('*') {
        "\"*\" rune can only appear at the beginning, or ending of the selector"
    } else if !is_qualified_name(&name.replace('*', "a")) {
        "selector does not comply with the Kubernetes naming standards"
    } else {
        return None;
    };
    Some(FieldError::invalid(at, json!(name), detail))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(patches: Value) -> Value {
        json!({"spec": {
            "infrastructure": {"templateRef": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "DevClusterTemplate", "name": "c"}},
            "controlPlane": {"templateRef": {"apiVersion": "controlplane.cluster.x-k8s.io/v1beta2", "kind": "KubeadmControlPlaneTemplate", "name": "cp"}},
            "workers": {"machineDeployments": [{"class": "default-worker",
                "bootstrap": {"templateRef": {"apiVersion": "bootstrap.cluster.x-k8s.io/v1beta2", "kind": "KubeadmConfigTemplate", "name": "b"}},
                "infrastructure": {"templateRef": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "DevMachineTemplate", "name": "m"}}}]},
            "variables": [{"name": "imageRepository", "required": true, "schema": {"openAPIV3Schema": {"type": "string"}}}],
            "patches": patches,
        }})
    }

    fn texts(class: &Value) -> Vec<String> {
        check(class).iter().map(|e| e.to_string()).collect()
    }

    fn kcp_selector() -> Value {
        json!({"apiVersion": "controlplane.cluster.x-k8s.io/v1beta2", "kind": "KubeadmControlPlaneTemplate",
               "matchResources": {"controlPlane": true}})
    }

    #[test]
    fn a_class_like_upstreams_in_memory_one_passes() {
        let c = class(
            json!([{"name": "image", "definitions": [{"selector": kcp_selector(),
            "jsonPatches": [{"op": "add", "path": "/spec/template/spec/kubeadmConfigSpec/clusterConfiguration/imageRepository",
                             "valueFrom": {"variable": "imageRepository"}},
                            {"op": "add", "path": "/spec/template/spec/kubeadmConfigSpec/files/-",
                             "valueFrom": {"variable": "builtin.controlPlane.version"}}]}]},
            {"name": "workers", "definitions": [{"selector": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
                "kind": "DevMachineTemplate", "matchResources": {"machineDeploymentClass": {"names": ["default-*"]}}},
                "jsonPatches": [{"op": "replace", "path": "/spec/template/spec/x", "value": 1}]}]}]),
        );
        assert_eq!(texts(&c), Vec::<String>::new());
    }

    #[test]
    fn names_and_definitions_are_refused_as_upstream_words_them() {
        let c = class(json!([
            {"name": "", "definitions": []},
            {"name": "inline", "external": {"generatePatchesExtension": "x"}},
            {"name": "inline"},
        ]));
        assert_eq!(texts(&c), [
            "spec.patches[0].name: Required value: patch name must be defined",
            "spec.patches[1].name: Required value: \"inline\" can not be used as the name of a patch",
            "spec.patches[1].external: Forbidden: patch.external can be used only if the RuntimeSDK feature flag is enabled",
            "spec.patches[2].name: Required value: \"inline\" can not be used as the name of a patch",
            "spec.patches[2].name: Invalid value: \"inline\": patch names must be unique. Patch with name \"inline\" is defined more than once",
            "spec.patches[2]: Required value: one of definitions or external must be defined",
        ]);
    }

    #[test]
    fn json_patches_are_checked_op_path_value_and_variable() {
        let c = class(
            json!([{"name": "p", "definitions": [{"selector": kcp_selector(), "jsonPatches": [
                {"op": "move", "path": "/status/x"},
                {"op": "add", "path": "/spec/list/3", "value": 1, "valueFrom": {"variable": "imageRepository"}},
                {"op": "replace", "path": "/spec/x", "valueFrom": {}},
                {"op": "add", "path": "/spec/y", "valueFrom": {"variable": "missing.field"}},
                {"op": "add", "path": "/spec/z", "valueFrom": {"variable": "builtin.cluster.bogus"}},
                {"op": "remove", "path": "/spec/list/0"},
            ]}]}]),
        );
        let t = texts(&c);
        let at = "spec.patches[0].definitions[0].jsonPatches";
        assert!(
            t[0].starts_with(&format!(
                "{at}[0].op: Unsupported value: \"{{\\n  \\\"op\\\": \\\"move\\\""
            )),
            "{t:?}"
        );
        assert!(t[0].ends_with("supported values: \"add\", \"remove\", \"replace\""));
        assert!(t[1].starts_with(&format!("{at}[0].path: Invalid value: ")));
        assert!(t[1].ends_with("jsonPatch path must start with \"/spec\""));
        assert_eq!(t[2], format!("{at}[1].path: Invalid value: \"/spec/list/3\": arrays can only be accessed using \"0\" (prepend) or \"-\" (append)"));
        assert!(t[3].ends_with("jsonPatch can not define both value and valueFrom"));
        assert!(t[4].starts_with(&format!("{at}[2].valueFrom: Invalid value: \"{{}}\"")));
        assert!(t[4].ends_with("valueFrom must set either template or variable"));
        assert_eq!(t[5], format!("{at}[3].valueFrom.variable: Invalid value: \"missing.field\": variable with name missing.field cannot be found"));
        assert_eq!(t[6], format!("{at}[4].valueFrom.variable: Invalid value: \"builtin.cluster.bogus\": not a defined builtin variable"));
        assert_eq!(t[7], format!("{at}[5].path: Invalid value: \"/spec/list/0\": elements in arrays can not be accessed in a remove operation"));
        assert_eq!(t.len(), 8);
    }

    #[test]
    fn selectors_must_enable_something_that_matches_a_template() {
        let c = class(json!([{"name": "p", "definitions": [
            {"selector": {"apiVersion": "v1", "kind": "X", "matchResources": {}}, "jsonPatches": []},
            {"selector": {"apiVersion": "v1", "kind": "X", "matchResources": {"infrastructureCluster": true, "controlPlane": true}}, "jsonPatches": []},
            {"selector": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "DevMachineTemplate",
                "matchResources": {"machineDeploymentClass": {"names": ["other", "a*b*"]}}}, "jsonPatches": []},
        ]}]));
        let t = texts(&c);
        let at = "spec.patches[0].definitions";
        assert!(
            t[0].starts_with(&format!("{at}[0].selector: Invalid value: "))
                && t[0].ends_with("no selector enabled"),
            "{t:?}"
        );
        assert_eq!(t[1], format!("{at}[1].selector.matchResources.infrastructureCluster: Invalid value: true: selector is enabled but does not match the infrastructure ref"));
        assert!(t[2].ends_with(
            "matches neither the controlPlane ref nor the controlPlane machineInfrastructure ref"
        ));
        assert_eq!(t[3], format!("{at}[2].selector.matchResources.machineDeploymentClass.names[0]: Invalid value: \"other\": selector is enabled but matches neither the bootstrap ref nor the infrastructure ref of a MachineDeployment class"));
        assert_eq!(t[4], format!("{at}[2].selector.matchResources.machineDeploymentClass.names[1]: Invalid value: \"a*b*\": selector can at most contain a single \"*\" rune"));
        assert_eq!(t.len(), 5);
    }
}
