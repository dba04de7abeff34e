//! Failure domains, as CAPV has them: a cluster-scoped `VSphereFailureDomain` says where in
//! a vCenter its machines go (datacenter, compute cluster, datastore, networks) and which
//! tags mark its region and zone; a cluster-scoped `VSphereDeploymentZone` deploys one on a
//! server, with the resource pool and folder its machines are placed in.
//!
//! - The VSphereDeploymentZone reconciler checks all of it against the vCenter, as CAPV's
//!   does (`VCenterAvailable`, `PlacementConstraintReady`, `FailureDomainValidated`,
//!   `Ready`, `status.ready`), and makes itself an owner of its failure domain. A deleted
//!   zone waits until no Machine is placed in it, then lets its failure domain go with it.
//! - A VSphereCluster with a `failureDomainSelector` lists the zones it selects on its
//!   server in `status.failureDomains` (see [`for_cluster`]), which Cluster API's core
//!   copies to the Cluster and spreads control-plane machines over.
//! - A Machine in a failure domain gets a VSphereVM placed as the zone says (see
//!   [`placement`]).

use super::types::{
    FailureDomainLevel, VSphereCluster, VSphereDeploymentZone, VSphereFailureDomain,
};
use super::{Error, Reconciler};
use crate::capi::core::Machine;
use infrasim_controller_runtime::conditions::Condition;
use infrasim_controller_runtime::informers::Informers;
use infrasim_controller_runtime::placement::path_in as in_datacenter;
use infrasim_controller_runtime::reconcile::{Cleanup, Next, Reconcile};
use infrasim_controller_runtime::triggers::{filtered, hash};
use infrasim_controller_runtime::vcenters::VCenter;
use infrasim_controller_runtime::Controller;
use infrasim_vim_client::{Client, Moref};
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use kube::runtime::reflector::ObjectRef;
use kube::ResourceExt;
use serde_json::{json, Value};
use std::sync::Arc;

/// CAPV's finalizer on a VSphereDeploymentZone.
pub const FINALIZER: &str = "vspheredeploymentzone.infrastructure.cluster.x-k8s.io";

const MANAGER: &str = "infrasim-capv/zones";

/// The VSphereDeploymentZone controller: a failure domain's change wakes the zones naming
/// it, and a Machine placed in a zone leaving wakes that zone (its deletion may wait on it).
pub(super) fn controller(informers: &Informers) -> Controller<VSphereDeploymentZone> {
    let zones = informers.of::<VSphereDeploymentZone>();
    let store = zones.store();
    infrasim_controller_runtime::triggers::controller(&zones, None)
        .watches_shared_stream(
            infrasim_controller_runtime::triggers::every_change(
                &informers.of::<VSphereFailureDomain>(),
            ),
            move |fd| {
                store
                    .state()
                    .iter()
                    .filter(|z| z.spec.failure_domain == fd.name_any())
                    .map(|z| ObjectRef::from_obj(&**z))
                    .collect::<Vec<_>>()
            },
        )
        .watches_shared_stream(filtered(&informers.of::<Machine>(), placed), |m| {
            m.spec.failure_domain.as_deref().map(ObjectRef::new)
        })
}

/// What of a Machine a zone's deletion waits on: its failure domain and its deletion.
fn placed(m: &Machine) -> Option<u64> {
    let fd = m.spec.failure_domain.as_ref()?;
    hash((m.uid(), fd, m.metadata.deletion_timestamp.is_some()))
}

impl Reconcile<VSphereDeploymentZone> for Reconciler {
    type Error = Error;
    const FINALIZER: Option<&'static str> = Some(FINALIZER);

