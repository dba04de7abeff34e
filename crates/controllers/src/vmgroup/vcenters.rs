//! Where a group's vCenter is and how to log in: its VCenterSimulator's status, or a Secret.

use super::types::{VmGroup, DEFAULT_SECRET};
use infrasim_controller_runtime::vcenters::read_secret;
use infrasim_vim_client::{Credentials, Trust};
use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;
use kube::ResourceExt;

/// The vCenter a group names, as credentials: its VCenterSimulator's status, or its Secret
/// (`vcenter` when it names none); why not, as a message for `VCenterReachable`.
pub async fn credentials(client: &kube::Client, group: &VmGroup) -> Result<Credentials, String> {
    let ns = group.namespace().unwrap_or_else(|| "default".into());
    let reference = group.spec.vcenter_ref.clone().unwrap_or_default();
    if let Some(simulator) = reference.simulator {
        return simulator_credentials(client, &ns, &simulator).await;
    }
    let name = reference
        .secret_name
        .unwrap_or_else(|| DEFAULT_SECRET.to_string());
    let secret = Api::<Secret>::namespaced(client.clone(), &ns)
        .get_opt(&name)
        .await
        .map_err(|e| format!("reading Secret {ns}/{name}: {e}"))?
        .ok_or_else(|| format!("Secret {ns}/{name} not found"))?;
    read_secret(&secret).map_err(|why| format!("Secret {ns}/{name}: {why}"))
}

/// A VCenterSimulator's address, credentials and thumbprint, once it serves.
async fn simulator_credentials(
    client: &kube::Client,
    ns: &str,
    name: &str,
) -> Result<Credentials, String> {
    use crate::vcsim::types::VCenterSimulator;
    let simulator = Api::<VCenterSimulator>::namespaced(client.clone(), ns)
        .get_opt(name)
        .await
        .map_err(|e| format!("reading VCenterSimulator {ns}/{name}: {e}"))?
        .ok_or_else(|| format!("VCenterSimulator {ns}/{name} not found"))?;
    match simulator.status {
        Some(s) if !s.host.is_empty() && !s.thumbprint.is_empty() => Ok(Credentials {
            server: s.host,
            username: s.username,
            password: s.password,
            trust: Trust::Thumbprint(s.thumbprint),
        }),
        _ => Err(format!("VCenterSimulator {ns}/{name} does not serve yet")),
    }
}
