//! The vCenters the groups name, one session each, shared by every group that names the
//! same server with the same credentials (so a thousand groups cost one login, not a
//! thousand). A session the vCenter forgets is replaced inside the client on the next call.

use super::types::{VmGroup, DEFAULT_SECRET};
use infrasim_vim_client::{Client, Credentials, Trust};
use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;
use kube::ResourceExt;
use std::collections::HashMap;
use std::sync::Arc;
use tokio::sync::Mutex;

/// Sessions by the credentials that opened them.
#[derive(Default)]
pub struct VCenters {
    sessions: Mutex<HashMap<Credentials, Arc<Client>>>,
}

impl VCenters {
    /// The session for `credentials`, logging in if there is none yet.
    pub async fn session(
        &self,
        credentials: Credentials,
    ) -> Result<Arc<Client>, infrasim_vim_client::Error> {
        // Held across the login so two groups naming a new vCenter open one session.
        let mut sessions = self.sessions.lock().await;
        if let Some(client) = sessions.get(&credentials) {
            return Ok(client.clone());
        }
        let client = Arc::new(Client::connect(credentials.clone()).await?);
        sessions.insert(credentials, client.clone());
        Ok(client)
    }
}

/// The Secret a group names (or `vcenter`), read into credentials; why not, as a message
/// for the group's `VCenterReachable` condition.
pub async fn credentials(client: &kube::Client, group: &VmGroup) -> Result<Credentials, String> {
    let ns = group.namespace().unwrap_or_else(|| "default".into());
    let name = group
        .spec
        .vcenter_ref
        .as_ref()
        .map(|r| r.secret_name.clone())
        .unwrap_or_else(|| DEFAULT_SECRET.to_string());
    let secret = Api::<Secret>::namespaced(client.clone(), &ns)
        .get_opt(&name)
        .await
        .map_err(|e| format!("reading Secret {ns}/{name}: {e}"))?
        .ok_or_else(|| format!("Secret {ns}/{name} not found"))?;
    read_secret(&secret).map_err(|why| format!("Secret {ns}/{name}: {why}"))
}

fn read_secret(secret: &Secret) -> Result<Credentials, String> {
    let key = |k: &str| -> Option<String> {
        let data = secret.data.as_ref()?.get(k)?;
        String::from_utf8(data.0.clone())
            .ok()
            .map(|s| s.trim().to_string())
    };
    let need = |k: &str| {
        key(k)
            .filter(|v| !v.is_empty())
            .ok_or(format!("no key {k}"))
    };
    let trust = match (key("thumbprint"), key("caBundle")) {
        (Some(t), _) if !t.is_empty() => Trust::Thumbprint(t),
        (_, Some(ca)) if !ca.is_empty() => Trust::CaBundle(ca),
        _ => return Err("neither a thumbprint nor a caBundle to trust the server by".into()),
    };
    Ok(Credentials {
        server: need("server")?,
        username: need("username")?,
        password: need("password")?,
        trust,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::ByteString;
    use std::collections::BTreeMap;

    fn secret(pairs: &[(&str, &str)]) -> Secret {
        let data: BTreeMap<String, ByteString> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), ByteString(v.as_bytes().to_vec())))
            .collect();
        Secret {
            data: Some(data),
            ..Secret::default()
        }
    }

    #[test]
    fn a_secret_needs_a_server_credentials_and_something_to_trust() {
        let full = [
            ("server", "127.0.0.1:8989"),
            ("username", "u"),
            ("password", "p"),
            ("thumbprint", "AB:CD"),
        ];
        let c = read_secret(&secret(&full)).unwrap();
        assert_eq!(c.trust, Trust::Thumbprint("AB:CD".into()));
        let untrusted = read_secret(&secret(&full[..3])).unwrap_err();
        assert!(untrusted.contains("thumbprint"), "{untrusted}");
        let no_password = [("server", "s"), ("username", "u"), ("caBundle", "pem")];
        assert_eq!(
            read_secret(&secret(&no_password)).unwrap_err(),
            "no key password"
        );
    }
}
