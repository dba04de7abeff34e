//! Addresses from IPAM pools for a VSphereVM's devices (`addressesFromPools`), as CAPV gets
//! them through Cluster API's IPAM contract: one `IPAddressClaim` per device and pool, named
//! `<vm>-<device>-<pool>`, owned by the VSphereVM, with CAPV's `ip-claim-protection`
//! finalizer and the cluster-name label; `IPAddressClaimsFulfilled` says how far they are.
//! Once every claim is bound, each device's addresses (`address/prefix`) and gateway go into
//! the VM's cloud-init metadata beside its static ones; until then the VM waits
//! (`WaitingForIPAddress`) before its metadata is written and it is powered on. Claims are
//! released (CAPV's finalizer removed) once the VM is gone; the VSphereVM's deletion then
//! takes them, and the IPAM provider its addresses.

use super::types::VSphereVM;
use super::{Error, Reconciler};
use crate::capi::core::{IPAddress, IPAddressClaim};
use infrasim_controller_runtime::conditions::{self, Condition};
use infrasim_controller_runtime::finalizers;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::{Resource, ResourceExt};
use serde_json::{json, Value};
use std::net::IpAddr;

/// CAPV's finalizer on the claims a VSphereVM makes.
pub const FINALIZER: &str = "vspherevm.infrastructure.cluster.x-k8s.io/ip-claim-protection";

/// The name of a VM's claim for its `device`-th device and that device's `pool`-th pool.
pub fn claim_name(vm: &str, device: usize, pool: usize) -> String {
    format!("{vm}-{device}-{pool}")
}

/// The addresses a device got from its pools, ready for the metadata.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DeviceAddresses {
    /// `address/prefix`, in the order of the device's pools.
    pub ip_addrs: Vec<String>,
    pub gateway4: Option<String>,
    pub gateway6: Option<String>,
}

/// Each device's pool references, by device index.
fn pools_of(devices: &[Value]) -> Vec<(usize, Vec<Value>)> {
    devices
        .iter()
        .enumerate()
        .map(|(i, d)| {
            let pools = d
                .get("addressesFromPools")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            (i, pools)
        })
        .collect()
}

/// Whether a device wants static addresses it has not been given, as CAPV waits for them:
/// neither DHCP, nor addresses, nor pools, nor `skipIPAllocation`.
pub fn waiting_for_static_ip(devices: &[Value]) -> bool {
    let flag = |d: &Value, f: &str| d.get(f).and_then(Value::as_bool).unwrap_or(false);
    let empty = |d: &Value, f: &str| {
        d.get(f)
            .and_then(Value::as_array)
            .is_none_or(|a| a.is_empty())
    };
    devices.iter().any(|d| {
        !flag(d, "skipIPAllocation")
            && !flag(d, "dhcp4")
            && !flag(d, "dhcp6")
            && empty(d, "ipAddrs")
            && empty(d, "addressesFromPools")
    })
}

impl Reconciler {
    /// Makes the VM's claims (or puts back what CAPV keeps on them) and says how far they are
    /// (`IPAddressClaimsFulfilled`).
    pub(super) async fn claim_addresses(
        &self,
        vm: &VSphereVM,
        devices: &[Value],
    ) -> Result<Condition, Error> {
        let ns = vm.namespace().unwrap_or_default();
        let api: Api<IPAddressClaim> = Api::namespaced(self.ctx.client.clone(), &ns);
        let (mut total, mut created, mut fulfilled) = (0, 0, 0);
        let mut ready: Vec<Condition> = Vec::new();
        for (device, pools) in pools_of(devices) {
            for (index, pool) in pools.iter().enumerate() {
                total += 1;
                let name = claim_name(&vm.name_any(), device, index);
                let claim = match self.informers.get::<IPAddressClaim>(&ns, &name).await? {
                    Some(c) => {
                        self.keep_claim(&api, vm, &c).await?;
                        c
                    }
                    None => {
                        created += 1;
                        std::sync::Arc::new(self.make_claim(&api, vm, &name, pool).await?)
                    }
                };
                if claim.bound_address().is_some() {
                    fulfilled += 1;
                }
                let conds = claim.status.as_ref().and_then(|s| s.conditions.as_deref());
                if let Some(c) = conds.and_then(|c| conditions::find(c, "Ready")) {
                    ready.push(c.clone());
                }
            }
        }
        Ok(fulfilment(total, created, fulfilled, &ready))
    }

