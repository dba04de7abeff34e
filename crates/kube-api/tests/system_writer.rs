//! In-process writers (the simulated controllers, kubeadm's bootstrap) go through the same
//! write path as a client's request: defaults, the spec/status split, managedFields under
//! their own field manager, validation, admission webhooks, and the delete path's checks.

use futures::future::BoxFuture;
use infrasim_clock::SystemClock;
use infrasim_kube_api::pki::CertificateAuthority;
use infrasim_kube_api::webhook::InProcessWebhook;
use infrasim_kube_api::{ApiConfig, ApiServer, Identity, SystemWriter};
use infrasim_store::{Read, Store, StoreConfig};
use serde_json::{json, Value};
use std::sync::Arc;

fn server() -> ApiServer {
    let store = Store::in_memory(StoreConfig::default());
    let group = store.create_group("g").expect("a group");
    let ca = CertificateAuthority::generate("ca").expect("a CA");
    ApiServer::new(group, ca, SystemClock::shared(), ApiConfig::default())
}

fn controller_manager(server: &ApiServer) -> SystemWriter {
    let identity = Identity {
        user: "system:kube-controller-manager".into(),
        groups: vec!["system:authenticated".into()],
    };
    server.system_writer(identity, "kube-controller-manager")
}

fn pod(name: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": {"app": "web"}},
        "spec": {"containers": [{"name": "c", "image": "nginx"}]},
        "status": {"phase": "Running"},
    })
}

fn managers(object: &Value) -> Vec<(String, String)> {
    object["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|m| {
            let manager = m["manager"].as_str().unwrap_or("").to_string();
            let sub = m["subresource"].as_str().unwrap_or("").to_string();
            (manager, sub)
        })
        .collect()
}

#[tokio::test]
async fn a_create_is_defaulted_split_and_owned_by_the_writer() {
    let server = server();
    let writer = controller_manager(&server);
    let created = writer.create("pods", pod("web-1")).expect("created");
    let value = created.to_value().unwrap();
    // The status is the kubelet's to write: a create drops it and defaults the phase.
    assert_eq!(value["status"]["phase"], "Pending");
    assert_eq!(value["spec"]["restartPolicy"], "Always");
    assert_eq!(
        managers(&value),
        vec![("kube-controller-manager".to_string(), String::new())]
    );
}

#[tokio::test]
async fn status_goes_through_the_status_subresource_only() {
    let server = server();
    let writer = controller_manager(&server);
    let created = writer.create("pods", pod("web-1")).unwrap();
    let old = created.to_value().unwrap();

    // Through the main resource a status change is dropped, and a label change kept.
    let mut next = old.clone();
    next["status"]["phase"] = json!("Running");
    next["metadata"]["labels"]["tier"] = json!("front");
    let read = Read {
        object: &created,
        value: &old,
    };
    let updated = writer.update("pods", next, read).unwrap();
    let value = updated.to_value().unwrap();
    assert_eq!(value["status"]["phase"], "Pending");
    assert_eq!(value["metadata"]["labels"]["tier"], "front");

    let kubelet = writer.as_component(
        Identity {
            user: "system:node:n1".into(),
            groups: vec!["system:nodes".into()],
        },
        "kubelet",
    );
    let mut next = value.clone();
    next["status"]["phase"] = json!("Running");
    next["metadata"]["labels"]["tier"] = json!("back");
    let read = Read {
        object: &updated,
        value: &value,
    };
    let value = kubelet
        .update_status("pods", next, read)
        .unwrap()
        .to_value()
        .unwrap();
    assert_eq!(value["status"]["phase"], "Running");
    assert_eq!(value["metadata"]["labels"]["tier"], "front");
    assert!(managers(&value).contains(&("kubelet".to_string(), "status".to_string())));
}

