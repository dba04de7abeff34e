//! A Namespace's write: a new namespace gets its default objects (the `kube-root-ca.crt`
//! ConfigMap, the `default` ServiceAccount) as kube-controller-manager's controllers make them;
//! the system namespaces may not be deleted (NamespaceLifecycle), and a deleted one turns
//! Terminating while its content goes (the namespace controller's work). Through `finalize`
//! only `spec.finalizers` changes: the namespace controller releases a namespace so.

use super::KindStrategy;
use crate::context::Ctx;
use crate::namespaces;
use crate::status::ApiError;
use infrasim_store::{DeleteOutcome, StoredObject};
use serde_json::Value;
use std::sync::Arc;

pub(super) struct Namespace;

impl KindStrategy for Namespace {
    fn split_for_update(
        &self,
        ctx: &Ctx,
        subresource: Option<&str>,
        old: &Value,
        new: Value,
    ) -> Value {
        if subresource != Some("finalize") {
            return super::super::common::split_for_update(ctx, subresource, old, new);
        }
        let mut finalized = old.clone();
        finalized["spec"]["finalizers"] = new
            .pointer("/spec/finalizers")
            .cloned()
            .unwrap_or(Value::Array(Vec::new()));
        finalized
    }

    fn after_write(
        &self,
        ctx: &Ctx,
        stored: Arc<StoredObject>,
        created: bool,
    ) -> Arc<StoredObject> {
        if created {
            (ctx.state.hooks.namespace_created)(&ctx.state, &stored.meta.name);
        }
        stored
    }

    fn validate_delete(&self, _ctx: &Ctx, name: &str) -> Result<(), ApiError> {
        namespaces::check_deletable(name)
    }

    fn after_delete(&self, ctx: &Ctx, outcome: DeleteOutcome) -> DeleteOutcome {
        match outcome {
            DeleteOutcome::Pending(object) => {
                let name = object.meta.name.to_string();
                let marked = namespaces::mark_terminating(&ctx.state, &name);
                (ctx.state.hooks.namespace_terminating)(&ctx.state, &name);
                DeleteOutcome::Pending(marked.unwrap_or(object))
            }
            gone => gone,
        }
    }
}
