//! Defaulting, as kube-apiserver's defaulters and admission plugins fill fields a client left
//! out. Only fields clients read back are filled; each function is idempotent, so it runs on
//! create and on update alike.

use crate::state::State;
use crate::values::At;
use infrasim_store::ReadAt;
use serde_json::{json, Map, Value};
use std::collections::HashSet;
use std::net::Ipv4Addr;

/// Applies the defaults of `kind` to `object`.
pub(crate) fn apply(state: &State, kind: &str, object: &mut Value) {
    match kind {
        "Service" => service(state, object),
        _ => apply_stateless(kind, object),
    }
}

/// The defaults that need nothing but the object (all but a Service's cluster IP).
pub(crate) fn apply_stateless(kind: &str, object: &mut Value) {
    match kind {
        "Namespace" => namespace(object),
        "ValidatingAdmissionPolicy" => validating_admission_policy(object),
        "APIService" => api_service(object),
        "ValidatingAdmissionPolicyBinding" => {
            if let Some(m) = object.pointer_mut("/spec/matchResources") {
                match_resources(m);
            }
        }
        "Pod" => pod(object),
        "Secret" => secret(object),
        "Deployment" => deployment(object),
        "ReplicaSet" | "StatefulSet" => {
            ensure(object, "spec").entry("replicas").or_insert(json!(1));
            if kind == "StatefulSet" {
                stateful_set(object);
            }
            template(object);
        }
        "Job" => job(object),
        "CronJob" => cron_job(object),
        "DaemonSet" => daemon_set(object),
        "HorizontalPodAutoscaler" => horizontal_pod_autoscaler(object),
        _ => {}
    }
}

/// A policy that fails closed unless told otherwise, as admissionregistration/v1 defaults it.
fn validating_admission_policy(object: &mut Value) {
    let spec = ensure(object, "spec");
    spec.entry("failurePolicy").or_insert(json!("Fail"));
    if let Some(m) = spec.get_mut("matchConstraints") {
        match_resources(m);
    }
}

/// An APIService's service port, which clients read back when they reach the aggregated API.
fn api_service(object: &mut Value) {
    // `SetDefaults_ServiceReference`: an aggregated API is served on 443.
    if let Some(service) = object
        .pointer_mut("/spec/service")
        .and_then(Value::as_object_mut)
    {
        service.entry("port").or_insert(json!(443));
    }
}

/// A new pod is Pending with a QoS class, which schedulers and clients read before it runs.
fn pod(object: &mut Value) {
    if let Some(spec) = object.get_mut("spec") {
        pod_spec(spec);
        default_toleration_seconds(spec);
    }
    let status = ensure(object, "status");
    status.entry("phase").or_insert(json!("Pending"));
    let qos = qos_class(object);
    ensure(object, "status")
        .entry("qosClass")
        .or_insert(json!(qos));
}

/// A Secret's type, and its write-only `stringData` folded into `data`.
fn secret(object: &mut Value) {
    if let Some(o) = object.as_object_mut() {
        o.entry("type").or_insert(json!("Opaque"));
        // stringData is write-only: it is folded into data, base64-encoded.
        if let Some(Value::Object(strings)) = o.remove("stringData") {
            use base64::Engine;
            let data = o.entry("data").or_insert_with(|| json!({}));
            if let Some(d) = data.as_object_mut() {
                for (k, v) in strings {
                    let text = v.as_str().unwrap_or_default().to_string();
                    d.insert(
                        k,
                        json!(base64::engine::general_purpose::STANDARD.encode(text)),
                    );
                }
            }
        }
    }
}