    async fn apply(&self, zone: Arc<VSphereDeploymentZone>) -> Result<Next, Error> {
        let before = zone.status.as_ref().map(|s| &s.rest);
        if super::paused(self, &*zone, before, MANAGER, None).await? {
            return Ok(Next::AwaitChange);
        }
        let name = &zone.spec.failure_domain;
        let Some(fd) = self.informers.get::<VSphereFailureDomain>("", name).await? else {
            // Its creation wakes the zone (see `controller`).
            return Err(Error::Reported(format!(
                "VSphereDeploymentZone {}: VSphereFailureDomain {name} not found",
                zone.name_any()
            )));
        };
        let mut set = Vec::new();
        let checked = self.check(&zone, &fd, &mut set).await;
        if checked.is_ok() {
            set.push(validated(true, "Validated", ""));
        }
        let ready = checked.is_ok();
        let extra = json!({"ready": ready});
        super::write_status(self, &*zone, before, MANAGER, set, extra).await?;
        match checked {
            Ok(()) => {
                own_failure_domain(self, &zone, &fd).await?;
                Ok(Next::AwaitChange)
            }
            Err(why) => Err(Error::Reported(format!(
                "VSphereDeploymentZone {}: {why}",
                zone.name_any()
            ))),
        }
    }

    /// Waits for the Machines placed in the zone to go; then the zone stops owning its
    /// failure domain, which is deleted once nothing owns it.
    async fn cleanup(&self, zone: Arc<VSphereDeploymentZone>) -> Result<Cleanup, Error> {
        let before = zone.status.as_ref().map(|s| &s.rest);
        let deleting = [
            "VCenterAvailable",
            "PlacementConstraintReady",
            "FailureDomainValidated",
        ]
        .map(|t| Condition::new(t, false, "Deleting", ""))
        .to_vec();
        super::write_status(self, &*zone, before, MANAGER, deleting, json!({})).await?;
        let mut using: Vec<String> = self
            .informers
            .of::<Machine>()
            .store()
            .state()
            .iter()
            .filter(|m| m.metadata.deletion_timestamp.is_none())
            .filter(|m| m.spec.failure_domain.as_deref() == Some(zone.name_any().as_str()))
            .map(|m| format!("{}/{}", m.namespace().unwrap_or_default(), m.name_any()))
            .collect();
        if !using.is_empty() {
            using.sort();
            tracing::info!(
                zone = zone.name_any(),
                "blocking VSphereDeploymentZone deletion: currently in use by Machines {}",
                using.join(", ")
            );
            return Ok(Cleanup::Pending(Next::AwaitChange));
        }
        let name = &zone.spec.failure_domain;
        if let Some(fd) = self.informers.get::<VSphereFailureDomain>("", name).await? {
            release_failure_domain(self, &zone, &fd).await?;
        }
        Ok(Cleanup::Done)
    }
}

/// A `FailureDomainValidated` condition.
fn validated(ok: bool, reason: &str, why: impl Into<String>) -> Condition {
    Condition::new("FailureDomainValidated", ok, reason, why)
}

impl Reconciler {
    /// Checks a zone and its failure domain against the vCenter, adding each condition to
    /// `set`; the first failure, as CAPV stops at it.
    async fn check(
        &self,
        zone: &VSphereDeploymentZone,
        fd: &VSphereFailureDomain,
        set: &mut Vec<Condition>,
    ) -> Result<(), String> {
        let vc = match self.zone_session(zone).await {
            Ok(vc) => vc,
            Err(why) => {
                set.push(Condition::new(
                    "VCenterAvailable",
                    false,
                    "VCenterUnreachable",
                    why.clone(),
                ));
                return Err(why);
            }
        };
        set.push(Condition::new("VCenterAvailable", true, "Available", ""));
        let client = &vc.client;
        let topology = &fd.spec.topology;
        let dc = topology.datacenter.trim_start_matches('/');
        let constraint = &zone.spec.placement_constraint;
        let pool = match constraint.get("resourcePool").filter(|p| !p.is_empty()) {
            Some(rp) => match find_pool(client, dc, &topology.compute_cluster, rp).await {
                Some(pool) => Some(pool),
                None => {
                    let why = format!("resource pool {rp} is misconfigured");
                    set.push(constraint_unmet("ResourcePoolNotFound", &why));
                    return Err(why);
                }
            },
            None => None,
        };
        if let Some(folder) = constraint.get("folder").filter(|f| !f.is_empty()) {
            if find(client, &in_datacenter(dc, "vm", folder))
                .await
                .is_none()
            {
                let why = format!("folder {folder} is misconfigured");
                set.push(constraint_unmet("FolderNotFound", &why));
                return Err(why);
            }
        }
        set.push(Condition::new(
            "PlacementConstraintReady",
            true,
            "Ready",
            "",
        ));
        for (level, reason) in [
            (&fd.spec.region, "RegionMisconfigured"),
            (&fd.spec.zone, "ZoneMisconfigured"),
        ] {
            if let Err(why) = verify_level(client, fd, level).await {
                set.push(validated(false, reason, why.clone()));
                return Err(why);
            }
        }
        if let Err((reason, why)) = check_topology(client, fd, pool.as_ref()).await {
            set.push(validated(false, reason, why.clone()));
            return Err(why);
        }
        Ok(())
    }

