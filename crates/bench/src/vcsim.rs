//! `infrasim bench vcsim`: what the vcsim controller costs, in one process with the embedded
//! plane. It starts N VCenterSimulators at once (each its own simulator with its templates and
//! tags) and times them to Ready; clones M VMs in one of them the way CAPV does (clone from
//! the template with guestinfo user data into the cluster's pool, reconfigure the metadata,
//! power on, wait for the guest's IP), from concurrent SOAP clients that pin the simulator's
//! thumbprint as govc does; then deletes the simulators and times their ports closing.
//!
//! Figures are this process's (the plane, the controllers, the simulators and the cloning
//! clients together): CPU from `/proc/self/stat`, resident memory from `/proc/self/status`.

use crate::process::{cpu_time, rss};
use crate::vim::{text_of, Conn, Content, Session};
use anyhow::Context as _;
use clap::Args;
use infrasim_clock::SystemClock;
use infrasim_cloud::{Cloud, CloudConfig};
use infrasim_controllers::vcsim::types::{VCenterSimulator, VCenterSimulatorSpec};
use infrasim_controllers::{crds, Context, Selection};
use infrasim_kube_api::pki::CertificateAuthority;
use infrasim_kube_api::{ApiConfig, ApiServer, Identity};
use infrasim_store::{MemoryBackend, Store, StoreConfig};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const NAMESPACE: &str = "bench";

#[derive(Debug, Args)]
pub struct VcsimBenchArgs {
    /// VCenterSimulators started at once.
    #[arg(long, default_value_t = 100)]
    simulators: usize,
    /// VMs cloned in the first simulator, as CAPV clones them.
    #[arg(long, default_value_t = 1000)]
    vms: usize,
    /// Concurrent SOAP clients cloning.
    #[arg(long, default_value_t = 8)]
    clients: usize,
    /// The baseline: one govmomi simulator process of the same default model, started in the
    /// same run (built from tests/govmomi with Debian's govmomi unless --baseline names it).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    govmomi: bool,
    #[arg(long)]
    baseline: Option<std::path::PathBuf>,
}

pub async fn run(args: VcsimBenchArgs) -> anyhow::Result<()> {
    anyhow::ensure!(args.simulators > 0, "--simulators must be at least 1");
    let (client, controllers) = plane(Selection {
        inmemory: true,
        namespace: None,
        capi_core: false,
        vcsim: true,
        vmgroup: false,
        sip: false,
        v1beta1: false,
        reach: Default::default(),
        capv_node_anti_affinity: false,
        state_metrics: false,
        part: Default::default(),
    })
    .await?;
    let measured = measure(&args, &client).await;
    crate::stop_controllers(controllers).await;
    measured
}

/// The embedded plane with the vcsim controller, as `infrasim up` runs it.
/// An embedded plane running the `selection`'s controllers in this process.
pub(crate) async fn plane(
    selection: Selection,
) -> anyhow::Result<(kube::Client, tokio::task::JoinHandle<()>)> {
    let clock = SystemClock::shared();
    let store = Store::new(
        StoreConfig::default(),
        clock.clone(),
        Arc::new(MemoryBackend),
    );
    let group = store.create_group("management")?;
    let ca = CertificateAuthority::generate("bench-ca")?;
    let server = ApiServer::new(group, ca, clock.clone(), ApiConfig::default());
    let identity = Identity {
        user: "bench".into(),
        groups: vec!["system:masters".into()],
    };
    let client = kube::Client::new(server.local_service(identity), "default");
    crds::install(&client, &selection.crds()).await?;
    let cloud = Arc::new(Cloud::with_clock(CloudConfig::default(), clock.clone()));
    let controllers = tokio::spawn(infrasim_controllers::run(
        Context::new(client.clone(), cloud, clock),
        selection,
    ));
    // The plane lives as long as the process: the bench exits when it is done.
    std::mem::forget(store);
    Ok((client, controllers))
}

