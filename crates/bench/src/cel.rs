//! `bench api`'s write rows: creates per second of a custom object whose CRD has ten CEL
//! validation rules, against the same object under a CRD with none, in the same run: what
//! the rules cost on the write path.

use crate::harness::{fmt, Client};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::sync::Arc;

/// The ten rules: comparisons, string functions, list macros, and a transition rule (which
/// a create skips, as kube-apiserver does). The schema bounds its strings and lists, as
/// kube-apiserver's estimated cost limits require of rules that walk them.
const RULES: [&str; 10] = [
    "self.replicas <= self.maxReplicas",
    "self.minReplicas <= self.replicas",
    "self.name.startsWith('svc-')",
    "size(self.name) <= 63",
    "self.name.matches('^[a-z0-9-]+$')",
    "self.tags.all(t, size(t) < 16)",
    "self.tags.exists(t, t == 'bench')",
    "self.ports.all(p, p.port > 0 && p.port < 65536)",
    "self.ports.all(p, self.ports.exists_one(q, q.name == p.name))",
    "self.name == oldSelf.name",
];

fn crd(plural: &str, kind: &str, rules: bool) -> Value {
    let validations: Vec<Value> = if rules {
        RULES.iter().map(|r| json!({"rule": r})).collect()
    } else {
        Vec::new()
    };
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.bench.example.com")},
        "spec": {"group": "bench.example.com", "scope": "Namespaced",
                 "names": {"plural": plural, "singular": kind.to_lowercase(), "kind": kind},
                 "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {
                     "type": "object",
                     "properties": {"spec": {
                         "type": "object",
                         "x-kubernetes-validations": validations,
                         "properties": {
                             "replicas": {"type": "integer"}, "minReplicas": {"type": "integer"},
                             "maxReplicas": {"type": "integer"},
                             "name": {"type": "string", "maxLength": 63},
                             "tags": {"type": "array", "maxItems": 16,
                                      "items": {"type": "string", "maxLength": 15}},
                             "ports": {"type": "array", "maxItems": 16, "items": {"type": "object", "properties": {
                                 "name": {"type": "string", "maxLength": 15}, "port": {"type": "integer"}}}}}}}}}}]}
    })
}

fn object(kind: &str, name: &str) -> Value {
    json!({"apiVersion": "bench.example.com/v1", "kind": kind,
           "metadata": {"name": name, "namespace": "bench"},
           "spec": {"replicas": 3, "minReplicas": 1, "maxReplicas": 5, "name": "svc-bench",
                    "tags": ["bench", "cel", "rules"],
                    "ports": [{"name": "grpc", "port": 9090}, {"name": "http", "port": 8080}]}})
}

async fn post(client: &Client, addr: SocketAddr, path: &str, body: &Value) -> anyhow::Result<()> {
    let mut send = client.http1::<Full<Bytes>>(addr).await?;
    let resp = send.send_request(request(path, body)?).await?;
    let status = resp.status();
    let text = resp.into_body().collect().await?.to_bytes();
    anyhow::ensure!(
        status.is_success(),
        "POST {path}: {status}: {}",
        String::from_utf8_lossy(&text)
    );
    Ok(())
}

fn request(path: &str, body: &Value) -> anyhow::Result<http::Request<Full<Bytes>>> {
    Ok(http::Request::post(path)
        .header(http::header::HOST, "localhost")
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(Full::new(Bytes::from(serde_json::to_vec(body)?)))?)
}

/// `connections` connections creating objects of `kind` back to back for `seconds`.
async fn create_load(
    client: &Arc<Client>,
    addr: SocketAddr,
    plural: &str,
    kind: &str,
    (connections, seconds): (usize, u64),
) -> anyhow::Result<crate::harness::Load> {
    let path = format!("/apis/bench.example.com/v1/namespaces/bench/{plural}");
    let kind = kind.to_string();
    crate::harness::load_with(client, addr, connections, seconds, move |c, n| {
        request(&path, &object(&kind, &format!("o-{c}-{n}")))
    })
    .await
}

/// Prints the two create rows and the ratio of the ruled one to the plain one, each from
/// `load`'s (connections, seconds).
pub(crate) async fn creates(
    client: &Arc<Client>,
    addr: SocketAddr,
    load: (usize, u64),
) -> anyhow::Result<()> {
    let crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
    post(client, addr, crds, &crd("plains", "Plain", false)).await?;
    post(client, addr, crds, &crd("ruleds", "Ruled", true)).await?;
    let plain = create_load(client, addr, "plains", "Plain", load).await?;
    let ruled = create_load(client, addr, "ruleds", "Ruled", load).await?;
    println!();
    println!(
        "{:<30} {:>14} {:>10} {:>10}",
        "custom object creates", "req/s", "p50", "p99"
    );
    for (name, load) in [("no rules", &plain), ("ten CEL rules", &ruled)] {
        println!(
            "{:<30} {:>14.0} {:>10} {:>10}",
            name,
            load.per_second,
            fmt(load.p50),
            fmt(load.p99)
        );
    }
    println!(
        "ten CEL rules / no rules: {:.2}",
        ruled.per_second / plain.per_second.max(f64::EPSILON)
    );
    Ok(())
}
