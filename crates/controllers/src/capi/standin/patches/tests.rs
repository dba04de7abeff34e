//! The patch engine over a class shaped like CAPV's topology class.

use super::variables::{with_builtin, Variables};
use super::*;
use serde_json::json;

fn object(v: Value) -> Variables {
    v.as_object().cloned().unwrap_or_default()
}

fn items() -> Vec<Item> {
    vec![
        Item {
            holder: Holder::InfrastructureCluster,
            template: json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "VSphereClusterTemplate",
                             "metadata": {"name": "c"}, "spec": {"template": {"spec": {}}}}),
            variables: Variables::new(),
        },
        Item {
            holder: Holder::ControlPlane,
            template: json!({"apiVersion": "controlplane.cluster.x-k8s.io/v1beta2", "kind": "KubeadmControlPlaneTemplate",
                             "metadata": {"name": "cp"}, "spec": {"template": {"spec": {"kubeadmConfigSpec": {}}}}}),
            variables: with_builtin(
                Variables::new(),
                "controlPlane",
                json!({"name": "c1-abc", "version": "v1.33.0"}),
            ),
        },
        Item {
            holder: Holder::DeploymentBootstrap("md-0".into()),
            template: json!({"apiVersion": "bootstrap.cluster.x-k8s.io/v1beta2", "kind": "KubeadmConfigTemplate",
                             "metadata": {"name": "w"}, "spec": {"template": {"spec": {}}}}),
            variables: with_builtin(
                object(json!({"sshKey": "ssh-md"})),
                "machineDeployment",
                json!({"class": "c-worker", "topologyName": "md-0"}),
            ),
        },
    ]
}

fn global() -> Variables {
    object(json!({
        "sshKey": "ssh-rsa AAA",
        "controlPlanePort": 6443,
        "controlPlaneIpAddr": "10.0.0.9",
        "infraServer": {"url": "https://vc.local", "thumbprint": "AB:CD"},
        "builtin": {"cluster": {"name": "c1", "namespace": "default"}},
    }))
}

fn users_patch(selector: Value, path: &str) -> Value {
    json!({"selector": selector, "jsonPatches": [{"op": "add", "path": path, "valueFrom": {"template":
        "- name: capv\n  sshAuthorizedKeys:\n  - '{{ .sshKey }}'\n  sudo: ALL=(ALL) NOPASSWD:ALL\n"}}]})
}

fn class_patches() -> Vec<Value> {
    let cp = json!({"apiVersion": "controlplane.cluster.x-k8s.io/v1beta2", "kind": "KubeadmControlPlaneTemplate",
                    "matchResources": {"controlPlane": true}});
    let worker = json!({"apiVersion": "bootstrap.cluster.x-k8s.io/v1beta2", "kind": "KubeadmConfigTemplate",
                        "matchResources": {"machineDeploymentClass": {"names": ["c-worker"]}}});
    let infra = json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "VSphereClusterTemplate",
                       "matchResources": {"infrastructureCluster": true}});
    vec![
        json!({"name": "createEmptyArrays", "definitions": [
            {"selector": cp, "jsonPatches": [{"op": "add", "path": "/spec/template/spec/kubeadmConfigSpec/files", "value": []}]}]}),
        json!({"name": "enableSSHIntoNodes", "enabledIf": "{{ if .sshKey }}true{{end}}", "definitions": [
            users_patch(cp.clone(), "/spec/template/spec/kubeadmConfigSpec/users"),
            users_patch(worker, "/spec/template/spec/users")]}),
        json!({"name": "infraClusterSubstitutions", "definitions": [{"selector": infra, "jsonPatches": [
            {"op": "add", "path": "/spec/template/spec/controlPlaneEndpoint",
             "valueFrom": {"template": "host: '{{ .controlPlaneIpAddr }}'\nport: {{ .controlPlanePort }}\n"}},
            {"op": "add", "path": "/spec/template/spec/server", "valueFrom": {"variable": "infraServer.url"}},
            {"op": "add", "path": "/metadata/name", "value": "renamed"}]}]}),
        json!({"name": "files", "definitions": [{"selector": cp, "jsonPatches": [
            {"op": "add", "path": "/spec/template/spec/kubeadmConfigSpec/files/-",
             "valueFrom": {"template": "path: /etc/{{ .builtin.controlPlane.name }}\ncontent: {{ printf \"%q\" .builtin.cluster.name }}"}}]}]}),
    ]
}

