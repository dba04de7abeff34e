//! What kubeadm leaves in a cluster, written straight into the cluster's store: Nodes (Ready,
//! with the control-plane label and taint), their Leases, the static pods of each control-plane
//! node, kubeadm's ConfigMaps and RBAC, the `kubernetes` EndpointSlice, kube-proxy and CoreDNS.

use crate::components;
use infrasim_kube_api::values::At;
use infrasim_kube_api::SystemWriter;
use infrasim_store::ObjectKey;
use serde_json::{json, Value};

/// The shape of a simulated cluster.
#[derive(Debug, Clone)]
pub struct ClusterShape {
    pub name: String,
    pub control_planes: usize,
    pub workers: usize,
    pub kubernetes_version: String,
    /// How long each bootstrap phase takes (zero: the cluster is up at once).
    pub startup: std::time::Duration,
    /// Each phase takes `startup + rand[0,1) * jitter * startup`, as CAPIM's machines do.
    pub jitter: f64,
    /// How the cluster's kubelets start pods and renew leases.
    pub workloads: crate::WorkloadConfig,
    /// Certificate authorities and keys to use instead of generated ones.
    pub pki: crate::SuppliedPki,
    /// The name kubeadm records as `clusterName` (default: `name`); a cloud key such as
    /// `<cluster>.<namespace>` is not what a Cluster API user calls the cluster.
    pub cluster_name: Option<String>,
}

impl ClusterShape {
    /// The cluster's name as kubeadm records it.
    pub fn kubeadm_name(&self) -> &str {
        self.cluster_name.as_deref().unwrap_or(&self.name)
    }
}

impl Default for ClusterShape {
    fn default() -> Self {
        ClusterShape {
            name: String::new(),
            control_planes: 1,
            workers: 0,
            kubernetes_version: "v1.31.0".into(),
            startup: std::time::Duration::ZERO,
            jitter: 0.0,
            workloads: crate::WorkloadConfig::default(),
            pki: crate::SuppliedPki::default(),
            cluster_name: None,
        }
    }
}

/// Node names: `<cluster>-control-plane-<i>` and `<cluster>-worker-<i>`.
pub fn node_names(shape: &ClusterShape) -> Vec<(String, bool)> {
    let mut names: Vec<(String, bool)> = (0..shape.control_planes)
        .map(|i| (format!("{}-control-plane-{i}", shape.name), true))
        .collect();
    names.extend((0..shape.workers).map(|i| (format!("{}-worker-{i}", shape.name), false)));
    names
}

fn node_ip(cluster_index: u32, node_index: usize) -> String {
    format!(
        "10.{}.{}.{}",
        200 + (cluster_index / 256) % 50,
        cluster_index % 256,
        node_index + 10
    )
}

fn node(machine: &Machine, version: &str, ip: &str, now: &str) -> Value {
    let (name, control_plane, index) = (&machine.name, machine.control_plane, machine.index);
    let mut labels = json!({
        "kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/os": "linux", "beta.kubernetes.io/arch": "amd64",
    });
    let provider_id = machine
        .provider_id
        .clone()
        .unwrap_or_else(|| format!("in-memory://{name}"));
    let mut spec = json!({"providerID": provider_id, "podCIDR": format!("10.244.{index}.0/24"), "podCIDRs": [format!("10.244.{index}.0/24")]});
    if control_plane {
        labels["node-role.kubernetes.io/control-plane"] = json!("");
        labels["node.kubernetes.io/exclude-from-external-load-balancers"] = json!("");
        spec["taints"] =
            json!([{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}]);
    }
    let condition = |ty: &str, status: &str, reason: &str, message: &str| json!({"type": ty, "status": status, "lastHeartbeatTime": now, "lastTransitionTime": now, "reason": reason, "message": message});
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": labels,
                     "annotations": {"kubeadm.alpha.kubernetes.io/cri-socket": "unix:///var/run/containerd/containerd.sock",
                                     "node.alpha.kubernetes.io/ttl": "0"}},
        "spec": spec,
        "status": {
            "capacity": {"cpu": "2", "memory": "4029056Ki", "pods": "110", "ephemeral-storage": "41152812Ki"},
            "allocatable": {"cpu": "2", "memory": "3926656Ki", "pods": "110", "ephemeral-storage": "37926431477"},
            "conditions": [
                condition("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
                condition("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
                condition("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
                condition("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
            ],
            "addresses": [{"type": "InternalIP", "address": ip}, {"type": "Hostname", "address": name}],
            "nodeInfo": {
                "machineID": uuid::Uuid::new_v4().simple().to_string(),
                "systemUUID": uuid::Uuid::new_v4().to_string(),
                "bootID": uuid::Uuid::new_v4().to_string(),
                "kernelVersion": "6.1.0-infrasim", "osImage": "Ubuntu 22.04.4 LTS (infrasim)",
                "containerRuntimeVersion": "containerd://1.7.18",
                "kubeletVersion": version, "kubeProxyVersion": version,
                "operatingSystem": "linux", "architecture": "amd64",
            },
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
        }
    })
}

/// The one Node of a single-node cluster that runs its workloads on its control plane, as
/// kind's `kind-control-plane` does: a control-plane node without the NoSchedule taint, so
/// `kubectl create deployment` on the management plane gets Pods that run.
pub fn single_node(name: &str, version: &str, now: &str) -> Value {
    let mut machine = Machine::new(name, true);
    machine.provider_id = Some(format!("infrasim://{name}"));
    let mut node = node(&machine, version, "10.200.255.2", now);
    if let Some(spec) = node.get_mut("spec").and_then(Value::as_object_mut) {
        spec.remove("taints");
    }
    node
}

/// A pod the bootstrap writes as already running.
struct RunningPod<'a> {
    name: &'a str,
    node: &'a str,
    ip: &'a str,
    host_network: bool,
    labels: Value,
    image: &'a str,
    container: &'a str,
}

