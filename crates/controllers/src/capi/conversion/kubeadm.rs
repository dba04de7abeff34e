//! The kubeadm bootstrap provider's kinds between v1beta1 and v1beta2 (`KubeadmConfig`,
//! `KubeadmConfigTemplate`), and the `KubeadmConfigSpec` they share with the control plane
//! provider, after upstream's conversion:
//! - `extraArgs` (and `kubeletExtraArgs`) are a map in v1beta1 and a list of `{name, value}`
//!   sorted by name in v1beta2;
//! - the timeouts v1beta1 spread over the spec (`apiServer.timeoutForControlPlane`,
//!   `discovery.timeout`) are `initConfiguration.timeouts` / `joinConfiguration.timeouts` in
//!   whole seconds; the other v1beta2 timeouts have no v1beta1 place and come back from the
//!   conversion data;
//! - bootstrap tokens' `ttl` is `ttlSeconds`;
//! - `clusterName`, `kubernetesVersion`, `networking` and `useExperimentalRetryJoin` are gone
//!   from v1beta2 (upstream drops them: the Cluster says the same);
//! - the status' `ready` is `initialization.dataSecretCreated`, and conditions sit as for the
//!   core kinds.

use super::duration::{from_seconds, to_seconds};
use super::{
    at, bool_intent, child, conditions_from_hub, conditions_to_hub, insert_nonempty, object_at,
    take_object, Object, Restored, Versions,
};
use infrasim_kube_api::values::At;
use serde_json::{json, Value};

/// The failure fields v1beta2 keeps under `deprecated.v1beta1`.
const FAILURE: [&str; 2] = ["failureReason", "failureMessage"];

/// The control plane components whose `extraArgs` change shape.
const COMPONENTS: [&str; 3] = ["apiServer", "controllerManager", "scheduler"];

/// A map of arguments as v1beta2's list, sorted by name (then value) as upstream sorts it.
fn args_to_hub(o: &mut Object, key: &str) {
    let Some(Value::Object(map)) = o.remove(key) else {
        return;
    };
    let mut args: Vec<(String, Value)> = map.into_iter().collect();
    args.sort_by(|(a, x), (b, y)| {
        a.cmp(b)
            .then_with(|| x.as_str().unwrap_or("").cmp(y.as_str().unwrap_or("")))
    });
    if !args.is_empty() {
        let list = args
            .into_iter()
            .map(|(name, value)| json!({"name": name, "value": value}))
            .collect();
        o.insert(key.into(), Value::Array(list));
    }
}

/// A list of arguments as v1beta1's map; a name given twice keeps its last value.
fn args_from_hub(o: &mut Object, key: &str) {
    let Some(Value::Array(list)) = o.remove(key) else {
        return;
    };
    let mut map = Object::new();
    for arg in list {
        if let Some(name) = arg["name"].as_str() {
            let value = arg.get("value").cloned().unwrap_or(json!(""));
            map.insert(name.to_string(), value);
        }
    }
    o.insert(key.into(), Value::Object(map));
}

/// The argument lists of a spec's components and node registrations, converted by `convert`.
fn each_args(spec: &mut Object, convert: fn(&mut Object, &str)) {
    if let Some(cluster) = object_at(spec, &["clusterConfiguration"]) {
        for component in COMPONENTS {
            if let Some(c) = object_at(cluster, &[component]) {
                convert(c, "extraArgs");
            }
        }
        if let Some(local) = object_at(cluster, &["etcd", "local"]) {
            convert(local, "extraArgs");
        }
    }
    for configuration in ["initConfiguration", "joinConfiguration"] {
        if let Some(registration) = object_at(spec, &[configuration, "nodeRegistration"]) {
            convert(registration, "kubeletExtraArgs");
        }
    }
}