#[test]
fn patches_apply_in_order_to_the_templates_their_selectors_pick() {
    let mut items = items();
    apply(&class_patches(), &global(), &mut items).expect("patches apply");
    let infra = &items[0].template;
    assert_eq!(
        infra.pointer("/spec/template/spec/controlPlaneEndpoint"),
        Some(&json!({"host": "10.0.0.9", "port": 6443}))
    );
    assert_eq!(
        infra.pointer("/spec/template/spec/server"),
        Some(&json!("https://vc.local"))
    );
    // Only spec, labels and annotations are taken from a patched template.
    assert_eq!(infra["metadata"]["name"], "c");
    let cp = &items[1].template["spec"]["template"]["spec"]["kubeadmConfigSpec"];
    assert_eq!(cp["users"][0]["sshAuthorizedKeys"], json!(["ssh-rsa AAA"]));
    // The later patch appended to the array the first one made.
    assert_eq!(
        cp["files"],
        json!([{"path": "/etc/c1-abc", "content": "c1"}])
    );
    // A MachineDeployment's override wins over the Cluster's value.
    let worker = &items[2].template["spec"]["template"]["spec"];
    assert_eq!(worker["users"][0]["sshAuthorizedKeys"], json!(["ssh-md"]));
}

#[test]
fn a_patch_whose_enabled_if_is_not_true_changes_nothing() {
    let mut items = items();
    let mut global = global();
    global.insert("sshKey".into(), json!(""));
    items[2].variables.remove("sshKey");
    apply(&class_patches()[..2], &global, &mut items).expect("patches apply");
    assert!(items[1]
        .template
        .pointer("/spec/template/spec/kubeadmConfigSpec/users")
        .is_none());
    assert!(items[2]
        .template
        .pointer("/spec/template/spec/users")
        .is_none());
    assert_eq!(
        items[1]
            .template
            .pointer("/spec/template/spec/kubeadmConfigSpec/files"),
        Some(&json!([]))
    );
}

#[test]
fn errors_name_the_patch_the_template_kind_and_the_cause() {
    let mut items = items();
    let patches = vec![json!({"name": "p", "definitions": [{"selector": {
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "VSphereClusterTemplate",
        "matchResources": {"infrastructureCluster": true}},
        "jsonPatches": [{"op": "add", "path": "/spec/template/spec/server", "valueFrom": {"variable": "nope"}}]}]})];
    let err = apply(&patches, &global(), &mut items).unwrap_err();
    assert_eq!(
        err.0,
        "failed to generate patches for patch \"p\": failed to generate JSON patches for \"VSphereClusterTemplate\": \
         failed to calculate value: variable \"nope\" does not exist"
    );
    let bad_path = vec![json!({"name": "q", "definitions": [{"selector": {
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "VSphereClusterTemplate",
        "matchResources": {"infrastructureCluster": true}},
        "jsonPatches": [{"op": "replace", "path": "/spec/template/spec/missing/deep", "value": 1}]}]})];
    let err = apply(&bad_path, &global(), &mut items).unwrap_err();
    assert!(
        err.0.starts_with("failed to apply patches for patch \"q\""),
        "{err}"
    );
}

#[test]
fn external_patches_are_refused_with_the_reason() {
    let patches = vec![json!({"name": "ext", "external": {"generatePatchesExtension": "x"}})];
    let err = apply(&patches, &global(), &mut items()).unwrap_err();
    assert!(
        err.0.contains("external patches are not supported"),
        "{err}"
    );
}