/// apps/v1's Deployment defaults, which the deployment controller's rollouts rely on.
fn deployment(object: &mut Value) {
    let spec = ensure(object, "spec");
    spec.entry("replicas").or_insert(json!(1));
    spec.entry("revisionHistoryLimit").or_insert(json!(10));
    spec.entry("progressDeadlineSeconds").or_insert(json!(600));
    let strategy = spec.entry("strategy").or_insert_with(|| json!({}));
    if let Some(st) = strategy.as_object_mut() {
        st.entry("type").or_insert(json!("RollingUpdate"));
        if st.get("type") == Some(&json!("RollingUpdate")) {
            let ru = st.entry("rollingUpdate").or_insert_with(|| json!({}));
            if let Some(ru) = ru.as_object_mut() {
                ru.entry("maxSurge").or_insert(json!("25%"));
                ru.entry("maxUnavailable").or_insert(json!("25%"));
            }
        }
    }
    template(object);
}

/// autoscaling/v2's defaults: one replica at least, 80% of the CPU requested as the target,
/// and, when a behavior is given, its unset rules filled from the controller's defaults
/// (scale up by 4 pods or 100% per 15 s, whichever is more, at once; scale down by up to
/// 100% per 15 s, the window left to the controller's five minutes).
fn horizontal_pod_autoscaler(object: &mut Value) {
    let v1 = object.get("apiVersion").and_then(Value::as_str) == Some("autoscaling/v1");
    let spec = ensure(object, "spec");
    spec.entry("minReplicas").or_insert(json!(1));
    if v1 {
        // autoscaling/v1 defaults no target: its controller reads none as 80% of the CPU,
        // which the stored v2 form then says (see `hpa_versions`).
        spec.entry("targetCPUUtilizationPercentage")
            .or_insert(json!(80));
        return;
    }
    let no_metrics = spec
        .get("metrics")
        .and_then(Value::as_array)
        .is_none_or(Vec::is_empty);
    if no_metrics {
        spec.insert(
            "metrics".into(),
            json!([{"type": "Resource", "resource": {"name": "cpu",
                "target": {"type": "Utilization", "averageUtilization": 80}}}]),
        );
    }
    let Some(behavior) = spec.get_mut("behavior").and_then(Value::as_object_mut) else {
        return;
    };
    let rules = |behavior: &mut Map<String, Value>, direction: &str, defaults: Value| {
        let rule = behavior.entry(direction).or_insert_with(|| json!({}));
        if let (Some(rule), Value::Object(defaults)) = (rule.as_object_mut(), defaults) {
            for (k, v) in defaults {
                rule.entry(k).or_insert(v);
            }
        }
    };
    rules(
        behavior,
        "scaleUp",
        json!({"stabilizationWindowSeconds": 0, "selectPolicy": "Max", "policies": [
            {"type": "Pods", "value": 4, "periodSeconds": 15},
            {"type": "Percent", "value": 100, "periodSeconds": 15},
        ]}),
    );
    rules(
        behavior,
        "scaleDown",
        json!({"selectPolicy": "Max", "policies": [
            {"type": "Percent", "value": 100, "periodSeconds": 15},
        ]}),
    );
}

/// What a StatefulSet has beyond a ReplicaSet's defaults: its ordering and update strategy.
fn stateful_set(object: &mut Value) {
    let spec = ensure(object, "spec");
    spec.entry("podManagementPolicy")
        .or_insert(json!("OrderedReady"));
    spec.entry("revisionHistoryLimit").or_insert(json!(10));
    spec.entry("updateStrategy").or_insert(json!({
        "type": "RollingUpdate", "rollingUpdate": {"partition": 0}
    }));
}

/// batch/v1's Job defaults, which decide how many pods the job controller runs.
fn job(object: &mut Value) {
    let spec = ensure(object, "spec");
    // Neither set: one pod to run once. Only parallelism set: a work queue.
    if !spec.contains_key("completions") && !spec.contains_key("parallelism") {
        spec.insert("completions".into(), json!(1));
    }
    spec.entry("parallelism").or_insert(json!(1));
    spec.entry("backoffLimit").or_insert(json!(6));
    spec.entry("completionMode").or_insert(json!("NonIndexed"));
    spec.entry("suspend").or_insert(json!(false));
    spec.entry("podReplacementPolicy")
        .or_insert(json!("TerminatingOrFailed"));
    template(object);
}

