//! A cluster's PKI, as kubeadm lays it out: the cluster CA (which signs the API server's
//! serving certificate and every client certificate the cluster accepts), the etcd CA, the
//! front-proxy CA and the service-account key pair. Each is generated (ECDSA P-256) unless
//! supplied, as Cluster API supplies them from the `<cluster>-ca`, `<cluster>-etcd`,
//! `<cluster>-proxy` and `<cluster>-sa` secrets. No key is shared between clusters.

use infrasim_kube_api::pki::{CertificateAuthority, PkiError, SigningKey};

/// A certificate and its private key, PEM (the key in any form kubeadm or OpenSSL writes,
/// RSA or ECDSA).
#[derive(Clone)]
pub struct CertAndKey {
    pub cert_pem: String,
    pub key_pem: String,
}

impl std::fmt::Debug for CertAndKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CertAndKey").finish_non_exhaustive()
    }
}

/// What a cluster is created with instead of generated material; anything left `None` is
/// generated.
#[derive(Debug, Clone, Default)]
pub struct SuppliedPki {
    pub ca: Option<CertAndKey>,
    pub etcd_ca: Option<CertAndKey>,
    pub front_proxy_ca: Option<CertAndKey>,
    /// The service-account signing key (private, PEM).
    pub service_account_key: Option<String>,
}

/// A cluster's certificate authorities and service-account key.
#[derive(Debug, Clone)]
pub struct ClusterPki {
    pub ca: CertificateAuthority,
    pub etcd_ca: CertificateAuthority,
    pub front_proxy_ca: CertificateAuthority,
    pub service_account: SigningKey,
}

fn authority(
    supplied: Option<&CertAndKey>,
    common_name: &str,
) -> Result<CertificateAuthority, PkiError> {
    match supplied {
        Some(c) => CertificateAuthority::from_pem(&c.cert_pem, &c.key_pem),
        None => CertificateAuthority::generate(common_name),
    }
}

impl ClusterPki {
    /// The PKI of cluster `name`: what is supplied, and the rest generated with kubeadm's
    /// common names.
    pub fn new(supplied: &SuppliedPki) -> Result<Self, PkiError> {
        Ok(ClusterPki {
            ca: authority(supplied.ca.as_ref(), "kubernetes")?,
            etcd_ca: authority(supplied.etcd_ca.as_ref(), "etcd-ca")?,
            front_proxy_ca: authority(supplied.front_proxy_ca.as_ref(), "front-proxy-ca")?,
            service_account: match &supplied.service_account_key {
                Some(key) => SigningKey::from_pem(key)?,
                None => SigningKey::generate()?,
            },
        })
    }
}
