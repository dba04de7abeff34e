//! The ViNO controller (Airship's "Virtual Nodes"): a `Vino` asks for VM-backed bare-metal
//! hosts on every Kubernetes Node its selector picks, and gets, as upstream makes them in
//! the controller's namespace, per VM a `BareMetalHost` with a BMC address and credentials
//! Secret, a network-data Secret, and addresses recorded in `IPPool`s; each Node is
//! annotated with what its builder makes. Upstream's builder (libvirt behind sushy-tools, in
//! a DaemonSet) is replaced by a vCenter: each VM is a simulator VM (see [`machines`]), made
//! powered off, whose BMC is the vCenter's Redfish service (the host's `bmc.address`, opened
//! by the Vino's `bmcCredentials`, an account ViNO adds there). Vinos are served one at a
//! time, so two never hand out one address, and every write is skipped or left untouched
//! when nothing differs.

mod builder;
mod daemonset;
mod ipam;
mod machines;
pub mod types;

use crate::sip::types::BareMetalHost;
use builder::{Builder, Domain, HostNode};
use infrasim_controller_runtime::conditions::{self, Condition};
use infrasim_controller_runtime::context::Context;
use infrasim_controller_runtime::informers::{Informer, Informers};
use infrasim_controller_runtime::reconcile::{Cleanup, Next, Reconcile};
use k8s_openapi::api::core::v1::{Namespace, Node, Secret};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{predicates, reflector, watcher, WatchStreamExt};
use kube::ResourceExt;
use serde_json::json;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use types::{IPPool, IPPoolSpec, Vino, VinoStatus, FINALIZER, NETWORK_VALUES};

/// The field manager the Vino controller writes under (its status, the hosts' Secrets and
/// BareMetalHosts): the family's name and its kind, as every controller's (see
/// [`infrasim_controller_runtime::writes`]).
const MANAGER: &str = "infrasim-vino-controller/vino";

/// The annotation naming a host's Vino (`namespace/name`): its power changes wake it.
pub const OWNER: &str = "vino.infrasim.dev/vino";

/// Where the hosts and their Secrets go: `RUNTIME_NAMESPACE` (upstream's variable), else
/// upstream's installed namespace.
pub fn runtime_namespace() -> String {
    std::env::var("RUNTIME_NAMESPACE")
        .ok()
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| "vino-system".into())
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Kube(#[from] kube::Error),
}

struct Reconciler {
    ctx: Context,
    nodes: Store<Node>,
    hosts: Informer<BareMetalHost>,
    hypervisors: machines::Hypervisors,
    namespace: String,
    /// Whether the namespace is known to exist: it is made when the first Vino needs it, so
    /// a plane with no Vino has no `vino-system`.
    namespace_made: std::sync::atomic::AtomicBool,
}

/// Runs the Vino controller until the process ends.
pub async fn run(ctx: Context, informers: Arc<Informers>) {
    let namespace = runtime_namespace();
    let vinos = informers.of::<Vino>();
    let hosts = informers.of::<BareMetalHost>();
    let (nodes, writer) = reflector::store();
    // A Node's labels or addresses decide what it hosts; its heartbeats do not.
    let node_changes = reflector(
        writer,
        watcher(Api::<Node>::all(ctx.client.clone()), Default::default()),
    )
    .applied_objects()
    .predicate_filter(node_facts, Default::default());
    let every = vinos.store();
    let controller = infrasim_controller_runtime::triggers::controller(&vinos, None)
        .with_config(kube::runtime::controller::Config::default().concurrency(1))
        .watches_stream(node_changes, move |_node: Node| {
            every
                .state()
                .iter()
                .map(|v| ObjectRef::from_obj(&**v))
                .collect::<Vec<_>>()
        })
        .watches_shared_stream(
            infrasim_controller_runtime::triggers::every_change(&hosts),
            |host: Arc<BareMetalHost>| {
                let owner = host.annotations().get(OWNER)?;
                let (ns, name) = owner.split_once('/')?;
                Some(ObjectRef::<Vino>::new(name).within(ns))
            },
        );
    let r = Arc::new(Reconciler {
        ctx: ctx.clone(),
        nodes,
        hosts,
        hypervisors: machines::Hypervisors::default(),
        namespace,
        namespace_made: Default::default(),
    });
    infrasim_controller_runtime::reconcile::run(&ctx, controller, r).await;
}