fn running_pod(p: RunningPod<'_>, now: &str) -> Value {
    let RunningPod {
        name,
        node,
        ip,
        host_network,
        labels,
        image,
        container,
    } = p;
    let ready = |ty: &str| json!({"type": ty, "status": "True", "lastProbeTime": null, "lastTransitionTime": now});
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "kube-system", "labels": labels},
        "spec": {
            "nodeName": node, "hostNetwork": host_network, "priorityClassName": "system-node-critical", "priority": 2000001000,
            "containers": [{"name": container, "image": image}],
            "tolerations": [{"operator": "Exists", "effect": "NoExecute"}],
        },
        "status": {
            "phase": "Running", "hostIP": ip, "podIP": ip, "podIPs": [{"ip": ip}], "startTime": now, "qosClass": "Burstable",
            "conditions": [ready("PodReadyToStartContainers"), ready("Initialized"), ready("Ready"), ready("ContainersReady"), ready("PodScheduled")],
            "containerStatuses": [{
                "name": container, "ready": true, "started": true, "restartCount": 0, "image": image,
                "imageID": format!("{image}@sha256:{}", uuid::Uuid::new_v4().simple()),
                "containerID": format!("containerd://{}", uuid::Uuid::new_v4().simple()),
                "state": {"running": {"startedAt": now}},
            }],
        }
    })
}

/// The ClusterConfiguration kubeadm records in `kubeadm-config`.
fn cluster_configuration(shape: &ClusterShape, endpoint: &str) -> String {
    format!(
        "apiServer: {{}}\napiVersion: kubeadm.k8s.io/v1beta3\ncertificatesDir: /etc/kubernetes/pki\nclusterName: {name}\ncontrolPlaneEndpoint: {endpoint}\ncontrollerManager: {{}}\ndns: {{}}\netcd:\n  local:\n    dataDir: /var/lib/etcd\nimageRepository: registry.k8s.io\nkind: ClusterConfiguration\nkubernetesVersion: {version}\nnetworking:\n  dnsDomain: cluster.local\n  podSubnet: 10.244.0.0/16\n  serviceSubnet: 10.96.0.0/12\nscheduler: {{}}\n",
        name = shape.kubeadm_name(),
        version = shape.kubernetes_version,
    )
}

/// The steps a control-plane machine goes through, each after its own startup delay.
pub const CONTROL_PLANE_PHASES: [&str; 5] = [
    "VM",
    "Node",
    "etcd",
    "kube-apiserver",
    "scheduler and controller-manager",
];

/// The steps a worker machine goes through (it joins once an API server serves).
pub const WORKER_PHASES: [&str; 2] = ["VM", "Node"];

/// The step of every machine after which its Node is registered.
pub const NODE_PHASE: usize = 1;

/// The step of a control-plane machine after which its etcd member has joined the cluster.
pub const ETCD_PHASE: usize = 2;

