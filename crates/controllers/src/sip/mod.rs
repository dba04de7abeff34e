//! The SIPCluster controller (Airship's Support Infra Provider): a `SIPCluster` asks for
//! bare-metal hosts for a tenant cluster's control plane and workers; the controller claims
//! matching `BareMetalHost`s by labelling them, spread over a topology key, all or nothing,
//! and puts load balancers in front of them. SIPClusters are served one at a time, as SIP
//! serves them, so two never claim the same host; every step writes only what differs, so a
//! second reconcile changes nothing.

mod auth;
mod jump_host;
mod network_data;
mod schedule;
mod services;
pub mod types;

use infrasim_controller_runtime::conditions::{self, Condition};
use infrasim_controller_runtime::context::Context;
use infrasim_controller_runtime::informers::{Informer, Informers};
use infrasim_controller_runtime::reconcile::{Cleanup, Next, Reconcile};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service};
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use kube::runtime::reflector::ObjectRef;
use kube::ResourceExt;
use schedule::{HostKey, Plan};
use serde_json::json;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;
use types::{
    labels, BareMetalHost, ChosenHost, SIPCluster, SIPClusterStatus, CONTROL_PLANE, FINALIZER,
    WORKER,
};

/// The field manager the SIPCluster controller writes under (its status, the load balancers'
/// Services): the family's name and its kind, as [`hosts`]' stand-in is the family's and its
/// file's (see [`infrasim_controller_runtime::writes`]).
const MANAGER: &str = "infrasim-sip-controller/sipcluster";

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Kube(#[from] kube::Error),
    #[error("the cluster's services: {0}")]
    Services(String),
}

/// A backstop, not a poll, for what the controller reads but does not watch: the Secrets a
/// schedule and the services are made from (hosts' network data and BMC credentials, the
/// jump host's keys, the auth service's CA). The deployed controller may only get Secrets,
/// and watching every Secret of the plane to wake one cluster would cost more than a look.
const SECRETS_BACKSTOP: Duration = Duration::from_secs(60);

struct Reconciler {
    ctx: Context,
    hosts: Informer<BareMetalHost>,
}

/// Runs the SIPCluster controller until the process ends.
pub async fn run(ctx: Context, informers: Arc<Informers>) {
    let clusters = informers.of::<SIPCluster>();
    let hosts = informers.of::<BareMetalHost>();
    let store = clusters.store();
    // A host's change wakes the cluster holding it (a failed host is replaced) and every
    // cluster not Ready (a new or freed host may complete its schedule).
    let controller = infrasim_controller_runtime::triggers::controller(&clusters, None)
        .with_config(kube::runtime::controller::Config::default().concurrency(1))
        .watches_shared_stream(
            infrasim_controller_runtime::triggers::every_change(&hosts),
            move |host: Arc<BareMetalHost>| {
                let holder = schedule::claimed_by(&host);
                store
                    .state()
                    .iter()
                    .filter(|c| {
                        holder.as_ref() == Some(&(c.namespace().unwrap_or_default(), c.name_any()))
                            || !ready(c)
                    })
                    .map(|c| ObjectRef::from_obj(&**c))
                    .collect::<Vec<_>>()
            },
        );
    let r = Arc::new(Reconciler {
        ctx: ctx.clone(),
        hosts,
    });
    infrasim_controller_runtime::reconcile::run(&ctx, controller, r).await;
}

fn ready(c: &SIPCluster) -> bool {
    c.status
        .as_ref()
        .is_some_and(|s| conditions::is_true(&s.conditions, "Ready"))
}

impl Reconcile<SIPCluster> for Reconciler {
    type Error = Error;
    const FINALIZER: Option<&'static str> = Some(FINALIZER);

    async fn apply(&self, sip: Arc<SIPCluster>) -> Result<Next, Error> {
        serve(&sip, self).await
    }

    /// Its hosts are released and its services go.
    async fn cleanup(&self, sip: Arc<SIPCluster>) -> Result<Cleanup, Error> {
        decommission(&sip, self).await?;
        Ok(Cleanup::Done)
    }
}

