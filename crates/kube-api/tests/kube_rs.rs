//! kube-rs, a client nobody here wrote, against the API server: CRUD, conflicts, list
//! pagination, watches, the runtime watcher, and authentication.

mod common;

use common::TestServer;
use futures::{StreamExt, TryStreamExt};
use infrasim_kube_api::Identity;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod};
use kube::api::{DeleteParams, ListParams, PostParams, WatchEvent, WatchParams};
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Api, ResourceExt};
use std::collections::BTreeMap;
use std::time::Duration;

fn configmap(name: &str, value: &str) -> ConfigMap {
    ConfigMap {
        metadata: kube::api::ObjectMeta {
            name: Some(name.into()),
            labels: Some(BTreeMap::from([("app".to_string(), "demo".to_string())])),
            ..Default::default()
        },
        data: Some(BTreeMap::from([("k".to_string(), value.to_string())])),
        ..Default::default()
    }
}

#[tokio::test]
async fn crud_conflict_and_pagination() {
    let t = TestServer::start(10_000).await;
    let client = t.client().await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let created = cms
        .create(&PostParams::default(), &configmap("a", "1"))
        .await
        .unwrap();
    assert!(created.metadata.uid.is_some());
    let rv = created.resource_version().unwrap();

    // A replace with the read resourceVersion works once; the stale one then conflicts.
    let mut next = created.clone();
    next.data = Some(BTreeMap::from([("k".to_string(), "2".to_string())]));
    cms.replace("a", &PostParams::default(), &next)
        .await
        .unwrap();
    match cms.replace("a", &PostParams::default(), &next).await {
        Err(kube::Error::Api(s)) => assert_eq!((s.code, s.reason.as_str()), (409, "Conflict")),
        other => panic!("expected a conflict, got {other:?}"),
    }
    assert_ne!(cms.get("a").await.unwrap().resource_version().unwrap(), rv);
    match cms.get("missing").await {
        Err(kube::Error::Api(s)) => assert_eq!((s.code, s.reason.as_str()), (404, "NotFound")),
        other => panic!("expected not found, got {other:?}"),
    }

    for i in 0..25 {
        cms.create(&PostParams::default(), &configmap(&format!("p{i:02}"), "x"))
            .await
            .unwrap();
    }
    let mut seen = Vec::new();
    let mut lp = ListParams::default().labels("app=demo").limit(10);
    loop {
        let page = cms.list(&lp).await.unwrap();
        seen.extend(page.items.iter().map(|c| c.name_any()));
        match page.metadata.continue_ {
            Some(c) if !c.is_empty() => lp = lp.continue_token(&c),
            _ => break,
        }
    }
    let mut expected: Vec<String> = (0..25).map(|i| format!("p{i:02}")).collect();
    expected.insert(0, "a".into());
    assert_eq!(seen, expected);
}

#[tokio::test]
async fn watch_sees_every_change_and_resumes() {
    let t = TestServer::start(10_000).await;
    let client = t.client().await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let start = cms
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    cms.create(&PostParams::default(), &configmap("w", "1"))
        .await
        .unwrap();
    let mut replaced = cms.get("w").await.unwrap();
    replaced.data = Some(BTreeMap::from([("k".to_string(), "2".to_string())]));
    cms.replace("w", &PostParams::default(), &replaced)
        .await
        .unwrap();
    cms.delete("w", &DeleteParams::default()).await.unwrap();

    let stream = cms
        .watch(&WatchParams::default().timeout(5), &start)
        .await
        .unwrap();
    let events: Vec<_> = stream.take(3).try_collect().await.unwrap();
    let kinds: Vec<&str> = events
        .iter()
        .map(|e| match e {
            WatchEvent::Added(_) => "ADDED",
            WatchEvent::Modified(_) => "MODIFIED",
            WatchEvent::Deleted(_) => "DELETED",
            WatchEvent::Bookmark(_) => "BOOKMARK",
            WatchEvent::Error(_) => "ERROR",
        })
        .collect();
    assert_eq!(kinds, vec!["ADDED", "MODIFIED", "DELETED"]);
}

