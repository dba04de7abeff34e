//! Every write verb goes through one path, so each refuses what the others refuse: an
//! immutable ConfigMap's data, a pod's command, a bad name, a negative scale, all answered
//! with the same 422 and field, whether the change comes as a PUT, a merge patch, a JSON
//! patch, a strategic merge patch or a server-side apply.

use infrasim_clock::SystemClock;
use infrasim_kube_api::pki::CertificateAuthority;
use infrasim_kube_api::{ApiConfig, ApiServer};
use infrasim_store::{Store, StoreConfig};
use serde_json::{json, Value};

mod common;

fn server() -> ApiServer {
    let store = Store::in_memory(StoreConfig::default());
    let group = store.create_group("g").expect("a group");
    let ca = CertificateAuthority::generate("ca").expect("a CA");
    ApiServer::new(group, ca, SystemClock::shared(), ApiConfig::default())
}

/// `method path` with `body` of `content_type`, as an administrator; status and body.
async fn send(
    server: &ApiServer,
    method: &str,
    path: &str,
    content_type: &str,
    body: &Value,
) -> (u16, Value) {
    let answer = common::as_admin(server, method, path, content_type, body.to_string()).await;
    (answer.status, answer.json())
}

/// The ways to change an object: each verb with the body that makes `changed` of `current`.
fn changes(
    path: &str,
    current: &Value,
    changed: &Value,
    json_patch: Value,
) -> Vec<(String, String, String, Value)> {
    let strip = |v: &Value| {
        let mut v = v.clone();
        if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
            m.retain(|k, _| k == "name" || k == "namespace");
        }
        v
    };
    let merge = strip(changed);
    vec![
        (
            "PUT".into(),
            path.into(),
            "application/json".into(),
            changed.clone(),
        ),
        (
            "PATCH".into(),
            path.into(),
            "application/merge-patch+json".into(),
            merge.clone(),
        ),
        (
            "PATCH".into(),
            path.into(),
            "application/strategic-merge-patch+json".into(),
            merge,
        ),
        (
            "PATCH".into(),
            path.into(),
            "application/json-patch+json".into(),
            json_patch,
        ),
        (
            "PATCH".into(),
            format!("{path}?fieldManager=applier&force=true"),
            "application/apply-patch+yaml".into(),
            {
                let mut applied = strip(changed);
                applied["apiVersion"] = current["apiVersion"].clone();
                applied["kind"] = current["kind"].clone();
                applied
            },
        ),
    ]
}

/// Each way of making `changed` is refused with 422 and a cause on `field`.
async fn every_verb_refuses(
    server: &ApiServer,
    path: &str,
    current: &Value,
    changed: &Value,
    json_patch: Value,
    field: &str,
) {
    for (method, uri, content_type, body) in changes(path, current, changed, json_patch) {
        let (status, answer) = send(server, &method, &uri, &content_type, &body).await;
        assert_eq!(
            status, 422,
            "{method} {content_type} was not refused: {answer}"
        );
        let causes = answer["details"]["causes"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        assert!(
            causes.iter().any(|c| c["field"] == field),
            "{method} {content_type}: no cause on {field}: {answer}"
        );
    }
}

#[tokio::test]
async fn an_immutable_configmaps_data_is_refused_by_every_verb() {
    let server = server();
    let path = "/api/v1/namespaces/default/configmaps/frozen";
    let (status, created) = send(
        &server,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        "application/json",
        &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "frozen"},
                "immutable": true, "data": {"a": "1"}}),
    )
    .await;
    assert_eq!(status, 201, "{created}");
    let mut changed = created.clone();
    changed["data"]["a"] = json!("2");
    let patch = json!([{"op": "replace", "path": "/data/a", "value": "2"}]);
    every_verb_refuses(&server, path, &created, &changed, patch, "data").await;
    let (_, now) = send(&server, "GET", path, "application/json", &json!({})).await;
    assert_eq!(now["data"]["a"], "1");
}

