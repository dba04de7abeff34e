//! Each cluster's etcd: members follow the control-plane machines, and etcdctl 3.4 (Debian's
//! etcd-client) reaches them on the cluster's endpoint with etcd client certificates, while
//! the API keeps its own clients apart.

mod common;
use common::three_control_planes as shape;
use infrasim_cloud::{Cloud, CloudConfig};
use std::path::{Path, PathBuf};

fn cloud() -> Cloud {
    Cloud::new(CloudConfig {
        ports: 23500..=23540,
        ..CloudConfig::default()
    })
}

/// Writes the CA that signs the endpoint, and a client certificate of `ca` for etcdctl.
fn credentials(dir: &Path, endpoint_ca: &str, ca: &infrasim_kube_api::pki::CertificateAuthority) {
    std::fs::create_dir_all(dir).expect("temp dir");
    let client = ca
        .client_cert("kube-apiserver-etcd-client", &[])
        .expect("a client certificate");
    std::fs::write(dir.join("ca.crt"), endpoint_ca).expect("write");
    std::fs::write(dir.join("client.crt"), client.cert_pem).expect("write");
    std::fs::write(dir.join("client.key"), client.key_pem).expect("write");
}

fn temp_dir(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("infrasim-etcd-{name}-{}", std::process::id()))
}

async fn etcdctl(endpoint: &str, dir: &Path, args: &[&str]) -> std::process::Output {
    tokio::process::Command::new("etcdctl")
        .env("ETCDCTL_API", "3")
        .arg(format!("--endpoints=https://{endpoint}"))
        .arg(format!("--cacert={}", dir.join("ca.crt").display()))
        .arg(format!("--cert={}", dir.join("client.crt").display()))
        .arg(format!("--key={}", dir.join("client.key").display()))
        .arg("--command-timeout=10s")
        .args(args)
        .output()
        .await
        .expect("etcdctl runs (Debian's etcd-client; scripts/test-all installs it)")
}

#[tokio::test]
async fn members_follow_the_control_plane_machines() {
    let cloud = cloud();
    cloud.create_cluster(shape("m")).await.expect("a cluster");
    let etcd = cloud.etcd("m").expect("the cluster has etcd");
    for n in 0..3 {
        let name = format!("m-control-plane-{n}");
        let member = etcd
            .member_named(&name)
            .expect("a member per control plane");
        assert_eq!(member.client_urls.len(), 1);
        assert!(
            member.peer_urls[0].ends_with(":2380"),
            "{:?}",
            member.peer_urls
        );
    }
    assert!(etcd.member_named("m-worker-0").is_none());
    let first = etcd.member_named("m-control-plane-0").map(|m| m.id);
    assert_eq!(etcd.leader(), first);
    assert!(cloud
        .remove_machine("m", "m-control-plane-0")
        .await
        .unwrap());
    assert!(etcd.member_named("m-control-plane-0").is_none());
    let leader = etcd.leader().expect("another member leads");
    assert_ne!(Some(leader), first);
    assert!(cloud.delete_cluster("m").await.unwrap());
}

#[tokio::test]
async fn etcdctl_reaches_etcd_on_the_endpoint_with_etcd_certificates_only() {
    let cloud = cloud();
    let info = cloud.create_cluster(shape("e")).await.expect("a cluster");
    let pki = cloud.pki("e").expect("the cluster's PKI");
    let endpoint = info.endpoint.to_string();

    let etcd_dir = temp_dir("etcd");
    credentials(&etcd_dir, &pki.ca.cert_pem, &pki.etcd_ca);
    let out = etcdctl(&endpoint, &etcd_dir, &["member", "list"]).await;
    let listed = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for n in 0..3 {
        assert!(listed.contains(&format!("e-control-plane-{n}")), "{listed}");
    }
    let put = etcdctl(&endpoint, &etcd_dir, &["put", "k", "v"]).await;
    assert!(
        put.status.success(),
        "{}",
        String::from_utf8_lossy(&put.stderr)
    );

    // A Kubernetes client certificate (of the cluster CA) does not open etcd.
    let api_dir = temp_dir("api");
    credentials(&api_dir, &pki.ca.cert_pem, &pki.ca);
    let refused = etcdctl(&endpoint, &api_dir, &["member", "list"]).await;
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(
        !refused.status.success() && said.contains("etcd CA"),
        "{said}"
    );

    // And an etcd client certificate is nobody to the Kubernetes API.
    let etcd_client = pki
        .etcd_ca
        .client_cert("kubernetes-admin", &["system:masters"])
        .expect("a certificate");
    let kubeconfig =
        infrasim_kube_api::kubeconfig::render(&infrasim_kube_api::kubeconfig::KubeconfigSpec {
            cluster_name: "e",
            user_name: "etcd-client",
            server: &format!("https://{endpoint}"),
            ca_pem: &pki.ca.cert_pem,
            client_cert_pem: &etcd_client.cert_pem,
            client_key_pem: &etcd_client.key_pem,
            tls_server_name: None,
        });
    let client = common::client(&kubeconfig).await;
    let nodes: kube::Api<k8s_openapi::api::core::v1::Node> = kube::Api::all(client);
    match nodes.list(&Default::default()).await {
        Err(kube::Error::Api(e)) => assert!(e.code == 401 || e.code == 403, "{e:?}"),
        other => panic!("an etcd certificate listed nodes: {other:?}"),
    }
    // The cluster's own admin still works.
    let admin = common::client(&info.kubeconfig).await;
    let nodes: kube::Api<k8s_openapi::api::core::v1::Node> = kube::Api::all(admin);
    assert_eq!(
        nodes
            .list(&Default::default())
            .await
            .expect("nodes")
            .items
            .len(),
        4
    );
    let _ = std::fs::remove_dir_all(etcd_dir);
    let _ = std::fs::remove_dir_all(api_dir);
}