#[tokio::test]
async fn a_watch_cut_off_behind_a_burst_picks_up_from_the_window() {
    // A watcher buffer of 8 events, and 200 writes made before the watch can read any: the
    // watch is cut off, and must continue from the window with nothing lost.
    let t = TestServer::start_with_store(
        infrasim_store::StoreConfig {
            watch_window: 10_000,
            watcher_buffer: 8,
            packed: false,
            fresh: None,
        },
        Default::default(),
    )
    .await;
    let client = t.client().await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let start = cms
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let stream = cms
        .watch(&WatchParams::default().timeout(10), &start)
        .await
        .unwrap();
    for i in 0..200 {
        let mut cm = serde_json::to_value(configmap(&format!("burst-{i:03}"), "1")).unwrap();
        cm["metadata"]["namespace"] = "default".into();
        t.group
            .create("configmaps", cm, Default::default())
            .unwrap();
    }
    let events: Vec<_> = stream.take(200).try_collect().await.unwrap();
    let names: Vec<String> = events
        .iter()
        .map(|e| match e {
            WatchEvent::Added(cm) => cm.metadata.name.clone().unwrap_or_default(),
            other => panic!("unexpected {other:?}"),
        })
        .collect();
    let expected: Vec<String> = (0..200).map(|i| format!("burst-{i:03}")).collect();
    assert_eq!(names, expected);
}

#[tokio::test]
async fn runtime_watcher_sees_every_object() {
    let t = TestServer::start(10_000).await;
    let client = t.client().await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let mut stream = watcher(pods.clone(), watcher::Config::default())
        .applied_objects()
        .boxed();
    let writer = tokio::spawn(async move {
        for i in 0..20 {
            let pod: Pod = serde_json::from_value(serde_json::json!({
                "metadata": {"name": format!("pod-{i}")},
                "spec": {"containers": [{"name": "c", "image": "busybox"}]}
            }))
            .unwrap();
            pods.create(&PostParams::default(), &pod).await.unwrap();
        }
    });
    let mut names = std::collections::BTreeSet::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while names.len() < 20 {
        let next = tokio::time::timeout_at(deadline, stream.try_next()).await;
        let pod = next
            .expect("watcher stalled")
            .unwrap()
            .expect("stream ended");
        assert_eq!(
            pod.status.as_ref().and_then(|s| s.phase.as_deref()),
            Some("Pending")
        );
        names.insert(pod.name_any());
    }
    writer.await.unwrap();
    assert_eq!(names.len(), 20);
}

#[tokio::test]
async fn expired_resource_version_is_410() {
    let t = TestServer::start(5).await;
    let client = t.client().await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    for i in 0..10 {
        cms.create(&PostParams::default(), &configmap(&format!("e{i}"), "x"))
            .await
            .unwrap();
    }
    let mut stream = cms
        .watch(&WatchParams::default().timeout(5), "1")
        .await
        .unwrap()
        .boxed();
    match stream.try_next().await.unwrap() {
        Some(WatchEvent::Error(e)) => assert_eq!(e.code, 410),
        other => panic!("expected a 410 error event, got {other:?}"),
    }
}

#[tokio::test]
async fn authentication_is_required_and_scoped_to_the_ca() {
    let t = TestServer::start(100).await;
    // No credentials: 401.
    let anonymous: Api<Namespace> = Api::all(t.client_with_token(None));
    match anonymous.list(&ListParams::default()).await {
        Err(kube::Error::Api(s)) => assert_eq!(s.code, 401),
        other => panic!("expected 401, got {other:?}"),
    }
    // An unknown token: 401. A registered one: served.
    let wrong: Api<Namespace> = Api::all(t.client_with_token(Some("nope")));
    assert!(
        matches!(wrong.list(&ListParams::default()).await, Err(kube::Error::Api(s)) if s.code == 401)
    );
    t.server.add_token(
        "s3cret",
        Identity {
            user: "robot".into(),
            groups: vec!["system:masters".into()],
        },
    );
    let robot: Api<Namespace> = Api::all(t.client_with_token(Some("s3cret")));
    let names: Vec<String> = robot
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .map(|n| n.name_any())
        .collect();
    assert_eq!(
        names,
        vec!["default", "kube-node-lease", "kube-public", "kube-system"]
    );
    // A certificate from another cluster's CA is refused at the TLS layer.
    let other_ca = infrasim_kube_api::pki::CertificateAuthority::generate("other").unwrap();
    let stranger: Api<Namespace> = Api::all(
        t.client_with_cert_from(&other_ca, "kubernetes-admin", &["system:masters"])
            .await,
    );
    assert!(stranger.list(&ListParams::default()).await.is_err());
}

