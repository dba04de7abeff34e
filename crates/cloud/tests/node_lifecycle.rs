//! A stopped kubelet (the `NodeNotReady` fault) seen through the cluster's endpoint as a
//! client sees a real one: its Lease stops, after the grace period its node is Ready
//! `Unknown` and tainted unreachable, and when it starts again the node is Ready and
//! untainted. A fake clock decides when the grace period is over.

mod common;
use common::{client, eventually};
use infrasim_clock::FakeClock;
use infrasim_cloud::{Cloud, CloudConfig, ClusterFault, ClusterShape};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

fn ready(node: &Node) -> (String, String) {
    let c = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
        .cloned()
        .unwrap_or_default();
    (c.status, c.reason.unwrap_or_default())
}

fn unreachable_taints(node: &Node) -> Vec<String> {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .into_iter()
        .flatten()
        .filter(|t| t.key == "node.kubernetes.io/unreachable")
        .map(|t| t.effect.clone())
        .collect()
}

/// A cloud on a fake clock (which decides when grace periods and tolerations are over) with
/// cluster `name` of one control-plane machine and one worker, its endpoint in `ports`.
async fn one_worker(
    name: &str,
    ports: std::ops::RangeInclusive<u16>,
) -> (FakeClock, Cloud, infrasim_cloud::ClusterInfo) {
    let clock = FakeClock::new("2030-01-01T00:00:00Z".parse().unwrap());
    let config = CloudConfig {
        ports,
        ..CloudConfig::default()
    };
    let cloud = Cloud::with_clock(config, Arc::new(clock.clone()));
    let shape = ClusterShape {
        name: name.into(),
        control_planes: 1,
        workers: 1,
        ..ClusterShape::default()
    };
    let info = cloud.create_cluster(shape).await.unwrap();
    (clock, cloud, info)
}

#[tokio::test]
async fn a_stopped_kubelet_makes_its_node_unknown_after_the_grace_period_and_back() {
    let (clock, cloud, info) = one_worker("nl", 23725..=23730).await;
    let nodes: Api<Node> = Api::all(client(&info.kubeconfig).await);
    let worker = "nl-worker-0";
    assert_eq!(ready(&nodes.get(worker).await.unwrap()).0, "True");

    cloud.set_fault(
        "nl",
        "test/fault",
        ClusterFault {
            stopped_kubelets: BTreeSet::from([worker.to_string()]),
            ..ClusterFault::default()
        },
    );
    // Within the grace period nothing shows.
    clock.advance(Duration::from_secs(30));
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(ready(&nodes.get(worker).await.unwrap()).0, "True");
    clock.advance(Duration::from_secs(15));
    eventually("the worker is Unknown and tainted unreachable", || async {
        let n = nodes.get(worker).await.unwrap();
        ready(&n) == ("Unknown".into(), "NodeStatusUnknown".into())
            && unreachable_taints(&n) == ["NoSchedule", "NoExecute"]
    })
    .await;
    // The control plane's kubelet runs on.
    assert_eq!(
        ready(&nodes.get("nl-control-plane-0").await.unwrap()).0,
        "True"
    );

    cloud.set_fault("nl", "test/fault", ClusterFault::default());
    eventually("the worker is Ready and untainted again", || async {
        let n = nodes.get(worker).await.unwrap();
        ready(&n) == ("True".into(), "KubeletReady".into()) && unreachable_taints(&n).is_empty()
    })
    .await;
}

fn pod_ready(pod: &Pod) -> String {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
        .map(|c| c.status.clone())
        .unwrap_or_default()
}

/// A pod bound to `node`, tolerating the unreachable `NoExecute` taint for `seconds` (for
/// good with `None`).
fn bound_pod(name: &str, node: &str, seconds: Option<i64>) -> Pod {
    let mut toleration = serde_json::json!({"key": "node.kubernetes.io/unreachable",
        "operator": "Exists", "effect": "NoExecute"});
    if let Some(s) = seconds {
        toleration["tolerationSeconds"] = s.into();
    }
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "nginx"}],
                 "tolerations": [toleration]},
    }))
    .unwrap()
}

