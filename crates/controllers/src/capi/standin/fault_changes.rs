//! The control planes to look at again when a fault on their cluster changes: what a fault
//! does (an etcd alarm, a member down, a certificate re-issued) changes nothing in the
//! management plane, so nothing else would wake them to see it.

use crate::capi::core::{Cluster, KubeadmControlPlane};
use infrasim_cloud::Cloud;
use infrasim_controller_runtime::informers::Informers;
use kube::runtime::reflector::ObjectRef;
use std::sync::Arc;

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
        let found = (key.rsplit_once('.'))
            .and_then(|(cluster, ns)| control_plane_of(&informers, ns, cluster));
        futures::future::ready(found)
    })
}

/// The KubeadmControlPlane of Cluster `namespace/cluster`, from the informer's cache.
fn control_plane_of(
    informers: &Informers,
    namespace: &str,
    cluster: &str,
) -> Option<ObjectRef<KubeadmControlPlane>> {
    let store = informers.of::<Cluster>().store();
    let cluster = store.get(&ObjectRef::new(cluster).within(namespace))?;
    let cp = cluster.spec.control_plane_ref.as_ref()?;
    (cp.kind == "KubeadmControlPlane").then(|| ObjectRef::new(&cp.name).within(namespace))
}