#[tokio::test]
async fn streaming_lists_use_send_initial_events() {
    let t = TestServer::start(10_000).await;
    let client = t.client().await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    for i in 0..5 {
        cms.create(&PostParams::default(), &configmap(&format!("s{i}"), "x"))
            .await
            .unwrap();
    }
    let mut stream = watcher(cms.clone(), watcher::Config::default().streaming_lists()).boxed();
    let mut initial = Vec::new();
    loop {
        let event = tokio::time::timeout(Duration::from_secs(10), stream.try_next())
            .await
            .expect("watcher stalled")
            .unwrap()
            .expect("stream ended");
        match event {
            watcher::Event::Init => {}
            watcher::Event::InitApply(cm) => initial.push(cm.name_any()),
            watcher::Event::InitDone => break,
            other => panic!("unexpected event before InitDone: {other:?}"),
        }
    }
    initial.sort();
    assert_eq!(
        initial,
        vec!["kube-root-ca.crt", "s0", "s1", "s2", "s3", "s4"]
    );
    // After the initial state, live changes follow on the same stream.
    cms.create(&PostParams::default(), &configmap("later", "x"))
        .await
        .unwrap();
    let next = tokio::time::timeout(Duration::from_secs(10), stream.try_next())
        .await
        .unwrap()
        .unwrap();
    assert!(matches!(next, Some(watcher::Event::Apply(cm)) if cm.name_any() == "later"));
}

async fn raw(
    client: &kube::Client,
    method: &str,
    path: &str,
    content_type: &str,
    body: Vec<u8>,
) -> (u16, serde_json::Value) {
    use http_body_util::BodyExt;
    let req = http::Request::builder()
        .method(method)
        .uri(path)
        .header(http::header::CONTENT_TYPE, content_type)
        .body(kube::client::Body::from(body))
        .unwrap();
    let resp = client.send(req).await.unwrap();
    let status = resp.status().as_u16();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(serde_json::Value::Null),
    )
}

#[tokio::test]
async fn bad_requests_get_status_objects_with_kube_codes() {
    let t = TestServer::start(100).await;
    let client = t.client().await;
    let cms = "/api/v1/namespaces/default/configmaps";
    let (code, status) = raw(
        &client,
        "POST",
        cms,
        "application/json",
        b"{not json".to_vec(),
    )
    .await;
    assert_eq!(
        (code, status["kind"].as_str(), status["reason"].as_str()),
        (400, Some("Status"), Some("BadRequest"))
    );
    let (code, status) = raw(&client, "POST", cms, "text/plain", b"hello".to_vec()).await;
    assert_eq!(
        (code, status["reason"].as_str()),
        (415, Some("UnsupportedMediaType"))
    );
    let big = format!(
        "{{\"metadata\":{{\"name\":\"big\"}},\"data\":{{\"k\":\"{}\"}}}}",
        "x".repeat(4 << 20)
    );
    let (code, status) = raw(&client, "POST", cms, "application/json", big.into_bytes()).await;
    assert_eq!(
        (code, status["reason"].as_str()),
        (413, Some("RequestEntityTooLarge"))
    );
    let (code, status) = raw(
        &client,
        "POST",
        &format!("{cms}/x"),
        "application/json",
        b"{}".to_vec(),
    )
    .await;
    assert_eq!(
        (code, status["reason"].as_str()),
        (405, Some("MethodNotAllowed"))
    );
    let (code, _) = raw(
        &client,
        "GET",
        "/apis/nonexistent.example.com/v1/things",
        "application/json",
        vec![],
    )
    .await;
    assert_eq!(code, 404);
    let wrong_kind = br#"{"apiVersion":"v1","kind":"Secret","metadata":{"name":"x"}}"#.to_vec();
    let (code, status) = raw(&client, "POST", cms, "application/json", wrong_kind).await;
    assert_eq!(code, 400, "{status}");
    let strict = br#"{"metadata":{"name":"x"},"data":{},"bogus":1}"#.to_vec();
    let (code, status) = raw(
        &client,
        "POST",
        &format!("{cms}?fieldValidation=Strict"),
        "application/json",
        strict,
    )
    .await;
    assert_eq!(code, 400);
    assert!(status["message"]
        .as_str()
        .unwrap()
        .contains("unknown field \"bogus\""));
}

