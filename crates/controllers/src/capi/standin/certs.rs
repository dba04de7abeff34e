//! A cluster's certificates in Cluster API's layout: `<cluster>-ca`, `-etcd`, `-proxy` (a CA
//! each, `tls.crt`/`tls.key`) and `-sa` (the service-account key pair, public key in
//! `tls.crt`), all of type `cluster.x-k8s.io/secret`; and `<cluster>-kubeconfig` (`value`), an
//! admin kubeconfig whose client certificate the cluster CA signs. A secret that exists is
//! used as it is, as the control plane uses certificates a user supplied.

use infrasim_kube_api::kubeconfig::{render, KubeconfigSpec};
use infrasim_kube_api::pki::{CertificateAuthority, PkiError, SigningKey};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use k8s_openapi::ByteString;
use kube::api::{Api, PostParams};
use serde_json::json;
use std::collections::HashMap;

/// The secret type Cluster API gives the secrets it keeps.
pub const SECRET_TYPE: &str = "cluster.x-k8s.io/secret";

/// Why certificates could not be made.
#[derive(Debug, thiserror::Error)]
pub enum CertError {
    #[error(transparent)]
    Kube(#[from] kube::Error),
    #[error(transparent)]
    Pki(#[from] PkiError),
    #[error("secret {0} has no usable tls.crt/tls.key")]
    Unusable(String),
}

/// The purposes of a cluster's certificate secrets, and the common name of each CA.
pub const PURPOSES: [(&str, &str); 4] = [
    ("ca", "kubernetes"),
    ("etcd", "etcd-ca"),
    ("proxy", "front-proxy-ca"),
    ("sa", ""),
];

fn secret(
    name: &str,
    cluster: &str,
    owner: &OwnerReference,
    data: serde_json::Value,
) -> Result<Secret, kube::Error> {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"cluster.x-k8s.io/cluster-name": cluster},
                     "ownerReferences": [owner]},
        "type": SECRET_TYPE,
        "stringData": data,
    }))
    .map_err(kube::Error::SerdeError)
}

fn field(s: &Secret, key: &str) -> Option<String> {
    s.data
        .as_ref()
        .and_then(|d| d.get(key))
        .and_then(|b| String::from_utf8(b.0.clone()).ok())
}

/// The CAs of clusters whose certificate and kubeconfig secrets were all found a moment ago.
/// A control plane reconciles often while its machines come up, and reading five secrets and
/// parsing the CA on each pass was a tenth of the stand-in's requests; Cluster API reads them
/// through a caching client. Looked at again after `workload::SECRET_RECHECK`, and forgotten
/// with the cluster.
#[derive(Default)]
pub struct Found {
    cas: std::sync::Mutex<FoundCas>,
}

/// Each cluster's CA (by namespace and name), the endpoint its kubeconfig was found to name
/// and when its secrets were found complete.
type FoundCas = HashMap<(String, String), (CertificateAuthority, String, std::time::Instant)>;

impl Found {
    fn lock(&self) -> std::sync::MutexGuard<'_, FoundCas> {
        // The map holds no invariant a panic halfway could break.
        self.cas.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The CA of `cluster` if its secrets were found complete a moment ago, with a kubeconfig
    /// for `endpoint` (an endpoint that moved sends the kubeconfig to be looked at again).
    pub fn get(
        &self,
        namespace: &str,
        cluster: &str,
        endpoint: &str,
    ) -> Option<CertificateAuthority> {
        let key = (namespace.to_string(), cluster.to_string());
        let cas = self.lock();
        let (ca, named, at) = cas.get(&key)?;
        (named == endpoint && at.elapsed() < super::workload::SECRET_RECHECK).then(|| ca.clone())
    }

    /// Notes that `cluster`'s secrets are all there, with `ca` its CA and a kubeconfig for
    /// `endpoint`.
    pub fn remember(
        &self,
        namespace: &str,
        cluster: &str,
        ca: CertificateAuthority,
        endpoint: &str,
    ) {
        let key = (namespace.to_string(), cluster.to_string());
        let found = (ca, endpoint.to_string(), std::time::Instant::now());
        self.lock().insert(key, found);
    }

    /// Forgets a cluster (it is gone; one made again under its name has new certificates).
    pub fn forget(&self, namespace: &str, cluster: &str) {
        self.lock()
            .remove(&(namespace.to_string(), cluster.to_string()));
    }
}

