//! CAPV's object-state metrics: the families CAPV's kube-state-metrics configuration
//! (`config/metrics/crd-metrics-config.yaml`, v1beta2) defines for its govmomi-mode kinds,
//! which the CAPV stand-in serves. Each also has an `owner` family (one sample per owner
//! reference), which Cluster API's own configuration does not.

use crate::capi::state_metrics::{
    conditions, kind, name_info, paused_and_created, StateKind, CLUSTER_LABEL,
};
use crate::capv::types::{
    VSphereCluster, VSphereClusterIdentity, VSphereDeploymentZone, VSphereFailureDomain,
    VSphereMachine, VSphereVM,
};
use infrasim_controller_runtime::state_metrics::follow;
use infrasim_metrics::state::{Each, Resource};

const INFRA: &str = "infrastructure.cluster.x-k8s.io";

fn vsphere(kind_name: &'static str, prefix: &'static str) -> Resource {
    paused_and_created(kind(INFRA, kind_name, prefix, Some(CLUSTER_LABEL))).family(
        "owner",
        "The object's owner references.",
        Each::info(&["metadata", "ownerReferences"])
            .label("owner_is_controller", &["controller"])
            .label("owner_kind", &["kind"])
            .label("owner_name", &["name"])
            .label("owner_uid", &["uid"]),
    )
}

/// With the condition families as well.
fn vsphere_with_conditions(kind_name: &'static str, prefix: &'static str) -> Resource {
    conditions(vsphere(kind_name, prefix))
}

/// The families of CAPV's kinds.
pub fn all() -> Vec<StateKind> {
    let cluster = vsphere_with_conditions("VSphereCluster", "capi_vspherecluster").family(
        "info",
        "Information about a VSphereCluster.",
        Each::info(&[])
            .label("identity_reference_kind", &["spec", "identityRef", "kind"])
            .label("identity_reference_name", &["spec", "identityRef", "name"])
            .label("spec_server", &["spec", "server"])
            .label("status_vsphere_version", &["status", "vCenterVersion"]),
    );
    let machine = vsphere_with_conditions("VSphereMachine", "capi_vspheremachine")
        .family(
            "info",
            "Information about a VSphereMachine.",
            Each::info(&[]).label("provider_id", &["spec", "providerID"]),
        )
        .family(
            "status_addresses",
            "The machine's addresses.",
            Each::info(&["status", "addresses"])
                .label("address", &["address"])
                .label("type", &["type"]),
        );
    let vm = vsphere_with_conditions("VSphereVM", "capi_vspherevm")
        .family(
            "info",
            "Information about a VSphereVM.",
            Each::info(&[])
                .label(
                    "bootstrap_reference_kind",
                    &["spec", "bootstrapRef", "kind"],
                )
                .label(
                    "bootstrap_reference_name",
                    &["spec", "bootstrapRef", "name"],
                )
                .label("status_clonemode", &["status", "cloneMode"])
                .label("status_vmref", &["status", "vmRef"]),
        )
        .family(
            "status_addresses",
            "The VM's addresses.",
            Each::info(&["status", "addresses"]).label("address", &[]),
        );
    vec![
        (cluster, follow::<VSphereCluster>),
        (
            name_info(vsphere_with_conditions(
                "VSphereClusterIdentity",
                "capi_vsphereclusteridentity",
            )),
            follow::<VSphereClusterIdentity>,
        ),
        (
            name_info(vsphere_with_conditions(
                "VSphereDeploymentZone",
                "capi_vspheredeploymentzone",
            )),
            follow::<VSphereDeploymentZone>,
        ),
        (
            name_info(vsphere("VSphereFailureDomain", "capi_vspherefailuredomain")),
            follow::<VSphereFailureDomain>,
        ),
        (machine, follow::<VSphereMachine>),
        (vm, follow::<VSphereVM>),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_vm_has_a_sample_per_owner_and_per_address() {
        let (vm, _) = all().pop().expect("VSphereVM");
        let object = json!({
            "metadata": {"name": "vm", "namespace": "ns", "uid": "u",
                         "labels": {"cluster.x-k8s.io/cluster-name": "c1"},
                         "ownerReferences": [{"kind": "VSphereMachine", "name": "m", "uid": "o", "controller": true}]},
            "status": {"addresses": ["10.0.0.5", "fe80::1"], "vmRef": "vm-42"}
        });
        let text = vm.lines(&object).concat();
        assert!(
            text.contains("capi_vspherevm_owner{cluster_name=\"c1\","),
            "{text}"
        );
        assert!(
            text.contains("owner_is_controller=\"true\",owner_kind=\"VSphereMachine\""),
            "{text}"
        );
        assert!(text.contains(",address=\"10.0.0.5\"}"), "{text}");
        assert!(text.contains(",address=\"fe80::1\"}"), "{text}");
        assert!(text.contains("status_vmref=\"vm-42\""), "{text}");
    }
}
