//! The endpoints and EndpointSlice controllers: every Service with a selector lists the pods it
//! selects (ready ones as ready, the rest as not ready), in an `Endpoints` object of the
//! Service's name and in an EndpointSlice labelled with it, so `kubectl describe service`,
//! `kubectl get endpointslices` and service-health checks see what they would in a cluster.

use super::{pod_ready, random_suffix, string_map, Cluster, Obj};
use infrasim_kube_api::values::At;
use serde_json::{json, Value};

const SLICES: &str = "endpointslices.discovery.k8s.io";
const MANAGED_BY: &str = "endpointslice.kubernetes.io/managed-by";
const CONTROLLER: &str = "endpointslice-controller.k8s.io";
const ENDPOINTS_MANAGED_BY: &str = "endpoints.kubernetes.io/managed-by";
const ENDPOINTS_CONTROLLER: &str = "endpoint-controller";

/// A Service port resolved against a pod: `targetPort` by number, or by the name of one of the
/// pod's container ports.
fn target_port(service_port: &Value, pod: &Obj) -> i64 {
    let port = service_port
        .get("port")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    match service_port.get("targetPort") {
        Some(Value::Number(n)) => n.as_i64().unwrap_or(port),
        Some(Value::String(name)) => pod
            .value
            .at("/spec/containers")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .flat_map(|c| {
                c.get("ports")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
            })
            .find(|p| p.get("name").and_then(Value::as_str) == Some(name))
            .and_then(|p| p.get("containerPort"))
            .and_then(Value::as_i64)
            .unwrap_or(port),
        _ => port,
    }
}

fn ports(service: &Obj, pod: Option<&Obj>) -> Vec<Value> {
    service
        .value
        .at("/spec/ports")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|p| {
            let mut port = json!({
                "port": pod.map_or_else(|| p.get("port").and_then(Value::as_i64).unwrap_or(0), |pod| target_port(p, pod)),
                "protocol": p.get("protocol").and_then(Value::as_str).unwrap_or("TCP"),
            });
            if let Some(name) = p.get("name").and_then(Value::as_str) {
                port["name"] = json!(name);
            }
            port
        })
        .collect()
}

fn target_ref(pod: &Obj) -> Value {
    json!({"kind": "Pod", "namespace": pod.namespace(), "name": pod.name(), "uid": pod.uid()})
}

pub(super) fn reconcile(c: &Cluster) {
    let services = c.list("services");
    // Endpoints this controller made for a Service that is gone go with it (EndpointSlices
    // are owned by their Service and collected by the garbage collector).
    for e in c.list("endpoints").iter() {
        let ours =
            e.labels().get(ENDPOINTS_MANAGED_BY).map(String::as_str) == Some(ENDPOINTS_CONTROLLER);
        if ours
            && !services
                .iter()
                .any(|s| s.namespace() == e.namespace() && s.name() == e.name())
        {
            c.delete("endpoints", e.namespace(), e.name());
        }
    }
    if services.is_empty() {
        return;
    }
    let pods = c.list("pods");
    let slices = c.list(SLICES);
    for svc in services.iter() {
        let selector = string_map(svc.value.at("/spec/selector"));
        if selector.is_empty() || svc.str("/spec/type") == "ExternalName" || svc.deleting() {
            continue;
        }
        let selected = selected(svc, &selector, &pods);
        let port_list = ports(svc, selected.first().copied());
        write_endpoints(c, svc, &selected, &port_list);
        write_slice(c, svc, &selected, &port_list, &slices);
    }
}

/// The Service's pods with an IP, not going, in the order of their IPs.
fn selected<'a>(
    svc: &Obj,
    selector: &std::collections::BTreeMap<String, String>,
    pods: &'a [Obj],
) -> Vec<&'a Obj> {
    let mut selected: Vec<&Obj> = pods
        .iter()
        .filter(|p| {
            p.namespace() == svc.namespace()
                && !p.deleting()
                && !p.str("/status/podIP").is_empty()
                && {
                    let labels = p.labels();
                    selector.iter().all(|(k, v)| labels.get(k) == Some(v))
                }
        })
        .collect();
    selected.sort_by(|a, b| a.str("/status/podIP").cmp(b.str("/status/podIP")));
    selected
}

