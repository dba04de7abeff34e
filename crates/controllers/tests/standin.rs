//! The provider with the embedded Cluster API core stand-in: clusters declared from the
//! built-in templates come up, scale, upgrade and go, as a Cluster API user sees them.

mod common;

use common::{apply_yaml, eventually, Plane};
use infrasim_controllers::capi::core::{
    Cluster, KubeadmControlPlane, Machine, MachineDeployment, MachineSet,
};
use infrasim_controllers::capi::templates::{self, substitute};
use infrasim_controllers::capi::{infra, standin};
use infrasim_controllers::crds;
use infrasim_controllers::informers::Informers;
use infrasim_metrics::state::StateMetrics;
use infrasim_metrics::Format;
use k8s_openapi::api::core::v1::{Node, Secret};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use kube::ResourceExt;
use serde_json::json;
use std::collections::HashMap;
use std::sync::Arc;

const NS: &str = "default";

async fn setup(ports: std::ops::RangeInclusive<u16>) -> Plane {
    setup_with(ports).await.0
}

/// [`setup`], and the informers the controllers read.
async fn setup_with(ports: std::ops::RangeInclusive<u16>) -> (Plane, Arc<Informers>) {
    let plane = Plane::start(ports).await;
    let mut all = crds::provider(false);
    all.extend(crds::core(false));
    crds::install(&plane.client, &all).await.unwrap();
    let informers = Arc::new(Informers::new(plane.client.clone(), None));
    tokio::spawn(infra::run(plane.ctx.clone(), informers.clone()));
    tokio::spawn(standin::run(plane.ctx.clone(), informers.clone()));
    (plane, informers)
}

