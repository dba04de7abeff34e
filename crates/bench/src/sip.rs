//! `infrasim bench sip`: the SIPCluster controller (in this process, with the embedded plane)
//! placing N SIPClusters over M BareMetalHosts, one at a time as SIP serves them: each asks
//! for three control-plane hosts spread over racks and four workers, with both load
//! balancers. Figures: the time until every SIPCluster is Ready, per SIPCluster, and the CPU
//! the process spent. There is no second contender: SIP itself (Go, controller-runtime) is
//! not packaged, so the figure stands alone.

use crate::process::cpu_time;
use crate::vcsim::plane;
use anyhow::Context as _;
use clap::Args;
use infrasim_controllers::sip::types::SIPCluster;
use infrasim_controllers::Selection;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::api::{Api, DynamicObject, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::json;
use std::time::{Duration, Instant};

const NAMESPACE: &str = "bench";

#[derive(Debug, Args)]
pub struct SipBenchArgs {
    /// SIPClusters to place.
    #[arg(long, default_value_t = 100)]
    clusters: usize,
    /// BareMetalHosts to place them over (a third of the control-plane flavour).
    #[arg(long, default_value_t = 2000)]
    hosts: usize,
    /// Racks the hosts are spread over.
    #[arg(long, default_value_t = 40)]
    racks: usize,
}

pub async fn run(args: SipBenchArgs) -> anyhow::Result<()> {
    // Three node ports a cluster, from 30000: the default NodePort range holds 922.
    anyhow::ensure!(
        args.clusters <= 900,
        "at most 900 SIPClusters (their node ports)"
    );
    let selection = Selection {
        sip: true,
        ..Selection::default()
    };
    let (client, _controllers) = plane(selection).await?;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": NAMESPACE}}))?;
    namespaces.create(&PostParams::default(), &ns).await?;
    let started = Instant::now();
    make_hosts(&client, &args)
        .await
        .context("making the hosts")?;
    let made = started.elapsed();

    let me = std::process::id();
    let (cpu0, t0) = (cpu_time(me)?, Instant::now());
    let api: Api<SIPCluster> = Api::namespaced(client.clone(), NAMESPACE);
    for i in 0..args.clusters {
        let sip: SIPCluster = serde_json::from_value(cluster(i))?;
        api.create(&PostParams::default(), &sip).await?;
    }
    let ready = wait_ready(&api, args.clusters).await?;
    let (wall, cpu) = (t0.elapsed(), cpu_time(me)? - cpu0);

    println!(
        "\n{} SIPClusters (3 control-plane hosts one per rack, 4 workers, two load balancers each) over {} hosts in {} racks",
        args.clusters, args.hosts, args.racks
    );
    println!("{:<44} {:>12}", "measure", "infrasim");
    println!(
        "{:<44} {:>10.2} s",
        "hosts and their Secrets made",
        made.as_secs_f64()
    );
    println!(
        "{:<44} {:>10.2} s",
        "every SIPCluster Ready",
        wall.as_secs_f64()
    );
    let per = |d: Duration| d.as_secs_f64() * 1000.0 / ready.max(1) as f64;
    println!("{:<44} {:>9.2} ms", "per SIPCluster (wall)", per(wall));
    println!(
        "{:<44} {:>9.2} ms",
        "per SIPCluster (process CPU)",
        per(cpu)
    );
    Ok(())
}

/// The hosts, each with its network data Secret: host i in rack i % racks, a third of them
/// of the control-plane flavour.
async fn make_hosts(client: &kube::Client, args: &SipBenchArgs) -> anyhow::Result<()> {
    let gvk = GroupVersionKind::gvk("metal3.io", "v1alpha1", "BareMetalHost");
    let hosts: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), NAMESPACE, &ApiResource::from_gvk(&gvk));
    let secrets: Api<Secret> = Api::namespaced(client.clone(), NAMESPACE);
    for i in 0..args.hosts {
        let name = format!("host{i:05}");
        let ip = format!("10.{}.{}.{}", (i >> 16) & 255, (i >> 8) & 255, i & 255);
        let data = json!({"networks": [{"id": "oam-ipv4", "type": "ipv4", "ip_address": ip}]});
        let secret: Secret = serde_json::from_value(json!({
            "metadata": {"name": format!("{name}-networkdata")},
            "stringData": {"networkData": data.to_string()},
        }))?;
        secrets.create(&PostParams::default(), &secret).await?;
        let flavor = if i % 3 == 0 {
            "control-plane"
        } else {
            "worker"
        };
        let host: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "metal3.io/v1alpha1",
            "kind": "BareMetalHost",
            "metadata": {"name": name, "labels": {
                "vino.airshipit.org/flavor": flavor,
                "sip.airshipit.org/rack": format!("r{:03}", i % args.racks.max(1)),
                "sip.airshipit.org/server": name,
            }},
            "spec": {"online": true, "networkData": {"name": format!("{name}-networkdata")}},
        }))?;
        hosts.create(&PostParams::default(), &host).await?;
    }
    Ok(())
}

fn cluster(i: usize) -> serde_json::Value {
    let port = 30000 + 3 * i;
    let set = |flavor: &str, key: &str, active: i32| {
        json!({
            "labelSelector": {"matchLabels": {"vino.airshipit.org/flavor": flavor}},
            "topologyKey": key,
            "count": {"active": active, "standby": 0},
        })
    };
    json!({
        "apiVersion": "airship.airshipit.org/v1",
        "kind": "SIPCluster",
        "metadata": {"name": format!("tenant-{i:03}")},
        "spec": {
            "nodes": {
                "ControlPlane": set("control-plane", "sip.airshipit.org/rack", 3),
                "Worker": set("worker", "sip.airshipit.org/server", 4),
            },
            // Node ports of their own: the plane refuses a port another Service holds.
            "services": {
                "loadBalancerControlPlane": [{"image": "haproxy:2.3.2", "nodePort": port, "nodeInterfaceId": "oam-ipv4"}],
                "loadBalancerWorker": [{"image": "haproxy:2.3.2", "nodePortRange": {"start": port + 1, "end": port + 2}, "nodeInterfaceId": "oam-ipv4"}],
            },
        },
    })
}

/// Waits until `n` SIPClusters are Ready (polling the list every 20 ms); how many were.
async fn wait_ready(api: &Api<SIPCluster>, n: usize) -> anyhow::Result<usize> {
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        let list = api.list(&Default::default()).await?;
        let ready = list
            .items
            .iter()
            .filter(|c| {
                c.status.as_ref().is_some_and(|s| {
                    infrasim_controllers::conditions::is_true(&s.conditions, "Ready")
                })
            })
            .count();
        if ready >= n {
            return Ok(ready);
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "{ready} of {n} Ready after 600 s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
