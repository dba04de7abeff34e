//! `IPAddressClaim` and `IPAddress` (ipam.cluster.x-k8s.io/v1beta1): the same specs as
//! v1beta2; a claim's status keeps v1beta1 conditions at the top and the v1beta2 ones under
//! `status.v1beta2`. Addresses have no status.

// Printer columns repeat `type_ = "string"` inside one `#[kube(...)]`.
#![allow(clippy::duplicated_attributes)]

use super::machine::ConditionsOnly;
use super::Condition;
use crate::capi::core::{AddressRef, IPAddressClaimSpec as ClaimHub, IPAddressSpec as AddressHub};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "ipam.cluster.x-k8s.io",
    version = "v1beta1",
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
pub struct IPAddressClaimSpec {
    #[serde(flatten)]
    pub spec: ClaimHub,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct IPAddressClaimStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address_ref: Option<AddressRef>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "super::conditions")]
    pub conditions: Option<Vec<Condition>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub v1beta2: Option<ConditionsOnly>,
}

#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "ipam.cluster.x-k8s.io",
    version = "v1beta1",
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
pub struct IPAddressSpecV1Beta1 {
    #[serde(flatten)]
    pub spec: AddressHub,
}
