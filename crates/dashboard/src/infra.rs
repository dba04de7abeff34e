//! The infrastructure beside the clusters: the simulated vCenters (VCenterSimulators) with
//! their VMs by power state, VmGroups with their replicas, SIPClusters with the hosts they
//! hold. A kind the plane does not serve (its controller is off) is shown as empty.

use crate::samples::{ByLabel, Sample};
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams};
use serde::Serialize;
use serde_json::Value;

/// At most this many objects of each kind are listed.
pub const LIMIT: u32 = 500;

#[derive(Debug, Serialize, Default)]
pub struct Infrastructure {
    pub vcenters: Vec<VCenter>,
    pub vm_groups: Vec<VmGroup>,
    pub sip_clusters: Vec<SipCluster>,
}

#[derive(Debug, Serialize, PartialEq)]
pub struct VCenter {
    pub namespace: String,
    pub name: String,
    /// `status.host`, where the simulator listens.
    pub host: String,
    pub ready: Option<String>,
    /// VMs by power state (`poweredOn`, `poweredOff`, `suspended`).
    pub vms: ByLabel,
    /// Fault injection rules in force, by effect (`fault`, `delay`).
    pub faults: ByLabel,
}

#[derive(Debug, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct VmGroup {
    pub namespace: String,
    pub name: String,
    pub desired: i64,
    pub ready: i64,
}

#[derive(Debug, Serialize, PartialEq)]
pub struct SipCluster {
    pub namespace: String,
    pub name: String,
    pub ready: Option<String>,
    /// Role (`ControlPlane`, `Worker`, ...) to the hosts chosen for it.
    pub hosts: Vec<(String, Vec<String>)>,
}

fn resource(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
}

fn ready(object: &Value) -> Option<String> {
    object["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "Ready")
        .and_then(|c| c["status"].as_str().map(String::from))
}

fn names(object: &DynamicObject) -> (String, String) {
    (
        object.metadata.namespace.clone().unwrap_or_default(),
        object.metadata.name.clone().unwrap_or_default(),
    )
}

fn vcenter(object: &DynamicObject, latest: Option<&Sample>) -> VCenter {
    let (namespace, name) = names(object);
    let id = format!("{namespace}/{name}");
    let vms = latest
        .and_then(|s| s.vms.get(&id).cloned())
        .unwrap_or_default();
    let faults = latest
        .and_then(|s| s.faults.get(&id).cloned())
        .unwrap_or_default();
    VCenter {
        host: object.data["status"]["host"]
            .as_str()
            .unwrap_or_default()
            .into(),
        ready: ready(&object.data),
        vms,
        faults,
        namespace,
        name,
    }
}

fn vm_group(object: &DynamicObject) -> VmGroup {
    let (namespace, name) = names(object);
    VmGroup {
        namespace,
        name,
        desired: object.data["spec"]["replicas"].as_i64().unwrap_or(0),
        ready: object.data["status"]["readyReplicas"].as_i64().unwrap_or(0),
    }
}

fn sip_cluster(object: &DynamicObject) -> SipCluster {
    let (namespace, name) = names(object);
    let hosts = object.data["status"]["hosts"]
        .as_object()
        .map(|roles| {
            roles
                .iter()
                .map(|(role, chosen)| {
                    let hosts = chosen.as_array().map(Vec::as_slice).unwrap_or(&[]);
                    let names = hosts
                        .iter()
                        .filter_map(|h| h["name"].as_str().map(String::from));
                    (role.clone(), names.collect())
                })
                .collect()
        })
        .unwrap_or_default();
    SipCluster {
        ready: ready(&object.data),
        hosts,
        namespace,
        name,
    }
}

/// Lists a kind in every namespace; empty when the plane does not serve it.
async fn list(
    client: &kube::Client,
    resource: &ApiResource,
) -> Result<Vec<DynamicObject>, kube::Error> {
    let api: Api<DynamicObject> = Api::all_with(client.clone(), resource);
    match api.list(&ListParams::default().limit(LIMIT)).await {
        Ok(list) => Ok(list.items),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(Vec::new()),
        Err(e) => Err(e),
    }
}

/// The infrastructure as the plane has it now, with VM counts from the `latest` sample.
pub async fn infrastructure(
    client: &kube::Client,
    latest: Option<&Sample>,
) -> Result<Infrastructure, kube::Error> {
    let vcenters = resource(
        "vcsim.infrastructure.cluster.x-k8s.io",
        "v1alpha1",
        "VCenterSimulator",
        "vcentersimulators",
    );
    let groups = resource(
        "vm.codeconnect.vmworld.com",
        "v1alpha1",
        "VmGroup",
        "vmgroups",
    );
    let sips = resource("airship.airshipit.org", "v1", "SIPCluster", "sipclusters");
    Ok(Infrastructure {
        vcenters: list(client, &vcenters)
            .await?
            .iter()
            .map(|v| vcenter(v, latest))
            .collect(),
        vm_groups: list(client, &groups).await?.iter().map(vm_group).collect(),
        sip_clusters: list(client, &sips).await?.iter().map(sip_cluster).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object(body: Value) -> DynamicObject {
        serde_json::from_value(body).expect("an object")
    }

    #[test]
    fn each_kind_reads_what_its_status_says() {
        let mut sample = Sample::default();
        sample
            .vms
            .insert("ns/vc".into(), [("poweredOn".to_string(), 3.0)].into());
        sample
            .faults
            .insert("ns/vc".into(), [("delay".to_string(), 1.0)].into());
        let vc = object(json!({"apiVersion": "x/v1", "kind": "VCenterSimulator",
            "metadata": {"namespace": "ns", "name": "vc"},
            "status": {"host": "127.0.0.1:1234", "conditions": [{"type": "Ready", "status": "True"}]}}));
        let vc = vcenter(&vc, Some(&sample));
        assert_eq!(
            (vc.host.as_str(), vc.ready.as_deref()),
            ("127.0.0.1:1234", Some("True"))
        );
        assert_eq!(vc.vms.get("poweredOn"), Some(&3.0));
        assert_eq!(vc.faults.get("delay"), Some(&1.0));

        let group = object(json!({"apiVersion": "x/v1", "kind": "VmGroup",
            "metadata": {"namespace": "ns", "name": "g"},
            "spec": {"replicas": 4}, "status": {"readyReplicas": 2}}));
        assert_eq!((vm_group(&group).desired, vm_group(&group).ready), (4, 2));

        let sip = object(json!({"apiVersion": "x/v1", "kind": "SIPCluster",
            "metadata": {"namespace": "ns", "name": "s"},
            "status": {"hosts": {"ControlPlane": [{"name": "h1"}, {"name": "h2"}], "Worker": []}}}));
        let sip = sip_cluster(&sip);
        assert_eq!(
            sip.hosts,
            [
                (
                    "ControlPlane".to_string(),
                    vec!["h1".to_string(), "h2".to_string()]
                ),
                ("Worker".to_string(), vec![])
            ]
        );
        assert_eq!(sip.ready, None);
    }
}
