//! The ValidatingAdmissionPolicy status controller of kube-apiserver, run after each write
//! of a policy: once its generation is newer than `status.observedGeneration`, the policy's
//! validations are type-checked against the kinds it matches and the status records the
//! generation observed and the warnings (`typeChecking.expressionWarnings`, absent when
//! there are none). Only the status changes, so the policy's spec and generation stay.

use super::typecheck::expression_warnings;
use crate::object::derive;
use crate::state::State;
use infrasim_store::{ObjectKey, StoreError};
use serde_json::{json, Value};

/// Writes the status of the policy `name`, if its spec changed since the last one.
pub(crate) fn reconcile(state: &State, name: &str) {
    // A concurrent write moves the resourceVersion: read again and retry, a few times.
    for _ in 0..8 {
        let Some(current) = state
            .group
            .get(super::policy::POLICIES, &ObjectKey::new("", name))
        else {
            return;
        };
        let Ok(mut policy) = current.to_value() else {
            return;
        };
        let generation = policy["metadata"]["generation"].as_i64().unwrap_or(0);
        let observed = policy["status"]["observedGeneration"].as_i64().unwrap_or(0);
        if generation <= observed {
            return;
        }
        let warnings = expression_warnings(state, &policy);
        let mut type_checking = json!({});
        if !warnings.is_empty() {
            type_checking["expressionWarnings"] = Value::Array(warnings);
        }
        // Conditions are no business of this controller; whatever is there stays.
        if !policy["status"].is_object() {
            policy["status"] = json!({});
        }
        policy["status"]["observedGeneration"] = json!(generation);
        policy["status"]["typeChecking"] = type_checking;
        let derived = derive("ValidatingAdmissionPolicy", &policy);
        let expected = Some(current.meta.resource_version);
        match state
            .group
            .update(super::policy::POLICIES, policy, derived, expected)
        {
            Err(StoreError::Conflict { .. }) => continue,
            Err(e) => {
                tracing::warn!(policy = name, error = %e, "could not write a policy's status");
                return;
            }
            Ok(_) => return,
        }
    }
}