/// Template variables: machines that come up at once.
fn vars(pairs: &[(&str, &str)]) -> HashMap<String, String> {
    let mut v: HashMap<String, String> = [
        ("VM_STARTUP", "0s"),
        ("NODE_STARTUP", "0s"),
        ("ETCD_STARTUP", "0s"),
        ("API_SERVER_STARTUP", "0s"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    v.extend(pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    v
}

/// Applies the built-in ClusterClass and a Cluster of it with the variables `pairs`.
async fn declare_class_cluster(plane: &Plane, pairs: &[(&str, &str)]) {
    apply_yaml(
        &plane.client,
        &substitute(templates::CLUSTERCLASS_IN_MEMORY, &vars(&[])).unwrap(),
        NS,
    )
    .await;
    apply_yaml(
        &plane.client,
        &substitute(templates::CLUSTER_IN_MEMORY, &vars(pairs)).unwrap(),
        NS,
    )
    .await;
}

fn condition(c: &Cluster, ty: &str) -> Option<(String, String)> {
    c.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|x| x.type_ == ty)
        .map(|x| (x.status.clone(), x.reason.clone()))
}

/// A client of the workload cluster from its `<cluster>-kubeconfig` secret.
async fn workload(plane: &Plane, cluster: &str) -> kube::Client {
    let secrets: Api<Secret> = Api::namespaced(plane.client.clone(), NS);
    let secret = secrets.get(&format!("{cluster}-kubeconfig")).await.unwrap();
    let yaml = String::from_utf8(secret.data.unwrap()["value"].0.clone()).unwrap();
    let kc = kube::config::Kubeconfig::from_yaml(&yaml).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .unwrap();
    kube::Client::try_from(config).unwrap()
}

/// Waits until the cluster is Available with `cp` + `workers` Ready nodes running `version`.
async fn wait_for(plane: &Plane, cluster: &str, cp: usize, workers: usize, version: &str) {
    let clusters: Api<Cluster> = Api::namespaced(plane.client.clone(), NS);
    eventually(&format!("{cluster} is Available"), || async {
        let c = clusters.get(cluster).await.ok()?;
        (condition(&c, "Available").map(|a| a.0) == Some("True".into())).then_some(())
    })
    .await;
    let nodes: Api<Node> = Api::all(workload(plane, cluster).await);
    let machines: Api<Machine> = Api::namespaced(plane.client.clone(), NS);
    eventually(
        &format!("{cluster} has {cp}+{workers} nodes at {version}"),
        || async {
            let list = nodes.list(&ListParams::default()).await.ok()?.items;
            let at_version = |n: &Node| {
                n.status
                    .as_ref()?
                    .node_info
                    .as_ref()
                    .map(|i| i.kubelet_version == version)
            };
            let cps = list
                .iter()
                .filter(|n| {
                    n.labels()
                        .contains_key("node-role.kubernetes.io/control-plane")
                })
                .count();
            let ms = machines
                .list(
                    &ListParams::default()
                        .labels(&format!("cluster.x-k8s.io/cluster-name={cluster}")),
                )
                .await
                .ok()?
                .items;
            let ready = ms.iter().filter(|m| {
                m.status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|c| c.iter().any(|x| x.type_ == "Ready" && x.status == "True"))
            });
            (cps == cp
                && list.len() == cp + workers
                && list.iter().all(|n| at_version(n) == Some(true))
                && ms.len() == cp + workers
                && ready.count() == cp + workers)
                .then_some(())
        },
    )
    .await;
    for n in nodes.list(&ListParams::default()).await.unwrap() {
        let id = n
            .spec
            .as_ref()
            .and_then(|s| s.provider_id.clone())
            .unwrap_or_default();
        assert_eq!(id, format!("in-memory://{}", n.name_any()));
    }
}

#[tokio::test]
async fn a_cluster_class_cluster_comes_up_scales_upgrades_and_goes() {
    let plane = setup(23900..=23940).await;
    declare_class_cluster(
        &plane,
        &[
            ("CLUSTER_NAME", "t1"),
            ("CONTROL_PLANE_MACHINE_COUNT", "3"),
            ("WORKER_MACHINE_COUNT", "2"),
            ("KUBERNETES_VERSION", "v1.31.2"),
        ],
    )
    .await;
    wait_for(&plane, "t1", 3, 2, "v1.31.2").await;

    let clusters: Api<Cluster> = Api::namespaced(plane.client.clone(), NS);
    let c = clusters.get("t1").await.unwrap();
    assert_eq!(
        c.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Provisioned")
    );
    for ty in [
        "InfrastructureReady",
        "ControlPlaneInitialized",
        "ControlPlaneAvailable",
        "WorkersAvailable",
        "TopologyReconciled",
    ] {
        assert_eq!(
            condition(&c, ty).map(|x| x.0),
            Some("True".into()),
            "{ty}: {:?}",
            condition(&c, ty)
        );
    }
    let kcps: Api<KubeadmControlPlane> = Api::namespaced(plane.client.clone(), NS);
    let kcp = kcps
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .remove(0);
    assert_eq!(
        kcp.annotations()
            .get("cluster.x-k8s.io/cloned-from-name")
            .map(String::as_str),
        Some("in-memory-control-plane")
    );
    let s = kcp.status.clone().unwrap();
    assert_eq!(
        (s.replicas, s.ready_replicas, s.up_to_date_replicas),
        (Some(3), Some(3), Some(3))
    );

    // Scale the workers through the topology.
    let topology = |cp: i32, w: i32, v: &str| {
        json!({"spec": {"topology": {"version": v,
        "controlPlane": {"replicas": cp},
        "workers": {"machineDeployments": [{"class": "default-worker", "name": "md-0", "replicas": w}]}}}})
    };
    clusters
        .patch(
            "t1",
            &PatchParams::default(),
            &Patch::Merge(&topology(3, 3, "v1.31.2")),
        )
        .await
        .unwrap();
    wait_for(&plane, "t1", 3, 3, "v1.31.2").await;

    // A version bump rolls the control plane one machine at a time, then the workers.
    clusters
        .patch(
            "t1",
            &PatchParams::default(),
            &Patch::Merge(&topology(3, 3, "v1.32.0")),
        )
        .await
        .unwrap();
    wait_for(&plane, "t1", 3, 3, "v1.32.0").await;
    let machines: Api<Machine> = Api::namespaced(plane.client.clone(), NS);
    let all = machines.list(&ListParams::default()).await.unwrap().items;
    assert!(all
        .iter()
        .all(|m| m.spec.version.as_deref() == Some("v1.32.0")));

    // etcd's members are the control-plane machines' nodes, the replaced ones removed.
    let etcd = plane.cloud.etcd("t1.default").expect("the cluster's etcd");
    let nodes: Vec<String> = all
        .iter()
        .filter(|m| m.is_control_plane())
        .filter_map(|m| Some(m.status.as_ref()?.node_ref.as_ref()?.name.clone()))
        .collect();
    assert_eq!(nodes.len(), 3);
    for node in &nodes {
        assert!(
            etcd.member_named(node).is_some(),
            "{node} is an etcd member"
        );
    }
    assert_eq!(etcd.lock().members.list().len(), 3);
    // The control plane's etcd client, through the cluster's endpoint with a certificate of
    // the `t1-etcd` CA: removing the leader's member moves leadership off it first.
    let leader = etcd.leader().expect("a leader");
    let leading = nodes
        .iter()
        .find(|n| etcd.member_named(n).map(|m| m.id) == Some(leader))
        .expect("the leader is a control plane's member")
        .clone();
    standin::etcd::remove_member(&plane.client, NS, "t1", &leading)
        .await
        .expect("etcd answers on the endpoint");
    assert!(etcd.member_named(&leading).is_none());
    let heir = etcd.leader().expect("leadership moved");
    assert!(nodes
        .iter()
        .any(|n| n != &leading && etcd.member_named(n).map(|m| m.id) == Some(heir)));

    // Deleting the Cluster removes every object and closes the endpoint.
    let endpoint = c.spec.control_plane_endpoint.clone().unwrap();
    clusters
        .delete("t1", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the cluster and its machines are gone", || async {
        let gone = clusters.get_opt("t1").await.ok()?.is_none()
            && machines
                .list(&ListParams::default())
                .await
                .ok()?
                .items
                .is_empty()
            && kcps
                .list(&ListParams::default())
                .await
                .ok()?
                .items
                .is_empty();
        gone.then_some(())
    })
    .await;
    assert!(!plane.cloud.has_cluster("t1.default"));
    assert!(
        tokio::net::TcpStream::connect(("127.0.0.1", endpoint.port as u16))
            .await
            .is_err(),
        "the endpoint is closed"
    );
}

