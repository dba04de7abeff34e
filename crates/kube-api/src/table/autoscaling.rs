//! Printers of the `autoscaling` group's HorizontalPodAutoscaler and of `metrics.k8s.io`'s
//! NodeMetrics and PodMetrics (whose columns metrics-server gives: the usage, then Window).

use super::*;

pub(super) const HORIZONTAL_POD_AUTOSCALER: Printer = Printer {
    kinds: &["HorizontalPodAutoscaler"],
    columns: &[
        NAME,
        Column("Reference", "string", 0),
        Column("Targets", "string", 0),
        Column("MinPods", "string", 0),
        Column("MaxPods", "integer", 0),
        Column("Replicas", "integer", 0),
        AGE,
    ],
    cells: horizontal_pod_autoscaler,
};

fn horizontal_pod_autoscaler(v: &Value, now: DateTime<Utc>) -> Vec<Value> {
    // A v1 HPA's targets are read from the v2 form it is stored as.
    let v2;
    let v = if v.get("apiVersion").and_then(Value::as_str) == Some("autoscaling/v1") {
        v2 = crate::hpa_versions::to_v2(v.clone());
        &v2
    } else {
        v
    };
    let min = v
        .at("/spec/minReplicas")
        .and_then(Value::as_i64)
        .map_or_else(|| "<unset>".to_string(), |m| m.to_string());
    vec![
        json!(s(v, "metadata.name")),
        json!(format!(
            "{}/{}",
            s(v, "spec.scaleTargetRef.kind"),
            s(v, "spec.scaleTargetRef.name")
        )),
        json!(hpa_targets(v)),
        json!(min),
        json!(n(v, "spec.maxReplicas")),
        json!(n(v, "status.currentReplicas")),
        age(v, now),
    ]
}

/// The Targets column: each metric's current value against its target, at most two
/// (`cpu: 45%/50%, memory: <unknown>/512Mi + 1 more...`), as kube-apiserver's printer
/// writes them.
fn hpa_targets(v: &Value) -> String {
    let specs = v
        .at("/spec/metrics")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if specs.is_empty() {
        return "<none>".into();
    }
    let statuses = v
        .at("/status/currentMetrics")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let listed: Vec<String> = specs
        .iter()
        .enumerate()
        .map(|(i, spec)| hpa_target(spec, statuses.get(i)))
        .collect();
    let shown = listed
        .iter()
        .take(2)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    match listed.len() {
        0..=2 => shown,
        n => format!("{shown} + {} more...", n - 2),
    }
}

fn hpa_target(spec: &Value, status: Option<&Value>) -> String {
    let ty = spec.get("type").and_then(Value::as_str).unwrap_or("");
    // The spec's and the status' members are named after the type, lower camel case.
    let member = match ty {
        "Resource" => "resource",
        "ContainerResource" => "containerResource",
        "Pods" => "pods",
        "Object" => "object",
        "External" => "external",
        _ => return "<unknown type>".into(),
    };
    let target = &spec[member]["target"];
    let current = status.map(|s| &s[member]["current"]);
    let text = |v: Option<&Value>| match v {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        _ => "<unknown>".into(),
    };
    let average = target.get("averageValue");
    let (now, goal, suffix) = match (ty, average) {
        ("Resource" | "ContainerResource", None) => (
            current
                .and_then(|c| c.get("averageUtilization"))
                .and_then(Value::as_i64)
                .map_or_else(|| "<unknown>".to_string(), |u| format!("{u}%")),
            target
                .get("averageUtilization")
                .and_then(Value::as_i64)
                .map_or_else(|| "<auto>".to_string(), |u| format!("{u}%")),
            "",
        ),
        ("Resource" | "ContainerResource" | "Pods", Some(a)) => (
            text(current.and_then(|c| c.get("averageValue"))),
            text(Some(a)),
            "",
        ),
        (_, Some(a)) => (
            text(current.and_then(|c| c.get("averageValue"))),
            text(Some(a)),
            " (avg)",
        ),
        (_, None) => (
            text(current.and_then(|c| c.get("value"))),
            text(target.get("value")),
            "",
        ),
    };
    match ty {
        "Resource" | "ContainerResource" => {
            format!(
                "{}: {now}/{goal}",
                spec[member]["name"].as_str().unwrap_or("")
            )
        }
        _ => format!("{now}/{goal}{suffix}"),
    }
}

pub(super) const RESOURCE_METRICS: Printer = Printer {
    kinds: &["NodeMetrics", "PodMetrics"],
    columns: &[
        NAME,
        Column("cpu", "string", 0),
        Column("memory", "string", 0),
        Column("Window", "string", 0),
    ],
    cells: resource_metrics,
};

/// A NodeMetrics' or PodMetrics' cells under metrics-server's columns (Name, cpu, memory,
/// Window), a pod's usage summed over its containers.
fn resource_metrics(v: &Value, _now: DateTime<Utc>) -> Vec<Value> {
    let usages: Vec<&Value> = match v.get("containers").and_then(Value::as_array) {
        Some(containers) => containers.iter().filter_map(|c| c.get("usage")).collect(),
        None => v.get("usage").into_iter().collect(),
    };
    let total = |name: &str| -> f64 {
        usages
            .iter()
            .filter_map(|u| u.get(name))
            .map(crate::quantity::value)
            .sum()
    };
    vec![
        json!(s(v, "metadata.name")),
        json!(crate::quantity::nanocores(total("cpu"))),
        json!(crate::quantity::kibibytes(total("memory"))),
        v.get("window").cloned().unwrap_or(Value::Null),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_read_as_kubectl_shows_them() {
        let hpa = json!({
            "spec": {"metrics": [
                {"type": "Resource", "resource": {"name": "cpu",
                    "target": {"type": "Utilization", "averageUtilization": 50}}},
                {"type": "Resource", "resource": {"name": "memory",
                    "target": {"type": "AverageValue", "averageValue": "512Mi"}}},
                {"type": "Pods", "pods": {"metric": {"name": "qps"},
                    "target": {"type": "AverageValue", "averageValue": "10"}}},
            ]},
            "status": {"currentMetrics": [
                {"type": "Resource", "resource": {"name": "cpu",
                    "current": {"averageUtilization": 45, "averageValue": "45m"}}},
            ]},
        });
        assert_eq!(
            hpa_targets(&hpa),
            "cpu: 45%/50%, memory: <unknown>/512Mi + 1 more..."
        );
        assert_eq!(hpa_targets(&json!({"spec": {}})), "<none>");
        let v1 = json!({"apiVersion": "autoscaling/v1", "metadata": {"name": "web"},
            "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web"},
                     "maxReplicas": 3, "targetCPUUtilizationPercentage": 60},
            "status": {"currentCPUUtilizationPercentage": 12}});
        let now = chrono::Utc::now();
        assert_eq!(
            horizontal_pod_autoscaler(&v1, now)[2],
            json!("cpu: 12%/60%")
        );
    }
}
