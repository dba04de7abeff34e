//! What the cloud's tests share: a kube-rs client from a cluster's kubeconfig, and polling for
//! what the cluster's own tasks bring about.

#![allow(dead_code)] // each test file uses what it needs

use std::time::Duration;

/// A kube-rs client that authenticates as the kubeconfig's user.
pub async fn client(kubeconfig: &str) -> kube::Client {
    let kc = kube::config::Kubeconfig::from_yaml(kubeconfig).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .unwrap();
    kube::Client::try_from(config).unwrap()
}

/// Polls `check` on the real clock (the controllers run in their own task) until it holds.
pub async fn eventually<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    for _ in 0..200 {
        if check().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("never true: {what}");
}

/// A cluster of three control planes and a worker, up at once.
pub fn three_control_planes(name: &str) -> infrasim_cloud::ClusterShape {
    infrasim_cloud::ClusterShape {
        name: name.into(),
        control_planes: 3,
        workers: 1,
        kubernetes_version: "v1.31.0".into(),
        ..infrasim_cloud::ClusterShape::default()
    }
}

/// Runs `round(10)` (so pools and lazily built parts exist), then `round(1000)`, and asserts
/// the runtime's live tasks settle back to where they were after the warm-up: nothing the
/// thousand rounds started is left running.
pub async fn leaves_no_task<F, Fut>(what: &str, round: F)
where
    F: Fn(usize) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let metrics = tokio::runtime::Handle::current().metrics();
    let settle = || async {
        tokio::time::sleep(Duration::from_millis(200)).await;
        metrics.num_alive_tasks()
    };
    round(10).await;
    let before = settle().await;
    round(1000).await;
    let mut after = settle().await;
    for _ in 0..50 {
        if after <= before {
            break;
        }
        after = settle().await;
    }
    assert!(
        after <= before,
        "{what}: {before} tasks before 1,000 rounds, {after} after"
    );
}
