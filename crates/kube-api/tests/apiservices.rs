//! APIServices as kube-apiserver keeps them: a local one for every served group version
//! (built-in ones at start, a CRD's as it comes and goes), always Available; one naming a
//! Service refused unless named `version.group`, its port defaulted, and its availability
//! in the availability controller's words; kubectl's columns.

use infrasim_clock::SystemClock;
use infrasim_kube_api::pki::CertificateAuthority;
use infrasim_kube_api::{ApiConfig, ApiServer};
use infrasim_store::{Store, StoreConfig};
use serde_json::{json, Value};

mod common;

const APISERVICES: &str = "/apis/apiregistration.k8s.io/v1/apiservices";

fn server() -> ApiServer {
    let store = Store::in_memory(StoreConfig::default());
    let group = store.create_group("g").expect("a group");
    let ca = CertificateAuthority::generate("ca").expect("a CA");
    ApiServer::new(group, ca, SystemClock::shared(), ApiConfig::default())
}

async fn send(server: &ApiServer, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
    let body = body.map(Value::to_string).unwrap_or_default();
    let answer = common::as_admin(server, method, path, "application/json", body).await;
    (answer.status, answer.json())
}

fn available(apiservice: &Value) -> (String, String, String) {
    let c = &apiservice["status"]["conditions"][0];
    assert_eq!(c["type"], "Available", "{apiservice}");
    let text = |k: &str| c[k].as_str().unwrap_or("").to_string();
    (text("status"), text("reason"), text("message"))
}

#[tokio::test]
async fn every_built_in_group_version_has_a_local_apiservice() {
    let server = server();
    let (status, core) = send(&server, "GET", &format!("{APISERVICES}/v1."), None).await;
    assert_eq!(status, 200, "{core}");
    assert_eq!(core["spec"]["group"], "");
    assert_eq!(core["spec"]["groupPriorityMinimum"], 18000);
    assert_eq!(
        core["metadata"]["labels"]["kube-aggregator.kubernetes.io/automanaged"],
        "onstart"
    );
    assert_eq!(
        available(&core),
        (
            "True".into(),
            "Local".into(),
            "Local APIServices are always available".into()
        )
    );
    let (_, apps) = send(&server, "GET", &format!("{APISERVICES}/v1.apps"), None).await;
    assert_eq!(apps["spec"]["versionPriority"], 15, "{apps}");
}

#[tokio::test]
async fn a_crd_s_group_versions_come_and_go_with_it() {
    let server = server();
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
                 "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                 "versions": [{"name": "v1", "served": true, "storage": true,
                               "schema": {"openAPIV3Schema": {"type": "object"}}}]},
    });
    let crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
    let (status, _) = send(&server, "POST", crds, Some(&crd)).await;
    assert_eq!(status, 201);
    let path = format!("{APISERVICES}/v1.example.com");
    let (status, local) = send(&server, "GET", &path, None).await;
    assert_eq!(status, 200, "{local}");
    assert_eq!(
        local["metadata"]["labels"]["kube-aggregator.kubernetes.io/automanaged"],
        "true"
    );
    assert_eq!(
        (
            &local["spec"]["groupPriorityMinimum"],
            &local["spec"]["versionPriority"]
        ),
        (&json!(1000), &json!(100))
    );
    let (status, _) = send(
        &server,
        "DELETE",
        &format!("{crds}/widgets.example.com"),
        None,
    )
    .await;
    assert_eq!(status, 200);
    for _ in 0..100 {
        if send(&server, "GET", &path, None).await.0 == 404 {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("the APIService of a deleted CRD's group version stayed");
}

fn remote(name: &str) -> Value {
    json!({
        "apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
        "metadata": {"name": name},
        "spec": {"group": "wardle.example.com", "version": "v1alpha1",
                 "groupPriorityMinimum": 1000, "versionPriority": 15,
                 "insecureSkipTLSVerify": true,
                 "service": {"namespace": "wardle", "name": "api"}},
    })
}

#[tokio::test]
async fn an_aggregated_api_is_checked_and_reported_unavailable() {
    let server = server();
    let (status, refused) = send(&server, "POST", APISERVICES, Some(&remote("wrong"))).await;
    assert_eq!(status, 422, "{refused}");
    let message = refused["message"].as_str().unwrap_or("");
    assert!(
        message.contains(
            r#"metadata.name: Invalid value: "wrong": must be `spec.version+"."+spec.group`: "v1alpha1.wardle.example.com""#
        ),
        "{message}"
    );
    let name = "v1alpha1.wardle.example.com";
    let (status, created) = send(&server, "POST", APISERVICES, Some(&remote(name))).await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(created["spec"]["service"]["port"], 443);
    let (state, reason, message) = available(&created);
    assert_eq!(
        (state.as_str(), reason.as_str()),
        ("False", "ServiceNotFound")
    );
    assert_eq!(message, r#"service/api in "wardle" is not present"#);
    // kubectl's columns.
    let table = common::as_admin_accepting(
        &server,
        &format!("{APISERVICES}/{name}"),
        "application/json;as=Table;v=v1;g=meta.k8s.io",
    )
    .await
    .json();
    let columns: Vec<&str> = table["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(columns, ["Name", "Service", "Available", "Age"]);
    assert_eq!(table["rows"][0]["cells"][1], "wardle/api");
    assert_eq!(table["rows"][0]["cells"][2], "False (ServiceNotFound)");
}