/// A v1beta1 `KubeadmConfigSpec` in place as v1beta2's; `restored` is the hub's spec from the
/// conversion data, when the object carried it.
pub(super) fn config_spec_to_hub(spec: &mut Object, restored: Option<&Value>) {
    spec.remove("useExperimentalRetryJoin");
    each_args(spec, args_to_hub);
    let mut control_plane_health = None;
    if let Some(cluster) = object_at(spec, &["clusterConfiguration"]) {
        for gone in ["clusterName", "kubernetesVersion", "networking"] {
            cluster.remove(gone);
        }
        if let Some(api_server) = object_at(cluster, &["apiServer"]) {
            control_plane_health = api_server
                .remove("timeoutForControlPlane")
                .and_then(|d| d.as_str().and_then(to_seconds));
        }
        if cluster.get("apiServer").is_some_and(is_empty_object) {
            cluster.remove("apiServer");
        }
    }
    for token in bootstrap_tokens(spec) {
        if let Some(seconds) = token
            .remove("ttl")
            .and_then(|d| d.as_str().and_then(to_seconds))
        {
            token.insert("ttlSeconds".into(), json!(seconds));
        }
    }
    let tls_bootstrap = object_at(spec, &["joinConfiguration", "discovery"])
        .and_then(|d| d.remove("timeout"))
        .and_then(|d| d.as_str().and_then(to_seconds));
    if let Some(restored) = restored {
        restore_timeouts(spec, restored);
        restore_bool_intent(spec, restored);
    }
    // The timeouts v1beta1 has a place for win over the restored ones, as upstream orders it.
    if let Some(seconds) = control_plane_health {
        let timeouts = child(child(spec, "initConfiguration"), "timeouts");
        timeouts.insert(
            "controlPlaneComponentHealthCheckSeconds".into(),
            json!(seconds),
        );
    }
    if tls_bootstrap.is_some() || control_plane_health.is_some() {
        let timeouts = child(child(spec, "joinConfiguration"), "timeouts");
        match control_plane_health {
            Some(s) => timeouts.insert("controlPlaneComponentHealthCheckSeconds".into(), json!(s)),
            None => timeouts.remove("controlPlaneComponentHealthCheckSeconds"),
        };
        if let Some(seconds) = tls_bootstrap {
            timeouts.insert("tlsBootstrapSeconds".into(), json!(seconds));
        }
    }
}

/// The init and join timeouts of the hub's spec, which v1beta1 can only partly hold.
fn restore_timeouts(spec: &mut Object, restored: &Value) {
    for configuration in ["initConfiguration", "joinConfiguration"] {
        let Some(defined) = restored.get(configuration).and_then(Value::as_object) else {
            continue;
        };
        match defined.get("timeouts") {
            Some(Value::Object(t)) if !t.is_empty() => {
                child(spec, configuration).insert("timeouts".into(), json!(t));
            }
            _ => {}
        }
    }
}

/// The booleans of a kubeadm spec that v1beta1 leaves out when false: the object holding
/// each, and its name.
const FLAGS: [(&[&str], &str); 4] = [
    (
        &["joinConfiguration", "discovery", "bootstrapToken"],
        "unsafeSkipCAVerification",
    ),
    (
        &[
            "joinConfiguration",
            "discovery",
            "file",
            "kubeConfig",
            "cluster",
        ],
        "insecureSkipTLSVerify",
    ),
    (
        &[
            "joinConfiguration",
            "discovery",
            "file",
            "kubeConfig",
            "user",
            "exec",
        ],
        "provideClusterInfo",
    ),
    (&["ignition", "containerLinuxConfig"], "strict"),
];

/// Booleans that v1beta1 leaves out when false, set to false where the hub had said so.
fn restore_bool_intent(spec: &mut Object, restored: &Value) {
    for (path, flag) in FLAGS {
        if let Some(dst) = object_at(spec, path) {
            bool_intent(dst, flag, at(restored, path));
        }
    }
    // Items are matched by their key, as upstream matches them.
    match_items(spec, restored, &["files"], "path", "append");
    for component in COMPONENTS {
        let volumes = ["clusterConfiguration", component, "extraVolumes"];
        match_items(spec, restored, &volumes, "hostPath", "readOnly");
    }
}

/// `flag` of each item of the list at `path`, from the restored item with the same `key`.
fn match_items(spec: &mut Object, restored: &Value, path: &[&str], key: &str, flag: &str) {
    let (parent, list) = path.split_at(path.len() - 1);
    let Some(items) = object_at(spec, parent)
        .and_then(|p| p.get_mut(list[0]))
        .and_then(Value::as_array_mut)
    else {
        return;
    };
    let restored_items = at(restored, path).and_then(Value::as_array);
    for item in items.iter_mut().filter_map(Value::as_object_mut) {
        let id = item.get(key).cloned();
        let before = restored_items
            .into_iter()
            .flatten()
            .find(|r| r.get(key) == id.as_ref());
        bool_intent(item, flag, before);
    }
}

