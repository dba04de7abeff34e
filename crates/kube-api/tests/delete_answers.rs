//! What a delete, a deletecollection and a dry-run write answer, as kube-apiserver answers
//! them: the deleted object for the kinds whose storage sets `ReturnDeletedObject` and a
//! Success Status for the others (dry run or not), the object while finalizers hold it, the
//! list read before a deletecollection, and a dry-run create without a `resourceVersion`.

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

async fn send(server: &ApiServer, method: &str, path: &str, body: &Value) -> (u16, Value) {
    let content_type = if method == "PATCH" {
        "application/merge-patch+json"
    } else {
        "application/json"
    };
    let answer = common::as_admin(server, method, path, content_type, body.to_string()).await;
    (answer.status, answer.json())
}

/// Creates `object` in the collection at `path`; the created object.
async fn create(server: &ApiServer, path: &str, object: Value) -> Value {
    let (status, created) = send(server, "POST", path, &object).await;
    assert_eq!(status, 201, "{path}: {created}");
    created
}

const NS: &str = "/api/v1/namespaces/default";

fn configmap(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"k": "v"}})
}

fn service(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
           "spec": {"ports": [{"port": 80}]}})
}

/// One object of a kind, where it lives, and whether kube-apiserver answers its delete
/// with it (`ReturnDeletedObject: true` in the kind's storage.go).
fn kinds() -> Vec<(&'static str, String, Value, bool)> {
    vec![
        ("Service", format!("{NS}/services"), service("s"), true),
        (
            "ServiceAccount",
            format!("{NS}/serviceaccounts"),
            json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "sa"}}),
            true,
        ),
        (
            "PersistentVolumeClaim",
            format!("{NS}/persistentvolumeclaims"),
            json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "c"},
                   "spec": {"accessModes": ["ReadWriteOnce"],
                            "resources": {"requests": {"storage": "1Gi"}}}}),
            true,
        ),
        (
            "StorageClass",
            "/apis/storage.k8s.io/v1/storageclasses".into(),
            json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                   "metadata": {"name": "fast"}, "provisioner": "example.com/p"}),
            true,
        ),
        (
            "ConfigMap",
            format!("{NS}/configmaps"),
            configmap("cm"),
            false,
        ),
        (
            "Secret",
            format!("{NS}/secrets"),
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "sec"}}),
            false,
        ),
        (
            "Role",
            "/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles".into(),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                   "metadata": {"name": "r"}, "rules": []}),
            false,
        ),
    ]
}

#[tokio::test]
async fn a_delete_answers_with_the_object_only_for_the_kinds_whose_storage_returns_it() {
    let server = server();
    for (kind, path, object, returns_object) in kinds() {
        let created = create(&server, &path, object).await;
        let name = created["metadata"]["name"].as_str().unwrap_or_default();
        let at = format!("{path}/{name}");
        for dry in [true, false] {
            let uri = if dry {
                format!("{at}?dryRun=All")
            } else {
                at.clone()
            };
            let (status, answer) = send(&server, "DELETE", &uri, &json!({})).await;
            assert_eq!(status, 200, "{kind} (dry run {dry}): {answer}");
            if returns_object {
                assert_eq!(answer["kind"], kind, "dry run {dry}: {answer}");
                assert_eq!(answer["metadata"]["uid"], created["metadata"]["uid"]);
            } else {
                assert_eq!(
                    (&answer["kind"], &answer["status"]),
                    (&json!("Status"), &json!("Success")),
                    "{kind} (dry run {dry}): {answer}"
                );
                assert_eq!(answer["details"]["name"], name);
                assert_eq!(answer["details"]["uid"], created["metadata"]["uid"]);
            }
            if dry {
                // Nothing was deleted, and the object answered is the stored one.
                let (status, _) = send(&server, "GET", &at, &json!({})).await;
                assert_eq!(status, 200, "{kind} survives its dry-run delete");
                if returns_object {
                    assert_eq!(
                        answer["metadata"]["resourceVersion"],
                        created["metadata"]["resourceVersion"]
                    );
                }
            }
        }
        let (status, _) = send(&server, "GET", &at, &json!({})).await;
        assert_eq!(status, 404, "{kind} is gone");
    }
}