#[tokio::test]
async fn the_seed_kinds_without_a_class_scale_through_the_machine_deployment() {
    let plane = setup(23950..=23990).await;
    let v = vars(&[("CLUSTER_NAME", "d1"), ("WORKER_MACHINE_COUNT", "1")]);
    apply_yaml(
        &plane.client,
        &substitute(templates::CLUSTER_IN_MEMORY_DEVELOPMENT, &v).unwrap(),
        NS,
    )
    .await;
    wait_for(&plane, "d1", 1, 1, "v1.31.2").await;
    each_status_applied_by_its_own_controller(&plane, "d1").await;
    let mds: Api<MachineDeployment> = Api::namespaced(plane.client.clone(), NS);
    // `kubectl scale machinedeployment` goes through the scale subresource.
    mds.patch_scale(
        "d1-md-0",
        &PatchParams::default(),
        &Patch::Merge(&json!({"spec": {"replicas": 3}})),
    )
    .await
    .unwrap();
    wait_for(&plane, "d1", 1, 3, "v1.31.2").await;
    mds.patch_scale(
        "d1-md-0",
        &PatchParams::default(),
        &Patch::Merge(&json!({"spec": {"replicas": 1}})),
    )
    .await
    .unwrap();
    wait_for(&plane, "d1", 1, 1, "v1.31.2").await;
    let sets: Api<MachineSet> = Api::namespaced(plane.client.clone(), NS);
    assert_eq!(
        sets.list(&ListParams::default()).await.unwrap().items.len(),
        1
    );
}

