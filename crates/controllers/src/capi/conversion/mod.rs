//! Serving Cluster API's `v1beta1` beside `v1beta2`: a conversion webhook that lives in the
//! controllers' process. The engine hands it the `ConversionReview` it would POST to Cluster
//! API's webhook Service (`capi-system/capi-webhook-service`, path `/convert`), so conversion
//! takes kube-apiserver's path and gives its errors, without a socket or a certificate.
//!
//! Conversions work on JSON, one module per kind, following upstream's rules: `v1beta2` is the
//! hub (the storage version, what the controllers read), `v1beta1` a spoke. Fields a version
//! does not know are dropped as upstream drops them. A reference's `apiVersion` comes from
//! the referenced CRD's contract label, as upstream looks it up.

mod capv;
mod capv_supervisor;
mod cluster;
mod cluster_class;
mod control_plane;
mod dev;
mod duration;
mod healthcheck;
mod kubeadm;
mod machine;

use crate::capi::standin::objects::Resolver;
use futures::future::BoxFuture;
use infrasim_kube_api::webhook::InProcessWebhook;
use serde_json::{json, Map, Value};
use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

/// The Service the in-memory provider's CRDs name (upstream's development provider has its
/// own webhook); the same converter stands behind it.
pub const PROVIDER_SERVICE_NAMESPACE: &str = "capim-system";
pub const PROVIDER_SERVICE_NAME: &str = "capim-webhook-service";
pub const PATH: &str = "/convert";

/// Where a v1beta1 object carries what its hub version held (metadata aside), so that fields
/// v1beta1 has no place for survive a v1beta1 client's round trip, as upstream keeps them.
pub const DATA_ANNOTATION: &str = "cluster.x-k8s.io/conversion-data";

/// The hub version every kind is stored in.
const HUB: &str = "v1beta2";
const SPOKE: &str = "v1beta1";

/// A JSON object being converted.
type Object = Map<String, Value>;

/// The hub object a v1beta1 object's conversion data held, if it carried any.
type Restored<'a> = Option<&'a Value>;

/// How one kind converts: from its spoke to the hub (with what the conversion data restores),
/// and back; and whether the way back records the hub's data, as upstream does for every
/// kind but MachineSet and DevClusterTemplate.
struct KindConversion {
    to_hub: fn(&mut Object, Restored) -> Result<(), String>,
    from_hub: fn(&mut Object, &Versions) -> Result<(), String>,
    keeps_data: bool,
}

const fn kind(
    to_hub: fn(&mut Object, Restored) -> Result<(), String>,
    from_hub: fn(&mut Object, &Versions) -> Result<(), String>,
) -> KindConversion {
    KindConversion {
        to_hub,
        from_hub,
        keeps_data: true,
    }
}

