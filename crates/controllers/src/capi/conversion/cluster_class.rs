//! `ClusterClass` between v1beta1 and v1beta2, after upstream's conversion:
//! - template references: v1beta1's `ref` (a full object reference, the class's namespace
//!   filled in) is v1beta2's `templateRef` `{apiVersion, kind, name}`; a worker class's
//!   `template.{metadata,bootstrap,infrastructure}` come up one level;
//! - naming strategies are `naming`, node timeouts `deletion.*Seconds`, health checks grouped
//!   as in a Cluster's topology, a MachineDeployment class's `strategy` is `rollout` /
//!   `deletion.order` / `healthCheck.remediation.maxInFlight`;
//! - variables' `metadata` is `deprecatedV1Beta1Metadata`; external patches name their
//!   extensions `generatePatchesExtension` and `validateTopologyExtension`;
//! - conditions sit as for the other kinds.

use super::{
    at, bool_intent, carry, child, conditions_from_hub, conditions_to_hub, healthcheck,
    insert_nonempty, machine, namespace_of, object_at, take_object, Object, Restored, Versions,
};
use serde_json::{json, Value};

/// A worker class's lists: MachineDeployments and MachinePools convert alike here.
const WORKER_LISTS: [&str; 2] = ["machineDeployments", "machinePools"];

/// `ClusterClass` to v1beta2.
pub(super) fn to_hub(o: &mut Object, restored: Restored) -> Result<(), String> {
    if let Some(spec) = object_at(o, &["spec"]) {
        if let Some(infrastructure) = object_at(spec, &["infrastructure"]) {
            ref_to_template_ref(infrastructure);
        }
        if let Some(naming) = take_object(spec, "infrastructureNamingStrategy") {
            insert_nonempty(child(spec, "infrastructure"), "naming", naming);
        }
        if let Some(cp) = object_at(spec, &["controlPlane"]) {
            control_plane_to_hub(cp);
        }
        for list in WORKER_LISTS {
            for class in items(spec, &["workers", list]) {
                worker_to_hub(class, list == "machineDeployments");
            }
        }
        for variable in items(spec, &["variables"]) {
            rename(variable, "metadata", "deprecatedV1Beta1Metadata");
            // A plain bool in v1beta1, always written and always read.
            variable.entry("required").or_insert(json!(false));
        }
        for patch in items(spec, &["patches"]) {
            if let Some(external) = object_at(patch, &["external"]) {
                rename(external, "generateExtension", "generatePatchesExtension");
                rename(external, "validateExtension", "validateTopologyExtension");
            }
        }
        if let Some(restored) = restored.and_then(|r| r.get("spec")) {
            restore_spec_intent(spec, restored);
        }
    }
    if let Some(status) = object_at(o, &["status"]) {
        status_to_hub(status, restored.and_then(|r| r.get("status")));
    }
    Ok(())
}

/// `ClusterClass` to v1beta1.
pub(super) fn from_hub(o: &mut Object, _: &Versions) -> Result<(), String> {
    let namespace = namespace_of(o);
    if let Some(spec) = object_at(o, &["spec"]) {
        if let Some(infrastructure) = object_at(spec, &["infrastructure"]) {
            let naming = take_object(infrastructure, "naming");
            template_ref_to_ref(infrastructure, &namespace);
            if let Some(naming) = naming.filter(has_template) {
                spec.insert("infrastructureNamingStrategy".into(), Value::Object(naming));
            }
        }
        if let Some(cp) = object_at(spec, &["controlPlane"]) {
            control_plane_from_hub(cp, &namespace);
        }
        for list in WORKER_LISTS {
            for class in items(spec, &["workers", list]) {
                worker_from_hub(class, &namespace, list == "machineDeployments");
            }
        }
        for variable in items(spec, &["variables"]) {
            rename(variable, "deprecatedV1Beta1Metadata", "metadata");
            variable.entry("required").or_insert(json!(false));
        }
        for patch in items(spec, &["patches"]) {
            if let Some(external) = object_at(patch, &["external"]) {
                rename(external, "generatePatchesExtension", "generateExtension");
                rename(external, "validateTopologyExtension", "validateExtension");
            }
        }
        drop_false_spec_flags(spec);
    }
    status_from_hub(child(o, "status"));
    Ok(())
}