/// The field managers that server-side applied the object's status.
fn status_appliers(meta: &kube::api::ObjectMeta) -> Vec<String> {
    meta.managed_fields
        .iter()
        .flatten()
        .filter(|f| f.operation.as_deref() == Some("Apply"))
        .filter(|f| f.subresource.as_deref() == Some("status"))
        .filter_map(|f| f.manager.clone())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect()
}

/// Each controller of the stand-in writes status under a field manager of its own, so an
/// object's managedFields say which controller wrote it (a Cluster, its control plane, its
/// MachineDeployment, MachineSet and Machines: five controllers of one family).
async fn each_status_applied_by_its_own_controller(plane: &Plane, cluster: &str) {
    let client = &plane.client;
    let selector =
        ListParams::default().labels(&format!("cluster.x-k8s.io/cluster-name={cluster}"));
    let mut seen: Vec<(String, Vec<String>)> = Vec::new();
    let c = Api::<Cluster>::namespaced(client.clone(), NS)
        .get(cluster)
        .await
        .unwrap();
    seen.push(("Cluster".into(), status_appliers(&c.metadata)));
    let kcp = Api::<KubeadmControlPlane>::namespaced(client.clone(), NS)
        .get(&format!("{cluster}-control-plane"))
        .await
        .unwrap();
    seen.push(("KubeadmControlPlane".into(), status_appliers(&kcp.metadata)));
    for md in Api::<MachineDeployment>::namespaced(client.clone(), NS)
        .list(&selector)
        .await
        .unwrap()
    {
        seen.push(("MachineDeployment".into(), status_appliers(&md.metadata)));
    }
    for ms in Api::<MachineSet>::namespaced(client.clone(), NS)
        .list(&selector)
        .await
        .unwrap()
    {
        seen.push(("MachineSet".into(), status_appliers(&ms.metadata)));
    }
    for m in Api::<Machine>::namespaced(client.clone(), NS)
        .list(&selector)
        .await
        .unwrap()
    {
        let kind = match m.is_control_plane() {
            true => "control-plane Machine",
            false => "Machine",
        };
        seen.push((kind.into(), status_appliers(&m.metadata)));
    }
    let expected = |kind: &str| match kind {
        "Cluster" => vec!["infrasim-capi-core/cluster"],
        "KubeadmControlPlane" => vec!["infrasim-capi-core/kcp"],
        "MachineDeployment" => vec!["infrasim-capi-core/machinedeployment"],
        "MachineSet" => vec!["infrasim-capi-core/machineset"],
        // The control plane writes its Machines' component conditions, as upstream's does.
        "control-plane Machine" => vec!["infrasim-capi-core/kcp", "infrasim-capi-core/machine"],
        _ => vec!["infrasim-capi-core/machine"],
    };
    // One control plane, one deployment, one set, two machines, and the Cluster.
    assert_eq!(seen.len(), 6, "{seen:?}");
    for (kind, appliers) in &seen {
        // No health check here: each status has exactly its own controllers' managers.
        assert_eq!(appliers, &expected(kind), "{kind}: {seen:?}");
    }
}

/// What the Cluster `name` says of itself while it comes up, checked against its declared
/// MachineDeployment `md-0` (read from the API, never from a cache) each time it changes.
#[derive(Default)]
struct BringUp {
    /// Each new (Available, TopologyReconciled) pair, as `status/reason` strings.
    timeline: Vec<(String, String)>,
    violations: Vec<String>,
}