#[tokio::test]
async fn a_custom_resource_delete_answers_with_a_status() {
    let server = server();
    let schema = json!({"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}});
    create(
        &server,
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.answers.example.com"},
            "spec": {"group": "answers.example.com", "scope": "Namespaced",
                     "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                     "versions": [{"name": "v1", "served": true, "storage": true, "schema": schema}]}
        }),
    )
    .await;
    let widgets = "/apis/answers.example.com/v1/namespaces/default/widgets";
    create(
        &server,
        widgets,
        json!({"apiVersion": "answers.example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}),
    )
    .await;
    let at = format!("{widgets}/w");
    for uri in [format!("{at}?dryRun=All"), at.clone()] {
        let (status, answer) = send(&server, "DELETE", &uri, &json!({})).await;
        assert_eq!(status, 200, "{answer}");
        assert_eq!(
            (&answer["kind"], &answer["details"]["kind"]),
            (&json!("Status"), &json!("widgets")),
            "{uri}: {answer}"
        );
    }
}

#[tokio::test]
async fn a_finalizer_held_object_answers_with_itself_whatever_its_kind() {
    let server = server();
    let mut held = configmap("held");
    held["metadata"]["finalizers"] = json!(["example.com/hold"]);
    let created = create(&server, &format!("{NS}/configmaps"), held).await;
    let at = format!("{NS}/configmaps/held");
    for dry in [true, false] {
        let uri = if dry {
            format!("{at}?dryRun=All")
        } else {
            at.clone()
        };
        let (status, answer) = send(&server, "DELETE", &uri, &json!({})).await;
        assert_eq!(status, 200, "{answer}");
        assert_eq!(answer["kind"], "ConfigMap", "{uri}: {answer}");
        assert!(
            answer["metadata"]["deletionTimestamp"].is_string(),
            "{answer}"
        );
        // A dry run marks nothing: its answer is at the stored version.
        let stored = &created["metadata"]["resourceVersion"];
        assert_eq!(
            dry,
            answer["metadata"]["resourceVersion"] == *stored,
            "{answer}"
        );
    }
}

#[tokio::test]
async fn a_deletecollection_answers_with_the_list_it_read_before_deleting() {
    let server = server();
    let cms = format!("{NS}/configmaps");
    let labelled = |name: &str| {
        let mut cm = configmap(name);
        cm["metadata"]["labels"] = json!({"batch": "one"});
        cm
    };
    let mut held = labelled("b");
    held["metadata"]["finalizers"] = json!(["example.com/hold"]);
    let a = create(&server, &cms, labelled("a")).await;
    let b = create(&server, &cms, held).await;
    let (_, before) = send(&server, "GET", &cms, &json!({})).await;
    let selected = format!("{cms}?labelSelector=batch%3Done");
    let (status, answer) = send(&server, "DELETE", &selected, &json!({})).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["kind"], "ConfigMapList");
    assert_eq!(
        answer["metadata"]["resourceVersion"],
        before["metadata"]["resourceVersion"]
    );
    let items = answer["items"].as_array().cloned().unwrap_or_default();
    // The objects as they were: not the held one's deletion mark, not a's last version.
    assert_eq!(items, [a, b], "{answer}");
    let (_, after) = send(&server, "GET", &selected, &json!({})).await;
    assert_eq!(after["items"].as_array().map(Vec::len), Some(1), "{after}");
    assert!(after["items"][0]["metadata"]["deletionTimestamp"].is_string());
}

#[tokio::test]
async fn a_dry_run_create_answers_without_a_resource_version_and_can_be_created_for_real() {
    let server = server();
    let svcs = format!("{NS}/services");
    let (status, would) = send(
        &server,
        "POST",
        &format!("{svcs}?dryRun=All"),
        &service("s"),
    )
    .await;
    assert_eq!(status, 201, "{would}");
    let meta = &would["metadata"];
    assert!(meta.get("resourceVersion").is_none(), "{would}");
    // The rest is filled in as a real create fills it in.
    assert!(
        meta["uid"].is_string() && meta["creationTimestamp"].is_string(),
        "{would}"
    );
    assert!(meta["managedFields"].is_array(), "{would}");
    let (status, _) = send(&server, "GET", &format!("{svcs}/s"), &json!({})).await;
    assert_eq!(status, 404, "a dry run stores nothing");
    let (status, created) = send(&server, "POST", &svcs, &would).await;
    assert_eq!(
        status, 201,
        "the dry run's answer is a valid create: {created}"
    );
    assert!(created["metadata"]["resourceVersion"].is_string());
}

#[tokio::test]
async fn dry_run_updates_patches_and_applies_answer_at_the_stored_resource_version() {
    let server = server();
    let created = create(&server, &format!("{NS}/configmaps"), configmap("c")).await;
    let at = format!("{NS}/configmaps/c");
    let stored = &created["metadata"]["resourceVersion"];
    let mut changed = created.clone();
    changed["data"]["k"] = json!("put");
    let (status, put) = send(&server, "PUT", &format!("{at}?dryRun=All"), &changed).await;
    assert_eq!(status, 200, "{put}");
    assert_eq!(
        (&put["data"]["k"], &put["metadata"]["resourceVersion"]),
        (&json!("put"), stored)
    );
    let patch = json!({"data": {"k": "patched"}});
    let (status, patched) = send(&server, "PATCH", &format!("{at}?dryRun=All"), &patch).await;
    assert_eq!(status, 200, "{patched}");
    assert_eq!(
        (
            &patched["data"]["k"],
            &patched["metadata"]["resourceVersion"]
        ),
        (&json!("patched"), stored)
    );
    let applied = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"},
                         "data": {"k": "applied"}});
    let uri = format!("{at}?dryRun=All&fieldManager=applier&force=true");
    let answer = common::as_admin(
        &server,
        "PATCH",
        &uri,
        "application/apply-patch+yaml",
        applied.to_string(),
    )
    .await;
    let applied = answer.json();
    assert_eq!(answer.status, 200, "{applied}");
    assert_eq!(
        (
            &applied["data"]["k"],
            &applied["metadata"]["resourceVersion"]
        ),
        (&json!("applied"), stored)
    );
    let (_, now) = send(&server, "GET", &at, &json!({})).await;
    assert_eq!(
        (&now["data"]["k"], &now["metadata"]["resourceVersion"]),
        (&json!("v"), stored)
    );
}