#[tokio::test]
async fn an_unreachable_nodes_pods_turn_not_ready_and_go_when_their_toleration_ends() {
    let (clock, cloud, info) = one_worker("ev", 23746..=23752).await;
    let client = client(&info.kubeconfig).await;
    let pods: Api<Pod> = Api::namespaced(client, "default");
    let worker = "ev-worker-0";
    // 300 s as admission defaults it; none at all; for good, as a DaemonSet's pods.
    for (name, seconds) in [
        ("web", Some(300)),
        ("brittle", Some(0)),
        ("steadfast", None),
    ] {
        pods.create(&Default::default(), &bound_pod(name, worker, seconds))
            .await
            .unwrap();
    }
    // The kubelet starts them after its startup delay, on the fake clock.
    eventually("the pods Ready", || async {
        clock.advance(Duration::from_millis(500));
        let list = pods.list(&Default::default()).await.unwrap().items;
        list.len() == 3 && list.iter().all(|p| pod_ready(p) == "True")
    })
    .await;

    let stopped = ClusterFault {
        stopped_kubelets: BTreeSet::from([worker.to_string()]),
        ..ClusterFault::default()
    };
    cloud.set_fault("ev", "test/fault", stopped);
    clock.advance(Duration::from_secs(45));
    eventually("the pods not Ready, the intolerant one evicted", || async {
        let list = pods.list(&Default::default()).await.unwrap().items;
        let names: Vec<String> = list
            .iter()
            .filter_map(|p| p.metadata.name.clone())
            .collect();
        names == ["steadfast", "web"] && list.iter().all(|p| pod_ready(p) == "False")
    })
    .await;
    // Within the toleration the pod stays; past it the taint manager deletes it.
    clock.advance(Duration::from_secs(200));
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(pods.get_opt("web").await.unwrap().is_some());
    clock.advance(Duration::from_secs(110));
    eventually("the pod evicted once its toleration ran out", || async {
        pods.get_opt("web").await.unwrap().is_none()
    })
    .await;
    assert!(pods.get_opt("steadfast").await.unwrap().is_some());

    cloud.set_fault("ev", "test/fault", ClusterFault::default());
    eventually("the pod that stayed Ready again", || async {
        pod_ready(&pods.get("steadfast").await.unwrap()) == "True"
    })
    .await;
}

#[tokio::test]
async fn a_deleted_node_stays_gone_with_its_pods_until_its_kubelet_registers_it_again() {
    let (clock, cloud, info) = one_worker("nd", 23753..=23758).await;
    let client = client(&info.kubeconfig).await;
    let nodes: Api<Node> = Api::all(client.clone());
    let system: Api<Pod> = Api::namespaced(client, "kube-system");
    let cp = "nd-control-plane-0";
    let mirror = format!("kube-scheduler-{cp}");
    assert!(system.get_opt(&mirror).await.unwrap().is_some());

    let deleted = ClusterFault {
        deleted_nodes: BTreeSet::from([cp.to_string(), "nd-worker-0".to_string()]),
        ..ClusterFault::default()
    };
    cloud.set_fault("nd", "test/fault", deleted);
    eventually(
        "the Nodes and the control plane's mirror pods gone",
        || async {
            nodes
                .list(&Default::default())
                .await
                .unwrap()
                .items
                .is_empty()
                && system.get_opt(&mirror).await.unwrap().is_none()
        },
    )
    .await;
    // Silent kubelets register nothing, however long the fault lasts.
    clock.advance(Duration::from_secs(60));
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(nodes
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .is_empty());

    cloud.set_fault("nd", "test/fault", ClusterFault::default());
    eventually(
        "both Nodes registered again, Ready, with the mirror pods",
        || async {
            let list = nodes.list(&Default::default()).await.unwrap().items;
            list.len() == 2
                && list.iter().all(|n| ready(n).0 == "True")
                && system.get_opt(&mirror).await.unwrap().is_some()
        },
    )
    .await;
}
