//! Rules Cluster API's webhooks share between kinds: the `v` prefix and semantic versions,
//! names that must be label values, int-or-percent fields, replicas from the autoscaler's
//! annotations, selectors that must select their template, and the machine naming template.

use super::field::{go_quote, FieldError};
use serde_json::{Map, Value};

/// The autoscaler's annotations Cluster API reads replicas from.
pub const MIN_SIZE: &str = "cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size";
pub const MAX_SIZE: &str = "cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size";
/// The annotation naming preflight checks a MachineSet skips.
pub const SKIP_PREFLIGHT: &str = "machineset.cluster.x-k8s.io/skip-preflight-checks";
const PREFLIGHT_CHECKS: [&str; 5] = [
    "All",
    "ControlPlaneIsStable",
    "ControlPlaneVersionSkew",
    "KubeadmVersionSkew",
    "KubernetesVersionSkew",
];

/// The object at `path` (made, as an empty object, where missing or not an object).
pub fn object_at<'a>(value: &'a mut Value, path: &[&str]) -> &'a mut Map<String, Value> {
    let mut cur = value;
    for seg in path {
        if !cur.get(*seg).is_some_and(Value::is_object) {
            cur[*seg] = Value::Object(Map::new());
        }
        cur = &mut cur[*seg];
    }
    match cur {
        Value::Object(m) => m,
        _ => unreachable!("made an object above"),
    }
}

/// The string at a JSON pointer, or "".
pub fn text<'a>(value: &'a Value, pointer: &str) -> &'a str {
    value.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

/// Prepends `v` to a version that lacks it; an empty version stays empty unless `always`
/// (the Cluster topology's and KubeadmControlPlane's version get it even then).
pub fn default_version(value: &mut Value, pointer: &str, always: bool) {
    let Some(v) = value.pointer_mut(pointer) else {
        if always {
            if let Some((parent, last)) = pointer.rsplit_once('/') {
                let segments: Vec<&str> = parent.split('/').filter(|s| !s.is_empty()).collect();
                object_at(value, &segments).insert(last.to_string(), Value::from("v"));
            }
        }
        return;
    };
    match v.as_str() {
        Some(s) if !s.starts_with('v') && (always || !s.is_empty()) => {
            *v = Value::String(format!("v{s}"));
        }
        None if always && v.is_null() => *v = Value::from("v"),
        _ => {}
    }
}

/// Whether `v` is a Kubernetes semantic version (`v1.31.0`, `v1.31.0-rc.1+build`).
pub fn is_kube_semver(v: &str) -> bool {
    let Some(rest) = v.strip_prefix('v') else {
        return false;
    };
    let mut parts = rest.splitn(3, '.');
    let (Some(major), Some(minor), Some(tail)) = (parts.next(), parts.next(), parts.next()) else {
        return false;
    };
    let number = |s: &str| {
        !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) && (s == "0" || !s.starts_with('0'))
    };
    let end = tail
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(tail.len());
    let (patch, suffix) = tail.split_at(end);
    number(major)
        && number(minor)
        && number(patch)
        && suffix
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.+".contains(c))
}