#[tokio::test]
async fn bookmarks_carry_the_latest_resource_version() {
    let config = infrasim_kube_api::ApiConfig {
        bookmark_interval: Duration::from_millis(200),
        ..Default::default()
    };
    let t = TestServer::start_with(100, config).await;
    let client = t.client().await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let pods: Api<Pod> = Api::namespaced(client, "default");
    let start = cms
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let mut stream = cms
        .watch(&WatchParams::default().timeout(10), &start)
        .await
        .unwrap()
        .boxed();
    // A change to another resource moves the group's resourceVersion without an event here;
    // the bookmark tells the watcher it may resume from there.
    let pod: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}
    }))
    .unwrap();
    let created = pods.create(&PostParams::default(), &pod).await.unwrap();
    let bookmark = tokio::time::timeout(Duration::from_secs(5), stream.try_next())
        .await
        .expect("no bookmark")
        .unwrap();
    match bookmark {
        Some(WatchEvent::Bookmark(b)) => assert_eq!(
            b.metadata.resource_version,
            created.resource_version().unwrap()
        ),
        other => panic!("expected a bookmark, got {other:?}"),
    }
}

#[tokio::test]
async fn delete_collection_removes_only_the_selected() {
    let t = TestServer::start(1000).await;
    let client = t.client().await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    for (name, app) in [("a", "x"), ("b", "x"), ("c", "y")] {
        let mut cm = configmap(name, "1");
        cm.metadata.labels = Some(BTreeMap::from([("app".to_string(), app.to_string())]));
        cms.create(&PostParams::default(), &cm).await.unwrap();
    }
    cms.delete_collection(
        &DeleteParams::default(),
        &ListParams::default().labels("app=x"),
    )
    .await
    .unwrap();
    let left: Vec<String> = cms
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .map(|c| c.name_any())
        .collect();
    assert_eq!(left, vec!["c", "kube-root-ca.crt"]);
}

#[tokio::test]
async fn a_non_admin_certificate_gets_exactly_its_bindings() {
    let t = TestServer::start(1000).await;
    let admin = t.client().await;
    let alice = t.client_with_cert_from(&t.ca, "alice", &["team-a"]).await;
    let cms: Api<ConfigMap> = Api::namespaced(alice.clone(), "default");
    match cms.list(&ListParams::default()).await {
        Err(kube::Error::Api(s)) => {
            assert_eq!((s.code, s.reason.as_str()), (403, "Forbidden"));
            assert!(
                s.message
                    .contains("User \"alice\" cannot list resource \"configmaps\""),
                "{}",
                s.message
            );
        }
        other => panic!("expected 403, got {other:?}"),
    }
    // Bind the group, not the user: group membership comes from the certificate's O.
    let binding: k8s_openapi::api::rbac::v1::RoleBinding = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "team-a-view", "namespace": "default"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "team-a"}]
    }))
    .unwrap();
    Api::<k8s_openapi::api::rbac::v1::RoleBinding>::namespaced(admin, "default")
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();
    let names: Vec<String> = cms
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .map(|c| c.name_any())
        .collect();
    assert_eq!(names, vec!["kube-root-ca.crt"]);
    assert!(matches!(
        cms.create(&PostParams::default(), &configmap("nope", "1")).await,
        Err(kube::Error::Api(s)) if s.code == 403
    ));
    let other_ns: Api<ConfigMap> = Api::namespaced(alice, "kube-system");
    assert!(
        matches!(other_ns.list(&ListParams::default()).await, Err(kube::Error::Api(s)) if s.code == 403)
    );
}

