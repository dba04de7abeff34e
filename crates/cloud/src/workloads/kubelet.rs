//! The kubelets of a simulated cluster: a pod bound to one of its nodes is accepted at once
//! (Pending, containers `ContainerCreating`, a start time and the host IP), and after the
//! configured startup delay its containers "run": phase Running, a pod IP from the node's pod
//! CIDR, every condition True, container statuses as containerd reports them. Each node's Lease
//! in `kube-node-lease` is renewed on the kubelet's cadence. A Job's pod, meant to run to
//! completion, finishes (Succeeded, exit code 0) as long after it started as it took to start.

use super::events::Source;
use super::scheduler::set_condition;
use super::{condition, condition_true, pod_ready, with_ready, Cluster, Obj, WorkloadConfig};
use chrono::{DateTime, Utc};
use infrasim_kube_api::values::At;
use serde_json::{json, Value};
use std::collections::{BTreeSet, HashMap, HashSet};
use std::net::Ipv4Addr;

/// What a kubelet will do to a pod when its time comes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Action {
    Start,
    Finish,
}

/// (when, action, namespace, name, uid).
type Timer = (DateTime<Utc>, Action, String, String, String);

pub(super) struct Kubelet {
    config: WorkloadConfig,
    /// Pending actions, earliest first.
    timers: BTreeSet<Timer>,
    /// (action, uid) of the pending actions, so a pass does not schedule one twice.
    scheduled: HashSet<(Action, String)>,
    next_lease_renewal: Option<DateTime<Utc>>,
    /// When the kubelets next report their nodes' status although nothing changed.
    next_status_report: Option<DateTime<Utc>>,
}

/// How often a kubelet reports an unchanged node status (`nodeStatusReportFrequency`).
const STATUS_REPORT_EVERY: chrono::Duration = chrono::Duration::minutes(5);

impl Kubelet {
    pub fn new(config: WorkloadConfig) -> Self {
        Kubelet {
            config,
            timers: BTreeSet::new(),
            scheduled: HashSet::new(),
            next_lease_renewal: None,
            next_status_report: None,
        }
    }