#[tokio::test]
async fn a_faults_alarms_are_listed_and_refuse_what_etcds_refuse_until_cleared() {
    use infrasim_cloud::{ClusterFault, EtcdAlarm};
    use infrasim_etcd_sim::pb::etcdserverpb::AlarmType;
    let alarms = |raised: [EtcdAlarm; 1]| ClusterFault {
        etcd_alarms: raised.into(),
        ..ClusterFault::default()
    };
    let cloud = cloud();
    let info = cloud.create_cluster(shape("a")).await.expect("a cluster");
    let pki = cloud.pki("a").expect("the cluster's PKI");
    let endpoint = info.endpoint.to_string();
    let dir = temp_dir("alarm");
    credentials(&dir, &pki.ca.cert_pem, &pki.etcd_ca);
    let text = |o: &std::process::Output| {
        String::from_utf8_lossy(&o.stdout).to_string() + &String::from_utf8_lossy(&o.stderr)
    };

    let nospace = EtcdAlarm {
        member: None,
        alarm: AlarmType::Nospace,
    };
    cloud.set_fault("a", "default/full", alarms([nospace]));
    let listed = etcdctl(&endpoint, &dir, &["alarm", "list"]).await;
    assert_eq!(
        text(&listed).matches("alarm:NOSPACE").count(),
        3,
        "{}",
        text(&listed)
    );
    let put = etcdctl(&endpoint, &dir, &["put", "k", "v"]).await;
    assert!(
        !put.status.success() && text(&put).contains("database space exceeded"),
        "{}",
        text(&put)
    );
    // Reads and deletes go on: they are how space is freed.
    let get = etcdctl(&endpoint, &dir, &["get", "k"]).await;
    assert!(get.status.success(), "{}", text(&get));
    assert!(etcdctl(&endpoint, &dir, &["del", "k"])
        .await
        .status
        .success());

    cloud.set_fault("a", "default/full", ClusterFault::default());
    let listed = etcdctl(&endpoint, &dir, &["alarm", "list"]).await;
    assert!(
        listed.status.success() && !text(&listed).contains("alarm:"),
        "{}",
        text(&listed)
    );
    let put = etcdctl(&endpoint, &dir, &["put", "k", "v"]).await;
    assert!(put.status.success(), "{}", text(&put));

    // One member corrupt: the cluster refuses every request, reads too.
    let corrupt = EtcdAlarm {
        member: Some("a-control-plane-1".into()),
        alarm: AlarmType::Corrupt,
    };
    cloud.set_fault("a", "default/bad", alarms([corrupt]));
    let get = etcdctl(&endpoint, &dir, &["get", "k"]).await;
    assert!(
        !get.status.success() && text(&get).contains("corrupt cluster"),
        "{}",
        text(&get)
    );
    cloud.set_fault("a", "default/bad", ClusterFault::default());
    assert!(etcdctl(&endpoint, &dir, &["get", "k"])
        .await
        .status
        .success());
    assert!(cloud.delete_cluster("a").await.unwrap());
}