/// The conversion of `group`/`kind`, if it has versions to convert between.
fn conversion_of(group: &str, kind_name: &str) -> Option<KindConversion> {
    use crate::capi::{CORE_GROUP, INFRA_GROUP, SUPERVISOR_GROUP};
    const BOOTSTRAP: &str = "bootstrap.cluster.x-k8s.io";
    const CONTROL_PLANE: &str = "controlplane.cluster.x-k8s.io";
    const ADDONS: &str = "addons.cluster.x-k8s.io";
    const IPAM: &str = "ipam.cluster.x-k8s.io";
    let conversion = match (group, kind_name) {
        (CORE_GROUP, "Cluster") => kind(cluster::to_hub, cluster::from_hub),
        (CORE_GROUP, "ClusterClass") => kind(cluster_class::to_hub, cluster_class::from_hub),
        (CORE_GROUP, "MachineHealthCheck") => kind(
            healthcheck::machine_health_check_to_hub,
            healthcheck::machine_health_check_from_hub,
        ),
        (CORE_GROUP, "Machine") => kind(machine::machine_to_hub, machine::machine_from_hub),
        (CORE_GROUP, "MachineSet") => KindConversion {
            keeps_data: false,
            ..kind(machine::machine_set_to_hub, machine::machine_set_from_hub)
        },
        (CORE_GROUP, "MachineDeployment") => kind(
            machine::machine_deployment_to_hub,
            machine::machine_deployment_from_hub,
        ),
        (BOOTSTRAP, "KubeadmConfig") => kind(kubeadm::config_to_hub, kubeadm::config_from_hub),
        (BOOTSTRAP, "KubeadmConfigTemplate") => kind(
            kubeadm::config_template_to_hub,
            kubeadm::config_template_from_hub,
        ),
        (CONTROL_PLANE, "KubeadmControlPlane") => kind(
            control_plane::control_plane_to_hub,
            control_plane::control_plane_from_hub,
        ),
        (CONTROL_PLANE, "KubeadmControlPlaneTemplate") => kind(
            control_plane::template_to_hub,
            control_plane::template_from_hub,
        ),
        // Upstream keeps no conversion data for the add-on kinds.
        (ADDONS, "ClusterResourceSet") => KindConversion {
            keeps_data: false,
            ..kind(resource_set_to_hub, resource_set_from_hub)
        },
        (ADDONS, "ClusterResourceSetBinding") => KindConversion {
            keeps_data: false,
            ..kind(|_, _| Ok(()), |_, _| Ok(()))
        },
        // Nor for the IPAM kinds: a claim's conditions move as a set's do; an address's two
        // versions are the same.
        (IPAM, "IPAddressClaim") => KindConversion {
            keeps_data: false,
            ..kind(resource_set_to_hub, resource_set_from_hub)
        },
        (IPAM, "IPAddress") => KindConversion {
            keeps_data: false,
            ..kind(|_, _| Ok(()), |_, _| Ok(()))
        },
        (INFRA_GROUP, kind_name) if kind_name.starts_with("VSphere") => capv_conversion(kind_name),
        (SUPERVISOR_GROUP, kind_name) => supervisor_conversion(kind_name),
        (INFRA_GROUP, "DevCluster") => kind(dev::cluster_to_hub, dev::cluster_from_hub),
        (INFRA_GROUP, "DevMachine") => kind(dev::machine_to_hub, dev::machine_from_hub),
        (INFRA_GROUP, "DevClusterTemplate") => KindConversion {
            keeps_data: false,
            ..kind(dev::cluster_template_to_hub, dev::cluster_template_from_hub)
        },
        (INFRA_GROUP, "DevMachineTemplate") => {
            kind(dev::machine_template_to_hub, dev::machine_template_from_hub)
        }
        _ => return None,
    };
    Some(conversion)
}

/// CAPV's govmomi kinds, which keep no conversion data (see `capv.rs`).
fn capv_conversion(kind_name: &str) -> KindConversion {
    let conversion = match kind_name {
        "VSphereCluster" => kind(capv::cluster_to_hub, capv::cluster_from_hub),
        "VSphereMachine" => kind(capv::machine_to_hub, capv::machine_from_hub),
        "VSphereMachineTemplate" => kind(
            capv::machine_template_to_hub,
            capv::machine_template_from_hub,
        ),
        "VSphereVM" => kind(capv::vm_to_hub, capv::vm_from_hub),
        "VSphereClusterIdentity" | "VSphereDeploymentZone" => {
            kind(capv::conditions_only_to_hub, capv::conditions_only_from_hub)
        }
        // VSphereClusterTemplate, VSphereFailureDomain: the same in both versions.
        _ => kind(|_, _| Ok(()), |_, _| Ok(())),
    };
    KindConversion {
        keeps_data: false,
        ..conversion
    }
}

/// CAPV's supervisor-mode kinds, which keep no conversion data (see `capv_supervisor.rs`).
fn supervisor_conversion(kind_name: &str) -> KindConversion {
    use capv_supervisor as s;
    let conversion = match kind_name {
        "VSphereCluster" => kind(s::cluster_to_hub, s::cluster_from_hub),
        "VSphereMachine" => kind(s::machine_to_hub, s::machine_from_hub),
        "VSphereMachineTemplate" => kind(s::machine_template_to_hub, s::machine_template_from_hub),
        // VSphereClusterTemplate, ProviderServiceAccount: the same in both versions.
        _ => kind(|_, _| Ok(()), |_, _| Ok(())),
    };
    KindConversion {
        keeps_data: false,
        ..conversion
    }
}

/// A `ClusterResourceSet` (or an `IPAddressClaim`) to v1beta2: the same spec; its v1beta1
/// conditions under `deprecated`, the v1beta2 ones at the top. (A binding's two versions are
/// the same.)
fn resource_set_to_hub(o: &mut Object, _: Restored) -> Result<(), String> {
    if let Some(status) = o.get_mut("status").and_then(Value::as_object_mut) {
        conditions_to_hub(status, &[], &[]);
    }
    Ok(())
}

fn resource_set_from_hub(o: &mut Object, _: &Versions) -> Result<(), String> {
    if let Some(status) = o.get_mut("status").and_then(Value::as_object_mut) {
        conditions_from_hub(status, &[], &[]);
    }
    Ok(())
}