/// The objects of the list at `path` of `o`.
fn items<'a>(o: &'a mut Object, path: &[&str]) -> impl Iterator<Item = &'a mut Object> {
    let (parent, last) = path.split_at(path.len() - 1);
    object_at(o, parent)
        .and_then(|p| p.get_mut(last[0]))
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
        .filter_map(Value::as_object_mut)
}

/// Moves `from` to `to` within `o`.
fn rename(o: &mut Object, from: &str, to: &str) {
    if let Some(v) = o.remove(from) {
        o.insert(to.into(), v);
    }
}

fn has_template(naming: &Object) -> bool {
    naming
        .get("template")
        .and_then(Value::as_str)
        .is_some_and(|t| !t.is_empty())
}

/// `{ref: {apiVersion, kind, name, namespace}}` as `{templateRef: {apiVersion, kind, name}}`.
fn ref_to_template_ref(holder: &mut Object) {
    if let Some(reference) = holder.remove("ref") {
        let template_ref = json!({
            "apiVersion": reference.get("apiVersion").cloned().unwrap_or(json!("")),
            "kind": reference.get("kind").cloned().unwrap_or(json!("")),
            "name": reference.get("name").cloned().unwrap_or(json!("")),
        });
        holder.insert("templateRef".into(), template_ref);
    }
}

/// The way back, in the class's namespace.
fn template_ref_to_ref(holder: &mut Object, namespace: &str) {
    if let Some(mut reference) = take_object(holder, "templateRef") {
        reference.insert("namespace".into(), json!(namespace));
        holder.insert("ref".into(), Value::Object(reference));
    }
}

fn control_plane_to_hub(cp: &mut Object) {
    ref_to_template_ref(cp);
    if let Some(infrastructure) = object_at(cp, &["machineInfrastructure"]) {
        ref_to_template_ref(infrastructure);
    }
    if let Some(mhc) = take_object(cp, "machineHealthCheck") {
        insert_nonempty(cp, "healthCheck", healthcheck::to_hub(mhc));
    }
    if let Some(naming) = take_object(cp, "namingStrategy") {
        insert_nonempty(cp, "naming", naming);
    }
    healthcheck::timeouts_to_hub(cp);
}

fn control_plane_from_hub(cp: &mut Object, namespace: &str) {
    template_ref_to_ref(cp, namespace);
    let infrastructure = take_object(cp, "machineInfrastructure")
        .and_then(|mut i| take_object(&mut i, "templateRef"))
        .filter(|r| {
            r.get("name")
                .and_then(Value::as_str)
                .is_some_and(|n| !n.is_empty())
        });
    if let Some(mut reference) = infrastructure {
        reference.insert("namespace".into(), json!(namespace));
        cp.insert("machineInfrastructure".into(), json!({"ref": reference}));
    }
    if let Some(hc) = take_object(cp, "healthCheck") {
        insert_nonempty(
            cp,
            "machineHealthCheck",
            healthcheck::from_hub(hc, namespace),
        );
    }
    if let Some(naming) = take_object(cp, "naming").filter(has_template) {
        cp.insert("namingStrategy".into(), Value::Object(naming));
    }
    healthcheck::timeouts_from_hub(cp);
}

