//! Cluster API's object-state metrics: the families Cluster API's kube-state-metrics
//! configuration (`config/metrics/crd-metrics-config.yaml`, generated for v1beta2) defines
//! for the kinds this process serves, with the same names, labels and paths, which Cluster
//! API's `cluster-api-state` Grafana dashboard reads (`capi_cluster_status_phase`,
//! `capi_machine_info`, `capi_machinedeployment_status_replicas_ready`, ...).
//!
//! Kinds of that configuration not served here have no families: MachinePool,
//! ExtensionConfig and the Docker provider's kinds.

use infrasim_controller_runtime::state_metrics::{follow, Follow};
use infrasim_metrics::state::{Each, Path, Resource};

const NAME: Path = &["metadata", "name"];
const NAMESPACE: Path = &["metadata", "namespace"];
const UID: Path = &["metadata", "uid"];
/// The label every Cluster API object of a cluster carries.
pub const CLUSTER_LABEL: Path = &["metadata", "labels", "cluster.x-k8s.io/cluster-name"];
const SPEC_CLUSTER: Path = &["spec", "clusterName"];
const CONDITION_STATES: &[&str] = &["True", "False", "Unknown"];
/// The phases Cluster API gives a Cluster.
pub const CLUSTER_PHASES: &[&str] = &[
    "Pending",
    "Provisioning",
    "Provisioned",
    "Deleting",
    "Failed",
    "Unknown",
];
/// The phases Cluster API gives a Machine.
pub const MACHINE_PHASES: &[&str] = &[
    "Pending",
    "Provisioning",
    "Provisioned",
    "Running",
    "Updating",
    "Deleting",
    "Deleted",
    "Failed",
    "Unknown",
];

/// A kind of Cluster API's v1beta2 API named by `name`, `namespace` and `uid`, and
/// `cluster_name` from `cluster` where the kind says which cluster it belongs to.
pub fn kind(
    group: &'static str,
    kind: &'static str,
    prefix: &'static str,
    cluster: Option<Path>,
) -> Resource {
    let r = Resource::new(group, "v1beta2", kind, prefix);
    let r = match cluster {
        Some(path) => r.label("cluster_name", path),
        None => r,
    };
    r.label("name", NAME)
        .label("namespace", NAMESPACE)
        .label("uid", UID)
}

/// The two condition families of every kind with `status.conditions`.
pub fn conditions(r: Resource) -> Resource {
    r.family(
        "status_condition",
        "The state of each of the object's conditions.",
        Each::state_set(&["status", "conditions"], "status", CONDITION_STATES)
            .value_from(&["status"])
            .label("type", &["type"]),
    )
    .family(
        "status_condition_last_transition_time",
        "When each of the object's conditions last changed, in Unix seconds.",
        Each::gauge(&["status", "conditions"])
            .value_from(&["lastTransitionTime"])
            .label("status", &["status"])
            .label("type", &["type"]),
    )
}

/// The pause annotation and the creation time, which every Cluster API kind has.
pub fn paused_and_created(r: Resource) -> Resource {
    r.family(
        "annotation_paused",
        "The object's cluster.x-k8s.io/paused annotation, when it has one.",
        Each::info(&["metadata", "annotations", "cluster.x-k8s.io/paused"])
            .label("paused_value", &[]),
    )
    .family(
        "created",
        "When the object was created, in Unix seconds.",
        Each::gauge(&["metadata", "creationTimestamp"]),
    )
}

/// The families most Cluster API kinds have: the pause annotation, the creation time and
/// the conditions.
pub fn common(r: Resource) -> Resource {
    conditions(paused_and_created(r))
}

/// An info family with only the object's name, for kinds whose configuration names no other
/// label (kube-state-metrics makes no sample of an info without labels).
pub fn name_info(r: Resource) -> Resource {
    r.family(
        "info",
        "Information about the object.",
        Each::info(&[]).label("name", NAME),
    )
}

/// A gauge family: its name, its help, the value's path, and whether a missing value reads
/// as 0.
type Gauge = (&'static str, &'static str, Path, bool);

/// `spec.replicas`, missing left out.
const SPEC_REPLICAS: Gauge = (
    "spec_replicas",
    "The desired replicas.",
    &["spec", "replicas"],
    false,
);
/// `spec.rollout.strategy.rollingUpdate.maxSurge`, missing left out.
const MAX_SURGE: Gauge = (
    "spec_strategy_rollingupdate_max_surge",
    "The rolling update's maximum surge.",
    &["spec", "rollout", "strategy", "rollingUpdate", "maxSurge"],
    false,
);

fn gauge(r: Resource, (name, help, path, nil_is_zero): Gauge) -> Resource {
    let each = Each::gauge(path);
    r.family(
        name,
        help,
        if nil_is_zero {
            each.nil_is_zero()
        } else {
            each
        },
    )
}