/// The step of a control-plane machine after which its API server serves; the first one opens
/// the cluster's endpoint.
pub const API_SERVER_PHASE: usize = 3;

/// What `kubeadm init` does last, once the first API server serves.
pub const ADDON_PHASES: [&str; 3] = ["kubeadm objects", "kube-proxy", "CoreDNS"];

/// The static pods of a control-plane node, in the order they come up.
pub const STATIC_PODS: [&str; 4] = [
    "etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
];

/// How long a provisioning step takes: `startup + rand[0,1)·jitter·startup`, as CAPIM's
/// InMemoryMachine `behaviour` states it.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Provisioning {
    pub startup: std::time::Duration,
    pub jitter: f64,
}

impl Provisioning {
    /// One draw of the step's duration.
    pub fn delay(&self) -> std::time::Duration {
        self.startup
            .mul_f64(1.0 + self.jitter.max(0.0) * rand::random::<f64>())
    }
}

/// How a machine's steps are timed: the VM, the Node, etcd and the API server each take their
/// own time (the scheduler and controller-manager follow the API server at once).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct MachineBehaviour {
    pub vm: Provisioning,
    pub node: Provisioning,
    pub etcd: Provisioning,
    pub api_server: Provisioning,
}

impl MachineBehaviour {
    /// Every step timed alike.
    pub fn uniform(startup: std::time::Duration, jitter: f64) -> Self {
        let p = Provisioning { startup, jitter };
        MachineBehaviour {
            vm: p,
            node: p,
            etcd: p,
            api_server: p,
        }
    }

    /// The timing of step `step` (see [`CONTROL_PLANE_PHASES`]).
    pub fn step(&self, step: usize) -> Provisioning {
        match step {
            0 => self.vm,
            1 => self.node,
            2 => self.etcd,
            3 => self.api_server,
            _ => Provisioning::default(),
        }
    }
}

/// A machine of a cluster: its node's name, role, index (which fixes its addresses) and the
/// timing of its steps.
#[derive(Debug, Clone, PartialEq)]
pub struct Machine {
    pub name: String,
    pub control_plane: bool,
    pub index: usize,
    pub behaviour: MachineBehaviour,
    /// The machine's own Kubernetes version (its kubelet and static pods), when it differs
    /// from the cluster's, as during a rolling upgrade.
    pub kubernetes_version: Option<String>,
    /// The Node's `spec.providerID` (`vsphere://<bios uuid>` for a VM of a simulated
    /// vCenter); `in-memory://<name>` when not given.
    pub provider_id: Option<String>,
}

impl Machine {
    /// Machine `name`, not yet numbered, on default timing, version and provider ID.
    pub fn new(name: &str, control_plane: bool) -> Self {
        Machine {
            name: name.to_string(),
            control_plane,
            index: 0,
            behaviour: MachineBehaviour::default(),
            kubernetes_version: None,
            provider_id: None,
        }
    }

    /// The Kubernetes version the machine runs.
    pub fn version<'a>(&'a self, shape: &'a ClusterShape) -> &'a str {
        self.kubernetes_version
            .as_deref()
            .unwrap_or(&shape.kubernetes_version)
    }

    /// The steps this machine goes through.
    pub fn phases(&self) -> &'static [&'static str] {
        if self.control_plane {
            &CONTROL_PLANE_PHASES
        } else {
            &WORKER_PHASES
        }
    }
}

/// A stable 32-hex-digit hash standing for the kubelet's hash of a static pod manifest.
fn manifest_hash(name: &str) -> String {
    use std::hash::{Hash, Hasher};
    let half = |salt: u8| {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (name, salt).hash(&mut h);
        h.finish()
    };
    format!("{:016x}{:016x}", half(0), half(1))
}

/// The annotation that marks a static pod's mirror pod.
const MIRROR_ANNOTATION: &str = "kubernetes.io/config.mirror";