    /// A session on the zone's server, as CAPV's zone controller logs in: with the
    /// credentials of a VSphereCluster on that server that has an identity and whose
    /// credentials can be read, else with the manager's own.
    async fn zone_session(&self, zone: &VSphereDeploymentZone) -> Result<Arc<VCenter>, String> {
        let server = &zone.spec.server;
        let clusters = self.informers.of::<VSphereCluster>().store().state();
        for c in clusters
            .iter()
            .filter(|c| &c.spec.server == server && c.spec.identity_ref.is_some())
        {
            let found = super::credentials::for_cluster(
                &self.ctx.client,
                &self.defaults,
                Some(c),
                server,
                &c.spec.thumbprint,
            )
            .await;
            if let Ok(credentials) = found {
                return self
                    .vcenters
                    .get(credentials)
                    .await
                    .map_err(|e| e.to_string());
            }
        }
        let credentials =
            super::credentials::for_cluster(&self.ctx.client, &self.defaults, None, server, "")
                .await?;
        self.vcenters
            .get(credentials)
            .await
            .map_err(|e| e.to_string())
    }
}

fn constraint_unmet(reason: &str, why: &str) -> Condition {
    Condition::new("PlacementConstraintReady", false, reason, why)
}

async fn find(client: &Client, path: &str) -> Option<Moref> {
    client.find_by_inventory_path(path).await.ok().flatten()
}

/// A resource pool by inventory path, or by name inside the compute cluster's root pool
/// (the root pool itself for `Resources`).
async fn find_pool(client: &Client, dc: &str, compute: &str, rp: &str) -> Option<Moref> {
    if rp.contains('/') {
        return find(client, rp.trim_start_matches('/')).await;
    }
    if compute.is_empty() {
        return None;
    }
    let root = format!("{}/Resources", in_datacenter(dc, "host", compute));
    match rp {
        "Resources" => find(client, &root).await,
        _ => find(client, &format!("{root}/{rp}")).await,
    }
}

/// The region's or zone's tag exists in its category, and every object of its type in the
/// failure domain's topology carries it.
async fn verify_level(
    client: &Client,
    fd: &VSphereFailureDomain,
    level: &FailureDomainLevel,
) -> Result<(), String> {
    let (tag, category) = (&level.name, &level.tag_category);
    let found = client
        .tag_in_category(tag, category)
        .await
        .map_err(|e| format!("failed to verify tag {tag} and category {category}: {e}"))?;
    if found.is_none() {
        return Err(format!(
            "failed to verify tag {tag} and category {category}: no tag {tag} in category \
             {category}"
        ));
    }
    let objects = level_objects(client, fd, &level.type_)
        .await
        .map_err(|e| format!("failed to get objects of type {}: {e}", level.type_))?;
    if objects.is_empty() {
        return Err(format!(
            "failed to get objects of type {}: unable to find taggable object",
            level.type_
        ));
    }
    for object in objects {
        let names = client
            .attached_tag_names(&object)
            .await
            .map_err(|e| format!("failed to verify if object {object} has tag {tag}: {e}"))?;
        if !names.contains(tag) {
            return Err(format!("object {object} does not have tag {tag}"));
        }
    }
    Ok(())
}

