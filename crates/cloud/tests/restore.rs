//! A cloud over a durable store brings its clusters back once the process that ran them is
//! gone: each at its endpoint with its PKI (a kubeconfig from before still works), every
//! object with its resourceVersion, the same etcd member IDs, machines with the steps they had
//! done, and a machine a controller was stepping goes on from where it was.
//!
//! Each run is its own tokio runtime, shut down at the end as a process's would be: every task
//! and connection goes, and with them the store's lock and the endpoints' ports.

mod common;
use infrasim_clock::SystemClock;
use infrasim_cloud::{Cloud, CloudConfig, ClusterShape, WorkloadConfig};
use infrasim_durable::DurableBackend;
use infrasim_etcd_sim::MembershipImage;
use infrasim_store::{ReadAt, Store};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

fn config() -> CloudConfig {
    CloudConfig {
        ports: 23625..=23650,
        ..CloudConfig::default()
    }
}

/// Runs `work` as a process would, and ends it: the runtime and all its tasks go.
fn process<T>(work: impl std::future::Future<Output = T>) -> T {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let out = rt.block_on(work);
    rt.shutdown_timeout(Duration::from_secs(5));
    out
}

async fn open(dir: &Path) -> Cloud {
    let config = config();
    // The last run's tasks may still be letting go of the directory's lock.
    let mut backend = DurableBackend::open(dir, config.watch_window);
    for _ in 0..100 {
        if backend.is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        backend = DurableBackend::open(dir, config.watch_window);
    }
    let store = Store::open(
        config.store_config(),
        SystemClock::shared(),
        Arc::new(backend.expect("the data directory opens")),
    )
    .expect("the store opens");
    Cloud::open(config, SystemClock::shared(), store)
        .await
        .expect("the clusters come back")
}

/// Every object of a cluster, by resource and key, with its resourceVersion.
type Objects = BTreeMap<(String, String, String), u64>;

fn objects(cloud: &Cloud, cluster: &str) -> Objects {
    let group = cloud.group(cluster).expect("the cluster's group");
    let mut all = Objects::new();
    for resource in group.resources() {
        let snapshot = group.snapshot(&resource, ReadAt::Latest).expect("a list");
        for (key, o) in snapshot.objects.iter() {
            all.insert(
                (
                    resource.to_string(),
                    key.namespace.to_string(),
                    key.name.to_string(),
                ),
                o.meta.resource_version,
            );
        }
    }
    all
}

/// The objects once the cluster's own controllers have stopped writing.
async fn settled(cloud: &Cloud, cluster: &str) -> Objects {
    let mut last = objects(cloud, cluster);
    loop {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let now = objects(cloud, cluster);
        if now == last {
            return now;
        }
        last = now;
    }
}

struct Before {
    endpoint: SocketAddr,
    kubeconfig: String,
    objects: Objects,
    members: MembershipImage,
    machines: Vec<(String, usize)>,
}

fn machines(cloud: &Cloud, cluster: &str) -> Vec<(String, usize)> {
    cloud
        .machines(cluster)
        .expect("the cluster's machines")
        .into_iter()
        .map(|(m, steps)| (m.name, steps))
        .collect()
}

async fn node_versions(kubeconfig: &str) -> Vec<(String, String)> {
    use k8s_openapi::api::core::v1::Node;
    let nodes: kube::Api<Node> = kube::Api::all(common::client(kubeconfig).await);
    let list = nodes.list(&Default::default()).await.expect("nodes");
    list.items
        .into_iter()
        .map(|n| {
            (
                n.metadata.name.unwrap_or_default(),
                n.metadata.resource_version.unwrap_or_default(),
            )
        })
        .collect()
}