/// Schedules the cluster's hosts, deploys its services and labels what it holds.
async fn serve(sip: &SIPCluster, r: &Reconciler) -> Result<Next, Error> {
    let ns = sip.namespace().unwrap_or_default();
    let api: Api<SIPCluster> = Api::namespaced(r.ctx.client.clone(), &ns);
    let mut status = sip.status.clone().unwrap_or_default();
    let (plan, addresses) = match schedule_with_addresses(sip, r).await? {
        Ok(found) => found,
        Err(Unschedulable { why, passed_over }) => {
            r.ctx.event(sip, true, "Unschedulable", why.clone()).await;
            set(r, sip, &mut status, false, "Unschedulable", why);
            write_status(&api, sip, status).await?;
            // Not Ready, it is woken by every host's change; hosts passed over for their
            // Secrets are mended by Secrets, which nothing watches.
            return Ok(match passed_over {
                true => Next::After(SECRETS_BACKSTOP),
                false => Next::AwaitChange,
            });
        }
    };
    if let Err(failure) = deploy(sip, r, &plan, &addresses).await {
        let why = failure.to_string();
        r.ctx
            .event(sip, true, "InfraServiceFailure", why.clone())
            .await;
        set(r, sip, &mut status, false, "InfraServiceFailure", why);
        write_status(&api, sip, status).await?;
        return match failure {
            // Not Ready, it is woken by its spec's and every host's change.
            ServiceFailure::Spec(_) => Ok(Next::AwaitChange),
            ServiceFailure::Secret(_) => Ok(Next::After(SECRETS_BACKSTOP)),
            // A failure, retried with the runner's backoff.
            ServiceFailure::Refused(why) => Err(Error::Services(why)),
        };
    }
    let (claimed, released) = match label(sip, r, &plan).await {
        Ok(changed) => changed,
        Err(e) => {
            set(
                r,
                sip,
                &mut status,
                false,
                "UnableToApplyLabels",
                e.to_string(),
            );
            write_status(&api, sip, status).await?;
            return Err(e);
        }
    };
    if !claimed.is_empty() {
        let note = format!("claimed {}", claimed.join(", "));
        r.ctx.event(sip, false, "HostsClaimed", note).await;
    }
    if !released.is_empty() {
        let note = format!("released {}", released.join(", "));
        r.ctx.event(sip, false, "HostsReleased", note).await;
    }
    status.hosts = chosen(sip, &plan, &addresses);
    if plan.short.is_empty() {
        set(
            r,
            sip,
            &mut status,
            true,
            "ReconciliationSucceeded",
            String::new(),
        );
    } else {
        // Serving on what is left; a freed or new host wakes it to fill the role again.
        set(
            r,
            sip,
            &mut status,
            false,
            "Unschedulable",
            plan.short.join("; "),
        );
    }
    write_status(&api, sip, status).await?;
    // Its spec's and its hosts' changes wake it; the Secrets its services are made from are
    // not watched (see SECRETS_BACKSTOP), nor are the objects it applied, which a look
    // applies again: a backstop, at a settled cluster's pace.
    Ok(Next::After(SETTLED_BACKSTOP))
}

/// How long a served cluster goes between looks when nothing wakes it.
const SETTLED_BACKSTOP: Duration = Duration::from_secs(300);

/// Why no schedule holds, and whether hosts were passed over for their Secrets.
struct Unschedulable {
    why: String,
    passed_over: bool,
}

/// Why a cluster's services could not be made, by what they wait for.
#[derive(Debug, thiserror::Error)]
enum ServiceFailure {
    /// What the spec or the hosts say (an invalid key, no host with an address).
    #[error("{0}")]
    Spec(String),
    /// A Secret the spec names is missing or lacks a key.
    #[error("{0}")]
    Secret(String),
    /// A read or write the plane refused.
    #[error("{0}")]
    Refused(String),
}

/// What the services need of a held host.
#[derive(Debug, Default)]
struct HostInfo {
    /// Its address per network id the services name.
    addresses: BTreeMap<String, String>,
    /// Its BMC's address and credentials (read when a jump host reaches the hosts).
    bmc: Option<(String, String, String)>,
}

type Addresses = BTreeMap<HostKey, HostInfo>;