/// The `gauges` families, in order.
fn gauges(r: Resource, gauges: &[Gauge]) -> Resource {
    gauges.iter().fold(r, |r, g| gauge(r, *g))
}

/// `each` with the `(name, path)` labels, in order.
fn labels(each: Each, labels: &[(&'static str, Path)]) -> Each {
    labels
        .iter()
        .fold(each, |each, &(name, path)| each.label(name, path))
}

/// `spec.template.spec`'s references and version, as MachineSets and MachineDeployments
/// label their info.
fn template_info(r: Resource) -> Resource {
    r.family(
        "info",
        "Information about the object's machine template.",
        labels(
            Each::info(&[]),
            &[
                ("version", &["spec", "template", "spec", "version"]),
                (
                    "bootstrap_reference_kind",
                    &["spec", "template", "spec", "bootstrap", "configRef", "kind"],
                ),
                (
                    "bootstrap_reference_name",
                    &["spec", "template", "spec", "bootstrap", "configRef", "name"],
                ),
                (
                    "infrastructure_reference_kind",
                    &["spec", "template", "spec", "infrastructureRef", "kind"],
                ),
                (
                    "infrastructure_reference_name",
                    &["spec", "template", "spec", "infrastructureRef", "name"],
                ),
            ],
        ),
    )
}

/// The replica gauges of status (`status.<field>` as `status_<name>`), missing read as 0.
fn replicas(r: Resource, fields: &[(&'static str, Path)]) -> Resource {
    fields.iter().fold(r, |r, &(name, path)| {
        gauge(
            r,
            (
                name,
                "Replicas, as the object's status counts them.",
                path,
                true,
            ),
        )
    })
}

const STATUS_REPLICAS: &[(&str, Path)] = &[
    ("status_replicas", &["status", "replicas"]),
    (
        "status_replicas_available",
        &["status", "availableReplicas"],
    ),
    ("status_replicas_ready", &["status", "readyReplicas"]),
    ("status_replicas_uptodate", &["status", "upToDateReplicas"]),
];

/// The labels of a Cluster's info.
const CLUSTER_INFO: &[(&str, Path)] = &[
    (
        "control_plane_endpoint_host",
        &["spec", "controlPlaneEndpoint", "host"],
    ),
    (
        "control_plane_endpoint_port",
        &["spec", "controlPlaneEndpoint", "port"],
    ),
    (
        "control_plane_reference_kind",
        &["spec", "controlPlaneRef", "kind"],
    ),
    (
        "control_plane_reference_name",
        &["spec", "controlPlaneRef", "name"],
    ),
    (
        "infrastructure_reference_kind",
        &["spec", "infrastructureRef", "kind"],
    ),
    (
        "infrastructure_reference_name",
        &["spec", "infrastructureRef", "name"],
    ),
    (
        "topology_classref_name",
        &["spec", "topology", "classRef", "name"],
    ),
    (
        "topology_classref_namespace",
        &["spec", "topology", "classRef", "namespace"],
    ),
    ("topology_version", &["spec", "topology", "version"]),
];

fn cluster() -> Resource {
    let r = common(kind("cluster.x-k8s.io", "Cluster", "capi_cluster", None)).family(
        "info",
        "Information about a cluster.",
        labels(Each::info(&[]), CLUSTER_INFO),
    );
    gauge(
        r,
        (
            "spec_paused",
            "Whether the cluster is paused.",
            &["spec", "paused"],
            true,
        ),
    )
    .family(
        "status_phase",
        "The cluster's phase.",
        Each::state_set(&["status", "phase"], "phase", CLUSTER_PHASES),
    )
}

/// The labels of a Machine's info.
const MACHINE_INFO: &[(&str, Path)] = &[
    (
        "bootstrap_reference_kind",
        &["spec", "bootstrap", "configRef", "kind"],
    ),
    (
        "bootstrap_reference_name",
        &["spec", "bootstrap", "configRef", "name"],
    ),
    (
        "container_runtime_version",
        &["status", "nodeInfo", "containerRuntimeVersion"],
    ),
    (
        "control_plane_name",
        &["metadata", "labels", "cluster.x-k8s.io/control-plane-name"],
    ),
    ("failure_domain", &["spec", "failureDomain"]),
    (
        "infrastructure_reference_kind",
        &["spec", "infrastructureRef", "kind"],
    ),
    (
        "infrastructure_reference_name",
        &["spec", "infrastructureRef", "name"],
    ),
    ("kernel_version", &["status", "nodeInfo", "kernelVersion"]),
    (
        "kube_proxy_version",
        &["status", "nodeInfo", "kubeProxyVersion"],
    ),
    ("kubelet_version", &["status", "nodeInfo", "kubeletVersion"]),
    ("os_image", &["status", "nodeInfo", "osImage"]),
    ("provider_id", &["spec", "providerID"]),
    ("version", &["spec", "version"]),
];

fn machine() -> Resource {
    let r = common(kind(
        "cluster.x-k8s.io",
        "Machine",
        "capi_machine",
        Some(SPEC_CLUSTER),
    ))
    .family(
        "addresses",
        "The machine's addresses.",
        Each::info(&["status", "addresses"])
            .label("address", &["address"])
            .label("type", &["type"]),
    )
    .family(
        "info",
        "Information about a machine.",
        labels(Each::info(&[]), MACHINE_INFO),
    );
    gauge(
        r,
        (
            "status_certificatesexpirydate",
            "When the machine's certificates expire, in Unix seconds.",
            &["status", "certificatesExpiryDate"],
            true,
        ),
    )
    .family(
        "status_noderef",
        "The machine's Node.",
        Each::info(&["status", "nodeRef"]).label("node_name", &["name"]),
    )
    .family(
        "status_phase",
        "The machine's phase.",
        Each::state_set(&["status", "phase"], "phase", MACHINE_PHASES),
    )
}

fn machine_deployment() -> Resource {
    let r = template_info(common(kind(
        "cluster.x-k8s.io",
        "MachineDeployment",
        "capi_machinedeployment",
        Some(SPEC_CLUSTER),
    )));
    let r = gauges(
        r,
        &[
            (
                "spec_paused",
                "Whether the MachineDeployment is paused.",
                &["spec", "paused"],
                true,
            ),
            SPEC_REPLICAS,
            MAX_SURGE,
            (
                "spec_strategy_rollingupdate_max_unavailable",
                "The rolling update's maximum unavailable machines.",
                &[
                    "spec",
                    "rollout",
                    "strategy",
                    "rollingUpdate",
                    "maxUnavailable",
                ],
                false,
            ),
        ],
    );
    replicas(
        r.family(
            "status_phase",
            "The MachineDeployment's phase.",
            Each::state_set(
                &["status", "phase"],
                "phase",
                &["ScalingUp", "ScalingDown", "Running", "Failed", "Unknown"],
            ),
        ),
        STATUS_REPLICAS,
    )
}

fn machine_set() -> Resource {
    let r = template_info(common(kind(
        "cluster.x-k8s.io",
        "MachineSet",
        "capi_machineset",
        Some(SPEC_CLUSTER),
    )));
    // Missing reads as 0 here, unlike a MachineDeployment's or a control plane's.
    let spec_replicas = (
        "spec_replicas",
        "The desired replicas.",
        &["spec", "replicas"][..],
        true,
    );
    replicas(gauge(r, spec_replicas), STATUS_REPLICAS)
}

fn machine_health_check() -> Resource {
    let info = labels(
        Each::info(&[]),
        &[
            ("cluster_name", SPEC_CLUSTER),
            (
                "remediation_triggerif_unhealthyinrange",
                &["spec", "remediation", "triggerIf", "unhealthyInRange"],
            ),
            (
                "remediation_triggerif_unhealthylessthanorequalto",
                &[
                    "spec",
                    "remediation",
                    "triggerIf",
                    "unhealthyLessThanOrEqualTo",
                ],
            ),
        ],
    );
    let r = common(kind(
        "cluster.x-k8s.io",
        "MachineHealthCheck",
        "capi_machinehealthcheck",
        Some(SPEC_CLUSTER),
    ))
    .family("info", "Information about a MachineHealthCheck.", info);
    gauges(
        r,
        &[
            (
                "status_current_healthy",
                "Healthy machines.",
                &["status", "currentHealthy"],
                true,
            ),
            (
                "status_expected_machines",
                "Machines checked.",
                &["status", "expectedMachines"],
                true,
            ),
            (
                "status_remediations_allowed",
                "Remediations allowed now.",
                &["status", "remediationsAllowed"],
                true,
            ),
        ],
    )
}

fn kubeadm_control_plane() -> Resource {
    let owner: Path = &["metadata", "ownerReferences", "[kind=Cluster]", "name"];
    let r = common(kind(
        "controlplane.cluster.x-k8s.io",
        "KubeadmControlPlane",
        "capi_kubeadmcontrolplane",
        Some(owner),
    ))
    .family(
        "info",
        "Information about a KubeadmControlPlane.",
        Each::info(&[]).label("version", &["spec", "version"]),
    );
    replicas(gauges(r, &[SPEC_REPLICAS, MAX_SURGE]), STATUS_REPLICAS)
}

/// A kind's families and how they are kept: from the informer of the kind's type.
pub type StateKind = (Resource, Follow);

/// The families of the kinds the embedded Cluster API core serves.
pub fn core() -> Vec<StateKind> {
    use crate::capi::core as api;
    vec![
        (
            conditions(kind(
                "addons.cluster.x-k8s.io",
                "ClusterResourceSet",
                "capi_clusterresourceset",
                None,
            )),
            follow::<api::ClusterResourceSet>,
        ),
        (
            name_info(common(kind(
                "bootstrap.cluster.x-k8s.io",
                "KubeadmConfig",
                "capi_kubeadmconfig",
                Some(CLUSTER_LABEL),
            ))),
            follow::<api::KubeadmConfig>,
        ),
        (cluster(), follow::<api::Cluster>),
        (
            name_info(common(kind(
                "cluster.x-k8s.io",
                "ClusterClass",
                "capi_clusterclass",
                None,
            ))),
            follow::<api::ClusterClass>,
        ),
        (machine(), follow::<api::Machine>),
        (machine_deployment(), follow::<api::MachineDeployment>),
        (machine_health_check(), follow::<api::MachineHealthCheck>),
        (machine_set(), follow::<api::MachineSet>),
        (kubeadm_control_plane(), follow::<api::KubeadmControlPlane>),
        (
            conditions(kind(
                "ipam.cluster.x-k8s.io",
                "IPAddressClaim",
                "capi_ipaddressclaim",
                Some(CLUSTER_LABEL),
            )),
            follow::<api::IPAddressClaim>,
        ),
    ]
}

/// The families of the in-memory provider's upstream kinds (Cluster API's configuration
/// has none for the seed's `InMemory*`).
pub fn provider() -> Vec<StateKind> {
    use crate::capi::infra::types::{DevCluster, DevMachine};
    let infra = "infrastructure.cluster.x-k8s.io";
    vec![
        (
            conditions(kind(
                infra,
                "DevCluster",
                "capi_devcluster",
                Some(CLUSTER_LABEL),
            )),
            follow::<DevCluster>,
        ),
        (
            conditions(kind(
                infra,
                "DevMachine",
                "capi_devmachine",
                Some(CLUSTER_LABEL),
            )),
            follow::<DevMachine>,
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_machine_deployment_reads_as_the_dashboard_expects() {
        let md = machine_deployment();
        let names: Vec<&str> = md.family_names().collect();
        assert!(names.contains(&"capi_machinedeployment_status_replicas_ready"));
        let object = json!({
            "metadata": {"name": "md", "namespace": "ns", "uid": "u1"},
            "spec": {"clusterName": "c1", "replicas": 3,
                     "rollout": {"strategy": {"rollingUpdate": {"maxSurge": "25%"}}},
                     "template": {"spec": {"version": "v1.33.0",
                                           "infrastructureRef": {"kind": "DevMachineTemplate", "name": "t"}}}},
            "status": {"phase": "ScalingUp", "readyReplicas": 2}
        });
        let text = md.lines(&object).concat();
        assert!(
            text.contains("capi_machinedeployment_info{cluster_name=\"c1\","),
            "{text}"
        );
        assert!(text.contains("infrastructure_reference_kind=\"DevMachineTemplate\""));
        assert!(text.contains(",version=\"v1.33.0\"} 1\n"), "{text}");
        assert!(text.contains("capi_machinedeployment_spec_strategy_rollingupdate_max_surge{"));
        assert!(text.contains("} 0.25\n"), "{text}");
        assert!(
            text.contains("uid=\"u1\",phase=\"ScalingUp\"} 1\n"),
            "{text}"
        );
        let ready = text
            .lines()
            .find(|l| l.starts_with("capi_machinedeployment_status_replicas_ready{"));
        assert!(ready.is_some_and(|l| l.ends_with("} 2")), "{text}");
        // Not in the status: 0, as the configuration's nilIsZero says.
        let available = text
            .lines()
            .find(|l| l.starts_with("capi_machinedeployment_status_replicas_available{"));
        assert!(available.is_some_and(|l| l.ends_with("} 0")), "{text}");
    }

    #[test]
    fn a_control_plane_is_labelled_with_its_owning_cluster() {
        let object = json!({
            "metadata": {"name": "cp", "namespace": "ns", "uid": "u",
                         "ownerReferences": [{"kind": "Cluster", "name": "c1", "apiVersion": "cluster.x-k8s.io/v1beta2", "uid": "x"}]},
            "spec": {"version": "v1.33.0", "replicas": 3}
        });
        let text = kubeadm_control_plane().lines(&object).concat();
        assert!(
            text.contains("capi_kubeadmcontrolplane_info{cluster_name=\"c1\","),
            "{text}"
        );
    }

    #[test]
    fn every_family_name_is_unique() {
        let mut all: Vec<String> = core()
            .iter()
            .chain(provider().iter())
            .flat_map(|(r, _)| r.family_names().map(str::to_string).collect::<Vec<_>>())
            .collect();
        let n = all.len();
        all.sort();
        all.dedup();
        assert_eq!(all.len(), n);
    }
}
