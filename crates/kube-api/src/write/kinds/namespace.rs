//! A Namespace's write: a new namespace gets its default objects (the `kube-root-ca.crt`
//! ConfigMap, the `default` ServiceAccount) as kube-controller-manager's controllers make them;
//! the system namespaces may not be deleted (NamespaceLifecycle), and a deleted one turns
//! Terminating while its content goes (the namespace controller's work).

use super::KindStrategy;
use crate::context::Ctx;
use crate::namespaces;
use crate::status::ApiError;
use infrasim_store::{DeleteOutcome, StoredObject};
use std::sync::Arc;

pub(super) struct Namespace;

impl KindStrategy for Namespace {
    fn after_write(
        &self,
        ctx: &Ctx,
        stored: Arc<StoredObject>,
        created: bool,
    ) -> Arc<StoredObject> {
        if created {
            namespaces::populate(&ctx.state, &stored.meta.name);
        }
        stored
    }

    fn validate_delete(&self, _ctx: &Ctx, name: &str) -> Result<(), ApiError> {
        namespaces::check_deletable(name)
    }

    fn after_delete(&self, ctx: &Ctx, outcome: DeleteOutcome) -> DeleteOutcome {
        match outcome {
            DeleteOutcome::Pending(object) => {
                let marked = namespaces::begin_termination(&ctx.state, &object.meta.name);
                DeleteOutcome::Pending(marked.unwrap_or(object))
            }
            gone => gone,
        }
    }
}