#[tokio::test]
async fn members_down_move_the_leadership_and_a_lost_quorum_refuses_writes() {
    use infrasim_cloud::ClusterFault;
    use k8s_openapi::api::core::v1::ConfigMap;
    let down = |members: &[&str]| ClusterFault {
        etcd_members_down: members.iter().map(|m| m.to_string()).collect(),
        ..ClusterFault::default()
    };
    let cloud = cloud();
    let info = cloud.create_cluster(shape("q")).await.expect("a cluster");
    let etcd = cloud.etcd("q").expect("the cluster's etcd");
    let pki = cloud.pki("q").expect("the cluster's PKI");
    let endpoint = info.endpoint.to_string();
    let dir = temp_dir("quorum");
    credentials(&dir, &pki.ca.cert_pem, &pki.etcd_ca);
    let text = |o: &std::process::Output| {
        String::from_utf8_lossy(&o.stdout).to_string() + &String::from_utf8_lossy(&o.stderr)
    };
    let first = etcd.member_named("q-control-plane-0").map(|m| m.id);
    assert_eq!(etcd.leader(), first);

    // The leader down: another member leads, writes go on, the member is still listed.
    cloud.set_fault("q", "ns/one", down(&["q-control-plane-0"]));
    let leader = etcd.leader().expect("a majority up elects a leader");
    assert_ne!(Some(leader), first);
    let put = etcdctl(&endpoint, &dir, &["put", "k", "v"]).await;
    assert!(put.status.success(), "{}", text(&put));
    let listed = etcdctl(&endpoint, &dir, &["member", "list"]).await;
    assert_eq!(
        text(&listed).matches("q-control-plane-").count(),
        3,
        "{}",
        text(&listed)
    );

    // A second Fault takes another member down: no quorum, no leader.
    cloud.set_fault("q", "ns/two", down(&["q-control-plane-1"]));
    assert_eq!(etcd.leader(), None);
    let put = etcdctl(&endpoint, &dir, &["put", "k", "v2"]).await;
    assert!(
        !put.status.success() && text(&put).contains("etcdserver: no leader"),
        "{}",
        text(&put)
    );
    // The workload API server stores in that etcd: its writes time out, its reads are served.
    let client = common::client(&info.kubeconfig).await;
    let maps: kube::Api<ConfigMap> = kube::Api::namespaced(client, "default");
    let made = maps
        .create(
            &Default::default(),
            &serde_json::from_value(serde_json::json!({
            "metadata": {"name": "x"}}))
            .expect("a ConfigMap"),
        )
        .await;
    match made {
        Err(kube::Error::Api(e)) => {
            assert_eq!(
                (e.code, e.message.as_str()),
                (500, "etcdserver: request timed out")
            )
        }
        other => panic!("expected a 500, got {other:?}"),
    }
    assert!(maps.list(&Default::default()).await.is_ok());

    cloud.set_fault("q", "ns/two", ClusterFault::default());
    assert!(etcd.leader().is_some(), "a majority back elects a leader");
    let put = etcdctl(&endpoint, &dir, &["put", "k", "v3"]).await;
    assert!(put.status.success(), "{}", text(&put));
    cloud.set_fault("q", "ns/one", ClusterFault::default());
    assert!(cloud.delete_cluster("q").await.unwrap());
}

/// Faults that name an etcd member and a node before their machines exist (a Fault made
/// while the machines boot) meet them as they come up: the member joins down and with the
/// cluster's alarm, the node does not register; when the faults end, both come back.
#[tokio::test]
async fn a_member_and_a_node_that_come_up_under_a_fault_meet_it() {
    use infrasim_cloud::{ClusterFault, EtcdAlarm, MachineBehaviour};
    use infrasim_etcd_sim::pb::etcdserverpb::AlarmType;
    use k8s_openapi::api::core::v1::Node;
    let cloud = cloud();
    let info = cloud
        .create_cluster(shape("late"))
        .await
        .expect("a cluster");
    let etcd = cloud.etcd("late").expect("the cluster's etcd");
    let pki = cloud.pki("late").expect("the cluster's PKI");
    let endpoint = info.endpoint.to_string();
    let dir = temp_dir("late");
    credentials(&dir, &pki.ca.cert_pem, &pki.etcd_ca);
    let text = |o: &std::process::Output| {
        String::from_utf8_lossy(&o.stdout).to_string() + &String::from_utf8_lossy(&o.stderr)
    };
    let fault = ClusterFault {
        etcd_members_down: ["late-control-plane-3".to_string()].into(),
        deleted_nodes: ["late-worker-9".to_string()].into(),
        etcd_alarms: [EtcdAlarm {
            member: None,
            alarm: AlarmType::Nospace,
        }]
        .into(),
        ..ClusterFault::default()
    };
    cloud.set_fault("late", "ns/early", fault);
    for (machine, control_plane) in [("late-control-plane-3", true), ("late-worker-9", false)] {
        cloud
            .add_machine("late", machine, control_plane, MachineBehaviour::default())
            .await
            .expect("the machine comes up");
    }
    assert!(etcd.member_named("late-control-plane-3").is_some());
    assert!(etcd.member_down("late-control-plane-3"));
    // Three members up of four: still a quorum, and the alarm is on all four.
    assert!(etcd.has_quorum());
    let listed = etcdctl(&endpoint, &dir, &["alarm", "list"]).await;
    assert_eq!(
        text(&listed).matches("alarm:NOSPACE").count(),
        4,
        "{}",
        text(&listed)
    );
    let nodes: kube::Api<Node> = kube::Api::all(common::client(&info.kubeconfig).await);
    assert!(nodes.get_opt("late-worker-9").await.unwrap().is_none());
    assert!(nodes
        .get_opt("late-control-plane-3")
        .await
        .unwrap()
        .is_some());

    cloud.set_fault("late", "ns/early", ClusterFault::default());
    assert!(!etcd.member_down("late-control-plane-3"));
    assert!(nodes.get_opt("late-worker-9").await.unwrap().is_some());
    let listed = etcdctl(&endpoint, &dir, &["alarm", "list"]).await;
    assert!(!text(&listed).contains("alarm:"), "{}", text(&listed));
    assert!(cloud.delete_cluster("late").await.unwrap());
}