    /// When the next timer is due.
    pub fn next_deadline(&self) -> Option<DateTime<Utc>> {
        [
            self.timers.first().map(|s| s.0),
            self.next_lease_renewal,
            self.next_status_report,
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Starts the pods whose time has come and renews leases when due. The writes bring
    /// their own events, so no extra pass is asked for.
    pub fn on_timers(&mut self, c: &Cluster) -> bool {
        let now = c.now();
        let mut ips = IpBook::default();
        while let Some(first) = self.timers.first().cloned() {
            if first.0 > now {
                break;
            }
            self.timers.remove(&first);
            let (_, action, namespace, name, uid) = first;
            self.scheduled.remove(&(action, uid.clone()));
            match action {
                Action::Start => start(c, &namespace, &name, &uid, &mut ips),
                Action::Finish => finish(c, &namespace, &name, &uid),
            }
        }
        if self.next_lease_renewal.is_some_and(|at| at <= now) {
            renew_leases(c);
            self.next_lease_renewal = Some(now + chrono_duration(self.config.lease_renewal));
        }
        if self.next_status_report.is_some_and(|at| at <= now) {
            report_node_status(c);
            self.next_status_report = Some(now + STATUS_REPORT_EVERY);
        }
        false
    }

    /// Accepts the pods newly bound to this cluster's nodes and schedules their start.
    pub fn sync_pods(&mut self, c: &Cluster) {
        let now = c.now();
        if self.next_lease_renewal.is_none() && !self.config.lease_renewal.is_zero() {
            self.next_lease_renewal = Some(now + chrono_duration(self.config.lease_renewal));
            self.next_status_report = Some(now + STATUS_REPORT_EVERY);
        }
        let mut ips = IpBook::default();
        let nodes = c.list("nodes");
        let nodes: HashMap<&str, &Obj> = nodes.iter().map(|n| (n.name(), n)).collect();
        for pod in c.list("pods").iter() {
            let node_name = pod.str("/spec/nodeName");
            let Some(node) = nodes.get(node_name) else {
                continue;
            };
            // A stopped kubelet starts and finishes nothing.
            if c.kubelet_stopped(node_name) {
                continue;
            }
            if pod.deleting() {
                continue;
            }
            if pod.str("/status/phase") == "Running" && runs_to_completion(pod) {
                let started = pod
                    .value
                    .at("/status/containerStatuses/0/state/running/startedAt")
                    .and_then(Value::as_str)
                    .and_then(|t| t.parse::<DateTime<Utc>>().ok())
                    .unwrap_or(now);
                self.schedule(c, pod, Action::Finish, started, &mut ips);
                continue;
            }
            if pod.str("/status/phase") == "Running" {
                start_ephemeral(c, pod);
                continue;
            }
            if pod.str("/status/phase") != "Pending" {
                continue;
            }
            let started_at = match pod
                .value
                .at("/status/startTime")
                .and_then(Value::as_str)
                .and_then(|t| t.parse::<DateTime<Utc>>().ok())
            {
                Some(t) => t,
                None => {
                    if !accept(c, pod, node) {
                        continue;
                    }
                    now
                }
            };
            self.schedule(c, pod, Action::Start, started_at, &mut ips);
        }
    }

    /// Does `action` to `pod` `pod_startup` after `since`: now if that time has passed,
    /// otherwise on a timer.
    fn schedule(
        &mut self,
        c: &Cluster,
        pod: &Obj,
        action: Action,
        since: DateTime<Utc>,
        ips: &mut IpBook,
    ) {
        let key = (action, pod.uid().to_string());
        if self.scheduled.contains(&key) {
            return;
        }
        let at = since + chrono_duration(self.config.pod_startup);
        if at <= c.now() {
            match action {
                Action::Start => start(c, pod.namespace(), pod.name(), pod.uid(), ips),
                Action::Finish => finish(c, pod.namespace(), pod.name(), pod.uid()),
            }
        } else {
            self.scheduled.insert(key);
            self.timers.insert((
                at,
                action,
                pod.namespace().to_string(),
                pod.name().to_string(),
                pod.uid().to_string(),
            ));
        }
    }
}

/// Whether a pod's containers exit on their own: a Job's pods (their restart policy is Never
/// or OnFailure) do; everything else runs until deleted.
fn runs_to_completion(pod: &Obj) -> bool {
    pod.str("/spec/restartPolicy") != "Always"
        && pod
            .value
            .at("/metadata/ownerReferences")
            .and_then(Value::as_array)
            .is_some_and(|refs| {
                refs.iter().any(|r| {
                    r.get("kind").and_then(Value::as_str) == Some("Job")
                        && r.get("controller").and_then(Value::as_bool) == Some(true)
                })
            })
}

/// The pod a timer was set for, if it is still that pod (same uid), not being deleted, and
/// still in `phase`.
fn timed_pod(c: &Cluster, namespace: &str, name: &str, uid: &str, phase: &str) -> Option<Obj> {
    let pod = c.get("pods", namespace, name)?;
    (pod.uid() == uid && !pod.deleting() && pod.str("/status/phase") == phase).then_some(pod)
}

/// The pod's containers exited 0: Succeeded, no longer Ready.
fn finish(c: &Cluster, namespace: &str, name: &str, uid: &str) {
    let Some(pod) = timed_pod(c, namespace, name, uid, "Running") else {
        return;
    };
    let now = infrasim_store::format_time(c.now());
    let mut next = Value::clone(&pod.value);
    next["status"]["phase"] = json!("Succeeded");
    if let Some(statuses) = next["status"]["containerStatuses"].as_array_mut() {
        for s in statuses.iter_mut() {
            let started = s
                .at("/state/running/startedAt")
                .cloned()
                .unwrap_or_else(|| json!(now));
            s["state"] = json!({"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": started, "finishedAt": now}});
            s["ready"] = json!(false);
            s["started"] = json!(false);
        }
    }
    let previous = pod.value.at("/status/conditions").cloned();
    let previous = previous.as_ref();
    for ty in ["Ready", "ContainersReady"] {
        set_condition(
            &mut next,
            condition(previous, ty, "False", "PodCompleted", "", &now, false),
        );
    }
    set_condition(
        &mut next,
        condition(
            previous,
            "PodReadyToStartContainers",
            "False",
            "",
            "",
            &now,
            false,
        ),
    );
    let node = pod.str("/spec/nodeName");
    c.kubelet_status(node, "pods", next, &pod);
}

fn chrono_duration(d: std::time::Duration) -> chrono::Duration {
    chrono::Duration::from_std(d).unwrap_or(chrono::Duration::MAX)
}

fn node_ip(node: &Obj) -> String {
    node.value
        .at("/status/addresses")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(|a| a.get("type").and_then(Value::as_str) == Some("InternalIP"))
        .and_then(|a| a.get("address"))
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string()
}

fn container_names(pod: &Value, list: &str) -> Vec<(String, String)> {
    pod.at(&format!("/spec/{list}"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|c| {
            (
                c.get("name")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
                c.get("image")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
            )
        })
        .collect()
}

/// A running container's status (ready; callers adjust), with the image ID and container
/// ID a container runtime would report, derived from the image and the pod.
fn running_status(name: &str, image: &str, pod_uid: &str, now: &str) -> Value {
    let full = full_image(image);
    let repo = full
        .rsplit_once(':')
        .map_or(full.as_str(), |(repo, _)| repo);
    json!({
        "name": name, "image": full,
        "imageID": format!("{repo}@sha256:{}", digest(image)),
        "containerID": format!("containerd://{}", digest(&format!("{pod_uid}/{name}"))),
        "ready": true, "restartCount": 0,
        "state": {"running": {"startedAt": now}},
    })
}

/// Ephemeral containers added to a running pod (`kubectl debug`) start at once: the kubelet
/// reports each running, never ready (probes do not apply to them).
fn start_ephemeral(c: &Cluster, pod: &Obj) {
    let wanted = container_names(&pod.value, "ephemeralContainers");
    let reported: Vec<&Value> = pod
        .value
        .at("/status/ephemeralContainerStatuses")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .collect();
    let known = |name: &str| reported.iter().find(|s| s["name"] == name).copied();
    if wanted.iter().all(|(name, _)| known(name).is_some()) {
        return;
    }
    let now = infrasim_store::format_time(c.now());
    let uid = pod.uid();
    let statuses: Vec<Value> = wanted
        .iter()
        .map(|(name, image)| {
            if let Some(status) = known(name) {
                return status.clone();
            }
            let mut status = running_status(name, image, uid, &now);
            status["ready"] = json!(false);
            status
        })
        .collect();
    let mut next = Value::clone(&pod.value);
    next["status"]["ephemeralContainerStatuses"] = json!(statuses);
    c.kubelet_status(pod.str("/spec/nodeName"), "pods", next, pod);
}

/// The kubelet has seen the pod: it records when and where, and its containers are created.
fn accept(c: &Cluster, pod: &Obj, node: &Obj) -> bool {
    let now = infrasim_store::format_time(c.now());
    let mut next = Value::clone(&pod.value);
    let containers = container_names(&pod.value, "containers");
    let names: Vec<&str> = containers.iter().map(|(n, _)| n.as_str()).collect();
    let unready = format!("containers with unready status: [{}]", names.join(" "));
    let host_ip = node_ip(node);
    let status = &mut next["status"];
    status["phase"] = json!("Pending");
    status["hostIP"] = json!(host_ip);
    status["hostIPs"] = json!([{"ip": host_ip}]);
    status["startTime"] = json!(now);
    status["containerStatuses"] = json!(containers
        .iter()
        .map(|(name, image)| json!({
            "name": name, "image": image, "imageID": "", "ready": false, "started": false,
            "restartCount": 0, "state": {"waiting": {"reason": "ContainerCreating"}},
        }))
        .collect::<Vec<_>>());
    let previous = pod.value.at("/status/conditions").cloned();
    let previous = previous.as_ref();
    for cond in [
        condition(
            previous,
            "PodReadyToStartContainers",
            "False",
            "",
            "",
            &now,
            false,
        ),
        condition(previous, "Initialized", "True", "", "", &now, false),
        condition(
            previous,
            "Ready",
            "False",
            "ContainersNotReady",
            &unready,
            &now,
            false,
        ),
        condition(
            previous,
            "ContainersReady",
            "False",
            "ContainersNotReady",
            &unready,
            &now,
            false,
        ),
        condition(previous, "PodScheduled", "True", "", "", &now, false),
    ] {
        set_condition(&mut next, cond);
    }
    c.kubelet_status(node.name(), "pods", next, pod)
}

/// The pod's containers are running: Running and Ready, with an IP.
fn start(c: &Cluster, namespace: &str, name: &str, uid: &str, ips: &mut IpBook) {
    let Some(pod) = timed_pod(c, namespace, name, uid, "Pending") else {
        return;
    };
    let Some(node) = c.get("nodes", "", pod.str("/spec/nodeName")) else {
        return;
    };
    let now = infrasim_store::format_time(c.now());
    let ip = if pod.value.at("/spec/hostNetwork") == Some(&json!(true)) {
        node_ip(&node)
    } else {
        ips.allocate(c, &node)
    };
    let mut next = Value::clone(&pod.value);
    let status = &mut next["status"];
    status["phase"] = json!("Running");
    status["podIP"] = json!(ip);
    status["podIPs"] = json!([{"ip": ip}]);
    let running = |(name, image): &(String, String)| {
        let mut status = running_status(name, image, uid, &now);
        status["started"] = json!(true);
        status
    };
    status["containerStatuses"] = json!(container_names(&pod.value, "containers")
        .iter()
        .map(running)
        .collect::<Vec<_>>());
    let init = container_names(&pod.value, "initContainers");
    if !init.is_empty() {
        status["initContainerStatuses"] = json!(init
            .iter()
            .map(|(name, image)| json!({
                "name": name, "image": full_image(image), "imageID": "", "ready": true, "restartCount": 0,
                "state": {"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": now, "finishedAt": now}},
            }))
            .collect::<Vec<_>>());
    }
    let previous = pod.value.at("/status/conditions").cloned();
    let previous = previous.as_ref();
    for ty in [
        "PodReadyToStartContainers",
        "Initialized",
        "Ready",
        "ContainersReady",
        "PodScheduled",
    ] {
        set_condition(
            &mut next,
            condition(previous, ty, "True", "", "", &now, false),
        );
    }
    if c.kubelet_status(node.name(), "pods", next, &pod) {
        let node_name = node.name().to_string();
        let source = Source {
            component: "kubelet",
            host: Some(&node_name),
        };
        for (container, image) in container_names(&pod.value, "initContainers")
            .iter()
            .chain(container_names(&pod.value, "containers").iter())
        {
            let pulled = format!("Container image \"{image}\" already present on machine");
            c.event(&pod, source, false, "Pulled", &pulled);
            c.event(
                &pod,
                source,
                false,
                "Created",
                &format!("Created container {container}"),
            );
            c.event(
                &pod,
                source,
                false,
                "Started",
                &format!("Started container {container}"),
            );
        }
    }
}

/// Pod IPs in use per node, read once per batch of starts (not once per pod: a thousand pods
/// starting together would otherwise read the pods a thousand times).
#[derive(Default)]
struct IpBook {
    used: Option<HashMap<String, HashSet<String>>>,
}

impl IpBook {
    /// The lowest free address of the node's pod CIDR (from .2; .1 is the bridge's).
    fn allocate(&mut self, c: &Cluster, node: &Obj) -> String {
        let used = self.used.get_or_insert_with(|| {
            let mut used: HashMap<String, HashSet<String>> = HashMap::new();
            for p in c.list("pods").iter() {
                let ip = p.str("/status/podIP");
                if !ip.is_empty() {
                    used.entry(p.str("/spec/nodeName").to_string())
                        .or_default()
                        .insert(ip.to_string());
                }
            }
            used
        });
        let on_node = used.entry(node.name().to_string()).or_default();
        let base: Ipv4Addr = node
            .str("/spec/podCIDR")
            .split('/')
            .next()
            .and_then(|a| a.parse().ok())
            .unwrap_or(Ipv4Addr::new(10, 244, 0, 0));
        let base = u32::from(base);
        let ip = (2..255u32)
            .map(|host| Ipv4Addr::from(base + host).to_string())
            .find(|ip| !on_node.contains(ip))
            .unwrap_or_else(|| Ipv4Addr::from(base + 254).to_string());
        on_node.insert(ip.clone());
        ip
    }
}

/// An image reference as containerd reports it (`nginx` → `docker.io/library/nginx:latest`).
fn full_image(image: &str) -> String {
    let (name, tagged) = match image.rsplit_once('/') {
        Some((_, last)) => (image.to_string(), last.contains(':') || last.contains('@')),
        None => (
            image.to_string(),
            image.contains(':') || image.contains('@'),
        ),
    };
    let first = name.split('/').next().unwrap_or("");
    let qualified = if !name.contains('/') {
        format!("docker.io/library/{name}")
    } else if !(first.contains('.') || first.contains(':') || first == "localhost") {
        format!("docker.io/{name}")
    } else {
        name
    };
    if tagged {
        qualified
    } else {
        format!("{qualified}:latest")
    }
}

/// A stable fake sha256 digest of `seed` (64 hex digits).
fn digest(seed: &str) -> String {
    let mut out = String::with_capacity(64);
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for round in 0..4u8 {
        for b in seed.bytes().chain([round]) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
        out.push_str(&format!("{h:016x}"));
    }
    out
}

/// Deletes the pods bound to nodes that no longer exist, as kube-controller-manager's pod
/// garbage collector does; their controllers then replace them elsewhere.
pub(super) fn collect_orphans(c: &Cluster) {
    let nodes: HashSet<String> = c
        .list("nodes")
        .iter()
        .map(|n| n.name().to_string())
        .collect();
    for pod in c.list("pods").iter() {
        let node = pod.str("/spec/nodeName");
        if !node.is_empty() && !nodes.contains(node) {
            c.delete("pods", pod.namespace(), pod.name());
        }
    }
}

/// Every kubelet reports its node's status again: the conditions' heartbeat times move on.
fn report_node_status(c: &Cluster) {
    let now = infrasim_store::format_time(c.now());
    for node in c.list("nodes").iter() {
        if c.kubelet_stopped(node.name()) {
            continue;
        }
        let mut next = Value::clone(&node.value);
        let Some(conditions) = next
            .pointer_mut("/status/conditions")
            .and_then(Value::as_array_mut)
        else {
            continue;
        };
        for condition in conditions.iter_mut() {
            condition["lastHeartbeatTime"] = json!(now);
        }
        c.kubelet_status(node.name(), "nodes", next, node);
    }
}

const LEASES: &str = "leases.coordination.k8s.io";

/// Renews every node's Lease, as each kubelet does on its cadence. Runs every ten seconds in
/// every cluster, idle ones included, so it decodes only the node leases it rewrites: node
/// names come from the store's keys, not from decoded Nodes.
fn renew_leases(c: &Cluster) {
    let nodes = c.names("nodes", "");
    let now = c.now().format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string();
    for name in nodes {
        if !c.kubelet_stopped(&name) {
            renew_lease(c, &name, &now);
        }
    }
}

/// A kubelet back after it was stopped: it posts its node's status (Ready) and renews its
/// Lease at once, as a restarted kubelet does.
pub(super) fn resume(c: &Cluster, node: &Obj) {
    let now = infrasim_store::format_time(c.now());
    let mut next = Value::clone(&node.value);
    let previous = node.value.at("/status/conditions");
    let mut conditions = healthy_conditions(previous, &now);
    let ours = |c: &&Value| {
        let ty = c.get("type").and_then(Value::as_str);
        KUBELET_CONDITIONS.iter().any(|k| Some(k.0) == ty)
    };
    conditions.extend(
        previous
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|c| !ours(c))
            .cloned(),
    );
    next["status"]["conditions"] = json!(conditions);
    c.kubelet_status(node.name(), "nodes", next, node);
    renew_lease(
        c,
        node.name(),
        &c.now().format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string(),
    );
    ready_again(c, node.name(), &now);
}

