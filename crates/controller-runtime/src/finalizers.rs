//! Adding and removing a controller's finalizer.
//!
//! JSON patches that test the finalizers they read: other writers (labels, owners, spec,
//! status) never make them fail, and a concurrent change of the finalizers does. A reconcile
//! that started from a cache older than its own last write (the watch has not delivered it
//! yet) reads the object again instead of failing: the write it would make is already there,
//! or is made from what is there now.
//!
//! Only the object's kind is generic here, and only to name its resource: the patches and
//! reads go through one untyped [`Api<DynamicObject>`] in functions compiled once in this
//! crate. Generic helpers were compiled again for each of the 21 kinds that call them.

use futures::future::BoxFuture;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use kube::{Client, Resource, ResourceExt};
use serde_json::{json, Value};

/// The object a finalizer is added to or removed from, by what the patches need of it.
struct Target {
    api: Api<DynamicObject>,
    name: String,
    resource_version: Option<String>,
    finalizers: Vec<String>,
}

impl Target {
    fn of<K: Resource<DynamicType = ()>>(client: &Client, obj: &K) -> Self {
        let resource = ApiResource::erase::<K>(&());
        let namespace = obj.namespace().unwrap_or_default();
        Target {
            api: match namespace.as_str() {
                // A cluster-scoped object.
                "" => Api::all_with(client.clone(), &resource),
                ns => Api::namespaced_with(client.clone(), ns, &resource),
            },
            name: obj.name_any(),
            resource_version: obj.resource_version(),
            finalizers: obj.finalizers().to_vec(),
        }
    }
}

fn patch_of(ops: Value) -> Result<json_patch::Patch, kube::Error> {
    serde_json::from_value(ops).map_err(kube::Error::SerdeError)
}

/// Adds `finalizer` if `obj` lacks it; `true` if it was added (the reconcile then ends, and
/// the write's own event brings the next one).
pub fn ensure<K: Resource<DynamicType = ()>>(
    client: &Client,
    obj: &K,
    finalizer: &str,
) -> BoxFuture<'static, Result<bool, kube::Error>> {
    Box::pin(ensure_on(Target::of(client, obj), finalizer.to_owned()))
}

async fn ensure_on(target: Target, finalizer: String) -> Result<bool, kube::Error> {
    let Target {
        api,
        name,
        resource_version: seen,
        mut finalizers,
    } = target;
    let mut version = seen.clone();
    for _ in 0..2 {
        if finalizers.contains(&finalizer) {
            return Ok(version != seen);
        }
        let ops = if finalizers.is_empty() {
            json!([{"op": "test", "path": "/metadata/finalizers", "value": null},
                   {"op": "add", "path": "/metadata/finalizers", "value": [finalizer]}])
        } else {
            json!([{"op": "test", "path": "/metadata/finalizers", "value": finalizers},
                   {"op": "add", "path": "/metadata/finalizers/-", "value": finalizer}])
        };
        let patch = Patch::Json::<()>(patch_of(ops)?);
        match api.patch(&name, &PatchParams::default(), &patch).await {
            Ok(_) => return Ok(true),
            // The test failed: the finalizers changed since the cache saw them.
            Err(kube::Error::Api(e)) if e.code == 422 => {
                let fresh = api.get(&name).await?;
                finalizers = fresh.finalizers().to_vec();
                version = fresh.resource_version();
            }
            Err(e) => return Err(e),
        }
    }
    Ok(true)
}

/// Removes `finalizer` from `obj` (the object goes once none is left).
pub fn remove<K: Resource<DynamicType = ()>>(
    client: &Client,
    obj: &K,
    finalizer: &str,
) -> BoxFuture<'static, Result<(), kube::Error>> {
    Box::pin(remove_from(Target::of(client, obj), finalizer.to_owned()))
}

async fn remove_from(target: Target, finalizer: String) -> Result<(), kube::Error> {
    let Target {
        api,
        name,
        mut finalizers,
        ..
    } = target;
    for _ in 0..2 {
        let Some(i) = finalizers.iter().position(|f| *f == finalizer) else {
            return Ok(());
        };
        let ops = json!([{"op": "test", "path": format!("/metadata/finalizers/{i}"), "value": finalizer},
                         {"op": "remove", "path": format!("/metadata/finalizers/{i}")}]);
        let patch = Patch::Json::<()>(patch_of(ops)?);
        match api.patch(&name, &PatchParams::default(), &patch).await {
            Ok(_) => return Ok(()),
            Err(kube::Error::Api(e)) if e.code == 404 => return Ok(()),
            Err(kube::Error::Api(e)) if e.code == 422 => match api.get_opt(&name).await? {
                Some(fresh) => finalizers = fresh.finalizers().to_vec(),
                None => return Ok(()),
            },
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
