//! A cluster's tree, as `clusterctl describe cluster` and Cluster API's visualizer draw it:
//! the Cluster at the root, each object under the owner its controller reference names
//! (control plane → machines, MachineDeployment → MachineSet → machines, a machine → its
//! infrastructure machine and bootstrap config), each machine's Node, and an etcd member
//! under each control-plane machine; every object with its conditions, and the plane's
//! events about any of them.
//!
//! Objects are found as Cluster API finds them: by the `cluster.x-k8s.io/cluster-name`
//! label, which its controllers set on what a cluster owns, and by the Cluster's own
//! references (its infrastructure cluster and control plane need not carry the label).

use k8s_openapi::api::core::v1::Event;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams};
use serde::Serialize;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap, HashSet};

/// The label Cluster API puts on what belongs to a cluster.
pub const CLUSTER_NAME_LABEL: &str = "cluster.x-k8s.io/cluster-name";
const CONTROL_PLANE_LABEL: &str = "cluster.x-k8s.io/control-plane";

/// The kinds a tree is made of: group, version, kind, plural. A kind the plane does not
/// serve (no CAPV, no MachinePools) is skipped.
const KINDS: &[(&str, &str, &str, &str)] = &[
    (
        "cluster.x-k8s.io",
        "v1beta2",
        "MachineDeployment",
        "machinedeployments",
    ),
    ("cluster.x-k8s.io", "v1beta2", "MachineSet", "machinesets"),
    ("cluster.x-k8s.io", "v1beta2", "Machine", "machines"),
    ("cluster.x-k8s.io", "v1beta2", "MachinePool", "machinepools"),
    (
        "cluster.x-k8s.io",
        "v1beta2",
        "MachineHealthCheck",
        "machinehealthchecks",
    ),
    (
        "controlplane.cluster.x-k8s.io",
        "v1beta2",
        "KubeadmControlPlane",
        "kubeadmcontrolplanes",
    ),
    (
        "bootstrap.cluster.x-k8s.io",
        "v1beta2",
        "KubeadmConfig",
        "kubeadmconfigs",
    ),
    (
        "infrastructure.cluster.x-k8s.io",
        "v1alpha1",
        "InMemoryCluster",
        "inmemoryclusters",
    ),
    (
        "infrastructure.cluster.x-k8s.io",
        "v1alpha1",
        "InMemoryMachine",
        "inmemorymachines",
    ),
    (
        "infrastructure.cluster.x-k8s.io",
        "v1beta2",
        "DevCluster",
        "devclusters",
    ),
    (
        "infrastructure.cluster.x-k8s.io",
        "v1beta2",
        "DevMachine",
        "devmachines",
    ),
    (
        "infrastructure.cluster.x-k8s.io",
        "v1beta2",
        "VSphereCluster",
        "vsphereclusters",
    ),
    (
        "infrastructure.cluster.x-k8s.io",
        "v1beta2",
        "VSphereMachine",
        "vspheremachines",
    ),
    (
        "infrastructure.cluster.x-k8s.io",
        "v1beta2",
        "VSphereVM",
        "vspherevms",
    ),
];

/// One object of the tree.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Node {
    pub kind: String,
    pub name: String,
    /// The phase, where the kind has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    pub conditions: Vec<Condition>,
    /// What the object is, when it is not a plane object (a workload cluster's Node).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    pub children: Vec<Node>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Condition {
    #[serde(rename = "type")]
    pub type_: String,
    pub status: String,
    pub reason: String,
    pub message: String,
}

/// An event about one of the tree's objects.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EventRow {
    pub last_seen: String,
    #[serde(rename = "type")]
    pub type_: String,
    pub reason: String,
    pub object: String,
    pub message: String,
    pub count: i32,
}

/// The tree of a cluster and its events.
#[derive(Debug, Serialize)]
pub struct Tree {
    pub root: Node,
    pub events: Vec<EventRow>,
}

fn conditions(object: &Value) -> Vec<Condition> {
    let text = |c: &Value, f: &str| c[f].as_str().unwrap_or_default().to_string();
    object["status"]["conditions"]
        .as_array()
        .map(|all| {
            all.iter()
                .map(|c| Condition {
                    type_: text(c, "type"),
                    status: text(c, "status"),
                    reason: text(c, "reason"),
                    message: text(c, "message"),
                })
                .collect()
        })
        .unwrap_or_default()
}

