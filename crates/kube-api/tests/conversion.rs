//! A CRD whose versions differ in shape, converted by its conversion webhook (an HTTPS
//! server in the test): `v1` (stored) keeps `spec.size`, `v2` keeps `spec.dimensions.size`.
//! Every verb and every read speaks the version it was asked in, through the webhook.

use base64::Engine;
use infrasim_clock::SystemClock;
use infrasim_kube_api::pki::CertificateAuthority;
use infrasim_kube_api::{ApiConfig, ApiServer};
use infrasim_store::{Store, StoreConfig};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

mod common;

/// v1 `spec.size` ⇄ v2 `spec.dimensions.size`.
fn convert(object: &Value, desired: &str) -> Value {
    let mut out = object.clone();
    let spec = object["spec"].clone();
    out["apiVersion"] = json!(desired);
    out["spec"] = if desired.ends_with("/v2") {
        match spec.get("size") {
            Some(size) => json!({"dimensions": {"size": size}}),
            None => spec,
        }
    } else {
        match spec.pointer("/dimensions/size") {
            Some(size) => json!({"size": size}),
            None => spec,
        }
    };
    out
}

async fn send(server: &ApiServer, method: &str, path: &str, body: Value) -> (u16, Value) {
    let content_type = if method == "PATCH" {
        "application/merge-patch+json"
    } else {
        "application/json"
    };
    let answer = common::as_admin(server, method, path, content_type, body.to_string()).await;
    (answer.status, answer.json())
}

#[tokio::test]
async fn every_verb_and_read_goes_through_the_conversion_webhook() {
    let store = Store::in_memory(StoreConfig::default());
    let group = store.create_group("g").expect("a group");
    let ca = CertificateAuthority::generate("ca").expect("a CA");
    let server = ApiServer::new(group, ca, SystemClock::shared(), ApiConfig::default());
    let webhook_ca = CertificateAuthority::generate("webhook-ca").expect("a CA");
    let up = Arc::new(AtomicBool::new(true));
    let webhook_up = up.clone();
    let port = common::https_json_server(&webhook_ca, move |_, review| {
        let request = &review["request"];
        let desired = request["desiredAPIVersion"].as_str().unwrap_or("");
        let result = if webhook_up.load(Ordering::SeqCst) {
            json!({"status": "Success"})
        } else {
            json!({"status": "Failure", "message": "the converter is down"})
        };
        let converted: Vec<Value> = request["objects"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|o| convert(o, desired))
            .collect();
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
               "response": {"uid": request["uid"], "convertedObjects": converted, "result": result}})
    })
    .await;
    let bundle = base64::engine::general_purpose::STANDARD.encode(&webhook_ca.cert_pem);
    let schema = json!({"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}});
    let mut crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.conv.example.com"},
        "spec": {"group": "conv.example.com", "scope": "Namespaced",
                 "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                 "versions": [{"name": "v1", "served": true, "storage": true, "schema": schema},
                              {"name": "v2", "served": true, "storage": false, "schema": schema}],
                 "conversion": {"strategy": "Webhook", "webhook": {"conversionReviewVersions": ["v1"]}}}
    });
    let crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
    // Webhook conversion without a client configuration is an invalid CRD.
    let (status, refused) = send(&server, "POST", crds, crd.clone()).await;
    assert_eq!(status, 422, "{refused}");
    crd["spec"]["conversion"]["webhook"]["clientConfig"] =
        json!({"url": format!("https://127.0.0.1:{port}/convert"), "caBundle": bundle});
    let (status, made) = send(&server, "POST", crds, crd).await;
    assert_eq!(status, 201, "{made}");

    let v1 = "/apis/conv.example.com/v1/namespaces/default/widgets";
    let v2 = "/apis/conv.example.com/v2/namespaces/default/widgets";
    let (status, created) = send(
        &server,
        "POST",
        v2,
        json!({"apiVersion": "conv.example.com/v2",
        "kind": "Widget", "metadata": {"name": "w"}, "spec": {"dimensions": {"size": 3}}}),
    )
    .await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(
        created["spec"],
        json!({"dimensions": {"size": 3}}),
        "answered in v2"
    );
    let (_, stored) = send(&server, "GET", &format!("{v1}/w"), json!({})).await;
    assert_eq!(
        (stored["apiVersion"].as_str(), &stored["spec"]),
        (Some("conv.example.com/v1"), &json!({"size": 3})),
        "stored in v1"
    );

    let (status, patched) = send(
        &server,
        "PATCH",
        &format!("{v2}/w"),
        json!({"spec": {"dimensions": {"size": 5}}}),
    )
    .await;
    assert_eq!(
        (status, &patched["spec"]),
        (200, &json!({"dimensions": {"size": 5}})),
        "{patched}"
    );
    let (_, stored) = send(&server, "GET", &format!("{v1}/w"), json!({})).await;
    assert_eq!(stored["spec"], json!({"size": 5}));

    let (_, listed) = send(&server, "GET", v2, json!({})).await;
    assert_eq!(
        listed["items"][0]["spec"],
        json!({"dimensions": {"size": 5}})
    );
    let (_, watched) = send(
        &server,
        "GET",
        &format!("{v2}?watch=true&timeoutSeconds=1"),
        json!({}),
    )
    .await;
    assert_eq!(
        (watched["type"].as_str(), &watched["object"]["spec"]),
        (Some("ADDED"), &json!({"dimensions": {"size": 5}})),
        "{watched}"
    );

    // A webhook that fails fails the read, with kube-apiserver's words.
    up.store(false, Ordering::SeqCst);
    let (status, failed) = send(&server, "GET", &format!("{v2}/w"), json!({})).await;
    assert_eq!(status, 500, "{failed}");
    assert_eq!(
        failed["message"],
        "conversion webhook for conv.example.com/v2, Kind=Widget failed: the converter is down"
    );
    // The stored version needs no conversion.
    let (status, _) = send(&server, "GET", &format!("{v1}/w"), json!({})).await;
    assert_eq!(status, 200);
}