async fn measure(args: &VcsimBenchArgs, client: &kube::Client) -> anyhow::Result<()> {
    let me = std::process::id();
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let ns: Namespace =
        serde_json::from_value(serde_json::json!({"metadata": {"name": NAMESPACE}}))?;
    namespaces.create(&PostParams::default(), &ns).await?;
    let api: Api<VCenterSimulator> = Api::namespaced(client.clone(), NAMESPACE);

    // One alone first: the time one takes to start, with nothing else starting (read every
    // 2 ms: the list's 50 ms would be most of it).
    let t = Instant::now();
    let obj = VCenterSimulator::new("vcsim-solo", VCenterSimulatorSpec::default());
    api.create(&PostParams::default(), &obj).await?;
    while !is_ready(&api.get("vcsim-solo").await?) {
        anyhow::ensure!(
            t.elapsed() < Duration::from_secs(60),
            "vcsim-solo not Ready in 60 s"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let solo = t.elapsed();
    api.delete_collection(&DeleteParams::default(), &ListParams::default())
        .await?;
    wait_until(&api, |all| all.is_empty()).await?;

    let (rss0, cpu0, t0) = (rss(me)?, cpu_time(me)?, Instant::now());
    let ready = start_all(&api, args.simulators).await?;
    let (start_wall, start_cpu, rss1) = (t0.elapsed(), cpu_time(me)? - cpu0, rss(me)?);
    println!("{} simulators Ready in {start_wall:.2?}", args.simulators);

    let first = ready
        .iter()
        .find(|v| v.metadata.name.as_deref() == Some("vcsim-0"))
        .and_then(|v| v.status.clone())
        .context("vcsim-0 has no status")?;
    let (cpu2, t2) = (cpu_time(me)?, Instant::now());
    clone_all(args, &first).await?;
    let (clone_wall, clone_cpu, rss2) = (t2.elapsed(), cpu_time(me)? - cpu2, rss(me)?);
    println!(
        "{} VMs cloned, powered on and addressed in {clone_wall:.2?}",
        args.vms
    );

    let t3 = Instant::now();
    api.delete_collection(&DeleteParams::default(), &ListParams::default())
        .await?;
    wait_until(&api, |all| all.is_empty()).await?;
    let (stop_wall, rss3) = (t3.elapsed(), rss(me)?);
    // A second round of the same simulators: the memory the first one freed is used again
    // (the allocator keeps freed pages for reuse rather than giving them back at once).
    start_all(&api, args.simulators).await?;
    api.delete_collection(&DeleteParams::default(), &ListParams::default())
        .await?;
    wait_until(&api, |all| all.is_empty()).await?;
    let rss4 = rss(me)?;

    let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
    let n = args.simulators as f64;
    let vms = args.vms.max(1) as f64;
    println!("\nmeasure                                              value");
    println!(
        "simulators started at once                 {:>14}",
        args.simulators
    );
    println!(
        "time until every one is Ready              {:>11.2} s",
        start_wall.as_secs_f64()
    );
    println!(
        "CPU per simulator (start, templates, tags) {:>11.2} ms",
        start_cpu.as_secs_f64() * 1e3 / n
    );
    println!(
        "memory before                              {:>10.1} MiB",
        mib(rss0)
    );
    println!(
        "memory per simulator                       {:>10.1} MiB",
        mib(rss1.saturating_sub(rss0)) / n
    );
    println!(
        "one simulator alone, created to Ready      {:>11.2} ms",
        solo.as_secs_f64() * 1e3
    );

    println!(
        "VMs cloned in one simulator, CAPV's way    {:>14}",
        args.vms
    );
    println!(
        "time for all of them ({} clients)           {:>11.2} s",
        args.clients,
        clone_wall.as_secs_f64()
    );
    println!(
        "CPU per VM (clone, reconfigure, power on,  {:>11.0} us",
        clone_cpu.as_secs_f64() * 1e6 / vms
    );
    println!("  IP wait; server and clients together)");
    println!(
        "memory per VM                              {:>10.1} KiB",
        rss2.saturating_sub(rss1) as f64 / 1024.0 / vms
    );
    println!(
        "time until every simulator is deleted      {:>11.2} s",
        stop_wall.as_secs_f64()
    );
    println!(
        "memory after the clones                    {:>10.1} MiB",
        mib(rss2)
    );
    println!(
        "memory after deleting them                 {:>10.1} MiB",
        mib(rss3)
    );
    println!(
        "after a second round of start and delete   {:>10.1} MiB",
        mib(rss4)
    );
    if args.govmomi {
        let per_simulator = rss1.saturating_sub(rss0) as f64 / n;
        let per_cpu = start_cpu.as_secs_f64() / n;
        govmomi_rows(args, per_simulator, per_cpu, solo).await?;
    }
    Ok(())
}

/// One govmomi simulator process of the default model (govmomi's VPX model, as a
/// VCenterSimulator's), from spawn to its first answer, beside one of ours: `memory` and
/// `cpu` are a simulator's share of the 100 started at once, `solo` one started alone.
async fn govmomi_rows(
    args: &VcsimBenchArgs,
    memory: f64,
    cpu: f64,
    solo: Duration,
) -> anyhow::Result<()> {
    let baseline = match &args.baseline {
        Some(p) => p.clone(),
        None => crate::vsphere::build_baseline().await?,
    };
    let dir = std::env::temp_dir().join(format!("infrasim-bench-vcsim-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let connector = crate::vsphere::serving_tls(&dir, "infrasim bench vcsim")?;
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let started = Instant::now();
    let mut child = tokio::process::Command::new(&baseline)
        .args(["-listen", &addr.to_string(), "-password", "bench-password"])
        .arg("-tls-cert")
        .arg(dir.join("server.crt"))
        .arg("-tls-key")
        .arg(dir.join("server.key"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()?;
    let pid = child.id().context("the baseline exited at once")?;
    crate::vim::wait_for_service(&connector, addr, &mut child).await?;
    let (took, their_cpu, their_rss) = (started.elapsed(), cpu_time(pid)?, rss(pid)?);
    child.kill().await.ok();
    let _ = std::fs::remove_dir_all(&dir);
    let mib = 1024.0 * 1024.0;
    println!(
        "
one govmomi simulator process, default model (same run)"
    );
    println!(
        "memory                                     {:>10.1} MiB  {:>6.1}x ours",
        their_rss as f64 / mib,
        their_rss as f64 / memory.max(1.0)
    );
    println!(
        "spawn to first answer                      {:>11.2} ms  {:>6.1}x ours alone",
        took.as_secs_f64() * 1e3,
        took.as_secs_f64() / solo.as_secs_f64().max(1e-9)
    );
    println!(
        "CPU to first answer                        {:>11.2} ms  {:>6.1}x ours",
        their_cpu.as_secs_f64() * 1e3,
        their_cpu.as_secs_f64() / cpu.max(1e-9)
    );
    Ok(())
}

/// Creates `n` VCenterSimulators and waits until every one is Ready.
async fn start_all(api: &Api<VCenterSimulator>, n: usize) -> anyhow::Result<Vec<VCenterSimulator>> {
    for i in 0..n {
        let obj = VCenterSimulator::new(&format!("vcsim-{i}"), VCenterSimulatorSpec::default());
        api.create(&PostParams::default(), &obj).await?;
    }
    wait_until(api, |all| all.iter().filter(|v| is_ready(v)).count() == n).await
}

fn is_ready(v: &VCenterSimulator) -> bool {
    v.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// Lists every 50 ms until `done` holds of the list (10 minutes at most).
async fn wait_until(
    api: &Api<VCenterSimulator>,
    done: impl Fn(&[VCenterSimulator]) -> bool,
) -> anyhow::Result<Vec<VCenterSimulator>> {
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        let all = api.list(&ListParams::default()).await?.items;
        if done(&all) {
            return Ok(all);
        }
        anyhow::ensure!(Instant::now() < deadline, "not reached in 10 minutes");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Clones `--vms` VMs from `--clients` sessions sharing one counter.
async fn clone_all(
    args: &VcsimBenchArgs,
    sim: &infrasim_controllers::vcsim::types::VCenterSimulatorStatus,
) -> anyhow::Result<()> {
    let addr: SocketAddr = sim.host.parse()?;
    let connector = pinned(&sim.thumbprint)?;
    let content = Content::read(&mut Conn::open(&connector, addr).await?).await?;
    let next = Arc::new(AtomicUsize::new(0));
    let mut clients = Vec::new();
    for _ in 0..args.clients.max(1) {
        let mut s =
            Session::login_as(&connector, addr, &content, &sim.username, &sim.password).await?;
        let places = Places::find(&mut s, &content).await?;
        let (next, total) = (next.clone(), args.vms);
        clients.push(tokio::spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= total {
                    return Ok::<_, anyhow::Error>(());
                }
                clone_like_capv(&mut s, &places, &format!("bench-vm-{i}")).await?;
            }
        }));
    }
    for c in clients {
        c.await??;
    }
    Ok(())
}

/// What CAPV's clone refers to, found by inventory path as its finder does.
struct Places {
    template: String,
    folder: String,
    pool: String,
    datastore: String,
}

impl Places {
    async fn find(s: &mut Session, content: &Content) -> anyhow::Result<Places> {
        let mut find = async |path: &str| -> anyhow::Result<String> {
            let body = format!(
                r#"<FindByInventoryPath xmlns="urn:vim25"><_this type="SearchIndex">{}</_this><inventoryPath>{path}</inventoryPath></FindByInventoryPath>"#,
                content.search_index
            );
            text_of(&s.conn.call(&body).await?, "returnval")
                .with_context(|| format!("nothing at {path}"))
        };
        Ok(Places {
            template: find("DC0/vm/ubuntu-2204-kube-v1.33.0").await?,
            folder: find("DC0/vm").await?,
            pool: find("DC0/host/DC0_C0/Resources").await?,
            datastore: find("DC0/datastore/LocalDS_0").await?,
        })
    }
}

/// CAPV's steps for one machine: CloneVM_Task with the machine's size, instance UUID and
/// base64 user data; ReconfigVM_Task with the metadata; PowerOnVM_Task; then the guest's IP.
async fn clone_like_capv(s: &mut Session, at: &Places, name: &str) -> anyhow::Result<()> {
    use base64::Engine;
    let b64 = |t: &str| base64::engine::general_purpose::STANDARD.encode(t);
    let option = |k: &str, v: &str| {
        format!(
            r#"<extraConfig xsi:type="OptionValue"><key>{k}</key><value xsi:type="xsd:string">{v}</value></extraConfig>"#
        )
    };
    let userdata = b64(&format!("#cloud-config\nhostname: {name}\n"));
    let clone = format!(
        r#"<CloneVM_Task xmlns="urn:vim25"><_this type="VirtualMachine">{}</_this><folder type="Folder">{}</folder><name>{name}</name><spec><location><datastore type="Datastore">{}</datastore><pool type="ResourcePool">{}</pool></location><template>false</template><config><instanceUuid>{}</instanceUuid><numCPUs>2</numCPUs><memoryMB>4096</memoryMB>{}{}</config><powerOn>false</powerOn></spec></CloneVM_Task>"#,
        at.template,
        at.folder,
        at.datastore,
        at.pool,
        uuid::Uuid::new_v4(),
        option("guestinfo.userdata", &userdata),
        option("guestinfo.userdata.encoding", "base64"),
    );
    let vm = wait_task(s, &clone).await?;
    let metadata = b64(&format!(
        "instance-id: \"{name}\"\nlocal-hostname: \"{name}\"\n"
    ));
    let reconfigure = format!(
        r#"<ReconfigVM_Task xmlns="urn:vim25"><_this type="VirtualMachine">{vm}</_this><spec>{}{}</spec></ReconfigVM_Task>"#,
        option("guestinfo.metadata", &metadata),
        option("guestinfo.metadata.encoding", "base64"),
    );
    wait_task(s, &reconfigure).await?;
    let power_on = format!(
        r#"<PowerOnVM_Task xmlns="urn:vim25"><_this type="VirtualMachine">{vm}</_this></PowerOnVM_Task>"#
    );
    wait_task(s, &power_on).await?;
    // CAPV waits on guest.net; the guest reports its address after the simulator's boot delay.
    loop {
        let body = s
            .retrieve("VirtualMachine", &vm, &["guest.ipAddress"])
            .await?;
        if text_of(&body, "val").is_ok_and(|ip| !ip.is_empty()) {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Starts a task with `body` and reads its state until it ends; the task's result.
async fn wait_task(s: &mut Session, body: &str) -> anyhow::Result<String> {
    let task = text_of(&s.conn.call(body).await?, "returnval")?;
    loop {
        let info = s
            .retrieve("Task", &task, &["info.state", "info.result"])
            .await?;
        if info.contains(">success<") {
            return result_of(&info);
        }
        anyhow::ensure!(!info.contains(">error<"), "task failed: {body:.80}");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// The text of the property `info.result` in a RetrievePropertiesEx answer (empty if none).
fn result_of(xml: &str) -> anyhow::Result<String> {
    let Some(at) = xml.find("<name>info.result</name>") else {
        return Ok(String::new());
    };
    text_of(&xml[at..], "val")
}

/// A TLS connector that trusts the one certificate whose SHA-256 is `thumbprint`, as govmomi
/// does with a thumbprint (CAPV's `VSPHERE_TLS_THUMBPRINT`): the simulators' certificates
/// are self-signed.
fn pinned(thumbprint: &str) -> anyhow::Result<tokio_rustls::TlsConnector> {
    let config = infrasim_vim_client::Trust::Thumbprint(thumbprint.to_string()).client_config()?;
    Ok(tokio_rustls::TlsConnector::from(Arc::new(config)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_task_result_is_read_from_its_property() {
        let xml = "<propSet><name>info.result</name><val type=\"VirtualMachine\">vm-7</val></propSet><propSet><name>info.state</name><val>success</val></propSet>";
        assert_eq!(result_of(xml).unwrap(), "vm-7");
        assert_eq!(result_of("<x/>").unwrap(), "");
    }
}
