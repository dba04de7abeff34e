//! A HorizontalPodAutoscaler's write: the checks of kube-apiserver's autoscaling validation
//! that a client can trip (a target to scale, replica bounds that make sense, positive
//! targets), in its words. Its defaults are in `crate::defaults`.

use super::KindStrategy;
use crate::context::Ctx;
use crate::status::ApiError;
use crate::values::At;
use crate::write::common::refuse;
use serde_json::Value;

pub(super) struct HorizontalPodAutoscaler;

impl KindStrategy for HorizontalPodAutoscaler {
    fn validate(&self, ctx: &Ctx, subresource: Option<&str>, new: &Value) -> Result<(), ApiError> {
        if subresource == Some("status") {
            return Ok(());
        }
        refuse(ctx, new, problems(new))
    }
}

/// Every (field, message) cause `hpa`'s spec gives.
fn problems(hpa: &Value) -> Vec<(String, String)> {
    let mut causes = Vec::new();
    for field in ["kind", "name"] {
        let given = hpa
            .at(&format!("/spec/scaleTargetRef/{field}"))
            .and_then(Value::as_str)
            .is_some_and(|s| !s.is_empty());
        if !given {
            causes.push((
                format!("spec.scaleTargetRef.{field}"),
                "Required value".into(),
            ));
        }
    }
    let min = hpa.at("/spec/minReplicas").and_then(Value::as_i64);
    let max = hpa
        .at("/spec/maxReplicas")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    if let Some(min) = min.filter(|m| *m < 1) {
        causes.push((
            "spec.minReplicas".into(),
            format!("Invalid value: {min}: must be greater than or equal to 1"),
        ));
    }
    if max < 1 {
        causes.push((
            "spec.maxReplicas".into(),
            format!("Invalid value: {max}: must be greater than 0"),
        ));
    } else if max < min.unwrap_or(1) {
        causes.push((
            "spec.maxReplicas".into(),
            format!("Invalid value: {max}: must be greater than or equal to `minReplicas`"),
        ));
    }
    let metrics = hpa.at("/spec/metrics").and_then(Value::as_array);
    for (i, metric) in metrics.into_iter().flatten().enumerate() {
        causes.extend(metric_problems(i, metric));
    }
    causes
}

/// A Resource or ContainerResource metric's target: a type, and a positive amount of it.
fn metric_problems(i: usize, metric: &Value) -> Vec<(String, String)> {
    let member = match metric.get("type").and_then(Value::as_str) {
        Some("Resource") => "resource",
        Some("ContainerResource") => "containerResource",
        _ => return Vec::new(),
    };
    let path = format!("spec.metrics[{i}].{member}");
    let Some(source) = metric.get(member) else {
        return vec![(
            path,
            "Required value: must populate information for the given metric source".into(),
        )];
    };
    let target = &source["target"];
    match target.get("type").and_then(Value::as_str) {
        Some("Utilization") => match target.get("averageUtilization").and_then(Value::as_i64) {
            Some(u) if u <= 0 => vec![(
                format!("{path}.target.averageUtilization"),
                format!("Invalid value: {u}: must be greater than 0"),
            )],
            Some(_) => Vec::new(),
            None => vec![(
                format!("{path}.target.averageUtilization"),
                "Required value: must set either a target raw value or a target utilization".into(),
            )],
        },
        Some("AverageValue") if target.get("averageValue").is_none() => vec![(
            format!("{path}.target.averageValue"),
            "Required value: must set either a target raw value or a target utilization".into(),
        )],
        Some("AverageValue") => Vec::new(),
        other => vec![(
            format!("{path}.target.type"),
            format!(
                "Unsupported value: \"{}\": supported values: \"Utilization\", \"AverageValue\"",
                other.unwrap_or("")
            ),
        )],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn bounds_and_targets_are_checked() {
        let ok = json!({"spec": {
            "scaleTargetRef": {"kind": "Deployment", "name": "web"},
            "minReplicas": 1, "maxReplicas": 5,
            "metrics": [{"type": "Resource", "resource": {"name": "cpu",
                "target": {"type": "Utilization", "averageUtilization": 50}}}],
        }});
        assert!(problems(&ok).is_empty());
        let bad = json!({"spec": {
            "scaleTargetRef": {"kind": "Deployment"},
            "minReplicas": 3, "maxReplicas": 2,
            "metrics": [{"type": "Resource", "resource": {"name": "cpu",
                "target": {"type": "Utilization", "averageUtilization": 0}}}],
        }});
        let fields: Vec<String> = problems(&bad).into_iter().map(|(f, _)| f).collect();
        assert_eq!(
            fields,
            [
                "spec.scaleTargetRef.name",
                "spec.maxReplicas",
                "spec.metrics[0].resource.target.averageUtilization"
            ]
        );
    }
}
