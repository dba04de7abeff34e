//! CertificateSigningRequests in a workload cluster: a kubelet-style request, approved
//! through the `approval` subresource, is signed with the cluster's CA by the cluster's
//! certificate controller, and the certificate it issues is a working credential.

mod common;
use common::client;
use infrasim_cloud::{Cloud, CloudConfig, ClusterShape};
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

/// A certificate request for `cn` in `orgs` (with `dns` names), and its private key (PEM).
fn request(cn: &str, orgs: &[&str], dns: &[&str]) -> (String, String) {
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params =
        rcgen::CertificateParams::new(dns.iter().map(|d| d.to_string()).collect::<Vec<_>>())
            .unwrap();
    params.distinguished_name = rcgen::DistinguishedName::new();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, cn);
    for o in orgs {
        params
            .distinguished_name
            .push(rcgen::DnType::OrganizationName, *o);
    }
    let csr = params.serialize_request(&key).unwrap();
    (csr.pem().unwrap(), key.serialize_pem())
}

fn csr(name: &str, pem: &str, signer: &str, usages: &[&str]) -> CertificateSigningRequest {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"request": b64(pem), "signerName": signer, "usages": usages,
                 "expirationSeconds": 3600},
    }))
    .unwrap()
}

fn b64(s: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(s)
}

async fn approve(api: &Api<CertificateSigningRequest>, name: &str) {
    let patch = json!({"status": {"conditions": [{"type": "Approved", "status": "True",
        "reason": "TestApprove", "message": "approved by the test"}]}});
    let approved = api
        .patch_approval(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    let condition = &approved.status.unwrap().conditions.unwrap()[0];
    assert!(condition.last_update_time.is_some() && condition.last_transition_time.is_some());
}

async fn issued(api: &Api<CertificateSigningRequest>, name: &str) -> CertificateSigningRequest {
    for _ in 0..200 {
        let csr = api.get(name).await.unwrap();
        let status = csr.status.clone().unwrap_or_default();
        let failed = status
            .conditions
            .iter()
            .flatten()
            .any(|c| c.type_ == "Failed");
        if status.certificate.is_some() || failed {
            return csr;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    panic!("{name} was never signed nor failed");
}

#[tokio::test]
async fn approved_kubelet_requests_are_signed_with_the_cluster_ca() {
    let cloud = Cloud::new(CloudConfig {
        ports: 23950..=23960,
        ..CloudConfig::default()
    });
    let info = cloud
        .create_cluster(ClusterShape {
            name: "csr".into(),
            ..ClusterShape::default()
        })
        .await
        .unwrap();
    let api: Api<CertificateSigningRequest> = Api::all(client(&info.kubeconfig).await);

    let (pem, key) = request("system:node:extra-node", &["system:nodes"], &[]);
    let usages = ["digital signature", "client auth"];
    let signer = "kubernetes.io/kube-apiserver-client-kubelet";
    let created = api
        .create(
            &PostParams::default(),
            &csr("node-csr", &pem, signer, &usages),
        )
        .await
        .unwrap();
    // The server, not the client, says who asked.
    assert_eq!(created.spec.username.as_deref(), Some("kubernetes-admin"));
    assert!(created.status.is_none_or(|s| s.certificate.is_none()));

    approve(&api, "node-csr").await;
    let signed = issued(&api, "node-csr").await;
    let certificate = signed.status.unwrap().certificate.expect("a certificate");
    let cert_pem = String::from_utf8(certificate.0).unwrap();

    // The certificate is a credential the cluster accepts: it names the node, in its group.
    let mut kubeconfig: kube::config::Kubeconfig = serde_yaml::from_str(&info.kubeconfig).unwrap();
    let auth = kubeconfig.auth_infos[0].auth_info.as_mut().unwrap();
    auth.client_certificate_data = Some(b64(&cert_pem));
    auth.client_key_data = Some(b64(&key).into());
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .unwrap();
    let node_client = kube::Client::try_from(config).unwrap();
    let reviews: Api<k8s_openapi::api::authentication::v1::SelfSubjectReview> =
        Api::all(node_client.clone());
    let me = reviews
        .create(&PostParams::default(), &Default::default())
        .await
        .unwrap();
    let user = me.status.unwrap().user_info.unwrap();
    assert_eq!(user.username.as_deref(), Some("system:node:extra-node"));
    assert!(user.groups.unwrap().contains(&"system:nodes".to_string()));
}

#[tokio::test]
async fn requests_breaking_their_signers_rules_fail_and_denied_ones_stay_unsigned() {
    let cloud = Cloud::new(CloudConfig {
        ports: 23961..=23965,
        ..CloudConfig::default()
    });
    let info = cloud
        .create_cluster(ClusterShape {
            name: "csr-rules".into(),
            ..ClusterShape::default()
        })
        .await
        .unwrap();
    let api: Api<CertificateSigningRequest> = Api::all(client(&info.kubeconfig).await);
    // A kubelet client certificate for someone who is not a node.
    let (pem, _) = request("mallory", &["system:masters"], &[]);
    let signer = "kubernetes.io/kube-apiserver-client-kubelet";
    let usages = ["digital signature", "client auth"];
    api.create(&PostParams::default(), &csr("bad", &pem, signer, &usages))
        .await
        .unwrap();
    approve(&api, "bad").await;
    let failed = issued(&api, "bad").await.status.unwrap();
    assert!(failed.certificate.is_none());
    let condition = failed
        .conditions
        .unwrap()
        .into_iter()
        .find(|c| c.type_ == "Failed")
        .unwrap();
    assert_eq!(condition.reason.as_deref(), Some("SignerValidationFailure"));
    assert!(condition.message.unwrap().contains("system:nodes"));

    // A denied request is never signed, and cannot be approved afterwards.
    let (pem, _) = request("system:node:n", &["system:nodes"], &[]);
    api.create(
        &PostParams::default(),
        &csr("denied", &pem, signer, &usages),
    )
    .await
    .unwrap();
    let deny =
        json!({"status": {"conditions": [{"type": "Denied", "status": "True", "reason": "No"}]}});
    api.patch_approval("denied", &PatchParams::default(), &Patch::Merge(&deny))
        .await
        .unwrap();
    let both = json!({"status": {"conditions": [{"type": "Denied", "status": "True"},
                                                  {"type": "Approved", "status": "True"}]}});
    let err = api
        .patch_approval("denied", &PatchParams::default(), &Patch::Merge(&both))
        .await
        .unwrap_err();
    assert!(matches!(err, kube::Error::Api(s) if s.code == 422));
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    let status = api.get("denied").await.unwrap().status.unwrap();
    assert!(status.certificate.is_none());
}