/// batch/v1's CronJob defaults, and its job template's pod spec.
fn cron_job(object: &mut Value) {
    let spec = ensure(object, "spec");
    spec.entry("concurrencyPolicy").or_insert(json!("Allow"));
    spec.entry("suspend").or_insert(json!(false));
    spec.entry("successfulJobsHistoryLimit").or_insert(json!(3));
    spec.entry("failedJobsHistoryLimit").or_insert(json!(1));
    if let Some(job_spec) = object.pointer_mut("/spec/jobTemplate/spec/template/spec") {
        pod_spec(job_spec);
    }
}

/// apps/v1's DaemonSet defaults: a rolling update one node at a time.
fn daemon_set(object: &mut Value) {
    let spec = ensure(object, "spec");
    spec.entry("revisionHistoryLimit").or_insert(json!(10));
    spec.entry("updateStrategy").or_insert(json!({
        "type": "RollingUpdate",
        "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}
    }));
    template(object);
}

/// admissionregistration/v1's `MatchResources` defaults: `Equivalent` matching, empty
/// selectors (everything), and rules over all scopes.
fn match_resources(m: &mut Value) {
    let Some(m) = m.as_object_mut() else { return };
    m.entry("matchPolicy").or_insert(json!("Equivalent"));
    m.entry("namespaceSelector").or_insert(json!({}));
    m.entry("objectSelector").or_insert(json!({}));
    for key in ["resourceRules", "excludeResourceRules"] {
        for rule in m
            .get_mut(key)
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
        {
            if let Some(rule) = rule.as_object_mut() {
                rule.entry("scope").or_insert(json!("*"));
            }
        }
    }
}

fn ensure<'a>(object: &'a mut Value, key: &str) -> &'a mut Map<String, Value> {
    if !object.is_object() {
        *object = json!({});
    }
    let entry = object
        .as_object_mut()
        .expect("made an object above")
        .entry(key)
        .or_insert_with(|| json!({}));
    if !entry.is_object() {
        *entry = json!({});
    }
    entry.as_object_mut().expect("made an object above")
}