/// What of a Node decides its hosts: its labels and its addresses.
fn node_facts(node: &Node) -> Option<u64> {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    predicates::labels(node).hash(&mut h);
    internal_ip(node).hash(&mut h);
    Some(h.finish())
}

fn internal_ip(node: &Node) -> Option<String> {
    node.status
        .as_ref()?
        .addresses
        .as_ref()?
        .iter()
        .find(|a| a.type_ == "InternalIP")
        .map(|a| a.address.clone())
}

async fn ensure_namespace(ctx: &Context, name: &str) -> Result<(), kube::Error> {
    let api: Api<Namespace> = Api::all(ctx.client.clone());
    if api.get_opt(name).await?.is_some() {
        return Ok(());
    }
    let ns = Namespace {
        metadata: kube::api::ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        ..Default::default()
    };
    match api.create(&PostParams::default(), &ns).await {
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
        other => other.map(drop),
    }
}

impl Reconcile<Vino> for Reconciler {
    type Error = Error;
    const FINALIZER: Option<&'static str> = Some(FINALIZER);

    async fn apply(&self, vino: Arc<Vino>) -> Result<Next, Error> {
        apply(&vino, self).await
    }

    /// Its hosts, VMs and daemon set go; what cannot go yet is tried again.
    async fn cleanup(&self, vino: Arc<Vino>) -> Result<Cleanup, Error> {
        Ok(match decommission(&vino, self).await? {
            Ok(()) => Cleanup::Done,
            Err(why) => {
                tracing::warn!(vino = %vino.name_any(), %why, "Vino not yet taken down");
                // A retry, not a poll: the vCenter is outside the plane (the Secret may name
                // a real one) and tells nobody here when it is back.
                Cleanup::Pending(Next::After(VCENTER_RETRY))
            }
        })
    }
}

async fn apply(vino: &Vino, r: &Reconciler) -> Result<Next, Error> {
    let api: Api<Vino> =
        Api::namespaced(r.ctx.client.clone(), &vino.namespace().unwrap_or_default());
    let mut status = vino.status.clone().unwrap_or_default();
    let ready = conditions::find(&status.conditions, "Ready");
    if ready.is_none_or(|c| c.observed_generation != vino.metadata.generation) {
        // A new generation starts from upstream's one condition.
        status.conditions.clear();
        let progressing = ("Progressing", "Reconciliation progressing");
        set(r, vino, &mut status, &["Ready"], false, progressing);
        write_status(&api, vino, &status).await?;
    }
    let both = ["DaemonSetReady", "Ready"];
    let after = match converge(vino, r).await? {
        Ok(()) => {
            let done = ("ReconciliationSucceeded", "Reconciliation succeeded");
            set(r, vino, &mut status, &both, true, done);
            // Its spec's, its Nodes' and its hosts' changes wake it. A backstop, not a poll,
            // for what nothing here watches: the VMs in the vCenter (one someone destroys or
            // powers is mended on this look) and the Secrets read (templates, the vCenter's).
            Next::After(SETTLED_BACKSTOP)
        }
        Err(failure) => {
            let msg = format!("could not reconcile hosts: {failure}");
            set(
                r,
                vino,
                &mut status,
                &both,
                false,
                ("ReconciliationFailed", &msg),
            );
            r.ctx.event(vino, true, "ReconciliationFailed", msg).await;
            match failure {
                // Its spec's, its Nodes' and its hosts' changes wake it.
                Unconverged::Spec(_) => Next::AwaitChange,
                // A backstop, not a poll: Secrets are read, not watched.
                Unconverged::Secret(_) => Next::After(SECRET_BACKSTOP),
                // A retry, not a poll: the vCenter is outside the plane and tells nobody
                // here when it is back.
                Unconverged::VCenter(_) => Next::After(VCENTER_RETRY),
            }
        }
    };
    write_status(&api, vino, &status).await?;
    Ok(after)
}

/// How soon an unreachable vCenter (or one refusing a VM operation) is tried again.
const VCENTER_RETRY: Duration = Duration::from_secs(10);
/// How soon a missing network-data template Secret is looked for again.
const SECRET_BACKSTOP: Duration = Duration::from_secs(30);
/// How long a converged Vino goes between looks when nothing wakes it.
const SETTLED_BACKSTOP: Duration = Duration::from_secs(300);

