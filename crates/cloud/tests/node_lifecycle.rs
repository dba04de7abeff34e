//! A stopped kubelet (the `NodeNotReady` fault) seen through the cluster's endpoint as a
//! client sees a real one: its Lease stops, after the grace period its node is Ready
//! `Unknown` and tainted unreachable, and when it starts again the node is Ready and
//! untainted. A fake clock decides when the grace period is over.

mod common;
use common::{client, eventually};
use infrasim_clock::FakeClock;
use infrasim_cloud::{Cloud, CloudConfig, ClusterFault, ClusterShape};
use k8s_openapi::api::core::v1::Node;
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

#[tokio::test]
async fn a_stopped_kubelet_makes_its_node_unknown_after_the_grace_period_and_back() {
    let clock = FakeClock::new("2030-01-01T00:00:00Z".parse().unwrap());
    let cloud = Cloud::with_clock(
        CloudConfig {
            ports: 23725..=23730,
            ..CloudConfig::default()
        },
        Arc::new(clock.clone()),
    );
    let info = cloud
        .create_cluster(ClusterShape {
            name: "nl".into(),
            control_planes: 1,
            workers: 1,
            ..ClusterShape::default()
        })
        .await
        .unwrap();
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
