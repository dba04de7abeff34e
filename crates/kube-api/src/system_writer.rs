//! Writes made inside the process, by what stands for the cluster's own components: the
//! simulated kube-controller-manager, scheduler and kubelets, kubeadm's bootstrap, and the
//! API server's own controllers (namespace lifecycle, CRD registration). Each writes as the
//! real component would as a client of the API: under its own identity and field manager,
//! through the same write pipeline as a request ([`crate::write`]): defaults, the spec/status
//! split, admission, managedFields, validation. What an HTTP client could not store, an
//! in-process writer cannot either.
//!
//! The writer is synchronous because its callers are: the simulated controllers run a
//! pass over a cluster's objects between two awaits, and the bootstrap writes a machine's
//! step in one go. A write awaits only when an admission or conversion webhook is called;
//! then the calling worker thread blocks until it answers (see [`finish`]).

use crate::auth::Identity;
use crate::context::Ctx;
use crate::http::Format;
use crate::request::{Query, ResourcePath};
use crate::resources::ResourceInfo;
use crate::state::State;
use crate::status::ApiError;
use crate::write::delete::{self, Deletion};
use crate::write::{self, input, Operation, Ownership, Write, Written};
use infrasim_store::{Decoded, DeleteOptions, DeleteOutcome, ObjectKey, Read, StoredObject};
use serde_json::Value;
use std::borrow::Cow;
use std::future::Future;
use std::sync::Arc;
use std::task::{Context, Poll};

/// A component of the cluster writing in-process. Cheap to clone.
#[derive(Debug, Clone)]
pub struct SystemWriter {
    state: Arc<State>,
    identity: Identity,
    manager: Arc<str>,
}

impl SystemWriter {
    pub(crate) fn new(state: Arc<State>, identity: Identity, manager: &str) -> Self {
        SystemWriter {
            state,
            identity,
            manager: manager.into(),
        }
    }

    /// One of kube-controller-manager's controllers that live in this crate (the namespace
    /// controller, the root CA publisher), as its service account in `kube-system`.
    pub(crate) fn controller(state: &Arc<State>, service_account: &str) -> Self {
        let identity = Identity {
            user: format!("system:serviceaccount:kube-system:{service_account}"),
            groups: vec![
                "system:serviceaccounts".into(),
                "system:serviceaccounts:kube-system".into(),
                "system:authenticated".into(),
            ],
        };
        SystemWriter::new(state.clone(), identity, "kube-controller-manager")
    }

    /// kube-apiserver's own controllers (CRD registration and cleanup), which write through
    /// its loopback client as `system:apiserver`.
    pub(crate) fn api_server(state: &Arc<State>) -> Self {
        let identity = Identity {
            user: "system:apiserver".into(),
            groups: vec!["system:authenticated".into(), "system:masters".into()],
        };
        SystemWriter::new(state.clone(), identity, "kube-apiserver")
    }

    /// The same component under another identity and field manager (the scheduler and the
    /// kubelets beside kube-controller-manager, over one cluster).
    pub fn as_component(&self, identity: Identity, manager: &str) -> Self {
        SystemWriter::new(self.state.clone(), identity, manager)
    }

    /// The store group it writes into, for its callers' reads (which need no pipeline).
    pub fn group(&self) -> &Arc<infrasim_store::Group> {
        &self.state.group
    }

    /// The field manager this writer's changes are recorded under.
    pub fn manager(&self) -> &str {
        &self.manager
    }

    /// Creates `object` in `resource` (its store key: `pods`, `deployments.apps`). A status
    /// the kind keeps for its own writers (all but a Node's) is dropped, as for any client;
    /// write it after with [`Self::update_status`].
    pub fn create(&self, resource: &str, object: Value) -> Result<Arc<StoredObject>, ApiError> {
        Ok(self.write_create(resource, object)?.object)
    }

    /// [`Self::create`], answering with the created object's JSON as well (for a writer that
    /// reads what it wrote: the JSON the store encoded, not its bytes decoded again).
    pub fn create_decoded(&self, resource: &str, object: Value) -> Result<Decoded, ApiError> {
        decoded(self.write_create(resource, object)?)
    }

    fn write_create(&self, resource: &str, object: Value) -> Result<Written, ApiError> {
        let ctx = self.ctx(resource, &object, None)?;
        let object = self.decode(&ctx, object, Whole)?;
        let write = Write {
            operation: Operation::Create,
            object,
            ownership: Ownership::Record,
        };
        finish(async { Ok(write::persist(&ctx, write).await?) })
    }