/// The init configuration's bootstrap tokens.
fn bootstrap_tokens(spec: &mut Object) -> impl Iterator<Item = &mut Object> {
    object_at(spec, &["initConfiguration"])
        .and_then(|init| init.get_mut("bootstrapTokens"))
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
        .filter_map(Value::as_object_mut)
}

fn is_empty_object(v: &Value) -> bool {
    v.as_object().is_some_and(Object::is_empty)
}

/// A v1beta2 `KubeadmConfigSpec` in place as v1beta1's.
pub(super) fn config_spec_from_hub(spec: &mut Object) {
    each_args(spec, args_from_hub);
    for token in bootstrap_tokens(spec) {
        if let Some(seconds) = token.remove("ttlSeconds").and_then(|s| s.as_i64()) {
            token.insert("ttl".into(), json!(from_seconds(seconds)));
        }
    }
    timeout_from_hub(
        spec,
        "initConfiguration",
        "controlPlaneComponentHealthCheckSeconds",
        [
            "clusterConfiguration",
            "apiServer",
            "timeoutForControlPlane",
        ],
    );
    timeout_from_hub(
        spec,
        "joinConfiguration",
        "tlsBootstrapSeconds",
        ["joinConfiguration", "discovery", "timeout"],
    );
    for configuration in ["initConfiguration", "joinConfiguration"] {
        if spec.get(configuration).is_some_and(is_empty_object) {
            spec.remove(configuration);
        }
    }
}

/// Takes `configuration`'s v1beta2 `timeouts` out of the spec and, when they had `seconds`,
/// sets it as a duration at `to` (two objects and a field), the one place v1beta1 holds it.
fn timeout_from_hub(spec: &mut Object, configuration: &str, seconds: &str, to: [&str; 3]) {
    let timeouts = object_at(spec, &[configuration]).and_then(|c| take_object(c, "timeouts"));
    if let Some(value) = timeouts
        .as_ref()
        .and_then(|t| t.get(seconds))
        .and_then(Value::as_i64)
    {
        let [outer, inner, field] = to;
        child(child(spec, outer), inner).insert(field.into(), json!(from_seconds(value)));
    }
}

/// `KubeadmConfig` to v1beta2.
pub(super) fn config_to_hub(o: &mut Object, restored: Restored) -> Result<(), String> {
    if let Some(spec) = object_at(o, &["spec"]) {
        config_spec_to_hub(spec, restored.and_then(|r| r.get("spec")));
    }
    if let Some(status) = object_at(o, &["status"]) {
        conditions_to_hub(status, &FAILURE, &[]);
        let ready = status.remove("ready") == Some(json!(true));
        let before = restored.and_then(|r| r.at("/status/initialization"));
        let mut initialization = Object::new();
        initialization.insert("dataSecretCreated".into(), json!(ready));
        bool_intent(&mut initialization, "dataSecretCreated", before);
        insert_nonempty(status, "initialization", initialization);
    }
    Ok(())
}

/// `KubeadmConfig` to v1beta1.
pub(super) fn config_from_hub(o: &mut Object, _: &Versions) -> Result<(), String> {
    if let Some(spec) = object_at(o, &["spec"]) {
        config_spec_from_hub(spec);
    }
    let status = child(o, "status");
    conditions_from_hub(status, &FAILURE, &[]);
    let initialization = take_object(status, "initialization").unwrap_or_default();
    let ready = initialization.get("dataSecretCreated") == Some(&json!(true));
    status.insert("ready".into(), json!(ready));
    if status.get("dataSecretName") == Some(&json!("")) {
        status.remove("dataSecretName");
    }
    Ok(())
}

/// `KubeadmConfigTemplate` to v1beta2.
pub(super) fn config_template_to_hub(o: &mut Object, restored: Restored) -> Result<(), String> {
    let path = ["spec", "template", "spec"];
    if let Some(spec) = object_at(o, &path) {
        config_spec_to_hub(spec, restored.and_then(|r| at(r, &path)));
    }
    Ok(())
}

/// `KubeadmConfigTemplate` to v1beta1.
pub(super) fn config_template_from_hub(o: &mut Object, _: &Versions) -> Result<(), String> {
    if let Some(spec) = object_at(o, &["spec", "template", "spec"]) {
        config_spec_from_hub(spec);
    }
    Ok(())
}