/// The `major.minor` of a semantic version.
pub fn minor_of(v: &str) -> Option<(u64, u64)> {
    let mut parts = v.trim_start_matches('v').split('.');
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

/// Why `value` is not a label value, as apimachinery says it (empty: it is one).
pub fn label_value_errors(value: &str) -> Vec<String> {
    let mut out = Vec::new();
    if value.len() > 63 {
        out.push("must be no more than 63 characters".to_string());
    }
    let bytes = value.as_bytes();
    let alnum = |b: u8| b.is_ascii_alphanumeric();
    let ok = value.is_empty()
        || (alnum(bytes[0])
            && alnum(bytes[bytes.len() - 1])
            && bytes
                .iter()
                .all(|&b| alnum(b) || b == b'-' || b == b'_' || b == b'.'));
    if !ok {
        out.push("a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')".to_string());
    }
    out
}

/// Checks an int-or-percent field at `pointer` (at field path `path`).
pub fn int_or_percent(object: &Value, pointer: &str, path: &str, errors: &mut Vec<FieldError>) {
    let Some(v) = object.pointer(pointer) else {
        return;
    };
    // The error of apimachinery's `GetScaledValueFromIntOrPercent`.
    let why = match v {
        Value::Number(n) if n.is_i64() => return,
        Value::String(s) => match s.strip_suffix('%') {
            None => "invalid value for IntOrString: invalid type: string is not a percentage"
                .to_string(),
            Some(n) if n.parse::<i64>().is_ok() => return,
            Some(n) => format!(
                "invalid value {}: strconv.Atoi: parsing {}: invalid syntax",
                go_quote(s),
                go_quote(n)
            ),
        },
        _ => return,
    };
    let shown = match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    errors.push(FieldError::invalid(
        path,
        Value::String(shown),
        format!("must be either an int or a percentage: {why}"),
    ));
}

/// Replicas as Cluster API's defaulting gives them (MachineDeployment, MachineSet,
/// MachinePool): what the object says; else, with both autoscaler annotations, the minimum
/// on create and the old value held within [min, max] on update; else 1. A malformed
/// annotation refuses the request (`what` names the kind in the message).
pub fn default_replicas(object: &mut Value, old: Option<&Value>, what: &str) -> Result<(), String> {
    if object
        .pointer("/spec/replicas")
        .is_some_and(|r| !r.is_null())
    {
        return Ok(());
    }
    let annotations = object.pointer("/metadata/annotations").cloned();
    let size = |key: &str| -> Result<Option<i64>, String> {
        let Some(raw) = annotations.as_ref().and_then(|a| a.get(key)) else {
            return Ok(None);
        };
        let raw = raw.as_str().unwrap_or("");
        raw.parse::<i32>().map(|n| Some(n as i64)).map_err(|_| {
            format!(
                "failed to caculate {what} replicas value: could not parse the value of the {} annotation: strconv.ParseInt: parsing {}: invalid syntax",
                go_quote(key),
                go_quote(raw)
            )
        })
    };
    let replicas = match (size(MIN_SIZE)?, size(MAX_SIZE)?) {
        (Some(min), Some(max)) => {
            match old
                .and_then(|o| o.pointer("/spec/replicas"))
                .and_then(Value::as_i64)
            {
                None => min,
                Some(r) if r < min => min,
                Some(r) if r > max => max,
                Some(r) => r,
            }
        }
        _ => 1,
    };
    object_at(object, &["spec"]).insert("replicas".into(), Value::from(replicas));
    Ok(())
}

/// A label selector as `labels.Selector.String()` prints it: requirements sorted by key.
pub fn selector_string(selector: &Value) -> String {
    let mut parts: Vec<(String, String)> = Vec::new();
    if let Some(m) = selector.get("matchLabels").and_then(Value::as_object) {
        for (k, v) in m {
            parts.push((k.clone(), format!("{k}={}", v.as_str().unwrap_or(""))));
        }
    }
    for e in selector
        .get("matchExpressions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let key = e["key"].as_str().unwrap_or("").to_string();
        let mut values: Vec<&str> = e["values"]
            .as_array()
            .map(|v| v.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        values.sort_unstable();
        let text = match e["operator"].as_str().unwrap_or("") {
            "In" => format!("{key} in ({})", values.join(",")),
            "NotIn" => format!("{key} notin ({})", values.join(",")),
            "Exists" => key.clone(),
            "DoesNotExist" => format!("!{key}"),
            op => format!("{key} {op}"),
        };
        parts.push((key, text));
    }
    parts.sort();
    parts
        .into_iter()
        .map(|(_, t)| t)
        .collect::<Vec<_>>()
        .join(",")
}

/// Whether `selector` selects `labels` (a missing selector selects nothing, as
/// `metav1.LabelSelectorAsSelector` of an empty selector selects everything: callers check
/// emptiness themselves).
pub fn selects(selector: &Value, labels: Option<&Map<String, Value>>) -> bool {
    let label = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
    let equal = selector
        .get("matchLabels")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .all(|(k, v)| label(k) == v.as_str());
    let expressions = selector
        .get("matchExpressions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .all(|e| {
            let key = e["key"].as_str().unwrap_or("");
            let in_values = |v: Option<&str>| {
                v.is_some_and(|v| {
                    e["values"]
                        .as_array()
                        .is_some_and(|vs| vs.iter().any(|x| x.as_str() == Some(v)))
                })
            };
            match e["operator"].as_str().unwrap_or("") {
                "In" => in_values(label(key)),
                "NotIn" => !in_values(label(key)),
                "Exists" => label(key).is_some(),
                "DoesNotExist" => label(key).is_none(),
                _ => false,
            }
        });
    equal && expressions
}

/// Whether a selector has neither matchLabels nor matchExpressions.
pub fn selector_is_empty(selector: Option<&Value>) -> bool {
    let empty = |k: &str| {
        selector.and_then(|s| s.get(k)).is_none_or(|v| {
            v.as_object().is_some_and(Map::is_empty)
                || v.as_array().is_some_and(Vec::is_empty)
                || v.is_null()
        })
    };
    empty("matchLabels") && empty("matchExpressions")
}

/// The machine naming template's rule (MachineDeployment, MachineSet, KubeadmControlPlane).
pub fn naming_template(object: &Value, pointer: &str, path: &str, errors: &mut Vec<FieldError>) {
    let template = text(object, pointer);
    if template.is_empty() {
        return;
    }
    if !template.contains("{{ .random }}") {
        errors.push(FieldError::invalid(
            path,
            Value::from(template),
            "invalid template, {{ .random }} is missing",
        ));
    }
}

/// The skip-preflight-checks annotation's rule (MachineDeployment and MachineSet).
pub fn skip_preflight(object: &Value, errors: &mut Vec<FieldError>) {
    let Some(raw) = object
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(SKIP_PREFLIGHT))
        .and_then(Value::as_str)
    else {
        return;
    };
    let bad: Vec<&str> = raw
        .split(',')
        .map(str::trim)
        .filter(|c| !PREFLIGHT_CHECKS.contains(c))
        .collect();
    if !bad.is_empty() {
        let shown = format!(
            "[]string{{{}}}",
            bad.iter()
                .map(|b| go_quote(b))
                .collect::<Vec<_>>()
                .join(", ")
        );
        errors.push(FieldError::invalid_shown(
            format!("metadata.annotations.{SKIP_PREFLIGHT}"),
            shown,
            format!(
                "skipped preflight check(s) must be among: [{}]",
                PREFLIGHT_CHECKS.join(" ")
            ),
        ));
    }
}

