//! Each cluster's PKI: generated and distinct per cluster, or supplied (RSA or ECDSA), with
//! the serving certificate and admin credentials chaining to the cluster's own CA.

mod common;
use common::client;
use infrasim_cloud::{CertAndKey, Cloud, CloudConfig, ClusterShape, SuppliedPki};
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams};

const RSA_CA: &str = include_str!("../../kube-api/tests/fixtures/rsa-ca.crt");
const RSA_KEY: &str = include_str!("../../kube-api/tests/fixtures/rsa-pkcs1.key");
const EC_CA: &str = include_str!("../../kube-api/tests/fixtures/ec-ca.crt");
const EC_KEY: &str = include_str!("../../kube-api/tests/fixtures/ec-sec1.key");

#[tokio::test]
async fn supplied_and_generated_cas() {
    let cloud = Cloud::new(CloudConfig {
        ports: 23800..=23820,
        ..CloudConfig::default()
    });
    let supplied = |cert: &str, key: &str| SuppliedPki {
        ca: Some(CertAndKey {
            cert_pem: cert.into(),
            key_pem: key.into(),
        }),
        service_account_key: Some(key.into()),
        ..SuppliedPki::default()
    };
    let mut tokens = Vec::new();
    for (name, cert, key) in [("rsa", RSA_CA, RSA_KEY), ("ecdsa", EC_CA, EC_KEY)] {
        let info = cloud
            .create_cluster(ClusterShape {
                name: name.into(),
                pki: supplied(cert, key),
                ..ClusterShape::default()
            })
            .await
            .unwrap();
        // The kubeconfig trusts the supplied CA, so this handshake proves the serving
        // certificate chains to it, and the admin certificate it signed is accepted.
        assert!(info.kubeconfig.contains(&base64(cert)));
        let nodes: Api<Node> = Api::all(client(&info.kubeconfig).await);
        assert_eq!(
            nodes
                .list(&ListParams::default())
                .await
                .unwrap()
                .items
                .len(),
            1
        );
        let pki = cloud.pki(name).unwrap();
        assert_eq!(pki.ca.cert_pem, cert);
        assert!(pki
            .service_account
            .public_pem
            .starts_with("-----BEGIN PUBLIC KEY-----"));
        let token =
            signed_by_the_supplied_key(&info.kubeconfig, &pki.service_account.public_pem, name)
                .await;
        tokens.push((info.kubeconfig.clone(), token));
    }
    // Each cluster's tokens are its own: the RSA cluster's token does not open the other.
    assert_eq!(who_is(&tokens[0].0, &tokens[0].1).await, 201);
    assert_eq!(who_is(&tokens[1].0, &tokens[0].1).await, 401);
    // Generated ones are distinct per cluster and per role.
    for name in ["gen-a", "gen-b"] {
        cloud
            .create_cluster(ClusterShape {
                name: name.into(),
                ..ClusterShape::default()
            })
            .await
            .unwrap();
    }
    let (a, b) = (cloud.pki("gen-a").unwrap(), cloud.pki("gen-b").unwrap());
    let all = [
        &a.ca.cert_pem,
        &a.etcd_ca.cert_pem,
        &a.front_proxy_ca.cert_pem,
        &b.ca.cert_pem,
        &b.etcd_ca.cert_pem,
        &b.front_proxy_ca.cert_pem,
    ];
    let distinct: std::collections::BTreeSet<&&String> = all.iter().collect();
    assert_eq!(distinct.len(), 6);
    assert_ne!(a.service_account.private_pem, b.service_account.private_pem);
    // A bad supplied key fails the creation with a clear error, and leaves nothing behind.
    let bad = cloud
        .create_cluster(ClusterShape {
            name: "bad".into(),
            pki: supplied(RSA_CA, EC_KEY),
            ..ClusterShape::default()
        })
        .await;
    assert!(bad.unwrap_err().to_string().contains("does not belong"));
    assert!(cloud.pki("bad").is_none());
    cloud
        .create_cluster(ClusterShape {
            name: "bad".into(),
            pki: supplied(EC_CA, EC_KEY),
            ..ClusterShape::default()
        })
        .await
        .unwrap();
}

/// Requests a token of cluster `name`'s default service account and checks its signature
/// with the supplied key's public half, as any verifier holding `sa.pub` would.
async fn signed_by_the_supplied_key(kubeconfig: &str, public_pem: &str, name: &str) -> String {
    use k8s_openapi::api::authentication::v1::TokenRequest;
    use k8s_openapi::api::core::v1::ServiceAccount;
    let accounts: Api<ServiceAccount> = Api::namespaced(client(kubeconfig).await, "default");
    let request = TokenRequest::default();
    let issued = accounts
        .create_token_request("default", &Default::default(), &request)
        .await
        .unwrap();
    let token = issued.status.unwrap().token;
    let (algorithm, key) = match name {
        "rsa" => (
            jsonwebtoken::Algorithm::RS256,
            jsonwebtoken::DecodingKey::from_rsa_pem(public_pem.as_bytes()).unwrap(),
        ),
        _ => (
            jsonwebtoken::Algorithm::ES256,
            jsonwebtoken::DecodingKey::from_ec_pem(public_pem.as_bytes()).unwrap(),
        ),
    };
    let mut validation = jsonwebtoken::Validation::new(algorithm);
    validation.set_audience(&["https://kubernetes.default.svc.cluster.local"]);
    let claims = jsonwebtoken::decode::<serde_json::Value>(&token, &key, &validation)
        .unwrap()
        .claims;
    assert_eq!(claims["sub"], "system:serviceaccount:default:default");
    token
}

/// The HTTP status of a SelfSubjectReview made with `token` against the cluster of
/// `kubeconfig` (its server and CA, not its credentials).
async fn who_is(kubeconfig: &str, token: &str) -> u16 {
    use k8s_openapi::api::authentication::v1::SelfSubjectReview;
    let yaml: kube::config::Kubeconfig = serde_yaml::from_str(kubeconfig).unwrap();
    let mut config = kube::Config::from_custom_kubeconfig(yaml, &Default::default())
        .await
        .unwrap();
    config.auth_info = kube::config::AuthInfo {
        token: Some(token.to_string().into()),
        ..Default::default()
    };
    let client = kube::Client::try_from(config).unwrap();
    let reviews: Api<SelfSubjectReview> = Api::all(client);
    match reviews
        .create(&Default::default(), &Default::default())
        .await
    {
        Ok(_) => 201,
        Err(kube::Error::Api(status)) => status.code,
        Err(e) => panic!("{e}"),
    }
}

fn base64(s: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(s)
}
