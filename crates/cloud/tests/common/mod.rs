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