/// `object.data` is the object but its type and metadata: `status` is read there.
fn node(object: &DynamicObject) -> Node {
    Node {
        kind: object
            .types
            .as_ref()
            .map(|t| t.kind.clone())
            .unwrap_or_default(),
        name: object.metadata.name.clone().unwrap_or_default(),
        phase: object.data["status"]["phase"].as_str().map(String::from),
        conditions: conditions(&object.data),
        note: None,
        children: Vec::new(),
    }
}

/// The leaves a machine has outside the plane: its Node in the workload cluster, and, for a
/// control-plane machine, its etcd member, with the etcd conditions of the machine and of
/// the objects under it (KubeadmControlPlane's `EtcdMemberHealthy`, an infrastructure
/// machine's `EtcdProvisioned`).
fn machine_leaves(machine: &DynamicObject, built: &Node) -> Vec<Node> {
    let mut leaves = Vec::new();
    if let Some(name) = machine.data["status"]["nodeRef"]["name"].as_str() {
        leaves.push(Node {
            kind: "Node".into(),
            name: name.into(),
            phase: None,
            conditions: Vec::new(),
            note: Some("in the workload cluster".into()),
            children: Vec::new(),
        });
    }
    let labels = machine.metadata.labels.as_ref();
    if labels.is_some_and(|l| l.contains_key(CONTROL_PLANE_LABEL)) {
        let under = built.children.iter().flat_map(|n| &n.conditions);
        let etcd = built
            .conditions
            .iter()
            .chain(under)
            .filter(|c| c.type_.starts_with("Etcd"))
            .cloned()
            .collect();
        leaves.push(Node {
            kind: "EtcdMember".into(),
            name: machine.metadata.name.clone().unwrap_or_default(),
            phase: None,
            conditions: etcd,
            note: Some("the etcd member on this machine".into()),
            children: Vec::new(),
        });
    }
    leaves
}

/// Arranges `objects` under `cluster` by their controller (or first) owner reference; an
/// object whose owner is not among them hangs from the root.
pub fn arrange(cluster: &DynamicObject, objects: &[DynamicObject]) -> Node {
    let root_uid = cluster.metadata.uid.clone().unwrap_or_default();
    let uids: HashSet<String> = objects
        .iter()
        .filter_map(|o| o.metadata.uid.clone())
        .chain([root_uid.clone()])
        .collect();
    let mut children: HashMap<String, Vec<&DynamicObject>> = HashMap::new();
    for object in objects {
        let owners = object.metadata.owner_references.as_deref().unwrap_or(&[]);
        let owner = owners
            .iter()
            .find(|o| o.controller == Some(true) && uids.contains(&o.uid))
            .or_else(|| owners.iter().find(|o| uids.contains(&o.uid)))
            .map(|o| o.uid.clone())
            .unwrap_or_else(|| root_uid.clone());
        children.entry(owner).or_default().push(object);
    }
    build(cluster, &children, 0)
}

fn build(
    object: &DynamicObject,
    children: &HashMap<String, Vec<&DynamicObject>>,
    depth: usize,
) -> Node {
    let mut node = node(object);
    let uid = object.metadata.uid.clone().unwrap_or_default();
    // Owner references cannot loop in a sane plane; the depth bounds a corrupted one.
    if depth < 16 {
        let mut under: Vec<&&DynamicObject> = children
            .get(&uid)
            .map(|c| c.iter().collect())
            .unwrap_or_default();
        under.sort_by_key(|o| (kind_order(o), o.metadata.name.clone()));
        node.children = under
            .into_iter()
            .map(|o| build(o, children, depth + 1))
            .collect();
    }
    if node.kind == "Machine" {
        let leaves = machine_leaves(object, &node);
        node.children.extend(leaves);
    }
    node
}

/// Infrastructure first, then the control plane, then workers: the order `clusterctl
/// describe` prints them in.
fn kind_order(object: &DynamicObject) -> usize {
    let kind = object.types.as_ref().map(|t| t.kind.as_str()).unwrap_or("");
    match kind {
        k if k.ends_with("Cluster") => 0,
        "KubeadmControlPlane" => 1,
        "MachineDeployment" | "MachinePool" => 2,
        "MachineSet" => 3,
        "Machine" => 4,
        _ => 5,
    }
}

fn api(
    client: &kube::Client,
    ns: &str,
    &(group, version, kind, plural): &(&str, &str, &str, &str),
) -> Api<DynamicObject> {
    let resource =
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural);
    Api::namespaced_with(client.clone(), ns, &resource)
}

