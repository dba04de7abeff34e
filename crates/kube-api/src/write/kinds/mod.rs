//! The kinds whose writes do more than the common path, each with its strategy, as
//! kube-apiserver's registry gives every kind one (`pkg/registry/<group>/<resource>/strategy.go`).
//!
//! A kind's strategy is told the request's context and subresource at each hook of the write
//! path ([`super::Strategy`] runs the common steps and calls them); every hook's default is
//! the common path, so a kind writes only what differs. [`of`] finds the strategy of the
//! request's kind in one table.

mod apiservice;
mod certificate_signing_request;
mod custom_resource_definition;
mod horizontal_pod_autoscaler;
mod namespace;
mod node;
pub(crate) mod pod;
mod secret;
mod service;
mod validating_admission_policy;

use crate::context::Ctx;
use crate::status::ApiError;
use infrasim_store::{DeleteOutcome, StoredObject};
use serde_json::Value;
use std::sync::Arc;

/// What a kind does on a write beyond the common path. `subresource` is the request's
/// (`status`, `approval`, ...), `None` through the main resource.
pub(crate) trait KindStrategy: Sync {
    /// Whether a create stores the request's status. The status is the system's to write,
    /// so it goes, but for kinds whose creator is that system (a kubelet registers its Node
    /// with capacity and conditions).
    fn keeps_status_on_create(&self) -> bool {
        false
    }

    /// A new object made ready to store, after its status went and defaults were applied.
    fn prepare_for_create(&self, _ctx: &Ctx, _new: &mut Value) {}

    /// An updated object with what the write may not change taken from `old`: by default
    /// the spec/status split of the subresource (or the ephemeral containers' own).
    fn split_for_update(
        &self,
        ctx: &Ctx,
        subresource: Option<&str>,
        old: &Value,
        new: Value,
    ) -> Value {
        super::common::split_for_update(ctx, subresource, old, new)
    }

    /// An updated object made ready to store, after the split and defaults.
    fn prepare_for_update(&self, _ctx: &Ctx, _subresource: Option<&str>, _new: &mut Value) {}

    /// The kind's own checks of any object it stores, after the common ones (schema and
    /// the checks by kind and group). A refusal is usually [`super::common::refuse`]'s 422.
    fn validate(
        &self,
        _ctx: &Ctx,
        _subresource: Option<&str>,
        _new: &Value,
    ) -> Result<(), ApiError> {
        Ok(())
    }

    /// The checks of an update for a kind that replaces the common ones (the object's
    /// checks, then the change's by kind and group). `None`: the common checks.
    fn validate_update(
        &self,
        _ctx: &Ctx,
        _subresource: Option<&str>,
        _old: &Value,
        _new: &Value,
    ) -> Option<Result<(), ApiError>> {
        None
    }

    /// What the client should be warned of about `new`.
    fn warnings(&self, _ctx: &Ctx, _subresource: Option<&str>, _new: &Value) -> Vec<String> {
        Vec::new()
    }

    /// What follows a stored write (`created` for a create); the object as it stands after.
    fn after_write(
        &self,
        _ctx: &Ctx,
        stored: Arc<StoredObject>,
        _created: bool,
    ) -> Arc<StoredObject> {
        stored
    }

    /// Whether `name` may be deleted at all; checked before admission, so that a dry run
    /// is refused too (a system namespace may not go).
    fn validate_delete(&self, _ctx: &Ctx, _name: &str) -> Result<(), ApiError> {
        Ok(())
    }

    /// What follows a deletion the store accepted (not for a dry run); the outcome as the
    /// client should see it (a namespace marked Terminating).
    fn after_delete(&self, _ctx: &Ctx, outcome: DeleteOutcome) -> DeleteOutcome {
        outcome
    }
}

/// The common path and nothing else: every kind not in [`KINDS`].
struct Common;

impl KindStrategy for Common {}

/// The built-in kinds with a strategy of their own, by group and kind.
static KINDS: &[(&str, &str, &dyn KindStrategy)] = &[
    (
        "apiregistration.k8s.io",
        "APIService",
        &apiservice::ApiService,
    ),
    (
        "certificates.k8s.io",
        "CertificateSigningRequest",
        &certificate_signing_request::CertificateSigningRequest,
    ),
    (
        "apiextensions.k8s.io",
        "CustomResourceDefinition",
        &custom_resource_definition::CustomResourceDefinition,
    ),
    (
        "autoscaling",
        "HorizontalPodAutoscaler",
        &horizontal_pod_autoscaler::HorizontalPodAutoscaler,
    ),
    ("", "Namespace", &namespace::Namespace),
    ("", "Node", &node::Node),
    ("", "Pod", &pod::Pod),
    ("", "Secret", &secret::Secret),
    ("", "Service", &service::Service),
    ("", "ServiceAccount", &secret::ServiceAccount),
    (
        "admissionregistration.k8s.io",
        "ValidatingAdmissionPolicy",
        &validating_admission_policy::ValidatingAdmissionPolicy,
    ),
];

/// The strategy of a kind. Custom kinds never have a built-in's: a CRD whose kind happens to
/// be called `Pod` (or `Namespace`) is not one.
pub(crate) fn of(custom: bool, group: &str, kind: &str) -> &'static dyn KindStrategy {
    if custom {
        return &Common;
    }
    KINDS
        .iter()
        .find(|(g, k, _)| *g == group && *k == kind)
        .map_or(&Common, |(_, _, strategy)| *strategy)
}

/// The object as stored now: a write's follow-up (registering a CRD, type checking a policy)
/// writes its status, which the answer should show. The written object if it is gone.
fn reread(ctx: &Ctx, stored: Arc<StoredObject>) -> Arc<StoredObject> {
    ctx.state
        .group
        .get(&ctx.info.store_key, &stored.meta.key())
        .unwrap_or(stored)
}

#[cfg(test)]
mod tests {
    use super::of;

    // The strategies are zero-sized, so they are told apart by what they do, not by address.
    #[test]
    fn a_custom_kind_never_gets_a_builtins_strategy() {
        assert!(of(false, "", "Node").keeps_status_on_create());
        // A CRD whose kind is called Node, and a Node kind of another group, are not Nodes.
        assert!(!of(true, "", "Node").keeps_status_on_create());
        assert!(!of(true, "example.com", "Node").keeps_status_on_create());
        assert!(!of(false, "example.com", "Node").keeps_status_on_create());
    }
}