/// The pods of a resumed kubelet's node that the node lifecycle controller marked not
/// Ready while it was away, and whose containers are ready: Ready again, as the kubelet's
/// status sync writes them.
fn ready_again(c: &Cluster, node: &str, now: &str) {
    for pod in c.list("pods").iter() {
        if pod.str("/spec/nodeName") != node
            || pod.deleting()
            || pod_ready(pod)
            || !condition_true(&pod.value, "ContainersReady")
        {
            continue;
        }
        c.kubelet_status(node, "pods", with_ready(pod, true, now), pod);
    }
}

/// The conditions a kubelet posts, with its reasons when all is well.
pub(super) const KUBELET_CONDITIONS: [(&str, &str, &str, &str); 4] = [
    (
        "MemoryPressure",
        "False",
        "KubeletHasSufficientMemory",
        "kubelet has sufficient memory available",
    ),
    (
        "DiskPressure",
        "False",
        "KubeletHasNoDiskPressure",
        "kubelet has no disk pressure",
    ),
    (
        "PIDPressure",
        "False",
        "KubeletHasSufficientPID",
        "kubelet has sufficient PID available",
    ),
    (
        "Ready",
        "True",
        "KubeletReady",
        "kubelet is posting ready status",
    ),
];

/// The kubelet's conditions when all is well, each keeping its transition time while its
/// status holds.
fn healthy_conditions(previous: Option<&Value>, now: &str) -> Vec<Value> {
    KUBELET_CONDITIONS
        .iter()
        .map(|(ty, status, reason, message)| {
            let mut c = condition(previous, ty, status, reason, message, now, false);
            c["lastHeartbeatTime"] = json!(now);
            c
        })
        .collect()
}

fn renew_lease(c: &Cluster, name: &str, now: &str) {
    // Every node of every cluster, every ten seconds: decoded once, not again to compare.
    let Some(stored) = c.stored(LEASES, "kube-node-lease", name) else {
        return;
    };
    let Ok(lease) = stored.to_value() else {
        return;
    };
    let mut next = lease.clone();
    next["spec"]["renewTime"] = json!(now);
    let read = infrasim_store::Read {
        object: &stored,
        value: &lease,
    };
    c.update_read(LEASES, next, read);
}
