//! The one write path. Create, update, patch, server-side apply and the scale subresource
//! each turn their request into a [`Write`] (the object they want stored, and the one it
//! replaces), and [`persist`] takes every write through the same steps, as kube-apiserver's
//! registry does:
//!
//! 1. **prepare**: the kind's [`Strategy`] splits spec from status and defaults;
//! 2. **admit**: the built-in admission that applies to every verb (no new objects in a
//!    terminating namespace), then the mutating webhooks;
//! 3. **own**: the field manager's ownership recorded (unless apply computed it already);
//! 4. **validate**: the schema of a custom kind, the checks of any object of the kind, those
//!    of the change, then the validating policies and webhooks;
//! 5. **persist**: moved to the storage version and stored (or, in a dry run, computed and
//!    discarded), then what follows the write for the kind.
//!
//! Steps 1 to 4 see the object in the version the client spoke, as kube-apiserver's do.
//!
//! A verb can therefore not store what another verb would refuse. Deletes have their own
//! path through the same strategies ([`delete::remove`]).

mod common;
pub(crate) mod delete;
pub(crate) mod input;
pub(crate) mod kinds;
mod strategy;

use crate::context::Ctx;
use crate::http::HandlerResult;
use crate::object::{derive_for, name_of};
use crate::status::ApiError;
use crate::values::At;
use crate::{admission, namespaces};
use infrasim_store::{Read, StoreError, StoredObject};
use serde_json::{json, Value};
use std::borrow::Cow;
use std::sync::Arc;
pub(crate) use strategy::Strategy;

/// Whether the write makes a new object or replaces one.
pub(crate) enum Operation<'a> {
    Create,
    /// Replaces `old` (the object as read: `read` decoded), if it is still at `expected`
    /// (unconditional when `None`). `old` is borrowed where the writer keeps its own decoded
    /// copy (the in-process writers do), so the pipeline never copies the old object only
    /// to read it.
    Update {
        read: Arc<StoredObject>,
        old: Cow<'a, Value>,
        expected: Option<u64>,
    },
}

/// Who owns the written fields.
pub(crate) enum Ownership {
    /// The request's field manager, for what this write changes (an `Update` operation).
    Record,
    /// Already in the object's `managedFields` (server-side apply computed them).
    Computed,
}

/// One write, whatever verb asked for it.
pub(crate) struct Write<'a> {
    pub operation: Operation<'a>,
    pub object: Value,
    pub ownership: Ownership,
}

/// Why a write did not happen.
#[derive(Debug)]
pub(crate) enum WriteError {
    /// The object changed since the write read it (its resourceVersion is stale): a verb
    /// that did not pin a version reads the object again and retries.
    Stale(ApiError),
    /// Anything else: invalid, forbidden, gone, or a request that cannot be met.
    Refused(ApiError),
}

impl From<ApiError> for WriteError {
    fn from(e: ApiError) -> Self {
        WriteError::Refused(e)
    }
}

impl From<WriteError> for ApiError {
    fn from(e: WriteError) -> Self {
        match e {
            WriteError::Stale(e) | WriteError::Refused(e) => e,
        }
    }
}

/// The stored object, and whether the write created it.
pub(crate) struct Written {
    pub object: Arc<StoredObject>,
    /// The JSON `object` was sealed from, when the store handed it back (not for a dry run,
    /// nor when the kind's strategy answered with another version).
    pub value: Option<Value>,
    pub created: bool,
    /// What admission webhooks warned of.
    pub warnings: Vec<String>,
}

impl Written {
    /// The response status: 201 for a create, 200 otherwise.
    pub fn code(&self) -> u16 {
        if self.created {
            201
        } else {
            200
        }
    }
}

