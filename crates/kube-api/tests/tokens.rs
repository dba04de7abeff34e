//! Service-account tokens: JWTs from TokenRequest, checked on use and by TokenReview as
//! kube-apiserver checks them (signature, audience, time, and the objects they name).

mod common;
use base64::Engine;
use common::server_on;
use http_body_util::{BodyExt, Full};
use infrasim_clock::FakeClock;
use infrasim_kube_api::pki::SigningKey;
use infrasim_kube_api::{ApiServer, Identity};
use serde_json::{json, Value};
use std::time::Duration;

/// One request, as the administrator or with a bearer token; status and body.
async fn send(
    server: &ApiServer,
    method: &str,
    path: &str,
    body: Value,
    token: Option<&str>,
) -> (u16, Value) {
    let mut req = http::Request::builder()
        .method(method)
        .uri(path)
        .header(http::header::CONTENT_TYPE, "application/json");
    if let Some(token) = token {
        req = req.header(http::header::AUTHORIZATION, format!("Bearer {token}"));
    }
    let admin = Identity {
        user: "admin".into(),
        groups: vec!["system:masters".into()],
    };
    let req = req
        .body(Full::new(bytes::Bytes::from(body.to_string())))
        .unwrap();
    let resp = server.handle(req, token.is_none().then_some(admin)).await;
    let status = resp.status().as_u16();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    (status, serde_json::from_slice(&bytes).unwrap_or_default())
}

async fn admin(server: &ApiServer, method: &str, path: &str, body: Value) -> Value {
    let (status, body) = send(server, method, path, body, None).await;
    assert!(status < 300, "{method} {path}: {status} {body}");
    body
}

/// A token for `default/<sa>` with `spec`; the TokenRequest answer.
async fn request_token(server: &ApiServer, sa: &str, spec: Value) -> (u16, Value) {
    let path = format!("/api/v1/namespaces/default/serviceaccounts/{sa}/token");
    let body =
        json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec});
    send(server, "POST", &path, body, None).await
}

async fn token_for(server: &ApiServer, sa: &str, spec: Value) -> String {
    let (status, issued) = request_token(server, sa, spec).await;
    assert_eq!(status, 201, "{issued}");
    issued["status"]["token"].as_str().unwrap().to_string()
}

/// What the token's bearer is, by SelfSubjectReview: (status, username).
async fn whoami(server: &ApiServer, token: &str) -> (u16, Value) {
    let review = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"});
    let path = "/apis/authentication.k8s.io/v1/selfsubjectreviews";
    let (status, body) = send(server, "POST", path, review, Some(token)).await;
    (status, body["status"]["userInfo"]["username"].clone())
}

async fn review(server: &ApiServer, token: &str, audiences: &[&str]) -> Value {
    let body = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
                      "spec": {"token": token, "audiences": audiences}});
    let path = "/apis/authentication.k8s.io/v1/tokenreviews";
    admin(server, "POST", path, body).await["status"].clone()
}

fn part(token: &str, i: usize) -> Value {
    let raw = token.split('.').nth(i).unwrap();
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(raw)
        .unwrap();
    serde_json::from_slice(&bytes).unwrap()
}

async fn with_service_account(server: &ApiServer, name: &str) -> Value {
    let sa = json!({"metadata": {"name": name}});
    admin(
        server,
        "POST",
        "/api/v1/namespaces/default/serviceaccounts",
        sa,
    )
    .await
}

fn clock() -> FakeClock {
    FakeClock::new("2030-01-01T00:00:00Z".parse().unwrap())
}

