//! `infrasim bench vmgroup`: one VmGroup of N replicas made Ready by the VmGroup controller
//! (in this process, with the embedded plane), against a naive controller loop of the Code
//! Connect kind (list every VM each pass, clone what is missing, poll until every VM has an
//! IP), each on a fresh simulator of the same model in the same run. Figures: time until
//! every VM is powered on with an IP, and the SOAP calls the vCenter answered per VM (the
//! simulator's own count, logins and change notification included).

use crate::vcsim::plane;
use anyhow::Context as _;
use clap::Args;
use infrasim_clock::SystemClock;
use infrasim_controllers::vmgroup::types::VmGroup;
use infrasim_controllers::Selection;
use infrasim_vim_client::{Client, CloneSpec, Credentials, Trust};
use infrasim_vsphere_sim::{Instance, SimConfig};
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::api::{Api, PostParams};
use std::time::{Duration, Instant};

const NAMESPACE: &str = "bench";
const TEMPLATE: &str = "DC0_H0_VM0";

#[derive(Debug, Args)]
pub struct VmGroupBenchArgs {
    /// Replicas of the group.
    #[arg(long, default_value_t = 500)]
    replicas: usize,
    /// How long the naive loop sleeps between passes.
    #[arg(long, default_value_t = 1000)]
    naive_poll_ms: u64,
    /// How long after power-on a guest reports its IP (a real VM boots for tens of seconds).
    #[arg(long, default_value_t = 10_000)]
    guest_delay_ms: u64,
}

/// What one contender measured.
struct Figures {
    ready: Duration,
    calls: u64,
    /// Bytes of the vCenter's answers.
    bytes: u64,
}

pub async fn run(args: VmGroupBenchArgs) -> anyhow::Result<()> {
    let ours = controller(&args).await.context("the VmGroup controller")?;
    let naive = naive(&args).await.context("the naive loop")?;
    let n = args.replicas as f64;
    println!(
        "\n{} replicas from {TEMPLATE}; guests report their IPs {} ms after power-on",
        args.replicas, args.guest_delay_ms
    );
    println!("{:<34} {:>14} {:>14}", "measure", "VmGroup", "naive loop");
    println!(
        "{:<34} {:>12.2} s {:>12.2} s",
        "time until every VM is ready",
        ours.ready.as_secs_f64(),
        naive.ready.as_secs_f64()
    );
    println!(
        "{:<34} {:>14.2} {:>14.2}",
        "vCenter calls per VM",
        ours.calls as f64 / n,
        naive.calls as f64 / n
    );
    println!(
        "{:<34} {:>14} {:>14}",
        "vCenter calls in all", ours.calls, naive.calls
    );
    println!(
        "{:<34} {:>11.1} KiB {:>10.1} KiB",
        "vCenter answer bytes per VM",
        ours.bytes as f64 / n / 1024.0,
        naive.bytes as f64 / n / 1024.0
    );
    Ok(())
}

async fn simulator(args: &VmGroupBenchArgs) -> anyhow::Result<Instance> {
    let config = SimConfig {
        password: "bench-password".into(),
        guest_delay: Duration::from_millis(args.guest_delay_ms),
        ..SimConfig::default()
    };
    Ok(Instance::start(config, ([127, 0, 0, 1], 0).into(), SystemClock::shared()).await?)
}

fn credentials(sim: &Instance) -> Credentials {
    let config = sim.simulator().config();
    Credentials {
        server: sim.addr().to_string(),
        username: config.username.clone(),
        password: config.password.clone(),
        trust: Trust::Thumbprint(sim.cert().thumbprint_sha256.clone()),
    }
}

