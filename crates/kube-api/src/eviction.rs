//! The `pods/eviction` subresource, through which `kubectl drain` and Cluster API's Machine
//! controller remove pods: a delete that first asks the pod's PodDisruptionBudget, and answers
//! 429 when the budget allows no disruption (the drainer then retries).
//!
//! The budget is computed from the pods themselves at the time of the request (expected pods
//! match the selector, healthy ones are Ready), so eviction is right whether or not anything
//! maintains the budgets' status.

use crate::codec::decode_body;
use crate::context::Ctx;
use crate::http::{status_response, HandlerResult};
use crate::status::ApiError;
use crate::values::{condition_true, int_or_percent, string_map, At};
use crate::verbs::delete::options_from;
use crate::write::delete::{self, Deletion};
use infrasim_store::ReadAt;
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// What a PodDisruptionBudget allows right now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    /// Pods the budget covers.
    pub expected: i64,
    /// Of those, the Ready ones.
    pub healthy: i64,
    /// How many must stay healthy.
    pub desired: i64,
}

impl Budget {
    /// How many pods may be disrupted now.
    pub fn allowed(&self) -> i64 {
        (self.healthy - self.desired).max(0)
    }
}

/// Whether a `metav1.LabelSelector` selects `pod_labels`. An empty selector selects every pod
/// of the namespace (policy/v1 semantics); a malformed one selects none.
pub fn selects(selector: Option<&Value>, pod_labels: &BTreeMap<String, String>) -> bool {
    let Some(selector) = selector else {
        return false;
    };
    crate::selectors::LabelSelector::from_api(selector).is_some_and(|s| s.matches(pod_labels))
}

/// The budget `pdb` sets over `pods` (the pods of its namespace).
pub fn budget(pdb: &Value, pods: &[Value]) -> Budget {
    let selector = pdb.at("/spec/selector");
    let covered: Vec<&Value> = pods
        .iter()
        .filter(|p| p.at("/metadata/deletionTimestamp").is_none())
        .filter(|p| selects(selector, &string_map(p.at("/metadata/labels"))))
        .collect();
    let expected = covered.len() as i64;
    let healthy = covered
        .iter()
        .filter(|p| condition_true(p, "Ready"))
        .count() as i64;
    let desired = match (pdb.at("/spec/minAvailable"), pdb.at("/spec/maxUnavailable")) {
        (Some(min), _) => int_or_percent(Some(min), expected, true).unwrap_or(0),
        (None, Some(max)) => {
            (expected - int_or_percent(Some(max), expected, true).unwrap_or(0)).max(0)
        }
        (None, None) => 0,
    };
    Budget {
        expected,
        healthy,
        desired,
    }
}

/// POST `pods/<name>/eviction`: the budget's say, then the pod's delete through the delete
/// path with the eviction's `deleteOptions`.
pub(crate) async fn evict(ctx: &Ctx, body: &[u8]) -> HandlerResult {
    let name = ctx.path.name.as_deref().unwrap_or("");
    let eviction = if body.iter().all(u8::is_ascii_whitespace) {
        json!({})
    } else {
        decode_body(ctx, body)?
    };
    if let Some(other) = eviction.at("/metadata/name").and_then(Value::as_str) {
        if other != name {
            return Err(ApiError::bad_request(format!(
                "name in URL does not match name in Eviction object: {name} != {other}"
            )));
        }
    }
    let (pod, pod_value) = ctx.stored()?;
    let phase = pod_value
        .at("/status/phase")
        .and_then(Value::as_str)
        .unwrap_or("");
    // A pod that is finished, not yet running or already going disrupts nothing.
    let exempt = matches!(phase, "Succeeded" | "Failed" | "Pending")
        || pod.meta.deletion_timestamp.is_some();
    if !exempt {
        check_budget(ctx, &pod_value)?;
    }
    let no_options = json!({});
    let delete_options = eviction.get("deleteOptions").unwrap_or(&no_options);
    let dry = ctx.query.get("dryRun") == Some("All")
        || delete_options
            .get("dryRun")
            .and_then(Value::as_array)
            .is_some_and(|a| a.iter().any(|v| v.as_str() == Some("All")));
    let deletion = Deletion {
        key: ctx.key(),
        options: options_from(ctx, delete_options)?,
        dry,
        admit: false,
    };
    delete::remove(ctx, deletion).await?;
    Ok(status_response(
        201,
        &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}),
    ))
}

/// The 429 an eviction gets when the one PodDisruptionBudget over the pod allows no
/// disruption now (a Ready pod needs a healthy pod to spare; an unhealthy one may go while
/// the budget holds, the `IfHealthyBudget` policy).
fn check_budget(ctx: &Ctx, pod: &Value) -> Result<(), ApiError> {
    let namespace = ctx.namespace();
    let of_namespace = |resource: &str| -> Vec<Value> {
        ctx.state
            .group
            .snapshot(resource, ReadAt::Latest)
            .map(|s| {
                s.objects
                    .iter()
                    .filter(|(k, _)| &*k.namespace == namespace)
                    .filter_map(|(_, o)| o.to_value().ok())
                    .collect()
            })
            .unwrap_or_default()
    };
    let pod_labels = string_map(pod.at("/metadata/labels"));
    let pdbs: Vec<Value> = of_namespace("poddisruptionbudgets.policy")
        .into_iter()
        .filter(|pdb| selects(pdb.at("/spec/selector"), &pod_labels))
        .collect();
    if pdbs.len() > 1 {
        return Err(ApiError::internal(
            "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
        ));
    }
    let Some(pdb) = pdbs.first() else {
        return Ok(());
    };
    let b = budget(pdb, &of_namespace("pods"));
    let allowed = if condition_true(pod, "Ready") {
        b.allowed() > 0
    } else {
        b.healthy >= b.desired
    };
    if allowed {
        return Ok(());
    }
    let pdb_name = pdb
        .at("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    Err(ApiError::too_many_requests(
        "Cannot evict pod as it would violate the pod's disruption budget.",
    )
    .with_details(json!({"causes": [{
        "reason": "DisruptionBudget",
        "message": format!("The disruption budget {pdb_name} needs {} healthy pods and has {} currently", b.desired, b.healthy),
    }]})))
}
