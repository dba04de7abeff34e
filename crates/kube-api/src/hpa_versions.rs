//! One set of HorizontalPodAutoscalers served in two shapes, as kube-apiserver serves them:
//! stored as `autoscaling/v2`, served also as `autoscaling/v1` (what `kubectl autoscale`
//! writes), each request converted on the way in and every answer on the way out.
//!
//! v1 knows one metric, the CPU's utilization (`spec.targetCPUUtilizationPercentage`,
//! `status.currentCPUUtilizationPercentage`). What v2 holds beyond it travels in v1 as
//! annotations, under the keys kube-apiserver's conversion uses
//! (`autoscaling.alpha.kubernetes.io/metrics`, `/behavior`, `/conditions`,
//! `/current-metrics`), so a v1 client's update keeps what a v2 client set. Their values here
//! are v2's own JSON (kube-apiserver writes older shapes there), read back only by this
//! conversion.

use crate::values::At;
use serde_json::{json, Map, Value};

const METRICS: &str = "autoscaling.alpha.kubernetes.io/metrics";
const BEHAVIOR: &str = "autoscaling.alpha.kubernetes.io/behavior";
const CONDITIONS: &str = "autoscaling.alpha.kubernetes.io/conditions";
const CURRENT_METRICS: &str = "autoscaling.alpha.kubernetes.io/current-metrics";

/// Whether `metric` is the one v1 has a field for: the CPU's average utilization.
fn is_cpu_utilization(metric: &Value) -> bool {
    metric["type"] == "Resource"
        && metric.at("/resource/name").and_then(Value::as_str) == Some("cpu")
        && metric.at("/resource/target/type").and_then(Value::as_str) == Some("Utilization")
}

/// A v1 HPA as the v2 one it is stored as.
pub(crate) fn to_v2(mut hpa: Value) -> Value {
    let mut annotations = take_annotations(&mut hpa);
    let mut read = |key: &str| {
        annotations.remove(key).and_then(|v| {
            v.as_str()
                .and_then(|s| serde_json::from_str::<Value>(s).ok())
        })
    };
    let others = read(METRICS);
    let behavior = read(BEHAVIOR);
    let conditions = read(CONDITIONS);
    let current_others = read(CURRENT_METRICS);
    if let Some(spec) = hpa.get_mut("spec").and_then(Value::as_object_mut) {
        let cpu = spec.remove("targetCPUUtilizationPercentage");
        let mut metrics = Vec::new();
        if let Some(cpu) = &cpu {
            metrics.push(json!({"type": "Resource", "resource": {"name": "cpu",
                "target": {"type": "Utilization", "averageUtilization": cpu}}}));
        }
        metrics.extend(
            others
                .as_ref()
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default(),
        );
        if !metrics.is_empty() {
            spec.insert("metrics".into(), json!(metrics));
        }
        if let Some(behavior) = behavior {
            spec.insert("behavior".into(), behavior);
        }
    }
    if let Some(status) = hpa.get_mut("status").and_then(Value::as_object_mut) {
        let cpu = status.remove("currentCPUUtilizationPercentage");
        let mut current = Vec::new();
        if let Some(cpu) = cpu {
            current.push(json!({"type": "Resource", "resource": {"name": "cpu",
                "current": {"averageUtilization": cpu}}}));
        }
        current.extend(
            current_others
                .and_then(|v| v.as_array().cloned())
                .unwrap_or_default(),
        );
        if !current.is_empty() {
            status.insert("currentMetrics".into(), json!(current));
        }
        if let Some(conditions) = conditions {
            status.insert("conditions".into(), conditions);
        }
    }
    put_annotations(&mut hpa, annotations);
    hpa["apiVersion"] = json!("autoscaling/v2");
    hpa
}