async fn watch_bring_up(
    client: kube::Client,
    name: &'static str,
    seen: std::sync::Arc<std::sync::Mutex<BringUp>>,
) {
    use futures::StreamExt;
    use kube::runtime::{watcher, WatchStreamExt};
    let clusters: Api<Cluster> = Api::namespaced(client.clone(), NS);
    let mds: Api<MachineDeployment> = Api::namespaced(client, NS);
    let selector = format!(
        "cluster.x-k8s.io/cluster-name={name},topology.cluster.x-k8s.io/deployment-name=md-0"
    );
    let mut stream = watcher(clusters, watcher::Config::default())
        .applied_objects()
        .boxed();
    while let Some(Ok(c)) = stream.next().await {
        if c.name_any() != name {
            continue;
        }
        let show =
            |x: Option<(String, String)>| x.map(|(s, r)| format!("{s}/{r}")).unwrap_or_default();
        let available = condition(&c, "Available");
        let topology = condition(&c, "TopologyReconciled");
        let step = (show(available.clone()), show(topology.clone()));
        let available = available.is_some_and(|a| a.0 == "True");
        let reconciled = topology.is_some_and(|t| t.0 == "True");
        if !available && !reconciled {
            record(&seen, step, None);
            continue;
        }
        // Machine availability only grows during a bring-up, so a MachineDeployment read
        // now that is missing or unavailable was so when this Cluster was written.
        let md = mds
            .list(&ListParams::default().labels(&selector))
            .await
            .ok()
            .and_then(|l| l.items.into_iter().next());
        let md_available = md.as_ref().is_some_and(|md| {
            md.status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|cs| {
                    cs.iter()
                        .any(|x| x.type_ == "Available" && x.status == "True")
                })
        });
        let violation = if md.is_none() {
            Some(format!(
                "{step:?} while MachineDeployment md-0 does not exist"
            ))
        } else if available && !md_available {
            Some(format!(
                "{step:?} while MachineDeployment md-0 is not available: {:?}",
                md.and_then(|m| m.status)
            ))
        } else {
            None
        };
        record(&seen, step, violation);
    }
}

fn record(seen: &std::sync::Mutex<BringUp>, step: (String, String), violation: Option<String>) {
    let mut seen = seen.lock().unwrap();
    if seen.timeline.last() != Some(&step) {
        seen.timeline.push(step);
    }
    seen.violations.extend(violation);
}