#[tokio::test]
async fn tokens_are_jwts_with_kube_apiserver_claims() {
    let clock = clock();
    let server = server_on(&clock);
    let sa = with_service_account(&server, "robot").await;
    let token = token_for(&server, "robot", json!({})).await;
    let header = part(&token, 0);
    assert_eq!(header["alg"], "ES256");
    assert!(
        header["kid"].as_str().is_some_and(|k| k.len() == 43),
        "{header}"
    );
    let claims = part(&token, 1);
    assert_eq!(
        claims["iss"],
        "https://kubernetes.default.svc.cluster.local"
    );
    assert_eq!(
        claims["aud"],
        json!(["https://kubernetes.default.svc.cluster.local"])
    );
    assert_eq!(claims["sub"], "system:serviceaccount:default:robot");
    assert_eq!(claims["iat"], 1_893_456_000);
    assert_eq!(claims["exp"], 1_893_456_000 + 3600);
    assert_eq!(
        claims["kubernetes.io"],
        json!({"namespace": "default", "serviceaccount": {"name": "robot",
               "uid": sa["metadata"]["uid"]}})
    );
    assert_eq!(
        whoami(&server, &token).await.1,
        "system:serviceaccount:default:robot"
    );

    let status = review(&server, &token, &[]).await;
    assert_eq!(status["authenticated"], true);
    assert_eq!(status["user"]["uid"], sa["metadata"]["uid"]);
    assert_eq!(
        status["user"]["groups"],
        json!([
            "system:serviceaccounts",
            "system:serviceaccounts:default",
            "system:authenticated"
        ])
    );
    let jti = claims["jti"].as_str().unwrap();
    assert_eq!(
        status["user"]["extra"]["authentication.kubernetes.io/credential-id"],
        json!([format!("JTI={jti}")])
    );
}

#[tokio::test]
async fn audiences_decide_where_a_token_is_accepted() {
    let clock = clock();
    let server = server_on(&clock);
    with_service_account(&server, "robot").await;
    let vault = token_for(&server, "robot", json!({"audiences": ["vault"]})).await;
    assert_eq!(part(&vault, 1)["aud"], json!(["vault"]));
    // Not for the API server itself...
    assert_eq!(whoami(&server, &vault).await.0, 401);
    // ...but a TokenReview for its audience accepts it.
    let status = review(&server, &vault, &["vault", "other"]).await;
    assert_eq!(status["authenticated"], true, "{status}");
    assert_eq!(status["audiences"], json!(["vault"]));
    let status = review(&server, &vault, &[]).await;
    assert_eq!(status.get("authenticated"), None, "{status}");
    assert!(status["error"]
        .as_str()
        .unwrap()
        .contains("invalid for the target audiences"));
}

#[tokio::test]
async fn a_token_dies_with_its_service_account() {
    let clock = clock();
    let server = server_on(&clock);
    with_service_account(&server, "robot").await;
    let token = token_for(&server, "robot", json!({})).await;
    assert_eq!(whoami(&server, &token).await.0, 201);
    let path = "/api/v1/namespaces/default/serviceaccounts/robot";
    admin(&server, "DELETE", path, json!({})).await;
    // A successful authentication is remembered for ten seconds, as kube-apiserver does.
    clock.advance(Duration::from_secs(11));
    assert_eq!(whoami(&server, &token).await.0, 401);
    // A new account of the same name has another UID: the old token does not open it.
    with_service_account(&server, "robot").await;
    assert_eq!(whoami(&server, &token).await.0, 401);
    let status = review(&server, &token, &[]).await;
    assert!(
        status["error"]
            .as_str()
            .unwrap()
            .contains("does not match claim"),
        "{status}"
    );
}

