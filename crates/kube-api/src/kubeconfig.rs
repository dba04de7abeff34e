//! Kubeconfig files for clients of an API server (kubectl, client-go, kube-rs, Python).

use base64::Engine;
use serde_json::json;

/// What a kubeconfig names: a server, the CA that signed it, and one user's credentials.
#[derive(Debug, Clone)]
pub struct KubeconfigSpec<'a> {
    pub cluster_name: &'a str,
    pub user_name: &'a str,
    pub server: &'a str,
    pub ca_pem: &'a str,
    pub client_cert_pem: &'a str,
    pub client_key_pem: &'a str,
    /// Set when the server is reached through an address its certificate does not name
    /// (SNI routing on a shared port).
    pub tls_server_name: Option<&'a str>,
}

/// Renders the kubeconfig YAML.
pub fn render(spec: &KubeconfigSpec<'_>) -> String {
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s.as_bytes());
    let context = format!("{}@{}", spec.user_name, spec.cluster_name);
    let mut cluster = json!({
        "server": spec.server,
        "certificate-authority-data": b64(spec.ca_pem),
    });
    if let Some(name) = spec.tls_server_name {
        cluster["tls-server-name"] = json!(name);
    }
    let doc = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "preferences": {},
        "clusters": [{"name": spec.cluster_name, "cluster": cluster}],
        "users": [{"name": spec.user_name, "user": {
            "client-certificate-data": b64(spec.client_cert_pem),
            "client-key-data": b64(spec.client_key_pem),
        }}],
        "contexts": [{"name": context, "context": {"cluster": spec.cluster_name, "user": spec.user_name}}],
        "current-context": context,
    });
    serde_yaml::to_string(&doc).unwrap_or_default()
}

/// The kubeconfig kubeadm publishes in `kube-public/cluster-info`: one unnamed cluster (its CA
/// and `server`), no user or context, in kubeadm's field order.
pub fn cluster_info(server: &str, ca_pem: &str) -> String {
    let ca = base64::engine::general_purpose::STANDARD.encode(ca_pem.as_bytes());
    format!(
        "apiVersion: v1\nclusters:\n- cluster:\n    certificate-authority-data: {ca}\n    server: {server}\n  name: \"\"\ncontexts: null\ncurrent-context: \"\"\nkind: Config\npreferences: {{}}\nusers: null\n"
    )
}
