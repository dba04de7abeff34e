//! The infrastructure provider contract, with the test playing Cluster API's core by hand (no
//! stand-in): it makes the certificate authorities, the Cluster and Machines, and reads every
//! field the contract names from the provider's objects, in both spellings, on a fake clock.

mod common;

use common::{eventually, Plane};
use infrasim_controllers::capi::infra::types::{
    DevCluster, DevMachine, InMemoryCluster, InMemoryMachine,
};
use infrasim_controllers::capi::{core, infra};
use infrasim_controllers::crds;
use infrasim_kube_api::kubeconfig::{render, KubeconfigSpec};
use infrasim_kube_api::pki::CertificateAuthority;
use k8s_openapi::api::core::v1::{Node, Pod, Secret};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::ResourceExt;
use serde_json::{json, Value};
use std::time::Duration;

const NS: &str = "default";

async fn setup(ports: std::ops::RangeInclusive<u16>) -> Plane {
    let plane = Plane::start(ports).await;
    let mut all = crds::provider(false);
    all.extend(crds::core(false));
    crds::install(&plane.client, &all).await.unwrap();
    let informers = std::sync::Arc::new(infrasim_controllers::informers::Informers::new(
        plane.client.clone(),
        None,
    ));
    tokio::spawn(infra::run(plane.ctx.clone(), informers.clone()));
    plane
}

/// What Cluster API's core makes first: the cluster's CA (in `<cluster>-ca`, as KCP writes
/// it) and a Cluster pointing at its infrastructure.
async fn cluster_with_ca(plane: &Plane, name: &str, infra_kind: &str) -> CertificateAuthority {
    let ca = CertificateAuthority::generate("kubernetes").unwrap();
    let secrets: Api<Secret> = Api::namespaced(plane.client.clone(), NS);
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": format!("{name}-ca"), "labels": {"cluster.x-k8s.io/cluster-name": name}},
        "type": "cluster.x-k8s.io/secret",
        "stringData": {"tls.crt": ca.cert_pem, "tls.key": ca.key_pem()},
    }))
    .unwrap();
    secrets
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    let clusters: Api<core::Cluster> = Api::namespaced(plane.client.clone(), NS);
    let cluster: core::Cluster = serde_json::from_value(json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
        "metadata": {"name": name},
        "spec": {"infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": infra_kind, "name": name}},
    }))
    .unwrap();
    clusters
        .create(&PostParams::default(), &cluster)
        .await
        .unwrap();
    ca
}

fn owned_by(kind: &str, name: &str, uid: &str) -> Value {
    json!([{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": kind, "name": name, "uid": uid, "controller": true}])
}

/// Sets what the core's Cluster controller reports in the Cluster's status.
async fn core_reports(plane: &Plane, cluster: &str, status: Value) {
    let clusters: Api<core::Cluster> = Api::namespaced(plane.client.clone(), NS);
    clusters
        .patch_status(
            cluster,
            &PatchParams::default(),
            &Patch::Merge(&json!({"status": status})),
        )
        .await
        .unwrap();
}

fn condition<'a>(conds: &'a Value, ty: &str) -> Option<(&'a str, &'a str)> {
    conds.as_array()?.iter().find(|c| c["type"] == ty).map(|c| {
        (
            c["status"].as_str().unwrap_or(""),
            c["reason"].as_str().unwrap_or(""),
        )
    })
}

/// A machine of `cluster`: the Machine (with bootstrap data, as the bootstrap provider
/// leaves it), the bootstrap secret, and the infrastructure machine it owns.
async fn machine(plane: &Plane, cluster: &str, name: &str, control_plane: bool, infra: Value) {
    let secrets: Api<Secret> = Api::namespaced(plane.client.clone(), NS);
    let data: Secret = serde_json::from_value(json!({
        "metadata": {"name": name}, "type": "cluster.x-k8s.io/secret",
        "stringData": {"value": "#cloud-config\n", "format": "cloud-config"},
    }))
    .unwrap();
    secrets.create(&PostParams::default(), &data).await.unwrap();
    let mut labels = json!({"cluster.x-k8s.io/cluster-name": cluster});
    if control_plane {
        labels["cluster.x-k8s.io/control-plane"] = json!("");
    }
    let kind = infra["kind"].as_str().unwrap_or_default().to_string();
    let machines: Api<core::Machine> = Api::namespaced(plane.client.clone(), NS);
    let m: core::Machine = serde_json::from_value(json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
        "metadata": {"name": name, "labels": labels},
        "spec": {"clusterName": cluster, "version": "v1.31.2", "failureDomain": "fd-1",
                 "bootstrap": {"dataSecretName": name},
                 "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": kind, "name": name}},
    }))
    .unwrap();
    let m = machines.create(&PostParams::default(), &m).await.unwrap();
    let mut obj = infra;
    obj["metadata"] = json!({"name": name, "labels": labels,
                             "ownerReferences": owned_by("Machine", name, &m.uid().unwrap())});
    let api: Api<kube::api::DynamicObject> = Api::namespaced_with(
        plane.client.clone(),
        NS,
        &kube::api::ApiResource::from_gvk(&kube::api::GroupVersionKind::gvk(
            "infrastructure.cluster.x-k8s.io",
            obj["apiVersion"]
                .as_str()
                .unwrap()
                .split('/')
                .nth(1)
                .unwrap(),
            &kind,
        )),
    );
    api.create(
        &PostParams::default(),
        &serde_json::from_value(obj).unwrap(),
    )
    .await
    .unwrap();
}

