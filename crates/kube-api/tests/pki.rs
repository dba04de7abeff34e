//! Certificate authorities loaded from PEM in the forms kubeadm, OpenSSL and Cluster API write
//! (fixtures made with `openssl genrsa -traditional`, `openssl ecparam -genkey`, `openssl pkcs8
//! -topk8` and `openssl req -x509`).

use infrasim_kube_api::pki::{CertificateAuthority, PkiError};

const RSA_CA: &str = include_str!("fixtures/rsa-ca.crt");
const RSA_PKCS1: &str = include_str!("fixtures/rsa-pkcs1.key");
const RSA_PKCS8: &str = include_str!("fixtures/rsa-pkcs8.key");
const EC_CA: &str = include_str!("fixtures/ec-ca.crt");
const EC_SEC1: &str = include_str!("fixtures/ec-sec1.key");

fn issued_by(cert_pem: &str, ca_pem: &str) -> bool {
    let (_, cert) = x509_parser::pem::parse_x509_pem(cert_pem.as_bytes()).unwrap();
    let (_, ca) = x509_parser::pem::parse_x509_pem(ca_pem.as_bytes()).unwrap();
    let (cert, ca) = (cert.parse_x509().unwrap(), ca.parse_x509().unwrap());
    cert.issuer() == ca.subject()
}

#[test]
fn rsa_and_ecdsa_cas_load_in_every_key_form_and_sign() {
    for (cert, key) in [(RSA_CA, RSA_PKCS1), (RSA_CA, RSA_PKCS8), (EC_CA, EC_SEC1)] {
        let ca = CertificateAuthority::from_pem(cert, key).unwrap();
        assert!(ca.key_pem().starts_with("-----BEGIN PRIVATE KEY-----"));
        let serving = ca
            .serving_cert(
                "kube-apiserver",
                &["localhost".into()],
                &["127.0.0.1".parse().unwrap()],
            )
            .unwrap();
        assert!(issued_by(&serving.cert_pem, cert));
        let admin = ca
            .client_cert("kubernetes-admin", &["system:masters"])
            .unwrap();
        assert!(issued_by(&admin.cert_pem, cert));
        // The converted key loads again as it is.
        CertificateAuthority::from_pem(cert, ca.key_pem()).unwrap();
    }
}

#[test]
fn a_key_of_another_certificate_or_a_leaf_is_refused() {
    assert!(matches!(
        CertificateAuthority::from_pem(RSA_CA, EC_SEC1),
        Err(PkiError::Invalid(m)) if m.contains("does not belong")
    ));
    let ca = CertificateAuthority::from_pem(EC_CA, EC_SEC1).unwrap();
    let leaf = ca.client_cert("someone", &[]).unwrap();
    assert!(matches!(
        CertificateAuthority::from_pem(&leaf.cert_pem, &leaf.key_pem),
        Err(PkiError::Invalid(m)) if m.contains("not a CA")
    ));
    assert!(CertificateAuthority::from_pem(EC_CA, "not a key").is_err());
}
