//! The DaemonSet upstream runs per Vino (libvirt, sushy-tools and vino-builder on every
//! selected Node), as an object: `<cr-namespace>-<cr-name>` in the runtime namespace, from
//! the template ConfigMap the Vino names (`spec.daemonSetOptions.namespacedName`, else
//! `vino-daemonset-template` in the runtime namespace; key `template`), or, where there is
//! none, a template of the shipped one's shape; its pods select the Vino's Nodes, carry
//! the `vino.airshipit.org/cr-name`/`cr-namespace` labels, and every container gets the BMC
//! credentials as `BASIC_AUTH_USERNAME`/`BASIC_AUTH_PASSWORD`. Here nothing in the pods does
//! the work (the vCenter holds the VMs and serves their BMCs): the objects are what an
//! operator expects `kubectl get` to show, and their pods run where a kubelet runs.

use super::types::Vino;
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use kube::ResourceExt;
use serde_json::{json, Value};

/// The template ConfigMap's default name.
pub const TEMPLATE: &str = "vino-daemonset-template";

/// The DaemonSet's name for `vino`.
pub fn name_of(vino: &Vino) -> String {
    format!(
        "{}-{}",
        vino.namespace().unwrap_or_else(|| "default".into()),
        vino.name_any()
    )
}

/// The DaemonSet `vino` asks for, from `template` (a DaemonSet, as YAML-decoded JSON).
pub fn daemon_set(vino: &Vino, runtime: &str, mut template: Value) -> Value {
    let labels = json!({
        "vino.airshipit.org/cr-name": vino.name_any(),
        "vino.airshipit.org/cr-namespace": vino.namespace().unwrap_or_else(|| "default".into()),
    });
    template["apiVersion"] = json!("apps/v1");
    template["kind"] = json!("DaemonSet");
    template["metadata"] = json!({"name": name_of(vino), "namespace": runtime});
    merge(&mut template["spec"]["selector"]["matchLabels"], &labels);
    merge(
        &mut template["spec"]["template"]["metadata"]["labels"],
        &labels,
    );
    let selector = vino
        .spec
        .node_selector
        .as_ref()
        .map(|s| json!(s.match_labels))
        .unwrap_or_else(|| json!({}));
    template["spec"]["template"]["spec"]["nodeSelector"] = selector;
    let c = &vino.spec.bmc_credentials;
    let auth = [
        ("BASIC_AUTH_USERNAME", c.username.as_str()),
        ("BASIC_AUTH_PASSWORD", c.password.as_str()),
    ];
    for kind in ["containers", "initContainers"] {
        for container in template["spec"]["template"]["spec"][kind]
            .as_array_mut()
            .into_iter()
            .flatten()
        {
            let env = container["env"].as_array().cloned().unwrap_or_default();
            let mut env: Vec<Value> = env
                .into_iter()
                .filter(|e| !auth.iter().any(|(n, _)| e["name"] == *n))
                .collect();
            env.extend(auth.iter().map(|(n, v)| json!({"name": n, "value": v})));
            container["env"] = json!(env);
        }
    }
    template
}