fn dev_machine(vm: &str) -> Value {
    let p = |d: &str| json!({"provisioning": {"startupDuration": d, "startupJitter": "0"}});
    json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "DevMachine",
           "spec": {"backend": {"inMemory": {"vm": p(vm), "node": p("2s"), "etcd": p("3s"), "apiServer": p("1s")}}}})
}

/// A kubeconfig signed by the cluster's CA, as Cluster API's `<cluster>-kubeconfig` is.
async fn kubeconfig(ca: &CertificateAuthority, cluster: &str, port: i64) -> kube::Client {
    let admin = ca
        .client_cert("kubernetes-admin", &["system:masters"])
        .unwrap();
    let yaml = render(&KubeconfigSpec {
        cluster_name: cluster,
        user_name: &format!("{cluster}-admin"),
        server: &format!("https://127.0.0.1:{port}"),
        ca_pem: &ca.cert_pem,
        client_cert_pem: &admin.cert_pem,
        client_key_pem: &admin.key_pem,
        tls_server_name: None,
    });
    let kc = kube::config::Kubeconfig::from_yaml(&yaml).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .unwrap();
    kube::Client::try_from(config).unwrap()
}

#[tokio::test]
async fn the_dev_kinds_satisfy_the_contract_on_the_injected_clock() {
    let plane = setup(23800..=23820).await;
    let ca = cluster_with_ca(&plane, "c1", "DevCluster").await;
    let clusters: Api<core::Cluster> = Api::namespaced(plane.client.clone(), NS);
    let c1 = clusters.get("c1").await.unwrap();
    let dev_clusters: Api<DevCluster> = Api::namespaced(plane.client.clone(), NS);
    let dc: DevCluster = serde_json::from_value(json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "DevCluster",
        "metadata": {"name": "c1", "labels": {"cluster.x-k8s.io/cluster-name": "c1"},
                     "ownerReferences": owned_by("Cluster", "c1", &c1.uid().unwrap())},
        "spec": {"backend": {"inMemory": {}}},
    }))
    .unwrap();
    dev_clusters
        .create(&PostParams::default(), &dc)
        .await
        .unwrap();

    // The endpoint is reserved on the cloud and the cluster reports itself provisioned, for
    // v1beta2 readers (initialization, conditions) and v1beta1 readers (ready, deprecated).
    let dc = eventually("the DevCluster is provisioned", || async {
        let d = dev_clusters.get("c1").await.ok()?;
        let v = serde_json::to_value(&d).ok()?;
        (v.pointer("/status/initialization/provisioned") == Some(&json!(true))).then_some(v)
    })
    .await;
    assert_eq!(dc["spec"]["controlPlaneEndpoint"]["host"], "127.0.0.1");
    let port = dc["spec"]["controlPlaneEndpoint"]["port"].as_i64().unwrap();
    assert!((23800..=23820).contains(&port));
    assert_eq!(dc["status"]["ready"], true);
    assert_eq!(
        condition(&dc["status"]["conditions"], "Ready"),
        Some(("True", "Ready"))
    );
    assert_eq!(
        condition(&dc["status"]["conditions"], "Paused"),
        Some(("False", "NotPaused"))
    );
    assert_eq!(
        condition(
            &dc["status"]["deprecated"]["v1beta1"]["conditions"],
            "Ready"
        )
        .map(|c| c.0),
        Some("True")
    );
    assert!(dc["metadata"]["finalizers"]
        .to_string()
        .contains("devcluster.infrastructure"));

    // A control-plane machine waits for the cluster's infrastructure.
    machine(&plane, "c1", "c1-cp-a", true, dev_machine("10s")).await;
    let dev_machines: Api<DevMachine> = Api::namespaced(plane.client.clone(), NS);
    let get = |name: &'static str| {
        let api = dev_machines.clone();
        async move { serde_json::to_value(api.get(name).await.ok()?).ok() }
    };
    eventually(
        "the machine waits for the cluster infrastructure",
        || async {
            let m = get("c1-cp-a").await?;
            (condition(&m["status"]["conditions"], "VMProvisioned")
                == Some(("False", "WaitingForClusterInfrastructureReady")))
            .then_some(())
        },
    )
    .await;
    core_reports(
        &plane,
        "c1",
        json!({"initialization": {"infrastructureProvisioned": true}}),
    )
    .await;
    let m = eventually("the VM boots", || async {
        let m = get("c1-cp-a").await?;
        (condition(&m["status"]["conditions"], "VMProvisioned")
            == Some(("False", "WaitingForStartupTimeout")))
        .then_some(m)
    })
    .await;
    assert_eq!(m["status"]["initialization"]["provisioned"], false);
    assert!(m["spec"].get("providerID").is_none());

    // Ten seconds later the VM is up: provider ID, addresses, failure domain, provisioned.
    plane.advance(Duration::from_secs(10)).await;
    let m = eventually("the VM is provisioned", || async {
        let m = get("c1-cp-a").await?;
        (m["status"]["initialization"]["provisioned"] == true).then_some(m)
    })
    .await;
    assert_eq!(m["spec"]["providerID"], "in-memory://c1-cp-a");
    assert_eq!(m["status"]["ready"], true);
    assert_eq!(m["status"]["failureDomain"], "fd-1");
    let addresses = m["status"]["addresses"].as_array().unwrap();
    assert!(addresses.iter().any(|a| a["type"] == "InternalIP"));
    assert_eq!(
        condition(&m["status"]["conditions"], "NodeProvisioned"),
        Some(("False", "WaitingForStartupTimeout"))
    );
    assert_eq!(
        condition(&m["status"]["conditions"], "Ready").map(|c| c.0),
        Some("False")
    );

    // Node (2 s), then the API server (1 s) opens the endpoint; etcd (3 s) follows.
    plane.advance(Duration::from_secs(2)).await;
    eventually("the node is provisioned", || async {
        let m = get("c1-cp-a").await?;
        (condition(&m["status"]["conditions"], "NodeProvisioned").map(|c| c.0) == Some("True"))
            .then_some(())
    })
    .await;
    plane.advance(Duration::from_secs(3)).await;
    let m = eventually("the machine is ready", || async {
        let m = get("c1-cp-a").await?;
        (condition(&m["status"]["conditions"], "Ready") == Some(("True", "Ready"))).then_some(m)
    })
    .await;
    for ty in [
        "VMProvisioned",
        "NodeProvisioned",
        "EtcdProvisioned",
        "APIServerProvisioned",
    ] {
        assert_eq!(
            condition(&m["status"]["conditions"], ty),
            Some(("True", "Provisioned")),
            "{ty}"
        );
    }
    let machines: Api<core::Machine> = Api::namespaced(plane.client.clone(), NS);
    let owner = machines.get("c1-cp-a").await.unwrap();
    assert!(owner
        .annotations()
        .contains_key("machine.inmemory.infrastructure.cluster.x-k8s.io/bootstrapped"));

    // The workload cluster trusts the CA from `c1-ca`: a kubeconfig it signs reads the Node.
    let workload = kubeconfig(&ca, "c1", port).await;
    let nodes: Api<Node> = Api::all(workload.clone());
    let node = nodes.get("c1-cp-a").await.unwrap();
    assert_eq!(
        node.spec.unwrap().provider_id.as_deref(),
        Some("in-memory://c1-cp-a")
    );
    let version = node.status.unwrap().node_info.unwrap().kubelet_version;
    assert_eq!(version, "v1.31.2", "the node runs the Machine's version");
    let pods: Api<Pod> = Api::namespaced(workload.clone(), "kube-system");
    assert!(pods.get("etcd-c1-cp-a").await.is_ok());
    assert!(pods.get("kube-apiserver-c1-cp-a").await.is_ok());

    worker_waits_for_the_control_plane(&plane, &nodes).await;

    // Deleting the machine removes its node; deleting the cluster frees the endpoint.
    dev_machines
        .delete("c1-cp-a", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the machine is gone", || async {
        dev_machines
            .get_opt("c1-cp-a")
            .await
            .ok()?
            .is_none()
            .then_some(())
    })
    .await;
    assert!(!plane
        .cloud
        .machines("c1.default")
        .unwrap()
        .iter()
        .any(|(m, _)| m.name == "c1-cp-a"));
    dev_clusters
        .delete("c1", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the endpoint is released", || async {
        (!plane.cloud.has_cluster("c1.default") && plane.cloud.endpoint("c1.default").is_none())
            .then_some(())
    })
    .await;
}