#[tokio::test]
async fn tokens_bound_to_a_pod_name_it_and_its_node_and_die_with_it() {
    let clock = clock();
    let server = server_on(&clock);
    with_service_account(&server, "robot").await;
    let node = admin(
        &server,
        "POST",
        "/api/v1/nodes",
        json!({"metadata": {"name": "n1"}}),
    )
    .await;
    let pod = json!({"metadata": {"name": "p"}, "spec": {"serviceAccountName": "robot",
        "nodeName": "n1", "containers": [{"name": "c", "image": "i"}]}});
    let pod = admin(&server, "POST", "/api/v1/namespaces/default/pods", pod).await;
    let bound = json!({"boundObjectRef": {"kind": "Pod", "apiVersion": "v1", "name": "p"}});
    let token = token_for(&server, "robot", bound).await;
    let claims = part(&token, 1);
    assert_eq!(
        claims["kubernetes.io"]["pod"],
        json!({"name": "p", "uid": pod["metadata"]["uid"]})
    );
    assert_eq!(
        claims["kubernetes.io"]["node"],
        json!({"name": "n1", "uid": node["metadata"]["uid"]})
    );
    let extra = review(&server, &token, &[]).await["user"]["extra"].clone();
    assert_eq!(extra["authentication.kubernetes.io/pod-name"], json!(["p"]));
    assert_eq!(
        extra["authentication.kubernetes.io/node-name"],
        json!(["n1"])
    );

    // A pod running as another account cannot be bound; nor can a missing one.
    let pod =
        json!({"metadata": {"name": "q"}, "spec": {"containers": [{"name": "c", "image": "i"}]}});
    admin(&server, "POST", "/api/v1/namespaces/default/pods", pod).await;
    let other = json!({"boundObjectRef": {"kind": "Pod", "apiVersion": "v1", "name": "q"}});
    assert_eq!(request_token(&server, "robot", other).await.0, 400);
    let missing = json!({"boundObjectRef": {"kind": "Pod", "apiVersion": "v1", "name": "nope"}});
    assert_eq!(request_token(&server, "robot", missing).await.0, 404);

    let path = "/api/v1/namespaces/default/pods/p";
    admin(&server, "DELETE", path, json!({"gracePeriodSeconds": 0})).await;
    clock.advance(Duration::from_secs(11));
    assert_eq!(whoami(&server, &token).await.0, 401);
}

#[tokio::test]
async fn lifetimes_are_bounded_as_kube_apiserver_bounds_them() {
    let clock = clock();
    let server = server_on(&clock);
    with_service_account(&server, "robot").await;
    let (status, body) = request_token(&server, "robot", json!({"expirationSeconds": 599})).await;
    assert_eq!(
        (status, body["reason"].as_str()),
        (422, Some("Invalid")),
        "{body}"
    );
    assert_eq!(
        body["details"]["causes"][0]["field"],
        "spec.expirationSeconds"
    );
    let (status, _) = request_token(&server, "nobody", json!({})).await;
    assert_eq!(status, 404);
}

#[tokio::test]
async fn a_supplied_rsa_key_signs_rs256_and_no_other_server_accepts_the_tokens() {
    let clock = clock();
    let server = server_on(&clock);
    let rsa = include_str!("fixtures/rsa-pkcs1.key");
    server
        .set_service_account_key(&SigningKey::from_pem(rsa).unwrap())
        .unwrap();
    with_service_account(&server, "robot").await;
    let token = token_for(&server, "robot", json!({})).await;
    assert_eq!(part(&token, 0)["alg"], "RS256");
    assert_eq!(whoami(&server, &token).await.0, 201);
    // The key cannot change once tokens may be out.
    assert!(server
        .set_service_account_key(&SigningKey::generate().unwrap())
        .is_err());

    // Another cluster, with an account of the same name, refuses it: its key did not sign it.
    let other = server_on(&clock);
    with_service_account(&other, "robot").await;
    assert_eq!(whoami(&other, &token).await.0, 401);
    let status = review(&other, &token, &[]).await;
    assert!(status["error"].as_str().is_some(), "{status}");
}

#[tokio::test]
async fn token_reviews_need_a_token_and_report_failures_in_status() {
    let clock = clock();
    let server = server_on(&clock);
    let body = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {}});
    let path = "/apis/authentication.k8s.io/v1/tokenreviews";
    let (status, answer) = send(&server, "POST", path, body, None).await;
    assert_eq!(status, 400, "{answer}");
    let status = review(&server, "eyJhbGciOiJFUzI1NiJ9.e30.c2ln", &[]).await;
    assert_eq!(status["user"], json!({}));
    assert!(
        status["error"]
            .as_str()
            .unwrap()
            .starts_with("[invalid bearer token"),
        "{status}"
    );
}