/// The plan, with every held host's addresses: a host whose network data lacks an address a
/// service needs is passed over and the schedule made again (as SIP does), until one holds
/// or cannot be made (the inner error, for the status).
async fn schedule_with_addresses(
    sip: &SIPCluster,
    r: &Reconciler,
) -> Result<Result<(Plan, Addresses), Unschedulable>, Error> {
    let hosts = r.hosts.store().state();
    let me = (sip.namespace().unwrap_or_default(), sip.name_any());
    let active_before: HashSet<HostKey> = sip
        .status
        .iter()
        .flat_map(|s| s.hosts.values().flatten())
        .filter(|h| !h.standby)
        .map(|h| (h.namespace.clone(), h.name.clone()))
        .collect();
    let interfaces = interfaces(sip);
    let with_bmc = !sip.spec.services.jump_host.is_empty();
    let by_key: HashMap<HostKey, &BareMetalHost> =
        hosts.iter().map(|h| (schedule::key_of(h), &**h)).collect();
    // What each host's Secrets said, kept across the retries: a retry reads only new hosts.
    let mut addresses = Addresses::new();
    let mut excluded = HashSet::new();
    loop {
        let plan = match schedule::plan(&me, &sip.spec.nodes, &hosts, &active_before, &excluded) {
            Ok(p) => p,
            Err(why) => {
                let passed_over = !excluded.is_empty();
                return Ok(Err(Unschedulable { why, passed_over }));
            }
        };
        let mut unusable = Vec::new();
        for key in plan.roles.values().flatten() {
            let Some(host) = by_key.get(key).filter(|_| !addresses.contains_key(key)) else {
                continue;
            };
            match host_info(r, host, &interfaces, with_bmc).await? {
                Ok(found) => {
                    addresses.insert(key.clone(), found);
                }
                Err(why) => {
                    tracing::info!(host = %key.1, %why, "host passed over");
                    unusable.push(key.clone());
                }
            }
        }
        if unusable.is_empty() {
            addresses.retain(|key, _| plan.role_of(key).is_some());
            return Ok(Ok((plan, addresses)));
        }
        excluded.extend(unusable);
    }
}

/// The network ids the services read addresses on.
fn interfaces(sip: &SIPCluster) -> Vec<String> {
    let s = &sip.spec.services;
    let mut ids: Vec<String> = s
        .load_balancer_control_plane
        .iter()
        .map(|l| &l.common)
        .chain(s.load_balancer_worker.iter().map(|l| &l.common))
        .chain(s.jump_host.iter().map(|j| &j.common))
        .chain(s.auth.iter().map(|a| &a.common))
        .map(|c| c.node_interface_id.clone())
        .filter(|id| !id.is_empty())
        .collect();
    ids.sort();
    ids.dedup();
    ids
}

/// What the services need of a host: its address on each of `interfaces` (from its network
/// data Secret) and, `with_bmc`, its BMC credentials; why not (inner), which passes it over.
async fn host_info(
    r: &Reconciler,
    host: &BareMetalHost,
    interfaces: &[String],
    with_bmc: bool,
) -> Result<Result<HostInfo, String>, Error> {
    let mut info = HostInfo::default();
    if !interfaces.is_empty() {
        let Some(reference) = &host.spec.network_data else {
            return Ok(Err("no networkData".into()));
        };
        let ns = reference
            .namespace
            .clone()
            .or_else(|| host.namespace())
            .unwrap_or_default();
        let data = match secret_key(r, &ns, &reference.name, "networkData").await? {
            Ok(data) => data,
            Err(why) => return Ok(Err(why)),
        };
        for id in interfaces {
            match network_data::address(&data, id) {
                Ok(ip) => {
                    info.addresses.insert(id.clone(), ip);
                }
                Err(why) => return Ok(Err(why)),
            }
        }
    }
    if with_bmc {
        let Some(bmc) = &host.spec.bmc else {
            return Ok(Err("no bmc".into()));
        };
        let ns = host.namespace().unwrap_or_default();
        let mut read = Vec::new();
        for key in ["username", "password"] {
            match secret_key(r, &ns, &bmc.credentials_name, key).await? {
                Ok(v) => read.push(String::from_utf8_lossy(&v).into_owned()),
                Err(why) => return Ok(Err(why)),
            }
        }
        let password = read.pop().unwrap_or_default();
        let username = read.pop().unwrap_or_default();
        info.bmc = Some((jump_host::bmc_host(&bmc.address), username, password));
    }
    Ok(Ok(info))
}