async fn worker_waits_for_the_control_plane(plane: &Plane, nodes: &Api<Node>) {
    let dev_machines: Api<DevMachine> = Api::namespaced(plane.client.clone(), NS);
    // A worker without bootstrap data yet, before the control plane is initialized.
    machine(plane, "c1", "c1-md-a", false, dev_machine("0s")).await;
    let machines: Api<core::Machine> = Api::namespaced(plane.client.clone(), NS);
    machines
        .patch(
            "c1-md-a",
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"bootstrap": {"dataSecretName": null}}})),
        )
        .await
        .unwrap();
    eventually("the worker waits for the control plane", || async {
        let m = serde_json::to_value(dev_machines.get("c1-md-a").await.ok()?).ok()?;
        (condition(&m["status"]["conditions"], "VMProvisioned")
            == Some(("False", "WaitingForControlPlaneInitialized")))
        .then_some(())
    })
    .await;
    core_reports(plane, "c1", json!({"initialization": {"infrastructureProvisioned": true, "controlPlaneInitialized": true}})).await;
    eventually("the worker waits for its bootstrap data", || async {
        let m = serde_json::to_value(dev_machines.get("c1-md-a").await.ok()?).ok()?;
        (condition(&m["status"]["conditions"], "VMProvisioned")
            == Some(("False", "WaitingForBootstrapData")))
        .then_some(())
    })
    .await;
    machines
        .patch(
            "c1-md-a",
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"bootstrap": {"dataSecretName": "c1-md-a"}}})),
        )
        .await
        .unwrap();
    // Its VM takes no time; its Node two seconds after that.
    eventually("the worker's VM is up", || async {
        let m = serde_json::to_value(dev_machines.get("c1-md-a").await.ok()?).ok()?;
        (condition(&m["status"]["conditions"], "NodeProvisioned")
            == Some(("False", "WaitingForStartupTimeout")))
        .then_some(())
    })
    .await;
    plane.advance(Duration::from_secs(2)).await;
    let m = eventually("the worker joins", || async {
        let m = serde_json::to_value(dev_machines.get("c1-md-a").await.ok()?).ok()?;
        (condition(&m["status"]["conditions"], "Ready") == Some(("True", "Ready"))).then_some(m)
    })
    .await;
    assert!(
        condition(&m["status"]["conditions"], "EtcdProvisioned").is_none(),
        "workers run no etcd"
    );
    assert!(nodes.get("c1-md-a").await.is_ok());
}

