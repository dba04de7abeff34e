//! Dynamic admission: the webhooks of `MutatingWebhookConfiguration`s and
//! `ValidatingWebhookConfiguration`s (`admissionregistration.k8s.io/v1`), called with an
//! `admission.k8s.io/v1` `AdmissionReview` as kube-apiserver calls them.
//!
//! The write path calls [`mutate`] after it has prepared an object (defaults applied) and
//! [`validate`] after the kind's own validation, so a webhook sees what would be stored.
//! Mutating webhooks run one after another in the order of their configurations' names and
//! then their own, each seeing the previous ones' patches, and those that ask for it
//! (`reinvocationPolicy: IfNeeded`) run once more if a later one changed the object;
//! validating webhooks all see the final object. A webhook that cannot be reached, answers
//! nonsense or takes longer than its `timeoutSeconds` fails the request, unless its
//! `failurePolicy` is `Ignore`.

mod call;
mod matching;
mod policy;
mod spec;
mod status;
mod typecheck;
pub(crate) mod webhooks;

use crate::context::Ctx;
use crate::status::ApiError;
use crate::values::At;
use infrasim_store::ReadAt;
use serde_json::{json, Value};
use std::sync::Arc;

pub(crate) use matching::Operation;
pub(crate) use webhooks::Webhook;

/// What follows a stored write of a ValidatingAdmissionPolicy: its status, as
/// kube-apiserver's status controller writes it.
pub(crate) fn after_policy_write(state: &crate::state::State, name: &str) {
    status::reconcile(state, name);
}

/// The write-time checks of the admission kinds kube-apiserver validates beyond their
/// metadata: field causes of a ValidatingAdmissionPolicy or its binding (none for others).
pub(crate) fn validate_configuration(kind: &str, object: &Value) -> Vec<(String, String)> {
    match kind {
        "ValidatingAdmissionPolicy" => spec::validate_policy(object),
        "ValidatingAdmissionPolicyBinding" => spec::validate_binding(object),
        _ => Vec::new(),
    }
}

/// The object being admitted, and the one it replaces.
pub(crate) struct Subject<'a> {
    pub operation: Operation,
    pub object: Option<&'a Value>,
    pub old: Option<&'a Value>,
    pub dry_run: bool,
}

const MUTATING: &str = "mutatingwebhookconfigurations.admissionregistration.k8s.io";
const VALIDATING: &str = "validatingwebhookconfigurations.admissionregistration.k8s.io";

/// The webhooks of every configuration in `resource`, in the order they run.
fn webhooks(ctx: &Ctx, resource: &'static str) -> Arc<Vec<Webhook>> {
    let Ok(snapshot) = ctx.state.group.snapshot(resource, ReadAt::Latest) else {
        return Arc::default();
    };
    let versions: Vec<u64> = snapshot
        .objects
        .values()
        .map(|o| o.meta.resource_version)
        .collect();
    let cache = &ctx.state.webhook_configs.0;
    if let Some((seen, hooks)) = cache
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get(resource)
    {
        if *seen == versions {
            return hooks.clone();
        }
    }
    // The snapshot is ordered by key, and configurations are cluster-scoped: by name.
    let mut hooks = Vec::new();
    for object in snapshot.objects.values() {
        let Ok(config) = object.to_value() else {
            continue;
        };
        for spec in config["webhooks"].as_array().into_iter().flatten() {
            hooks.push(Webhook {
                name: spec["name"].as_str().unwrap_or("").to_string(),
                spec: Arc::new(spec.clone()),
                target: None,
            });
        }
    }
    let hooks = Arc::new(hooks);
    cache
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(resource, (versions, hooks.clone()));
    hooks
}

/// Whether the request's kind is one admission never applies to: the webhook
/// configurations themselves, so that a broken webhook can always be removed.
fn exempt(ctx: &Ctx) -> bool {
    ctx.info.group == "admissionregistration.k8s.io"
}

/// Runs the mutating webhooks that match on `object`, collecting their warnings; whether
/// any of them changed it.
pub(crate) async fn mutate(
    ctx: &Ctx,
    subject: &Subject<'_>,
    object: &mut Value,
    warnings: &mut Vec<String>,
) -> Result<bool, ApiError> {
    if exempt(ctx) {
        return Ok(false);
    }
    let hooks = matching_hooks(ctx, MUTATING, subject, Some(object));
    if hooks.is_empty() {
        return Ok(false);
    }
    // The last webhook that changed the object, to know whom to run again.
    let mut last_change = None;
    for (i, hook) in hooks.iter().enumerate() {
        if call_mutating(ctx, hook, subject, object, warnings).await? {
            last_change = Some(i);
        }
    }
    if let Some(last) = last_change {
        for hook in hooks[..last].iter().filter(|h| reinvoked(h)) {
            call_mutating(ctx, hook, subject, object, warnings).await?;
        }
    }
    Ok(last_change.is_some())
}

