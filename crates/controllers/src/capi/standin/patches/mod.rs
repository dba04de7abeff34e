//! ClusterClass inline patches, applied as Cluster API's topology controller applies them:
//! the class's templates are collected into items, each with what holds it (the Cluster's
//! infrastructure or control plane, the control plane's machines, a MachineDeployment's
//! bootstrap or machines) and the variables it sees; every patch in the class's order turns
//! into JSON patches per item (selector, `enabledIf`, `value` / `valueFrom.variable` /
//! `valueFrom.template`) applied to the items as the next patch finds them; only `spec` and
//! the template's labels and annotations are taken from a patched template. The topology
//! then makes its objects from the patched templates.
//!
//! Any error (a template that fails, a variable that is missing, a JSON patch that does not
//! apply) fails the whole run: nothing half-patched is ever written. External patches
//! (Runtime Extensions) are refused with a message, as the stand-in has no Runtime SDK.

mod inline;
pub mod variables;

use serde_json::Value;
use variables::Variables;

/// What holds a template: which of upstream's holder references the item has.
#[derive(Debug, Clone, PartialEq)]
pub enum Holder {
    /// The Cluster's `spec.infrastructureRef`.
    InfrastructureCluster,
    /// The Cluster's `spec.controlPlaneRef`.
    ControlPlane,
    /// The control plane's `spec.machineTemplate.spec.infrastructureRef`.
    ControlPlaneMachines,
    /// A MachineDeployment's `spec.template.spec.bootstrap.configRef`; the topology's name.
    DeploymentBootstrap(String),
    /// A MachineDeployment's `spec.template.spec.infrastructureRef`; the topology's name.
    DeploymentInfrastructure(String),
}

/// A template the patches may change.
#[derive(Debug, Clone)]
pub struct Item {
    pub holder: Holder,
    /// The template object (apiVersion, kind, metadata, spec).
    pub template: Value,
    /// What this template's patches see beyond the Cluster's variables: the overrides and
    /// the `builtin` of its control plane or MachineDeployment.
    pub variables: Variables,
}

/// Why the patches could not be applied, worded as upstream wraps it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct PatchError(pub String);

/// Applies the class's `patches`, in order, to `items`. `global` holds the Cluster's
/// variables and `builtin.cluster`.
pub fn apply(patches: &[Value], global: &Variables, items: &mut [Item]) -> Result<(), PatchError> {
    for patch in patches {
        let name = patch.get("name").and_then(Value::as_str).unwrap_or("");
        if patch.get("external").is_some_and(|e| !e.is_null()) {
            return Err(PatchError(format!(
                "failed to create patch generator for patch {name:?}: external patches are not supported: \
                 infrasim's Cluster API stand-in has no Runtime SDK (run the real Cluster API with \
                 infrasim up --capi-core=external)"
            )));
        }
        let generated = inline::generate(patch, global, items).map_err(|e| {
            PatchError(format!(
                "failed to generate patches for patch {name:?}: {e}"
            ))
        })?;
        for (index, ops) in generated {
            let item = &mut items[index];
            apply_ops(&mut item.template, ops).map_err(|e| {
                PatchError(format!(
                    "failed to apply patches for patch {name:?}: failed to apply patch: error applying json patch (RFC6902): {e}"
                ))
            })?;
        }
    }
    Ok(())
}

/// Applies `ops` to a copy of `template`, then takes from the copy only what upstream takes
/// (`spec`, and the labels and annotations), so a patch cannot rename or retype a template.
fn apply_ops(template: &mut Value, ops: Vec<Value>) -> Result<(), String> {
    if ops.is_empty() {
        return Ok(());
    }
    let patch: json_patch::Patch =
        serde_json::from_value(Value::Array(ops)).map_err(|e| e.to_string())?;
    let mut patched = template.clone();
    json_patch::patch(&mut patched, &patch).map_err(|e| e.to_string())?;
    for pointer in ["/spec", "/metadata/labels", "/metadata/annotations"] {
        let (parent, key) = pointer.rsplit_once('/').unwrap_or(("", pointer));
        let taken = patched.pointer(pointer).cloned();
        let Some(holder) = template.pointer_mut(parent).and_then(Value::as_object_mut) else {
            continue;
        };
        match taken {
            Some(v) => {
                holder.insert(key.to_string(), v);
            }
            None => {
                holder.remove(key);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