#[tokio::test]
async fn the_seed_kinds_report_both_condition_styles_and_pause() {
    let plane = setup(23830..=23840).await;
    cluster_with_ca(&plane, "s1", "InMemoryCluster").await;
    let clusters: Api<core::Cluster> = Api::namespaced(plane.client.clone(), NS);
    let s1 = clusters.get("s1").await.unwrap();
    let api: Api<InMemoryCluster> = Api::namespaced(plane.client.clone(), NS);
    let obj: InMemoryCluster = serde_json::from_value(json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1", "kind": "InMemoryCluster",
        "metadata": {"name": "s1", "ownerReferences": owned_by("Cluster", "s1", &s1.uid().unwrap())},
        "spec": {"failureDomains": [{"name": "fd-1", "controlPlane": true}, {"name": "fd-2"}]},
    }))
    .unwrap();
    api.create(&PostParams::default(), &obj).await.unwrap();
    let v = eventually("the seed's cluster is ready", || async {
        let v = serde_json::to_value(api.get("s1").await.ok()?).ok()?;
        (v["status"]["ready"] == true).then_some(v)
    })
    .await;
    // v1beta1 conditions in `conditions`, v1beta2 ones in `v1beta2.conditions`.
    assert_eq!(
        condition(&v["status"]["conditions"], "Ready").map(|c| c.0),
        Some("True")
    );
    assert_eq!(
        condition(&v["status"]["v1beta2"]["conditions"], "Ready"),
        Some(("True", "Ready"))
    );
    assert_eq!(
        v["status"]["failureDomains"][0],
        json!({"name": "fd-1", "controlPlane": true})
    );
    assert_eq!(v["status"]["initialization"]["provisioned"], true);

    core_reports(
        &plane,
        "s1",
        json!({"initialization": {"infrastructureProvisioned": true}}),
    )
    .await;
    let seed_machine = json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1", "kind": "InMemoryMachine",
        "spec": {"behaviour": {"vm": {"provisioning": {"startupDuration": "1m"}}}}});
    machine(&plane, "s1", "s1-cp", true, seed_machine).await;
    let machines: Api<InMemoryMachine> = Api::namespaced(plane.client.clone(), NS);
    eventually("the seed's machine boots", || async {
        let v = serde_json::to_value(machines.get("s1-cp").await.ok()?).ok()?;
        let old = condition(&v["status"]["conditions"], "VMProvisioned")?;
        let new = condition(&v["status"]["v1beta2"]["conditions"], "VMProvisioned")?;
        (old == ("False", "WaitingForStartupTimeout") && new == old).then_some(())
    })
    .await;

    // Pausing the Cluster stops the provider: the clock passes the VM's time, nothing moves.
    clusters
        .patch(
            "s1",
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"paused": true}})),
        )
        .await
        .unwrap();
    eventually("the machine reports the pause", || async {
        let v = serde_json::to_value(machines.get("s1-cp").await.ok()?).ok()?;
        (condition(&v["status"]["v1beta2"]["conditions"], "Paused").map(|c| c.0) == Some("True"))
            .then_some(())
    })
    .await;
    plane.advance(Duration::from_secs(120)).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let v = serde_json::to_value(machines.get("s1-cp").await.unwrap()).unwrap();
    assert_eq!(
        v["status"]["ready"], false,
        "a paused machine does not move on"
    );
    clusters
        .patch(
            "s1",
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"paused": false}})),
        )
        .await
        .unwrap();
    let v = eventually("unpaused, the machine catches up", || async {
        let v = serde_json::to_value(machines.get("s1-cp").await.ok()?).ok()?;
        (v["status"]["ready"] == true).then_some(v)
    })
    .await;
    assert_eq!(
        condition(&v["status"]["v1beta2"]["conditions"], "Paused").map(|c| c.0),
        Some("False")
    );
    assert_eq!(v["spec"]["providerID"], "in-memory://s1-cp");
}

