//! The `Dev*` kinds as `v1beta1` shaped them, served beside `v1beta2` so that templates and
//! clients of Cluster API's earlier releases work: readiness as `status.ready`, failure
//! domains as a map, v1beta1 conditions with the v1beta2 ones under `status.v1beta2`. The
//! provider never reads these types: they give each CRD its v1beta1 schema and printer
//! columns, and objects are converted on the way in and out (see `capi::conversion`).

// Printer columns repeat `type_ = "string"` and the like inside one `#[kube(...)]`.
#![allow(clippy::duplicated_attributes)]

use crate::capi::core::v1beta1::{Condition, ConditionsOnly};
use crate::capi::core::{ApiEndpoint, MachineAddress, ObjectMetaTemplate};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1beta1",
    kind = "DevCluster",
    namespaced,
    status = "DevClusterStatus",
    category = "cluster-api",
    printcolumn(
        name = "Cluster",
        type_ = "string",
        json_path = ".metadata.labels['cluster\\.x-k8s\\.io/cluster-name']",
        description = "Cluster"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "Time duration since creation of the DevCluster"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct DevClusterSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_plane_endpoint: Option<ApiEndpoint>,
    #[serde(default)]
    #[schemars(schema_with = "infrasim_controller_runtime::schema::preserve_unknown")]
    pub backend: Value,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DevClusterStatus {
    #[serde(default)]
    pub ready: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "infrasim_controller_runtime::schema::preserve_unknown")]
    pub failure_domains: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::capi::core::v1beta1::conditions")]
    pub conditions: Option<Vec<Condition>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub v1beta2: Option<ConditionsOnly>,
}

#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1beta1",
    kind = "DevMachine",
    namespaced,
    status = "DevMachineStatus",
    category = "cluster-api",
    printcolumn(
        name = "Cluster",
        type_ = "string",
        json_path = ".metadata.labels['cluster\\.x-k8s\\.io/cluster-name']",
        description = "Cluster"
    ),
    printcolumn(
        name = "Machine",
        type_ = "string",
        json_path = ".metadata.ownerReferences[?(@.kind==\"Machine\")].name",
        description = "Machine object which owns with this DevMachine"
    ),
    printcolumn(
        name = "ProviderID",
        type_ = "string",
        json_path = ".spec.providerID",
        description = "Provider ID"
    ),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.ready",
        description = "Machine ready status"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "Time duration since creation of the DevMachine"
    )
)]
pub struct DevMachineSpec {
    #[serde(
        default,
        rename = "providerID",
        skip_serializing_if = "Option::is_none"
    )]
    pub provider_id: Option<String>,
    #[serde(default)]
    #[schemars(schema_with = "infrasim_controller_runtime::schema::preserve_unknown")]
    pub backend: Value,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DevMachineStatus {
    #[serde(default)]
    pub ready: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub addresses: Option<Vec<MachineAddress>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::capi::core::v1beta1::conditions")]
    pub conditions: Option<Vec<Condition>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub v1beta2: Option<ConditionsOnly>,
}

#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1beta1",
    kind = "DevClusterTemplate",
    namespaced,
    category = "cluster-api",
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "Time duration since creation of the DevClusterTemplate"
    )
)]
pub struct DevClusterTemplateSpec {
    pub template: DevClusterTemplateResource,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct DevClusterTemplateResource {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<ObjectMetaTemplate>,
    pub spec: DevClusterSpec,
}

#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1beta1",
    kind = "DevMachineTemplate",
    namespaced,
    category = "cluster-api",
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "Time duration since creation of the DevMachineTemplate"
    )
)]
pub struct DevMachineTemplateSpec {
    pub template: DevMachineTemplateResource,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct DevMachineTemplateResource {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<ObjectMetaTemplate>,
    pub spec: DevMachineSpec,
}
