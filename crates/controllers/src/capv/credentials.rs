//! How the stand-in logs in to a VSphereCluster's vCenter, as CAPV does: the cluster's
//! `identityRef` Secret (`username`, `password`) or, without one, the manager's own
//! credentials ([`Defaults`]: under `infrasim up`, those of the VCenterSimulator serving at
//! the cluster's server, what `infrasim env` hands a template as `VSPHERE_USERNAME` and
//! `VSPHERE_PASSWORD`). The server's certificate is trusted by the cluster's thumbprint;
//! without one, only a server the manager knows is trusted, by the thumbprint it knows (the
//! stand-in never connects without checking the certificate).

use super::types::VSphereCluster;
use futures::future::BoxFuture;
use infrasim_vim_client::{Credentials, Trust};
use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;
use kube::ResourceExt;
use std::sync::Arc;

/// The manager's own credentials and thumbprint for a vCenter, by its server.
#[derive(Debug, Clone, PartialEq)]
pub struct ManagerCredentials {
    pub username: String,
    pub password: String,
    pub thumbprint: String,
}

/// Where the manager's own credentials come from: given to the stand-in by whoever runs it
/// (the vcsim family knows its simulators; the stand-in does not know the vcsim family).
pub type Defaults =
    Arc<dyn Fn(String) -> BoxFuture<'static, Option<ManagerCredentials>> + Send + Sync>;

/// The credentials for `server` (and its `thumbprint`, if given) of the VSphereCluster `vc`
/// (the manager's own without one); why there are none, for the `VCenterAvailable`
/// condition.
pub async fn for_cluster(
    client: &kube::Client,
    defaults: &Defaults,
    vc: Option<&VSphereCluster>,
    server: &str,
    thumbprint: &str,
) -> Result<Credentials, String> {
    let ns = vc.and_then(|c| c.namespace()).unwrap_or_default();
    let identity = vc.and_then(|c| c.spec.identity_ref.as_ref());
    // Asked only when they are needed: no identity, or no thumbprint.
    let simulator = match identity.is_none() || thumbprint.is_empty() {
        true => defaults(server.to_string()).await,
        false => None,
    };
    let (username, password) = match identity {
        Some(identity) if identity.kind == "Secret" => {
            secret_credentials(client, &ns, &identity.name).await?
        }
        Some(identity) if identity.kind == "VSphereClusterIdentity" => {
            identity_credentials(client, &ns, &identity.name).await?
        }
        Some(identity) => {
            return Err(format!(
                "identityRef kind {} is neither Secret nor VSphereClusterIdentity",
                identity.kind
            ))
        }
        None => match &simulator {
            Some(s) => (s.username.clone(), s.password.clone()),
            None => {
                return Err(format!(
                    "no identityRef, and the manager has no credentials for {server} (no \
                     VCenterSimulator serves there)"
                ))
            }
        },
    };
    let thumbprint = match (thumbprint, &simulator) {
        (t, _) if !t.is_empty() => t.to_string(),
        (_, Some(s)) => s.thumbprint.clone(),
        _ => {
            return Err(format!(
                "no thumbprint to trust {server} by (spec.thumbprint)"
            ))
        }
    };
    Ok(Credentials {
        server: server.to_string(),
        username,
        password,
        trust: Trust::Thumbprint(thumbprint),
    })
}

/// The namespace CAPV's manager runs in, where a VSphereClusterIdentity's Secret lives.
pub const MANAGER_NAMESPACE: &str = "capv-system";

/// The credentials of a cluster-wide VSphereClusterIdentity, for a cluster in `ns`: its
/// Secret (`spec.secretName`, in CAPV's own namespace), if the identity is ready and its
/// `allowedNamespaces` admit `ns` (no `allowedNamespaces` admits none; an empty selector,
/// all).
async fn identity_credentials(
    client: &kube::Client,
    ns: &str,
    name: &str,
) -> Result<(String, String), String> {
    use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(super::types::GROUP, "v1beta2", "VSphereClusterIdentity"),
        "vsphereclusteridentities",
    );
    let identity = Api::<DynamicObject>::all_with(client.clone(), &resource)
        .get_opt(name)
        .await
        .map_err(|e| format!("reading VSphereClusterIdentity {name}: {e}"))?
        .ok_or_else(|| format!("VSphereClusterIdentity {name} does not exist"))?;
    // Its controller has claimed its Secret (see `super::identity`).
    if identity.data.pointer("/status/ready") != Some(&serde_json::Value::Bool(true)) {
        return Err(format!(
            "VSphereClusterIdentity {name}: identity isn't ready to be used yet"
        ));
    }
    let selector = identity
        .data
        .pointer("/spec/allowedNamespaces/selector")
        .cloned();
    let Some(selector) = selector else {
        return Err(format!("VSphereClusterIdentity {name} allows no namespace"));
    };
    let selector: k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector =
        serde_json::from_value(selector).map_err(|e| format!("its selector: {e}"))?;
    let namespace = Api::<k8s_openapi::api::core::v1::Namespace>::all(client.clone())
        .get_opt(ns)
        .await
        .map_err(|e| format!("reading namespace {ns}: {e}"))?;
    let labels = namespace.map(|n| n.labels().clone()).unwrap_or_default();
    let admitted = kube::core::Selector::try_from(selector)
        .is_ok_and(|s| kube::core::SelectorExt::matches(&s, &labels));
    if !admitted {
        return Err(format!(
            "VSphereClusterIdentity {name} does not allow namespace {ns}"
        ));
    }
    let secret = identity
        .data
        .pointer("/spec/secretName")
        .and_then(serde_json::Value::as_str)
        .ok_or_else(|| format!("VSphereClusterIdentity {name} names no secretName"))?;
    secret_credentials(client, MANAGER_NAMESPACE, secret).await
}

/// A credentials Secret's `username` and `password`.
async fn secret_credentials(
    client: &kube::Client,
    ns: &str,
    name: &str,
) -> Result<(String, String), String> {
    let secret = Api::<Secret>::namespaced(client.clone(), ns)
        .get_opt(name)
        .await
        .map_err(|e| format!("reading Secret {ns}/{name}: {e}"))?
        .ok_or_else(|| format!("the identityRef Secret {ns}/{name} does not exist"))?;
    let key = |k: &str| -> Result<String, String> {
        secret
            .data
            .as_ref()
            .and_then(|d| d.get(k))
            .and_then(|v| String::from_utf8(v.0.clone()).ok())
            .filter(|v| !v.is_empty())
            .ok_or_else(|| format!("the identityRef Secret {ns}/{name} has no {k}"))
    };
    Ok((key("username")?, key("password")?))
}
