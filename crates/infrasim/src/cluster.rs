//! `infrasim cluster`: Cluster API clusters through the management plane, from the built-in
//! ClusterClass `in-memory` (create, list, kubeconfig, delete), as a user would with
//! `clusterctl generate cluster | kubectl apply` and `clusterctl describe`.

use anyhow::{bail, Context as _};
use clap::{Args, Subcommand};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use infrasim_controllers::capi::core::{Cluster, ClusterClass, Machine};
use infrasim_controllers::capi::templates;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DeleteParams, ListParams};
use kube::ResourceExt;
use std::collections::HashMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

#[derive(Debug, Args)]
pub struct ClusterArgs {
    /// The management plane (default: $KUBECONFIG, then the one `infrasim up` writes).
    #[arg(long, global = true)]
    kubeconfig: Option<PathBuf>,
    #[arg(long, short = 'n', global = true, default_value = "default")]
    namespace: String,
    #[command(subcommand)]
    command: ClusterCommand,
}

#[derive(Debug, Subcommand)]
enum ClusterCommand {
    /// Create a cluster of ClusterClass `in-memory` and wait until it is Available.
    Create(CreateArgs),
    /// One line per cluster: phase, availability, control plane and workers, version.
    List,
    /// Print a cluster's admin kubeconfig (its `<name>-kubeconfig` secret).
    Kubeconfig { name: String },
    /// Delete a cluster and wait until it is gone.
    Delete { name: String },
}

#[derive(Debug, Args)]
struct CreateArgs {
    name: String,
    #[arg(long, default_value_t = 1)]
    control_planes: u32,
    #[arg(long, default_value_t = 1)]
    workers: u32,
    #[arg(long, default_value = "v1.31.2")]
    kubernetes_version: String,
    /// How long each machine step (VM, Node, etcd, API server) takes, for the ClassClass when
    /// this command creates it (`0s` for clusters that come up at once).
    #[arg(long, default_value = "1s")]
    step_startup: String,
    /// Return once the objects are created, without waiting.
    #[arg(long)]
    no_wait: bool,
}

/// The management plane's kubeconfig: the flag, `$KUBECONFIG`, or what `infrasim up` wrote.
pub fn kubeconfig_path(flag: Option<PathBuf>) -> PathBuf {
    flag.or_else(|| {
        std::env::var_os("KUBECONFIG")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    })
    .unwrap_or_else(|| crate::up::default_data_dir().join("kubeconfig"))
}

pub async fn run(args: ClusterArgs) -> anyhow::Result<()> {
    let path = kubeconfig_path(args.kubeconfig);
    let client = crate::controller::client_from(Some(&path))
        .await
        .with_context(|| format!("connecting to the management plane of {}", path.display()))?;
    let ns = args.namespace;
    match args.command {
        ClusterCommand::Create(c) => create(&client, &ns, c).await,
        ClusterCommand::List => list(&client, &ns).await,
        ClusterCommand::Kubeconfig { name } => {
            let secrets: Api<Secret> = Api::namespaced(client, &ns);
            let secret = secrets
                .get_opt(&format!("{name}-kubeconfig"))
                .await?
                .with_context(|| format!("cluster {name} has no kubeconfig yet"))?;
            let value = secret
                .data
                .and_then(|d| d.get("value").cloned())
                .context("the secret has no `value`")?;
            print!("{}", String::from_utf8_lossy(&value.0));
            Ok(())
        }
        ClusterCommand::Delete { name } => delete(&client, &ns, &name).await,
    }
}