#[tokio::test]
async fn a_docker_backend_is_refused_with_a_clear_message() {
    let plane = setup(23850..=23860).await;
    cluster_with_ca(&plane, "d1", "DevCluster").await;
    let clusters: Api<core::Cluster> = Api::namespaced(plane.client.clone(), NS);
    let d1 = clusters.get("d1").await.unwrap();
    let api: Api<DevCluster> = Api::namespaced(plane.client.clone(), NS);
    let obj: DevCluster = serde_json::from_value(json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "DevCluster",
        "metadata": {"name": "d1", "ownerReferences": owned_by("Cluster", "d1", &d1.uid().unwrap())},
        "spec": {"backend": {"docker": {"loadBalancer": {"imageTag": "v1"}}}},
    }))
    .unwrap();
    api.create(&PostParams::default(), &obj).await.unwrap();
    let v = eventually("the docker backend is refused", || async {
        let v = serde_json::to_value(api.get("d1").await.ok()?).ok()?;
        (condition(&v["status"]["conditions"], "Ready") == Some(("False", "UnsupportedBackend")))
            .then_some(v)
    })
    .await;
    let message = v["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "Ready")
        .unwrap()["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(message.contains("docker backend"), "{message}");
    assert!(
        v["spec"].get("controlPlaneEndpoint").is_none(),
        "no endpoint is reserved"
    );
    assert!(plane.cloud.endpoint("d1.default").is_none());
    assert_eq!(
        v["spec"]["backend"]["docker"]["loadBalancer"]["imageTag"], "v1",
        "kept as written"
    );
}

fn message<'a>(conds: &'a Value, ty: &str) -> Option<&'a str> {
    conds
        .as_array()?
        .iter()
        .find(|c| c["type"] == ty)
        .and_then(|c| c["message"].as_str())
}