/// The apiVersions of referenced kinds, as far as they are known; a conversion that meets an
/// unknown one notes it, and the review resolves it and converts again.
#[derive(Default)]
pub(crate) struct Versions {
    known: HashMap<(String, String), String>,
    missing: Mutex<BTreeSet<(String, String)>>,
}

impl Versions {
    /// `group/version` of `kind` under the current contract (`""` until it is known).
    pub(crate) fn api_version(&self, group: &str, kind: &str) -> String {
        let key = (group.to_string(), kind.to_string());
        match self.known.get(&key) {
            Some(v) => v.clone(),
            None => {
                self.missing
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(key);
                String::new()
            }
        }
    }
}

/// The in-process webhook: converts the review's objects between v1beta1 and v1beta2.
pub struct Converter {
    client: kube::Client,
    resolver: Arc<Resolver>,
}

impl Converter {
    pub fn new(client: kube::Client) -> Self {
        Converter {
            client,
            resolver: Arc::new(Resolver::default()),
        }
    }
}

impl InProcessWebhook for Converter {
    fn review(&self, path: &str, body: Value) -> BoxFuture<'static, Result<Value, String>> {
        let (client, resolver) = (self.client.clone(), self.resolver.clone());
        let path = path.to_string();
        Box::pin(async move {
            if path != PATH {
                return Err(format!(
                    "the server could not find the requested resource: {path}"
                ));
            }
            let request = &body["request"];
            let answer = convert_all(&client, &resolver, request).await;
            let (result, converted) = match answer {
                Ok(objects) => (json!({"status": "Success"}), objects),
                Err(message) => (json!({"status": "Failure", "message": message}), vec![]),
            };
            Ok(json!({
                "apiVersion": "apiextensions.k8s.io/v1",
                "kind": "ConversionReview",
                "response": {"uid": request["uid"], "result": result, "convertedObjects": converted},
            }))
        })
    }
}

/// The request's objects in its desired version, resolving referenced kinds' versions as
/// the conversions meet them.
async fn convert_all(
    client: &kube::Client,
    resolver: &Resolver,
    request: &Value,
) -> Result<Vec<Value>, String> {
    let desired = request["desiredAPIVersion"].as_str().unwrap_or("");
    let objects = request["objects"].as_array().cloned().unwrap_or_default();
    let mut versions = Versions::default();
    loop {
        let converted: Result<Vec<Value>, String> = objects
            .iter()
            .map(|o| convert(o.clone(), desired, &versions))
            .collect();
        let missing =
            std::mem::take(&mut *versions.missing.lock().unwrap_or_else(|p| p.into_inner()));
        if missing.is_empty() {
            return converted;
        }
        for (group, kind) in missing {
            let resource = resolver
                .resolve(client, &group, &kind)
                .await
                .map_err(|e| format!("failed to convert object: {e}"))?;
            versions.known.insert((group, kind), resource.api_version);
        }
    }
}