/// Why a Vino's hosts could not be made, by what they wait for (the status says which).
#[derive(Debug, thiserror::Error)]
enum Unconverged {
    /// What its spec or the Nodes say (no Node selected, no address left, a bad flavor).
    #[error("{0}")]
    Spec(String),
    /// A network-data template Secret the spec names.
    #[error("{0}")]
    Secret(String),
    /// The vCenter holding the VMs.
    #[error("{0}")]
    VCenter(String),
}

/// Sets conditions `types` to `ok` with `(reason, message)`, at the Vino's generation.
fn set(
    r: &Reconciler,
    vino: &Vino,
    status: &mut VinoStatus,
    types: &[&str],
    ok: bool,
    (reason, message): (&str, &str),
) {
    for type_ in types {
        let mut c = Condition::new(type_, ok, reason, message);
        c.observed_generation = vino.metadata.generation;
        conditions::set(&mut status.conditions, c, r.ctx.now());
    }
}

async fn write_status(api: &Api<Vino>, vino: &Vino, status: &VinoStatus) -> Result<(), Error> {
    if vino.status.as_ref() == Some(status) {
        return Ok(());
    }
    let body = json!({"apiVersion": "airship.airshipit.org/v1", "kind": "Vino", "status": status});
    infrasim_controller_runtime::writes::apply_status(api, &vino.name_any(), MANAGER, &body)
        .await?;
    Ok(())
}

/// The Nodes `vino` selects, by name; why one cannot host (no InternalIP).
fn selected(vino: &Vino, nodes: &Store<Node>) -> Result<Vec<HostNode>, String> {
    let wanted = vino
        .spec
        .node_selector
        .as_ref()
        .map(|s| s.match_labels.clone())
        .unwrap_or_default();
    let mut picked = Vec::new();
    for node in nodes.state() {
        let labels = node.labels();
        if !wanted.iter().all(|(k, v)| labels.get(k) == Some(v)) {
            continue;
        }
        let internal_ip = internal_ip(&node)
            .ok_or_else(|| format!("node {} has no InternalIP", node.name_any()))?;
        picked.push(HostNode {
            name: node.name_any(),
            labels: labels.clone(),
            internal_ip,
        });
    }
    picked.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(picked)
}

/// Makes everything `vino` asks for; why not (inner), for the status.
async fn converge(vino: &Vino, r: &Reconciler) -> Result<Result<(), Unconverged>, Error> {
    use Unconverged::Spec;
    let nodes = match selected(vino, &r.nodes) {
        Ok(n) if n.is_empty() => return Ok(Err(Spec("no Node matches spec.nodeSelector".into()))),
        Ok(n) => n,
        Err(why) => return Ok(Err(Spec(why))),
    };
    use std::sync::atomic::Ordering;
    if !r.namespace_made.load(Ordering::Relaxed) {
        ensure_namespace(&r.ctx, &r.namespace).await?;
        r.namespace_made.store(true, Ordering::Relaxed);
    }
    // Nothing is allocated for hosts whose network data cannot be written.
    if let Err(why) = templates_present(vino, r).await? {
        return Ok(Err(Unconverged::Secret(why)));
    }
    // The DaemonSet upstream runs first, as upstream makes it before the hosts.
    match daemonset::template(&r.ctx.client, vino, &r.namespace).await? {
        Ok(template) => {
            let ds = daemonset::daemon_set(vino, &r.namespace, template);
            let api: Api<k8s_openapi::api::apps::v1::DaemonSet> =
                Api::namespaced(r.ctx.client.clone(), &r.namespace);
            infrasim_controller_runtime::writes::apply(
                &api,
                &daemonset::name_of(vino),
                MANAGER,
                &ds,
            )
            .await?;
        }
        Err(why) => return Ok(Err(Unconverged::Secret(why))),
    }
    let (mut pools, before) = match read_pools(vino, r).await? {
        Ok(p) => p,
        Err(why) => return Ok(Err(Spec(why))),
    };
    // The vCenter names the hosts' BMCs (its Redfish service), so it comes before them.
    let vcenter = match r.hypervisors.get(&r.ctx, &r.namespace).await {
        Ok(v) => v,
        Err(why) => return Ok(Err(Unconverged::VCenter(why))),
    };
    let redfish = vcenter.client.authority();
    let mut builders = Vec::new();
    for node in &nodes {
        match builder::build(vino, node, nodes.len(), &mut pools, &redfish) {
            Ok(b) => builders.push(b),
            Err(why) => return Ok(Err(Spec(why))),
        }
    }
    // Addresses are recorded before anything that uses them is written.
    write_pools(r, &pools, &before).await?;
    for (node, b) in nodes.iter().zip(&builders) {
        annotate(r, &node.name, Some(b)).await?;
    }
    if let Err(why) = make_vms(&vcenter, &builders).await {
        return Ok(Err(why));
    }
    let c = &vino.spec.bmc_credentials;
    // The hosts' BMC credentials open their BMCs: an account of the service's, as an
    // operator (power, boot, media) rather than its administrator.
    if let Err(e) = vcenter
        .client
        .ensure_redfish_account(&c.username, &c.password, "Operator")
        .await
    {
        let why = format!("the BMC account {}: {e}", c.username);
        return Ok(Err(Unconverged::VCenter(why)));
    }
    for b in &builders {
        for domain in &b.domains {
            match builder::network_data(domain, &b.networks) {
                Ok(data) => write_host(vino, r, domain, data).await?,
                Err(why) => return Ok(Err(Spec(why))),
            }
        }
    }
    Ok(Ok(()))
}