/// Finds or makes the four certificate secrets; returns the cluster CA. With `generate`
/// false (the control plane is initialized), missing ones are only reported.
pub async fn lookup_or_generate(
    secrets: &Api<Secret>,
    cluster: &str,
    owner: &OwnerReference,
    generate: bool,
) -> Result<Option<CertificateAuthority>, CertError> {
    let mut ca = None;
    for (purpose, common_name) in PURPOSES {
        let name = format!("{cluster}-{purpose}");
        let existing = secrets.get_opt(&name).await?;
        let pair = match existing {
            Some(s) => (field(&s, "tls.crt"), field(&s, "tls.key")),
            None if !generate => return Ok(None),
            None => {
                let (cert, key) = if purpose == "sa" {
                    let k = SigningKey::generate()?;
                    (k.public_pem, k.private_pem)
                } else {
                    let c = CertificateAuthority::generate(common_name)?;
                    (c.cert_pem.clone(), c.key_pem().to_string())
                };
                let s = secret(
                    &name,
                    cluster,
                    owner,
                    json!({"tls.crt": cert, "tls.key": key}),
                )?;
                match secrets.create(&PostParams::default(), &s).await {
                    Ok(_) => (Some(cert), Some(key)),
                    // Made meanwhile by another reconcile: read it back next time.
                    Err(kube::Error::Api(e)) if e.code == 409 => return Ok(None),
                    Err(e) => return Err(e.into()),
                }
            }
        };
        if purpose == "ca" {
            match pair {
                (Some(cert), Some(key)) => ca = Some(CertificateAuthority::from_pem(&cert, &key)?),
                _ => return Err(CertError::Unusable(name)),
            }
        }
    }
    Ok(ca)
}

/// Writes `<cluster>-kubeconfig` if it is missing: cluster `<cluster>`, user
/// `<cluster>-admin` (`kubernetes-admin` in `system:masters`), context
/// `<cluster>-admin@<cluster>`, server `https://host:port`. One the control plane wrote (it
/// owns it) naming another server is written again: upstream writes it once, as its endpoints never move, but a sharded
/// fleet's takeover moves a cluster's endpoint (see the in-memory provider's
/// `move_endpoint`), and a kubeconfig left on the old address opens nothing.
pub async fn ensure_kubeconfig(
    secrets: &Api<Secret>,
    cluster: &str,
    ca: &CertificateAuthority,
    host: &str,
    port: i32,
    owner: &OwnerReference,
) -> Result<(), CertError> {
    let name = format!("{cluster}-kubeconfig");
    let server = if host.contains(':') {
        format!("https://[{host}]:{port}")
    } else {
        format!("https://{host}:{port}")
    };
    let existing = secrets.get_opt(&name).await?;
    let ours = |s: &Secret| {
        s.metadata
            .owner_references
            .iter()
            .flatten()
            .any(|o| o.uid == owner.uid)
    };
    if existing
        .as_ref()
        .is_some_and(|s| !ours(s) || server_of(s).is_none_or(|named| named == server))
    {
        return Ok(());
    }
    let admin = ca.client_cert("kubernetes-admin", &["system:masters"])?;
    let yaml = render(&KubeconfigSpec {
        cluster_name: cluster,
        user_name: &format!("{cluster}-admin"),
        server: &server,
        ca_pem: &ca.cert_pem,
        client_cert_pem: &admin.cert_pem,
        client_key_pem: &admin.key_pem,
        tls_server_name: None,
    });
    let written = match existing {
        Some(mut moved) => {
            // Replaced as read: a concurrent writer makes it a 409, and the next pass looks again.
            moved.data = Some([("value".to_string(), ByteString(yaml.into_bytes()))].into());
            moved.string_data = None;
            secrets
                .replace(&name, &PostParams::default(), &moved)
                .await
                .map(|_| ())
        }
        None => {
            let s = secret(&name, cluster, owner, json!({"value": yaml}))?;
            secrets.create(&PostParams::default(), &s).await.map(|_| ())
        }
    };
    match written {
        Ok(()) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// The server a kubeconfig secret names (its first cluster's); none when it cannot be read,
/// which is left as it is (a user's own).
fn server_of(secret: &Secret) -> Option<String> {
    let text = field(secret, "value")?;
    let config = kube::config::Kubeconfig::from_yaml(&text).ok()?;
    config
        .clusters
        .first()
        .and_then(|c| c.cluster.as_ref())
        .and_then(|c| c.server.clone())
}