    /// Creates `object` unless one of its name exists (what is there is left as it is), as
    /// the bootstrap writers do: a restarted server finds what it made before.
    /// Their names are the same in every cluster, so the store keeps each once for the
    /// process (see `infrasim_store::shared_names`).
    pub fn ensure(&self, resource: &str, object: Value) -> Result<(), ApiError> {
        for field in ["/metadata/namespace", "/metadata/name"] {
            if let Some(name) = object.pointer(field).and_then(Value::as_str) {
                infrasim_store::shared_names::share(name);
            }
        }
        match self.create(resource, object) {
            Err(e) if e.code != 409 => Err(e),
            _ => Ok(()),
        }
    }

    /// Replaces the object `read` (stored and decoded) with `object`, if it is still the
    /// stored one (a 409 Conflict otherwise). The status stays as stored.
    pub fn update(
        &self,
        resource: &str,
        object: Value,
        read: Read<'_>,
    ) -> Result<Arc<StoredObject>, ApiError> {
        Ok(self.replace(resource, object, read, None)?.object)
    }

    /// [`Self::update`], answering with the written object's JSON as well.
    pub fn update_decoded(
        &self,
        resource: &str,
        object: Value,
        read: Read<'_>,
    ) -> Result<Decoded, ApiError> {
        decoded(self.replace(resource, object, read, None)?)
    }

    /// Writes `object`'s status over the object `read`, if it is still the stored one; the
    /// rest stays as stored.
    pub fn update_status(
        &self,
        resource: &str,
        object: Value,
        read: Read<'_>,
    ) -> Result<Arc<StoredObject>, ApiError> {
        Ok(self.replace(resource, object, read, Some("status"))?.object)
    }

    /// [`Self::update_status`], answering with the written object's JSON as well.
    pub fn update_status_decoded(
        &self,
        resource: &str,
        object: Value,
        read: Read<'_>,
    ) -> Result<Decoded, ApiError> {
        decoded(self.replace(resource, object, read, Some("status"))?)
    }

    /// Writes `object` over the object `read` through `subresource` (a namespace's
    /// `finalize`), if it is still the stored one.
    pub fn update_subresource(
        &self,
        resource: &str,
        subresource: &str,
        object: Value,
        read: Read<'_>,
    ) -> Result<Arc<StoredObject>, ApiError> {
        Ok(self
            .replace(resource, object, read, Some(subresource))?
            .object)
    }

    /// Deletes `namespace/name` of `resource`, finalizers and the default (background)
    /// propagation honoured.
    pub fn delete(
        &self,
        resource: &str,
        namespace: &str,
        name: &str,
    ) -> Result<DeleteOutcome, ApiError> {
        let info = self.info(resource, None)?;
        let ctx = self.ctx_for(info, namespace, name, None);
        let deletion = Deletion {
            key: ObjectKey::new(namespace, name),
            options: DeleteOptions::default(),
            dry: false,
            admit: true,
        };
        finish(async { Ok(delete::remove(&ctx, deletion).await?.outcome) })
    }

    /// Puts pod `namespace/name` on `node`, as a scheduler does (`pods/binding`): a pod
    /// already bound, or being deleted, is a 409.
    pub fn bind(
        &self,
        namespace: &str,
        name: &str,
        node: &str,
    ) -> Result<Arc<StoredObject>, ApiError> {
        let info = self.info("pods", None)?;
        let ctx = self.ctx_for(info, namespace, name, Some("binding"));
        Ok(finish(crate::binding::assign(&ctx, node, None, None))?.object)
    }

    /// [`Self::bind`] of the pod as `read` (not decoded again while it is the stored one),
    /// answering with the bound pod's JSON as well.
    pub fn bind_decoded(&self, read: Read<'_>, node: &str) -> Result<Decoded, ApiError> {
        let info = self.info("pods", None)?;
        let meta = &read.object.meta;
        let ctx = self.ctx_for(info, &meta.namespace, &meta.name, Some("binding"));
        let bound = finish(crate::binding::assign(&ctx, node, None, Some(read)))?;
        decoded(bound)
    }

    fn replace(
        &self,
        resource: &str,
        object: Value,
        read: Read<'_>,
        subresource: Option<&str>,
    ) -> Result<Written, ApiError> {
        let ctx = self.ctx(resource, &object, subresource)?;
        let object = self.decode_kept(&ctx, object, subresource)?;
        let write = Write {
            operation: Operation::Update {
                read: read.object.clone(),
                old: Cow::Borrowed(read.value),
                expected: Some(read.object.meta.resource_version),
            },
            object,
            ownership: Ownership::Record,
        };
        finish(async { Ok(write::persist(&ctx, write).await?) })
    }