/// The objects a region or zone of `type` stands for: the datacenter, the compute cluster,
/// or the hosts of the compute cluster's host group.
async fn level_objects(
    client: &Client,
    fd: &VSphereFailureDomain,
    type_: &str,
) -> Result<Vec<Moref>, String> {
    let topology = &fd.spec.topology;
    let dc = topology.datacenter.trim_start_matches('/');
    let cluster_path = in_datacenter(dc, "host", &topology.compute_cluster);
    let path = match type_ {
        "Datacenter" => dc.to_string(),
        "ComputeCluster" | "HostGroup" => cluster_path,
        other => return Err(format!("unknown failure domain type {other}")),
    };
    let object = find(client, &path)
        .await
        .ok_or_else(|| format!("no {path}"))?;
    if type_ != "HostGroup" {
        return Ok(vec![object]);
    }
    let host_group = host_placement(topology).map_or("", |(_, hosts)| hosts);
    let drs = client
        .drs_configuration(&object)
        .await
        .map_err(|e| e.to_string())?;
    Ok(drs
        .group(host_group, true)
        .map(|g| g.members.clone())
        .unwrap_or_default())
}

/// A topology's `hosts`: its VM group and host group, when it names both (CAPV's
/// `IsDefined`).
pub(super) fn host_placement(
    topology: &super::types::FailureDomainTopology,
) -> Option<(&str, &str)> {
    let hosts = topology.hosts.as_ref()?;
    let vms = hosts.get("vmGroupName").filter(|n| !n.is_empty())?;
    let host_group = hosts.get("hostGroupName").filter(|n| !n.is_empty())?;
    Some((vms, host_group))
}

/// The failure domain's compute cluster (owner of the zone's resource pool, if it names
/// one), datastore, networks and hosts exist; else the reason and why.
async fn check_topology(
    client: &Client,
    fd: &VSphereFailureDomain,
    pool: Option<&Moref>,
) -> Result<(), (&'static str, String)> {
    let topology = &fd.spec.topology;
    let dc = topology.datacenter.trim_start_matches('/');
    let compute = &topology.compute_cluster;
    let mut compute_cluster = None;
    if !compute.is_empty() {
        let Some(cluster) = find(client, &in_datacenter(dc, "host", compute)).await else {
            let why = format!("compute cluster {compute} not found");
            return Err(("ComputeClusterNotFound", why));
        };
        compute_cluster = Some(cluster.clone());
        if let Some(pool) = pool {
            let owner = client
                .properties(pool, &["owner"])
                .await
                .ok()
                .and_then(|o| o.prop("owner").and_then(|v| v.moref()).cloned());
            match owner {
                None => {
                    let why = "resource pool owner not found".to_string();
                    return Err(("ComputeClusterNotFound", why));
                }
                Some(owner) if owner != cluster => {
                    let why = "resource pool is not owned by compute cluster".to_string();
                    return Err(("ResourcePoolNotFound", why));
                }
                Some(_) => {}
            }
        }
    }
    let datastore = &topology.datastore;
    if !datastore.is_empty()
        && find(client, &in_datacenter(dc, "datastore", datastore))
            .await
            .is_none()
    {
        let why = format!("datastore {datastore} is misconfigured");
        return Err(("DatastoreNotFound", why));
    }
    let configured = topology
        .network_configurations
        .iter()
        .filter_map(|c| c.get("networkName").and_then(Value::as_str));
    for network in topology
        .networks
        .iter()
        .map(String::as_str)
        .chain(configured)
    {
        if find(client, &in_datacenter(dc, "network", network))
            .await
            .is_none()
        {
            return Err(("NetworkNotFound", format!("network {network} is not found")));
        }
    }
    if let Some((vm_group, host_group)) = host_placement(topology) {
        // A VM-host rule of the compute cluster ties the VM group to the host group (a
        // disabled one is accepted, as CAPV accepts it with a warning).
        let drs = match &compute_cluster {
            Some(c) => client.drs_configuration(c).await.ok(),
            None => None,
        };
        if drs.is_none_or(|d| d.affinity_rule(host_group, vm_group).is_none()) {
            let why = "vm host affinity rule does not exist".to_string();
            return Err(("HostsMisconfigured", why));
        }
    }
    Ok(())
}

