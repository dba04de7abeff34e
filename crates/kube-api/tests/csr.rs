//! CertificateSigningRequests through kube-rs: the registry's rules (requester stamped,
//! spec fixed, approval only through `approval` by a user who may `approve` for the signer,
//! a certificate only through `status` by one who may `sign`), and kubectl's columns.

mod common;
use common::{as_admin_accepting, TestServer};
use infrasim_kube_api::Identity;
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{json, Value};

fn request_pem() -> String {
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "someone");
    params.serialize_request(&key).unwrap().pem().unwrap()
}

fn b64(s: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(s)
}

fn csr(name: &str, spec: Value) -> CertificateSigningRequest {
    serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).unwrap()
}

fn good_spec() -> Value {
    json!({"request": b64(&request_pem()), "signerName": "example.com/issuer",
           "usages": ["client auth"], "username": "forged", "groups": ["system:masters"]})
}

fn causes(err: kube::Error) -> (u16, Vec<String>) {
    match err {
        kube::Error::Api(s) => {
            let fields = s
                .details
                .map(|d| d.causes.into_iter().map(|c| c.field).collect())
                .unwrap_or_default();
            (s.code, fields)
        }
        other => panic!("{other}"),
    }
}

#[tokio::test]
async fn requests_are_validated_and_stamped_with_their_requester() {
    let server = TestServer::start(100).await;
    let api: Api<CertificateSigningRequest> = Api::all(server.client().await);
    let created = api
        .create(&PostParams::default(), &csr("ok", good_spec()))
        .await
        .unwrap();
    let spec = created.spec;
    assert_eq!(spec.username.as_deref(), Some("kubernetes-admin"));
    assert_eq!(
        spec.groups.unwrap(),
        ["system:masters", "system:authenticated"]
    );

    for (spec, field) in [
        (
            json!({"request": b64("not pem"), "signerName": "a.io/b", "usages": ["client auth"]}),
            "spec.request",
        ),
        (
            json!({"request": b64(&request_pem()), "signerName": "nodomain", "usages": ["client auth"]}),
            "spec.signerName",
        ),
        (
            json!({"request": b64(&request_pem()), "signerName": "a.io/b", "usages": ["fly"]}),
            "spec.usages[0]",
        ),
        (
            json!({"request": b64(&request_pem()), "signerName": "a.io/b", "usages": []}),
            "spec.usages",
        ),
        (
            json!({"request": b64(&request_pem()), "signerName": "a.io/b", "usages": ["client auth"],
                "expirationSeconds": 60}),
            "spec.expirationSeconds",
        ),
    ] {
        let err = api
            .create(&PostParams::default(), &csr("bad", spec))
            .await
            .unwrap_err();
        assert_eq!(causes(err), (422, vec![field.to_string()]), "{field}");
    }

    // The spec never changes, nor does an update of the object touch the approval.
    let mut changed = api.get("ok").await.unwrap();
    changed.spec.signer_name = "example.com/other".into();
    changed.metadata.labels = Some([("k".to_string(), "v".to_string())].into());
    let replaced = api
        .replace("ok", &PostParams::default(), &changed)
        .await
        .unwrap();
    assert_eq!(replaced.spec.signer_name, "example.com/issuer");
    assert_eq!(replaced.metadata.labels.unwrap()["k"], "v");
    let approve = json!({"status": {"conditions": [{"type": "Approved", "status": "True"}]}});
    let main = api
        .patch("ok", &PatchParams::default(), &Patch::Merge(&approve))
        .await
        .unwrap();
    assert!(main.status.is_none_or(|s| s.conditions.is_none()));
}

