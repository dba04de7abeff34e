//! Clusters come and go; their endpoints are reused.

mod common;
use common::client;
use infrasim_cloud::{Cloud, CloudConfig, ClusterShape};

fn shape(name: &str) -> ClusterShape {
    ClusterShape {
        name: name.into(),
        control_planes: 3,
        workers: 1,
        kubernetes_version: "v1.30.2".into(),
        ..ClusterShape::default()
    }
}

#[tokio::test]
async fn ports_come_from_the_range_and_are_reused_after_deletion() {
    let cloud = Cloud::new(CloudConfig {
        ports: 23400..=23460,
        ..CloudConfig::default()
    });
    let a = cloud.create_cluster(shape("a")).await.unwrap();
    let b = cloud.create_cluster(shape("b")).await.unwrap();
    assert!((23400..=23460).contains(&a.endpoint.port()));
    assert_ne!(a.endpoint.port(), b.endpoint.port());
    assert_eq!(a.nodes, 4);
    assert!(a
        .kubeconfig
        .contains(&format!("server: https://{}", a.endpoint)));
    assert!(matches!(
        cloud.create_cluster(shape("a")).await,
        Err(infrasim_cloud::CloudError::Exists(_))
    ));
    let freed = a.endpoint.port();
    assert!(cloud.delete_cluster("a").await.unwrap());
    // The listener is closed once the server task sees its stop signal.
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    let c = cloud.create_cluster(shape("c")).await.unwrap();
    assert_eq!(c.endpoint.port(), freed);
    let names: Vec<String> = cloud.clusters().into_iter().map(|c| c.name).collect();
    assert_eq!(names, vec!["b", "c"]);
}

#[test]
fn node_names_follow_the_shape() {
    let names = infrasim_cloud::node_names(&shape("x"));
    assert_eq!(
        names,
        vec![
            ("x-control-plane-0".to_string(), true),
            ("x-control-plane-1".to_string(), true),
            ("x-control-plane-2".to_string(), true),
            ("x-worker-0".to_string(), false),
        ]
    );
}

/// Lets the cluster's tasks run up to their next sleep on the fake clock.
async fn settle() {
    for _ in 0..20 {
        tokio::task::yield_now().await;
    }
    tokio::time::sleep(std::time::Duration::from_millis(30)).await;
}

#[tokio::test]
async fn machines_come_up_step_by_step_and_go_in_reverse() {
    use infrasim_clock::FakeClock;
    use infrasim_cloud::Progress;
    use k8s_openapi::api::core::v1::{Node, Pod};
    use k8s_openapi::api::discovery::v1::EndpointSlice;
    use kube::api::{Api, ListParams};
    use std::sync::Arc;
    use std::time::Duration;

    let clock = FakeClock::new("2030-01-01T00:00:00Z".parse().unwrap());
    let cloud = Cloud::with_clock(
        CloudConfig {
            ports: 23600..=23620,
            ..CloudConfig::default()
        },
        Arc::new(clock.clone()),
    );
    let info = cloud
        .create_cluster(ClusterShape {
            name: "slow".into(),
            control_planes: 1,
            workers: 1,
            startup: Duration::from_secs(10),
            ..ClusterShape::default()
        })
        .await
        .unwrap();
    let open = || async { tokio::net::TcpStream::connect(info.endpoint).await.is_ok() };
    let done = |n: usize| Some(Progress { done: n, total: 10 });
    settle().await;
    // Control plane: VM, Node, etcd, kube-apiserver, scheduler+controller-manager (5);
    // worker: VM, Node (2); addons (3).
    assert_eq!(cloud.progress("slow"), done(0));
    // Step by step on the clock; the endpoint opens with the first API server, and then the
    // worker joins and the addons start, in parallel.
    // The scheduler and controller-manager follow the API server at once.
    let expected = [
        (1, false),
        (2, false),
        (3, false),
        (5, true),
        (7, true),
        (9, true),
        (10, true),
    ];
    for (step, (progress, serving)) in expected.into_iter().enumerate() {
        clock.advance(Duration::from_secs(10));
        settle().await;
        assert_eq!(
            cloud.progress("slow"),
            done(progress),
            "after {} s",
            (step + 1) * 10
        );
        assert_eq!(
            open().await,
            serving,
            "endpoint after {} s",
            (step + 1) * 10
        );
    }
    let c = client(&info.kubeconfig).await;
    let nodes: Api<Node> = Api::all(c.clone());
    let pods: Api<Pod> = Api::namespaced(c.clone(), "kube-system");
    let slices: Api<EndpointSlice> = Api::namespaced(c.clone(), "default");
    assert_eq!(
        nodes
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .len(),
        2
    );
    let static_pods = ListParams::default().labels("tier=control-plane");
    assert_eq!(pods.list(&static_pods).await.unwrap().items.len(), 4);

    // A second control-plane machine joins at once (an API server serves) and comes up.
    cloud
        .add_machine(
            "slow",
            "slow-control-plane-1",
            true,
            infrasim_cloud::MachineBehaviour::uniform(Duration::from_secs(10), 0.0),
        )
        .await
        .unwrap();
    settle().await;
    for _ in 0..4 {
        clock.advance(Duration::from_secs(10));
        settle().await;
    }
    assert_eq!(
        cloud.progress("slow"),
        Some(Progress {
            done: 15,
            total: 15
        })
    );
    assert_eq!(pods.list(&static_pods).await.unwrap().items.len(), 8);
    let endpoints = |s: EndpointSlice| s.endpoints.len();
    assert_eq!(endpoints(slices.get("kubernetes").await.unwrap()), 2);

    // Removing the first control plane leaves the endpoint to the second.
    assert!(cloud
        .remove_machine("slow", "slow-control-plane-0")
        .await
        .unwrap());
    settle().await;
    assert!(open().await);
    assert_eq!(pods.list(&static_pods).await.unwrap().items.len(), 4);
    assert!(nodes
        .get_opt("slow-control-plane-0")
        .await
        .unwrap()
        .is_none());
    // Its kube-proxy pod is collected with its node.
    let on_removed = ListParams::default().fields("spec.nodeName=slow-control-plane-0");
    assert!(pods.list(&on_removed).await.unwrap().items.is_empty());
    assert_eq!(endpoints(slices.get("kubernetes").await.unwrap()), 1);
    // The worker goes, then the last API server: the endpoint closes with it.
    assert!(cloud.remove_machine("slow", "slow-worker-0").await.unwrap());
    assert!(cloud
        .remove_machine("slow", "slow-control-plane-1")
        .await
        .unwrap());
    assert!(!cloud
        .remove_machine("slow", "slow-control-plane-1")
        .await
        .unwrap());
    settle().await;
    assert!(
        !open().await,
        "the endpoint closed with the last API server"
    );
    assert_eq!(cloud.machines("slow").unwrap().len(), 0);
}

