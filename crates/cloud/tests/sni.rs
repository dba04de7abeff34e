//! One shared port for every cluster, the cluster chosen by TLS server name.

mod common;
use common::client;
use infrasim_cloud::{server_name, Cloud, CloudConfig, ClusterShape};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, PostParams};

fn kubeconfig_with_user_of(target: &str, user_from: &str) -> String {
    let mut t: serde_yaml::Value = serde_yaml::from_str(target).unwrap();
    let u: serde_yaml::Value = serde_yaml::from_str(user_from).unwrap();
    t["users"][0]["user"] = u["users"][0]["user"].clone();
    serde_yaml::to_string(&t).unwrap()
}

#[tokio::test]
async fn clusters_share_a_port_by_server_name() {
    let cloud = Cloud::new(CloudConfig {
        ports: 23900..=23920,
        ..CloudConfig::default()
    });
    let shared = cloud.listen_shared(0).await.unwrap();
    let mut infos = Vec::new();
    for name in ["north", "south"] {
        let info = cloud
            .create_cluster(ClusterShape {
                name: name.into(),
                ..ClusterShape::default()
            })
            .await
            .unwrap();
        let kc = info.shared_kubeconfig.clone().unwrap();
        assert!(kc.contains(&format!("server: https://{shared}")));
        assert!(kc.contains(&format!("tls-server-name: {}", server_name(name))));
        infos.push(info);
    }
    // Each cluster, through the one port, is itself.
    let north: Api<ConfigMap> = Api::namespaced(
        client(infos[0].shared_kubeconfig.as_ref().unwrap()).await,
        "default",
    );
    let south: Api<ConfigMap> = Api::namespaced(
        client(infos[1].shared_kubeconfig.as_ref().unwrap()).await,
        "default",
    );
    let cm: ConfigMap =
        serde_json::from_value(serde_json::json!({"metadata": {"name": "only-north"}})).unwrap();
    north.create(&PostParams::default(), &cm).await.unwrap();
    assert!(north.get_opt("only-north").await.unwrap().is_some());
    assert!(south.get_opt("only-north").await.unwrap().is_none());

    // North's credentials do not open south, under south's name.
    let mixed = kubeconfig_with_user_of(
        infos[1].shared_kubeconfig.as_ref().unwrap(),
        infos[0].shared_kubeconfig.as_ref().unwrap(),
    );
    let refused: Api<ConfigMap> = Api::namespaced(client(&mixed).await, "default");
    match refused.list(&ListParams::default()).await {
        Err(kube::Error::Api(status)) => assert_eq!(status.code, 401),
        Err(_) => {} // the handshake itself refused the foreign certificate
        Ok(_) => panic!("north's certificate opened south"),
    }

    // A name no cluster answers to gets nothing.
    let stranger = infos[0]
        .shared_kubeconfig
        .as_ref()
        .unwrap()
        .replace(&server_name("north"), &server_name("nowhere"));
    let nowhere: Api<ConfigMap> = Api::namespaced(client(&stranger).await, "default");
    assert!(nowhere.list(&ListParams::default()).await.is_err());

    // A cluster whose last API server is gone leaves the shared port too.
    assert!(cloud
        .remove_machine("north", "north-control-plane-0")
        .await
        .unwrap());
    assert!(north.list(&ListParams::default()).await.is_err());
    assert!(south.get_opt("only-north").await.unwrap().is_none());
}