/// A kind the plane does not serve answers 404: that kind is simply absent.
fn absent(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(status) if status.code == 404)
}

/// The tree of cluster `ns/name`, or `None` when there is no such cluster.
pub async fn tree(
    client: &kube::Client,
    ns: &str,
    name: &str,
) -> Result<Option<Tree>, kube::Error> {
    let cluster_kind = ("cluster.x-k8s.io", "v1beta2", "Cluster", "clusters");
    let started = std::time::Instant::now();
    let Some(cluster) = api(client, ns, &cluster_kind).get_opt(name).await? else {
        return Ok(None);
    };
    let mut objects: BTreeMap<String, DynamicObject> = BTreeMap::new();
    let selector = ListParams::default().labels(&format!("{CLUSTER_NAME_LABEL}={name}"));
    for kind in KINDS {
        match api(client, ns, kind).list(&selector).await {
            Ok(list) => {
                for mut object in list.items {
                    object.types.get_or_insert_with(|| kube::api::TypeMeta {
                        api_version: format!("{}/{}", kind.0, kind.1),
                        kind: kind.2.into(),
                    });
                    objects.insert(object.metadata.uid.clone().unwrap_or_default(), object);
                }
            }
            Err(e) if absent(&e) => {}
            Err(e) => return Err(e),
        }
    }
    for reference in ["infrastructureRef", "controlPlaneRef"] {
        if let Some(object) = referenced(client, ns, &cluster.data["spec"][reference]).await? {
            objects.insert(object.metadata.uid.clone().unwrap_or_default(), object);
        }
    }
    let objects: Vec<DynamicObject> = objects.into_values().collect();
    let listed = started.elapsed();
    let events = events(client, ns, &cluster, &objects).await?;
    // Where a slow tree spends its time, for whoever measures one (`INFRASIM_LOG`).
    tracing::debug!(
        cluster = name,
        objects = objects.len(),
        listed_ms = listed.as_millis(),
        events_ms = (started.elapsed() - listed).as_millis(),
        "tree"
    );
    Ok(Some(Tree {
        root: arrange(&cluster, &objects),
        events,
    }))
}

