//! What differs between kinds on a write, in one place, as kube-apiserver's per-kind
//! strategies keep it: preparing an object for create or update (the spec/status split,
//! defaults), validating a create or an update, and what follows a
//! write (a namespace's default objects, a CRD's new resource).
//!
//! Built-in and custom kinds are told apart here only, by the registry's `custom` flag: a
//! CRD whose kind happens to be called `Pod` is not a pod.

use crate::context::Ctx;
use crate::object::name_of;
use crate::status::ApiError;
use crate::{admission, apiservices, crd, csr, defaults, ephemeral, namespaces, validation};
use infrasim_store::StoredObject;
use serde_json::Value;
use std::sync::Arc;

/// The built-in kinds whose writes do more than the common path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Special {
    APIService,
    CertificateSigningRequest,
    CustomResourceDefinition,
    Namespace,
    Node,
    Service,
    ValidatingAdmissionPolicy,
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
            (false, "APIService") => Special::APIService,
            (false, "CertificateSigningRequest") => Special::CertificateSigningRequest,
            (false, "CustomResourceDefinition") => Special::CustomResourceDefinition,
            (false, "Namespace") => Special::Namespace,
            (false, "Node") => Special::Node,
            (false, "Service") => Special::Service,
            (false, "ValidatingAdmissionPolicy") => Special::ValidatingAdmissionPolicy,
            _ => Special::None,
        };
        Strategy { ctx, special }
    }

    fn builtin(&self) -> bool {
        !self.ctx.info.custom
    }

    fn csr_through(&self) -> csr::Through {
        csr::Through::of(self.ctx.path.subresource.as_deref())
    }

    fn through_ephemeral(&self) -> bool {
        self.ctx.path.subresource.as_deref() == Some("ephemeralcontainers")
    }

    fn through_status(&self) -> bool {
        self.ctx.path.subresource.as_deref() == Some("status")
    }

    /// A new object as it will be stored: no status (the system's to write; a kubelet
    /// registers its Node with capacity and conditions, so Nodes keep theirs), defaults,
    /// a CRD gets its cleanup finalizer.
    pub fn prepare_for_create(&self, new: &mut Value) {
        if self.ctx.info.has_status && self.special != Special::Node {
            if let Some(o) = new.as_object_mut() {
                o.remove("status");
            }
        }
        self.defaults(new);
        match self.special {
            Special::CustomResourceDefinition => crd::add_finalizer(new),
            Special::CertificateSigningRequest => csr::prepare_for_create(&self.ctx.identity, new),
            // The availability controller's verdict, at once.
            Special::APIService => apiservices::set_status(&self.ctx.state, new),
            _ => {}
        }
    }

    /// An updated object as it will be stored: through the main resource the stored status
    /// stays, through `status` everything but the status stays; then defaults.
    pub fn prepare_for_update(&self, old: &Value, new: Value) -> Value {
        let mut new = match self.special {
            Special::CertificateSigningRequest => {
                let now = infrasim_store::format_time(self.ctx.state.clock.now());
                csr::prepare_for_update(self.csr_through(), old, new, &now)
            }
            _ if self.through_ephemeral() => ephemeral::prepare_for_update(old, &new),
            _ => self.split_status(old, new),
        };
        self.defaults(&mut new);
        if self.special == Special::APIService && !self.through_status() {
            apiservices::set_status(&self.ctx.state, &mut new);
        }
        new
    }

    fn defaults(&self, value: &mut Value) {
        if self.builtin() {
            defaults::apply(&self.ctx.state, &self.ctx.info.kind, value);
        }
    }

    fn split_status(&self, current: &Value, mut incoming: Value) -> Value {
        if self.through_status() {
            // The request's status, resourceVersion and managedFields (an apply through
            // status computed the new ownership; an update recomputes it), and the rest as
            // stored. The request carries the rest already, mostly unchanged (a client sends
            // the object it read, an apply merged onto it): compared, copied where it differs.
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
            return incoming;
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
        if self.special == Special::CertificateSigningRequest {
            return self.validate_csr_update(old, new);
        }
        if self.through_ephemeral() {
            // The pod's spec rules hold for the rest, which is the stored pod's.
            return self.refuse(new, ephemeral::validate_update(old, new));
        }
        self.validate(new)?;
        validation::validate_update(&self.ctx.info.kind, &self.ctx.info.group, old, new)?;
        self.check_rules(new, Some(old))
    }

    /// A CSR's update: its own rules (the spec is the stored one, so only the status can
    /// break them), then whether the writer may approve or sign for its signer.
    fn validate_csr_update(&self, old: &Value, new: &Value) -> Result<(), ApiError> {
        validation::validate(&self.ctx.info.kind, &self.ctx.info.group, new)?;
        self.refuse(new, csr::validate_update(self.csr_through(), old, new))?;
        let (state, who) = (&self.ctx.state, &self.ctx.identity);
        csr::authorize(state, who, self.csr_through(), old, new).map_err(|reason| {
            ApiError::forbidden(format!(
                "certificatesigningrequests.certificates.k8s.io {:?} is forbidden: {reason}",
                name_of(new)
            ))
        })
    }

    /// A custom kind's CEL rules (`x-kubernetes-validations`), all failures in one 422.
    fn check_rules(&self, new: &Value, old: Option<&Value>) -> Result<(), ApiError> {
        self.refuse(new, self.ctx.info.check_rules(new, old))
    }

    /// A 422 naming every cause, or nothing when there is none.
    fn refuse(&self, new: &Value, causes: Vec<(String, String)>) -> Result<(), ApiError> {
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
        // A custom kind's schema, checked after the mutating webhooks as kube-apiserver
        // checks it.
        self.refuse(new, self.ctx.info.validate_schema(new))?;
        // By kind and group: built-in kinds' rules, and for every kind its metadata's.
        validation::validate(&self.ctx.info.kind, &self.ctx.info.group, new)?;
        if self.special == Special::CustomResourceDefinition && !self.through_status() {
            let causes = crd::validate(new);
            if !causes.is_empty() {
                return Err(crd::invalid(&name_of(new), causes));
            }
        }
        let info = &self.ctx.info;
        let causes = match self.special {
            Special::APIService => apiservices::validate(new),
            Special::CertificateSigningRequest => csr::validate(new),
            // The allocators' refusals (a port or an IP another Service holds).
            Special::Service if !self.through_status() => {
                defaults::service_allocation_errors(&self.ctx.state, new)
            }
            _ => Vec::new(),
        };
        self.refuse(new, causes)?;
        if self.builtin() && info.group == "admissionregistration.k8s.io" && !self.through_status()
        {
            self.refuse(new, admission::validate_configuration(&info.kind, new))?;
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
            Special::ValidatingAdmissionPolicy => {
                // The status controller's type checking, done at once rather than soon after.
                admission::after_policy_write(state, &stored.meta.name);
                state
                    .group
                    .get(&self.ctx.info.store_key, &stored.meta.key())
                    .unwrap_or(stored)
            }
            _ => stored,
        }
    }
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