/// Takes `write` through prepare, admit, own, validate and persist.
pub(crate) async fn persist(ctx: &Ctx, write: Write<'_>) -> Result<Written, WriteError> {
    let dry = input::dry_run(ctx)?;
    let strategy = Strategy::of(ctx);
    let mut warnings = Vec::new();
    let Write {
        operation,
        object,
        ownership,
    } = write;
    // Every step works on the object in the version the client spoke, as kube-apiserver's
    // registry does; it is converted to the storage version only as it is stored.
    let written = match operation {
        Operation::Create => {
            let mut object = object;
            strategy.prepare_for_create(&mut object);
            admit_create(ctx, &object)?;
            let subject = |object| admission::Subject {
                operation: admission::Operation::Create,
                object,
                old: None,
                dry_run: dry,
            };
            object = mutate(ctx, &subject(None), object, &mut warnings).await?;
            if let Ownership::Record = ownership {
                own(ctx, None, &mut object);
            }
            warnings.extend(strategy.warnings(&object));
            create(ctx, &strategy, object, dry, &mut warnings).await?
        }
        Operation::Update {
            read,
            old: stored_old,
            expected,
        } => {
            let old = match crate::conversion::stored_differently(&ctx.info) {
                true => Cow::Owned(
                    crate::conversion::to_request_version(ctx, Value::clone(&stored_old)).await?,
                ),
                false => Cow::Borrowed(&*stored_old),
            };
            let old: &Value = &old;
            let mut object = strategy.prepare_for_update(old, object);
            let subject = |object| admission::Subject {
                operation: admission::Operation::Update,
                object,
                old: Some(old),
                dry_run: dry,
            };
            object = mutate(ctx, &subject(None), object, &mut warnings).await?;
            match ownership {
                Ownership::Record => own(ctx, Some(old), &mut object),
                Ownership::Computed => crate::apply::keep_times_if_unchanged(old, &mut object),
            }
            strategy.validate_update(old, &object)?;
            warnings.extend(strategy.warnings(&object));
            admission::validate(ctx, &subject(Some(&object)), &mut warnings).await?;
            let read = Read {
                object: &read,
                value: &stored_old,
            };
            let object = crate::conversion::to_storage(ctx, object).await?;
            update(ctx, &strategy, object, expected, read, dry)?
        }
    };
    Ok(Written {
        warnings,
        ..written
    })
}

/// The object after the mutating webhooks; what they changed is decoded again into the
/// kind's type (so they can add nothing the kind does not have), as kube-apiserver decodes
/// a patched object.
async fn mutate(
    ctx: &Ctx,
    subject: &admission::Subject<'_>,
    mut object: Value,
    warnings: &mut Vec<String>,
) -> Result<Value, ApiError> {
    if !admission::mutate(ctx, subject, &mut object, warnings).await? {
        return Ok(object);
    }
    input::normalize(ctx, object, &mut Vec::new())
}

/// The answer to a write: the object in the version the client spoke (201 if created), with
/// the warnings of decoding and of admission.
pub(crate) async fn respond(
    ctx: &Ctx,
    written: Written,
    mut warnings: Vec<String>,
) -> HandlerResult {
    warnings.extend(written.warnings.iter().cloned());
    let code = written.code();
    let object = crate::conversion::served_one(ctx, written.object).await?;
    input::with_warnings(ctx.render(&object, code), &warnings)
}

/// Replaces the stored object.
fn update(
    ctx: &Ctx,
    strategy: &Strategy,
    object: Value,
    expected: Option<u64>,
    read: Read<'_>,
    dry: bool,
) -> Result<Written, WriteError> {
    let derived = derive_for(&ctx.info.kind, &object, !ctx.info.custom);
    let key = &ctx.info.store_key;
    let refused = |e| match e {
        StoreError::Conflict { .. } => WriteError::Stale(ctx.store_error(e)),
        e => WriteError::Refused(ctx.store_error(e)),
    };
    if dry {
        let stored = ctx
            .state
            .group
            .update_read(key, object, derived, expected, read, true)
            .map_err(refused)?;
        return Ok(Written {
            object: stored,
            value: None,
            created: false,
            warnings: Vec::new(),
        });
    }
    let stored = ctx
        .state
        .group
        .update_read_decoded(key, object, derived, expected, read)
        .map_err(refused)?;
    Ok(after_write(strategy, stored, false))
}

