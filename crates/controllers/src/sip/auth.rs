//! The OIDC provider a SIPCluster's tenant API servers authenticate users against
//! (`auth-<name>`): a Dex `Deployment` on a `NodePort` `Service`, serving TLS from the
//! `caSecret`, its configuration in a `Secret` (`config.yaml`), and a `ConfigMap` holding what
//! the tenant's kube-apiserver needs to trust it: the issuer URL, the client id, the claims it
//! reads and the CA (`oidc-issuer-url`, `oidc-client-id`, `oidc-username-claim`,
//! `oidc-groups-claim`, `oidc-ca.crt`). The issuer is on the first control-plane host's address
//! on the service's network, where the tenant reaches it. The client is public (kubectl's
//! OIDC login uses PKCE), so no client secret has to be kept stable across reconciles.

use super::services::{deployment, meta, node_port_service, pod_labels, secret_volume, Objects};
use super::types::{AuthService, SIPCluster};
use k8s_openapi::api::core::v1::{
    ConfigMap, Container, ContainerPort, PodSpec, Secret, ServicePort, VolumeMount,
};
use k8s_openapi::ByteString;
use kube::ResourceExt;
use std::collections::BTreeMap;

/// The port Dex serves HTTPS on in its pod.
const DEX_PORT: i32 = 5556;

/// `auth-<name>`.
pub fn name(cluster: &str) -> String {
    format!("auth-{cluster}")
}

/// The issuer URL the provider answers as, on `address`.
pub fn issuer(address: &str, node_port: i32) -> String {
    format!("https://{address}:{node_port}/dex")
}

/// The provider for `sip` answering on `address`, trusted through `ca` (the PEM of the
/// caSecret's `ca.crt`).
pub fn objects(sip: &SIPCluster, spec: &AuthService, address: &str, ca: &str) -> Objects {
    let cluster = sip.name_any();
    let name = name(&cluster);
    let labels = pod_labels("auth", "dex", &name);
    let issuer = issuer(address, spec.node_port);
    let config = format!(
        "issuer: {issuer}\nstorage:\n  type: kubernetes\n  config:\n    inCluster: true\nweb:\n  https: 0.0.0.0:{DEX_PORT}\n  tlsCert: /etc/dex/tls/tls.crt\n  tlsKey: /etc/dex/tls/tls.key\noauth2:\n  skipApprovalScreen: true\nstaticClients:\n- id: {cluster}\n  name: {cluster}\n  public: true\n  redirectURIs:\n  - http://localhost:8000\n  - http://localhost:18000\n"
    );
    let secret = Secret {
        metadata: meta(sip, &name),
        data: Some(BTreeMap::from([(
            "config.yaml".to_string(),
            ByteString(config.into_bytes()),
        )])),
        ..Default::default()
    };
    let config_map = ConfigMap {
        metadata: meta(sip, &name),
        data: Some(BTreeMap::from([
            ("oidc-issuer-url".to_string(), issuer),
            ("oidc-client-id".to_string(), cluster),
            ("oidc-username-claim".to_string(), "email".to_string()),
            ("oidc-groups-claim".to_string(), "groups".to_string()),
            ("oidc-ca.crt".to_string(), ca.to_string()),
        ])),
        ..Default::default()
    };
    let port = ServicePort {
        name: Some("https".into()),
        port: DEX_PORT,
        node_port: Some(spec.node_port),
        ..Default::default()
    };
    let service = node_port_service(sip, &name, &labels, vec![port]);
    let mount = |volume: &str, path: &str| VolumeMount {
        name: volume.into(),
        mount_path: path.into(),
        read_only: Some(true),
        ..Default::default()
    };
    let container = Container {
        name: "dex".into(),
        image: Some(spec.common.image.clone()),
        args: Some(vec![
            "dex".into(),
            "serve".into(),
            "/etc/dex/config/config.yaml".into(),
        ]),
        ports: Some(vec![ContainerPort {
            name: Some("https".into()),
            container_port: DEX_PORT,
            ..Default::default()
        }]),
        volume_mounts: Some(vec![
            mount("config", "/etc/dex/config"),
            mount("tls", "/etc/dex/tls"),
        ]),
        ..Default::default()
    };
    let pod = PodSpec {
        containers: vec![container],
        volumes: Some(vec![
            secret_volume("config", &name),
            secret_volume("tls", &spec.ca_secret),
        ]),
        ..Default::default()
    };
    Objects {
        secret,
        config_map: Some(config_map),
        deployment: deployment(meta(sip, &name), &labels, pod),
        service,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_provider_and_the_api_servers_agree_on_issuer_client_and_ca() {
        let mut sip = SIPCluster::new("tenant", Default::default());
        sip.metadata.namespace = Some("t".into());
        let spec = AuthService {
            node_port: 30005,
            ca_secret: "dex-tls".into(),
            ..Default::default()
        };
        let o = objects(&sip, &spec, "10.0.0.3", "-----BEGIN CERTIFICATE-----\n");
        let config = String::from_utf8(o.secret.data.unwrap()["config.yaml"].0.clone()).unwrap();
        let parsed: serde_yaml::Value = serde_yaml::from_str(&config).unwrap();
        assert_eq!(parsed["issuer"], "https://10.0.0.3:30005/dex");
        assert_eq!(parsed["staticClients"][0]["id"], "tenant");
        let flags = o.config_map.unwrap().data.unwrap();
        assert_eq!(flags["oidc-issuer-url"], "https://10.0.0.3:30005/dex");
        assert_eq!(flags["oidc-client-id"], "tenant");
        assert!(flags["oidc-ca.crt"].starts_with("-----BEGIN CERTIFICATE-----"));
        let pod = o.deployment.spec.unwrap().template.spec.unwrap();
        let tls = &pod.volumes.unwrap()[1];
        assert_eq!(
            tls.secret.as_ref().unwrap().secret_name.as_deref(),
            Some("dex-tls")
        );
        assert_eq!(
            o.service.spec.unwrap().ports.unwrap()[0].node_port,
            Some(30005)
        );
    }
}