    /// The object as the kind's type has it, as a typed client could only have sent it.
    ///
    /// This program's components write built-in kinds in their type's shape already, so a
    /// built-in object is taken as it was written: decoding it into the type and encoding it
    /// back changed nothing but dropped explicit nulls (a condition's `lastProbeTime: null`,
    /// which kube-apiserver keeps), and was a tenth of a fleet's CPU (profiled at 1,000
    /// clusters). Debug builds, which every test runs, still make the round trip and stop on
    /// any other difference, so a writer that drifts from its kind's type (a misspelt field,
    /// a number where the type has a string) fails its tests where it writes. Custom kinds
    /// are always decoded: their schema defaults fields.
    fn decode(&self, ctx: &Ctx, mut object: Value, extent: Extent) -> Result<Value, ApiError> {
        input::check_identity(ctx, &mut object)?;
        if !ctx.info.custom {
            if cfg!(debug_assertions) {
                self.check_shape(ctx, &object, extent);
            }
            return Ok(object);
        }
        let (object, unknown) =
            input::decode(ctx, object, tracing::enabled!(tracing::Level::DEBUG))?;
        if !unknown.is_empty() {
            tracing::debug!(writer = %self.manager, kind = %ctx.info.kind, ?unknown, "in-process write with fields its kind does not have");
        }
        Ok(object)
    }

    /// Stops (debug builds) when `object` is not what decoding it into its kind's type would
    /// make of it, nulls aside (and, for a part, the fields the type requires and the part
    /// leaves to the stored object).
    fn check_shape(&self, ctx: &Ctx, object: &Value, extent: Extent) {
        let (writer, kind) = (&self.manager, &ctx.info.kind);
        match input::decode(ctx, object.clone(), true) {
            Err(e) => panic!(
                "{writer} wrote a {kind} its type cannot read ({}): {object}",
                e.message
            ),
            Ok((mut decoded, unknown)) => {
                if let (Part, Some(decoded), Some(written)) =
                    (extent, decoded.as_object_mut(), object.as_object())
                {
                    decoded.retain(|k, _| written.contains_key(k));
                }
                assert!(
                    same_but_nulls(object, &decoded),
                    "{writer} wrote a {kind} its type reads differently (unknown fields: {unknown:?}):\n  written: {object}\n  decoded: {decoded}",
                );
            }
        }
    }

    /// [`Self::decode`] of what an update keeps of `object`: through `status` its status and
    /// metadata, through the main resource of a kind with a status all but the status. The
    /// rest is replaced by the stored object's before anything reads it, so decoding it
    /// would be work thrown away (a kubelet's status report would decode the whole Pod). A
    /// built-in kind's type decodes field by field, so the part decodes as it would within
    /// the whole; a custom kind's schema may require what is set aside, so it decodes whole.
    fn decode_kept(
        &self,
        ctx: &Ctx,
        object: Value,
        subresource: Option<&str>,
    ) -> Result<Value, ApiError> {
        // What the write keeps of the object's top-level fields.
        let kept = |field: &str| match subresource {
            Some("status") => matches!(field, "apiVersion" | "kind" | "metadata" | "status"),
            _ => field != "status",
        };
        let partial = !ctx.info.custom
            && (subresource == Some("status") || (subresource.is_none() && ctx.info.has_status));
        let fields = match object {
            Value::Object(fields) if partial => fields,
            whole => return self.decode(ctx, whole, Whole),
        };
        let (fields, aside): (Vec<_>, Vec<_>) = fields.into_iter().partition(|(k, _)| kept(k));
        let fields: serde_json::Map<String, Value> = fields.into_iter().collect();
        let mut decoded = self.decode(ctx, Value::Object(fields), Part)?;
        if let Some(decoded) = decoded.as_object_mut() {
            decoded.extend(aside);
        }
        Ok(decoded)
    }