/// kube-rs decodes a delete's answer as the kind (`Either::Left`) or as a Status
/// (`Either::Right`) by its `kind`: a Service's delete answers with the Service, as
/// kube-apiserver's service storage returns the deleted object, and a ConfigMap's with a
/// Status.
#[tokio::test]
async fn a_delete_answers_with_the_object_or_a_status_as_the_kind_does() {
    use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
    let t = TestServer::start(1_000).await;
    let client = t.client().await;
    let services: Api<Service> = Api::namespaced(client.clone(), "default");
    let svc = Service {
        metadata: kube::api::ObjectMeta {
            name: Some("s".into()),
            ..Default::default()
        },
        spec: Some(ServiceSpec {
            ports: Some(vec![ServicePort {
                port: 80,
                ..Default::default()
            }]),
            ..Default::default()
        }),
        ..Default::default()
    };
    let created = services.create(&PostParams::default(), &svc).await.unwrap();
    let answer = services
        .delete("s", &DeleteParams::default())
        .await
        .unwrap();
    let deleted = answer.left().expect("the deleted Service, not a Status");
    assert_eq!(deleted.uid(), created.uid());
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    cms.create(&PostParams::default(), &configmap("c", "1"))
        .await
        .unwrap();
    let answer = cms.delete("c", &DeleteParams::default()).await.unwrap();
    let status = answer.right().expect("a Status, not the ConfigMap");
    assert!(status.is_success(), "{status:?}");
}

#[tokio::test]
async fn ephemeral_containers_are_added_through_their_subresource_only() {
    use kube::api::{Patch, PatchParams};
    let server = TestServer::start(100).await;
    let pods: Api<Pod> = Api::default_namespaced(server.client().await);
    let pod: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "target"},
        "spec": {"containers": [{"name": "app", "image": "nginx:1.27"}]}}))
    .unwrap();
    pods.create(&PostParams::default(), &pod).await.unwrap();

    // Through the pod itself, ephemeral containers are refused.
    let mut with_debug = pods.get("target").await.unwrap();
    let debug = serde_json::json!([{"name": "debugger", "image": "busybox"}]);
    with_debug.spec.as_mut().unwrap().ephemeral_containers =
        Some(serde_json::from_value(debug.clone()).unwrap());
    let err = pods
        .replace("target", &PostParams::default(), &with_debug)
        .await
        .unwrap_err();
    assert!(matches!(err, kube::Error::Api(s) if s.code == 422));

    // Through the subresource, by update then strategic merge (by name); defaults apply.
    let added = pods
        .replace_ephemeral_containers("target", &PostParams::default(), &with_debug)
        .await
        .unwrap();
    let ephemeral = added.spec.unwrap().ephemeral_containers.unwrap();
    assert_eq!(
        ephemeral[0].termination_message_path.as_deref(),
        Some("/dev/termination-log")
    );
    assert_eq!(ephemeral[0].image_pull_policy.as_deref(), Some("Always"));
    let second = serde_json::json!({"spec": {"ephemeralContainers": [{"name": "second", "image": "alpine:3"}]}});
    let patched = pods
        .patch_ephemeral_containers(
            "target",
            &PatchParams::default(),
            &Patch::Strategic(&second),
        )
        .await
        .unwrap();
    let names: Vec<String> = patched
        .spec
        .unwrap()
        .ephemeral_containers
        .unwrap()
        .into_iter()
        .map(|c| c.name)
        .collect();
    assert_eq!(names, ["debugger", "second"]);
    assert_eq!(
        pods.get_ephemeral_containers("target")
            .await
            .unwrap()
            .spec
            .unwrap()
            .ephemeral_containers
            .unwrap()
            .len(),
        2
    );
    // The rest of the pod is not the subresource's to change; nor are existing ones.
    let mut sneaky = pods.get("target").await.unwrap();
    sneaky.spec.as_mut().unwrap().containers[0].image = Some("evil".into());
    let kept = pods
        .replace_ephemeral_containers("target", &PostParams::default(), &sneaky)
        .await
        .unwrap();
    assert_eq!(
        kept.spec.unwrap().containers[0].image.as_deref(),
        Some("nginx:1.27")
    );
    let clash =
        serde_json::json!({"spec": {"ephemeralContainers": [{"name": "app", "image": "x"}]}});
    let err = pods
        .patch_ephemeral_containers("target", &PatchParams::default(), &Patch::Strategic(&clash))
        .await
        .unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(s) if s.code == 422 && s.message.contains("Duplicate value"))
    );
}

