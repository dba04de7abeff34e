//! Workloads behave inside a simulated cluster, driven by kube-rs over the cluster's endpoint
//! while a fake clock decides when containers start and leases are renewed.

mod common;
use common::client;
use common::eventually;
use infrasim_clock::FakeClock;
use infrasim_cloud::{Cloud, CloudConfig, ClusterShape, WorkloadConfig};
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, ReplicaSet};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Event, Node, Pod};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::Api;
use std::sync::Arc;
use std::time::Duration;

fn phases(pods: &[Pod]) -> Vec<String> {
    pods.iter()
        .map(|p| {
            p.status
                .as_ref()
                .and_then(|s| s.phase.clone())
                .unwrap_or_default()
        })
        .collect()
}

#[tokio::test]
async fn deployments_daemonsets_scheduling_and_kubelets() {
    let clock = FakeClock::new("2030-01-01T00:00:00Z".parse().unwrap());
    let cloud = Cloud::with_clock(
        CloudConfig {
            ports: 23700..=23720,
            ..CloudConfig::default()
        },
        Arc::new(clock.clone()),
    );
    let info = cloud
        .create_cluster(ClusterShape {
            name: "wl".into(),
            control_planes: 1,
            workers: 2,
            workloads: WorkloadConfig {
                pod_startup: Duration::from_secs(5),
                lease_renewal: Duration::from_secs(10),
                event_ttl: Duration::from_secs(3600),
            },
            ..ClusterShape::default()
        })
        .await
        .unwrap();
    let c = client(&info.kubeconfig).await;
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    let deployments: Api<Deployment> = Api::namespaced(c.clone(), "default");

    // CoreDNS and kube-proxy pods are created and bound at once, but run only once the
    // kubelets' startup delay has passed on the clock.
    let system: Api<Pod> = Api::namespaced(c.clone(), "kube-system");
    eventually("kube-proxy on every node, CoreDNS bound", || async {
        let l = system.list(&ListParams::default()).await.unwrap().items;
        let proxies = l.iter().filter(|p| {
            p.metadata
                .name
                .as_deref()
                .unwrap_or("")
                .starts_with("kube-proxy-")
        });
        let dns = l.iter().filter(|p| {
            p.metadata
                .name
                .as_deref()
                .unwrap_or("")
                .starts_with("coredns-")
        });
        proxies
            .filter(|p| p.spec.as_ref().unwrap().node_name.is_some())
            .count()
            == 3
            && dns
                .filter(|p| p.spec.as_ref().unwrap().node_name.is_some())
                .count()
                == 2
    })
    .await;
    assert!(!cloud.ready("wl"), "pods have not started yet");
    clock.advance(Duration::from_secs(5));
    eventually("the cluster is ready", || async { cloud.ready("wl") }).await;

    // A Deployment: a ReplicaSet, three pods bound to workers (the control-plane node is
    // tainted), Pending until they start, then Running with pod IPs and Ready.
    let d: Deployment = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "web"},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": [{"name": "nginx", "image": "nginx:1.27",
                                       "resources": {"requests": {"cpu": "100m"}}}]}}}
    }))
    .unwrap();
    deployments
        .create(&PostParams::default(), &d)
        .await
        .unwrap();
    eventually("three pods bound and accepted", || async {
        let l = pods
            .list(&ListParams::default().labels("app=web"))
            .await
            .unwrap()
            .items;
        l.len() == 3
            && l.iter().all(|p| {
                p.status
                    .as_ref()
                    .and_then(|s| s.start_time.as_ref())
                    .is_some()
            })
    })
    .await;
    let l = pods
        .list(&ListParams::default().labels("app=web"))
        .await
        .unwrap()
        .items;
    assert_eq!(phases(&l), vec!["Pending"; 3]);
    for p in &l {
        let node = p.spec.as_ref().unwrap().node_name.clone().unwrap();
        assert!(node.starts_with("wl-worker-"), "{node} is a worker");
        let waiting = &p
            .status
            .as_ref()
            .unwrap()
            .container_statuses
            .as_ref()
            .unwrap()[0];
        assert_eq!(
            waiting
                .state
                .as_ref()
                .unwrap()
                .waiting
                .as_ref()
                .unwrap()
                .reason
                .as_deref(),
            Some("ContainerCreating")
        );
        assert_eq!(
            p.metadata.owner_references.as_ref().unwrap()[0].kind,
            "ReplicaSet"
        );
    }
    let d = deployments.get("web").await.unwrap();
    assert_eq!(d.status.as_ref().unwrap().available_replicas, None);
    clock.advance(Duration::from_secs(5));
    eventually("the deployment is available", || async {
        let s = deployments.get("web").await.unwrap().status.unwrap();
        s.available_replicas == Some(3)
            && s.updated_replicas == Some(3)
            && s.ready_replicas == Some(3)
    })
    .await;
    let l = pods
        .list(&ListParams::default().labels("app=web"))
        .await
        .unwrap()
        .items;
    assert_eq!(phases(&l), vec!["Running"; 3]);
    let ips: std::collections::BTreeSet<String> = l
        .iter()
        .map(|p| p.status.as_ref().unwrap().pod_ip.clone().unwrap())
        .collect();
    assert_eq!(ips.len(), 3, "distinct pod IPs: {ips:?}");
    // What happened to a pod is told by events, in order.
    let events: Api<Event> = Api::namespaced(c.clone(), "default");
    let first = l[0].metadata.name.clone().unwrap();
    let told: Vec<String> = events
        .list(&ListParams::default().fields(&format!("involvedObject.name={first}")))
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|e| e.reason.unwrap_or_default())
        .collect();
    assert_eq!(told, ["Scheduled", "Pulled", "Created", "Started"]);
    assert!(ips.iter().all(|ip| ip.starts_with("10.244.")));
    let d = deployments.get("web").await.unwrap();
    let conditions = d.status.unwrap().conditions.unwrap();
    let available = conditions.iter().find(|c| c.type_ == "Available").unwrap();
    assert_eq!(
        (available.status.as_str(), available.reason.as_deref()),
        ("True", Some("MinimumReplicasAvailable"))
    );
    let progressing = conditions
        .iter()
        .find(|c| c.type_ == "Progressing")
        .unwrap();
    assert_eq!(
        progressing.reason.as_deref(),
        Some("NewReplicaSetAvailable")
    );

    // Scaling down deletes pods; a new template rolls to a second ReplicaSet.
    deployments
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"spec": {"replicas": 1}})),
        )
        .await
        .unwrap();
    eventually("scaled to one", || async {
        pods.list(&ListParams::default().labels("app=web"))
            .await
            .unwrap()
            .items
            .len()
            == 1
    })
    .await;
    deployments
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Strategic(serde_json::json!({"spec": {"template": {"spec": {"containers": [{"name": "nginx", "image": "nginx:1.28"}]}}}})),
        )
        .await
        .unwrap();
    let replicasets: Api<ReplicaSet> = Api::namespaced(c.clone(), "default");
    eventually("a second ReplicaSet", || async {
        replicasets
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .len()
            == 2
    })
    .await;
    clock.advance(Duration::from_secs(5));
    eventually("rolled over to the new template", || async {
        let l = pods
            .list(&ListParams::default().labels("app=web"))
            .await
            .unwrap()
            .items;
        l.len() == 1
            && phases(&l) == ["Running"]
            && l[0].spec.as_ref().unwrap().containers[0].image.as_deref() == Some("nginx:1.28")
    })
    .await;
    let d = deployments.get("web").await.unwrap();
    assert_eq!(
        d.metadata
            .annotations
            .unwrap()
            .get("deployment.kubernetes.io/revision")
            .map(String::as_str),
        Some("2")
    );

    // A pod nothing can take stays Pending and says why.
    let big: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "big"},
        "spec": {"containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "64"}}}]}
    }))
    .unwrap();
    pods.create(&PostParams::default(), &big).await.unwrap();
    eventually("big is unschedulable", || async {
        let p = pods.get("big").await.unwrap();
        p.status.unwrap().conditions.unwrap_or_default().iter().any(|c| {
            c.type_ == "PodScheduled"
                && c.reason.as_deref() == Some("Unschedulable")
                && c.message.as_deref().unwrap_or("").starts_with("0/3 nodes are available: 2 Insufficient cpu, 1 node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }.")
        })
    })
    .await;

    // A new node gets a kube-proxy pod from the DaemonSet.
    let nodes: Api<Node> = Api::all(c.clone());
    let mut extra = nodes.get("wl-worker-1").await.unwrap();
    extra.metadata = kube::api::ObjectMeta {
        name: Some("wl-worker-9".into()),
        labels: extra.metadata.labels.clone(),
        ..Default::default()
    };
    nodes.create(&PostParams::default(), &extra).await.unwrap();
    let daemonsets: Api<DaemonSet> = Api::namespaced(c.clone(), "kube-system");
    clock.advance(Duration::from_secs(5));
    eventually("kube-proxy runs on the new node", || async {
        let s = daemonsets.get("kube-proxy").await.unwrap().status.unwrap();
        let on_new = system
            .list(&ListParams::default().fields("spec.nodeName=wl-worker-9"))
            .await
            .unwrap()
            .items;
        s.desired_number_scheduled == 4 && on_new.len() == 1
    })
    .await;
    clock.advance(Duration::from_secs(5));
    eventually("and it is ready", || async {
        daemonsets
            .get("kube-proxy")
            .await
            .unwrap()
            .status
            .unwrap()
            .number_ready
            == 4
    })
    .await;

    // Kubelets renew their node leases.
    let leases: Api<Lease> = Api::namespaced(c.clone(), "kube-node-lease");
    let before = leases
        .get("wl-worker-0")
        .await
        .unwrap()
        .spec
        .unwrap()
        .renew_time
        .unwrap();
    clock.advance(Duration::from_secs(10));
    eventually("the lease is renewed", || async {
        leases
            .get("wl-worker-0")
            .await
            .unwrap()
            .spec
            .unwrap()
            .renew_time
            .unwrap()
            != before
    })
    .await;

    // Events lapse after their TTL.
    assert!(!events
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .is_empty());
    clock.advance(Duration::from_secs(3600 + 60));
    eventually("events expired", || async {
        events
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    })
    .await;

    // Kubelets report their node's status every five minutes: heartbeats move on.
    let heartbeat = |n: Node| {
        n.status
            .unwrap()
            .conditions
            .unwrap()
            .into_iter()
            .find(|c| c.type_ == "Ready")
            .unwrap()
            .last_heartbeat_time
            .unwrap()
            .0
    };
    eventually("node heartbeats", || async {
        let beat = heartbeat(nodes.get("wl-worker-0").await.unwrap());
        beat > "2030-01-01T00:30:00Z".parse().unwrap()
    })
    .await;

    // Deleting the Deployment takes its ReplicaSets and pods with it.
    deployments
        .delete("web", &DeleteParams::default())
        .await
        .unwrap();
    eventually("everything of web is gone", || async {
        pods.list(&ListParams::default().labels("app=web"))
            .await
            .unwrap()
            .items
            .is_empty()
            && replicasets
                .list(&ListParams::default())
                .await
                .unwrap()
                .items
                .is_empty()
    })
    .await;
}