/// Cluster API's way: the endpoint is reserved first, the cluster created later with the
/// certificates Cluster API made, and a controller walks each machine's steps itself.
#[tokio::test]
async fn a_reserved_endpoint_then_machines_driven_step_by_step() {
    use infrasim_cloud::{CloudError, API_SERVER_PHASE};
    use k8s_openapi::api::core::v1::{Node, Pod};
    use kube::api::{Api, ListParams};

    let cloud = Cloud::new(CloudConfig {
        ports: 23700..=23720,
        ..CloudConfig::default()
    });
    let endpoint = cloud.reserve_endpoint("w1.ns", None).await.unwrap();
    assert_eq!(
        cloud.reserve_endpoint("w1.ns", None).await.unwrap(),
        endpoint
    );
    assert_eq!(cloud.endpoint("w1.ns"), Some(endpoint));
    // The port is held: another reservation gets another one, and asking for it fails.
    let other = cloud.reserve_endpoint("w2.ns", None).await.unwrap();
    assert_ne!(other.port(), endpoint.port());
    assert!(matches!(
        cloud.reserve_endpoint("w3.ns", Some(endpoint.port())).await,
        Err(CloudError::PortTaken(_))
    ));
    assert!(cloud.release_endpoint("w2.ns"));
    assert_eq!(
        cloud
            .reserve_endpoint("w3.ns", Some(other.port()))
            .await
            .unwrap(),
        other
    );

    let info = cloud
        .create_cluster(ClusterShape {
            name: "w1.ns".into(),
            control_planes: 0,
            workers: 0,
            cluster_name: Some("w1".into()),
            ..shape("w1.ns")
        })
        .await
        .unwrap();
    assert_eq!(
        info.endpoint, endpoint,
        "the cluster serves the reserved endpoint"
    );
    assert!(matches!(
        cloud.run_machine_step("nope", "m", true, None, 0).await,
        Err(CloudError::NoCluster(_))
    ));
    // VM and Node of the control plane; then its API server before etcd.
    for step in [0, 1] {
        cloud
            .run_machine_step("w1.ns", "cp-a", true, Some("v1.31.1"), step)
            .await
            .unwrap();
    }
    let done = cloud
        .run_machine_step("w1.ns", "cp-a", true, Some("v1.31.1"), API_SERVER_PHASE)
        .await
        .unwrap();
    assert_eq!(
        done, 4,
        "VM, Node, API server, scheduler and controller-manager"
    );
    // Doing a step twice changes nothing.
    let again = cloud
        .run_machine_step("w1.ns", "cp-a", true, None, API_SERVER_PHASE)
        .await
        .unwrap();
    assert_eq!(again, 4);
    cloud
        .run_machine_step("w1.ns", "cp-a", true, None, 2)
        .await
        .unwrap();
    cloud
        .run_machine_step("w1.ns", "worker-a", false, Some("v1.31.1"), 1)
        .await
        .unwrap();
    // A machine registered with a provider ID (a VM of a simulated vCenter) keeps it; one
    // registered already is left as it was.
    cloud
        .register_machine("w1.ns", "vm-a", false, "vsphere://4211-abcd")
        .await
        .unwrap();
    cloud
        .register_machine("w1.ns", "cp-a", true, "vsphere://other")
        .await
        .unwrap();
    cloud
        .run_machine_step("w1.ns", "vm-a", false, Some("v1.31.1"), 1)
        .await
        .unwrap();

    let c = common::client(&info.kubeconfig).await;
    let nodes: Api<Node> = Api::all(c.clone());
    let node = nodes.get("cp-a").await.unwrap();
    let version = node
        .status
        .and_then(|s| s.node_info)
        .map(|i| i.kubelet_version);
    assert_eq!(version.as_deref(), Some("v1.31.1"));
    assert!(nodes.get("worker-a").await.is_ok());
    let provider = |n: Node| n.spec.and_then(|s| s.provider_id);
    assert_eq!(
        provider(nodes.get("vm-a").await.unwrap()).as_deref(),
        Some("vsphere://4211-abcd")
    );
    assert_eq!(
        provider(nodes.get("cp-a").await.unwrap()).as_deref(),
        Some("in-memory://cp-a")
    );
    let pods: Api<Pod> = Api::namespaced(c.clone(), "kube-system");
    let mut names: Vec<String> = pods
        .list(&ListParams::default().labels("tier=control-plane"))
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|p| p.metadata.name)
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "etcd-cp-a",
            "kube-apiserver-cp-a",
            "kube-controller-manager-cp-a",
            "kube-scheduler-cp-a"
        ]
    );
    // Mirror pods, as the kubelet writes them: owned by their node, with the config
    // annotations of a static pod manifest.
    let apiserver = pods.get("kube-apiserver-cp-a").await.unwrap();
    let owner = &apiserver.metadata.owner_references.unwrap()[0];
    let cp_uid = nodes.get("cp-a").await.unwrap().metadata.uid.unwrap();
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str(), &owner.uid),
        ("Node", "cp-a", &cp_uid)
    );
    let annotations = apiserver.metadata.annotations.unwrap();
    assert_eq!(annotations["kubernetes.io/config.source"], "file");
    assert_eq!(
        annotations["kubernetes.io/config.mirror"],
        annotations["kubernetes.io/config.hash"]
    );
    let kubeadm: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(c, "kube-system");
    let config = kubeadm.get("kubeadm-config").await.unwrap();
    let text = config
        .data
        .and_then(|d| d.get("ClusterConfiguration").cloned())
        .unwrap_or_default();
    assert!(text.contains("clusterName: w1\n"), "{text}");

    assert!(cloud.delete_cluster("w1.ns").await.unwrap());
    assert!(
        cloud.delete_cluster("w3.ns").await.unwrap(),
        "a reservation is released too"
    );
    assert!(!cloud.delete_cluster("w3.ns").await.unwrap());
}

