//! `infrasim dashboard`: a fresh one-time login link for the dashboard of the plane a
//! kubeconfig names, on stdout. Minting one needs the right to create Secrets in
//! `kube-system` there, as the plane's administrators have.

use anyhow::Context;
use clap::Args;
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct DashboardArgs {
    /// The kubeconfig of the management plane (default: $KUBECONFIG, then ~/.kube/config).
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
}

pub async fn run(args: DashboardArgs) -> anyhow::Result<()> {
    let client = crate::controller::client_from(args.kubeconfig.as_deref()).await?;
    let link = infrasim_dashboard::login::link(&client)
        .await
        .context("minting a dashboard login link")?;
    println!("{link}");
    Ok(())
}