/// One object in `desired`: through the hub when it comes from the spoke, and on to the
/// spoke when that is what is desired.
fn convert(object: Value, desired: &str, versions: &Versions) -> Result<Value, String> {
    let Value::Object(mut object) = object else {
        return Err("the object to convert is not a JSON object".into());
    };
    let text = |key: &str| {
        object
            .get(key)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let (api_version, kind) = (text("apiVersion"), text("kind"));
    let (group, from) = api_version.rsplit_once('/').unwrap_or(("", &api_version));
    let (desired_group, to) = desired.rsplit_once('/').unwrap_or(("", desired));
    if group != desired_group {
        return Err(format!("cannot convert {api_version} to {desired}"));
    }
    let conversion =
        conversion_of(group, &kind).ok_or_else(|| format!("{kind}.{group} has no conversion"))?;
    let known = |v: &str| v == HUB || v == SPOKE;
    if !known(from) || !known(to) {
        return Err(format!("cannot convert {kind} from {from} to {to}"));
    }
    if from == SPOKE && to != SPOKE {
        let restored = take_conversion_data(&mut object)?;
        (conversion.to_hub)(&mut object, restored.as_ref())?;
    }
    if to == SPOKE && from != SPOKE {
        let data = conversion.keeps_data.then(|| conversion_data(&object));
        (conversion.from_hub)(&mut object, versions)?;
        if let Some(data) = data {
            let metadata = child(&mut object, "metadata");
            child(metadata, "annotations").insert(DATA_ANNOTATION.into(), json!(data));
        }
    }
    object.insert("apiVersion".into(), json!(desired));
    Ok(Value::Object(object))
}

/// The hub object as its conversion data records it: everything but its metadata, as JSON.
fn conversion_data(hub: &Object) -> String {
    let mut data = Object::new();
    for key in ["kind", "apiVersion", "spec", "status"] {
        if let Some(v) = hub.get(key) {
            data.insert(key.into(), v.clone());
        }
    }
    Value::Object(data).to_string()
}

/// The conversion data a v1beta1 object carries, taken off it (the hub never stores it).
fn take_conversion_data(o: &mut Object) -> Result<Option<Value>, String> {
    let data = o
        .get_mut("metadata")
        .and_then(|m| m.get_mut("annotations"))
        .and_then(Value::as_object_mut)
        .and_then(|a| a.remove(DATA_ANNOTATION));
    if let Some(Value::Object(annotations)) = o.get("metadata").and_then(|m| m.get("annotations")) {
        if annotations.is_empty() {
            if let Some(metadata) = o.get_mut("metadata").and_then(Value::as_object_mut) {
                metadata.remove("annotations");
            }
        }
    }
    match data {
        None => Ok(None),
        Some(Value::String(text)) => serde_json::from_str(&text)
            .map(Some)
            .map_err(|e| format!("failed to convert object: annotation {DATA_ANNOTATION}: {e}")),
        Some(_) => Err(format!(
            "failed to convert object: annotation {DATA_ANNOTATION} is not a string"
        )),
    }
}

/// A v1beta1 status's conditions to the hub: v1beta1's conditions and `old` fields (those
/// whose v1beta1 meaning v1beta2 keeps aside) go under `deprecated.v1beta1`; what
/// `status.v1beta2` held (its conditions and `new` fields) comes to the top.
fn conditions_to_hub(status: &mut Object, old: &[&str], new: &[&str]) {
    let mut v1beta1 = Object::new();
    for key in std::iter::once(&"conditions").chain(old) {
        carry(status, key, &mut v1beta1, key);
    }
    if let Some(mut v1beta2) = take_object(status, "v1beta2") {
        for key in std::iter::once(&"conditions").chain(new) {
            carry(&mut v1beta2, key, status, key);
        }
    }
    if !v1beta1.is_empty() {
        child(status, "deprecated").insert("v1beta1".into(), Value::Object(v1beta1));
    }
}

/// The way back: the hub's conditions and `new` fields go under `status.v1beta2`, and
/// `deprecated.v1beta1` (its conditions and `old` fields) comes to the top.
fn conditions_from_hub(status: &mut Object, old: &[&str], new: &[&str]) {
    let mut v1beta2 = Object::new();
    for key in std::iter::once(&"conditions").chain(new) {
        carry(status, key, &mut v1beta2, key);
    }
    if let Some(mut v1beta1) =
        take_object(status, "deprecated").and_then(|mut d| take_object(&mut d, "v1beta1"))
    {
        for key in std::iter::once(&"conditions").chain(old) {
            carry(&mut v1beta1, key, status, key);
        }
    }
    insert_nonempty(status, "v1beta2", v1beta2);
}

/// The object at `path` of `o`, if every step is an object.
fn object_at<'a>(o: &'a mut Object, path: &[&str]) -> Option<&'a mut Object> {
    path.iter()
        .try_fold(o, |o, key| o.get_mut(*key).and_then(Value::as_object_mut))
}

/// The value at `path` of `v`, if every step is there: the read twin of [`object_at`], for
/// paths that also lead to the object to change (a literal path reads through `values::At`).
fn at<'a>(v: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter().try_fold(v, |v, key| v.get(key))
}

/// A v1beta1 `bool` that the hub holds as a `*bool`: true stays; false (or absent, which Go
/// reads the same) becomes the hub's `false` only where the hub had said `false` (`before`
/// is the restored object holding `key`), and is left out otherwise, as upstream restores it.
fn bool_intent(o: &mut Object, key: &str, before: Option<&Value>) {
    if o.get(key) == Some(&json!(true)) {
        return;
    }
    o.remove(key);
    if before.and_then(|b| b.get(key)) == Some(&json!(false)) {
        o.insert(key.into(), json!(false));
    }
}

/// The same for a v1beta1 `int32` the hub holds as a `*int32`, with zero for false.
fn int_intent(o: &mut Object, key: &str, before: Option<&Value>) {
    if o.get(key).and_then(Value::as_i64).is_some_and(|n| n != 0) {
        return;
    }
    o.remove(key);
    if before.and_then(|b| b.get(key)) == Some(&json!(0)) {
        o.insert(key.into(), json!(0));
    }
}

