//! Printers of the core group's kinds (`kubectl get pods`, `nodes`, `services`...).

use super::*;

pub(super) const POD: Printer = Printer {
    kinds: &["Pod"],
    columns: &[
        NAME,
        Column("Ready", "string", 0),
        Column("Status", "string", 0),
        Column("Restarts", "string", 0),
        AGE,
        Column("IP", "string", 1),
        Column("Node", "string", 1),
        Column("Nominated Node", "string", 1),
        Column("Readiness Gates", "string", 1),
    ],
    cells: pod,
};

fn pod(v: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let name = json!(s(v, "metadata.name"));
    let (ready, status, restarts) = pod_status(v);
    let gates = arr(v, "spec.readinessGates");
    vec![
        name,
        json!(ready),
        json!(status),
        json!(restarts.to_string()),
        age(v, now),
        json!(or_none(s(v, "status.podIP").to_string())),
        json!(or_none(s(v, "spec.nodeName").to_string())),
        json!(or_none(s(v, "status.nominatedNodeName").to_string())),
        json!(if gates.is_empty() {
            "<none>".to_string()
        } else {
            format!("0/{}", gates.len())
        }),
    ]
}

pub(super) const NAMESPACE: Printer = Printer {
    kinds: &["Namespace"],
    columns: &[NAME, Column("Status", "string", 0), AGE],
    cells: namespace,
};

fn namespace(v: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let name = json!(s(v, "metadata.name"));
    vec![name, json!(s(v, "status.phase")), age(v, now)]
}

pub(super) const NODE: Printer = Printer {
    kinds: &["Node"],
    columns: &[
        NAME,
        Column("Status", "string", 0),
        Column("Roles", "string", 0),
        AGE,
        Column("Version", "string", 0),
        Column("Internal-IP", "string", 1),
        Column("External-IP", "string", 1),
        Column("OS-Image", "string", 1),
        Column("Kernel-Version", "string", 1),
        Column("Container-Runtime", "string", 1),
    ],
    cells: node,
};

fn node(v: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let name = json!(s(v, "metadata.name"));
    vec![
        name,
        json!(node_status(v)),
        json!(node_roles(v)),
        age(v, now),
        json!(s(v, "status.nodeInfo.kubeletVersion")),
        json!(node_address(v, "InternalIP")),
        json!(node_address(v, "ExternalIP")),
        json!(or_none(s(v, "status.nodeInfo.osImage").to_string())),
        json!(or_none(s(v, "status.nodeInfo.kernelVersion").to_string())),
        json!(or_none(
            s(v, "status.nodeInfo.containerRuntimeVersion").to_string()
        )),
    ]
}

pub(super) const SERVICE: Printer = Printer {
    kinds: &["Service"],
    columns: &[
        NAME,
        Column("Type", "string", 0),
        Column("Cluster-IP", "string", 0),
        Column("External-IP", "string", 0),
        Column("Port(s)", "string", 0),
        AGE,
        Column("Selector", "string", 1),
    ],
    cells: service,
};

fn service(v: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let name = json!(s(v, "metadata.name"));
    let external: Vec<String> = arr(v, "status.loadBalancer.ingress")
        .iter()
        .map(|i| s(i, "ip").to_string())
        .chain(
            arr(v, "spec.externalIPs")
                .iter()
                .filter_map(|i| i.as_str().map(str::to_string)),
        )
        .collect();
    let ty = match s(v, "spec.type") {
        "" => "ClusterIP",
        t => t,
    };
    let external = if external.is_empty() && ty == "LoadBalancer" {
        "<pending>".to_string()
    } else {
        or_none(external.join(","))
    };
    vec![
        name,
        json!(ty),
        json!(or_none(s(v, "spec.clusterIP").to_string())),
        json!(external),
        json!(service_ports(v)),
        age(v, now),
        json!(or_none(selector_string(v.at("/spec/selector")))),
    ]
}

pub(super) const ENDPOINTS: Printer = Printer {
    kinds: &["Endpoints"],
    columns: &[NAME, Column("Endpoints", "string", 0), AGE],
    cells: endpoints,
};

