//! Adding and removing a controller's finalizer.
//!
//! JSON patches that test the finalizers they read: other writers (labels, owners, spec,
//! status) never make them fail, and a concurrent change of the finalizers does. A reconcile
//! that started from a cache older than its own last write (the watch has not delivered it
//! yet) reads the object again instead of failing: the write it would make is already there,
//! or is made from what is there now.

use kube::api::{Api, Patch, PatchParams};
use kube::{Resource, ResourceExt};
use serde::de::DeserializeOwned;
use serde_json::{json, Value};
use std::fmt::Debug;

fn patch_of(ops: Value) -> Result<json_patch::Patch, kube::Error> {
    serde_json::from_value(ops).map_err(kube::Error::SerdeError)
}

/// Adds `finalizer` if the object lacks it; `true` if it was added (the reconcile then ends,
/// and the write's own event brings the next one).
pub async fn ensure<K>(api: &Api<K>, obj: &K, finalizer: &str) -> Result<bool, kube::Error>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug,
{
    let mut current = obj.clone();
    for _ in 0..2 {
        if current.finalizers().iter().any(|f| f == finalizer) {
            return Ok(current.resource_version() != obj.resource_version());
        }
        let ops = if current.finalizers().is_empty() {
            json!([{"op": "test", "path": "/metadata/finalizers", "value": null},
                   {"op": "add", "path": "/metadata/finalizers", "value": [finalizer]}])
        } else {
            json!([{"op": "test", "path": "/metadata/finalizers", "value": current.finalizers()},
                   {"op": "add", "path": "/metadata/finalizers/-", "value": finalizer}])
        };
        match api
            .patch(
                &current.name_any(),
                &PatchParams::default(),
                &Patch::Json::<()>(patch_of(ops)?),
            )
            .await
        {
            Ok(_) => return Ok(true),
            // The test failed: the finalizers changed since the cache saw them.
            Err(kube::Error::Api(e)) if e.code == 422 => current = api.get(&obj.name_any()).await?,
            Err(e) => return Err(e),
        }
    }
    Ok(true)
}

/// Removes `finalizer` (the object goes once none is left).
pub async fn remove<K>(api: &Api<K>, obj: &K, finalizer: &str) -> Result<(), kube::Error>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug,
{
    let mut current = obj.clone();
    for _ in 0..2 {
        let Some(i) = current.finalizers().iter().position(|f| f == finalizer) else {
            return Ok(());
        };
        let ops = json!([{"op": "test", "path": format!("/metadata/finalizers/{i}"), "value": finalizer},
                         {"op": "remove", "path": format!("/metadata/finalizers/{i}")}]);
        match api
            .patch(
                &current.name_any(),
                &PatchParams::default(),
                &Patch::Json::<()>(patch_of(ops)?),
            )
            .await
        {
            Ok(_) => return Ok(()),
            Err(kube::Error::Api(e)) if e.code == 404 => return Ok(()),
            Err(kube::Error::Api(e)) if e.code == 422 => {
                match api.get_opt(&obj.name_any()).await? {
                    Some(fresh) => current = fresh,
                    None => return Ok(()),
                }
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