fn reinvoked(hook: &Webhook) -> bool {
    hook.spec["reinvocationPolicy"].as_str() == Some("IfNeeded")
}

/// The webhooks of `configurations` this request goes to, each with the version it sees.
fn matching_hooks(
    ctx: &Ctx,
    configurations: &'static str,
    subject: &Subject<'_>,
    object: Option<&Value>,
) -> Vec<Webhook> {
    webhooks(ctx, configurations)
        .iter()
        .filter_map(|hook| {
            let target = matching::matches(ctx, hook, subject, object)?;
            Some(Webhook {
                target,
                ..hook.clone()
            })
        })
        .collect()
}

/// The object and the old one as `hook` sees them: converted to its version when it
/// matched an equivalent one, as they are otherwise.
async fn in_hook_version(
    ctx: &Ctx,
    hook: &Webhook,
    object: Option<&Value>,
    old: Option<&Value>,
) -> Result<(Option<Value>, Option<Value>), ApiError> {
    let Some(target) = &hook.target else {
        return Ok((object.cloned(), old.cloned()));
    };
    let mut out = Vec::new();
    for v in [object, old] {
        out.push(match v {
            Some(v) => crate::conversion::convert(
                &ctx.state.webhooks(),
                &ctx.info,
                vec![v.clone()],
                &target.api_version,
            )
            .await?
            .pop(),
            None => None,
        });
    }
    let old = out.pop().flatten();
    Ok((out.pop().flatten(), old))
}

/// Calls one mutating webhook and applies its patch; whether the object changed.
async fn call_mutating(
    ctx: &Ctx,
    hook: &Webhook,
    subject: &Subject<'_>,
    object: &mut Value,
    warnings: &mut Vec<String>,
) -> Result<bool, ApiError> {
    if hook.target.is_some() {
        return call_mutating_converted(ctx, hook, subject, object, warnings).await;
    }
    let current = Subject {
        object: Some(object),
        ..*subject
    };
    let Some(response) = call::review(ctx, hook, &current).await? else {
        return Ok(false);
    };
    warnings.extend(call::warnings(&response));
    call::denied(hook, &response)?;
    let Some(patch) = call::patch(hook, &response)? else {
        return Ok(false);
    };
    // Through `scale` the webhook saw, and patched, the Scale: its replicas are carried
    // into the object, as kube-apiserver's scale storage takes them from the admitted Scale.
    let scale = ctx.info.scale.as_ref().filter(|_| through_scale(ctx));
    let mut patched = match scale {
        Some(paths) => paths.scale_of(object),
        None => object.clone(),
    };
    json_patch::patch(&mut patched, &patch).map_err(|e| {
        ApiError::internal(format!(
            "admission webhook \"{}\" returned a patch that cannot be applied: {e}",
            hook.name
        ))
    })?;
    let changed = match scale {
        Some(paths) => {
            let mut updated = object.clone();
            paths.set_spec_replicas(&mut updated, patched.at("/spec/replicas").cloned());
            updated
        }
        None => patched,
    };
    if changed == *object {
        return Ok(false);
    }
    *object = changed;
    Ok(true)
}

/// [`call_mutating`] for a webhook that sees another version of the resource: the object
/// goes to it converted, its patch is applied there, and the result comes back converted.
async fn call_mutating_converted(
    ctx: &Ctx,
    hook: &Webhook,
    subject: &Subject<'_>,
    object: &mut Value,
    warnings: &mut Vec<String>,
) -> Result<bool, ApiError> {
    let (seen, old) = in_hook_version(ctx, hook, Some(object), subject.old).await?;
    let seen = seen.unwrap_or(Value::Null);
    let current = Subject {
        object: Some(&seen),
        old: old.as_ref(),
        ..*subject
    };
    let Some(response) = call::review(ctx, hook, &current).await? else {
        return Ok(false);
    };
    warnings.extend(call::warnings(&response));
    call::denied(hook, &response)?;
    let Some(patch) = call::patch(hook, &response)? else {
        return Ok(false);
    };
    let mut patched = seen.clone();
    json_patch::patch(&mut patched, &patch).map_err(|e| {
        ApiError::internal(format!(
            "admission webhook \"{}\" returned a patch that cannot be applied: {e}",
            hook.name
        ))
    })?;
    if patched == seen {
        return Ok(false);
    }
    let back = crate::conversion::convert(
        &ctx.state.webhooks(),
        &ctx.info,
        vec![patched],
        &ctx.info.api_version,
    )
    .await?;
    *object = back.into_iter().next().unwrap_or(Value::Null);
    Ok(true)
}

