//! `infrasim env VCSIM_NAME CLUSTER_NAME`: the counterpart of CAPV's `vcsim.sh`. Through the
//! management plane it creates the VCenterSimulator (if missing), the ControlPlaneEndpoint
//! named as the cluster and the EnvVar joining them, waits until the EnvVar has its
//! variables, writes them to a file of `export` lines and prints the `source` command.

use anyhow::{bail, Context as _};
use clap::Args;
use infrasim_controllers::vcsim::types::{
    ClusterEnvVarSpec, ControlPlaneEndpoint, ControlPlaneEndpointSpec, EnvVar, EnvVarSpec,
    NamespacedRef, VCenterSimulator, VCenterSimulatorSpec, VMOperatorDependencies,
    VMOperatorDependenciesSpec,
};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::Resource;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Debug;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, Args)]
pub struct EnvArgs {
    /// The VCenterSimulator to use (created with the default model when missing).
    vcsim_name: String,
    /// The workload cluster: names its ControlPlaneEndpoint and its EnvVar.
    cluster_name: String,
    #[arg(long, short = 'n', default_value = "default")]
    namespace: String,
    /// The management plane (default: $KUBECONFIG, then the one `infrasim up` writes).
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// The Kubernetes version of the cluster (chooses `KUBERNETES_VERSION` and the template).
    #[arg(long)]
    kubernetes_version: Option<String>,
    #[arg(long, default_value_t = 1)]
    control_plane_machines: i32,
    #[arg(long, default_value_t = 1)]
    worker_machines: i32,
    /// Managed object IDs instead of inventory paths in the variables.
    #[arg(long)]
    use_moid: bool,
    /// CAPV's supervisor mode: a VMOperatorDependencies named after the simulator (vm-operator's
    /// storage class, VM classes and images on it) and its variables
    /// (`VSPHERE_MACHINE_CLASS_NAME`, `VSPHERE_IMAGE_NAME`, `VSPHERE_STORAGE_CLASS`, ...).
    #[arg(long)]
    supervisor: bool,
    /// Where the `export` lines go.
    #[arg(long, default_value = "vcsim.env")]
    out: PathBuf,
    /// How long to wait for the variables, in seconds.
    #[arg(long, default_value_t = 60)]
    timeout: u64,
}

pub async fn run(args: EnvArgs) -> anyhow::Result<()> {
    let path = crate::cluster::kubeconfig_path(args.kubeconfig.clone());
    let client = crate::controller::client_from(Some(&path))
        .await
        .with_context(|| format!("connecting to the management plane of {}", path.display()))?;
    let ns = &args.namespace;
    let simulator = VCenterSimulator::new(&args.vcsim_name, VCenterSimulatorSpec::default());
    create_if_missing(&Api::namespaced(client.clone(), ns), simulator).await?;
    let endpoint = ControlPlaneEndpoint::new(&args.cluster_name, ControlPlaneEndpointSpec {});
    create_if_missing(&Api::namespaced(client.clone(), ns), endpoint).await?;
    let dependencies = args.supervisor.then(|| NamespacedRef {
        namespace: ns.clone(),
        name: args.vcsim_name.clone(),
    });
    if let Some(deps) = &dependencies {
        let spec = VMOperatorDependenciesSpec {
            vcenter_simulator_ref: Some(NamespacedRef {
                namespace: ns.clone(),
                name: args.vcsim_name.clone(),
            }),
            ..Default::default()
        };
        let obj = VMOperatorDependencies::new(&deps.name, spec);
        create_if_missing(&Api::namespaced(client.clone(), ns), obj).await?;
    }
    let envvars: Api<EnvVar> = Api::namespaced(client, ns);
    let spec = EnvVarSpec {
        vcenter_simulator: Some(NamespacedRef {
            namespace: ns.clone(),
            name: args.vcsim_name.clone(),
        }),
        control_plane_endpoint: NamespacedRef {
            namespace: ns.clone(),
            name: args.cluster_name.clone(),
        },
        cluster: ClusterEnvVarSpec {
            name: args.cluster_name.clone(),
            namespace: ns.clone(),
            kubernetes_version: args.kubernetes_version.clone(),
            control_plane_machines: Some(args.control_plane_machines),
            worker_machines: Some(args.worker_machines),
            ..Default::default()
        },
        use_moid: args.use_moid,
        vm_operator_dependencies: dependencies,
    };
    let body = serde_json::json!({
        "apiVersion": "vcsim.infrastructure.cluster.x-k8s.io/v1alpha1",
        "kind": "EnvVar",
        "metadata": {"name": args.cluster_name},
        "spec": spec,
    });
    envvars
        .patch(
            &args.cluster_name,
            &PatchParams::apply("infrasim-env").force(),
            &Patch::Apply(&body),
        )
        .await
        .context("applying the EnvVar")?;
    println!("applied EnvVar {}", args.cluster_name);
    let wanted = spec;
    let mut vars = wait_for_variables(&envvars, &args.cluster_name, &wanted, args.timeout).await?;
    if args.supervisor {
        supervisor_template_variables(&mut vars);
    }
    std::fs::write(&args.out, export_lines(&vars))
        .with_context(|| format!("writing {}", args.out.display()))?;
    println!("done!");
    println!("source {}", args.out.display());
    Ok(())
}

