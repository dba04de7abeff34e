//! What differs between kinds on a write, in one place, as kube-apiserver's per-kind
//! strategies keep it: preparing an object for create or update (the spec/status split,
//! defaults, the storage version), validating a create or an update, and what follows a
//! write (a namespace's default objects, a CRD's new resource).
//!
//! Built-in and custom kinds are told apart here only, by the registry's `custom` flag: a
//! CRD whose kind happens to be called `Pod` is not a pod.

use crate::context::Ctx;
use crate::object::name_of;
use crate::status::ApiError;
use crate::{crd, defaults, namespaces, validation};
use infrasim_store::StoredObject;
use serde_json::Value;
use std::sync::Arc;

/// The built-in kinds whose writes do more than the common path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Special {
    CustomResourceDefinition,
    Namespace,
    Node,
    None,
}

/// The write behaviour of the request's kind.
pub(crate) struct Strategy<'a> {
    ctx: &'a Ctx,
    special: Special,
}

impl<'a> Strategy<'a> {
    pub fn of(ctx: &'a Ctx) -> Self {
        let special = match (ctx.info.custom, ctx.info.kind.as_str()) {
            (false, "CustomResourceDefinition") => Special::CustomResourceDefinition,
            (false, "Namespace") => Special::Namespace,
            (false, "Node") => Special::Node,
            _ => Special::None,
        };
        Strategy { ctx, special }
    }

    fn builtin(&self) -> bool {
        !self.ctx.info.custom
    }

    fn through_status(&self) -> bool {
        self.ctx.path.subresource.as_deref() == Some("status")
    }

    /// A new object as it will be stored: no status (the system's to write; a kubelet
    /// registers its Node with capacity and conditions, so Nodes keep theirs), defaults,
    /// the storage version; a CRD gets its cleanup finalizer.
    pub fn prepare_for_create(&self, new: &mut Value) {
        if self.ctx.info.has_status && self.special != Special::Node {
            if let Some(o) = new.as_object_mut() {
                o.remove("status");
            }
        }
        self.defaults_and_version(new);
        if self.special == Special::CustomResourceDefinition {
            crd::add_finalizer(new);
        }
    }

    /// An updated object as it will be stored: through the main resource the stored status
    /// stays, through `status` everything but the status stays; then defaults and the
    /// storage version.
    pub fn prepare_for_update(&self, old: &Value, new: Value) -> Value {
        let mut new = self.split_status(old, new);
        self.defaults_and_version(&mut new);
        new
    }

    fn defaults_and_version(&self, value: &mut Value) {
        if self.builtin() {
            defaults::apply(&self.ctx.state, &self.ctx.info.kind, value);
        }
        // Custom objects are stored in their CRD's storage version.
        if let Some(v) = &self.ctx.info.storage_version {
            value["apiVersion"] = Value::String(v.clone());
        }
    }

    fn split_status(&self, current: &Value, mut incoming: Value) -> Value {
        if self.through_status() {
            // What the request brings is taken (it is ours), not copied.
            let mut take = |pointer: &str| incoming.pointer_mut(pointer).map(Value::take);
            let status = take("/status").unwrap_or(Value::Null);
            let rv = take("/metadata/resourceVersion");
            let managed = take("/metadata/managedFields");
            let mut merged = current.clone();
            if status.is_null() {
                if let Some(o) = merged.as_object_mut() {
                    o.remove("status");
                }
            } else {
                merged["status"] = status;
            }
            if let Some(rv) = rv {
                merged["metadata"]["resourceVersion"] = rv;
            } else if let Some(m) = merged.get_mut("metadata").and_then(Value::as_object_mut) {
                m.remove("resourceVersion");
            }
            // An apply through status computed the new ownership (an update recomputes it).
            if let Some(managed) = managed {
                merged["metadata"]["managedFields"] = managed;
            }
            return merged;
        }
        if self.ctx.info.has_status {
            match current.get("status") {
                Some(s) => incoming["status"] = s.clone(),
                None => {
                    if let Some(o) = incoming.as_object_mut() {
                        o.remove("status");
                    }
                }
            }
        }
        incoming
    }

    /// The checks of a new object.
    pub fn validate_create(&self, new: &Value) -> Result<(), ApiError> {
        self.validate(new)?;
        self.check_rules(new, None)
    }

    /// The checks of an updated object: those of any object, then those of the change
    /// (immutable fields), whichever verb made it.
    pub fn validate_update(&self, old: &Value, new: &Value) -> Result<(), ApiError> {
        self.validate(new)?;
        validation::validate_update(&self.ctx.info.kind, &self.ctx.info.group, old, new)?;
        self.check_rules(new, Some(old))
    }

    /// A custom kind's CEL rules (`x-kubernetes-validations`), all failures in one 422.
    fn check_rules(&self, new: &Value, old: Option<&Value>) -> Result<(), ApiError> {
        let causes = self.ctx.info.check_rules(new, old);
        if causes.is_empty() {
            return Ok(());
        }
        let info = &self.ctx.info;
        Err(ApiError::invalid(
            &info.group,
            &info.kind,
            &name_of(new),
            causes,
        ))
    }

    fn validate(&self, new: &Value) -> Result<(), ApiError> {
        // By kind and group: built-in kinds' rules, and for every kind its metadata's.
        validation::validate(&self.ctx.info.kind, &self.ctx.info.group, new)?;
        if self.special == Special::CustomResourceDefinition && !self.through_status() {
            let causes = crd::validate(new);
            if !causes.is_empty() {
                return Err(crd::invalid(&name_of(new), causes));
            }
        }
        Ok(())
    }

    /// What the client should be warned of about `new` (a CRD's rules this server cannot
    /// enforce).
    pub fn warnings(&self, new: &Value) -> Vec<String> {
        if self.special == Special::CustomResourceDefinition && !self.through_status() {
            return crd::warnings(new);
        }
        Vec::new()
    }

    /// What follows a stored write; the object as it stands after.
    pub fn after_write(&self, stored: Arc<StoredObject>, created: bool) -> Arc<StoredObject> {
        let state = &self.ctx.state;
        match self.special {
            Special::Namespace if created => {
                namespaces::populate(state, &stored.meta.name);
                stored
            }
            Special::CustomResourceDefinition => {
                // Registering writes the CRD's status (Established, accepted names).
                crd::register(state, &stored.meta.name);
                state
                    .group
                    .get(&self.ctx.info.store_key, &stored.meta.key())
                    .unwrap_or(stored)
            }
            _ => stored,
        }
    }
}