#[tokio::test]
async fn a_pods_command_is_refused_by_every_verb_but_its_image_may_change() {
    let server = server();
    let path = "/api/v1/namespaces/default/pods/p";
    let (status, created) = send(
        &server,
        "POST",
        "/api/v1/namespaces/default/pods",
        "application/json",
        &json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                "spec": {"containers": [{"name": "c", "image": "busybox", "command": ["sleep", "1"]}]}}),
    )
    .await;
    assert_eq!(status, 201, "{created}");
    let mut changed = created.clone();
    changed["spec"]["containers"][0]["command"] = json!(["sleep", "2"]);
    let patch =
        json!([{"op": "replace", "path": "/spec/containers/0/command", "value": ["sleep", "2"]}]);
    every_verb_refuses(&server, path, &created, &changed, patch, "spec").await;

    // The image is what a pod update may change, through apply as through the others.
    let applied = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "busybox:1.36"}]}});
    let (status, answer) = send(
        &server,
        "PATCH",
        &format!("{path}?fieldManager=applier&force=true"),
        "application/apply-patch+yaml",
        &applied,
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["spec"]["containers"][0]["image"], "busybox:1.36");
    assert_eq!(
        answer["spec"]["containers"][0]["command"],
        json!(["sleep", "1"])
    );
}

#[tokio::test]
async fn a_bad_name_is_refused_by_create_and_by_an_apply_that_creates() {
    let server = server();
    let object = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "Bad_Name"}});
    let (status, answer) = send(
        &server,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        "application/json",
        &object,
    )
    .await;
    assert_eq!(status, 422, "{answer}");
    let (status, applied) = send(
        &server,
        "PATCH",
        "/api/v1/namespaces/default/configmaps/Bad_Name?fieldManager=applier",
        "application/apply-patch+yaml",
        &object,
    )
    .await;
    assert_eq!(status, 422, "{applied}");
    assert_eq!(answer["details"]["causes"], applied["details"]["causes"]);
}

#[tokio::test]
async fn the_scale_subresource_writes_through_the_same_path() {
    let server = server();
    let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "d"}},
                 "template": {"metadata": {"labels": {"app": "d"}},
                              "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}});
    let (status, _) = send(
        &server,
        "POST",
        "/apis/apps/v1/namespaces/default/deployments",
        "application/json",
        &deployment,
    )
    .await;
    assert_eq!(status, 201);
    let scale = "/apis/apps/v1/namespaces/default/deployments/d/scale";
    let (status, answer) = send(
        &server,
        "PATCH",
        &format!("{scale}?fieldManager=scaler"),
        "application/merge-patch+json",
        &json!({"spec": {"replicas": 4}}),
    )
    .await;
    assert_eq!(
        (status, answer["spec"]["replicas"].clone()),
        (200, json!(4)),
        "{answer}"
    );
    // The scaler now owns the replicas, as kube-apiserver records a scale.
    let (_, d) = send(
        &server,
        "GET",
        "/apis/apps/v1/namespaces/default/deployments/d",
        "application/json",
        &json!({}),
    )
    .await;
    let owners: Vec<&str> = d["metadata"]["managedFields"]
        .as_array()
        .map(|m| {
            m.iter()
                .filter(|e| e["fieldsV1"]["f:spec"]["f:replicas"].is_object())
                .filter_map(|e| e["manager"].as_str())
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(owners, ["scaler"], "{}", d["metadata"]["managedFields"]);
}

/// Appliers racing to create one object all succeed, as with kube-apiserver (whose apply is
/// an update that may create): the ones that lose the create merge into the winner's object,
/// each keeping its own fields (here, one label per manager).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn appliers_racing_to_create_one_object_all_succeed() {
    let server = std::sync::Arc::new(server());
    // Several rounds: a race is not lost every time.
    for round in 0..10 {
        let path = format!("/api/v1/namespaces/default/configmaps/raced-{round}");
        let appliers = (0..24).map(|i| {
            let (server, path) = (server.clone(), path.clone());
            tokio::spawn(async move {
                let applied = json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": format!("raced-{round}"),
                                 "labels": {format!("by-{i}"): "yes"}}});
                let uri = format!("{path}?fieldManager=applier-{i}");
                send(
                    &server,
                    "PATCH",
                    &uri,
                    "application/apply-patch+yaml",
                    &applied,
                )
                .await
            })
        });
        for answer in futures::future::join_all(appliers).await {
            let (status, body) = answer.expect("the applier ran");
            assert!(status == 200 || status == 201, "{status}: {body}");
        }
        let (_, stored) = send(&server, "GET", &path, "application/json", &Value::Null).await;
        let labels = stored["metadata"]["labels"].as_object().expect("labels");
        assert_eq!(
            labels.len(),
            24,
            "every applier's label is kept: {labels:?}"
        );
    }
}