/// `kubectl wait --for=condition=Available` on a Cluster of the in-memory ClusterClass returns
/// only once the workers its topology declares exist and are available: the topology makes
/// the MachineDeployment in its first pass, with the control plane, as Cluster API's does, and
/// no version of the Cluster during the bring-up says Available without it.
#[tokio::test]
async fn a_topology_cluster_is_available_only_with_its_declared_workers() {
    let plane = setup(23750..=23790).await;
    // The class's own step timings, on the fake clock.
    apply_yaml(
        &plane.client,
        &substitute(templates::CLUSTERCLASS_IN_MEMORY, &HashMap::new()).unwrap(),
        NS,
    )
    .await;
    let seen = std::sync::Arc::new(std::sync::Mutex::new(BringUp::default()));
    let watch = tokio::spawn(watch_bring_up(plane.client.clone(), "a1", seen.clone()));
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    let cluster_vars: HashMap<String, String> = [
        ("CLUSTER_NAME", "a1"),
        ("CONTROL_PLANE_MACHINE_COUNT", "1"),
        ("WORKER_MACHINE_COUNT", "1"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    apply_yaml(
        &plane.client,
        &substitute(templates::CLUSTER_IN_MEMORY, &cluster_vars).unwrap(),
        NS,
    )
    .await;
    let clusters: Api<Cluster> = Api::namespaced(plane.client.clone(), NS);
    let mut available = false;
    for _ in 0..600 {
        let c = clusters.get("a1").await.unwrap();
        if condition(&c, "Available").is_some_and(|a| a.0 == "True") {
            available = true;
            break;
        }
        plane.advance(std::time::Duration::from_millis(250)).await;
    }
    assert!(
        available,
        "a1 never became Available: {:?}",
        seen.lock().unwrap().timeline
    );
    // What `kubectl wait` returning lets a user do at once: the MachineDeployment is there with
    // its replicas ready.
    let mds: Api<MachineDeployment> = Api::namespaced(plane.client.clone(), NS);
    let md = mds
        .list(&ListParams::default().labels("cluster.x-k8s.io/cluster-name=a1"))
        .await
        .unwrap()
        .items;
    assert_eq!(md.len(), 1, "one MachineDeployment");
    let status = md[0].status.clone().unwrap_or_default();
    assert_eq!(
        (status.ready_replicas, status.available_replicas),
        (Some(1), Some(1)),
        "{status:?}"
    );
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    watch.abort();
    let seen = seen.lock().unwrap();
    assert!(
        seen.violations.is_empty(),
        "{:#?}\ntimeline: {:#?}",
        seen.violations,
        seen.timeline
    );
    assert!(
        seen.timeline.iter().any(|(a, _)| a == "True/Available"),
        "{:?}",
        seen.timeline
    );
    for (_, topology) in &seen.timeline {
        assert!(
            ["", "True/ReconcileSucceeded", "False/ClusterUpgrading"].contains(&topology.as_str()),
            "TopologyReconciled {topology}: {:?}",
            seen.timeline
        );
    }
}

/// The state metrics are kept from the controllers' typed caches: what they render must be
/// what the families make of the objects as the API server serves them, or a field the
/// types drop would be missing from a dashboard.
#[tokio::test]
async fn state_metrics_from_the_caches_read_as_the_served_objects() {
    use infrasim_controllers::capi::state_metrics::{core, provider};
    use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
    let (plane, informers) = setup_with(24100..=24120).await;
    let kept = StateMetrics::default();
    let kinds: Vec<_> = core().into_iter().chain(provider()).collect();
    for (resource, follow) in &kinds {
        tokio::spawn(follow(&informers, &kept, resource.clone()));
    }
    declare_class_cluster(
        &plane,
        &[("CLUSTER_NAME", "s1"), ("WORKER_MACHINE_COUNT", "1")],
    )
    .await;
    wait_for(&plane, "s1", 1, 1, "v1.31.2").await;
    // The same families, fed the objects as a list from the API server returns them.
    let served = eventually("the caches to render what the server serves", || async {
        let served = StateMetrics::default();
        for (resource, _) in &kinds {
            let (group, version, kind) = resource.gvk();
            let gvk = GroupVersionKind::gvk(group, version, kind);
            let api_resource =
                ApiResource::from_gvk_with_plural(&gvk, &standin::objects::plural(kind));
            let id = served.add(resource.clone());
            let api: Api<DynamicObject> = Api::all_with(plane.client.clone(), &api_resource);
            for o in api.list(&ListParams::default()).await.ok()?.items {
                let mut value = serde_json::to_value(&o).ok()?;
                value["metadata"].as_object_mut()?.remove("managedFields");
                let key = format!("{}/{}", o.namespace().unwrap_or_default(), o.name_any());
                served.set(id, &key, &value);
            }
        }
        let served = served.render(Format::Classic);
        (served == kept.render(Format::Classic)).then_some(served)
    })
    .await;
    // Every kind the template makes is there, with what its dashboard reads.
    for (family, has) in [
        ("capi_cluster_status_phase", "phase=\"Provisioned\"} 1"),
        ("capi_clusterclass_info", "name=\"in-memory\""),
        ("capi_kubeadmcontrolplane_status_replicas_ready", "} 1"),
        ("capi_kubeadmconfig_status_condition", "type=\"Ready\"} 1"),
        ("capi_machinedeployment_info", "version=\"v1.31.2\""),
        ("capi_machineset_status_replicas", "} 1"),
        ("capi_machine_status_noderef", "node_name=\""),
        (
            "capi_machinehealthcheck_status_condition",
            "cluster_name=\"s1\"",
        ),
        ("capi_devcluster_status_condition", "cluster_name=\"s1\""),
        ("capi_devmachine_status_condition", "cluster_name=\"s1\""),
    ] {
        let found = served
            .lines()
            .any(|l| l.starts_with(&format!("{family}{{")) && l.contains(has));
        assert!(found, "no {family} with {has} in\n{served}");
    }
}