    async fn make_claim(
        &self,
        api: &Api<IPAddressClaim>,
        vm: &VSphereVM,
        name: &str,
        pool: &Value,
    ) -> Result<IPAddressClaim, Error> {
        let cluster = vm
            .labels()
            .get(crate::capi::CLUSTER_NAME_LABEL)
            .cloned()
            .unwrap_or_default();
        let claim = json!({
            "apiVersion": IPAddressClaim::api_version(&()),
            "kind": "IPAddressClaim",
            "metadata": {
                "name": name,
                "labels": {crate::capi::CLUSTER_NAME_LABEL: cluster},
                "finalizers": [FINALIZER],
                // No controller flag, as CAPV adds it.
                "ownerReferences": [crate::capi::standin::objects::owner_ref(vm, false)],
            },
            "spec": {"poolRef": {
                "apiGroup": pool.get("apiGroup").cloned().unwrap_or(json!("")),
                "kind": pool.get("kind").cloned().unwrap_or(json!("")),
                "name": pool.get("name").cloned().unwrap_or(json!("")),
            }},
        });
        let claim: IPAddressClaim = serde_json::from_value(claim)
            .map_err(|e| Error::Reported(format!("building IPAddressClaim {name}: {e}")))?;
        match api.create(&PostParams::default(), &claim).await {
            Ok(made) => Ok(made),
            Err(kube::Error::Api(e)) if e.code == 409 => Ok(api.get(name).await?),
            Err(e) => {
                let why = format!("failed to create IPAddressClaim {name}: {e}");
                Err(Error::Reported(why))
            }
        }
    }

