//! A Secret's write: a service-account token Secret must name its account (kube-apiserver's
//! validation), and once written the tokens controller fills it (see
//! `controllers::tokens`).

use super::KindStrategy;
use crate::context::Ctx;
use crate::sa_tokens::{TOKEN_SECRET_ACCOUNT as ACCOUNT_NAME, TOKEN_SECRET_TYPE};
use crate::status::ApiError;
use crate::write::common::refuse;
use infrasim_store::StoredObject;
use serde_json::Value;
use std::sync::Arc;

pub(super) struct Secret;

impl KindStrategy for Secret {
    fn validate(&self, ctx: &Ctx, _subresource: Option<&str>, new: &Value) -> Result<(), ApiError> {
        let named = new["metadata"]["annotations"][ACCOUNT_NAME]
            .as_str()
            .is_some_and(|n| !n.is_empty());
        if new["type"] != TOKEN_SECRET_TYPE || named {
            return Ok(());
        }
        let field = format!("metadata.annotations[{ACCOUNT_NAME}]");
        refuse(ctx, new, vec![(field, "Required value".into())])
    }

    fn after_write(
        &self,
        ctx: &Ctx,
        stored: Arc<StoredObject>,
        _created: bool,
    ) -> Arc<StoredObject> {
        // `type` is a selectable field of Secrets, kept beside the object: no decoding.
        if stored.field("type") == Some(TOKEN_SECRET_TYPE) {
            let meta = &stored.meta;
            (ctx.state.hooks.token_secret_written)(&ctx.state, &meta.namespace, &meta.name);
        }
        stored
    }
}

pub(super) struct ServiceAccount;

impl KindStrategy for ServiceAccount {
    fn after_write(
        &self,
        ctx: &Ctx,
        stored: Arc<StoredObject>,
        created: bool,
    ) -> Arc<StoredObject> {
        if created {
            let meta = &stored.meta;
            (ctx.state.hooks.service_account_created)(&ctx.state, &meta.namespace, &meta.name);
        }
        stored
    }
}