/// Writes one step's objects, each as the component that writes it in a kubeadm cluster
/// (`writer` is the cluster's kube-controller-manager; the others are components of it). A
/// static pod's mirror is owned by its node, as the kubelet writes it (so `kubectl` and
/// clients can follow the pod to the node, and the pod goes with the node).
pub fn write_phase(writer: &SystemWriter, objects: Vec<(&'static str, Value)>) {
    for (resource, mut object) in objects {
        if resource == "pods" && is_mirror_pod(&object) {
            let node_name = object["spec"]["nodeName"]
                .as_str()
                .unwrap_or("")
                .to_string();
            let node = writer.group().get("nodes", &ObjectKey::new("", &node_name));
            if let Some(node) = node {
                object["metadata"]["ownerReferences"] = json!([{"apiVersion": "v1", "kind": "Node",
                    "name": node_name, "uid": &*node.meta.uid, "controller": true}]);
            }
        }
        let author = author_of(writer, resource, &object);
        ensure(&author, resource, object);
    }
}

fn is_mirror_pod(object: &Value) -> bool {
    let pointer = format!(
        "/metadata/annotations/{}",
        MIRROR_ANNOTATION.replace('/', "~1")
    );
    object.pointer(&pointer).is_some()
}

/// Who writes `object` in a kubeadm cluster: a node's kubelet its Node, Lease and mirror
/// pods; kube-apiserver the `kubernetes` endpoints; kubeadm the rest.
fn author_of(writer: &SystemWriter, resource: &str, object: &Value) -> SystemWriter {
    let node = match resource {
        "nodes" => object.at("/metadata/name"),
        "leases.coordination.k8s.io"
            if object.at("/metadata/namespace") == Some(&json!("kube-node-lease")) =>
        {
            object.at("/metadata/name")
        }
        "pods" => object.at("/spec/nodeName"),
        "endpointslices.discovery.k8s.io" | "endpoints" => return components::api_server(writer),
        _ => None,
    };
    match node.and_then(Value::as_str) {
        Some(node) => components::kubelet(writer, node),
        None => components::kubeadm(writer),
    }
}

/// Creates `object` unless it exists (a step written again after a restart leaves what it
/// wrote before as it is); a status the API drops on create (a mirror pod's) is reported
/// after, as the kubelet reports it.
fn ensure(writer: &SystemWriter, resource: &str, object: Value) {
    let status = object.get("status").cloned();
    let created = match writer.create_decoded(resource, object) {
        Ok(created) => created,
        Err(e) if e.code == 409 => return,
        Err(e) => {
            tracing::warn!(resource, error = %e.message, "writing a bootstrap object");
            return;
        }
    };
    let Some(status) = status else { return };
    if created.value.get("status") == Some(&status) {
        return;
    }
    let mut next = created.value.clone();
    next["status"] = status;
    let read = created.read();
    match writer.update_status(resource, next, read) {
        Ok(_) => {}
        // The node's kubelet, which reports a mirror pod's status, got there first (it
        // starts every Pending pod on its node): its report stands. At a thousand clusters
        // made at once this happened tens of times a run, each a warning about nothing.
        Err(e) if e.code == 409 => {
            tracing::debug!(resource, error = %e.message, "a bootstrap object's status was reported by its kubelet first");
        }
        Err(e) => {
            tracing::warn!(resource, error = %e.message, "reporting a bootstrap object's status");
        }
    }
}

/// The node's InternalIP.
pub fn machine_ip(cluster_index: u32, machine: &Machine) -> String {
    node_ip(cluster_index, machine.index)
}

/// What step `step` of `machine` adds to the cluster.
pub fn machine_phase(
    shape: &ClusterShape,
    cluster_index: u32,
    machine: &Machine,
    step: usize,
    now: &str,
) -> Vec<(&'static str, Value)> {
    let ip = machine_ip(cluster_index, machine);
    let name = &machine.name;
    let static_pod = |component: &str| {
        let image = format!(
            "registry.k8s.io/{component}:{}",
            if component == "etcd" {
                "3.5.15-0"
            } else {
                machine.version(shape)
            }
        );
        let pod_name = format!("{component}-{name}");
        let mut pod = running_pod(
            RunningPod {
                name: &pod_name,
                node: name,
                ip: &ip,
                host_network: true,
                labels: json!({"component": component, "tier": "control-plane"}),
                image: &image,
                container: component,
            },
            now,
        );
        // What the kubelet writes on the mirror pod of a static pod manifest.
        let hash = manifest_hash(&pod_name);
        pod["metadata"]["annotations"] = json!({
            MIRROR_ANNOTATION: hash, "kubernetes.io/config.hash": hash,
            "kubernetes.io/config.seen": now, "kubernetes.io/config.source": "file"});
        ("pods", pod)
    };
    match step {
        1 => vec![
            ("nodes", node(machine, machine.version(shape), &ip, now)),
            (
                "leases.coordination.k8s.io",
                json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                       "metadata": {"name": name, "namespace": "kube-node-lease"},
                       "spec": {"holderIdentity": name, "leaseDurationSeconds": 40, "renewTime": now.replace('Z', ".000000Z")}}),
            ),
        ],
        2 if machine.control_plane => vec![static_pod("etcd")],
        3 if machine.control_plane => vec![static_pod("kube-apiserver")],
        4 if machine.control_plane => vec![
            static_pod("kube-controller-manager"),
            static_pod("kube-scheduler"),
        ],
        _ => Vec::new(),
    }
}