/// Cluster `p1` with an InMemoryCluster, an InMemoryMachine and a DevMachine provisioned:
/// their objects as they are then.
async fn seed_objects_up(plane: &Plane) -> (Value, Value, Value) {
    cluster_with_ca(plane, "p1", "InMemoryCluster").await;
    let clusters: Api<core::Cluster> = Api::namespaced(plane.client.clone(), NS);
    let p1 = clusters.get("p1").await.unwrap();
    let imc: Api<InMemoryCluster> = Api::namespaced(plane.client.clone(), NS);
    let obj: InMemoryCluster = serde_json::from_value(json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1", "kind": "InMemoryCluster",
        "metadata": {"name": "p1", "ownerReferences": owned_by("Cluster", "p1", &p1.uid().unwrap())},
        "spec": {"failureDomains": [{"name": "fd-1", "controlPlane": true}]},
    }))
    .unwrap();
    imc.create(&PostParams::default(), &obj).await.unwrap();
    let cluster_before = eventually("the InMemoryCluster is ready", || async {
        let v = serde_json::to_value(imc.get("p1").await.ok()?).ok()?;
        (v["status"]["ready"] == true).then_some(v)
    })
    .await;
    assert_eq!(
        condition(&cluster_before["status"]["conditions"], "Paused"),
        Some(("False", "NotPaused")),
        "{}",
        cluster_before["status"]
    );
    core_reports(
        plane,
        "p1",
        json!({"initialization": {"infrastructureProvisioned": true}}),
    )
    .await;
    let at_once = |d: &str| json!({"provisioning": {"startupDuration": d}});
    let seed = json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1", "kind": "InMemoryMachine",
        "spec": {"behaviour": {"vm": at_once("0s"), "node": at_once("0s"), "etcd": at_once("0s"), "apiServer": at_once("0s")}}});
    machine(plane, "p1", "p1-cp", true, seed).await;
    machine(plane, "p1", "p1-dev", true, dev_machine("0s")).await;
    let imm: Api<InMemoryMachine> = Api::namespaced(plane.client.clone(), NS);
    let dm: Api<DevMachine> = Api::namespaced(plane.client.clone(), NS);
    let seed_before = eventually("the InMemoryMachine is provisioned", || async {
        let v = serde_json::to_value(imm.get("p1-cp").await.ok()?).ok()?;
        (v["status"]["ready"] == true && v["status"]["addresses"].is_array()).then_some(v)
    })
    .await;
    let dev_before = eventually("the DevMachine is provisioned", || async {
        let v = serde_json::to_value(dm.get("p1-dev").await.ok()?).ok()?;
        (v["status"]["ready"] == true && v["status"]["addresses"].is_array()).then_some(v)
    })
    .await;
    (cluster_before, seed_before, dev_before)
}

