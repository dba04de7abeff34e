//! What the topology wants of the objects it makes and keeps in line with the class, shared
//! by the pass that makes them (`topology`) and the one that brings them back in line
//! (`rollout`): the field manager it applies them under, the labels it owns them by, and
//! what its infrastructure cluster and control plane are cloned from.

use super::objects::{owner_ref, CloneSpec};
use crate::capi::core::Cluster;
use crate::capi::{CLUSTER_NAME_LABEL, TOPOLOGY_OWNED_LABEL as OWNED_LABEL};
use kube::ResourceExt;
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// The field manager the topology writes the objects it keeps in line with the class under,
/// Cluster API's topology controller's.
pub(super) const TOPOLOGY_MANAGER: &str = "capi-topology";

/// The labels of every object the topology makes for a Cluster.
pub(super) fn owned_labels(c: &Cluster) -> BTreeMap<String, String> {
    BTreeMap::from([
        (CLUSTER_NAME_LABEL.to_string(), c.name_any()),
        (OWNED_LABEL.to_string(), String::new()),
    ])
}

/// What the topology makes its infrastructure cluster from (and applies again, see
/// `rollout`): the class's template, with the Cluster's labels and as its controlled object.
pub(super) fn infrastructure_clone<'a>(c: &Cluster, name: &'a str) -> CloneSpec<'a> {
    CloneSpec {
        name,
        labels: owned_labels(c),
        annotations: BTreeMap::new(),
        owner: Some(owner_ref(c, true)),
        spec_overrides: None,
    }
}

/// What the topology makes its control plane from (and applies again): the class's
/// template with the topology's version and replicas and `machine_template`.
pub(super) fn control_plane_clone<'a>(
    c: &Cluster,
    name: &'a str,
    machine_template: Value,
) -> CloneSpec<'a> {
    let topology = c.spec.topology.clone().unwrap_or_default();
    let mut overrides = json!({"version": topology.version, "machineTemplate": machine_template});
    if let Some(n) = topology.control_plane.as_ref().and_then(|cp| cp.replicas) {
        overrides["replicas"] = json!(n);
    }
    CloneSpec {
        name,
        labels: owned_labels(c),
        annotations: BTreeMap::new(),
        owner: Some(owner_ref(c, true)),
        spec_overrides: Some(overrides),
    }
}
