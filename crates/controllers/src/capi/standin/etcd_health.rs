//! What the control plane's `EtcdClusterHealthy` reads of its etcd: the alarms its members
//! report and the members that do not answer, per control-plane Machine, as upstream's
//! KubeadmControlPlane reads them from each member ("Etcd member reports alarms: NOSPACE").
//!
//! A cluster this process hosts is read in place (its `EtcdCluster`), as the Node cache
//! reads Nodes: a connection per cluster per reconcile would cost ten thousand clusters
//! their file descriptors. Its faults change nothing in the management plane, so the
//! control planes follow the cloud's fault changes ([`woken`]) to look again.

use crate::capi::core::{Cluster, KubeadmControlPlane, Machine};
use crate::capi::infra::cloud_key;
use infrasim_cloud::Cloud;
use infrasim_controller_runtime::informers::Informers;
use infrasim_etcd_sim::pb::etcdserverpb::AlarmType;
use infrasim_etcd_sim::MembershipImage;
use kube::runtime::reflector::ObjectRef;
use kube::ResourceExt;
use std::sync::Arc;

/// One line per control-plane Machine whose etcd member reports alarms or does not answer
/// (it is down), as upstream writes them into `EtcdClusterHealthy`'s message; empty when
/// all is well or the cluster is not hosted here.
pub fn alarm_report(
    cloud: &Cloud,
    namespace: &str,
    cluster: &str,
    machines: &[Machine],
) -> Vec<String> {
    let Some(etcd) = cloud.etcd(&cloud_key(cluster, namespace)) else {
        return Vec::new();
    };
    report(&etcd.membership(), machines, |node| etcd.member_down(node))
}

/// The lines of [`alarm_report`] from the membership and which members are `down`, by name.
fn report(
    membership: &MembershipImage,
    machines: &[Machine],
    down: impl Fn(&str) -> bool,
) -> Vec<String> {
    let mut lines = Vec::new();
    for machine in machines {
        let Some(node) = machine.status.as_ref().and_then(|s| s.node_ref.as_ref()) else {
            continue;
        };
        if down(&node.name) {
            lines.push(format!(
                "* Machine {}: Failed to connect to the etcd Pod on the {} Node: connection refused",
                machine.name_any(),
                node.name
            ));
            continue;
        }
        let Some(member) = membership.members.iter().find(|m| m.name == node.name) else {
            continue;
        };
        let alarms: Vec<&str> = (membership.alarms.iter())
            .filter(|(id, _)| *id == member.id)
            .filter_map(|(_, alarm)| AlarmType::try_from(*alarm).ok())
            .filter(|alarm| *alarm != AlarmType::None)
            .map(|alarm| alarm.as_str_name())
            .collect();
        if !alarms.is_empty() {
            lines.push(format!(
                "* Machine {}: Etcd member reports alarms: {}",
                machine.name_any(),
                alarms.join(", ")
            ));
        }
    }
    lines
}

/// The control planes of the clusters whose faults change (the cloud names a cluster by
/// `<cluster>.<namespace>`; a namespace has no dot).
pub fn woken(
    cloud: &Cloud,
    informers: Arc<Informers>,
) -> impl futures::Stream<Item = ObjectRef<KubeadmControlPlane>> + Send + 'static {
    use futures::StreamExt;
    let changes = cloud.fault_changes();
    futures::stream::unfold(changes, |mut rx| async move {
        loop {
            match rx.recv().await {
                Ok(key) => return Some((key, rx)),
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                Err(tokio::sync::broadcast::error::RecvError::Closed) => return None,
            }
        }
    })
    .filter_map(move |key| {
        let found = key.rsplit_once('.').and_then(|(cluster, ns)| {
            let store = informers.of::<Cluster>().store();
            let cluster = store.get(&ObjectRef::new(cluster).within(ns))?;
            let cp = cluster.spec.control_plane_ref.as_ref()?;
            (cp.kind == "KubeadmControlPlane").then(|| ObjectRef::new(&cp.name).within(ns))
        });
        futures::future::ready(found)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use infrasim_etcd_sim::Member;
    use serde_json::json;

    fn machine(name: &str, node: Option<&str>) -> Machine {
        let mut m: Machine = serde_json::from_value(json!({
            "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
            "metadata": {"name": name, "namespace": "ns"},
            "spec": {"clusterName": "c", "bootstrap": {},
                     "infrastructureRef": {"apiGroup": "x", "kind": "X", "name": name}},
        }))
        .expect("a machine");
        if let Some(node) = node {
            m.status = serde_json::from_value(json!({"nodeRef": {"name": node}})).ok();
        }
        m
    }

    fn member(id: u64, name: &str) -> Member {
        Member {
            id,
            name: name.into(),
            peer_urls: Vec::new(),
            client_urls: Vec::new(),
            is_learner: false,
        }
    }

    #[test]
    fn each_alarmed_member_is_named_by_its_machine() {
        let membership = MembershipImage {
            members: vec![member(1, "n1"), member(2, "n2"), member(3, "n3")],
            alarms: vec![
                (1, AlarmType::Nospace as i32),
                (1, AlarmType::Corrupt as i32),
                (3, AlarmType::Nospace as i32),
            ],
            ..MembershipImage::default()
        };
        let machines = [
            machine("m1", Some("n1")),
            machine("m2", Some("n2")),
            machine("m3", Some("n3")),
            machine("m4", None),
        ];
        assert_eq!(
            report(&membership, &machines, |_| false),
            [
                "* Machine m1: Etcd member reports alarms: NOSPACE, CORRUPT",
                "* Machine m3: Etcd member reports alarms: NOSPACE",
            ]
        );
        let quiet = MembershipImage {
            alarms: Vec::new(),
            ..membership
        };
        assert!(report(&quiet, &machines, |_| false).is_empty());
    }
}