/// `failureDomains` of `o` from v1beta1's map (name → spec) to v1beta2's list sorted by name.
fn failure_domains_to_hub(o: &mut Object) {
    let Some(domains) = take_object(o, "failureDomains") else {
        return;
    };
    // A map's keys come sorted, as upstream sorts the names.
    let list: Vec<Value> = domains
        .into_iter()
        .map(|(name, spec)| {
            let mut domain = json!({
                "name": name,
                "controlPlane": spec["controlPlane"].as_bool().unwrap_or(false),
            });
            if let Some(attributes) = spec.get("attributes") {
                domain["attributes"] = attributes.clone();
            }
            domain
        })
        .collect();
    o.insert("failureDomains".into(), Value::Array(list));
}

/// The way back.
fn failure_domains_from_hub(o: &mut Object) {
    let Some(Value::Array(domains)) = o.remove("failureDomains") else {
        return;
    };
    let mut map = Object::new();
    for mut domain in domains {
        let Some(name) = domain["name"].as_str().map(str::to_string) else {
            continue;
        };
        let mut spec = Object::new();
        if domain["controlPlane"].as_bool() == Some(true) {
            spec.insert("controlPlane".into(), json!(true));
        }
        if let Some(attributes) = domain.get_mut("attributes").map(Value::take) {
            if attributes.as_object().is_some_and(|a| !a.is_empty()) {
                spec.insert("attributes".into(), attributes);
            }
        }
        map.insert(name, Value::Object(spec));
    }
    o.insert("failureDomains".into(), Value::Object(map));
}

/// The object at `key` of `o`, made if absent (or not an object).
fn child<'a>(o: &'a mut Object, key: &str) -> &'a mut Object {
    let slot = o.entry(key).or_insert_with(|| Value::Object(Map::new()));
    if !slot.is_object() {
        *slot = Value::Object(Map::new());
    }
    match slot {
        Value::Object(m) => m,
        _ => unreachable!("made an object just above"),
    }
}

/// Removes and returns the object at `key`, if it is one.
fn take_object(o: &mut Object, key: &str) -> Option<Object> {
    match o.remove(key) {
        Some(Value::Object(m)) => Some(m),
        Some(other) => {
            o.insert(key.to_string(), other);
            None
        }
        None => None,
    }
}

/// Moves `from` of `src` to `to` of `dst`, when present.
fn carry(src: &mut Object, from: &str, dst: &mut Object, to: &str) {
    if let Some(v) = src.remove(from) {
        dst.insert(to.to_string(), v);
    }
}

/// Sets `key` to `value` unless the object is empty, which Go's `omitempty` leaves out.
fn insert_nonempty(o: &mut Object, key: &str, value: Object) {
    if !value.is_empty() {
        o.insert(key.to_string(), Value::Object(value));
    }
}

/// The group of an apiVersion (`""` for the core group).
fn group_of(api_version: &str) -> &str {
    api_version.rsplit_once('/').map_or("", |(g, _)| g)
}

/// A v1beta1 `ObjectReference` as a v1beta2 contract reference `{apiGroup, kind, name}`.
fn to_contract_ref(reference: &Value) -> Value {
    let api_version = reference["apiVersion"].as_str().unwrap_or("");
    json!({
        "apiGroup": group_of(api_version),
        "kind": reference["kind"].as_str().unwrap_or(""),
        "name": reference["name"].as_str().unwrap_or(""),
    })
}

/// A v1beta2 contract reference as a v1beta1 `ObjectReference` in `namespace`, its apiVersion
/// the one the referenced CRD's contract names.
fn to_object_ref(reference: &Value, namespace: &str, versions: &Versions) -> Value {
    let group = reference["apiGroup"].as_str().unwrap_or("");
    let kind = reference["kind"].as_str().unwrap_or("");
    json!({
        "apiVersion": versions.api_version(group, kind),
        "kind": kind,
        "namespace": namespace,
        "name": reference["name"].as_str().unwrap_or(""),
    })
}

/// The namespace of the object being converted.
fn namespace_of(o: &Object) -> String {
    o.get("metadata")
        .and_then(|m| m.get("namespace"))
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string()
}

/// Whether a reference names something (v1beta2's `IsDefined`).
fn defined(reference: &Value) -> bool {
    reference["name"].as_str().is_some_and(|n| !n.is_empty())
}

#[cfg(test)]
mod tests;