/// The Service's v1 Endpoints object, made or brought up to date.
fn write_endpoints(c: &Cluster, svc: &Obj, selected: &[&Obj], port_list: &[Value]) {
    let address = |p: &Obj| json!({"ip": p.str("/status/podIP"), "nodeName": p.str("/spec/nodeName"), "targetRef": target_ref(p)});
    let ready: Vec<Value> = selected
        .iter()
        .filter(|p| pod_ready(p))
        .map(|p| address(p))
        .collect();
    let not_ready: Vec<Value> = selected
        .iter()
        .filter(|p| !pod_ready(p))
        .map(|p| address(p))
        .collect();
    let mut subset = json!({"ports": port_list});
    if !ready.is_empty() {
        subset["addresses"] = json!(ready);
    }
    if !not_ready.is_empty() {
        subset["notReadyAddresses"] = json!(not_ready);
    }
    let subsets = if selected.is_empty() {
        json!([])
    } else {
        json!([subset])
    };
    let mut labels = svc
        .value
        .at("/metadata/labels")
        .cloned()
        .unwrap_or_else(|| json!({}));
    labels[ENDPOINTS_MANAGED_BY] = json!(ENDPOINTS_CONTROLLER);
    let mut endpoints = json!({
        "apiVersion": "v1", "kind": "Endpoints",
        "metadata": {"name": svc.name(), "namespace": svc.namespace(), "labels": labels},
    });
    if !selected.is_empty() {
        endpoints["subsets"] = subsets.clone();
    }
    match c.get("endpoints", svc.namespace(), svc.name()) {
        None => {
            c.create("endpoints", endpoints);
        }
        Some(old) if old.value.get("subsets").unwrap_or(&json!([])) != &subsets => {
            let mut next = Value::clone(&old.value);
            match next.as_object_mut() {
                Some(o) if selected.is_empty() => {
                    o.remove("subsets");
                }
                _ => next["subsets"] = subsets,
            }
            c.update("endpoints", next, &old);
        }
        Some(_) => {}
    }
}

/// The Service's EndpointSlice, made or brought up to date.
fn write_slice(c: &Cluster, svc: &Obj, selected: &[&Obj], port_list: &[Value], slices: &[Obj]) {
    let entries: Vec<Value> = selected
        .iter()
        .map(|p| {
            let ready = pod_ready(p);
            json!({
                "addresses": [p.str("/status/podIP")],
                "conditions": {"ready": ready, "serving": ready, "terminating": false},
                "nodeName": p.str("/spec/nodeName"),
                "targetRef": target_ref(p),
            })
        })
        .collect();
    let existing = slices.iter().find(|s| {
        s.namespace() == svc.namespace()
            && s.labels()
                .get("kubernetes.io/service-name")
                .map(String::as_str)
                == Some(svc.name())
            && s.labels().get(MANAGED_BY).map(String::as_str) == Some(CONTROLLER)
    });
    let endpoints_value = json!(entries);
    // EndpointSlice ports always carry a name, empty for an unnamed Service port (clients
    // such as kubectl describe dereference it).
    let ports_value = json!(port_list
        .iter()
        .map(|p| {
            let mut p = p.clone();
            if p.get("name").is_none() {
                p["name"] = json!("");
            }
            p
        })
        .collect::<Vec<_>>());
    match existing {
        None => {
            let slice = json!({
                "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
                "metadata": {
                    "name": format!("{}-{}", svc.name(), random_suffix(5)),
                    "generateName": format!("{}-", svc.name()),
                    "namespace": svc.namespace(),
                    "labels": {"kubernetes.io/service-name": svc.name(), MANAGED_BY: CONTROLLER},
                    "ownerReferences": [{"apiVersion": "v1", "kind": "Service", "name": svc.name(), "uid": svc.uid(),
                                         "controller": true, "blockOwnerDeletion": true}],
                },
                "addressType": "IPv4",
                "endpoints": endpoints_value,
                "ports": ports_value,
            });
            c.create(SLICES, slice);
        }
        Some(old)
            if old.value.get("endpoints").unwrap_or(&json!([])) != &endpoints_value
                || old.value.get("ports").unwrap_or(&json!([])) != &ports_value =>
        {
            let mut next = Value::clone(&old.value);
            next["endpoints"] = endpoints_value;
            next["ports"] = ports_value;
            c.update(SLICES, next, old);
        }
        Some(_) => {}
    }
}
