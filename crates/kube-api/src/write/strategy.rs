//! The common steps of a write, as kube-apiserver's generic registry store runs them around
//! a kind's strategy: preparing an object for create or update (the spec/status split,
//! defaults), validating a create or an update (a custom kind's schema and rules, the checks
//! by kind and group, the admissionregistration configurations'), and what follows a write.
//! At each step the request's kind has its say through its [`KindStrategy`]
//! (`write/kinds/`), which alone knows one kind from another.

use super::common::refuse;
use super::kinds::{self, KindStrategy};
use crate::context::Ctx;
use crate::status::ApiError;
use crate::{admission, defaults, ephemeral, validation};
use infrasim_store::StoredObject;
use serde_json::Value;
use std::sync::Arc;

/// The write behaviour of the request's kind.
pub(crate) struct Strategy<'a> {
    ctx: &'a Ctx,
    kind: &'static dyn KindStrategy,
}

impl<'a> Strategy<'a> {
    pub fn of(ctx: &'a Ctx) -> Self {
        let info = &ctx.info;
        let kind = kinds::of(info.custom, &info.group, &info.kind);
        Strategy { ctx, kind }
    }

    fn builtin(&self) -> bool {
        !self.ctx.info.custom
    }

    fn subresource(&self) -> Option<&'a str> {
        self.ctx.path.subresource.as_deref()
    }

    fn through_ephemeral(&self) -> bool {
        self.subresource() == Some("ephemeralcontainers")
    }

    fn through_status(&self) -> bool {
        self.subresource() == Some("status")
    }

    /// A new object as it will be stored: no status (the system's to write, unless the
    /// kind's creator is that system), defaults, then the kind's own preparation.
    pub fn prepare_for_create(&self, new: &mut Value) {
        if self.ctx.info.has_status && !self.kind.keeps_status_on_create() {
            if let Some(o) = new.as_object_mut() {
                o.remove("status");
            }
        }
        self.defaults(new);
        self.kind.prepare_for_create(self.ctx, new);
    }

    /// An updated object as it will be stored: what the write may not change taken from
    /// `old` (by default the spec/status split), defaults, then the kind's own preparation.
    pub fn prepare_for_update(&self, old: &Value, new: Value) -> Value {
        let sub = self.subresource();
        let mut new = self.kind.split_for_update(self.ctx, sub, old, new);
        self.defaults(&mut new);
        self.kind.prepare_for_update(self.ctx, sub, &mut new);
        new
    }

    fn defaults(&self, value: &mut Value) {
        if self.builtin() {
            defaults::apply(&self.ctx.state, &self.ctx.info.kind, value);
        }
    }

    /// The checks of a new object.
    pub fn validate_create(&self, new: &Value) -> Result<(), ApiError> {
        self.validate(new)?;
        self.check_rules(new, None)
    }

    /// The checks of an updated object: those of any object, then those of the change
    /// (immutable fields), whichever verb made it; a kind may have its own instead.
    pub fn validate_update(&self, old: &Value, new: &Value) -> Result<(), ApiError> {
        let sub = self.subresource();
        if let Some(own) = self.kind.validate_update(self.ctx, sub, old, new) {
            return own;
        }
        if self.through_ephemeral() {
            // The pod's spec rules hold for the rest, which is the stored pod's.
            return refuse(self.ctx, new, ephemeral::validate_update(old, new));
        }
        self.validate(new)?;
        validation::validate_update(&self.ctx.info.kind, &self.ctx.info.group, old, new)?;
        self.check_rules(new, Some(old))
    }

    /// A custom kind's CEL rules (`x-kubernetes-validations`), all failures in one 422.
    fn check_rules(&self, new: &Value, old: Option<&Value>) -> Result<(), ApiError> {
        refuse(self.ctx, new, self.ctx.info.check_rules(new, old))
    }

    fn validate(&self, new: &Value) -> Result<(), ApiError> {
        // A custom kind's schema, checked after the mutating webhooks as kube-apiserver
        // checks it.
        refuse(self.ctx, new, self.ctx.info.validate_schema(new))?;
        // By kind and group: built-in kinds' rules, and for every kind its metadata's.
        validation::validate(&self.ctx.info.kind, &self.ctx.info.group, new)?;
        self.kind.validate(self.ctx, self.subresource(), new)?;
        let info = &self.ctx.info;
        if self.builtin() && info.group == "admissionregistration.k8s.io" && !self.through_status()
        {
            refuse(
                self.ctx,
                new,
                admission::validate_configuration(&info.kind, new),
            )?;
        }
        Ok(())
    }

    /// What the client should be warned of about `new` (a CRD's rules this server cannot
    /// enforce).
    pub fn warnings(&self, new: &Value) -> Vec<String> {
        self.kind.warnings(self.ctx, self.subresource(), new)
    }

    /// What follows a stored write; the object as it stands after.
    pub fn after_write(&self, stored: Arc<StoredObject>, created: bool) -> Arc<StoredObject> {
        self.kind.after_write(self.ctx, stored, created)
    }
}