/// Makes the zone an owner of its failure domain (as CAPV does, so the domain goes once no
/// zone deploys it).
async fn own_failure_domain(
    r: &Reconciler,
    zone: &VSphereDeploymentZone,
    fd: &VSphereFailureDomain,
) -> Result<(), Error> {
    let uid = zone.uid().unwrap_or_default();
    if fd.owner_references().iter().any(|o| o.uid == uid) {
        return Ok(());
    }
    let mut owners = fd.owner_references().to_vec();
    owners.push(crate::capi::standin::objects::owner_ref(zone, false));
    patch_owners(r, fd, owners).await
}

/// The zone stops owning its failure domain; a domain nothing owns any more is deleted.
async fn release_failure_domain(
    r: &Reconciler,
    zone: &VSphereDeploymentZone,
    fd: &VSphereFailureDomain,
) -> Result<(), Error> {
    let owners: Vec<_> = fd
        .owner_references()
        .iter()
        .filter(|o| !(o.kind == "VSphereDeploymentZone" && o.name == zone.name_any()))
        .cloned()
        .collect();
    if owners.len() != fd.owner_references().len() {
        patch_owners(r, fd, owners.clone()).await?;
    }
    if owners.is_empty() && fd.metadata.deletion_timestamp.is_none() {
        let api: Api<VSphereFailureDomain> = Api::all(r.ctx.client.clone());
        match api.delete(&fd.name_any(), &DeleteParams::default()).await {
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            other => drop(other?),
        }
    }
    Ok(())
}

async fn patch_owners(
    r: &Reconciler,
    fd: &VSphereFailureDomain,
    owners: Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference>,
) -> Result<(), Error> {
    let api: Api<VSphereFailureDomain> = Api::all(r.ctx.client.clone());
    let body = json!({"metadata": {
        "resourceVersion": fd.resource_version(),
        "ownerReferences": owners,
    }});
    api.patch(
        &fd.name_any(),
        &PatchParams::default(),
        &Patch::Merge(&body),
    )
    .await?;
    Ok(())
}

/// What a VSphereCluster with a `failureDomainSelector` reports of its failure domains.
pub(super) struct ClusterDomains {
    /// `status.failureDomains`: each selected zone on the cluster's server that is ready or
    /// has not reported yet, by name, with `controlPlane`.
    pub listed: Vec<Value>,
    /// `FailureDomainsReady`, when there are failure domains or some are awaited.
    pub condition: Option<Condition>,
    /// Whether every selected zone has reported (CAPV goes no further until then).
    pub settled: bool,
}

/// The failure domains of a VSphereCluster, as CAPV's cluster reconciler lists them: the
/// VSphereDeploymentZones its `failureDomainSelector` selects on its server. `None` when it
/// has no selector.
pub(super) fn for_cluster(informers: &Informers, c: &VSphereCluster) -> Option<ClusterDomains> {
    let selector = c.spec.rest.get("failureDomainSelector")?;
    let selector: k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector =
        serde_json::from_value(selector.clone()).unwrap_or_default();
    let selector = kube::core::Selector::try_from(selector).ok();
    let zones = informers.of::<VSphereDeploymentZone>().store().state();
    let (mut listed, mut unreported, mut not_ready) = (Vec::new(), 0, 0);
    for zone in zones.iter().filter(|z| z.spec.server == c.spec.server) {
        let labels = zone.labels();
        if !selector
            .as_ref()
            .is_some_and(|s| kube::core::SelectorExt::matches(s, labels))
        {
            continue;
        }
        let ready = zone.status.as_ref().and_then(|s| s.ready());
        match ready {
            None => unreported += 1,
            Some(false) => {
                not_ready += 1;
                continue;
            }
            Some(true) => {}
        }
        let mut fd = json!({"name": zone.name_any()});
        if let Some(cp) = zone.spec.control_plane {
            fd["controlPlane"] = json!(cp);
        }
        listed.push(fd);
    }
    listed.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
    let condition = if unreported > 0 {
        Some(not_ready_domains(
            "Waiting for failure domains to report ready status",
        ))
    } else if listed.is_empty() {
        None
    } else if not_ready > 0 {
        Some(not_ready_domains(
            "One or more failure domains are not ready",
        ))
    } else {
        Some(Condition::new("FailureDomainsReady", true, "Ready", ""))
    };
    Some(ClusterDomains {
        listed,
        condition,
        settled: unreported == 0,
    })
}