/// A MachineDeployment (`deployment`) or MachinePool class to v1beta2.
fn worker_to_hub(class: &mut Object, deployment: bool) {
    if let Some(mut template) = take_object(class, "template") {
        for key in ["bootstrap", "infrastructure"] {
            if let Some(mut holder) = take_object(&mut template, key) {
                ref_to_template_ref(&mut holder);
                class.insert(key.into(), Value::Object(holder));
            }
        }
        carry(&mut template, "metadata", class, "metadata");
    }
    if let Some(naming) = take_object(class, "namingStrategy") {
        insert_nonempty(class, "naming", naming);
    }
    if deployment {
        let mut health = take_object(class, "machineHealthCheck")
            .map(healthcheck::to_hub)
            .unwrap_or_default();
        if let Some(in_flight) = machine::strategy_to_hub(class) {
            child(&mut health, "remediation").insert("maxInFlight".into(), in_flight);
        }
        insert_nonempty(class, "healthCheck", health);
    }
    healthcheck::timeouts_to_hub(class);
}

fn worker_from_hub(class: &mut Object, namespace: &str, deployment: bool) {
    let mut template = Object::new();
    for key in ["bootstrap", "infrastructure"] {
        if let Some(mut holder) = take_object(class, key) {
            template_ref_to_ref(&mut holder, namespace);
            template.insert(key.into(), Value::Object(holder));
        }
    }
    carry(class, "metadata", &mut template, "metadata");
    class.insert("template".into(), Value::Object(template));
    if let Some(naming) = take_object(class, "naming").filter(has_template) {
        class.insert("namingStrategy".into(), Value::Object(naming));
    }
    if deployment {
        let mut health = take_object(class, "healthCheck");
        let in_flight = health
            .as_mut()
            .and_then(|h| h.get_mut("remediation"))
            .and_then(Value::as_object_mut)
            .and_then(|r| r.remove("maxInFlight"));
        machine::strategy_from_hub(class, in_flight);
        if let Some(health) = health {
            insert_nonempty(
                class,
                "machineHealthCheck",
                healthcheck::from_hub(health, namespace),
            );
        }
    } else {
        healthcheck::timeouts_from_hub(class);
    }
    if class.get("failureDomain") == Some(&json!("")) {
        class.remove("failureDomain");
    }
}

/// The booleans v1beta1 leaves out when false (patch selectors, variable schemas), set to
/// false where the hub had said so.
fn restore_spec_intent(spec: &mut Object, restored: &Value) {
    let restored_patches = restored.get("patches").and_then(Value::as_array);
    for patch in items(spec, &["patches"]) {
        let name = patch.get("name").cloned();
        let before = restored_patches
            .into_iter()
            .flatten()
            .find(|p| p.get("name") == name.as_ref());
        let definitions = patch.get_mut("definitions").and_then(Value::as_array_mut);
        for (i, definition) in definitions.into_iter().flatten().enumerate() {
            let path = ["selector", "matchResources"];
            let Some(resources) = definition.as_object_mut().and_then(|d| object_at(d, &path))
            else {
                continue;
            };
            let was = before
                .and_then(|p| p.get("definitions"))
                .and_then(|d| d.get(i));
            let was = was.and_then(|d| at(d, &path));
            bool_intent(resources, "controlPlane", was);
            bool_intent(resources, "infrastructureCluster", was);
        }
    }
    let restored_variables = restored.get("variables").and_then(Value::as_array);
    for variable in items(spec, &["variables"]) {
        let name = variable.get("name").cloned();
        let before = restored_variables
            .into_iter()
            .flatten()
            .find(|v| v.get("name") == name.as_ref());
        let path = ["schema", "openAPIV3Schema"];
        if let Some(schema) = object_at(variable, &path) {
            schema_intent(schema, before.and_then(|b| at(b, &path)));
        }
    }
}

/// The booleans of a variable's schema that v1beta1 leaves out when false.
const SCHEMA_FLAGS: [&str; 5] = [
    "uniqueItems",
    "exclusiveMaximum",
    "exclusiveMinimum",
    "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-int-or-string",
];

/// The schema's flags set to false where the hub had said so, through the whole schema.
fn schema_intent(schema: &mut Object, before: Option<&Value>) {
    walk_schema(schema, before, &mut |node, was| {
        for flag in SCHEMA_FLAGS {
            bool_intent(node, flag, was);
        }
    });
}

