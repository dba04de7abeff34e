//! Clusters come and go; their endpoints are reused.

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
    assert!(cloud.delete_cluster("a"));
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

#[tokio::test]
async fn clusters_come_up_phase_by_phase_on_the_clock() {
    use infrasim_clock::FakeClock;
    use infrasim_cloud::{API_SERVER_PHASE, PHASES};
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
            startup: Duration::from_secs(10),
            ..ClusterShape::default()
        })
        .await
        .unwrap();
    // Lets the bootstrap task run up to its next sleep.
    async fn settle() {
        for _ in 0..20 {
            tokio::task::yield_now().await;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    settle().await;
    assert_eq!(cloud.progress("slow"), Some(0));
    // Before the API server phase the endpoint refuses connections.
    assert!(tokio::net::TcpStream::connect(info.endpoint).await.is_err());
    for (phase, name) in PHASES.iter().enumerate() {
        clock.advance(Duration::from_secs(10));
        settle().await;
        assert_eq!(
            cloud.progress("slow"),
            Some(phase + 1),
            "after phase {name}"
        );
        let open = tokio::net::TcpStream::connect(info.endpoint).await.is_ok();
        assert_eq!(
            open,
            phase >= API_SERVER_PHASE,
            "endpoint open after phase {name}"
        );
    }
}
