//! Cluster API's external tracker: the core hears of every provider's objects its
//! references name, whatever their kind, as upstream's core starts a watch on each kind the
//! first time a reference names it. A VSphereMachine (or any infrastructure machine) that
//! reports `provisioned`, or is deleted, wakes its Machine; an infrastructure cluster wakes
//! its Cluster. The kinds the stand-in knows at compile time (the in-memory provider's and
//! its own Kubeadm kinds) already wake their owners through typed watches.

use crate::capi::core::{Cluster, Machine};
use futures::channel::mpsc::{unbounded, UnboundedReceiver, UnboundedSender};
use infrasim_controller_runtime::informers::Informers;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::ApiResource;
use kube::runtime::reflector::ObjectRef;
use std::collections::HashSet;
use std::sync::{Arc, Mutex};

/// The kinds whose owners hear of them through the stand-in's typed watches.
fn watched_already(kind: &str) -> bool {
    kind.starts_with("InMemory")
        || kind.starts_with("Dev")
        || matches!(kind, "KubeadmConfig" | "KubeadmControlPlane")
}

/// The watches started so far, and where their owners' wakeups go.
pub struct Tracker {
    informers: Arc<Informers>,
    tracked: Mutex<HashSet<(String, String)>>,
    wake: Arc<Wake>,
    /// Taken once each, by the Machine and the Cluster controller.
    receivers: Mutex<Receivers>,
}

struct Wake {
    machines: UnboundedSender<ObjectRef<Machine>>,
    clusters: UnboundedSender<ObjectRef<Cluster>>,
}

#[derive(Default)]
struct Receivers {
    machines: Option<UnboundedReceiver<ObjectRef<Machine>>>,
    clusters: Option<UnboundedReceiver<ObjectRef<Cluster>>>,
}

impl Tracker {
    pub fn new(informers: Arc<Informers>) -> Self {
        let (machines, machines_rx) = unbounded();
        let (clusters, clusters_rx) = unbounded();
        Tracker {
            informers,
            tracked: Mutex::default(),
            wake: Arc::new(Wake { machines, clusters }),
            receivers: Mutex::new(Receivers {
                machines: Some(machines_rx),
                clusters: Some(clusters_rx),
            }),
        }
    }

    /// Hears of `resource`'s objects from now on (a no-op after the first call per kind).
    pub fn track(&self, resource: &ApiResource) {
        if watched_already(&resource.kind) {
            return;
        }
        let key = (resource.api_version.clone(), resource.kind.clone());
        let first = self
            .tracked
            .lock()
            .map(|mut t| t.insert(key))
            .unwrap_or(false);
        if first {
            tracing::debug!(kind = %resource.kind, "the core watches a provider kind");
            let wake = self.wake.clone();
            self.informers.observe_owners(
                resource,
                Arc::new(move |ns, owners| wake.owners(ns, owners)),
            );
        }
    }

    /// The Machines whose infrastructure or bootstrap objects changed (once; empty after).
    pub fn machines(&self) -> UnboundedReceiver<ObjectRef<Machine>> {
        let taken = self
            .receivers
            .lock()
            .ok()
            .and_then(|mut r| r.machines.take());
        taken.unwrap_or_else(|| unbounded().1)
    }

    /// The Clusters whose infrastructure objects changed (once; empty after).
    pub fn clusters(&self) -> UnboundedReceiver<ObjectRef<Cluster>> {
        let taken = self
            .receivers
            .lock()
            .ok()
            .and_then(|mut r| r.clusters.take());
        taken.unwrap_or_else(|| unbounded().1)
    }
}

impl Wake {
    /// Wakes the core's owners among `owners`.
    fn owners(&self, ns: &str, owners: &[OwnerReference]) {
        for o in owners {
            if o.api_version.split('/').next() != Some("cluster.x-k8s.io") {
                continue;
            }
            // A closed channel: the controller is gone, and with it the need to wake it.
            match o.kind.as_str() {
                "Machine" => {
                    let _ = self
                        .machines
                        .unbounded_send(ObjectRef::new(&o.name).within(ns));
                }
                "Cluster" => {
                    let _ = self
                        .clusters
                        .unbounded_send(ObjectRef::new(&o.name).within(ns));
                }
                _ => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;

    fn owner(api_version: &str, kind: &str, name: &str) -> OwnerReference {
        OwnerReference {
            api_version: api_version.into(),
            kind: kind.into(),
            name: name.into(),
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn a_provider_object_wakes_its_core_owners_only() {
        let (machines, mut machines_rx) = unbounded();
        let (clusters, mut clusters_rx) = unbounded();
        let wake = Wake { machines, clusters };
        wake.owners(
            "ns",
            &[
                owner("cluster.x-k8s.io/v1beta2", "Machine", "m1"),
                owner(
                    "infrastructure.cluster.x-k8s.io/v1beta2",
                    "Machine",
                    "not-core",
                ),
                owner("cluster.x-k8s.io/v1beta1", "Cluster", "c1"),
            ],
        );
        drop(wake);
        let woken: Vec<_> = machines_rx.by_ref().collect().await;
        assert_eq!(woken, vec![ObjectRef::new("m1").within("ns")]);
        let woken: Vec<_> = clusters_rx.by_ref().collect().await;
        assert_eq!(woken, vec![ObjectRef::new("c1").within("ns")]);
    }

    #[test]
    fn the_stand_ins_own_kinds_are_not_watched_twice() {
        assert!(watched_already("InMemoryMachine"));
        assert!(watched_already("DevCluster"));
        assert!(watched_already("KubeadmConfig"));
        assert!(!watched_already("VSphereMachine"));
    }
}