/// The schema's false flags left out, through the whole schema, as v1beta1 writes them.
fn drop_false_flags(schema: &mut Object) {
    walk_schema(schema, None, &mut |node, _| {
        for flag in SCHEMA_FLAGS {
            if node.get(flag) == Some(&json!(false)) {
                node.remove(flag);
            }
        }
    });
}

/// Visits every node of a schema with the node at the same place of `before`, if any.
fn walk_schema(
    schema: &mut Object,
    before: Option<&Value>,
    visit: &mut dyn FnMut(&mut Object, Option<&Value>),
) {
    visit(schema, before);
    if let Some(properties) = object_at(schema, &["properties"]) {
        for (name, property) in properties.iter_mut() {
            let was = before
                .and_then(|b| b.get("properties"))
                .and_then(|p| p.get(name));
            if let Some(property) = property.as_object_mut() {
                walk_schema(property, was, visit);
            }
        }
    }
    for key in ["items", "additionalProperties", "not"] {
        if let Some(nested) = object_at(schema, &[key]) {
            walk_schema(nested, before.and_then(|b| b.get(key)), visit);
        }
    }
    for key in ["allOf", "oneOf", "anyOf"] {
        let list = schema.get_mut(key).and_then(Value::as_array_mut);
        for (i, nested) in list.into_iter().flatten().enumerate() {
            let was = before.and_then(|b| b.get(key)).and_then(|l| l.get(i));
            if let Some(nested) = nested.as_object_mut() {
                walk_schema(nested, was, visit);
            }
        }
    }
}

/// What v1beta1 writes of a hub spec's patches and variables: false flags left out.
fn drop_false_spec_flags(spec: &mut Object) {
    for patch in items(spec, &["patches"]) {
        for definition in items(patch, &["definitions"]) {
            if let Some(resources) = object_at(definition, &["selector", "matchResources"]) {
                for flag in ["controlPlane", "infrastructureCluster"] {
                    if resources.get(flag) == Some(&json!(false)) {
                        resources.remove(flag);
                    }
                }
            }
        }
    }
    for variable in items(spec, &["variables"]) {
        if let Some(schema) = object_at(variable, &["schema", "openAPIV3Schema"]) {
            drop_false_flags(schema);
        }
    }
}

fn status_to_hub(status: &mut Object, restored: Option<&Value>) {
    conditions_to_hub(status, &[], &[]);
    let restored_variables = restored
        .and_then(|r| r.get("variables"))
        .and_then(Value::as_array);
    for variable in items(status, &["variables"]) {
        let name = variable.get("name").cloned();
        let before = restored_variables
            .into_iter()
            .flatten()
            .find(|v| v.get("name") == name.as_ref());
        bool_intent(variable, "definitionsConflict", before);
        let definitions_before = before.and_then(|b| b.get("definitions"));
        for definition in items(variable, &["definitions"]) {
            rename(definition, "metadata", "deprecatedV1Beta1Metadata");
            definition.entry("required").or_insert(json!(false));
            let from = definition.get("from").cloned();
            let was = definitions_before
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .find(|d| d.get("from") == from.as_ref());
            let path = ["schema", "openAPIV3Schema"];
            if let Some(schema) = object_at(definition, &path) {
                schema_intent(schema, was.and_then(|d| at(d, &path)));
            }
        }
    }
}

fn status_from_hub(status: &mut Object) {
    conditions_from_hub(status, &[], &[]);
    for variable in items(status, &["variables"]) {
        // A plain bool in v1beta1, always written.
        variable
            .entry("definitionsConflict")
            .or_insert(json!(false));
        for definition in items(variable, &["definitions"]) {
            rename(definition, "deprecatedV1Beta1Metadata", "metadata");
            definition.entry("required").or_insert(json!(false));
            if let Some(schema) = object_at(definition, &["schema", "openAPIV3Schema"]) {
                drop_false_flags(schema);
            }
        }
    }
}