fn bar(len: u64) -> ProgressBar {
    let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
    bar.set_style(
        ProgressStyle::with_template("{spinner} {msg:<40} [{bar:30}] {pos}/{len} ({elapsed})")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    bar
}

async fn create(client: &kube::Client, ns: &str, c: CreateArgs) -> anyhow::Result<()> {
    let classes: Api<ClusterClass> = Api::namespaced(client.clone(), ns);
    let mut vars: HashMap<String, String> = HashMap::from([
        ("CLUSTER_NAME".into(), c.name.clone()),
        ("NAMESPACE".into(), ns.to_string()),
        (
            "CONTROL_PLANE_MACHINE_COUNT".into(),
            c.control_planes.to_string(),
        ),
        ("WORKER_MACHINE_COUNT".into(), c.workers.to_string()),
        ("KUBERNETES_VERSION".into(), c.kubernetes_version.clone()),
    ]);
    if classes.get_opt("in-memory").await?.is_none() {
        for step in [
            "VM_STARTUP",
            "NODE_STARTUP",
            "ETCD_STARTUP",
            "API_SERVER_STARTUP",
        ] {
            vars.insert(step.into(), c.step_startup.clone());
        }
        let class = templates::substitute(templates::CLUSTERCLASS_IN_MEMORY, &vars)?;
        templates::apply(client, &class, ns, "infrasim-cli").await?;
    }
    let clusters: Api<Cluster> = Api::namespaced(client.clone(), ns);
    if clusters.get_opt(&c.name).await?.is_some() {
        bail!("cluster {ns}/{} already exists", c.name);
    }
    let cluster = templates::substitute(templates::CLUSTER_IN_MEMORY, &vars)?;
    templates::apply(client, &cluster, ns, "infrasim-cli").await?;
    if c.no_wait {
        println!("cluster {ns}/{} created", c.name);
        return Ok(());
    }
    let machines_wanted = (c.control_planes + c.workers) as u64;
    let bar = bar(machines_wanted + 1);
    let machines: Api<Machine> = Api::namespaced(client.clone(), ns);
    let started = Instant::now();
    loop {
        let cluster = clusters.get(&c.name).await?;
        let selector = format!("cluster.x-k8s.io/cluster-name={}", c.name);
        let ready = machines
            .list(&ListParams::default().labels(&selector))
            .await?
            .items
            .iter()
            .filter(|m| {
                condition(
                    m.status.as_ref().and_then(|s| s.conditions.as_deref()),
                    "Ready",
                ) == "True"
            })
            .count() as u64;
        let available = condition(
            cluster
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_deref()),
            "Available",
        ) == "True";
        let phase = cluster
            .status
            .as_ref()
            .and_then(|s| s.phase.clone())
            .unwrap_or_else(|| "Pending".into());
        bar.set_position(ready.min(machines_wanted) + u64::from(available));
        bar.set_message(format!("{}: {phase}, {ready} machines ready", c.name));
        if available && ready >= machines_wanted {
            break;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    bar.finish_and_clear();
    println!(
        "cluster {ns}/{} is Available ({} control planes, {} workers) after {:.1?}",
        c.name,
        c.control_planes,
        c.workers,
        started.elapsed()
    );
    println!(
        "kubeconfig: infrasim cluster kubeconfig {} -n {ns} > {}.kubeconfig",
        c.name, c.name
    );
    Ok(())
}

fn condition(conds: Option<&[infrasim_controllers::conditions::Condition]>, ty: &str) -> String {
    conds
        .and_then(|c| infrasim_controllers::conditions::find(c, ty))
        .map(|c| c.status.clone())
        .unwrap_or_default()
}

async fn list(client: &kube::Client, ns: &str) -> anyhow::Result<()> {
    let clusters: Api<Cluster> = Api::namespaced(client.clone(), ns);
    let rows: Vec<[String; 8]> = clusters
        .list(&ListParams::default())
        .await?
        .items
        .iter()
        .map(|c| {
            let s = c.status.clone().unwrap_or_default();
            let counts = |r: Option<&infrasim_controllers::capi::core::ReplicaCounts>| {
                r.map(|r| {
                    format!(
                        "{}/{}",
                        r.ready_replicas.unwrap_or(0),
                        r.desired_replicas.unwrap_or(0)
                    )
                })
                .unwrap_or_else(|| "-".into())
            };
            let endpoint = c
                .spec
                .control_plane_endpoint
                .as_ref()
                .filter(|e| e.is_valid())
                .map(|e| format!("{}:{}", e.host, e.port))
                .unwrap_or_else(|| "-".into());
            [
                c.name_any(),
                c.spec
                    .topology
                    .as_ref()
                    .map(|t| t.class_ref.name.clone())
                    .unwrap_or_else(|| "-".into()),
                s.phase.clone().unwrap_or_else(|| "Pending".into()),
                condition(s.conditions.as_deref(), "Available"),
                counts(s.control_plane.as_ref()),
                counts(s.workers.as_ref()),
                c.spec
                    .topology
                    .as_ref()
                    .map(|t| t.version.clone())
                    .unwrap_or_else(|| "-".into()),
                endpoint,
            ]
        })
        .collect();
    let header = [
        "NAME",
        "CLASS",
        "PHASE",
        "AVAILABLE",
        "CONTROL PLANE",
        "WORKERS",
        "VERSION",
        "ENDPOINT",
    ];
    let widths: Vec<usize> = (0..header.len())
        .map(|i| {
            rows.iter()
                .map(|r| r[i].len())
                .chain([header[i].len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |cells: Vec<&str>| {
        let padded: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        println!("{}", padded.join("   ").trim_end());
    };
    line(header.to_vec());
    for r in &rows {
        line(r.iter().map(String::as_str).collect());
    }
    Ok(())
}

async fn delete(client: &kube::Client, ns: &str, name: &str) -> anyhow::Result<()> {
    let clusters: Api<Cluster> = Api::namespaced(client.clone(), ns);
    match clusters.delete(name, &DeleteParams::default()).await {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 404 => bail!("no cluster {ns}/{name}"),
        Err(e) => return Err(e.into()),
    }
    let bar = bar(1);
    bar.set_message(format!("deleting {name}"));
    while clusters.get_opt(name).await?.is_some() {
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    bar.finish_and_clear();
    println!("cluster {ns}/{name} deleted");
    Ok(())
}
