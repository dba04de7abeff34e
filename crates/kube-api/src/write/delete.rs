//! The delete path, as kube-apiserver's registry runs `Delete` for every kind: the kind's
//! strategy may refuse the deletion, the validating admission sees the object going, the
//! store marks it (finalizers hold it) or removes it, and the kind does what follows. A
//! DELETE of one object, each object of a DeleteCollection and an eviction's delete all
//! come through [`remove`], so none of them can skip a step another takes.

use super::kinds;
use crate::admission;
use crate::context::Ctx;
use crate::status::ApiError;
use infrasim_store::{DeleteOptions, DeleteOutcome, ObjectKey};

/// One deletion, whatever asked for it.
pub(crate) struct Deletion {
    pub key: ObjectKey,
    pub options: DeleteOptions,
    /// Checked and computed in full, not applied (`dryRun=All`).
    pub dry: bool,
    /// Whether the validating admission sees this delete. An eviction's delete is admitted
    /// as the eviction's create, as kube-apiserver's eviction storage deletes with every
    /// admission check already passed.
    pub admit: bool,
}

/// What a deletion did, and what admission warned of.
pub(crate) struct Removed {
    pub outcome: DeleteOutcome,
    pub warnings: Vec<String>,
}

/// Takes `deletion` through the kind's checks, admission, the store and what follows.
pub(crate) async fn remove(ctx: &Ctx, deletion: Deletion) -> Result<Removed, ApiError> {
    let kind = kinds::of(ctx.info.custom, &ctx.info.group, &ctx.info.kind);
    kind.validate_delete(ctx, &deletion.key.name)?;
    let warnings = if deletion.admit {
        admit(ctx, &deletion.key, deletion.dry).await?
    } else {
        Vec::new()
    };
    let group = &ctx.state.group;
    let store_key = &ctx.info.store_key;
    let outcome = if deletion.dry {
        group.delete_dry_run(store_key, &deletion.key, &deletion.options)
    } else {
        group.delete(store_key, &deletion.key, &deletion.options)
    }
    .map_err(|e| ctx.store_error(e))?;
    // What follows a deletion is not for a dry run: nothing was marked or removed.
    let outcome = match deletion.dry {
        true => outcome,
        false => kind.after_delete(ctx, outcome),
    };
    Ok(Removed { outcome, warnings })
}

/// Whether the kind allows deleting `name` at all (a system namespace may not go), so a
/// DeleteCollection can pass over what one DELETE would be refused.
pub(crate) fn deletable(ctx: &Ctx, name: &str) -> bool {
    kinds::of(ctx.info.custom, &ctx.info.group, &ctx.info.kind)
        .validate_delete(ctx, name)
        .is_ok()
}

/// The validating webhooks' and policies' say on deleting `key` (if it exists: a missing
/// one is the store's 404 to report); their warnings.
async fn admit(ctx: &Ctx, key: &ObjectKey, dry_run: bool) -> Result<Vec<String>, ApiError> {
    let mut warnings = Vec::new();
    if !admission::has_validators(ctx) {
        return Ok(warnings);
    }
    let current = ctx
        .state
        .group
        .get(&ctx.info.store_key, key)
        .and_then(|o| o.to_value().ok());
    if let Some(old) = current {
        let subject = admission::Subject {
            operation: admission::Operation::Delete,
            object: None,
            old: Some(&old),
            dry_run,
        };
        admission::validate(ctx, &subject, &mut warnings).await?;
    }
    Ok(warnings)
}