/// The VmGroup controller, from the group's creation to every VM ready.
async fn controller(args: &VmGroupBenchArgs) -> anyhow::Result<Figures> {
    let (client, _controllers) = plane(Selection {
        vmgroup: true,
        sip: false,
        ..Selection::default()
    })
    .await?;
    let ns: Namespace =
        serde_json::from_value(serde_json::json!({"metadata": {"name": NAMESPACE}}))?;
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await?;
    let sim = simulator(args).await?;
    let c = credentials(&sim);
    let secret: Secret = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "vcenter"},
        "stringData": {"server": c.server, "username": c.username, "password": c.password,
                       "thumbprint": sim.cert().thumbprint_sha256},
    }))?;
    Api::<Secret>::namespaced(client.clone(), NAMESPACE)
        .create(&PostParams::default(), &secret)
        .await?;
    let groups: Api<VmGroup> = Api::namespaced(client.clone(), NAMESPACE);
    let group: VmGroup = serde_json::from_value(serde_json::json!({
        "apiVersion": "vm.codeconnect.vmworld.com/v1alpha1", "kind": "VmGroup",
        "metadata": {"name": "bench"},
        "spec": {"cpu": 2, "memory": 1, "replicas": args.replicas, "template": TEMPLATE},
    }))?;
    let (calls, bytes, started) = (
        sim.simulator().calls(),
        sim.simulator().answered_bytes(),
        Instant::now(),
    );
    groups.create(&PostParams::default(), &group).await?;
    let deadline = started + Duration::from_secs(1800);
    loop {
        let status = groups.get("bench").await?.status.unwrap_or_default();
        let want = args.replicas as i64;
        if status.ready_replicas == want && status.replicas == want {
            break;
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "not ready in 30 minutes: {status:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(Figures {
        ready: started.elapsed(),
        calls: sim.simulator().calls() - calls,
        bytes: sim.simulator().answered_bytes() - bytes,
    })
}

/// A Code Connect-style loop: each pass lists every VM, clones the missing ones (waiting on
/// each task), and sleeps until the next pass, until every VM is powered on with an IP.
async fn naive(args: &VmGroupBenchArgs) -> anyhow::Result<Figures> {
    let sim = simulator(args).await?;
    let (calls, bytes, started) = (
        sim.simulator().calls(),
        sim.simulator().answered_bytes(),
        Instant::now(),
    );
    let client = Client::connect(credentials(&sim)).await?;
    let paths = [
        "name",
        "runtime.powerState",
        "guest.ipAddress",
        "parent",
        "resourcePool",
    ];
    loop {
        let vms = client.list("VirtualMachine", &paths).await?;
        let template = vms
            .iter()
            .find(|v| v.text("name") == TEMPLATE)
            .context("the template")?;
        let ours: Vec<_> = vms
            .iter()
            .filter(|v| v.text("name").starts_with("naive-"))
            .collect();
        let ready = ours
            .iter()
            .filter(|v| {
                v.text("runtime.powerState") == "poweredOn" && !v.text("guest.ipAddress").is_empty()
            })
            .count();
        if ready == args.replicas {
            break;
        }
        for i in 0..args.replicas {
            let name = format!("naive-{i}");
            if ours.iter().any(|v| v.text("name") == name) {
                continue;
            }
            let place = |p: &str| {
                template
                    .prop(p)
                    .and_then(|v| v.moref())
                    .cloned()
                    .context("placement")
            };
            let spec = CloneSpec {
                name,
                folder: place("parent")?,
                pool: place("resourcePool")?,
                datastore: None,
                cpus: Some(2),
                memory_mb: Some(1024),
                power_on: true,
                device_change: String::new(),
                extra_config: Vec::new(),
            };
            let task = client.clone_vm(&template.obj, &spec).await?;
            client.wait(&task, Duration::from_secs(120)).await?;
        }
        tokio::time::sleep(Duration::from_millis(args.naive_poll_ms)).await;
    }
    Ok(Figures {
        ready: started.elapsed(),
        calls: sim.simulator().calls() - calls,
        bytes: sim.simulator().answered_bytes() - bytes,
    })
}