/// The `default/kubernetes` EndpointSlice: one endpoint per serving API server.
pub fn kubernetes_endpoints(api_server_ips: &[String]) -> Value {
    json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": "kubernetes", "namespace": "default", "labels": {"kubernetes.io/service-name": "kubernetes"}},
        "addressType": "IPv4",
        "endpoints": api_server_ips.iter().map(|ip| json!({"addresses": [ip], "conditions": {"ready": true}})).collect::<Vec<_>>(),
        "ports": [{"name": "https", "port": 6443, "protocol": "TCP"}]})
}

/// What addon step `step` adds (see [`ADDON_PHASES`]).
pub fn addon_phase(
    shape: &ClusterShape,
    endpoint: &str,
    ca_pem: &str,
    api_server_ips: &[String],
    step: usize,
) -> Vec<(&'static str, Value)> {
    let mut all = addons(shape, endpoint, ca_pem, api_server_ips);
    all.retain(|(resource, object)| addon_step_of(resource, object) == step);
    all
}

fn addon_step_of(resource: &str, object: &Value) -> usize {
    let name = object
        .at("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    match resource {
        "daemonsets.apps" => 1,
        "configmaps" if name == "kube-proxy" => 1,
        "configmaps" if name == "coredns" => 2,
        "deployments.apps" | "services" => 2,
        _ => 0,
    }
}

