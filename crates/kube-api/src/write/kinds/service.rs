//! A Service's write: the allocators' refusals (a node port or cluster IP another Service
//! holds), as kube-apiserver's Service REST storage gives them.

use super::KindStrategy;
use crate::context::Ctx;
use crate::defaults;
use crate::status::ApiError;
use crate::write::common::refuse;
use serde_json::Value;

pub(super) struct Service;

impl KindStrategy for Service {
    /// Through `status` the spec is the stored one, whose ports and IPs are its own already.
    fn validate(&self, ctx: &Ctx, subresource: Option<&str>, new: &Value) -> Result<(), ApiError> {
        if subresource == Some("status") {
            return Ok(());
        }
        refuse(
            ctx,
            new,
            defaults::service_allocation_errors(&ctx.state, new),
        )
    }
}