#[tokio::test]
async fn component_statuses_are_served_read_only_with_a_deprecation_warning() {
    use k8s_openapi::api::core::v1::ComponentStatus;
    let server = TestServer::start(100).await;
    let api: Api<ComponentStatus> = Api::all(server.client().await);
    let scheduler = api.get("scheduler").await.unwrap();
    let healthy = &scheduler.conditions.unwrap()[0];
    assert_eq!(
        (healthy.type_.as_str(), healthy.status.as_str()),
        ("Healthy", "True")
    );
    let names: Vec<String> = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|c| c.metadata.name.unwrap())
        .collect();
    assert_eq!(names, ["controller-manager", "etcd-0", "scheduler"]);
    assert!(matches!(api.get("nope").await, Err(kube::Error::Api(s)) if s.code == 404));
    let err = api
        .delete("scheduler", &DeleteParams::default())
        .await
        .unwrap_err();
    assert!(matches!(err, kube::Error::Api(s) if s.code == 405));
    let answer = common::as_admin_accepting(
        &server.server,
        "/api/v1/componentstatuses",
        "application/json",
    )
    .await;
    assert_eq!(
        answer.warnings,
        ["299 - \"v1 ComponentStatus is deprecated in v1.19+\""]
    );
}

/// kube-rs's event recorder writes `events.k8s.io/v1` Events (a create, then a merge patch
/// of its series when the same event repeats); kube-apiserver serves them as the `core/v1`
/// Events `kubectl get events` and `kubectl describe` read, from one storage.
#[tokio::test]
async fn events_kube_rs_records_are_the_core_events_kubectl_reads() {
    use k8s_openapi::api::core::v1::Event as CoreEvent;
    use kube::runtime::events::{Event, EventType, Recorder, Reporter};
    use kube::Resource;
    let t = TestServer::start(10_000).await;
    let client = t.client().await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let cm = cms
        .create(&PostParams::default(), &configmap("recorded", "1"))
        .await
        .unwrap();
    let reporter = Reporter {
        controller: "example.com/rotator".into(),
        instance: Some("rotator-0".into()),
    };
    let recorder = Recorder::new(client.clone(), reporter);
    let event = Event {
        type_: EventType::Warning,
        reason: "Rotated".into(),
        note: Some("colour rotated".into()),
        action: "Rotating".into(),
        secondary: None,
    };
    let reference = cm.object_ref(&());
    recorder.publish(&event, &reference).await.unwrap();
    recorder.publish(&event, &reference).await.unwrap();

    let core: Api<CoreEvent> = Api::namespaced(client.clone(), "default");
    let selected = core
        .list(&ListParams::default().fields(&format!(
            "involvedObject.uid={}",
            cm.metadata.uid.as_deref().unwrap()
        )))
        .await
        .unwrap()
        .items;
    assert_eq!(selected.len(), 1, "one event, its series counted");
    let e = &selected[0];
    assert_eq!(e.involved_object.name.as_deref(), Some("recorded"));
    assert_eq!(e.message.as_deref(), Some("colour rotated"));
    assert_eq!(
        e.reporting_component.as_deref(),
        Some("example.com/rotator")
    );
    assert_eq!(e.series.as_ref().and_then(|s| s.count), Some(2));
}

/// The store indexes Pods by `spec.nodeName` (as kube-apiserver's watch cache does): a
/// binding moves a Pod from the unscheduled ones to its node's, and a field selector finds
/// it there and only there.
#[tokio::test]
async fn a_bound_pod_is_listed_by_its_node_and_no_longer_as_unscheduled() {
    let t = TestServer::start(10_000).await;
    let client = t.client().await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    for name in ["p1", "p2"] {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": name},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}
        }))
        .unwrap();
        pods.create(&PostParams::default(), &pod).await.unwrap();
    }
    let on = |node: &str| ListParams::default().fields(&format!("spec.nodeName={node}"));
    let names = |l: kube::core::ObjectList<Pod>| -> Vec<String> {
        l.items.iter().map(|p| p.name_any()).collect()
    };
    assert_eq!(names(pods.list(&on("")).await.unwrap()), ["p1", "p2"]);
    let binding = serde_json::json!({
        "apiVersion": "v1", "kind": "Binding",
        "metadata": {"name": "p2"},
        "target": {"kind": "Node", "name": "n1"}
    });
    pods.create_subresource::<_, serde_json::Value>(
        "binding",
        "p2",
        &PostParams::default(),
        &binding,
    )
    .await
    .unwrap();
    assert_eq!(names(pods.list(&on("n1")).await.unwrap()), ["p2"]);
    assert_eq!(names(pods.list(&on("")).await.unwrap()), ["p1"]);
    let others = ListParams::default().fields("spec.nodeName!=n1");
    assert_eq!(names(pods.list(&others).await.unwrap()), ["p1"]);
}
