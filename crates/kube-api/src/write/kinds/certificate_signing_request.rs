//! A CertificateSigningRequest's write: the requester recorded on create, a spec that never
//! changes, an update split three ways (main resource, `approval`, `status`) and checked as
//! kube-apiserver's CertificateApproval and CertificateSigning admission plugins check it.

use super::KindStrategy;
use crate::context::Ctx;
use crate::csr::{self, Through};
use crate::object::name_of;
use crate::status::ApiError;
use crate::validation;
use crate::write::common::refuse;
use serde_json::Value;

pub(super) struct CertificateSigningRequest;

impl KindStrategy for CertificateSigningRequest {
    fn prepare_for_create(&self, ctx: &Ctx, new: &mut Value) {
        csr::prepare_for_create(&ctx.identity, new);
    }

    fn split_for_update(
        &self,
        ctx: &Ctx,
        subresource: Option<&str>,
        old: &Value,
        new: Value,
    ) -> Value {
        // The condition timestamps a client left out are the write's time.
        let now = infrasim_store::format_time(ctx.state.clock.now());
        csr::prepare_for_update(Through::of(subresource), old, new, &now)
    }

    fn validate(&self, ctx: &Ctx, _subresource: Option<&str>, new: &Value) -> Result<(), ApiError> {
        refuse(ctx, new, csr::validate(new))
    }

    /// Its own rules (the spec is the stored one, so only the status can break them), then
    /// whether the writer may approve or sign for its signer.
    fn validate_update(
        &self,
        ctx: &Ctx,
        subresource: Option<&str>,
        old: &Value,
        new: &Value,
    ) -> Option<Result<(), ApiError>> {
        Some(validate_update(ctx, Through::of(subresource), old, new))
    }
}

fn validate_update(ctx: &Ctx, through: Through, old: &Value, new: &Value) -> Result<(), ApiError> {
    validation::validate(&ctx.info.kind, &ctx.info.group, new)?;
    refuse(ctx, new, csr::validate_update(through, old, new))?;
    csr::authorize(&ctx.state, &ctx.identity, through, old, new).map_err(|reason| {
        ApiError::forbidden(format!(
            "certificatesigningrequests.certificates.k8s.io {:?} is forbidden: {reason}",
            name_of(new)
        ))
    })
}