/// A stored v2 HPA as v1 serves it.
pub(crate) fn to_v1(mut hpa: Value) -> Value {
    let mut annotations = take_annotations(&mut hpa);
    let mut keep = |key: &str, value: Value| {
        annotations.insert(key.into(), json!(value.to_string()));
    };
    if let Some(spec) = hpa.get_mut("spec").and_then(Value::as_object_mut) {
        let metrics = spec
            .remove("metrics")
            .and_then(|m| m.as_array().cloned())
            .unwrap_or_default();
        let (cpu, others): (Vec<Value>, Vec<Value>) =
            metrics.into_iter().partition(is_cpu_utilization);
        if let Some(target) = cpu
            .first()
            .and_then(|m| m.at("/resource/target/averageUtilization"))
        {
            spec.insert("targetCPUUtilizationPercentage".into(), target.clone());
        }
        if !others.is_empty() {
            keep(METRICS, json!(others));
        }
        if let Some(behavior) = spec.remove("behavior") {
            keep(BEHAVIOR, behavior);
        }
    }
    if let Some(status) = hpa.get_mut("status").and_then(Value::as_object_mut) {
        let current = status
            .remove("currentMetrics")
            .and_then(|m| m.as_array().cloned())
            .unwrap_or_default();
        let (cpu, others): (Vec<Value>, Vec<Value>) = current.into_iter().partition(|m| {
            m["type"] == "Resource" && m.at("/resource/name").and_then(Value::as_str) == Some("cpu")
        });
        if let Some(used) = cpu
            .first()
            .and_then(|m| m.at("/resource/current/averageUtilization"))
        {
            status.insert("currentCPUUtilizationPercentage".into(), used.clone());
        }
        if !others.is_empty() {
            keep(CURRENT_METRICS, json!(others));
        }
        if let Some(conditions) = status.remove("conditions") {
            keep(CONDITIONS, conditions);
        }
    }
    put_annotations(&mut hpa, annotations);
    hpa["apiVersion"] = json!("autoscaling/v1");
    hpa
}

/// Field selectors name the same fields in both versions.
pub(crate) fn field_label(label: &str) -> Option<String> {
    Some(label.to_string())
}

fn take_annotations(hpa: &mut Value) -> Map<String, Value> {
    hpa.get_mut("metadata")
        .and_then(Value::as_object_mut)
        .and_then(|m| m.remove("annotations"))
        .and_then(|a| match a {
            Value::Object(a) => Some(a),
            _ => None,
        })
        .unwrap_or_default()
}

fn put_annotations(hpa: &mut Value, annotations: Map<String, Value>) {
    if annotations.is_empty() {
        return;
    }
    if let Some(meta) = hpa.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.insert("annotations".into(), Value::Object(annotations));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v1_and_v2_convert_both_ways_and_keep_what_v1_cannot_say() {
        let v2 = json!({
            "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "web", "annotations": {"team": "a"}},
            "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web"},
                     "minReplicas": 1, "maxReplicas": 4,
                     "metrics": [
                         {"type": "Resource", "resource": {"name": "cpu",
                             "target": {"type": "Utilization", "averageUtilization": 50}}},
                         {"type": "Resource", "resource": {"name": "memory",
                             "target": {"type": "AverageValue", "averageValue": "100Mi"}}}],
                     "behavior": {"scaleDown": {"stabilizationWindowSeconds": 0}}},
            "status": {"currentReplicas": 2, "desiredReplicas": 2,
                       "currentMetrics": [{"type": "Resource", "resource": {"name": "cpu",
                           "current": {"averageUtilization": 31, "averageValue": "31m"}}}],
                       "conditions": [{"type": "AbleToScale", "status": "True"}]},
        });
        let v1 = to_v1(v2.clone());
        assert_eq!(v1["apiVersion"], "autoscaling/v1");
        assert_eq!(v1["spec"]["targetCPUUtilizationPercentage"], 50);
        assert_eq!(v1["status"]["currentCPUUtilizationPercentage"], 31);
        assert!(v1["spec"].get("metrics").is_none());
        assert_eq!(v1["metadata"]["annotations"]["team"], "a");
        let back = to_v2(v1);
        assert_eq!(back["spec"], v2["spec"]);
        assert_eq!(back["status"]["conditions"], v2["status"]["conditions"]);
        assert_eq!(back["metadata"]["annotations"], json!({"team": "a"}));
        // v1 keeps only the utilization of the CPU's current figures.
        assert_eq!(
            back["status"]["currentMetrics"][0]["resource"]["current"],
            json!({"averageUtilization": 31})
        );
    }

    #[test]
    fn a_v1_hpa_without_a_target_has_no_metric_until_defaulted() {
        let v1 = json!({"apiVersion": "autoscaling/v1", "metadata": {"name": "x"},
                        "spec": {"maxReplicas": 3}});
        let v2 = to_v2(v1);
        assert!(v2["spec"].get("metrics").is_none());
        assert_eq!(v2["apiVersion"], "autoscaling/v2");
    }
}
