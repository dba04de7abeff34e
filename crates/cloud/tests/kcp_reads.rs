//! What Cluster API's KubeadmControlPlane controller reads and writes on a workload cluster,
//! played with kube-rs against a simulated one.

mod common;
use common::client;
use futures::{StreamExt, TryStreamExt};
use infrasim_cloud::{Cloud, CloudConfig, ClusterShape};
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod};
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use kube::api::{ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use kube::Api;
use std::time::Duration;

#[tokio::test]
async fn kubeadm_control_plane_reads_and_writes() {
    let cloud = Cloud::new(CloudConfig {
        ports: 23500..=23560,
        ..CloudConfig::default()
    });
    let cluster = cloud
        .create_cluster(ClusterShape {
            name: "kcp".into(),
            control_planes: 3,
            workers: 1,
            kubernetes_version: "v1.31.0".into(),
            ..ClusterShape::default()
        })
        .await
        .unwrap();
    // Its controllers schedule and start CoreDNS and kube-proxy first.
    for _ in 0..200 {
        if cloud.ready("kcp") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(cloud.ready("kcp"), "the cluster came up");
    let c = client(&cluster.kubeconfig).await;

    // Health and discovery.
    let version = c.apiserver_version().await.unwrap();
    assert_eq!(version.git_version, "v1.31.0");
    let groups = c.list_api_groups().await.unwrap();
    assert!(groups.groups.iter().any(|g| g.name == "apps"));

    // Control-plane nodes by label, and their four static pods each.
    let nodes: Api<Node> = Api::all(c.clone());
    let cps = nodes
        .list(&ListParams::default().labels("node-role.kubernetes.io/control-plane"))
        .await
        .unwrap();
    assert_eq!(cps.items.len(), 3);
    let pods: Api<Pod> = Api::namespaced(c.clone(), "kube-system");
    for node in &cps.items {
        let name = node.metadata.name.clone().unwrap();
        for component in [
            "etcd",
            "kube-apiserver",
            "kube-controller-manager",
            "kube-scheduler",
        ] {
            let pod = pods.get(&format!("{component}-{name}")).await.unwrap();
            assert_eq!(pod.spec.unwrap().node_name.as_deref(), Some(name.as_str()));
            let labels = pod.metadata.labels.unwrap();
            assert_eq!(labels.get("component").map(String::as_str), Some(component));
            assert_eq!(
                labels.get("tier").map(String::as_str),
                Some("control-plane")
            );
            assert_eq!(pod.status.unwrap().phase.as_deref(), Some("Running"));
        }
    }

    // kubeadm-config: read, then update as KCP does when it upgrades.
    let cms: Api<ConfigMap> = Api::namespaced(c.clone(), "kube-system");
    let mut kubeadm = cms.get("kubeadm-config").await.unwrap();
    let config = kubeadm.data.as_ref().unwrap()["ClusterConfiguration"].clone();
    assert!(config.contains("kubernetesVersion: v1.31.0"));
    kubeadm.data.as_mut().unwrap().insert(
        "ClusterConfiguration".into(),
        config.replace("v1.31.0", "v1.32.0"),
    );
    cms.replace("kubeadm-config", &PostParams::default(), &kubeadm)
        .await
        .unwrap();
    assert!(
        cms.get("kubeadm-config").await.unwrap().data.unwrap()["ClusterConfiguration"]
            .contains("v1.32.0")
    );

    // Merge-patch the kube-proxy DaemonSet image; read CoreDNS.
    let ds: Api<DaemonSet> = Api::namespaced(c.clone(), "kube-system");
    let patch = serde_json::json!({"spec": {"template": {"spec": {"containers": [
        {"name": "kube-proxy", "image": "registry.k8s.io/kube-proxy:v1.32.0"}]}}}});
    let patched = ds
        .patch("kube-proxy", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    assert_eq!(patched.metadata.generation, Some(2));
    let deploys: Api<Deployment> = Api::namespaced(c.clone(), "kube-system");
    assert_eq!(
        deploys
            .get("coredns")
            .await
            .unwrap()
            .status
            .unwrap()
            .ready_replicas,
        Some(2)
    );
    assert!(cms.get("coredns").await.unwrap().data.unwrap()["Corefile"]
        .contains("kubernetes cluster.local"));

    // A ClusterRoleBinding, as KCP creates for kubeadm.
    let crbs: Api<ClusterRoleBinding> = Api::all(c.clone());
    let crb: ClusterRoleBinding = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "kubeadm:kubelet-config"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "kubeadm:get-nodes"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:bootstrappers:kubeadm:default-node-token"}]
    }))
    .unwrap();
    crbs.create(&PostParams::default(), &crb).await.unwrap();

    // Watching nodes sees a change (the Machine controller labels nodes).
    let start = nodes
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let mut stream = nodes
        .watch(&WatchParams::default().timeout(10), &start)
        .await
        .unwrap()
        .boxed();
    let label = serde_json::json!({"metadata": {"labels": {"cluster.x-k8s.io/owned": ""}}});
    nodes
        .patch(
            "kcp-worker-0",
            &PatchParams::default(),
            &Patch::Strategic(&label),
        )
        .await
        .unwrap();
    let event = tokio::time::timeout(Duration::from_secs(5), stream.try_next())
        .await
        .unwrap()
        .unwrap();
    match event {
        Some(WatchEvent::Modified(n)) => {
            assert!(n
                .metadata
                .labels
                .unwrap()
                .contains_key("cluster.x-k8s.io/owned"));
        }
        other => panic!("expected a node modification, got {other:?}"),
    }
}

