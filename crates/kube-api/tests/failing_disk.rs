//! A disk that fails under the durable backend: the write being made is answered with a
//! Kubernetes `Status` 500 naming the cause and nothing of it is applied, reads keep working,
//! and writes are served again once the disk is.

use infrasim_clock::SystemClock;
use infrasim_durable::{DurableBackend, Faults};
use infrasim_kube_api::pki::CertificateAuthority;
use infrasim_kube_api::{ApiConfig, ApiServer};
use infrasim_store::{Store, StoreConfig};
use serde_json::json;
use std::sync::Arc;

mod common;

#[tokio::test]
async fn a_failing_disk_answers_500_applies_nothing_and_recovers() {
    let dir = tempfile::tempdir().expect("a directory");
    let faults = Faults::none();
    let backend = DurableBackend::open_with(dir.path(), 100, faults.clone()).expect("opened");
    let store = Store::open(
        StoreConfig::default(),
        SystemClock::shared(),
        Arc::new(backend),
    )
    .expect("a store");
    let group = store.create_group("g").expect("a group");
    let ca = CertificateAuthority::generate("ca").expect("a CA");
    let server = ApiServer::new(group, ca, SystemClock::shared(), ApiConfig::default());
    let path = "/api/v1/namespaces/default/configmaps";
    let cm = |name: &str| {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}}).to_string()
    };
    let post = |name: &str| common::as_admin(&server, "POST", path, "application/json", cm(name));

    assert_eq!(post("before").await.status, 201);
    faults.set_failing(true);
    let refused = post("during").await;
    assert_eq!(refused.status, 500);
    let status = refused.json();
    assert_eq!(
        (status["kind"].as_str(), status["code"].as_i64()),
        (Some("Status"), Some(500))
    );
    let message = status["message"].as_str().unwrap_or_default();
    assert!(message.contains("No space left on device"), "{message}");
    let read = common::as_admin(&server, "GET", &format!("{path}/during"), "", String::new()).await;
    assert_eq!(read.status, 404, "nothing applied");
    let listed = common::as_admin(&server, "GET", path, "", String::new()).await;
    assert_eq!(listed.status, 200, "reads keep working");
    faults.set_failing(false);
    assert_eq!(
        post("during").await.status,
        201,
        "served again once the disk is"
    );
}
