//! A CustomResourceDefinition's write: a finalizer that removes its objects when it goes,
//! its own rules and warnings for its spec, its resource registered (served, its status
//! written) once stored, and its objects removed once its deletion starts.

use super::{reread, KindStrategy};
use crate::context::Ctx;
use crate::crd;
use crate::object::name_of;
use crate::status::ApiError;
use infrasim_store::{DeleteOutcome, StoredObject};
use serde_json::Value;
use std::sync::Arc;

pub(super) struct CustomResourceDefinition;

impl KindStrategy for CustomResourceDefinition {
    fn prepare_for_create(&self, _ctx: &Ctx, new: &mut Value) {
        crd::add_finalizer(new);
    }

    /// The spec's rules; a write through `status` (the registration's own) leaves the spec
    /// as stored, so there is nothing to check.
    fn validate(&self, _ctx: &Ctx, subresource: Option<&str>, new: &Value) -> Result<(), ApiError> {
        if subresource == Some("status") {
            return Ok(());
        }
        let causes = crd::validate(new);
        if causes.is_empty() {
            return Ok(());
        }
        Err(crd::invalid(&name_of(new), causes))
    }

    /// The rules in its schemas this server cannot enforce.
    fn warnings(&self, _ctx: &Ctx, subresource: Option<&str>, new: &Value) -> Vec<String> {
        if subresource == Some("status") {
            return Vec::new();
        }
        crd::warnings(new)
    }

    fn after_write(
        &self,
        ctx: &Ctx,
        stored: Arc<StoredObject>,
        _created: bool,
    ) -> Arc<StoredObject> {
        // Registering writes the CRD's status (Established, accepted names).
        (ctx.state.hooks.crd_written)(&ctx.state, &stored.meta.name);
        reread(ctx, stored)
    }

    /// A CRD held by its finalizer: its objects are deleted, then the finalizer goes.
    fn after_delete(&self, ctx: &Ctx, outcome: DeleteOutcome) -> DeleteOutcome {
        if let DeleteOutcome::Pending(object) = &outcome {
            (ctx.state.hooks.crd_deleting)(&ctx.state, &object.meta.name);
        }
        outcome
    }
}
