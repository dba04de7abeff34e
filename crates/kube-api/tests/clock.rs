//! Time is injected: timestamps and ages come from the server's clock, which a test moves.

mod common;
use common::server_on;
use http_body_util::{BodyExt, Full};
use infrasim_clock::FakeClock;
use infrasim_kube_api::{ApiServer, Identity};
use std::time::Duration;

/// Sends `req` as `identity` (none: only what the request itself carries); status and body.
async fn send(
    server: &ApiServer,
    req: http::request::Builder,
    body: &str,
    identity: Option<Identity>,
) -> (u16, serde_json::Value) {
    let req = req
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(Full::new(bytes::Bytes::from(body.to_string())))
        .unwrap();
    let resp = server.handle(req, identity).await;
    let status = resp.status().as_u16();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    (status, serde_json::from_slice(&bytes).unwrap_or_default())
}

/// A request as an administrator: its body.
async fn call(
    server: &ApiServer,
    method: &str,
    path: &str,
    accept: &str,
    body: &str,
) -> serde_json::Value {
    let req = http::Request::builder()
        .method(method)
        .uri(path)
        .header(http::header::ACCEPT, accept);
    let admin = Identity {
        user: "admin".into(),
        groups: vec!["system:masters".into()],
    };
    send(server, req, body, Some(admin)).await.1
}

#[tokio::test]
async fn timestamps_and_ages_follow_the_injected_clock() {
    let clock = FakeClock::new("2030-01-01T00:00:00Z".parse().unwrap());
    let server = server_on(&clock);

    let created = call(
        &server,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        "application/json",
        r#"{"metadata":{"name":"c"}}"#,
    )
    .await;
    assert_eq!(
        created["metadata"]["creationTimestamp"],
        "2030-01-01T00:00:00Z"
    );

    clock.advance(Duration::from_secs(3 * 3600 + 5 * 60));
    let table = call(
        &server,
        "GET",
        "/api/v1/namespaces/default/configmaps/c",
        "application/json;as=Table;v=v1;g=meta.k8s.io",
        "",
    )
    .await;
    assert_eq!(table["kind"], "Table");
    assert_eq!(table["columnDefinitions"][2]["name"], "Age");
    assert_eq!(
        table["rows"][0]["cells"],
        serde_json::json!(["c", 0, "3h5m"])
    );

    // Deletion is stamped by the same clock.
    call(
        &server,
        "PUT",
        "/api/v1/namespaces/default/configmaps/c",
        "application/json",
        r#"{"metadata":{"name":"c","finalizers":["x/y"]}}"#,
    )
    .await;
    let deleting = call(
        &server,
        "DELETE",
        "/api/v1/namespaces/default/configmaps/c",
        "application/json",
        "",
    )
    .await;
    assert_eq!(
        deleting["metadata"]["deletionTimestamp"],
        "2030-01-01T03:05:00Z"
    );
}

/// A POST with a bearer token and no client certificate: its status and body.
async fn call_with_token(
    server: &ApiServer,
    path: &str,
    token: &str,
    body: &str,
) -> (u16, serde_json::Value) {
    let req = http::Request::builder()
        .method("POST")
        .uri(path)
        .header(http::header::AUTHORIZATION, format!("Bearer {token}"));
    send(server, req, body, None).await
}

#[tokio::test]
async fn service_account_tokens_expire_on_the_clock() {
    let clock = FakeClock::new("2030-01-01T00:00:00Z".parse().unwrap());
    let server = server_on(&clock);
    call(
        &server,
        "POST",
        "/api/v1/namespaces/default/serviceaccounts",
        "application/json",
        r#"{"metadata":{"name":"robot"}}"#,
    )
    .await;
    let issued = call(
        &server,
        "POST",
        "/api/v1/namespaces/default/serviceaccounts/robot/token",
        "application/json",
        r#"{"apiVersion":"authentication.k8s.io/v1","kind":"TokenRequest","spec":{"expirationSeconds":600}}"#,
    )
    .await;
    assert_eq!(
        issued["status"]["expirationTimestamp"],
        "2030-01-01T00:10:00Z"
    );
    let token = issued["status"]["token"].as_str().unwrap().to_string();
    let review = r#"{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}"#;
    let path = "/apis/authentication.k8s.io/v1/selfsubjectreviews";
    let (status, who) = call_with_token(&server, path, &token, review).await;
    assert_eq!(status, 201);
    assert_eq!(
        who["status"]["userInfo"]["username"],
        "system:serviceaccount:default:robot"
    );
    // A second before expiry it still works, and for the minute of leeway kube-apiserver's
    // validator allows past it; a second later it no longer does.
    clock.advance(Duration::from_secs(599));
    assert_eq!(call_with_token(&server, path, &token, review).await.0, 201);
    clock.advance(Duration::from_secs(61));
    assert_eq!(call_with_token(&server, path, &token, review).await.0, 201);
    clock.advance(Duration::from_secs(1));
    let (status, refused) = call_with_token(&server, path, &token, review).await;
    assert_eq!(status, 401);
    assert_eq!(refused["reason"], "Unauthorized");
}