#[tokio::test]
async fn a_creation_that_fails_leaves_nothing_behind() {
    let cloud = Cloud::new(CloudConfig {
        ports: 23470..=23470,
        ..CloudConfig::default()
    });
    cloud.create_cluster(shape("a")).await.unwrap();
    assert!(matches!(
        cloud.create_cluster(shape("b")).await,
        Err(infrasim_cloud::CloudError::NoPort(_))
    ));
    // Neither the name nor anything else is held by the failed attempt.
    assert!(cloud.delete_cluster("a").await.unwrap());
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    let b = cloud.create_cluster(shape("b")).await.unwrap();
    assert_eq!(b.endpoint.port(), 23470);
}

#[tokio::test]
async fn two_creations_of_one_name_make_one_cluster() {
    let cloud = Cloud::new(CloudConfig {
        ports: 23475..=23479,
        ..CloudConfig::default()
    });
    let (one, two) = tokio::join!(
        cloud.create_cluster(shape("x")),
        cloud.create_cluster(shape("x"))
    );
    assert_eq!(one.is_ok() as u8 + two.is_ok() as u8, 1);
    assert!(matches!(
        one.and(two),
        Err(infrasim_cloud::CloudError::Exists(_))
    ));
    assert_eq!(cloud.clusters().len(), 1);
}
