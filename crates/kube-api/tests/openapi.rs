//! The OpenAPI documents: v3 per group/version (what kubectl reads) and v2 in JSON.

use http_body_util::{BodyExt, Full};
use infrasim_kube_api::pki::CertificateAuthority;
use infrasim_kube_api::{ApiConfig, ApiServer, Identity};
use infrasim_store::{Store, StoreConfig};

async fn get(server: &ApiServer, path: &str, accept: &str) -> (u16, serde_json::Value) {
    let req = http::Request::get(path)
        .header(http::header::ACCEPT, accept)
        .body(Full::new(bytes::Bytes::new()))
        .unwrap();
    let admin = Identity {
        user: "admin".into(),
        groups: vec!["system:masters".into()],
    };
    let resp = server.handle(req, Some(admin)).await;
    let status = resp.status().as_u16();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(serde_json::Value::Null),
    )
}

#[tokio::test]
async fn v2_and_v3_documents_describe_the_kinds() {
    let store = Store::in_memory(StoreConfig::default());
    let group = store.create_group("g").unwrap();
    let ca = CertificateAuthority::generate("ca").unwrap();
    let server = ApiServer::new(group, ca, store.clock().clone(), ApiConfig::default());

    let (code, v2) = get(&server, "/openapi/v2", "application/json").await;
    assert_eq!(code, 200);
    assert_eq!(v2["swagger"], "2.0");
    let deployment = &v2["definitions"]["io.k8s.api.apps.v1.Deployment"];
    assert_eq!(
        deployment["x-kubernetes-group-version-kind"][0]["kind"],
        "Deployment"
    );
    assert!(
        v2["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]["patch"].is_object()
    );
    // Protobuf when asked for it (the body is not JSON, so `get` reads it as null); an
    // unknown media type is 406.
    let (code, _) = get(
        &server,
        "/openapi/v2",
        "application/com.github.proto-openapi.spec.v2@v1.0+protobuf",
    )
    .await;
    assert_eq!(code, 200);
    let (code, _) = get(&server, "/openapi/v2", "application/xml").await;
    assert_eq!(code, 406);
    // Swagger 2.0 puts $ref beside a field's description (no allOf), as kube-apiserver does.
    let spec = &deployment["properties"]["spec"];
    assert_eq!(
        spec["$ref"],
        "#/definitions/io.k8s.api.apps.v1.DeploymentSpec"
    );
    assert!(spec.get("allOf").is_none());

    let (code, index) = get(&server, "/openapi/v3", "application/json").await;
    assert_eq!(code, 200);
    let url = index["paths"]["apis/apps/v1"]["serverRelativeURL"]
        .as_str()
        .unwrap()
        .to_string();
    let (code, v3) = get(&server, &url, "application/json").await;
    assert_eq!(code, 200);
    let schema = &v3["components"]["schemas"]["io.k8s.api.apps.v1.Deployment"];
    assert_eq!(
        schema["x-kubernetes-group-version-kind"][0]["group"],
        "apps"
    );
    assert!(schema["properties"]["spec"]["allOf"][0]["$ref"]
        .as_str()
        .unwrap()
        .starts_with("#/components/schemas/"));
}
