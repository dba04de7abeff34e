//! The ClusterClass controller: collects the class's variable definitions into
//! `status.variables` (where Cluster API's webhooks and tools read them, each marked as
//! defined `inline`), and reports `VariablesReady` and `RefVersionsUpToDate` (v1beta1:
//! `VariablesReconciled`) and `Paused`, as upstream's does. Variables of external patches
//! would come from Runtime Extensions, which the stand-in does not call: a class that asks
//! for them gets `VariablesReady` False with the reason.

use super::{apply_status, controller_for, paused, Core, Error, Reconciler};
use crate::capi::core::{ClusterClass, ClusterClassStatus};
use infrasim_controller_runtime::conditions::{self, Condition};
use infrasim_controller_runtime::reconcile::{Next, Reconcile};
use kube::api::Api;
use kube::ResourceExt;
use serde_json::{json, Value};
use std::sync::Arc;

const MANAGER: &str = "infrasim-capi-core/cluster_class";

pub(super) async fn run(core: Arc<Core>) {
    let controller = controller_for::<ClusterClass>(&core);
    let ctx = core.ctx.clone();
    infrasim_controller_runtime::reconcile::run(&ctx, controller, Arc::new(Reconciler::new(core)))
        .await;
}

impl Reconcile<ClusterClass> for Reconciler<ClusterClass> {
    type Error = Error;

    async fn apply(&self, class: Arc<ClusterClass>) -> Result<Next, Error> {
        let _running = infrasim_controller_runtime::metrics::reconciled("ClusterClass");
        let api: Api<ClusterClass> = self.api(&class.namespace().unwrap_or_default());
        let now = self.core.ctx.now();
        let mut status = class.status.clone().unwrap_or_default();
        let mut conds = status.conditions.take().unwrap_or_default();
        if conditions::set_paused(&mut conds, paused(class.as_ref(), false), now) {
            status.conditions = Some(conds);
            apply_status(&api, class.as_ref(), MANAGER, &status).await?;
            return Ok(Next::AwaitChange);
        }
        let (variables, ready) = variables(&class);
        conditions::set(&mut conds, ready, now);
        conditions::set(
            &mut conds,
            Condition::new("RefVersionsUpToDate", true, "RefVersionsUpToDate", ""),
            now,
        );
        conditions::sort(&mut conds);
        let mut old = conditions::to_v1beta1(&conds);
        for c in &mut old {
            if c.type_ == "VariablesReady" {
                c.type_ = "VariablesReconciled".into();
            }
        }
        let status = ClusterClassStatus {
            conditions: Some(conds),
            // Upstream leaves the list out when the class defines no variable.
            variables: (!variables.is_empty()).then_some(variables),
            observed_generation: class.metadata.generation,
            deprecated: Some(json!({"v1beta1": {"conditions": old}})),
        };
        apply_status(&api, class.as_ref(), MANAGER, &status).await?;
        Ok(Next::AwaitChange)
    }
}

/// The status's variables (sorted by name, as upstream keeps them) and `VariablesReady`.
fn variables(class: &ClusterClass) -> (Vec<Value>, Condition) {
    let mut out: Vec<Value> = class
        .spec
        .variables
        .iter()
        .flatten()
        .map(|v| {
            let mut definition = json!({"from": "inline", "required": v.get("required").cloned().unwrap_or(json!(false))});
            if let Some(schema) = v.get("schema") {
                definition["schema"] = schema.clone();
            }
            if let Some(meta) = v.get("deprecatedV1Beta1Metadata").or_else(|| v.get("metadata")) {
                definition["deprecatedV1Beta1Metadata"] = meta.clone();
            }
            json!({"name": v.get("name").cloned().unwrap_or(Value::Null),
                   "definitionsConflict": false, "definitions": [definition]})
        })
        .collect();
    out.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
    let discovering: Vec<&str> = class
        .spec
        .patches
        .iter()
        .flatten()
        .filter(|p| p.pointer("/external/discoverVariablesExtension").is_some())
        .filter_map(|p| p.get("name").and_then(Value::as_str))
        .collect();
    let ready = if discovering.is_empty() {
        Condition::new("VariablesReady", true, "VariablesReady", "")
    } else {
        Condition::new(
            "VariablesReady",
            false,
            "VariableDiscoveryFailed",
            format!(
                "VariableDiscovery failed: patches {} discover variables through Runtime Extensions, \
                 which infrasim's Cluster API stand-in does not call (run the real Cluster API with \
                 infrasim up --capi-core=external)",
                discovering.join(", ")
            ),
        )
    };
    (out, ready)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(spec: Value) -> ClusterClass {
        serde_json::from_value(
            json!({"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "ClusterClass",
            "metadata": {"name": "c"}, "spec": spec}),
        )
        .expect("a class")
    }

    #[test]
    fn inline_variables_are_listed_by_name_with_their_schema() {
        let c = class(json!({
            "controlPlane": {"templateRef": {"apiVersion": "a/v1", "kind": "K", "name": "n"}},
            "infrastructure": {"templateRef": {"apiVersion": "a/v1", "kind": "K", "name": "n"}},
            "variables": [
                {"name": "zeta", "required": true, "schema": {"openAPIV3Schema": {"type": "string"}}},
                {"name": "alpha", "required": false, "schema": {"openAPIV3Schema": {"type": "integer"}}}]}));
        let (vars, ready) = variables(&c);
        assert_eq!(vars.len(), 2);
        assert_eq!(vars[0]["name"], "alpha");
        assert_eq!(
            vars[1]["definitions"],
            json!([{"from": "inline", "required": true, "schema": {"openAPIV3Schema": {"type": "string"}}}])
        );
        assert_eq!(vars[1]["definitionsConflict"], false);
        assert!(ready.status == "True", "{ready:?}");
    }

    #[test]
    fn variables_from_runtime_extensions_are_reported_as_not_discovered() {
        let c = class(json!({
            "controlPlane": {"templateRef": {"apiVersion": "a/v1", "kind": "K", "name": "n"}},
            "infrastructure": {"templateRef": {"apiVersion": "a/v1", "kind": "K", "name": "n"}},
            "patches": [{"name": "ext", "external": {"discoverVariablesExtension": "d.x"}}]}));
        let (_, ready) = variables(&c);
        assert_eq!(ready.status, "False");
        assert_eq!(ready.reason, "VariableDiscoveryFailed");
        assert!(ready.message.contains("ext"));
    }
}
