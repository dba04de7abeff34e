//! CAPV's supervisor service discovery: the workload cluster learns where its supervisor's
//! API server is from a headless `default/supervisor` Service (port 6443, no selector) and
//! its Endpoints, which name the supervisor's address. That address is the load balancer IP
//! of the supervisor's `kube-system/kube-apiserver-lb-svc` Service, or else the host of the
//! server in its `kube-public/cluster-info` ConfigMap (what `infrasim up` publishes, as
//! kubeadm does); either must be an IP address. `ServiceDiscoveryReady` on the cluster's
//! VSphereCluster says how it went; while the workload cluster cannot be reached it is left
//! as it was, as CAPV leaves it.
//!
//! The dummy network provider supports neither IPv6 nor dual stack, so, as CAPV with that
//! provider, only the first IPv4-or-other address is looked for.

use super::super::Reconciler;
use crate::capi::core::Cluster;
use infrasim_controller_runtime::conditions::Condition;
use infrasim_controller_runtime::writes::apply;
use k8s_openapi::api::core::v1::{ConfigMap, Endpoints, Service};
use kube::api::{Api, PostParams};
use kube::Client;
use serde_json::json;
use std::net::IpAddr;

const MANAGER: &str = "infrasim-capv/servicediscovery";

/// The supervisor's load-balanced API server Service, and where it lives.
pub(super) const LB_SERVICE: (&str, &str) = ("kube-system", "kube-apiserver-lb-svc");
/// kubeadm's public ConfigMap with the cluster's CA and server.
pub(super) const CLUSTER_INFO: (&str, &str) = ("kube-public", "cluster-info");
/// The headless Service made in the workload cluster, and where.
const HEADLESS: (&str, &str) = ("default", "supervisor");
/// The supervisor API server's port, as CAPV writes it whatever the address.
const SUPERVISOR_PORT: i32 = 6443;

/// What became of a cluster's service discovery.
pub(super) enum Outcome {
    /// The condition to report.
    Reported(Condition),
    /// The workload cluster cannot be reached yet: nothing to report.
    Unreachable,
}

/// Ensures the supervisor's headless Service and Endpoints in `cluster`'s workload cluster.
pub(super) async fn reconcile(r: &Reconciler, cluster: &Cluster) -> Outcome {
    let Ok(guest) = r.workloads.of(&r.ctx.client, cluster).await else {
        return Outcome::Unreachable;
    };
    let outcome = async {
        headless_service(&guest).await?;
        let host = supervisor_address(&r.ctx.client).await?;
        endpoints(&guest, host).await
    };
    match outcome.await {
        Ok(()) => Outcome::Reported(condition(None)),
        Err(why) => Outcome::Reported(condition(Some(why))),
    }
}

fn condition(error: Option<String>) -> Condition {
    match error {
        None => Condition::new("ServiceDiscoveryReady", true, "Ready", ""),
        Some(why) => Condition::new("ServiceDiscoveryReady", false, "NotReady", why),
    }
}

/// The headless Service, made when missing (what is there is left alone, as CAPV does).
async fn headless_service(guest: &Client) -> Result<(), String> {
    let (ns, name) = HEADLESS;
    let services: Api<Service> = Api::namespaced(guest.clone(), ns);
    let exists = services
        .get_opt(name)
        .await
        .map_err(|e| format!("failed to check if Service {ns}/{name} already exists: {e}"))?;
    if exists.is_some() {
        return Ok(());
    }
    let body = json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"clusterIP": "None",
                 "ports": [{"port": SUPERVISOR_PORT, "targetPort": SUPERVISOR_PORT}]},
    });
    let service: Service = serde_json::from_value(body).map_err(|e| e.to_string())?;
    match services.create(&PostParams::default(), &service).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
        Err(e) => Err(format!("failed to create supervisor headless Service: {e}")),
    }
}

/// The Endpoints naming the supervisor at `host`.
async fn endpoints(guest: &Client, host: IpAddr) -> Result<(), String> {
    let (ns, name) = HEADLESS;
    let api: Api<Endpoints> = Api::namespaced(guest.clone(), ns);
    let body = json!({
        "apiVersion": "v1", "kind": "Endpoints",
        "metadata": {"name": name, "namespace": ns},
        "subsets": [{"addresses": [{"ip": host.to_string()}],
                     "ports": [{"port": SUPERVISOR_PORT}]}],
    });
    apply(&api, name, MANAGER, &body)
        .await
        .map(|_| ())
        .map_err(|e| format!("failed to create or patch service Endpoints: {e}"))
}