fn not_ready_domains(why: &str) -> Condition {
    Condition::new("FailureDomainsReady", false, "NotReady", why)
}

/// The VSphereClusters a zone's report wakes: those on its server.
pub(super) fn clusters_on_server(
    informers: &Informers,
) -> impl Fn(Arc<VSphereDeploymentZone>) -> Vec<ObjectRef<VSphereCluster>> + Send + Sync + 'static {
    let store = informers.of::<VSphereCluster>().store();
    move |zone| {
        store
            .state()
            .iter()
            .filter(|c| c.spec.server == zone.spec.server)
            .filter(|c| c.spec.rest.contains_key("failureDomainSelector"))
            .map(|c| ObjectRef::from_obj(&**c))
            .collect()
    }
}

/// What of a zone its clusters list: its labels, server, control-plane flag and readiness.
pub(super) fn zone_report(z: &VSphereDeploymentZone) -> Option<u64> {
    hash((
        z.uid(),
        z.labels(),
        &z.spec.server,
        z.spec.control_plane,
        z.status.as_ref().and_then(|s| s.ready()),
        z.metadata.deletion_timestamp.is_some(),
    ))
}

/// Places a VSphereVM's clone spec in the Machine's failure domain, as CAPV overrides it:
/// the zone's server, the failure domain's datacenter, the zone's folder and resource pool
/// and the domain's datastore where given, and its networks over the VM's devices in order
/// (extra networks become extra devices). Unchanged when the Machine has no failure domain
/// or its zone or domain cannot be read (CAPV logs that and goes on).
pub(super) async fn placement(
    informers: &Informers,
    machine: &Machine,
    spec: &mut serde_json::Map<String, Value>,
) {
    let Some(name) = machine
        .spec
        .failure_domain
        .as_deref()
        .filter(|n| !n.is_empty())
    else {
        return;
    };
    if let Some((zone, fd)) = zone_of(informers, name).await {
        override_placement(&zone, &fd, spec);
    }
}

/// A Machine's failure domain (through the zone it names), as CAPV's VSphereVM reconciler
/// reads it; `None` when the Machine has none or it cannot be read.
pub(super) async fn failure_domain_of(
    informers: &Informers,
    machine: &Machine,
) -> Option<Arc<VSphereFailureDomain>> {
    let name = machine
        .spec
        .failure_domain
        .as_deref()
        .filter(|n| !n.is_empty())?;
    zone_of(informers, name).await.map(|(_, fd)| fd)
}

async fn zone_of(
    informers: &Informers,
    name: &str,
) -> Option<(Arc<VSphereDeploymentZone>, Arc<VSphereFailureDomain>)> {
    let zone = informers.get::<VSphereDeploymentZone>("", name).await;
    let Ok(Some(zone)) = zone else {
        tracing::warn!(zone = name, "failed to get VSphereDeploymentZone");
        return None;
    };
    let fd = informers
        .get::<VSphereFailureDomain>("", &zone.spec.failure_domain)
        .await;
    let Ok(Some(fd)) = fd else {
        tracing::warn!(
            failure_domain = zone.spec.failure_domain,
            "failed to get VSphereFailureDomain"
        );
        return None;
    };
    Some((zone, fd))
}