/// One key of a Secret; why not (inner).
async fn secret_key(
    r: &Reconciler,
    ns: &str,
    name: &str,
    key: &str,
) -> Result<Result<Vec<u8>, String>, Error> {
    let secrets: Api<Secret> = Api::namespaced(r.ctx.client.clone(), ns);
    let Some(secret) = secrets.get_opt(name).await? else {
        return Ok(Err(format!("Secret {ns}/{name} not found")));
    };
    match secret.data.and_then(|mut d| d.remove(key)) {
        Some(v) => Ok(Ok(v.0)),
        None => Ok(Err(format!("Secret {ns}/{name} has no {key}"))),
    }
}

/// Makes the load balancers match the plan; why not.
async fn deploy(
    sip: &SIPCluster,
    r: &Reconciler,
    plan: &Plan,
    addresses: &Addresses,
) -> Result<(), ServiceFailure> {
    let s = &sip.spec.services;
    let backends = |role: &str, id: &str| -> Vec<services::Backend> {
        plan.roles
            .get(role)
            .into_iter()
            .flatten()
            .filter_map(|key| {
                let ip = addresses.get(key)?.addresses.get(id)?;
                Some(services::Backend {
                    name: key.1.clone(),
                    ip: ip.clone(),
                })
            })
            .collect()
    };
    // The load balancer of `role`, from its service's image and interface, on `ports`.
    let balancer = |role: &str, common: &types::ServiceCommon, ports: &[(String, i32, i32)]| {
        let hosts = backends(role, &common.node_interface_id);
        services::load_balancer(sip, role, &common.image, ports, &hosts)
    };
    let mut wanted = Vec::new();
    if let Some(lb) = s.load_balancer_control_plane.first() {
        let ports = services::control_plane_ports(lb.node_port);
        wanted.push(balancer(types::CONTROL_PLANE, &lb.common, &ports));
    }
    if let Some(lb) = s.load_balancer_worker.first() {
        let range = lb.node_port_range;
        let ports = services::worker_ports(range.start, range.end);
        wanted.push(balancer(types::WORKER, &lb.common, &ports));
    }
    if let Some(spec) = s.jump_host.first() {
        wanted.push(jump_host_objects(sip, r, spec, plan, addresses).await?);
    }
    if let Some(spec) = s.auth.first() {
        wanted.push(auth_objects(sip, r, spec, plan, addresses).await?);
    }
    for objects in &wanted {
        apply_objects(r, &sip.namespace().unwrap_or_default(), objects)
            .await
            .map_err(ServiceFailure::Refused)?;
    }
    Ok(())
}

/// The jump host's objects: every held host with its BMC, the private keys' names from the
/// `nodeSSHPrivateKeys` Secret (which must exist), the authorized keys checked.
async fn jump_host_objects(
    sip: &SIPCluster,
    r: &Reconciler,
    spec: &types::JumpHost,
    plan: &Plan,
    addresses: &Addresses,
) -> Result<services::Objects, ServiceFailure> {
    let invalid = jump_host::invalid_keys(&spec.ssh_authorized_keys);
    if let Some(key) = invalid.first() {
        let why = format!("encountered invalid Authorized Key: {key}");
        return Err(ServiceFailure::Spec(why));
    }
    let ns = sip.namespace().unwrap_or_default();
    let secrets: Api<Secret> = Api::namespaced(r.ctx.client.clone(), &ns);
    let keys = match secrets.get_opt(&spec.node_ssh_private_keys).await {
        Ok(Some(s)) => s.data.unwrap_or_default().into_keys().collect::<Vec<_>>(),
        Ok(None) => {
            return Err(ServiceFailure::Secret(format!(
                "nodeSSHPrivateKeys: Secret {ns}/{} not found",
                spec.node_ssh_private_keys
            )))
        }
        Err(e) => return Err(ServiceFailure::Refused(e.to_string())),
    };
    let hosts: Vec<jump_host::Reachable> = plan
        .roles
        .values()
        .flatten()
        .filter_map(|key| {
            let info = addresses.get(key)?;
            let (bmc_ip, username, password) = info.bmc.clone()?;
            Some(jump_host::Reachable {
                name: key.1.clone(),
                ip: info.addresses.get(&spec.common.node_interface_id).cloned(),
                bmc_ip,
                username,
                password,
            })
        })
        .collect();
    Ok(jump_host::objects(sip, spec, &hosts, &keys))
}