    /// The request a client of this component would make for `object`.
    fn ctx(
        &self,
        resource: &str,
        object: &Value,
        subresource: Option<&str>,
    ) -> Result<Ctx, ApiError> {
        let api_version = object.get("apiVersion").and_then(Value::as_str);
        let info = self.info(resource, api_version)?;
        let meta = |field: &str| {
            object
                .pointer(&format!("/metadata/{field}"))
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        let namespace = if info.namespaced {
            meta("namespace")
        } else {
            String::new()
        };
        Ok(self.ctx_for(info, &namespace, &meta("name"), subresource))
    }

    fn ctx_for(
        &self,
        info: Arc<ResourceInfo>,
        namespace: &str,
        name: &str,
        subresource: Option<&str>,
    ) -> Ctx {
        let path = ResourcePath {
            group: info.group.clone(),
            version: info.version.clone(),
            namespace: info.namespaced.then(|| namespace.to_string()),
            resource: info.plural.clone(),
            name: (!name.is_empty()).then(|| name.to_string()),
            subresource: subresource.map(str::to_string),
            watch_prefix: false,
        };
        Ctx {
            state: self.state.clone(),
            info,
            path,
            query: Query::from_pairs([("fieldManager", &*self.manager)]),
            format: Format::Json,
            headers: http::HeaderMap::new(),
            identity: self.identity.clone(),
        }
    }

    /// The served version of `resource` an object of `api_version` is written through (the
    /// one with the highest priority when the object does not say).
    fn info(
        &self,
        resource: &str,
        api_version: Option<&str>,
    ) -> Result<Arc<ResourceInfo>, ApiError> {
        self.state
            .registry
            .stored_at(resource, api_version)
            .ok_or_else(|| {
                ApiError::not_found(format!("the server does not serve the resource {resource}"))
            })
    }
}

/// A write's answer with its JSON: the one the store sealed, or (when the kind answered with
/// another version) the answer decoded.
fn decoded(written: Written) -> Result<Decoded, ApiError> {
    match written.value {
        Some(value) => Ok(Decoded {
            object: written.object,
            value,
        }),
        None => Decoded::decode(written.object)
            .map_err(|e| ApiError::internal(format!("decoding a stored object: {e}"))),
    }
}

/// Runs a write to its end from synchronous code. Without webhooks a write awaits nothing
/// and ends on its first poll, which is the common case and costs no thread. When it waits
/// on a webhook, this worker thread blocks until it answers (the runtime's other workers
/// go on, `block_in_place`); a single-threaded runtime cannot do that without stopping the
/// very I/O the webhook needs, so there the write is refused rather than hung.
fn finish<T>(write: impl Future<Output = Result<T, ApiError>>) -> Result<T, ApiError> {
    let mut write = std::pin::pin!(write);
    let mut first = Context::from_waker(futures::task::noop_waker_ref());
    if let Poll::Ready(done) = write.as_mut().poll(&mut first) {
        return done;
    }
    match tokio::runtime::Handle::try_current() {
        Ok(runtime) if runtime.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(|| runtime.block_on(write))
        }
        _ => Err(ApiError::internal(
            "an in-process write waits on a webhook, which needs a multi-threaded runtime",
        )),
    }
}

/// How much of an object a write hands [`SystemWriter::decode`].
#[derive(Clone, Copy)]
enum Extent {
    Whole,
    /// The top-level fields an update keeps; the rest is the stored object's.
    Part,
}
use Extent::{Part, Whole};

/// Whether `a` and `b` hold the same values, a field set to null counting as absent.
fn same_but_nulls(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Object(a), Value::Object(b)) => {
            let present = |m: &serde_json::Map<String, Value>, k: &String| {
                m.get(k).filter(|v| !v.is_null()).is_some()
            };
            a.keys()
                .chain(b.keys())
                .all(|k| match (a.get(k), b.get(k)) {
                    (Some(x), Some(y)) => same_but_nulls(x, y),
                    _ => !present(a, k) && !present(b, k),
                })
        }
        (Value::Array(a), Value::Array(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|(x, y)| same_but_nulls(x, y))
        }
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::same_but_nulls;
    use serde_json::json;

    #[test]
    fn nulls_count_as_absent_and_nothing_else_does() {
        let written = json!({"a": null, "b": [{"c": 1, "d": null}]});
        assert!(same_but_nulls(&written, &json!({"b": [{"c": 1}]})));
        assert!(same_but_nulls(&json!({"b": [{"c": 1}]}), &written));
        assert!(!same_but_nulls(&json!({"a": 1}), &json!({})));
        assert!(!same_but_nulls(&json!({}), &json!({"a": []})));
        assert!(!same_but_nulls(&json!({"b": [1, 2]}), &json!({"b": [1]})));
        assert!(!same_but_nulls(&json!({"a": "1"}), &json!({"a": 1})));
    }
}