/// The kind's reaction to a write; the JSON written goes with the answer while the answer
/// is the version written.
fn after_write(strategy: &Strategy, written: infrasim_store::Decoded, created: bool) -> Written {
    let object = strategy.after_write(written.object.clone(), created);
    let value = Arc::ptr_eq(&object, &written.object).then_some(written.value);
    Written {
        object,
        value,
        created,
        warnings: Vec::new(),
    }
}

/// NamespaceLifecycle: nothing new in a namespace that is being deleted (or does not exist).
fn admit_create(ctx: &Ctx, object: &Value) -> Result<(), ApiError> {
    if ctx.info.namespaced {
        namespaces::ensure_writable(
            &ctx.state,
            ctx.namespace(),
            &ctx.info.plural,
            &name_of(object),
        )?;
    }
    Ok(())
}

/// Records the fields this write changes as the request's field manager's (an `Update`).
fn own(ctx: &Ctx, old: Option<&Value>, new: &mut Value) {
    // The client's managedFields are not trusted: record_update derives them from the
    // change and the old object's.
    let now = infrasim_store::format_time(ctx.state.clock.now());
    crate::apply::record_update(
        old,
        new,
        &input::field_manager(ctx),
        ctx.path.subresource.as_deref().unwrap_or(""),
        &ctx.info.api_version,
        &now,
        ctx.info.lists(),
    );
}

/// Stores a new object; a `generateName` gets a few random suffixes, as kube-apiserver's
/// name generator tries them.
async fn create(
    ctx: &Ctx,
    strategy: &Strategy<'_>,
    mut object: Value,
    dry: bool,
    warnings: &mut Vec<String>,
) -> Result<Written, ApiError> {
    if object
        .at("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .is_some_and(|rv| !rv.is_empty())
    {
        return Err(ApiError::bad_request(
            "resourceVersion should not be set on objects to be created",
        ));
    }
    let generate = object
        .at("/metadata/generateName")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let generated = name_of(&object).is_empty() && !generate.is_empty();
    for attempt in 0..8 {
        if generated {
            object["metadata"]["name"] = json!(format!("{generate}{}", random_suffix()));
        }
        strategy.validate_create(&object)?;
        let subject = admission::Subject {
            operation: admission::Operation::Create,
            object: Some(&object),
            old: None,
            dry_run: dry,
        };
        admission::validate(ctx, &subject, warnings).await?;
        // Only a generated name may take another attempt: the last one takes the object
        // itself rather than a copy.
        let last = !generated || attempt == 7;
        let candidate = match last {
            true => std::mem::take(&mut object),
            false => object.clone(),
        };
        let stored = crate::conversion::to_storage(ctx, candidate).await?;
        let derived = derive_for(&ctx.info.kind, &stored, !ctx.info.custom);
        let group = &ctx.state.group;
        let key = &ctx.info.store_key;
        if dry {
            let would = group
                .create_dry_run(key, stored, derived)
                .map_err(|e| ctx.store_error(e))?;
            return Ok(Written {
                object: would,
                value: None,
                created: true,
                warnings: Vec::new(),
            });
        }
        match group.create_decoded(key, stored, derived) {
            Ok(created) => return Ok(after_write(strategy, created, true)),
            Err(StoreError::AlreadyExists { .. }) if generated && attempt < 7 => {}
            Err(e) => return Err(ctx.store_error(e)),
        }
    }
    Err(ApiError::internal("could not generate a unique name"))
}

/// Five characters from the alphabet kube-apiserver's name generator uses.
fn random_suffix() -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    (0..5)
        .map(|_| ALPHABET[rand::random_range(0..ALPHABET.len())] as char)
        .collect()
}