/// The seed's kinds claim the v1beta2 contract, which puts `Paused` in `status.conditions`;
/// while paused, the provider changes only that condition: addresses, failure domains and
/// readiness stay as they were (a DevMachine's too).
#[tokio::test]
async fn paused_is_reported_in_status_conditions_and_nothing_else_changes() {
    let plane = setup(23870..=23880).await;
    let (cluster_before, seed_before, dev_before) = seed_objects_up(&plane).await;
    let clusters: Api<core::Cluster> = Api::namespaced(plane.client.clone(), NS);
    let imc: Api<InMemoryCluster> = Api::namespaced(plane.client.clone(), NS);
    let imm: Api<InMemoryMachine> = Api::namespaced(plane.client.clone(), NS);
    let dm: Api<DevMachine> = Api::namespaced(plane.client.clone(), NS);
    assert_eq!(
        condition(&seed_before["status"]["conditions"], "Paused"),
        Some(("False", "NotPaused"))
    );
    assert_eq!(seed_before["status"]["failureDomain"], "fd-1");

    clusters
        .patch(
            "p1",
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"paused": true}})),
        )
        .await
        .unwrap();
    let paused = |v: &Value, path: &str| {
        let conds = v.pointer(path).cloned().unwrap_or(Value::Null);
        condition(&conds, "Paused") == Some(("True", "Paused"))
            && message(&conds, "Paused") == Some("Cluster spec.paused is set to true")
    };
    let cluster_paused = eventually("the InMemoryCluster reports the pause", || async {
        let v = serde_json::to_value(imc.get("p1").await.ok()?).ok()?;
        paused(&v, "/status/conditions").then_some(v)
    })
    .await;
    let seed_paused = eventually("the InMemoryMachine reports the pause", || async {
        let v = serde_json::to_value(imm.get("p1-cp").await.ok()?).ok()?;
        (paused(&v, "/status/conditions") && paused(&v, "/status/v1beta2/conditions")).then_some(v)
    })
    .await;
    let dev_paused = eventually("the DevMachine reports the pause", || async {
        let v = serde_json::to_value(dm.get("p1-dev").await.ok()?).ok()?;
        paused(&v, "/status/conditions").then_some(v)
    })
    .await;
    // Everything but the Paused condition is as it was.
    for field in ["ready", "initialization", "failureDomains"] {
        assert_eq!(
            cluster_paused["status"][field], cluster_before["status"][field],
            "InMemoryCluster status.{field}"
        );
    }
    for (before, now, kind) in [
        (&seed_before, &seed_paused, "InMemoryMachine"),
        (&dev_before, &dev_paused, "DevMachine"),
    ] {
        for field in ["ready", "initialization", "addresses", "failureDomain"] {
            assert_eq!(
                now["status"][field], before["status"][field],
                "{kind} status.{field} while paused"
            );
        }
        assert!(now["status"]["addresses"]
            .as_array()
            .is_some_and(|a| !a.is_empty()));
    }
    assert_eq!(
        condition(&seed_paused["status"]["conditions"], "Ready").map(|c| c.0),
        Some("True")
    );

    clusters
        .patch(
            "p1",
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"paused": false}})),
        )
        .await
        .unwrap();
    eventually("unpaused, the seed's kinds say so", || async {
        let c = serde_json::to_value(imc.get("p1").await.ok()?).ok()?;
        let m = serde_json::to_value(imm.get("p1-cp").await.ok()?).ok()?;
        let not_paused = |v: &Value| {
            condition(&v["status"]["conditions"], "Paused") == Some(("False", "NotPaused"))
        };
        (not_paused(&c) && not_paused(&m)).then_some(())
    })
    .await;
}