#[tokio::test]
async fn a_job_fails_at_its_deadline_even_when_nothing_else_happens() {
    use k8s_openapi::api::batch::v1::Job;
    let clock = FakeClock::new("2030-01-01T00:00:00Z".parse().unwrap());
    let cloud = Cloud::with_clock(
        CloudConfig {
            ports: 23730..=23740,
            ..CloudConfig::default()
        },
        Arc::new(clock.clone()),
    );
    let info = cloud
        .create_cluster(ClusterShape {
            name: "deadline".into(),
            workers: 1,
            workloads: WorkloadConfig {
                // Its pod would finish only after 100 s: the deadline comes first.
                pod_startup: Duration::from_secs(100),
                lease_renewal: Duration::ZERO,
                event_ttl: Duration::from_secs(3600),
            },
            ..ClusterShape::default()
        })
        .await
        .unwrap();
    let c = client(&info.kubeconfig).await;
    let jobs: Api<Job> = Api::namespaced(c.clone(), "default");
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    let job: Job = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "slow"},
        "spec": {"activeDeadlineSeconds": 10, "template": {"spec": {"restartPolicy": "Never",
                 "containers": [{"name": "c", "image": "busybox"}]}}}
    }))
    .unwrap();
    jobs.create(&PostParams::default(), &job).await.unwrap();
    eventually("the job started a pod", || async {
        let s = jobs.get("slow").await.unwrap().status.unwrap_or_default();
        s.start_time.is_some() && s.active == Some(1)
    })
    .await;
    clock.advance(Duration::from_secs(10));
    eventually("the job failed at its deadline", || async {
        let conditions = jobs
            .get("slow")
            .await
            .unwrap()
            .status
            .unwrap()
            .conditions
            .unwrap_or_default();
        conditions.iter().any(|c| {
            c.type_ == "Failed"
                && c.status == "True"
                && c.reason.as_deref() == Some("DeadlineExceeded")
        })
    })
    .await;
    eventually("its pod is gone", || async {
        pods.list(&ListParams::default().labels("job-name=slow"))
            .await
            .unwrap()
            .items
            .is_empty()
    })
    .await;
}