#[tokio::test]
async fn a_stale_read_is_a_conflict_and_an_invalid_object_is_refused() {
    let server = server();
    let writer = controller_manager(&server);
    let created = writer.create("pods", pod("web-1")).unwrap();
    let old = created.to_value().unwrap();
    let read = Read {
        object: &created,
        value: &old,
    };
    let mut labelled = old.clone();
    labelled["metadata"]["labels"]["tier"] = json!("front");
    writer.update("pods", labelled, read).unwrap();
    // An update over the version read before that one is refused.
    let read = Read {
        object: &created,
        value: &old,
    };
    let stale = writer.update("pods", old.clone(), read).unwrap_err();
    assert_eq!(stale.code, 409);

    let bad = writer.create("pods", pod("Not_A_Name")).unwrap_err();
    assert_eq!(bad.code, 422, "{}", bad.message);
    let mut immutable = old.clone();
    // A pod's containers may change their image and nothing else.
    immutable["spec"]["containers"][0]["command"] = json!(["sleep", "1"]);
    let current = server.group().get("pods", &created.meta.key()).unwrap();
    let value = current.to_value().unwrap();
    immutable["metadata"] = value["metadata"].clone();
    let read = Read {
        object: &current,
        value: &value,
    };
    assert_eq!(
        writer.update("pods", immutable, read).unwrap_err().code,
        422
    );
}

#[tokio::test]
async fn deletes_take_the_delete_path() {
    let server = server();
    let writer = controller_manager(&server);
    let refused = writer.delete("namespaces", "", "kube-system").unwrap_err();
    assert_eq!(refused.code, 403);
    writer.create("pods", pod("web-1")).unwrap();
    writer.delete("pods", "default", "web-1").unwrap();
    assert_eq!(
        writer.delete("pods", "default", "web-1").unwrap_err().code,
        404
    );
}

/// A validating webhook that refuses every pod named `refused-*`.
struct RefuseByName;

impl InProcessWebhook for RefuseByName {
    fn review(&self, _path: &str, body: Value) -> BoxFuture<'static, Result<Value, String>> {
        Box::pin(async move {
            // Answer later than the first poll, as a real webhook over a socket would.
            tokio::task::yield_now().await;
            let request = &body["request"];
            let name = request["name"].as_str().unwrap_or("");
            let allowed = !name.starts_with("refused-");
            Ok(json!({
                "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                "response": {"uid": request["uid"], "allowed": allowed,
                             "status": {"message": "no refused pods here", "code": 403}},
            }))
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admission_webhooks_see_in_process_writes() {
    let server = server();
    server.serve_webhook_in_process("default", "refuser", Arc::new(RefuseByName));
    let writer = controller_manager(&server);
    let config = json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "refuser"},
        "webhooks": [{
            "name": "refuser.example.com",
            "clientConfig": {"service": {"namespace": "default", "name": "refuser", "path": "/"},
                             "caBundle": ""},
            "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                       "resources": ["pods"]}],
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
        }],
    });
    writer
        .create(
            "validatingwebhookconfigurations.admissionregistration.k8s.io",
            config,
        )
        .expect("the configuration");
    // The writer's thread blocks on the webhook's answer (the runtime has another worker).
    let writer_on_a_task = writer.clone();
    let refused = tokio::spawn(async move {
        writer_on_a_task
            .create("pods", pod("refused-1"))
            .unwrap_err()
    })
    .await
    .unwrap();
    assert_eq!(refused.code, 403, "{}", refused.message);
    assert!(
        refused.message.contains("no refused pods here"),
        "{}",
        refused.message
    );
    writer.create("pods", pod("allowed-1")).expect("allowed");
}