#[test]
fn clusters_come_back_as_they_were_after_their_process_is_gone() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let quiet = WorkloadConfig {
        pod_startup: Duration::ZERO,
        lease_renewal: Duration::ZERO,
        ..WorkloadConfig::default()
    };
    let before = process(async {
        let cloud = open(dir.path()).await;
        let info = cloud
            .create_cluster(ClusterShape {
                name: "up".into(),
                control_planes: 1,
                workers: 1,
                workloads: quiet.clone(),
                ..ClusterShape::default()
            })
            .await
            .expect("a cluster");
        common::eventually("the cluster is up", || async { cloud.ready("up") }).await;
        // A cluster whose machine a controller steps: it has its VM and Node, no etcd yet.
        cloud
            .create_cluster(ClusterShape {
                name: "stepped".into(),
                control_planes: 0,
                workers: 0,
                workloads: quiet,
                ..ClusterShape::default()
            })
            .await
            .expect("a cluster");
        for step in [0, 1] {
            cloud
                .run_machine_step("stepped", "cp-0", true, None, step)
                .await
                .expect("a step");
        }
        Before {
            endpoint: info.endpoint,
            kubeconfig: info.kubeconfig,
            objects: settled(&cloud, "up").await,
            members: cloud.etcd("up").expect("etcd").membership(),
            machines: machines(&cloud, "up"),
        }
    });
    assert_eq!(before.members.members.len(), 1, "one etcd member");

    process(async {
        let cloud = open(dir.path()).await;
        let info = cloud
            .clusters()
            .into_iter()
            .find(|c| c.name == "up")
            .expect("the cluster is back");
        assert_eq!(info.endpoint, before.endpoint, "at its endpoint");
        assert!(cloud.ready("up"), "up at once, nothing started again");
        assert_eq!(
            machines(&cloud, "up"),
            before.machines,
            "steps done stay done"
        );
        let restored = objects(&cloud, "up");
        assert_eq!(restored.len(), before.objects.len(), "as many objects");
        let differ = restored
            .iter()
            .filter(|(k, rv)| before.objects.get(*k) != Some(*rv))
            .count();
        assert_eq!(differ, 0, "every object with its resourceVersion");
        let membership = cloud.etcd("up").expect("etcd").membership();
        assert_eq!(
            membership, before.members,
            "the same etcd member IDs, leader and term"
        );

        // The kubeconfig written before the restart reaches the cluster.
        let nodes = node_versions(&before.kubeconfig).await;
        assert_eq!(nodes.len(), 2, "{nodes:?}");
        for (name, rv) in &nodes {
            let kept = before
                .objects
                .get(&("nodes".to_string(), String::new(), name.clone()));
            assert_eq!(kept.map(u64::to_string).as_ref(), Some(rv), "node {name}");
        }
        let settled = settled(&cloud, "up").await;
        let moved = settled
            .iter()
            .filter(|(k, rv)| before.objects.get(*k) != Some(*rv))
            .count();
        assert_eq!(
            moved, 0,
            "the restarted cluster's controllers rewrite nothing"
        );

        // The stepped machine goes on from its third step.
        assert_eq!(machines(&cloud, "stepped"), vec![("cp-0".to_string(), 2)]);
        for step in [2, 3] {
            cloud
                .run_machine_step("stepped", "cp-0", true, None, step)
                .await
                .expect("a step");
        }
        assert_eq!(
            machines(&cloud, "stepped"),
            vec![("cp-0".to_string(), 5)],
            "etcd, then the API server with the scheduler and controller-manager"
        );
        let newest = before.objects.values().max().copied().unwrap_or(0);
        let made = cloud
            .group("up")
            .expect("group")
            .create(
                "configmaps",
                serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
                                   "metadata": {"name": "after", "namespace": "default"}}),
                Default::default(),
            )
            .expect("a write");
        assert!(
            made.meta.resource_version > newest,
            "resourceVersions go on past every one before the restart"
        );
        cloud.delete_cluster("stepped").await.expect("deleted");
    });

    // A deleted cluster stays deleted.
    process(async {
        let cloud = open(dir.path()).await;
        let names: Vec<String> = cloud.clusters().into_iter().map(|c| c.name).collect();
        assert_eq!(names, vec!["up".to_string()]);
    });
}