/// What Cluster API's Machine controller does to a workload cluster when it deletes a machine:
/// find the Node by providerID, cordon it, evict its pods through `pods/eviction` (leaving
/// DaemonSet pods), wait for them to go, delete the Node.
#[tokio::test]
async fn machine_controller_drains_and_deletes_a_node() {
    use kube::api::{DeleteParams, EvictParams};
    let cloud = Cloud::new(CloudConfig {
        ports: 23570..=23590,
        ..CloudConfig::default()
    });
    let cluster = cloud
        .create_cluster(ClusterShape {
            name: "drain".into(),
            control_planes: 1,
            workers: 2,
            workloads: infrasim_cloud::WorkloadConfig {
                pod_startup: Duration::ZERO,
                ..Default::default()
            },
            ..ClusterShape::default()
        })
        .await
        .unwrap();
    let c = client(&cluster.kubeconfig).await;
    let nodes: Api<Node> = Api::all(c.clone());
    let all_pods: Api<Pod> = Api::all(c.clone());
    for _ in 0..200 {
        if cloud.ready("drain") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    // The node of the machine, by providerID.
    let node = nodes
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .find(|n| {
            n.spec.as_ref().and_then(|s| s.provider_id.as_deref())
                == Some("in-memory://drain-worker-0")
        })
        .unwrap();
    let name = node.metadata.name.clone().unwrap();
    let cordon = serde_json::json!({"spec": {"unschedulable": true, "taints": [
        {"key": "node.cluster.x-k8s.io/uninitialized", "effect": "NoSchedule"}]}});
    nodes
        .patch(&name, &PatchParams::default(), &Patch::Strategic(&cordon))
        .await
        .unwrap();
    let on_node = ListParams::default().fields(&format!("spec.nodeName={name}"));
    let is_daemon = |p: &Pod| {
        p.metadata
            .owner_references
            .as_ref()
            .is_some_and(|o| o.iter().any(|r| r.kind == "DaemonSet"))
    };
    let evictable: Vec<Pod> = all_pods
        .list(&on_node)
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|p| !is_daemon(p))
        .collect();
    assert!(!evictable.is_empty(), "CoreDNS runs on the workers");
    for p in &evictable {
        let ns: Api<Pod> = Api::namespaced(c.clone(), p.metadata.namespace.as_deref().unwrap());
        ns.evict(p.metadata.name.as_deref().unwrap(), &EvictParams::default())
            .await
            .unwrap();
    }
    // Evicted pods are replaced elsewhere; the cordoned node takes none of them back.
    for _ in 0..200 {
        let left = all_pods.list(&on_node).await.unwrap().items;
        if left.iter().all(is_daemon) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(all_pods
        .list(&on_node)
        .await
        .unwrap()
        .items
        .iter()
        .all(is_daemon));
    let deploys: Api<Deployment> = Api::namespaced(c.clone(), "kube-system");
    for _ in 0..200 {
        let s = deploys.get("coredns").await.unwrap().status.unwrap();
        if s.available_replicas == Some(2) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let dns = Api::<Pod>::namespaced(c.clone(), "kube-system")
        .list(&ListParams::default().labels("k8s-app=kube-dns"))
        .await
        .unwrap()
        .items;
    assert_eq!(dns.len(), 2);
    assert!(dns
        .iter()
        .all(|p| p.spec.as_ref().unwrap().node_name.as_deref() == Some("drain-worker-1")));
    nodes.delete(&name, &DeleteParams::default()).await.unwrap();
    // Its kube-proxy pod goes with it.
    for _ in 0..200 {
        if all_pods.list(&on_node).await.unwrap().items.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(all_pods.list(&on_node).await.unwrap().items.is_empty());
}
