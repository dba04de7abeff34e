//! A shard's home moves between processes: two clouds (two processes of a fleet, each on a
//! port range of its own) share a directory of homes; the one holding a home makes its
//! clusters there, sets it down (its clusters stop, nothing is forgotten), and the other
//! takes it up and brings them back on its own range with every object and the same CA.

mod common;
use infrasim_clock::SystemClock;
use infrasim_cloud::{Cloud, CloudConfig, CloudError, ClusterShape, WorkloadConfig};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, PostParams};
use std::path::Path;

fn cloud(homes: Option<&Path>, first_port: u16) -> Cloud {
    Cloud::with_clock(
        CloudConfig {
            ports: first_port..=first_port + 10,
            homes: homes.map(Path::to_path_buf),
            ..CloudConfig::default()
        },
        SystemClock::shared(),
    )
}

fn shape(name: &str) -> ClusterShape {
    ClusterShape {
        name: name.into(),
        control_planes: 1,
        workers: 1,
        workloads: WorkloadConfig {
            pod_startup: std::time::Duration::ZERO,
            ..WorkloadConfig::default()
        },
        ..ClusterShape::default()
    }
}

/// The uid of the cluster's `kube-system` namespace and of ConfigMap `kept`, read with
/// `kubeconfig` (a cluster made again would have new ones).
async fn uids(kubeconfig: &str) -> (String, String) {
    let client = common::client(kubeconfig).await;
    let ns = Api::<Namespace>::all(client.clone())
        .get("kube-system")
        .await
        .expect("kube-system");
    let cm = Api::<ConfigMap>::namespaced(client, "default")
        .get("kept")
        .await
        .expect("the ConfigMap made before the move");
    (ns.metadata.uid.unwrap(), cm.metadata.uid.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_home_set_down_in_one_process_comes_back_whole_in_another() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let (alpha, beta) = (
        cloud(Some(dir.path()), 23660),
        cloud(Some(dir.path()), 23680),
    );
    let admits = || -> infrasim_cloud::Admits { Box::new(|name: &str| name.starts_with("s0-")) };
    assert_eq!(
        alpha.take_up_home("shard-0", admits()).await.unwrap(),
        Some(0)
    );
    let held = beta.take_up_home("shard-0", admits()).await.unwrap_err();
    assert!(
        matches!(&held, CloudError::Home { home, .. } if home == "shard-0"),
        "{held}"
    );

    let info = alpha
        .create_cluster(shape("s0-a"))
        .await
        .expect("a cluster");
    let mine = alpha.create_cluster(shape("own")).await.expect("a cluster");
    assert_eq!(alpha.home_of("s0-a").as_deref(), Some("shard-0"));
    assert_eq!(
        alpha.home_of("own"),
        None,
        "not admitted: the cloud's own home"
    );
    common::eventually("the cluster is up", || async { alpha.ready("s0-a") }).await;
    let client = common::client(&info.kubeconfig).await;
    let cm: ConfigMap = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "kept"}, "data": {"made": "before the move"}
    }))
    .unwrap();
    Api::<ConfigMap>::namespaced(client, "default")
        .create(&PostParams::default(), &cm)
        .await
        .expect("a ConfigMap");
    let before = uids(&info.kubeconfig).await;

    assert!(alpha.set_down_home("shard-0"));
    assert!(!alpha.set_down_home("shard-0"), "set down once");
    assert!(alpha.cluster("s0-a").is_none(), "its clusters stop here");
    assert!(alpha.cluster("own").is_some(), "the cloud's own go on");
    assert!(
        tokio::net::TcpStream::connect(info.endpoint).await.is_err(),
        "its endpoint closed"
    );
    // Set down, its clusters are another process's to make: not made here in the cloud's
    // own home (a reconcile still running when the shard went).
    let late = alpha.create_cluster(shape("s0-late")).await.unwrap_err();
    assert!(
        matches!(&late, CloudError::Home { home, .. } if home == "shard-0"),
        "{late}"
    );
    alpha
        .create_cluster(shape("other"))
        .await
        .expect("a cluster no home admits");

    assert_eq!(
        beta.take_up_home("shard-0", admits()).await.unwrap(),
        Some(1)
    );
    let moved = beta.cluster("s0-a").expect("back in the other process");
    assert!(
        (23680..=23690).contains(&moved.endpoint.port()),
        "on the taker's range: {}",
        moved.endpoint
    );
    common::eventually("the cluster is up again", || async { beta.ready("s0-a") }).await;
    assert_eq!(uids(&moved.kubeconfig).await, before, "the same objects");
    // The same CA: the credentials from before open it at its new address.
    let old = info.kubeconfig.replace(
        &format!("https://{}", info.endpoint),
        &format!("https://{}", moved.endpoint),
    );
    assert_eq!(uids(&old).await, before);
    // Made in the home's store: a cluster of that shard made now goes there too.
    beta.create_cluster(shape("s0-b")).await.expect("a cluster");
    assert_eq!(beta.home_of("s0-b").as_deref(), Some("shard-0"));
    assert!(beta.set_down_home("shard-0"));
    assert_eq!(
        alpha.take_up_home("shard-0", admits()).await.unwrap(),
        Some(2),
        "both come back, the moved one on its new port's record"
    );
    assert!(alpha.cluster("s0-b").is_some());
    drop(mine);
}

#[tokio::test]
async fn a_cloud_without_homes_makes_every_cluster_in_its_own() {
    let plain = cloud(None, 23700);
    let admits: infrasim_cloud::Admits = Box::new(|_: &str| true);
    assert_eq!(plain.take_up_home("shard-0", admits).await.unwrap(), None);
    assert!(!plain.set_down_home("shard-0"));
}