/// `spec.clusterName` may not change.
pub fn cluster_name_immutable(object: &Value, old: Option<&Value>, errors: &mut Vec<FieldError>) {
    if let Some(old) = old {
        if text(old, "/spec/clusterName") != text(object, "/spec/clusterName") {
            errors.push(FieldError::forbidden(
                "spec.clusterName",
                "field is immutable",
            ));
        }
    }
}

/// Sets the `cluster.x-k8s.io/cluster-name` label to `spec.clusterName`.
pub fn label_cluster_name(object: &mut Value) {
    let cluster = text(object, "/spec/clusterName").to_string();
    object_at(object, &["metadata", "labels"]).insert(
        crate::capi::CLUSTER_NAME_LABEL.to_string(),
        Value::String(cluster),
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn versions_get_their_v_and_are_checked_as_kubernetes_does() {
        let mut o = json!({"spec": {"version": "1.31.0"}});
        default_version(&mut o, "/spec/version", false);
        assert_eq!(o["spec"]["version"], "v1.31.0");
        let mut empty = json!({"spec": {}});
        default_version(&mut empty, "/spec/version", true);
        assert_eq!(empty["spec"]["version"], "v");
        assert!(is_kube_semver("v1.31.0") && is_kube_semver("v1.31.0-rc.1+abc"));
        assert!(
            !is_kube_semver("v1.31") && !is_kube_semver("1.31.0") && !is_kube_semver("v01.2.3")
        );
    }

    #[test]
    fn replicas_follow_the_autoscaler_annotations() {
        let annotated = |replicas: Option<i64>| {
            let mut o =
                json!({"metadata": {"annotations": {MIN_SIZE: "2", MAX_SIZE: "5"}}, "spec": {}});
            if let Some(r) = replicas {
                o["spec"]["replicas"] = json!(r);
            }
            o
        };
        let mut created = annotated(None);
        default_replicas(&mut created, None, "MachineDeployment").unwrap();
        assert_eq!(created["spec"]["replicas"], 2);
        let mut updated = annotated(None);
        default_replicas(&mut updated, Some(&annotated(Some(9))), "MachineDeployment").unwrap();
        assert_eq!(updated["spec"]["replicas"], 5, "held under the maximum");
        let mut plain = json!({"spec": {}});
        default_replicas(&mut plain, None, "MachineDeployment").unwrap();
        assert_eq!(plain["spec"]["replicas"], 1);
        let mut bad =
            json!({"metadata": {"annotations": {MIN_SIZE: "x", MAX_SIZE: "5"}}, "spec": {}});
        let err = default_replicas(&mut bad, None, "MachineDeployment").unwrap_err();
        assert!(
            err.starts_with("failed to caculate MachineDeployment replicas value"),
            "{err}"
        );
    }

    #[test]
    fn selectors_print_sorted_and_select_labels() {
        let s = json!({"matchLabels": {"b": "2", "a": "1"},
                       "matchExpressions": [{"key": "c", "operator": "In", "values": ["y", "x"]}]});
        assert_eq!(selector_string(&s), "a=1,b=2,c in (x,y)");
        let labels = json!({"a": "1", "b": "2", "c": "x"});
        assert!(selects(&s, labels.as_object()));
        assert!(!selects(&s, json!({"a": "1"}).as_object()));
        assert!(selector_is_empty(Some(&json!({"matchLabels": {}}))));
    }

    #[test]
    fn names_that_are_not_label_values_are_named() {
        assert!(label_value_errors("md-0").is_empty());
        assert_eq!(label_value_errors("-x").len(), 1);
        assert_eq!(label_value_errors(&"a".repeat(64)).len(), 1);
    }

    #[test]
    fn int_or_percent_values_are_refused_with_the_parse_error() {
        let mut errors = Vec::new();
        let o = json!({"a": "10%", "b": 1, "c": "ten", "d": "x%"});
        for f in ["a", "b", "c", "d"] {
            int_or_percent(&o, &format!("/{f}"), f, &mut errors);
        }
        let paths: Vec<&str> = errors.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(paths, ["c", "d"]);
        assert!(errors[0]
            .detail
            .starts_with("must be either an int or a percentage"));
    }
}
