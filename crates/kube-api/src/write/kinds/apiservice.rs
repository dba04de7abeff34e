//! An APIService's write: its status is the availability controller's verdict, given at
//! once on every write through the main resource; its spec has rules of its own.

use super::KindStrategy;
use crate::apiservices;
use crate::context::Ctx;
use crate::status::ApiError;
use crate::write::common::refuse;
use serde_json::Value;

pub(super) struct ApiService;

impl KindStrategy for ApiService {
    fn prepare_for_create(&self, ctx: &Ctx, new: &mut Value) {
        apiservices::set_status(&ctx.state, new);
    }

    fn prepare_for_update(&self, ctx: &Ctx, subresource: Option<&str>, new: &mut Value) {
        // Through `status` the writer is the controller itself: its verdict stands.
        if subresource != Some("status") {
            apiservices::set_status(&ctx.state, new);
        }
    }

    fn validate(&self, ctx: &Ctx, _subresource: Option<&str>, new: &Value) -> Result<(), ApiError> {
        refuse(ctx, new, apiservices::validate(new))
    }
}
