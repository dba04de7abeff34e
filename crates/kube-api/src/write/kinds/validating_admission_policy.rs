//! A ValidatingAdmissionPolicy's write: its expressions type checked and the result written to
//! its status once stored, which kube-apiserver's status controller does soon after.

use super::{reread, KindStrategy};
use crate::admission;
use crate::context::Ctx;
use infrasim_store::StoredObject;
use std::sync::Arc;

pub(super) struct ValidatingAdmissionPolicy;

impl KindStrategy for ValidatingAdmissionPolicy {
    fn after_write(
        &self,
        ctx: &Ctx,
        stored: Arc<StoredObject>,
        _created: bool,
    ) -> Arc<StoredObject> {
        // Done at once rather than soon after, so the answer shows the verdict.
        admission::after_policy_write(&ctx.state, &stored.meta.name);
        reread(ctx, stored)
    }
}
