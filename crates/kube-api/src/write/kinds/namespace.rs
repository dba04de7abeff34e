//! A Namespace's write: a new namespace gets its default objects (the `kube-root-ca.crt`
//! ConfigMap, the `default` ServiceAccount) as kube-controller-manager's controllers make them.

use super::KindStrategy;
use crate::context::Ctx;
use crate::namespaces;
use infrasim_store::StoredObject;
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
}
