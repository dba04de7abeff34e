//! The `builtin` variable's three parts, from the Cluster and the objects its topology has
//! or makes, with the JSON names and omissions of upstream's `Builtins` type.

use super::super::patches::variables::metadata;
use super::{Context, CLUSTER_NAME_LABEL};
use crate::capi::core::{MachineDeploymentTopology, ObjectMetaTemplate};
use crate::capi::{
    TOPOLOGY_DEPLOYMENT_LABEL as DEPLOYMENT_LABEL, TOPOLOGY_OWNED_LABEL as OWNED_LABEL,
};
use kube::ResourceExt;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

/// Labels and annotations from metadata templates, later ones winning.
fn merged(
    base: BTreeMap<String, String>,
    metas: &[Option<&ObjectMetaTemplate>],
) -> (BTreeMap<String, String>, BTreeMap<String, String>) {
    let (mut labels, mut annotations) = (base, BTreeMap::new());
    for meta in metas.iter().flatten() {
        labels.extend(meta.labels.clone());
        annotations.extend(meta.annotations.clone());
    }
    (labels, annotations)
}

fn insert_some(map: &mut Map<String, Value>, key: &str, value: Option<Value>) {
    if let Some(v) = value {
        map.insert(key.to_string(), v);
    }
}

impl Context<'_> {
    fn owned(&self) -> BTreeMap<String, String> {
        BTreeMap::from([
            (CLUSTER_NAME_LABEL.to_string(), self.c.name_any()),
            (OWNED_LABEL.to_string(), String::new()),
        ])
    }

    pub(super) fn cluster_builtin(&self) -> Value {
        let c = self.c;
        let ns = c.namespace().unwrap_or_default();
        let topology = c.spec.topology.clone().unwrap_or_default();
        let class_ns = topology.class_ref.namespace.clone().unwrap_or(ns.clone());
        let class_name = topology.class_ref.name.clone();
        let mut cluster = Map::new();
        cluster.insert("name".into(), json!(c.name_any()));
        cluster.insert("namespace".into(), json!(ns));
        insert_some(&mut cluster, "uid", c.uid().map(Value::String));
        insert_some(
            &mut cluster,
            "metadata",
            metadata(c.labels(), c.annotations()),
        );
        let mut t = json!({"classRef": {"name": class_name, "namespace": class_ns},
                           "class": class_name, "classNamespace": class_ns});
        if !topology.version.is_empty() {
            t["version"] = json!(topology.version);
        }
        cluster.insert("topology".into(), t);
        let network = c.spec.cluster_network.clone().unwrap_or(Value::Null);
        let mut net = Map::new();
        insert_some(
            &mut net,
            "serviceDomain",
            network
                .get("serviceDomain")
                .filter(|d| d.as_str().is_some_and(|s| !s.is_empty()))
                .cloned(),
        );
        insert_some(
            &mut net,
            "services",
            network.pointer("/services/cidrBlocks").cloned(),
        );
        insert_some(
            &mut net,
            "pods",
            network.pointer("/pods/cidrBlocks").cloned(),
        );
        if !net.is_empty() {
            cluster.insert("network".into(), Value::Object(net));
        }
        Value::Object(cluster)
    }

    pub(super) fn control_plane_builtin(&self) -> Value {
        let topology = self.c.spec.topology.clone().unwrap_or_default();
        let cp_topology = topology.control_plane.clone().unwrap_or_default();
        let (labels, annotations) = merged(
            self.owned(),
            &[
                self.class.spec.control_plane.metadata.as_ref(),
                cp_topology.metadata.as_ref(),
            ],
        );
        let mut cp = Map::new();
        if !topology.version.is_empty() {
            cp.insert("version".into(), json!(topology.version));
        }
        insert_some(&mut cp, "metadata", metadata(&labels, &annotations));
        cp.insert("name".into(), json!(self.control_plane_name));
        if let Some(replicas) = cp_topology.replicas {
            // The control plane's own count once it exists, as upstream reads it back.
            let have = self.existing.control_plane.and_then(|k| k.spec.replicas);
            cp.insert("replicas".into(), json!(have.unwrap_or(replicas)));
        }
        if self
            .class
            .spec
            .control_plane
            .machine_infrastructure
            .is_some()
        {
            cp.insert(
                "machineTemplate".into(),
                json!({"infrastructureRef": {"name": self.machines_name}}),
            );
        }
        Value::Object(cp)
    }

    pub(super) fn deployment_builtin(&self, md: &MachineDeploymentTopology) -> Value {
        let version = self
            .c
            .spec
            .topology
            .as_ref()
            .map(|t| t.version.clone())
            .unwrap_or_default();
        let md_class = self
            .class
            .spec
            .workers
            .as_ref()
            .and_then(|w| w.machine_deployments.iter().find(|m| m.class == md.class));
        let mut base = self.owned();
        base.insert(DEPLOYMENT_LABEL.into(), md.name.clone());
        let (labels, annotations) = merged(
            base,
            &[
                md_class.and_then(|m| m.metadata.as_ref()),
                md.metadata.as_ref(),
            ],
        );
        let mut out = Map::new();
        if !version.is_empty() {
            out.insert("version".into(), json!(version));
        }
        insert_some(&mut out, "metadata", metadata(&labels, &annotations));
        out.insert("class".into(), json!(md.class));
        if let Some(names) = self.names.get(&md.name) {
            out.insert("name".into(), json!(names.deployment));
            out.insert("topologyName".into(), json!(md.name));
            out.insert("replicas".into(), json!(md.replicas.unwrap_or(1)));
            out.insert(
                "bootstrap".into(),
                json!({"configRef": {"name": names.bootstrap}}),
            );
            out.insert(
                "infrastructureRef".into(),
                json!({"name": names.infrastructure}),
            );
        }
        Value::Object(out)
    }
}