/// What CAPV's supervisor template reads beyond the EnvVar's supervisor variables (its
/// cloud-provider ClusterResourceSet names the datacenter and network; CAPV's e2e config
/// gives them): the simulator model's first datacenter and its network, and the cloud
/// provider image's version, the cluster's.
fn supervisor_template_variables(vars: &mut BTreeMap<String, String>) {
    let version = vars.get("KUBERNETES_VERSION").cloned().unwrap_or_default();
    for (k, v) in [
        ("VSPHERE_DATACENTER", "DC0".to_string()),
        ("VSPHERE_NETWORK", "/DC0/network/VM Network".to_string()),
        ("CPI_IMAGE_K8S_VERSION", version),
    ] {
        vars.entry(k.to_string()).or_insert(v);
    }
}

/// Creates `obj` unless one of its name exists, and says which.
async fn create_if_missing<K>(api: &Api<K>, obj: K) -> anyhow::Result<()>
where
    K: Resource<DynamicType = ()> + Clone + Serialize + DeserializeOwned + Debug,
{
    let name = obj.meta().name.clone().unwrap_or_default();
    let kind = K::kind(&());
    if api.get_opt(&name).await?.is_some() {
        println!("{kind} {name} already exists");
        return Ok(());
    }
    match api.create(&PostParams::default(), &obj).await {
        Ok(_) => println!("created {kind} {name}"),
        // Created meanwhile by someone else: as good.
        Err(kube::Error::Api(e)) if e.code == 409 => println!("{kind} {name} already exists"),
        Err(e) => return Err(e).with_context(|| format!("creating {kind} {name}")),
    }
    Ok(())
}

/// Waits (watching) until the EnvVar's variables are those of `spec`: a status written from
/// an older spec does not count.
async fn wait_for_variables(
    api: &Api<EnvVar>,
    name: &str,
    spec: &EnvVarSpec,
    timeout: u64,
) -> anyhow::Result<BTreeMap<String, String>> {
    // Without a version asked for, the EnvVar names its template's: any version counts.
    let asked = spec.cluster.kubernetes_version.is_some();
    let wanted: Vec<_> = spec
        .cluster
        .shape_variables()
        .into_iter()
        .filter(|(k, _)| asked || *k != "KUBERNETES_VERSION")
        .collect();
    let variables = |e: &EnvVar| e.status.as_ref().and_then(|s| s.variables.clone());
    let done = move |e: Option<&EnvVar>| {
        e.and_then(variables)
            .is_some_and(|v| wanted.iter().all(|(k, want)| v.get(*k) == Some(want)))
    };
    let waited = tokio::time::timeout(
        Duration::from_secs(timeout),
        kube::runtime::wait::await_condition(api.clone(), name, done),
    )
    .await;
    match waited {
        Ok(Ok(Some(e))) => variables(&e).context("the EnvVar lost its variables"),
        Ok(Ok(None)) => bail!("EnvVar {name} was deleted while waiting"),
        Ok(Err(e)) => Err(e).context("watching the EnvVar"),
        Err(_) => bail!(
            "EnvVar {name} has no variables after {timeout}s: see `kubectl describe \
             vcentersimulator` and `kubectl get events`"
        ),
    }
}

/// `export NAME='value'` lines, each value quoted for a POSIX shell.
fn export_lines(vars: &BTreeMap<String, String>) -> String {
    vars.iter()
        .map(|(k, v)| format!("export {k}='{}'\n", v.replace('\'', r"'\''")))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_single_quoted_for_the_shell() {
        let vars = BTreeMap::from([
            ("A".to_string(), "x y".to_string()),
            ("B".to_string(), "it's".to_string()),
        ]);
        assert_eq!(export_lines(&vars), "export A='x y'\nexport B='it'\\''s'\n");
    }
}