fn merge(into: &mut Value, from: &Value) {
    if !into.is_object() {
        *into = json!({});
    }
    if let (Some(into), Some(from)) = (into.as_object_mut(), from.as_object()) {
        into.extend(from.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
}

/// The template of the shipped one's shape: libvirt, sushy-tools on port 8000 and
/// vino-builder on 8001, on the host's network, tolerating control-plane taints.
pub fn default_template(vino: &Vino) -> Value {
    let options = vino.spec.daemon_set_options.clone().unwrap_or_default();
    let image = |given: Option<String>, default: &str| given.unwrap_or_else(|| default.to_string());
    json!({"spec": {
        "selector": {"matchLabels": {"vino-role": "vino-builder"}},
        "template": {
            "metadata": {"labels": {"vino-role": "vino-builder"}},
            "spec": {
                "hostNetwork": true,
                "hostPID": true,
                "hostIPC": true,
                "tolerations": [
                    {"key": "node-role.kubernetes.io/master", "effect": "NoSchedule"},
                    {"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"},
                ],
                "containers": [
                    {"name": "libvirt",
                     "image": image(options.libvirt_image, "quay.io/airshipit/libvirt:latest-ubuntu_bionic")},
                    {"name": "sushy",
                     "image": image(options.sushy_image, "quay.io/metal3-io/sushy-tools"),
                     "command": ["sushy-emulator", "-i", "::", "--debug", "--port", "8000"],
                     "ports": [{"containerPort": 8000, "hostPort": 8000, "name": "sushy"}]},
                    {"name": "vino-builder",
                     "image": image(options.vino_builder_image, "quay.io/airshipit/vino-builder:latest-ubuntu_focal"),
                     "ports": [{"containerPort": 8001, "hostPort": 8001, "name": "vino-builder"}]},
                ],
            },
        },
    }})
}

/// The template `vino` names (or the default one's ConfigMap), if there is one; why it
/// cannot be read, when it is there but is not a DaemonSet.
pub async fn template(
    client: &kube::Client,
    vino: &Vino,
    runtime: &str,
) -> Result<Result<Value, String>, kube::Error> {
    let named = vino
        .spec
        .daemon_set_options
        .as_ref()
        .and_then(|o| o.namespaced_name.clone())
        .filter(|n| !n.name.is_empty());
    let (ns, name) = match &named {
        Some(n) if !n.namespace.is_empty() => (n.namespace.clone(), n.name.clone()),
        Some(n) => (runtime.to_string(), n.name.clone()),
        None => (runtime.to_string(), TEMPLATE.to_string()),
    };
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let Some(map) = maps.get_opt(&name).await? else {
        return Ok(match named {
            Some(_) => Err(format!(
                "the DaemonSet template ConfigMap {ns}/{name} is missing"
            )),
            None => Ok(default_template(vino)),
        });
    };
    let text = map
        .data
        .as_ref()
        .and_then(|d| d.get("template"))
        .cloned()
        .unwrap_or_default();
    Ok(serde_yaml::from_str::<Value>(&text)
        .map_err(|e| format!("the DaemonSet template in {ns}/{name} is not YAML: {e}"))
        .and_then(|v| match v.get("spec") {
            Some(_) => Ok(v),
            None => Err(format!("the DaemonSet template in {ns}/{name} has no spec")),
        }))
}

/// Deletes `vino`'s DaemonSet (gone already is fine).
pub async fn remove(client: &kube::Client, vino: &Vino, runtime: &str) -> Result<(), kube::Error> {
    let api: Api<DaemonSet> = Api::namespaced(client.clone(), runtime);
    match api.delete(&name_of(vino), &Default::default()).await {
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        other => other.map(drop),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_daemon_set_selects_the_vinos_nodes_with_upstreams_labels_and_credentials() {
        let mut v: Vino = serde_yaml::from_str(super::super::types::tests::SAMPLE).unwrap();
        v.metadata.namespace = Some("default".into());
        let ds = daemon_set(&v, "vino-system", default_template(&v));
        assert_eq!(ds["metadata"]["name"], "default-vino-test-cr");
        assert_eq!(ds["metadata"]["namespace"], "vino-system");
        let labels = &ds["spec"]["template"]["metadata"]["labels"];
        assert_eq!(labels["vino.airshipit.org/cr-name"], "vino-test-cr");
        assert_eq!(labels["vino-role"], "vino-builder");
        assert_eq!(ds["spec"]["selector"]["matchLabels"], *labels);
        let spec = &ds["spec"]["template"]["spec"];
        assert_eq!(
            spec["nodeSelector"],
            json!(v.spec.node_selector.as_ref().unwrap().match_labels)
        );
        for c in spec["containers"].as_array().unwrap() {
            let env = c["env"].as_array().unwrap();
            assert!(env.iter().any(|e| e["name"] == "BASIC_AUTH_USERNAME"
                && e["value"] == v.spec.bmc_credentials.username.as_str()));
        }
    }
}