/// Whether any validating policy binding or webhook configuration exists: a delete reads
/// and decodes the object it admits only then.
pub(crate) fn has_validators(ctx: &Ctx) -> bool {
    [VALIDATING, policy::BINDINGS].iter().any(|resource| {
        ctx.state
            .group
            .snapshot(resource, ReadAt::Latest)
            .is_ok_and(|s| !s.objects.is_empty())
    })
}

/// Runs the validating webhooks that match; their warnings, or the first refusal.
pub(crate) async fn validate(
    ctx: &Ctx,
    subject: &Subject<'_>,
    warnings: &mut Vec<String>,
) -> Result<(), ApiError> {
    if exempt(ctx) {
        return Ok(());
    }
    // In-process policies first: they cost no round trip.
    policy::validate(ctx, subject, warnings)?;
    let hooks = matching_hooks(ctx, VALIDATING, subject, subject.object);
    // kube-apiserver calls them in parallel; their answers are read in order.
    let calls = hooks.iter().map(|hook| async move {
        let (object, old) = in_hook_version(ctx, hook, subject.object, subject.old).await?;
        let seen = Subject {
            object: object.as_ref(),
            old: old.as_ref(),
            ..*subject
        };
        call::review(ctx, hook, &seen).await
    });
    let answers = futures::future::join_all(calls).await;
    for (hook, answer) in hooks.iter().zip(answers) {
        if let Some(response) = answer? {
            warnings.extend(call::warnings(&response));
            call::denied(hook, &response)?;
        }
    }
    Ok(())
}

/// What admission sees of `object`: through the `scale` subresource its autoscaling/v1
/// Scale, as kube-apiserver admits a scale; otherwise the object in the version the client
/// spoke.
fn seen(ctx: &Ctx, object: Option<&Value>) -> Value {
    seen_as(ctx, &ctx.info, object)
}

/// [`seen`], for a webhook that sees the object as `info`'s (an equivalent version).
fn seen_as(ctx: &Ctx, info: &crate::resources::ResourceInfo, object: Option<&Value>) -> Value {
    let Some(object) = object else {
        return Value::Null;
    };
    match (&ctx.info.scale, through_scale(ctx)) {
        (Some(paths), true) => paths.scale_of(object),
        _ => {
            let mut o = object.clone();
            o["apiVersion"] = json!(info.api_version);
            o
        }
    }
}

/// Whether the request writes through the `scale` subresource.
fn through_scale(ctx: &Ctx) -> bool {
    ctx.path.subresource.as_deref() == Some("scale") && ctx.info.scale.is_some()
}

/// The kind a review names: Scale through `scale`, else the resource's own.
fn admitted_kind(ctx: &Ctx) -> Value {
    admitted_kind_as(ctx, &ctx.info)
}

/// [`admitted_kind`] of the resource as `info` (an equivalent version) names it.
fn admitted_kind_as(ctx: &Ctx, info: &crate::resources::ResourceInfo) -> Value {
    if through_scale(ctx) {
        return json!({"group": "autoscaling", "version": "v1", "kind": "Scale"});
    }
    json!({"group": info.group, "version": info.version, "kind": info.kind})
}

/// The `request` CEL expressions see (match conditions, policies): what is being done, to
/// what, by whom.
fn request_attributes(ctx: &Ctx, subject: &Subject<'_>) -> Value {
    let info = &ctx.info;
    json!({
        "operation": subject.operation.name(),
        "namespace": ctx.namespace(),
        "name": ctx.path.name.clone().unwrap_or_default(),
        "userInfo": user_info(ctx),
        "dryRun": subject.dry_run,
        "kind": admitted_kind(ctx),
        "resource": {"group": info.group, "version": info.version, "resource": info.plural},
    })
}

/// The `userInfo` of the request, as a review carries it.
fn user_info(ctx: &Ctx) -> Value {
    json!({"username": ctx.identity.user, "groups": ctx.identity.groups})
}