fn namespace(object: &mut Value) {
    let name = object
        .at("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    // kube-apiserver labels every namespace with its own name.
    let meta = ensure(object, "metadata");
    let labels = meta.entry("labels").or_insert_with(|| json!({}));
    if let Some(l) = labels.as_object_mut() {
        l.insert("kubernetes.io/metadata.name".into(), json!(name));
    }
    let spec = ensure(object, "spec");
    spec.entry("finalizers").or_insert(json!(["kubernetes"]));
    let status = ensure(object, "status");
    status.entry("phase").or_insert(json!("Active"));
}

fn template(object: &mut Value) {
    if let Some(spec) = object.pointer_mut("/spec/template/spec") {
        pod_spec(spec);
    }
}

fn pod_spec(spec: &mut Value) {
    let Some(s) = spec.as_object_mut() else {
        return;
    };
    s.entry("restartPolicy").or_insert(json!("Always"));
    s.entry("dnsPolicy").or_insert(json!("ClusterFirst"));
    s.entry("schedulerName")
        .or_insert(json!("default-scheduler"));
    s.entry("terminationGracePeriodSeconds")
        .or_insert(json!(30));
    s.entry("securityContext").or_insert(json!({}));
    s.entry("enableServiceLinks").or_insert(json!(true));
    s.entry("serviceAccountName").or_insert(json!("default"));
    s.entry("preemptionPolicy")
        .or_insert(json!("PreemptLowerPriority"));
    s.entry("priority").or_insert(json!(0));
    for list in ["containers", "initContainers", "ephemeralContainers"] {
        if let Some(cs) = s.get_mut(list).and_then(Value::as_array_mut) {
            for c in cs.iter_mut().filter_map(Value::as_object_mut) {
                let image = c
                    .get("image")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string();
                let tag = image
                    .rsplit('/')
                    .next()
                    .and_then(|last| last.split_once(':'))
                    .map(|(_, t)| t);
                let policy = match tag {
                    None | Some("latest") => "Always",
                    Some(_) => "IfNotPresent",
                };
                c.entry("imagePullPolicy").or_insert(json!(policy));
                c.entry("terminationMessagePath")
                    .or_insert(json!("/dev/termination-log"));
                c.entry("terminationMessagePolicy").or_insert(json!("File"));
                if list != "ephemeralContainers" {
                    c.entry("resources").or_insert(json!({}));
                }
                if let Some(ports) = c.get_mut("ports").and_then(Value::as_array_mut) {
                    for p in ports.iter_mut().filter_map(Value::as_object_mut) {
                        p.entry("protocol").or_insert(json!("TCP"));
                    }
                }
            }
        }
    }
}

/// The DefaultTolerationSeconds admission plugin: a pod that does not say how long it
/// tolerates its node being not ready or unreachable tolerates each for 300 seconds, after
/// which the node lifecycle controller evicts it.
pub(crate) fn default_toleration_seconds(spec: &mut Value) {
    let Some(s) = spec.as_object_mut() else {
        return;
    };
    let tolerations = s.entry("tolerations").or_insert_with(|| json!([]));
    let Some(list) = tolerations.as_array_mut() else {
        return;
    };
    for key in [
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
    ] {
        let covered = list.iter().any(|t| {
            let effect = t.get("effect").and_then(Value::as_str).unwrap_or("");
            let k = t.get("key").and_then(Value::as_str).unwrap_or("");
            let exists = t.get("operator").and_then(Value::as_str) == Some("Exists");
            (effect.is_empty() || effect == "NoExecute") && (k == key || (k.is_empty() && exists))
        });
        if !covered {
            list.push(json!({"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}));
        }
    }
}

fn qos_class(pod: &Value) -> &'static str {
    let containers = pod
        .at("/spec/containers")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    let has = |c: &Value, k: &str| {
        c.at(&format!("/resources/{k}"))
            .and_then(Value::as_object)
            .is_some_and(|m| !m.is_empty())
    };
    if containers
        .iter()
        .all(|c| !has(c, "requests") && !has(c, "limits"))
    {
        return "BestEffort";
    }
    let guaranteed = containers.iter().all(|c| {
        let limits = c.at("/resources/limits");
        let requests = c.at("/resources/requests");
        has(c, "limits")
            && limits.and_then(|l| l.get("cpu")).is_some()
            && limits.and_then(|l| l.get("memory")).is_some()
            && requests.is_none_or(|r| r == limits.unwrap_or(&Value::Null))
    });
    if guaranteed {
        "Guaranteed"
    } else {
        "Burstable"
    }
}

/// The service CIDR kube-apiserver uses by default (10.96.0.0/12); `.1` is the
/// `kubernetes` Service's.
const SERVICE_BASE: u32 = u32::from_be_bytes([10, 96, 0, 0]);
const SERVICE_SIZE: u32 = 1 << 20;
/// The addresses at the bottom of the range kept for Services that name theirs (KEP-3070:
/// min(max(16, size / 16), 256)): kubeadm's DNS Service names 10.96.0.10, and an address
/// chosen for another Service must not take it first.
const SERVICE_STATIC: u32 = 256;

fn service(state: &State, object: &mut Value) {
    let spec = ensure(object, "spec");
    spec.entry("type").or_insert(json!("ClusterIP"));
    spec.entry("sessionAffinity").or_insert(json!("None"));
    spec.entry("internalTrafficPolicy")
        .or_insert(json!("Cluster"));
    spec.entry("ipFamilies").or_insert(json!(["IPv4"]));
    spec.entry("ipFamilyPolicy").or_insert(json!("SingleStack"));
    if let Some(ports) = spec.get_mut("ports").and_then(Value::as_array_mut) {
        for p in ports.iter_mut().filter_map(Value::as_object_mut) {
            p.entry("protocol").or_insert(json!("TCP"));
            if let Some(port) = p.get("port").cloned() {
                p.entry("targetPort").or_insert(port);
            }
        }
    }
    let ty = spec
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("ClusterIP")
        .to_string();
    let needs_ip = ty != "ExternalName"
        && spec
            .get("clusterIP")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty);
    if needs_ip {
        if let Some(ip) = allocate_service_ip(state) {
            spec.insert("clusterIP".into(), json!(ip.to_string()));
        }
    }
    if let Some(ip) = spec.get("clusterIP").cloned() {
        spec.entry("clusterIPs").or_insert(json!([ip]));
    }
    if ty == "NodePort" || ty == "LoadBalancer" {
        let me = (
            object
                .at("/metadata/namespace")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            object
                .at("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
        );
        allocate_node_ports(state, &me, ensure(object, "spec"));
    }
    ensure(object, "status")
        .entry("loadBalancer")
        .or_insert(json!({}));
}

/// The node-port range kube-apiserver allocates from by default (`--service-node-port-range`).
const NODE_PORTS: std::ops::RangeInclusive<i64> = 30000..=32767;

/// The ports at the bottom of the range kept for Services that name theirs, as
/// kube-apiserver's allocator keeps them (KEP-3668): min(max(16, size / 32), 128) ports.
/// Ports it chooses itself come from above them first, so a manifest that names 30000 is
/// not refused because a Service made earlier was given it.
const NODE_PORTS_STATIC: i64 = {
    let size = *NODE_PORTS.end() - *NODE_PORTS.start() + 1;
    let band = size / 32;
    if band < 16 {
        16
    } else if band > 128 {
        128
    } else {
        band
    }
};

/// Gives each port of a NodePort or LoadBalancer Service without a `nodePort` one, as
/// kube-apiserver's allocator does: the port this Service held before if it is free (an update
/// that leaves `nodePort` out keeps it), else the lowest free in the range (free: no other
/// Service holds it, nor another port of this one).
fn allocate_node_ports(state: &State, me: &(String, String), spec: &mut Map<String, Value>) {
    let Some(ports) = spec.get_mut("ports").and_then(Value::as_array_mut) else {
        return;
    };
    if ports.iter().all(|p| given(p).is_some()) {
        return;
    }
    let (mut used, mine) = node_ports_in_use(state, me);
    used.extend(ports.iter().filter_map(given));
    for p in ports.iter_mut().filter_map(Value::as_object_mut) {
        if p.get("nodePort")
            .and_then(Value::as_i64)
            .is_some_and(|n| n != 0)
        {
            continue;
        }
        let held = mine.iter().copied().find(|n| !used.contains(n));
        let dynamic = (*NODE_PORTS.start() + NODE_PORTS_STATIC)..=*NODE_PORTS.end();
        let reserved = *NODE_PORTS.start()..(*NODE_PORTS.start() + NODE_PORTS_STATIC);
        let free = held
            .or_else(|| dynamic.clone().find(|n| !used.contains(n)))
            .or_else(|| reserved.clone().find(|n| !used.contains(n)));
        if let Some(free) = free {
            used.insert(free);
            p.insert("nodePort".into(), json!(free));
        }
    }
}

/// A port's `nodePort`, when it names one (0, as some clients send, asks for one).
fn given(port: &Value) -> Option<i64> {
    port.get("nodePort")?.as_i64().filter(|n| *n != 0)
}

/// The node ports other Services hold, and those `me` holds now (in port order).
fn node_ports_in_use(state: &State, me: &(String, String)) -> (HashSet<i64>, Vec<i64>) {
    let Ok(snapshot) = state.group.snapshot("services", ReadAt::Latest) else {
        return (HashSet::new(), Vec::new());
    };
    let (mut used, mut mine) = (HashSet::new(), Vec::new());
    for s in snapshot.objects.values() {
        let Ok(v) = s.to_value() else { continue };
        let ns = v
            .at("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or("");
        let name = v.at("/metadata/name").and_then(Value::as_str).unwrap_or("");
        let ports = v.at("/spec/ports").and_then(Value::as_array);
        let held = ports
            .into_iter()
            .flatten()
            .filter_map(|p| p.get("nodePort")?.as_i64());
        if (ns, name) == (me.0.as_str(), me.1.as_str()) {
            mine.extend(held);
        } else {
            used.extend(held);
        }
    }
    (used, mine)
}

/// The lowest free address of the service range, reading the Services in the store.
fn allocate_service_ip(state: &State) -> Option<Ipv4Addr> {
    let snapshot = state.group.snapshot("services", ReadAt::Latest).ok()?;
    let used: HashSet<String> = snapshot
        .objects
        .values()
        .filter_map(|s| {
            s.to_value()
                .ok()?
                .at("/spec/clusterIP")
                .and_then(Value::as_str)
                .map(str::to_string)
        })
        .collect();
    (SERVICE_STATIC..SERVICE_SIZE - 1)
        .chain(10..SERVICE_STATIC)
        .map(|offset| Ipv4Addr::from(SERVICE_BASE + offset))
        .find(|ip| !used.contains(&ip.to_string()))
}

/// What kube-apiserver's allocators refuse in a Service `object` asks for: a node port
/// outside the range or held by another Service, a cluster IP another Service holds. Each
/// is a (field, message) cause of a 422, worded as kube-apiserver words them.
pub(crate) fn service_allocation_errors(state: &State, object: &Value) -> Vec<(String, String)> {
    let me = (
        object
            .at("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string(),
        object
            .at("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string(),
    );
    let mut causes = Vec::new();
    let ports = object.at("/spec/ports").and_then(Value::as_array);
    let wanted: Vec<(usize, i64)> = ports
        .into_iter()
        .flatten()
        .enumerate()
        .filter_map(|(i, p)| Some((i, given(p)?)))
        .collect();
    if !wanted.is_empty() {
        let (used, _) = node_ports_in_use(state, &me);
        for (i, port) in wanted {
            let why = if !NODE_PORTS.contains(&port) {
                format!(
                    "provided port is not in the valid range. The range of valid ports is {}-{}",
                    NODE_PORTS.start(),
                    NODE_PORTS.end()
                )
            } else if used.contains(&port) {
                "provided port is already allocated".to_string()
            } else {
                continue;
            };
            causes.push((
                format!("spec.ports[{i}].nodePort"),
                format!("Invalid value: {port}: {why}"),
            ));
        }
    }
    let ip = object.at("/spec/clusterIP").and_then(Value::as_str);
    if let Some(ip) = ip.filter(|ip| !ip.is_empty() && *ip != "None") {
        if cluster_ip_holder(state, ip).is_some_and(|holder| holder != me) {
            causes.push((
                "spec.clusterIPs".to_string(),
                format!(
                    "Invalid value: []string{{{ip:?}}}: failed to allocate IP {ip}: provided IP is already allocated"
                ),
            ));
        }
    }
    causes
}

/// The Service (namespace, name) holding cluster IP `ip`, if any.
fn cluster_ip_holder(state: &State, ip: &str) -> Option<(String, String)> {
    let snapshot = state.group.snapshot("services", ReadAt::Latest).ok()?;
    snapshot.objects.values().find_map(|s| {
        let v = s.to_value().ok()?;
        (v.at("/spec/clusterIP").and_then(Value::as_str) == Some(ip)).then(|| {
            let field = |p: &str| v.at(p).and_then(Value::as_str).unwrap_or("").to_string();
            (field("/metadata/namespace"), field("/metadata/name"))
        })
    })
}
