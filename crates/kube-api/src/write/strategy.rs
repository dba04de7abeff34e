//! The common steps of a write, as kube-apiserver's generic registry store runs them around
//! a kind's strategy: preparing an object for create or update (the spec/status split,
//! defaults), validating a create or an update (a custom kind's schema and rules, the checks
//! by kind and group, the admissionregistration configurations'), and what follows a write.
//! At each step the request's kind has its say through its [`KindStrategy`]
//! (`write/kinds/`), which alone knows one kind from another.

use super::kinds::{self, KindStrategy};
use crate::context::Ctx;
use crate::object::name_of;
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

/// A 422 naming every cause, or nothing when there is none.
pub(crate) fn refuse(
    ctx: &Ctx,
    new: &Value,
    causes: Vec<(String, String)>,
) -> Result<(), ApiError> {
    if causes.is_empty() {
        return Ok(());
    }
    let info = &ctx.info;
    Err(ApiError::invalid(
        &info.group,
        &info.kind,
        &name_of(new),
        causes,
    ))
}

/// The common split of an update: through `ephemeralcontainers` only those change (a pod's);
/// through `status` the stored object stays but for its status; through the main resource
/// the stored status stays.
pub(crate) fn split_for_update(
    ctx: &Ctx,
    subresource: Option<&str>,
    current: &Value,
    incoming: Value,
) -> Value {
    match subresource {
        Some("ephemeralcontainers") => ephemeral::prepare_for_update(current, &incoming),
        Some("status") => split_through_status(current, incoming),
        _ if ctx.info.has_status => keep_stored_status(current, incoming),
        _ => incoming,
    }
}

/// The request's status, resourceVersion and managedFields (an apply through status
/// computed the new ownership; an update recomputes it), and the rest as stored. The
/// request carries the rest already, mostly unchanged (a client sends the object it read,
/// an apply merged onto it): compared, copied where it differs.
fn split_through_status(current: &Value, mut incoming: Value) -> Value {
    if incoming.get("status").is_some_and(Value::is_null) {
        if let Some(o) = incoming.as_object_mut() {
            o.remove("status");
        }
    }
    keep_stored(&mut incoming, current, &["status", "metadata"]);
    let meta = current.get("metadata").unwrap_or(&Value::Null);
    if !incoming.get("metadata").is_some_and(Value::is_object) {
        incoming["metadata"] = Value::Object(Default::default());
    }
    if let Some(m) = incoming.get_mut("metadata") {
        keep_stored(m, meta, &["resourceVersion", "managedFields"]);
    }
    if incoming.pointer("/metadata/managedFields").is_none() {
        if let Some(managed) = meta.get("managedFields") {
            incoming["metadata"]["managedFields"] = managed.clone();
        }
    }
    incoming
}

/// Through the main resource the status is the stored one (none if none is stored).
fn keep_stored_status(current: &Value, mut incoming: Value) -> Value {
    match current.get("status") {
        Some(s) => incoming["status"] = s.clone(),
        None => {
            if let Some(o) = incoming.as_object_mut() {
                o.remove("status");
            }
        }
    }
    incoming
}

/// Makes `incoming` hold `stored`'s fields but for `except` (which it keeps as it has them):
/// fields it lacks are copied in, fields it has that `stored` lacks go, and fields that
/// differ are copied over; equal fields are left as they are, not copied.
fn keep_stored(incoming: &mut Value, stored: &Value, except: &[&str]) {
    let (Some(to), Some(from)) = (incoming.as_object_mut(), stored.as_object()) else {
        let kept: Vec<(String, Value)> = except
            .iter()
            .filter_map(|k| Some((k.to_string(), incoming.get(*k)?.clone())))
            .collect();
        *incoming = stored.clone();
        if let Some(o) = incoming.as_object_mut() {
            o.extend(kept);
        }
        return;
    };
    to.retain(|k, _| except.contains(&k.as_str()) || from.contains_key(k));
    for (k, v) in from {
        if except.contains(&k.as_str()) {
            continue;
        }
        match to.get_mut(k) {
            Some(slot) if slot == v => {}
            Some(slot) => *slot = v.clone(),
            None => {
                to.insert(k.clone(), v.clone());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::keep_stored;
    use serde_json::json;

    #[test]
    fn keeps_the_stored_fields_but_the_excepted_ones() {
        let stored = json!({"spec": {"a": 1}, "kept": "x", "status": {"old": true}});
        let mut incoming = json!({"spec": {"a": 2}, "extra": 1, "status": {"new": true}});
        keep_stored(&mut incoming, &stored, &["status"]);
        assert_eq!(
            incoming,
            json!({"spec": {"a": 1}, "kept": "x", "status": {"new": true}})
        );
        // An excepted field the request lacks stays absent (not copied from the stored one).
        let mut bare = json!({"spec": {"a": 1}});
        keep_stored(&mut bare, &stored, &["status"]);
        assert_eq!(bare, json!({"spec": {"a": 1}, "kept": "x"}));
    }
}