/// The OIDC provider's objects: on the first control-plane host's address on its network,
/// serving the `caSecret`'s TLS (which must exist, with the `ca.crt` the API servers trust).
async fn auth_objects(
    sip: &SIPCluster,
    r: &Reconciler,
    spec: &types::AuthService,
    plan: &Plan,
    addresses: &Addresses,
) -> Result<services::Objects, ServiceFailure> {
    let id = &spec.common.node_interface_id;
    let address = plan
        .roles
        .get(types::CONTROL_PLANE)
        .and_then(|hosts| hosts.first())
        .and_then(|key| addresses.get(key)?.addresses.get(id))
        .ok_or_else(|| {
            let why = format!("auth: no control-plane host with an address on {id:?}");
            ServiceFailure::Spec(why)
        })?;
    let ns = sip.namespace().unwrap_or_default();
    let ca = match secret_key(r, &ns, &spec.ca_secret, "ca.crt").await {
        Ok(Ok(ca)) => String::from_utf8_lossy(&ca).into_owned(),
        Ok(Err(why)) => return Err(ServiceFailure::Secret(format!("auth caSecret: {why}"))),
        Err(e) => return Err(ServiceFailure::Refused(e.to_string())),
    };
    Ok(auth::objects(sip, spec, address, &ca))
}

/// Applies one service's objects.
async fn apply_objects(r: &Reconciler, ns: &str, o: &services::Objects) -> Result<(), String> {
    let client = r.ctx.client.clone();
    apply(&Api::<Secret>::namespaced(client.clone(), ns), &o.secret).await?;
    if let Some(config_map) = &o.config_map {
        apply(
            &Api::<ConfigMap>::namespaced(client.clone(), ns),
            config_map,
        )
        .await?;
    }
    apply(
        &Api::<Deployment>::namespaced(client.clone(), ns),
        &o.deployment,
    )
    .await?;
    apply(&Api::<Service>::namespaced(client, ns), &o.service).await
}

/// Server-side applies `obj` (the server leaves an object equal to it untouched).
async fn apply<K>(api: &Api<K>, obj: &K) -> Result<(), String>
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + serde::Serialize
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    let mut body = serde_json::to_value(obj).map_err(|e| e.to_string())?;
    body["apiVersion"] = json!(K::api_version(&()));
    body["kind"] = json!(K::kind(&()));
    let name = obj.meta().name.clone().unwrap_or_default();
    api.patch(
        &name,
        &PatchParams::apply(MANAGER).force(),
        &Patch::Apply(body),
    )
    .await
    .map(drop)
    .map_err(|e| format!("applying {} {name}: {e}", K::kind(&())))
}

/// Labels the held hosts with the cluster and their role, and unlabels the released ones;
/// a host whose labels are already right is not written.
/// The hosts newly claimed (`name (role)`) and released.
async fn label(
    sip: &SIPCluster,
    r: &Reconciler,
    plan: &Plan,
) -> Result<(Vec<String>, Vec<String>), Error> {
    let hosts = r.hosts.store().state();
    let me = (sip.namespace().unwrap_or_default(), sip.name_any());
    let (mut claimed, mut released) = (Vec::new(), Vec::new());
    for host in hosts.iter() {
        let key = schedule::key_of(host);
        let role = plan.role_of(&key);
        let want = match role {
            Some(role) => Some(claim_labels(&me, role)),
            None if plan.release.contains(&key) => None,
            None => continue,
        };
        let was_mine = schedule::claimed_by(host).as_ref() == Some(&me);
        if relabel(r, host, want).await? {
            match role {
                Some(role) if !was_mine => claimed.push(format!("{} ({role})", key.1)),
                None => released.push(key.1.clone()),
                Some(_) => {}
            }
        }
    }
    Ok((claimed, released))
}

fn claim_labels(me: &(String, String), role: &str) -> BTreeMap<&'static str, String> {
    BTreeMap::from([
        (labels::CLUSTER_NAMESPACE, me.0.clone()),
        (labels::CLUSTER_NAME, me.1.clone()),
        (labels::NODE_TYPE, role.to_string()),
        (labels::SCHEDULED, "true".to_string()),
        (labels::WORKLOAD_CLUSTER, me.1.clone()),
    ])
}

