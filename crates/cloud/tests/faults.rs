//! Faults the cloud puts on a cluster, seen from outside as a client sees them: an endpoint
//! held closed refuses connections and opens again, and a request fault set before the
//! cluster exists is in force from its first request.

mod common;
use common::client;
use infrasim_cloud::{Cloud, CloudConfig, ClusterFault, ClusterShape};
use infrasim_kube_api::faults::RequestFault;
use k8s_openapi::api::core::v1::Namespace;
use kube::Api;
use std::time::Duration;

fn cloud() -> Cloud {
    Cloud::new(CloudConfig {
        ports: 23735..=23745,
        ..CloudConfig::default()
    })
}

fn shape(name: &str) -> ClusterShape {
    ClusterShape {
        name: name.into(),
        control_planes: 1,
        workers: 0,
        ..ClusterShape::default()
    }
}

fn down() -> ClusterFault {
    ClusterFault {
        endpoint_down: true,
        ..ClusterFault::default()
    }
}

async fn connects(endpoint: std::net::SocketAddr) -> bool {
    tokio::net::TcpStream::connect(endpoint).await.is_ok()
}

#[tokio::test]
async fn an_endpoint_held_down_refuses_connections_until_let_go() {
    let cloud = cloud();
    let info = cloud
        .create_cluster(shape("down"))
        .await
        .expect("a cluster");
    let namespaces: Api<Namespace> = Api::all(client(&info.kubeconfig).await);
    assert!(namespaces.get("default").await.is_ok());

    cloud.set_fault("down", "ns/a", down());
    cloud.set_fault("down", "ns/b", down());
    // The accept loop ends in its own task: the port refuses connections once it has.
    let mut refused = None;
    for _ in 0..200 {
        match tokio::net::TcpStream::connect(info.endpoint).await {
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                refused = Some(e);
                break;
            }
            _ => tokio::time::sleep(Duration::from_millis(10)).await,
        }
    }
    assert!(refused.is_some(), "the endpoint refuses connections");
    assert!(namespaces.get("default").await.is_err());

    // Held by two faults: one letting go leaves it closed.
    cloud.set_fault("down", "ns/a", ClusterFault::default());
    assert!(!connects(info.endpoint).await);
    cloud.set_fault("down", "ns/b", ClusterFault::default());
    let mut open = false;
    for _ in 0..200 {
        if connects(info.endpoint).await {
            open = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(open, "the endpoint opened again");
    assert!(namespaces.get("default").await.is_ok());
    assert!(cloud.delete_cluster("down").await.unwrap());
}

#[tokio::test]
async fn a_fault_set_before_the_cluster_is_in_force_from_its_first_request() {
    let cloud = cloud();
    let fault = RequestFault {
        error_fraction: 1.0,
        // Not 503: kube-rs' client retries those (and 429s) with backoff.
        error_code: 500,
        ..RequestFault::default()
    };
    cloud.set_fault(
        "early",
        "ns/early",
        ClusterFault {
            requests: Some(fault),
            ..ClusterFault::default()
        },
    );
    let info = cloud
        .create_cluster(shape("early"))
        .await
        .expect("a cluster");
    let namespaces: Api<Namespace> = Api::all(client(&info.kubeconfig).await);
    match namespaces.get("default").await {
        Err(kube::Error::Api(e)) => assert_eq!(e.code, 500, "{e:?}"),
        other => panic!("expected a 500, got {other:?}"),
    }
    cloud.set_fault("early", "ns/early", ClusterFault::default());
    assert!(namespaces.get("default").await.is_ok());
    assert!(cloud.delete_cluster("early").await.unwrap());
}
