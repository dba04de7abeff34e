//! `infrasim fault`: Faults (`sim.infrasim.dev/v1alpha1`) from the command line, as
//! `kubectl apply` of one would make them: create one on a cluster (by name or by a label
//! selector over the Clusters), list them with where they are in force, delete one.

use anyhow::Context as _;
use clap::{Args, Subcommand};
use infrasim_controllers::faults::types::{Fault, FaultParams, FaultSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use kube::ResourceExt;
use std::collections::BTreeMap;
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct FaultArgs {
    /// The management plane (default: $KUBECONFIG, then the one `infrasim up` writes).
    #[arg(long, global = true)]
    kubeconfig: Option<PathBuf>,
    #[arg(long, short = 'n', global = true, default_value = "default")]
    namespace: String,
    #[command(subcommand)]
    command: FaultCommand,
}

#[derive(Debug, Subcommand)]
enum FaultCommand {
    /// Create (or replace) a Fault and print where it is in force once it is applied.
    Create(Box<CreateArgs>),
    /// One line per Fault: type, phase, the clusters it is in force on, when it ends.
    List,
    /// Delete a Fault, which clears it from its clusters.
    Delete { name: String },
}

#[derive(Debug, Args)]
struct CreateArgs {
    name: String,
    /// `APILatency`, `APIErrors`, `APIDown`, `NodeNotReady`, `NodeDeleted`, `EtcdAlarm`,
    /// `EtcdMemberDown`, `MachineNeverBoots`, `MachineBootsLate` or `CertificateExpiring`.
    #[arg(long = "type")]
    type_: String,
    /// The Cluster to put it on (in the namespace).
    #[arg(
        long,
        conflicts_with = "selector",
        required_unless_present = "selector"
    )]
    cluster: Option<String>,
    /// The Clusters to put it on by label (`key=value,key2=value2`).
    #[arg(long, short = 'l')]
    selector: Option<String>,
    /// `APILatency`: the wait added to each request (`250ms`, `2s`).
    #[arg(long)]
    latency: Option<String>,
    /// `APIErrors`: the share of requests refused (`0.5`; all when not given).
    #[arg(long)]
    fraction: Option<String>,
    /// `APIErrors`: the code they are refused with (429, 500, 503 or 504).
    #[arg(long)]
    code: Option<u16>,
    /// `APIErrors` with code 429: the Retry-After, in seconds.
    #[arg(long)]
    retry_after: Option<u64>,
    /// `NodeNotReady`: the node whose kubelet stops; `NodeDeleted`: the node deleted;
    /// `CertificateExpiring`: the control-plane node whose certificate expires (every one's
    /// when not given).
    #[arg(long)]
    node: Option<String>,
    /// `EtcdAlarm`: `NOSPACE` or `CORRUPT`.
    #[arg(long)]
    alarm: Option<String>,
    /// `EtcdAlarm`: the etcd member (a control-plane machine); every member when not given.
    /// `EtcdMemberDown`: the member down.
    #[arg(long)]
    member: Option<String>,
    /// `MachineBootsLate`: how much later the machines' Nodes register (`2m`).
    #[arg(long)]
    delay: Option<String>,
    /// `CertificateExpiring`: how long after the fault starts the certificate expires (`480h`).
    #[arg(long)]
    expires_in: Option<String>,
    /// How long it lasts (`10m`); until deleted when not given.
    #[arg(long)]
    duration: Option<String>,
}

pub async fn run(args: FaultArgs) -> anyhow::Result<()> {
    let path = crate::cluster::kubeconfig_path(args.kubeconfig);
    let client = crate::controller::client_from(Some(&path))
        .await
        .with_context(|| format!("connecting to the management plane of {}", path.display()))?;
    let api: Api<Fault> = Api::namespaced(client, &args.namespace);
    match args.command {
        FaultCommand::Create(c) => create(&api, *c).await,
        FaultCommand::List => list(&api).await,
        FaultCommand::Delete { name } => {
            api.delete(&name, &DeleteParams::default()).await?;
            println!("fault {name} deleted");
            Ok(())
        }
    }
}

/// `key=value,key2=value2` as a selector's `matchLabels`.
fn match_labels(text: &str) -> anyhow::Result<LabelSelector> {
    let mut labels = BTreeMap::new();
    for pair in text.split(',').filter(|p| !p.is_empty()) {
        let (k, v) = pair
            .split_once('=')
            .with_context(|| format!("{pair:?} is not key=value"))?;
        labels.insert(k.trim().to_string(), v.trim().to_string());
    }
    Ok(LabelSelector {
        match_labels: Some(labels),
        ..LabelSelector::default()
    })
}

async fn create(api: &Api<Fault>, c: CreateArgs) -> anyhow::Result<()> {
    let params = FaultParams {
        latency: c.latency,
        fraction: c.fraction,
        code: c.code,
        retry_after_seconds: c.retry_after,
        node: c.node,
        alarm: c.alarm,
        member: c.member,
        delay: c.delay,
        expires_in: c.expires_in,
    };
    let spec = FaultSpec {
        cluster_name: c.cluster,
        cluster_selector: c.selector.as_deref().map(match_labels).transpose()?,
        type_: c.type_,
        params: Some(params).filter(|p| p != &FaultParams::default()),
        duration: c.duration,
    };
    let fault = Fault::new(&c.name, spec);
    let params = PatchParams::apply("infrasim-fault-cli").force();
    api.patch(&c.name, &params, &Patch::Apply(&fault))
        .await
        .with_context(|| format!("creating fault {}", c.name))?;
    // The controller reports where it put it; a plane without one leaves it pending.
    for _ in 0..100 {
        let now = api.get(&c.name).await?;
        if let Some(status) = now.status.filter(|s| s.phase.is_some()) {
            let phase = status.phase.unwrap_or_default();
            println!(
                "fault {} {phase} on: {}",
                c.name,
                status.clusters.join(", ")
            );
            return Ok(());
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    anyhow::bail!(
        "fault {} was created, but no controller applied it within 10 s",
        c.name
    )
}

async fn list(api: &Api<Fault>) -> anyhow::Result<()> {
    let faults = api.list(&ListParams::default()).await?;
    println!(
        "{:<24} {:<12} {:<8} {:<22} CLUSTERS",
        "NAME", "TYPE", "PHASE", "ENDS"
    );
    for f in faults {
        let status = f.status.clone().unwrap_or_default();
        println!(
            "{:<24} {:<12} {:<8} {:<22} {}",
            f.name_any(),
            f.spec.type_,
            status.phase.unwrap_or_default(),
            status.end_time.unwrap_or_else(|| "-".into()),
            status.clusters.join(","),
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_selector_is_read_as_match_labels() {
        let s = match_labels("chaos=on, tier = edge").expect("selector");
        let labels = s.match_labels.expect("labels");
        assert_eq!(labels.get("chaos").map(String::as_str), Some("on"));
        assert_eq!(labels.get("tier").map(String::as_str), Some("edge"));
        assert!(match_labels("nokey").is_err());
    }
}