/// [`placement`]'s override, once the zone and failure domain are read.
fn override_placement(
    zone: &VSphereDeploymentZone,
    fd: &VSphereFailureDomain,
    spec: &mut serde_json::Map<String, Value>,
) {
    let topology = &fd.spec.topology;
    spec.insert("server".into(), json!(zone.spec.server));
    spec.insert("datacenter".into(), json!(topology.datacenter));
    for key in ["folder", "resourcePool"] {
        if let Some(v) = zone
            .spec
            .placement_constraint
            .get(key)
            .filter(|v| !v.is_empty())
        {
            spec.insert(key.into(), json!(v));
        }
    }
    if !topology.datastore.is_empty() {
        spec.insert("datastore".into(), json!(topology.datastore));
    }
    let mut devices: Vec<Value> = spec
        .get("network")
        .and_then(|n| n.get("devices"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let named: Vec<Value> = topology
        .networks
        .iter()
        .map(|n| json!({"networkName": n}))
        .collect();
    merge_devices(&mut devices, &named);
    merge_devices(&mut devices, &topology.network_configurations);
    if !topology.networks.is_empty() || !topology.network_configurations.is_empty() {
        let network = spec.entry("network").or_insert_with(|| json!({}));
        network["devices"] = json!(devices);
    }
}

/// Merges `overrides` into `devices` by position, each override's fields over the device's
/// (`addressesFromPools` and the DHCP overrides included); overrides past the last device
/// become devices of their own.
fn merge_devices(devices: &mut Vec<Value>, overrides: &[Value]) {
    for (i, o) in overrides.iter().enumerate() {
        if i >= devices.len() {
            devices.push(json!({}));
        }
        if let (Some(device), Some(o)) = (devices[i].as_object_mut(), o.as_object()) {
            for (k, v) in o {
                let empty = v.is_null()
                    || v.as_str() == Some("")
                    || v.as_array().is_some_and(|a| a.is_empty());
                if !empty {
                    device.insert(k.clone(), v.clone());
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn zone(rp: Option<&str>) -> VSphereDeploymentZone {
        let mut z = VSphereDeploymentZone::new("zone-a", Default::default());
        z.spec.server = "vc.example:443".into();
        z.spec.failure_domain = "fd-a".into();
        if let Some(rp) = rp {
            z.spec
                .placement_constraint
                .insert("resourcePool".into(), rp.into());
        }
        z
    }

    fn failure_domain(networks: &[&str], configs: Vec<Value>) -> VSphereFailureDomain {
        let mut fd = VSphereFailureDomain::new("fd-a", Default::default());
        fd.spec.topology.datacenter = "DC1".into();
        fd.spec.topology.datastore = "LocalDS_1".into();
        fd.spec.topology.networks = networks.iter().map(|n| n.to_string()).collect();
        fd.spec.topology.network_configurations = configs;
        fd
    }

    #[test]
    fn a_machine_in_a_failure_domain_is_placed_as_its_zone_says() {
        let mut spec = serde_json::Map::new();
        spec.insert("server".into(), json!("other:443"));
        spec.insert("datacenter".into(), json!("DC0"));
        spec.insert("folder".into(), json!("kept"));
        spec.insert(
            "network".into(),
            json!({"devices": [{"networkName": "VM Network", "dhcp4": true}]}),
        );
        let fd = failure_domain(&["DC1_DVPG0", "extra"], vec![]);
        override_placement(&zone(Some("/DC1/host/DC1_C0/Resources")), &fd, &mut spec);
        assert_eq!(spec["server"], json!("vc.example:443"));
        assert_eq!(spec["datacenter"], json!("DC1"));
        assert_eq!(spec["folder"], json!("kept"), "no folder in the zone: kept");
        assert_eq!(spec["resourcePool"], json!("/DC1/host/DC1_C0/Resources"));
        assert_eq!(spec["datastore"], json!("LocalDS_1"));
        assert_eq!(
            spec["network"]["devices"],
            json!([{"networkName": "DC1_DVPG0", "dhcp4": true}, {"networkName": "extra"}])
        );
    }

    #[test]
    fn network_configurations_merge_over_the_devices_in_order() {
        let mut spec = serde_json::Map::new();
        spec.insert(
            "network".into(),
            json!({"devices": [{"networkName": "a", "dhcp4": true}, {"networkName": "b"}]}),
        );
        let configs = vec![
            json!({"networkName": "", "dhcp4": false, "nameservers": ["10.0.0.2"]}),
            json!({"networkName": "c"}),
        ];
        override_placement(&zone(None), &failure_domain(&[], configs), &mut spec);
        assert_eq!(
            spec["network"]["devices"],
            json!([
                {"networkName": "a", "dhcp4": false, "nameservers": ["10.0.0.2"]},
                {"networkName": "c"}
            ])
        );
        assert!(!spec.contains_key("resourcePool"));
    }
}