fn endpoints(v: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let name = json!(s(v, "metadata.name"));
    let eps: Vec<String> = arr(v, "subsets")
        .iter()
        .flat_map(|ss| {
            let ports: Vec<i64> = arr(ss, "ports").iter().map(|p| n(p, "port")).collect();
            arr(ss, "addresses")
                .iter()
                .flat_map(move |a| {
                    let ip = s(a, "ip").to_string();
                    if ports.is_empty() {
                        vec![ip]
                    } else {
                        ports.iter().map(|p| format!("{ip}:{p}")).collect()
                    }
                })
                .collect::<Vec<_>>()
        })
        .collect();
    vec![name, json!(or_none(eps.join(","))), age(v, now)]
}

pub(super) const CONFIG_MAP: Printer = Printer {
    kinds: &["ConfigMap"],
    columns: &[NAME, Column("Data", "integer", 0), AGE],
    cells: config_map,
};

fn config_map(v: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let name = json!(s(v, "metadata.name"));
    vec![
        name,
        json!(count(v, "data") + count(v, "binaryData")),
        age(v, now),
    ]
}

pub(super) const SECRET: Printer = Printer {
    kinds: &["Secret"],
    columns: &[
        NAME,
        Column("Type", "string", 0),
        Column("Data", "integer", 0),
        AGE,
    ],
    cells: secret,
};

fn secret(v: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let name = json!(s(v, "metadata.name"));
    vec![
        name,
        json!(match s(v, "type") {
            "" => "Opaque",
            t => t,
        }),
        json!(count(v, "data")),
        age(v, now),
    ]
}

pub(super) const SERVICE_ACCOUNT: Printer = Printer {
    kinds: &["ServiceAccount"],
    columns: &[NAME, Column("Secrets", "integer", 0), AGE],
    cells: service_account,
};

fn service_account(v: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let name = json!(s(v, "metadata.name"));
    vec![name, json!(count(v, "secrets")), age(v, now)]
}

pub(super) const EVENT: Printer = Printer {
    kinds: &["Event"],
    columns: &[
        Column("Last Seen", "string", 0),
        Column("Type", "string", 0),
        Column("Reason", "string", 0),
        Column("Object", "string", 0),
        Column("Message", "string", 0),
    ],
    cells: event,
};

/// A `v1` Event or an `events.k8s.io/v1` one (kube-apiserver prints both from the same
/// stored object; their fields differ in name only).
fn event(v: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let either = |core: &str, events: &str| {
        let value = s(v, core);
        if value.is_empty() {
            s(v, events)
        } else {
            value
        }
    };
    let last = [
        s(v, "lastTimestamp"),
        s(v, "deprecatedLastTimestamp"),
        s(v, "series.lastObservedTime"),
        s(v, "eventTime"),
        s(v, "metadata.creationTimestamp"),
    ]
    .into_iter()
    .find(|t| !t.is_empty())
    .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
    .map(|t| human_duration(now - t.with_timezone(&Utc)))
    .unwrap_or_else(|| "<unknown>".into());
    vec![
        json!(last),
        json!(s(v, "type")),
        json!(s(v, "reason")),
        json!(format!(
            "{}/{}",
            either("involvedObject.kind", "regarding.kind").to_ascii_lowercase(),
            either("involvedObject.name", "regarding.name")
        )),
        json!(either("message", "note").trim()),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_of_either_api_print_the_same_row() {
        let now: DateTime<Utc> = "2030-01-01T00:01:00Z".parse().unwrap();
        let core = json!({"apiVersion": "v1", "kind": "Event", "type": "Normal", "reason": "Pulled",
            "involvedObject": {"kind": "Pod", "name": "web"}, "message": "done ",
            "lastTimestamp": "2030-01-01T00:00:00Z"});
        let events = json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "type": "Normal",
            "reason": "Pulled", "regarding": {"kind": "Pod", "name": "web"}, "note": "done",
            "deprecatedLastTimestamp": "2030-01-01T00:00:00Z"});
        assert_eq!(event(&core, now), event(&events, now));
        assert_eq!(event(&events, now)[3], "pod/web");
        assert_eq!(event(&events, now)[4], "done");
    }
}
