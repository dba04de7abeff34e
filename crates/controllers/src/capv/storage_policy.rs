//! A VSphereVM's storage policy (`spec.storagePolicyName`), as CAPV's clone applies it: the
//! policy is found by name through the vCenter's PBM service, and the datastore is one that
//! satisfies it: the spec's own datastore if it names one (which must then comply), else one
//! of the datastores of the compute resource that owns the VM's resource pool (those not in
//! maintenance). CAPV picks among the compliant ones at random; the stand-in takes the first,
//! which is one of the outcomes CAPV can have.

use super::types::VSphereVM;
use infrasim_vim_client::{Client, Moref};

/// The datastore to clone `vm` onto under its storage policy: `Some` to use instead of
/// `chosen` (the placement's), `None` to keep it (no policy, or the spec names a datastore
/// that complies); why not, for the `VirtualMachineProvisioned` condition.
pub(super) async fn datastore(
    client: &Client,
    vm: &VSphereVM,
    pool: &Moref,
    chosen: Option<&Moref>,
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
    let hubs = match (named, chosen) {
        (true, Some(ds)) => vec![ds.clone()],
        _ => pool_datastores(client, pool).await?,
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

/// The datastores of the compute resource that owns `pool`, but those in maintenance.
async fn pool_datastores(client: &Client, pool: &Moref) -> Result<Vec<Moref>, String> {
    let read = |e: infrasim_vim_client::Error| e.to_string();
    let owner = client.properties(pool, &["owner"]).await.map_err(read)?;
    let owner = owner
        .prop("owner")
        .and_then(|o| o.moref())
        .cloned()
        .ok_or_else(|| format!("failed to get owning cluster of resourcepool {pool}"))?;
    let compute = client
        .properties(&owner, &["datastore"])
        .await
        .map_err(read)?;
    let mut usable = Vec::new();
    for ds in compute
        .prop("datastore")
        .map(|d| d.items())
        .unwrap_or_default()
        .into_iter()
        .filter_map(|d| d.moref())
    {
        let summary = client
            .properties(ds, &["summary.maintenanceMode"])
            .await
            .map_err(read)?;
        match summary.text("summary.maintenanceMode") {
            "" | "normal" => usable.push(ds.clone()),
            _ => {}
        }
    }
    Ok(usable)
}
