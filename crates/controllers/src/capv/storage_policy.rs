//! A VSphereVM's storage policy (`spec.storagePolicyName`), as CAPV's clone applies it: the
//! policy is found by name through the vCenter's PBM service, and the datastore is one that
//! satisfies it: the spec's own datastore if it names one (which must then comply), else one
//! of the datastores of the compute resource that owns the VM's resource pool (those not in
//! maintenance). CAPV picks among the compliant ones at random; the stand-in takes the first,
//! which is one of the outcomes CAPV can have.

use super::types::VSphereVM;
use infrasim_controller_runtime::placement::Resolved;
use infrasim_vim_client::{Client, Moref};

/// The datastore to clone `vm` onto under its storage policy: `Some` to use instead of
/// the placement's (`place.datastore`), `None` to keep it (no policy, or the spec names a
/// datastore that complies); why not, for the `VirtualMachineProvisioned` condition.
pub(super) async fn datastore(
    client: &Client,
    vm: &VSphereVM,
    place: &Resolved,
) -> Result<Option<Moref>, String> {
    let Some(name) = vm.spec.text("storagePolicyName") else {
        return Ok(None);
    };
    let id = client
        .storage_policy_id(name)
        .await
        .map_err(|e| format!("unable to get storageProfileID from name {name}: {e}"))?
        .ok_or_else(|| {
            format!("unable to get storageProfileID from name {name}: no pbm profile found with name: \"{name}\"")
        })?;
    let named = vm.spec.text("datastore").is_some();
    let hubs = match (named, &place.datastore) {
        (true, Some(ds)) => vec![ds.clone()],
        _ => out_of_maintenance(client, &place.pool_datastores).await?,
    };
    let compatible = client
        .compatible_datastores(&id, &hubs)
        .await
        .map_err(|e| format!("unable to check requirements for storage policy: {e}"))?;
    let Some(first) = compatible.first() else {
        return Err(format!(
            "no compatible datastores found for storage policy: {name}"
        ));
    };
    Ok((!named).then(|| first.clone()))
}

/// The datastores among `datastores` (the pool's compute resource's) not in maintenance.
async fn out_of_maintenance(client: &Client, datastores: &[Moref]) -> Result<Vec<Moref>, String> {
    let mut usable = Vec::new();
    for ds in datastores {
        let summary = client
            .properties(ds, &["summary.maintenanceMode"])
            .await
            .map_err(|e| e.to_string())?;
        if matches!(summary.text("summary.maintenanceMode"), "" | "normal") {
            usable.push(ds.clone());
        }
    }
    Ok(usable)
}