/// The supervisor's API server address: its load balancer's VIP, else the host of
/// `cluster-info`'s server (CAPV's order), with both failures in the error.
async fn supervisor_address(plane: &Client) -> Result<IpAddr, String> {
    let vip = match load_balancer_vip(plane).await {
        Ok(vip) => return parse_ip(&vip),
        Err(e) => e,
    };
    match cluster_info_host(plane).await {
        Ok(host) => parse_ip(&host),
        Err(fip) => Err(format!(
            "Failed to discover supervisor API server endpoint: [{vip}, {fip}]"
        )),
    }
}

fn parse_ip(host: &str) -> Result<IpAddr, String> {
    host.trim_start_matches('[')
        .trim_end_matches(']')
        .parse()
        .map_err(|_| {
            format!("invalid supervisor API server endpoint {host:?}: must be an IP address")
        })
}

/// The first ingress IP of the supervisor's load balancer Service.
async fn load_balancer_vip(plane: &Client) -> Result<String, String> {
    let (ns, name) = LB_SERVICE;
    let api: Api<Service> = Api::namespaced(plane.clone(), ns);
    let service = api
        .get_opt(name)
        .await
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("unable to get supervisor loadbalancer Service {ns}/{name}"))?;
    service
        .status
        .and_then(|s| s.load_balancer)
        .and_then(|lb| lb.ingress)
        .and_then(|i| i.into_iter().next())
        .and_then(|i| i.ip)
        .filter(|ip| !ip.is_empty())
        .ok_or_else(|| format!("no VIP found in the supervisor loadbalancer Service {ns}/{name}"))
}

/// The host of the server `cluster-info`'s kubeconfig names.
async fn cluster_info_host(plane: &Client) -> Result<String, String> {
    let (ns, name) = CLUSTER_INFO;
    let api: Api<ConfigMap> = Api::namespaced(plane.clone(), ns);
    let map = api
        .get_opt(name)
        .await
        .map_err(|e| e.to_string())?
        .ok_or_else(|| {
            format!("unable to get supervisor URL: unable to get ConfigMap {ns}/{name}")
        })?;
    let kubeconfig = map
        .data
        .and_then(|d| d.get("kubeconfig").cloned())
        .filter(|k| !k.is_empty())
        .ok_or_else(|| format!("no kubeconfig key in ConfigMap {ns}/{name}"))?;
    let server = server_of(&kubeconfig)
        .ok_or_else(|| format!("unable to get cluster from kubeconfig in ConfigMap {ns}/{name}"))?;
    let url: http::Uri = server
        .parse()
        .map_err(|e| format!("unable to parse supervisor URL from {server}: {e}"))?;
    url.host()
        .filter(|h| !h.is_empty())
        .map(str::to_string)
        .ok_or_else(|| format!("unable to get supervisor host from URL {server}"))
}

/// The server of a kubeconfig's default cluster: the unnamed one if there is one, else the
/// current context's (client-go's rule for `cluster-info`).
fn server_of(kubeconfig: &str) -> Option<String> {
    let config: serde_yaml::Value = serde_yaml::from_str(kubeconfig).ok()?;
    let clusters = config.get("clusters")?.as_sequence()?;
    let named = |wanted: &str| {
        clusters
            .iter()
            .find(|c| c.get("name").and_then(|n| n.as_str()).unwrap_or("") == wanted)
    };
    let cluster = named("").or_else(|| {
        let current = config.get("current-context")?.as_str()?;
        let context = config
            .get("contexts")?
            .as_sequence()?
            .iter()
            .find(|c| c.get("name").and_then(|n| n.as_str()) == Some(current))?;
        named(context.get("context")?.get("cluster")?.as_str()?)
    })?;
    let server = cluster.get("cluster")?.get("server")?.as_str()?;
    Some(server.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_unnamed_cluster_comes_first_then_the_current_context() {
        let unnamed = "clusters:\n- cluster:\n    server: https://10.0.0.9:6443\n  name: \"\"\n";
        assert_eq!(server_of(unnamed).as_deref(), Some("https://10.0.0.9:6443"));
        let by_context = "clusters:\n- cluster: {server: 'https://a:1'}\n  name: a\n- cluster: {server: 'https://b:2'}\n  name: b\ncontexts:\n- context: {cluster: b}\n  name: ctx\ncurrent-context: ctx\n";
        assert_eq!(server_of(by_context).as_deref(), Some("https://b:2"));
        let neither = "clusters:\n- cluster: {server: 'https://a:1'}\n  name: a\n";
        assert_eq!(server_of(neither), None);
    }

    #[test]
    fn only_an_ip_address_names_the_supervisor() {
        assert_eq!(parse_ip("10.1.2.3").ok(), "10.1.2.3".parse().ok());
        assert_eq!(parse_ip("[::1]").ok(), "::1".parse().ok());
        let err = parse_ip("kind-control-plane").unwrap_err();
        assert!(err.contains("must be an IP address"), "{err}");
    }
}