/// Sets a host's SIP labels to `want` (removes them all for `None`), when they differ.
async fn relabel(
    r: &Reconciler,
    host: &BareMetalHost,
    want: Option<BTreeMap<&'static str, String>>,
) -> Result<bool, Error> {
    let have = host.labels();
    let patch: serde_json::Map<String, serde_json::Value> = labels::ALL
        .iter()
        .filter_map(|k| {
            let wanted = want.as_ref().and_then(|w| w.get(k));
            (have.get(*k) != wanted).then(|| (k.to_string(), json!(wanted)))
        })
        .collect();
    if patch.is_empty() {
        return Ok(false);
    }
    let api: Api<BareMetalHost> =
        Api::namespaced(r.ctx.client.clone(), &host.namespace().unwrap_or_default());
    let body = json!({"metadata": {"labels": patch}});
    api.patch(
        &host.name_any(),
        &PatchParams::default(),
        &Patch::Merge(body),
    )
    .await?;
    Ok(true)
}

/// The status's hosts: by role, in the plan's order, the first `active` active.
fn chosen(
    sip: &SIPCluster,
    plan: &Plan,
    addresses: &Addresses,
) -> BTreeMap<String, Vec<ChosenHost>> {
    let first_interface = interfaces(sip).into_iter().next();
    plan.roles
        .iter()
        .map(|(role, keys)| {
            let active = sip
                .spec
                .nodes
                .get(role)
                .map_or(0, |n| n.count.active.max(0)) as usize;
            let hosts = keys
                .iter()
                .enumerate()
                .map(|(i, key)| ChosenHost {
                    namespace: key.0.clone(),
                    name: key.1.clone(),
                    ip: first_interface
                        .as_ref()
                        .and_then(|id| addresses.get(key)?.addresses.get(id).cloned()),
                    standby: i >= active,
                })
                .collect();
            (role.clone(), hosts)
        })
        .collect()
}

/// A deleted SIPCluster: every host it holds is let go, and its services removed.
async fn decommission(sip: &SIPCluster, r: &Reconciler) -> Result<(), Error> {
    let me = (sip.namespace().unwrap_or_default(), sip.name_any());
    for host in r.hosts.store().state().iter() {
        if schedule::claimed_by(host).as_ref() == Some(&me) {
            relabel(r, host, None).await?;
        }
    }
    let ns = &me.0;
    let client = r.ctx.client.clone();
    for name in service_names(&me.1) {
        delete(&Api::<Service>::namespaced(client.clone(), ns), &name).await?;
        delete(&Api::<Deployment>::namespaced(client.clone(), ns), &name).await?;
        delete(&Api::<Secret>::namespaced(client.clone(), ns), &name).await?;
        delete(&Api::<ConfigMap>::namespaced(client.clone(), ns), &name).await?;
    }
    Ok(())
}

async fn delete<K>(api: &Api<K>, name: &str) -> Result<(), Error>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    match api.delete(name, &DeleteParams::default()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Sets Ready, for the generation it judged (as SIP does).
fn set(
    r: &Reconciler,
    sip: &SIPCluster,
    status: &mut SIPClusterStatus,
    ok: bool,
    reason: &str,
    message: String,
) {
    let mut ready = Condition::new("Ready", ok, reason, message);
    ready.observed_generation = sip.metadata.generation;
    conditions::set(&mut status.conditions, ready, r.ctx.now());
}

async fn write_status(
    api: &Api<SIPCluster>,
    sip: &SIPCluster,
    status: SIPClusterStatus,
) -> Result<(), Error> {
    if sip.status.as_ref() == Some(&status) {
        return Ok(());
    }
    let body = json!({
        "apiVersion": "airship.airshipit.org/v1",
        "kind": "SIPCluster",
        "status": status,
    });
    infrasim_controller_runtime::writes::apply_status(api, &sip.name_any(), MANAGER, &body).await?;
    Ok(())
}

/// The names of every object the services of `cluster` may have (the load balancers', the
/// jump host's and the auth service's), for removal.
fn service_names(cluster: &str) -> Vec<String> {
    let mut names: Vec<String> = [CONTROL_PLANE, WORKER]
        .iter()
        .map(|role| services::load_balancer_name(role, cluster))
        .collect();
    names.push(jump_host::name(cluster));
    names.push(auth::name(cluster));
    names
}