/// The object a v1beta2 reference (`apiGroup`, `kind`, `name`) names, when its kind is one
/// of the tree's.
async fn referenced(
    client: &kube::Client,
    ns: &str,
    reference: &Value,
) -> Result<Option<DynamicObject>, kube::Error> {
    let (Some(group), Some(kind), Some(name)) = (
        reference["apiGroup"].as_str(),
        reference["kind"].as_str(),
        reference["name"].as_str(),
    ) else {
        return Ok(None);
    };
    let Some(known) = KINDS.iter().find(|k| k.0 == group && k.2 == kind) else {
        return Ok(None);
    };
    match api(client, ns, known).get_opt(name).await {
        Ok(mut found) => {
            if let Some(object) = found.as_mut() {
                object.types.get_or_insert_with(|| kube::api::TypeMeta {
                    api_version: format!("{}/{}", known.0, known.1),
                    kind: known.2.into(),
                });
            }
            Ok(found)
        }
        Err(e) if absent(&e) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Above this many objects a tree's events are read from one listing of the namespace;
/// below it, one query per object (`involvedObject.uid=`), which at thousands of clusters in
/// one namespace reads a few events instead of all of them.
const EVENT_QUERIES: usize = 64;

/// The newest events (at most 50) about the cluster or any of `objects`.
async fn events(
    client: &kube::Client,
    ns: &str,
    cluster: &DynamicObject,
    objects: &[DynamicObject],
) -> Result<Vec<EventRow>, kube::Error> {
    use futures::{StreamExt, TryStreamExt};
    let uids: HashSet<&str> = objects
        .iter()
        .chain([cluster])
        .filter_map(|o| o.metadata.uid.as_deref())
        .collect();
    let api = Api::<Event>::namespaced(client.clone(), ns);
    let found: Vec<Event> = if uids.len() <= EVENT_QUERIES {
        // Owned parameters: the queries' futures borrow nothing (a stream of futures that
        // borrow from an iterator is not `Send` for every lifetime, as hyper's service needs).
        let selectors: Vec<ListParams> = uids
            .iter()
            .map(|uid| ListParams::default().fields(&format!("involvedObject.uid={uid}")))
            .collect();
        let queries = selectors.into_iter().map(|params| {
            let api = api.clone();
            async move { api.list(&params).await.map(|l| l.items) }
        });
        let lists: Vec<Vec<Event>> = futures::stream::iter(queries)
            .buffer_unordered(8)
            .try_collect()
            .await?;
        lists.into_iter().flatten().collect()
    } else {
        api.list(&ListParams::default()).await?.items
    };
    let mut rows: Vec<EventRow> = found
        .into_iter()
        .filter(|e| {
            e.involved_object
                .uid
                .as_deref()
                .is_some_and(|u| uids.contains(u))
        })
        .map(event_row)
        .collect();
    rows.sort_by(|a, b| b.last_seen.cmp(&a.last_seen));
    rows.truncate(50);
    Ok(rows)
}

fn event_row(e: Event) -> EventRow {
    let seen = e
        .last_timestamp
        .map(|t| t.0)
        .or(e.event_time.map(|t| t.0))
        .or(e.metadata.creation_timestamp.map(|t| t.0));
    EventRow {
        last_seen: seen.map(|t| t.to_string()).unwrap_or_default(),
        type_: e.type_.unwrap_or_default(),
        reason: e.reason.unwrap_or_default(),
        object: format!(
            "{}/{}",
            e.involved_object.kind.unwrap_or_default(),
            e.involved_object.name.unwrap_or_default()
        ),
        message: e.message.unwrap_or_default(),
        count: e.count.unwrap_or(1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object(
        kind: &str,
        name: &str,
        uid: &str,
        owner: Option<&str>,
        extra: Value,
    ) -> DynamicObject {
        let mut body = json!({
            "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": kind,
            "metadata": {"name": name, "namespace": "ns", "uid": uid},
        });
        if let Some(owner) = owner {
            body["metadata"]["ownerReferences"] = json!([{
                "apiVersion": "v1", "kind": "X", "name": "x", "uid": owner, "controller": true,
            }]);
        }
        if let (Some(target), Some(fields)) = (body.as_object_mut(), extra.as_object()) {
            for (k, v) in fields {
                target.insert(k.clone(), v.clone());
            }
        }
        serde_json::from_value(body).expect("an object")
    }

    #[test]
    fn objects_hang_under_their_owners_with_nodes_and_etcd_members_under_machines() {
        let cluster = object("Cluster", "c", "u0", None, json!({}));
        let mut cp_machine = object(
            "Machine",
            "c-cp-1",
            "u3",
            Some("u2"),
            json!({"status": {"nodeRef": {"name": "c-cp-1"}, "conditions": [
                {"type": "EtcdMemberHealthy", "status": "True"},
                {"type": "Ready", "status": "True"},
            ]}}),
        );
        cp_machine.metadata.labels =
            Some([(CONTROL_PLANE_LABEL.to_string(), String::new())].into());
        let objects = vec![
            object("MachineDeployment", "c-md", "u4", Some("u0"), json!({})),
            object("KubeadmControlPlane", "c-cp", "u2", Some("u0"), json!({})),
            object("InMemoryCluster", "c", "u1", Some("u0"), json!({})),
            cp_machine,
            object(
                "InMemoryMachine",
                "c-cp-1",
                "u5",
                Some("u3"),
                json!({"status": {"conditions": [{"type": "EtcdProvisioned", "status": "True"}]}}),
            ),
            object(
                "Machine",
                "orphan",
                "u6",
                Some("elsewhere"),
                json!({"status": {"phase": "Pending"}}),
            ),
        ];
        let root = arrange(&cluster, &objects);
        let kinds: Vec<&str> = root.children.iter().map(|n| n.kind.as_str()).collect();
        assert_eq!(
            kinds,
            [
                "InMemoryCluster",
                "KubeadmControlPlane",
                "MachineDeployment",
                "Machine"
            ]
        );
        assert_eq!(root.children[3].phase.as_deref(), Some("Pending"));
        let machine = &root.children[1].children[0];
        let below: Vec<&str> = machine.children.iter().map(|n| n.kind.as_str()).collect();
        assert_eq!(below, ["InMemoryMachine", "Node", "EtcdMember"]);
        assert_eq!(machine.conditions.len(), 2);
        let etcd: Vec<&str> = machine.children[2]
            .conditions
            .iter()
            .map(|c| c.type_.as_str())
            .collect();
        assert_eq!(
            etcd,
            ["EtcdMemberHealthy", "EtcdProvisioned"],
            "only the etcd conditions"
        );
    }
}
