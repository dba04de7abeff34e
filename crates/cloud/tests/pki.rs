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
    }
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

fn base64(s: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(s)
}