/// The IPPools of `vino`'s networks, by subnet, each holding its network's static range,
/// with the resourceVersion each was read at (none for a new one).
async fn read_pools(
    vino: &Vino,
    r: &Reconciler,
) -> Result<
    Result<
        (
            BTreeMap<String, IPPoolSpec>,
            BTreeMap<String, Option<IPPool>>,
        ),
        String,
    >,
    Error,
> {
    let api: Api<IPPool> = Api::namespaced(r.ctx.client.clone(), &r.namespace);
    let (mut pools, mut before) = (BTreeMap::new(), BTreeMap::new());
    for net in &vino.spec.networks {
        if !pools.contains_key(&net.subnet) {
            let found = api.get_opt(&ipam::pool_name(&net.subnet)).await?;
            let spec = match &found {
                Some(p) => p.spec.clone(),
                None => match ipam::new_pool(net) {
                    Ok(spec) => spec,
                    Err(why) => return Ok(Err(why)),
                },
            };
            pools.insert(net.subnet.clone(), spec);
            before.insert(net.subnet.clone(), found);
        }
        let pool = pools.get_mut(&net.subnet).expect("inserted above");
        if let Err(why) = ipam::register(pool, net) {
            return Ok(Err(why));
        }
    }
    Ok(Ok((pools, before)))
}

/// Writes the pools that changed: a replace at the version read (a conflict retries the
/// whole reconcile) or a create.
async fn write_pools(
    r: &Reconciler,
    pools: &BTreeMap<String, IPPoolSpec>,
    before: &BTreeMap<String, Option<IPPool>>,
) -> Result<(), Error> {
    let api: Api<IPPool> = Api::namespaced(r.ctx.client.clone(), &r.namespace);
    for (subnet, spec) in pools {
        let name = ipam::pool_name(subnet);
        match before.get(subnet).cloned().flatten() {
            Some(pool) if &pool.spec == spec => {}
            Some(mut pool) => {
                pool.spec = spec.clone();
                api.replace(&name, &PostParams::default(), &pool).await?;
            }
            None => {
                let pool = IPPool::new(&name, spec.clone());
                api.create(&PostParams::default(), &pool).await?;
            }
        }
    }
    Ok(())
}

