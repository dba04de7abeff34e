//! Serving Cluster API's `v1beta1` beside `v1beta2`: a conversion webhook that lives in the
//! controllers' process. The engine hands it the `ConversionReview` it would POST to Cluster
//! API's webhook Service (`capi-system/capi-webhook-service`, path `/convert`), so conversion
//! takes kube-apiserver's path and gives its errors, without a socket or a certificate.
//!
//! Conversions work on JSON, one module per kind, following upstream's rules: `v1beta2` is the
//! hub (the storage version, what the controllers read), `v1beta1` a spoke. Fields a version
//! does not know are dropped as upstream drops them. A reference's `apiVersion` comes from
//! the referenced CRD's contract label, as upstream looks it up.

mod cluster;
mod duration;
mod healthcheck;
mod machine;

use crate::capi::standin::objects::Resolver;
use futures::future::BoxFuture;
use infrasim_kube_api::webhook::InProcessWebhook;
use serde_json::{json, Map, Value};
use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

/// The Service Cluster API's CRDs name as their conversion webhook.
pub const SERVICE_NAMESPACE: &str = "capi-system";
pub const SERVICE_NAME: &str = "capi-webhook-service";
pub const PATH: &str = "/convert";

/// The hub version every kind is stored in.
const HUB: &str = "v1beta2";
const SPOKE: &str = "v1beta1";

/// A JSON object being converted.
type Object = Map<String, Value>;

/// How one kind converts: from its spoke to the hub, and back.
struct KindConversion {
    to_hub: fn(&mut Object, &Versions) -> Result<(), String>,
    from_hub: fn(&mut Object, &Versions) -> Result<(), String>,
}

/// The conversion of `group`/`kind`, if it has versions to convert between.
fn conversion_of(group: &str, kind: &str) -> Option<KindConversion> {
    match (group, kind) {
        (crate::capi::CORE_GROUP, "Cluster") => Some(KindConversion {
            to_hub: cluster::to_hub,
            from_hub: cluster::from_hub,
        }),
        (crate::capi::CORE_GROUP, "MachineHealthCheck") => Some(KindConversion {
            to_hub: healthcheck::machine_health_check_to_hub,
            from_hub: healthcheck::machine_health_check_from_hub,
        }),
        (crate::capi::CORE_GROUP, "Machine") => Some(KindConversion {
            to_hub: machine::machine_to_hub,
            from_hub: machine::machine_from_hub,
        }),
        (crate::capi::CORE_GROUP, "MachineSet") => Some(KindConversion {
            to_hub: machine::machine_set_to_hub,
            from_hub: machine::machine_set_from_hub,
        }),
        (crate::capi::CORE_GROUP, "MachineDeployment") => Some(KindConversion {
            to_hub: machine::machine_deployment_to_hub,
            from_hub: machine::machine_deployment_from_hub,
        }),
        _ => None,
    }
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

/// Serves the converter in `server`'s process as Cluster API's webhook Service, so the CRDs
/// of [`crate::crds::core`] with v1beta1 reach it.
pub fn serve_in(server: &infrasim_kube_api::ApiServer, client: kube::Client) {
    let converter = Arc::new(Converter::new(client));
    server.serve_webhook_in_process(SERVICE_NAMESPACE, SERVICE_NAME, converter);
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
        (conversion.to_hub)(&mut object, versions)?;
    }
    if to == SPOKE && from != SPOKE {
        (conversion.from_hub)(&mut object, versions)?;
    }
    object.insert("apiVersion".into(), json!(desired));
    Ok(Value::Object(object))
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
