//! Cluster API's IPAM contract kinds (`ipam.cluster.x-k8s.io/v1beta2`): an `IPAddressClaim`
//! asks the IPAM provider that owns a pool for an address, and the provider answers with an
//! `IPAddress` (named after the claim) that the claim's `status.addressRef` names. A consumer
//! (CAPV's VSphereVM, for `addressesFromPools`) makes the claims and reads the addresses; a
//! provider (the in-cluster one, see [`crate::capi::ipam`]) fulfils them.
//!
//! Upstream's webhooks refuse a change of either spec, an address or gateway that is not an
//! IP, and a prefix too long for the address's family; here the CRDs' schemas say the same
//! (CEL rules), so every client meets them without a webhook. Not checked: upstream's
//! webhook also refuses an IPAddress whose claim names another pool (a read of another
//! object, which a schema cannot do).

// Printer columns repeat `type_ = "string"` inside one `#[kube(...)]`.
#![allow(clippy::duplicated_attributes)]

use infrasim_controller_runtime::conditions::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The pool a claim asks, or an address came from: a (Global)InClusterIPPool or any IPAM
/// provider's pool kind.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct IPPoolReference {
    #[schemars(length(min = 1, max = 253))]
    pub api_group: String,
    #[schemars(length(min = 1, max = 63))]
    pub kind: String,
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
}

/// A request for an address from a pool.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "ipam.cluster.x-k8s.io",
    version = "v1beta2",
    kind = "IPAddressClaim",
    namespaced,
    status = "IPAddressClaimStatus",
    category = "cluster-api",
    printcolumn(name = "Pool Name", type_ = "string", json_path = ".spec.poolRef.name"),
    printcolumn(name = "Pool Kind", type_ = "string", json_path = ".spec.poolRef.kind"),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "self == oldSelf", "message": "IPAddressClaim spec is immutable"}
]))]
pub struct IPAddressClaimSpec {
    /// The Cluster the claim is for (optional; consumers often say it with Cluster API's
    /// cluster-name label instead).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 63))]
    pub cluster_name: Option<String>,
    pub pool_ref: IPPoolReference,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct IPAddressClaimStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "infrasim_controller_runtime::schema::conditions")]
    pub conditions: Option<Vec<Condition>>,
    /// The IPAddress made for the claim, once there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address_ref: Option<AddressRef>,
    /// `deprecated.v1beta1.conditions`, as upstream keeps them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "infrasim_controller_runtime::schema::preserve_unknown")]
    pub deprecated: Option<Value>,
}

/// An object named in the claim's namespace.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct AddressRef {
    #[serde(default)]
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
}

/// An address a pool gave a claim.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "ipam.cluster.x-k8s.io",
    version = "v1beta2",
    kind = "IPAddress",
    namespaced,
    category = "cluster-api",
    printcolumn(name = "Address", type_ = "string", json_path = ".spec.address"),
    printcolumn(name = "Pool Name", type_ = "string", json_path = ".spec.poolRef.name"),
    printcolumn(name = "Pool Kind", type_ = "string", json_path = ".spec.poolRef.kind"),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "self == oldSelf", "message": "IPAddress spec is immutable"},
    {"rule": "!isIP(self.address) || ip(self.address).family() == 6 || self.prefix <= 32",
     "message": "prefix is too long for an IPv4 address", "fieldPath": ".prefix"},
    {"rule": "!has(self.gateway) || !isIP(self.address) || !isIP(self.gateway) || ip(self.gateway).family() == ip(self.address).family()",
     "message": "gateway and address are of different IP families", "fieldPath": ".gateway"}
]))]
pub struct IPAddressSpec {
    /// The claim the address was made for (its namesake).
    pub claim_ref: AddressRef,
    pub pool_ref: IPPoolReference,
    #[schemars(length(min = 1, max = 39))]
    #[schemars(extend("x-kubernetes-validations" = [
        {"rule": "isIP(self)", "message": "not a valid IP address"}
    ]))]
    pub address: String,
    #[schemars(range(min = 0, max = 128))]
    pub prefix: i32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 39))]
    #[schemars(extend("x-kubernetes-validations" = [
        {"rule": "isIP(self)", "message": "not a valid IP address"}
    ]))]
    pub gateway: Option<String>,
}

impl IPAddressClaim {
    /// The name of the IPAddress bound to the claim, once there is one.
    pub fn bound_address(&self) -> Option<&str> {
        self.status
            .as_ref()
            .and_then(|s| s.address_ref.as_ref())
            .map(|r| r.name.as_str())
            .filter(|n| !n.is_empty())
    }
}