/// Sets (or, with `None`, removes) a Node's builder annotation, when it differs.
async fn annotate(r: &Reconciler, node: &str, builder: Option<&Builder>) -> Result<(), Error> {
    let want = match builder {
        Some(b) => Some(serde_yaml::to_string(b).map_err(|e| {
            kube::Error::SerdeError(serde_json::Error::io(std::io::Error::other(e.to_string())))
        })?),
        None => None,
    };
    let have = r
        .nodes
        .get(&ObjectRef::new(node))
        .and_then(|n| n.annotations().get(NETWORK_VALUES).cloned());
    if have == want {
        return Ok(());
    }
    let api: Api<Node> = Api::all(r.ctx.client.clone());
    let patch = json!({"metadata": {"annotations": {NETWORK_VALUES: want}}});
    api.patch(node, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    Ok(())
}

/// Makes the VMs that are missing, powered off (a defined, unstarted domain). Their power is
/// then the BMC's to change: metal3 (or its stand-in) powers a host through its BMC.
async fn make_vms(vcenter: &machines::Connected, builders: &[Builder]) -> Result<(), Unconverged> {
    use Unconverged::VCenter;
    let vms = vcenter.vms().await.map_err(VCenter)?;
    for (slot, b) in builders.iter().enumerate() {
        for domain in &b.domains {
            let name = &domain.host.bmh_name;
            if vms.contains_key(name) {
                continue;
            }
            let shape = machines::flavor(&domain.host.flavor).map_err(Unconverged::Spec)?;
            let macs: Vec<String> = domain
                .interfaces
                .iter()
                .map(|i| i.mac_address.clone())
                .collect();
            vcenter
                .create(name, slot, shape, &macs)
                .await
                .map_err(VCenter)?;
        }
    }
    Ok(())
}

/// Whether every network-data template Secret the nodesets name has its `template`; why not.
/// (The template's text is not run: see `builder::network_data`.)
async fn templates_present(vino: &Vino, r: &Reconciler) -> Result<Result<(), String>, Error> {
    // Each Secret once, however many nodesets name it (upstream's samples share one).
    let named: std::collections::BTreeSet<(&str, &str)> = vino
        .spec
        .nodes
        .iter()
        .filter_map(|s| s.network_data_template.as_ref())
        .map(|t| match t.namespace.as_str() {
            "" => ("default", t.name.as_str()),
            ns => (ns, t.name.as_str()),
        })
        .collect();
    for (ns, name) in named {
        let api: Api<Secret> = Api::namespaced(r.ctx.client.clone(), ns);
        let has_template = api
            .get_opt(name)
            .await?
            .and_then(|s| s.data)
            .is_some_and(|d| d.contains_key("template"));
        if !has_template {
            return Ok(Err(format!(
                "network template secret {ns}/{name} has no key 'template'"
            )));
        }
    }
    Ok(Ok(()))
}

/// The host's Secrets and BareMetalHost, applied (the server leaves equal ones as they are).
async fn write_host(
    vino: &Vino,
    r: &Reconciler,
    domain: &Domain,
    data: String,
) -> Result<(), Error> {
    let ns = &r.namespace;
    let name = &domain.host.bmh_name;
    let secrets: Api<Secret> = Api::namespaced(r.ctx.client.clone(), ns);
    // `data`, as the server stores it (upstream writes `stringData`; readers see the same).
    let secret = |suffix: &str, data: BTreeMap<&str, &str>| {
        use base64::Engine;
        let encoded: BTreeMap<&str, String> = data
            .into_iter()
            .map(|(k, v)| (k, base64::engine::general_purpose::STANDARD.encode(v)))
            .collect();
        json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
               "metadata": {"name": format!("{name}-{suffix}"), "namespace": ns},
               "data": encoded})
    };
    let network = secret(
        "network-data",
        BTreeMap::from([("networkData", data.as_str())]),
    );
    infrasim_controller_runtime::writes::apply(
        &secrets,
        &format!("{name}-network-data"),
        MANAGER,
        &network,
    )
    .await?;
    let c = &vino.spec.bmc_credentials;
    let credentials = secret(
        "credentials",
        BTreeMap::from([
            ("username", c.username.as_str()),
            ("password", c.password.as_str()),
        ]),
    );
    infrasim_controller_runtime::writes::apply(
        &secrets,
        &format!("{name}-credentials"),
        MANAGER,
        &credentials,
    )
    .await?;
    let owner = format!(
        "{}/{}",
        vino.namespace().unwrap_or_default(),
        vino.name_any()
    );
    // `online` is left out: whoever provisions the host (metal3's consumer, or a user) sets it.
    let host = json!({
        "apiVersion": "metal3.io/v1alpha1", "kind": "BareMetalHost",
        "metadata": {"name": name, "namespace": ns, "labels": domain.host.labels,
                     "annotations": {OWNER: owner}},
        "spec": {
            "bmc": {"address": domain.host.bmc_address,
                    "credentialsName": format!("{name}-credentials"),
                    "disableCertificateVerification": true},
            "bootMACAddress": domain.boot_mac_address,
            "rootDeviceHints": {"deviceName": domain.host.root_device_name},
            "networkData": {"name": format!("{name}-network-data"), "namespace": ns},
        },
    });
    let hosts: Api<BareMetalHost> = Api::namespaced(r.ctx.client.clone(), ns);
    infrasim_controller_runtime::writes::apply(&hosts, name, MANAGER, &host).await?;
    Ok(())
}