fn addons(
    shape: &ClusterShape,
    endpoint: &str,
    ca_pem: &str,
    api_server_ips: &[String],
) -> Vec<(&'static str, Value)> {
    let version = &shape.kubernetes_version;
    let mut objects: Vec<(&'static str, Value)> = Vec::new();
    objects.extend([
        ("configmaps", json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "kubeadm-config", "namespace": "kube-system"},
            "data": {"ClusterConfiguration": cluster_configuration(shape, endpoint)}})),
        ("configmaps", json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "kubelet-config", "namespace": "kube-system"},
            "data": {"kubelet": "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\ncgroupDriver: systemd\nclusterDNS:\n- 10.96.0.10\nclusterDomain: cluster.local\n"}})),
        ("configmaps", json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "cluster-info", "namespace": "kube-public"},
            "data": {"kubeconfig": infrasim_kube_api::kubeconfig::cluster_info(&format!("https://{endpoint}"), ca_pem)}})),
        ("configmaps", json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "coredns", "namespace": "kube-system"},
            "data": {"Corefile": ".:53 {\n    errors\n    health\n    ready\n    kubernetes cluster.local in-addr.arpa ip6.arpa {\n       pods insecure\n       fallthrough in-addr.arpa ip6.arpa\n    }\n    forward . /etc/resolv.conf\n    cache 30\n    loop\n    reload\n    loadbalance\n}\n"}})),
        ("configmaps", json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "kube-proxy", "namespace": "kube-system", "labels": {"app": "kube-proxy"}},
            "data": {"config.conf": "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nmode: iptables\n"}})),
        ("clusterroles.rbac.authorization.k8s.io", json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "kubeadm:get-nodes"}, "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]}]})),
        ("clusterrolebindings.rbac.authorization.k8s.io", json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": "kubeadm:get-nodes"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "kubeadm:get-nodes"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:bootstrappers:kubeadm:default-node-token"}]})),
        // kube-proxy and CoreDNS as kubeadm writes them; the cluster's controllers create,
        // schedule and start their pods (see `workloads`).
        ("daemonsets.apps", json!({"apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"name": "kube-proxy", "namespace": "kube-system", "labels": {"k8s-app": "kube-proxy"}},
            "spec": {"selector": {"matchLabels": {"k8s-app": "kube-proxy"}},
                     "revisionHistoryLimit": 10,
                     "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}},
                     "template": {"metadata": {"labels": {"k8s-app": "kube-proxy"}},
                                  "spec": {"containers": [{"name": "kube-proxy", "image": format!("registry.k8s.io/kube-proxy:{version}"),
                                                           "command": ["/usr/local/bin/kube-proxy", "--config=/var/lib/kube-proxy/config.conf", "--hostname-override=$(NODE_NAME)"],
                                                           "imagePullPolicy": "IfNotPresent", "securityContext": {"privileged": true}}],
                                           "hostNetwork": true, "priorityClassName": "system-node-critical",
                                           "serviceAccountName": "kube-proxy", "nodeSelector": {"kubernetes.io/os": "linux"},
                                           "tolerations": [{"operator": "Exists"}],
                                           "restartPolicy": "Always", "dnsPolicy": "ClusterFirst", "schedulerName": "default-scheduler",
                                           "terminationGracePeriodSeconds": 30}}}})),
        ("deployments.apps", json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "coredns", "namespace": "kube-system", "labels": {"k8s-app": "kube-dns"}},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"k8s-app": "kube-dns"}},
                     "revisionHistoryLimit": 10, "progressDeadlineSeconds": 600,
                     "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 1}},
                     "template": {"metadata": {"labels": {"k8s-app": "kube-dns"}},
                                  "spec": {"containers": [{"name": "coredns", "image": "registry.k8s.io/coredns/coredns:v1.11.3",
                                                           "args": ["-conf", "/etc/coredns/Corefile"], "imagePullPolicy": "IfNotPresent",
                                                           "ports": [{"containerPort": 53, "name": "dns", "protocol": "UDP"},
                                                                     {"containerPort": 53, "name": "dns-tcp", "protocol": "TCP"},
                                                                     {"containerPort": 9153, "name": "metrics", "protocol": "TCP"}],
                                                           "resources": {"limits": {"memory": "170Mi"}, "requests": {"cpu": "100m", "memory": "70Mi"}}}],
                                           "priorityClassName": "system-cluster-critical", "serviceAccountName": "coredns",
                                           "dnsPolicy": "Default", "nodeSelector": {"kubernetes.io/os": "linux"},
                                           "tolerations": [{"key": "CriticalAddonsOnly", "operator": "Exists"},
                                                           {"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}],
                                           "restartPolicy": "Always", "schedulerName": "default-scheduler",
                                           "terminationGracePeriodSeconds": 30}}}})),
        ("services", json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "kube-dns", "namespace": "kube-system", "labels": {"k8s-app": "kube-dns", "kubernetes.io/name": "CoreDNS"}},
            "spec": {"clusterIP": "10.96.0.10", "selector": {"k8s-app": "kube-dns"},
                     "ports": [{"name": "dns", "port": 53, "protocol": "UDP", "targetPort": 53},
                               {"name": "dns-tcp", "port": 53, "protocol": "TCP", "targetPort": 53}]}})),
        ("endpointslices.discovery.k8s.io", kubernetes_endpoints(api_server_ips)),
    ]);
    objects
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn delays_stay_within_the_jitter() {
        let p = Provisioning {
            startup: Duration::from_secs(10),
            jitter: 0.5,
        };
        for _ in 0..1000 {
            let d = p.delay();
            assert!(
                d >= Duration::from_secs(10) && d < Duration::from_secs(15),
                "{d:?}"
            );
        }
        let fixed = Provisioning {
            startup: Duration::from_secs(3),
            jitter: 0.0,
        };
        assert_eq!(fixed.delay(), Duration::from_secs(3));
    }

    #[test]
    fn each_step_takes_its_own_time() {
        let b = MachineBehaviour {
            vm: Provisioning {
                startup: Duration::from_secs(1),
                jitter: 0.0,
            },
            node: Provisioning {
                startup: Duration::from_secs(2),
                jitter: 0.0,
            },
            etcd: Provisioning {
                startup: Duration::from_secs(3),
                jitter: 0.0,
            },
            api_server: Provisioning {
                startup: Duration::from_secs(4),
                jitter: 0.0,
            },
        };
        let steps: Vec<u64> = (0..CONTROL_PLANE_PHASES.len())
            .map(|i| b.step(i).delay().as_secs())
            .collect();
        // The scheduler and controller-manager come with the API server.
        assert_eq!(steps, vec![1, 2, 3, 4, 0]);
    }
}