    /// Puts back CAPV's owner reference, finalizer and label on a claim that lost them.
    async fn keep_claim(
        &self,
        api: &Api<IPAddressClaim>,
        vm: &VSphereVM,
        claim: &IPAddressClaim,
    ) -> Result<(), Error> {
        let owned = claim
            .owner_references()
            .iter()
            .any(|o| Some(&o.uid) == vm.uid().as_ref());
        let held = claim.finalizers().iter().any(|f| f == FINALIZER);
        let label = vm.labels().get(crate::capi::CLUSTER_NAME_LABEL);
        let labelled = claim.labels().get(crate::capi::CLUSTER_NAME_LABEL) == label;
        if (owned && held && labelled) || claim.metadata.deletion_timestamp.is_some() {
            return Ok(());
        }
        let mut owners = claim.owner_references().to_vec();
        if !owned {
            owners.push(crate::capi::standin::objects::owner_ref(vm, false));
        }
        let mut finalizers = claim.finalizers().to_vec();
        if !held {
            finalizers.push(FINALIZER.to_string());
        }
        let patch = json!({"metadata": {
            "resourceVersion": claim.resource_version(),
            "ownerReferences": owners,
            "finalizers": finalizers,
            "labels": {crate::capi::CLUSTER_NAME_LABEL: label},
        }});
        api.patch(
            &claim.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await?;
        Ok(())
    }

    /// Every device's pool addresses, once every claim is bound (`Err` with why not yet).
    pub(super) async fn pool_addresses(
        &self,
        vm: &VSphereVM,
        devices: &[Value],
    ) -> Result<Result<Vec<DeviceAddresses>, String>, Error> {
        let ns = vm.namespace().unwrap_or_default();
        let mut out = Vec::new();
        let (mut total, mut bound) = (0, 0);
        for (device, pools) in pools_of(devices) {
            let mut addresses = Vec::new();
            for index in 0..pools.len() {
                total += 1;
                let name = claim_name(&vm.name_any(), device, index);
                let claim = self.informers.get::<IPAddressClaim>(&ns, &name).await?;
                let Some(bound_to) = claim
                    .as_ref()
                    .and_then(|c| c.bound_address().map(str::to_string))
                else {
                    continue;
                };
                match self.informers.get::<IPAddress>(&ns, &bound_to).await? {
                    Some(a) => addresses.push(a),
                    None => continue,
                }
                bound += 1;
            }
            let configured = &devices[device];
            out.push(device_addresses(configured, &addresses).map_err(Error::Reported)?);
        }
        if bound < total {
            return Ok(Err(format!(
                "waiting for IP address claims to be bound ({bound}/{total} bound)"
            )));
        }
        Ok(Ok(out))
    }

    /// Takes CAPV's finalizer off the VM's claims (the VM is gone).
    pub(super) async fn release_claims(
        &self,
        vm: &VSphereVM,
        devices: &[Value],
    ) -> Result<(), Error> {
        let ns = vm.namespace().unwrap_or_default();
        for (device, pools) in pools_of(devices) {
            for index in 0..pools.len() {
                let name = claim_name(&vm.name_any(), device, index);
                if let Some(claim) = self.informers.get::<IPAddressClaim>(&ns, &name).await? {
                    finalizers::remove(&self.ctx.client, &*claim, FINALIZER).await?;
                }
            }
        }
        Ok(())
    }
}

/// `IPAddressClaimsFulfilled`, as CAPV reckons it: from the claims' `Ready` conditions when
/// every claim has one, else from how many are bound and how many were just made.
fn fulfilment(total: usize, created: usize, fulfilled: usize, ready: &[Condition]) -> Condition {
    const TYPE: &str = "IPAddressClaimsFulfilled";
    if ready.len() == total {
        if total == 0 {
            // CAPV's words for a VM with no claims (a True condition, with this reason).
            return Condition::new(TYPE, true, "NotFulfilled", "");
        }
        return match ready.iter().find(|c| !c.is_true()) {
            None => Condition::new(TYPE, true, "Fulfilled", ""),
            Some(c) => Condition::new(TYPE, false, &c.reason, c.message.clone()),
        };
    }
    if fulfilled == total {
        Condition::new(TYPE, true, "Fulfilled", "")
    } else if created > 0 {
        let why = format!("{created}/{total} claims being created");
        Condition::new(TYPE, false, "IPAddressClaimsBeingCreated", why)
    } else {
        let why = format!("{}/{total} claims being processed", total - fulfilled);
        Condition::new(TYPE, false, "WaitingForIPAddress", why)
    }
}

/// A device's pool addresses as CAPV checks them: each a valid `address/prefix`, none twice,
/// each gateway of its address's family and agreeing with the device's own and the others'.
fn device_addresses(
    device: &Value,
    addresses: &[std::sync::Arc<IPAddress>],
) -> Result<DeviceAddresses, String> {
    let mut out = DeviceAddresses::default();
    for a in addresses {
        let name = a.name_any();
        let ip: IpAddr = a.spec.address.parse().map_err(|_| {
            format!(
                "IPAddress {name} has invalid ip address: {:?}",
                a.spec.address
            )
        })?;
        let width = if ip.is_ipv4() { 32 } else { 128 };
        if a.spec.prefix < 0 || a.spec.prefix > width {
            return Err(format!(
                "IPAddress {name} has invalid ip address: \"{}/{}\"",
                a.spec.address, a.spec.prefix
            ));
        }
        let with_prefix = format!("{ip}/{}", a.spec.prefix);
        if out.ip_addrs.contains(&with_prefix) {
            return Err(format!(
                "IPAddress {name} is a duplicate of another address: {with_prefix:?}"
            ));
        }
        if let Some(g) = a.spec.gateway.as_deref().filter(|g| !g.is_empty()) {
            let gateway: IpAddr = g
                .parse()
                .map_err(|_| format!("IPAddress {name} has invalid gateway: {g:?}"))?;
            if gateway.is_ipv4() != ip.is_ipv4() {
                return Err(format!(
                    "IPAddress {name} has mismatched gateway and address IP families"
                ));
            }
            let (field, kept) = match gateway.is_ipv4() {
                true => ("gateway4", &mut out.gateway4),
                false => ("gateway6", &mut out.gateway6),
            };
            let configured = device
                .get(field)
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty());
            if configured.is_some_and(|c| c != g) {
                return Err(format!("the {} Gateway for IPAddress {name} does not match the {field} already configured on the device", if gateway.is_ipv4() { "IPv4" } else { "IPv6" }));
            }
            if kept.as_deref().is_some_and(|k| k != g) {
                return Err(
                    "the IPAddresses assigned to the same device do not have the same gateway"
                        .into(),
                );
            }
            *kept = Some(g.to_string());
        }
        out.ip_addrs.push(with_prefix);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capi::core::{AddressRef, IPAddressSpec, IPPoolReference};
    use std::sync::Arc;

    fn address(name: &str, ip: &str, prefix: i32, gateway: Option<&str>) -> Arc<IPAddress> {
        Arc::new(IPAddress::new(
            name,
            IPAddressSpec {
                claim_ref: AddressRef { name: name.into() },
                pool_ref: IPPoolReference::default(),
                address: ip.into(),
                prefix,
                gateway: gateway.map(str::to_string),
            },
        ))
    }

    #[test]
    fn claims_are_named_by_vm_device_and_pool() {
        assert_eq!(claim_name("wl-md-0-x7", 0, 1), "wl-md-0-x7-0-1");
    }

    #[test]
    fn a_device_without_any_address_source_waits() {
        assert!(waiting_for_static_ip(&[
            json!({"networkName": "VM Network"})
        ]));
        assert!(!waiting_for_static_ip(&[json!({"dhcp4": true})]));
        assert!(!waiting_for_static_ip(&[
            json!({"ipAddrs": ["10.0.0.5/24"]})
        ]));
        assert!(!waiting_for_static_ip(&[
            json!({"addressesFromPools": [{"name": "p"}]})
        ]));
        assert!(!waiting_for_static_ip(&[json!({"skipIPAllocation": true})]));
    }

    #[test]
    fn fulfilment_counts_bound_and_new_claims() {
        assert_eq!(
            fulfilment(2, 2, 0, &[]).reason,
            "IPAddressClaimsBeingCreated"
        );
        assert_eq!(
            fulfilment(2, 0, 1, &[]).message,
            "1/2 claims being processed"
        );
        assert!(fulfilment(2, 0, 2, &[]).is_true());
        let no_claims = fulfilment(0, 0, 0, &[]);
        assert!(no_claims.is_true());
        assert_eq!(no_claims.reason, "NotFulfilled");
        let exhausted = Condition::new("Ready", false, "PoolExhausted", "no address");
        assert_eq!(fulfilment(1, 0, 0, &[exhausted]).reason, "PoolExhausted");
    }

    #[test]
    fn pool_addresses_carry_prefix_and_gateway_and_are_checked() {
        let dev = json!({});
        let got =
            device_addresses(&dev, &[address("a", "10.0.0.7", 24, Some("10.0.0.1"))]).unwrap();
        assert_eq!(got.ip_addrs, ["10.0.0.7/24"]);
        assert_eq!(got.gateway4.as_deref(), Some("10.0.0.1"));
        let twice = [
            address("a", "10.0.0.7", 24, None),
            address("b", "10.0.0.7", 24, None),
        ];
        assert!(device_addresses(&dev, &twice)
            .unwrap_err()
            .contains("duplicate"));
        let families = [address("a", "10.0.0.7", 24, Some("fd00::1"))];
        assert!(device_addresses(&dev, &families)
            .unwrap_err()
            .contains("mismatched"));
        let other_gateway = json!({"gateway4": "10.0.0.254"});
        let one = [address("a", "10.0.0.7", 24, Some("10.0.0.1"))];
        assert!(device_addresses(&other_gateway, &one).is_err());
        assert!(device_addresses(&dev, &[address("a", "10.0.0.7", 33, None)]).is_err());
    }
}