#[tokio::test]
async fn approval_needs_the_approve_verb_on_the_signer() {
    let server = TestServer::start(100).await;
    let admin = server.client().await;
    let api: Api<CertificateSigningRequest> = Api::all(admin.clone());
    api.create(&PostParams::default(), &csr("r", good_spec()))
        .await
        .unwrap();
    server.server.add_token(
        "approver-token",
        Identity {
            user: "approver".into(),
            groups: vec!["system:authenticated".into()],
        },
    );
    let approver: Api<CertificateSigningRequest> =
        Api::all(server.client_with_token(Some("approver-token")));
    let rule = |resources: &[&str], verbs: &[&str], names: Option<&[&str]>| {
        let mut r =
            json!({"apiGroups": ["certificates.k8s.io"], "resources": resources, "verbs": verbs});
        if let Some(n) = names {
            r["resourceNames"] = json!(n);
        }
        r
    };
    let grant = |name: &str, rules: Vec<Value>| {
        let admin = admin.clone();
        let name = name.to_string();
        async move {
            let role: ClusterRole =
                serde_json::from_value(json!({"metadata": {"name": name}, "rules": rules}))
                    .unwrap();
            Api::<ClusterRole>::all(admin.clone())
                .create(&PostParams::default(), &role)
                .await
                .unwrap();
            let binding: ClusterRoleBinding = serde_json::from_value(json!({
                "metadata": {"name": name},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
                "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "approver"}]}))
            .unwrap();
            Api::<ClusterRoleBinding>::all(admin)
                .create(&PostParams::default(), &binding)
                .await
                .unwrap();
        }
    };
    grant(
        "csr-approval",
        vec![
            rule(
                &["certificatesigningrequests/approval"],
                &["update", "patch"],
                None,
            ),
            rule(&["certificatesigningrequests"], &["get"], None),
        ],
    )
    .await;
    let approve =
        json!({"status": {"conditions": [{"type": "Approved", "status": "True", "reason": "R"}]}});
    let err = approver
        .patch_approval("r", &PatchParams::default(), &Patch::Merge(&approve))
        .await
        .unwrap_err();
    let kube::Error::Api(status) = err else {
        panic!()
    };
    assert_eq!(status.code, 403);
    assert!(
        status.message.contains(
            "user not permitted to approve requests with signerName \"example.com/issuer\""
        ),
        "{}",
        status.message
    );

    // Allowed for the signer's domain (`example.com/*`), the approval goes through.
    grant(
        "signer-approve",
        vec![rule(&["signers"], &["approve"], Some(&["example.com/*"]))],
    )
    .await;
    let approved = approver
        .patch_approval("r", &PatchParams::default(), &Patch::Merge(&approve))
        .await
        .unwrap();
    let status = approved.status.unwrap();
    assert_eq!(status.conditions.unwrap()[0].type_, "Approved");

    // Signing is another right: the approver may not set the certificate.
    let cert = b64(&rcgen::CertificateParams::new(vec!["x".to_string()])
        .unwrap()
        .self_signed(&rcgen::KeyPair::generate().unwrap())
        .unwrap()
        .pem());
    grant(
        "csr-status",
        vec![rule(
            &["certificatesigningrequests/status"],
            &["update", "patch"],
            None,
        )],
    )
    .await;
    let sign = json!({"status": {"certificate": cert}});
    let err = approver
        .patch_status("r", &PatchParams::default(), &Patch::Merge(&sign))
        .await
        .unwrap_err();
    assert!(matches!(err, kube::Error::Api(s) if s.code == 403));
    // The admin may; the approval conditions stay as the approval left them.
    let signed = api
        .patch_status("r", &PatchParams::default(), &Patch::Merge(&sign))
        .await
        .unwrap();
    let status = signed.status.unwrap();
    assert!(status.certificate.is_some());
    assert_eq!(status.conditions.unwrap()[0].type_, "Approved");
    // Once issued, the certificate stays.
    let err = api
        .patch_status(
            "r",
            &PatchParams::default(),
            &Patch::Merge(&json!({"status": {"certificate": b64("x")}})),
        )
        .await
        .unwrap_err();
    assert_eq!(causes(err), (422, vec!["status.certificate".to_string()]));
}

#[tokio::test]
async fn unknown_condition_types_pass_and_kubectl_columns_show_the_state() {
    let server = TestServer::start(100).await;
    let api: Api<CertificateSigningRequest> = Api::all(server.client().await);
    api.create(&PostParams::default(), &csr("fake", good_spec()))
        .await
        .unwrap();
    // kube-rs's own test approves with a made-up type, as kube-apiserver lets it.
    let fake = json!({"status": {"conditions": [{"type": "ApprovedFake", "status": "True"}]}});
    api.patch_approval("fake", &PatchParams::default(), &Patch::Merge(&fake))
        .await
        .unwrap();
    assert_eq!(
        api.get_approval("fake")
            .await
            .unwrap()
            .status
            .unwrap()
            .conditions
            .unwrap()[0]
            .type_,
        "ApprovedFake"
    );
    let table = as_admin_accepting(
        &server.server,
        "/apis/certificates.k8s.io/v1/certificatesigningrequests",
        "application/json;as=Table;v=v1;g=meta.k8s.io",
    )
    .await
    .json();
    let names: Vec<&str> = table["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "Name",
            "Age",
            "SignerName",
            "Requestor",
            "RequestedDuration",
            "Condition"
        ]
    );
    let cells = &table["rows"][0]["cells"];
    assert_eq!(cells[2], "example.com/issuer");
    assert_eq!(cells[3], "kubernetes-admin");
    assert_eq!(cells[4], "<none>");
    assert_eq!(cells[5], "Pending");
}