/// Takes a deleted Vino down: its Nodes lose their annotation, its BareMetalHosts and their
/// Secrets go, its hosts' VMs (their BMCs' systems; upstream's DaemonSet and the libvirt in
/// it) go, and its hosts' addresses return to the IPPools. Upstream leaves hosts, Secrets and
/// allocations behind; a simulator that is asked for thousands of hosts and back must not.
/// The Nodes' bridge addresses and DHCP blocks stay: they are the Node's, which another Vino
/// may share. Why the vCenter could not do its part (inner).
async fn decommission(vino: &Vino, r: &Reconciler) -> Result<Result<(), String>, Error> {
    let nodes = selected(vino, &r.nodes).unwrap_or_default();
    for node in &nodes {
        annotate(r, &node.name, None).await?;
    }
    daemonset::remove(&r.ctx.client, vino, &r.namespace).await?;
    let owner = format!(
        "{}/{}",
        vino.namespace().unwrap_or_default(),
        vino.name_any()
    );
    let mine: Vec<String> = r
        .hosts
        .store()
        .state()
        .iter()
        .filter(|h| h.annotations().get(OWNER) == Some(&owner))
        .map(|h| h.name_any())
        .collect();
    if mine.is_empty() {
        return Ok(Ok(()));
    }
    remove_hosts(r, &mine).await?;
    release_addresses(vino, r, &mine).await?;
    Ok(destroy_vms(r, &mine).await)
}

/// Deletes the BareMetalHosts `names` and their two Secrets (gone already is fine).
async fn remove_hosts(r: &Reconciler, names: &[String]) -> Result<(), Error> {
    let hosts: Api<BareMetalHost> = Api::namespaced(r.ctx.client.clone(), &r.namespace);
    let secrets: Api<Secret> = Api::namespaced(r.ctx.client.clone(), &r.namespace);
    let gone = |e: &kube::Error| matches!(e, kube::Error::Api(a) if a.code == 404);
    for name in names {
        for secret in [
            format!("{name}-credentials"),
            format!("{name}-network-data"),
        ] {
            match secrets.delete(&secret, &Default::default()).await {
                Err(e) if !gone(&e) => return Err(e.into()),
                _ => {}
            }
        }
        match hosts.delete(name, &Default::default()).await {
            Err(e) if !gone(&e) => return Err(e.into()),
            _ => {}
        }
    }
    Ok(())
}

/// Returns the addresses of the hosts `names` to the pools of `vino`'s networks.
async fn release_addresses(vino: &Vino, r: &Reconciler, names: &[String]) -> Result<(), Error> {
    let api: Api<IPPool> = Api::namespaced(r.ctx.client.clone(), &r.namespace);
    let subnets: std::collections::BTreeSet<&str> = vino
        .spec
        .networks
        .iter()
        .map(|n| n.subnet.as_str())
        .collect();
    for subnet in subnets {
        let Some(mut pool) = api.get_opt(&ipam::pool_name(subnet)).await? else {
            continue;
        };
        let before = pool.spec.allocated_ips.len();
        pool.spec.allocated_ips.retain(|a| {
            let host = a.allocated_to.split('/').next().unwrap_or("");
            !names.iter().any(|n| n == host)
        });
        if pool.spec.allocated_ips.len() != before {
            api.replace(&pool.name_any(), &PostParams::default(), &pool)
                .await?;
        }
    }
    Ok(())
}

/// Destroys the VMs of the hosts `names`; why not.
async fn destroy_vms(r: &Reconciler, names: &[String]) -> Result<(), String> {
    let vcenter = r.hypervisors.get(&r.ctx, &r.namespace).await?;
    let vms = vcenter.vms().await?;
    for name in names {
        if let Some(vm) = vms.get(name) {
            vcenter.destroy(name, vm).await?;
        }
    }
    Ok(())
}