#[tokio::test]
async fn a_scheduler_binds_a_pod_once() {
    let server = server();
    let writer = controller_manager(&server);
    writer.create("pods", pod("web-1")).unwrap();
    let scheduler = writer.as_component(
        Identity {
            user: "system:kube-scheduler".into(),
            groups: vec!["system:authenticated".into()],
        },
        "kube-scheduler",
    );
    let bound = scheduler.bind("default", "web-1", "node-1").unwrap();
    let value = bound.to_value().unwrap();
    assert_eq!(value["spec"]["nodeName"], "node-1");
    let scheduled = value["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "PodScheduled")
        .cloned()
        .unwrap();
    assert_eq!(scheduled["status"], "True");
    let again = scheduler.bind("default", "web-1", "node-2").unwrap_err();
    assert_eq!(again.code, 409, "{}", again.message);
    assert!(again
        .message
        .contains("already assigned to node \"node-1\""));
    // Through an update, the node is as immutable as the rest of the spec.
    let current = server.group().get("pods", &bound.meta.key()).unwrap();
    let old = current.to_value().unwrap();
    let mut moved = old.clone();
    moved["spec"]["nodeName"] = json!("node-2");
    let read = Read {
        object: &current,
        value: &old,
    };
    assert_eq!(writer.update("pods", moved, read).unwrap_err().code, 422);
}

mod common;

/// `method path` with a JSON `body` as an administrator: status and body.
async fn admin(server: &ApiServer, method: &str, path: &str, body: Value) -> (u16, Value) {
    let answer = common::as_admin(server, method, path, "application/json", body.to_string()).await;
    (answer.status, answer.json())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_servers_own_controllers_write_as_themselves() {
    let server = server();
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}});
    assert_eq!(
        admin(&server, "POST", "/api/v1/namespaces", ns).await.0,
        201
    );
    // The root CA publisher's ConfigMap is kube-controller-manager's, as in a real cluster.
    let (_, ca) = admin(
        &server,
        "GET",
        "/api/v1/namespaces/team/configmaps/kube-root-ca.crt",
        Value::Null,
    )
    .await;
    assert_eq!(
        managers(&ca),
        vec![("kube-controller-manager".to_string(), String::new())]
    );

    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
                 "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                 "versions": [{"name": "v1", "served": true, "storage": true,
                               "schema": {"openAPIV3Schema": {"type": "object"}}}]},
    });
    let path = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
    assert_eq!(admin(&server, "POST", path, crd).await.0, 201);
    let (_, crd) = admin(
        &server,
        "GET",
        &format!("{path}/widgets.example.com"),
        Value::Null,
    )
    .await;
    // Its status (Established) is kube-apiserver's, written through `status`.
    assert!(managers(&crd).contains(&("kube-apiserver".to_string(), "status".to_string())));
}

#[tokio::test]
async fn finalize_changes_only_a_namespaces_finalizers() {
    let server = server();
    let ns = json!({"apiVersion": "v1", "kind": "Namespace",
                    "metadata": {"name": "team", "labels": {"a": "b"}}});
    assert_eq!(
        admin(&server, "POST", "/api/v1/namespaces", ns).await.0,
        201
    );
    let (_, mut ns) = admin(&server, "GET", "/api/v1/namespaces/team", Value::Null).await;
    assert_eq!(ns["spec"]["finalizers"], json!(["kubernetes"]));
    ns["spec"]["finalizers"] = json!([]);
    ns["metadata"]["labels"]["a"] = json!("changed");
    let (code, finalized) = admin(&server, "PUT", "/api/v1/namespaces/team/finalize", ns).await;
    assert_eq!(code, 200, "{finalized}");
    assert_eq!(finalized["spec"]["finalizers"], json!([]));
    assert_eq!(finalized["metadata"]["labels"]["a"], "b");
}

/// A scheduler that binds the pod it read answers with the bound pod's JSON as stored; a
/// read gone stale (the pod written since) binds the stored pod instead, as a client's
/// binding does.
#[tokio::test]
async fn a_scheduler_binds_the_pod_it_read() {
    let server = server();
    let writer = controller_manager(&server);
    let scheduler = writer.as_component(
        Identity {
            user: "system:kube-scheduler".into(),
            groups: vec!["system:authenticated".into()],
        },
        "kube-scheduler",
    );
    let created = writer.create_decoded("pods", pod("web-1")).unwrap();
    let bound = scheduler.bind_decoded(created.read(), "node-1").unwrap();
    assert_eq!(bound.value, bound.object.to_value().unwrap());
    assert_eq!(bound.value["spec"]["nodeName"], "node-1");
    assert!(bound.object.meta.resource_version > created.object.meta.resource_version);

    let stale = writer.create_decoded("pods", pod("web-2")).unwrap();
    let mut labelled = stale.value.clone();
    labelled["metadata"]["labels"] = json!({"tier": "web"});
    writer.update("pods", labelled, stale.read()).unwrap();
    let bound = scheduler.bind_decoded(stale.read(), "node-2").unwrap();
    assert_eq!(bound.value, bound.object.to_value().unwrap());
    assert_eq!(bound.value["spec"]["nodeName"], "node-2");
    assert_eq!(bound.value["metadata"]["labels"]["tier"], "web");
}
