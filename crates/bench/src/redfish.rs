//! `infrasim bench redfish`: the Redfish service `infrasim vcsim` serves for its VMs against
//! sushy-tools' emulator (PyPI `sushy-tools`, its fake driver: no libvirt, the cheapest
//! backend it has), side by side in one run: requests per second and server CPU per request
//! for a GET of one system and for `ComputerSystem.Reset` (`ForceRestart`, which powers a
//! machine whatever its state).
//!
//! Both serve HTTPS with the same certificate and are loaded by the same client in this
//! process (HTTP/1.1 keep-alive connections, reopened when a server closes them: sushy-tools'
//! development server closes every connection after one answer, so it pays a TLS handshake
//! per request, which is how it serves Ironic). Ours requires HTTP Basic on every request;
//! sushy-tools is run without an auth file (checking an htpasswd file's bcrypt hash per
//! request would cost it more): the comparison leans its way. CPU is the server process's
//! (`/proc/<pid>/stat`), not the client's.
//!
//! Then (`--hosts N`, 0 to skip) the metal3 stand-in over N BareMetalHosts whose BMCs are the
//! VMs of one `infrasim vcsim`: the time from their creation until every one is `available`
//! (registered, inspected through its BMC, prepared), the plane's and the vCenter's CPU.

use crate::process::cpu_time;
use anyhow::Context as _;
use bytes::Bytes;
use clap::Args;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};
use tokio::net::TcpStream;

const PASSWORD: &str = "bench-pass";
const USER: &str = "administrator@vsphere.local";

#[derive(Debug, Args)]
pub struct RedfishBenchArgs {
    /// Seconds each load runs.
    #[arg(long, default_value_t = 5)]
    seconds: u64,
    /// Concurrent connections.
    #[arg(long, default_value_t = 4)]
    clients: usize,
    /// sushy-tools' emulator (`pip install sushy-tools`).
    #[arg(long, default_value = ".venv/bin/sushy-emulator")]
    sushy_emulator: PathBuf,
    /// BareMetalHosts to bring from registering to available (0: skip).
    #[arg(long, default_value_t = 1000)]
    hosts: usize,
}

/// One server's figures for one load.
#[derive(Debug, Default, Clone, Copy)]
struct Load {
    requests: usize,
    wall: Duration,
    cpu: Duration,
    connections: usize,
}

impl Load {
    fn per_second(&self) -> f64 {
        self.requests as f64 / self.wall.as_secs_f64().max(1e-9)
    }
    fn cpu_per_request(&self) -> Duration {
        self.cpu
            .checked_div(self.requests.max(1) as u32)
            .unwrap_or_default()
    }
}

struct Setup {
    dir: PathBuf,
    connector: tokio_rustls::TlsConnector,
}

impl Drop for Setup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn setup() -> anyhow::Result<Setup> {
    let dir = std::env::temp_dir().join(format!("infrasim-bench-redfish-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let connector = crate::vsphere::serving_tls(&dir, "infrasim bench redfish")?;
    Ok(Setup { dir, connector })
}

pub async fn run(args: RedfishBenchArgs) -> anyhow::Result<()> {
    if cfg!(debug_assertions) {
        eprintln!("warning: a debug build; run `cargo run --release -p infrasim --features bench -- bench redfish` for figures that mean something");
    }
    let setup = setup()?;
    let ours = measure(&args, &setup, Server::Infrasim).await?;
    let theirs = measure(&args, &setup, Server::Sushy).await?;
    print_table(&args, &ours, &theirs);
    if args.hosts > 0 {
        hosts_available(&setup, args.hosts).await?;
    }
    Ok(())
}

/// N BareMetalHosts, each the VM of one vCenter's BMC service, until every one is available.
async fn hosts_available(setup: &Setup, n: usize) -> anyhow::Result<()> {
    let (mut child, vcsim_pid, addr) = start_vcsim(setup, n.div_ceil(2)).await?;
    let systems = list_systems(setup, addr, n).await?;
    let (hosts, _controllers) = bmh_plane().await?;
    let me = std::process::id();
    let (cpu0, vcpu0, t0) = (cpu_time(me)?, cpu_time(vcsim_pid)?, Instant::now());
    create_hosts(&hosts, addr, &systems).await?;
    let available = wait_available(&hosts, n, t0 + Duration::from_secs(1800)).await?;
    let wall = t0.elapsed();
    let (cpu, vcpu) = (
        cpu_time(me)?.saturating_sub(cpu0),
        cpu_time(vcsim_pid)?.saturating_sub(vcpu0),
    );
    println!("\n{available} BareMetalHosts from creation to available through their BMCs (the metal3 stand-in, one vcsim's Redfish service)");
    println!(
        "{:<44} {:>10.2} s",
        "every host available",
        wall.as_secs_f64()
    );
    let per = |d: Duration| d.as_secs_f64() * 1000.0 / n.max(1) as f64;
    println!(
        "{:<44} {:>9.2} ms",
        "per host, plane and controllers CPU",
        per(cpu)
    );
    println!(
        "{:<44} {:>9.2} ms",
        "per host, vCenter (BMC service) CPU",
        per(vcpu)
    );
    let _ = child.kill().await;
    Ok(())
}

/// An `infrasim vcsim` with `vms` VMs on a free local port, serving the benchmark's
/// certificate, once its Redfish service answers: the process, its pid and its address.
async fn start_vcsim(
    setup: &Setup,
    vms: usize,
) -> anyhow::Result<(tokio::process::Child, u32, SocketAddr)> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let (cert, key) = (setup.dir.join("server.crt"), setup.dir.join("server.key"));
    let mut vcsim = tokio::process::Command::new(std::env::current_exe()?);
    vcsim.args([
        "vcsim",
        "--listen",
        &addr.to_string(),
        "--password",
        PASSWORD,
    ]);
    vcsim.args(["--vms", &vms.to_string()]);
    vcsim
        .arg("--tls-cert")
        .arg(&cert)
        .arg("--tls-key")
        .arg(&key);
    vcsim
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true);
    let mut child = vcsim.spawn()?;
    let vcsim_pid = child.id().context("vcsim has no pid")?;
    wait_for_system(&setup.connector, addr, &mut child).await?;
    Ok((child, vcsim_pid, addr))
}

/// The paths of the first `n` Redfish systems the vcsim at `addr` serves (an error when it
/// has fewer).
async fn list_systems(setup: &Setup, addr: SocketAddr, n: usize) -> anyhow::Result<Vec<String>> {
    let mut lister = Client::new(setup.connector.clone(), addr, String::new());
    let systems: Vec<String> = lister.get_json("/redfish/v1/Systems").await?["Members"]
        .as_array()
        .context("no systems")?
        .iter()
        .filter_map(|m| m["@odata.id"].as_str().map(str::to_string))
        .take(n)
        .collect();
    anyhow::ensure!(
        systems.len() == n,
        "vcsim has {} systems, not {n}",
        systems.len()
    );
    Ok(systems)
}

/// An embedded plane running the SIP family's controllers (the metal3 stand-in among them),
/// with the namespace `bench-bmh` and its BMC credentials Secret `bmc`: the BareMetalHosts
/// of that namespace, and the controllers' task.
async fn bmh_plane() -> anyhow::Result<(
    kube::Api<kube::api::DynamicObject>,
    tokio::task::JoinHandle<()>,
)> {
    use k8s_openapi::api::core::v1::{Namespace, Secret};
    use kube::api::{Api, DynamicObject, PostParams};
    use kube::core::{ApiResource, GroupVersionKind};
    use serde_json::json;
    let selection = infrasim_controllers::Selection {
        sip: true,
        ..Default::default()
    };
    let (client, controllers) = crate::vcsim::plane(selection).await?;
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": "bench-bmh"}}))?;
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await?;
    let secret: Secret = serde_json::from_value(json!({"metadata": {"name": "bmc"},
        "stringData": {"username": USER, "password": PASSWORD}}))?;
    Api::<Secret>::namespaced(client.clone(), "bench-bmh")
        .create(&PostParams::default(), &secret)
        .await?;
    let gvk = GroupVersionKind::gvk("metal3.io", "v1alpha1", "BareMetalHost");
    let hosts: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), "bench-bmh", &ApiResource::from_gvk(&gvk));
    Ok((hosts, controllers))
}

/// One BareMetalHost per system, powered off, whose BMC is that system of the vcsim at `addr`.
async fn create_hosts(
    hosts: &kube::Api<kube::api::DynamicObject>,
    addr: SocketAddr,
    systems: &[String],
) -> anyhow::Result<()> {
    for (i, system) in systems.iter().enumerate() {
        let host: kube::api::DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "metal3.io/v1alpha1", "kind": "BareMetalHost",
            "metadata": {"name": format!("host{i:05}")},
            "spec": {"online": false, "bmc": {"address": format!("redfish+https://{addr}{system}"),
                     "credentialsName": "bmc", "disableCertificateVerification": true}},
        }))?;
        hosts
            .create(&kube::api::PostParams::default(), &host)
            .await?;
    }
    Ok(())
}

/// Polls the BareMetalHosts until `n` of them are `available` (an error past `deadline`):
/// how many are.
async fn wait_available(
    hosts: &kube::Api<kube::api::DynamicObject>,
    n: usize,
    deadline: Instant,
) -> anyhow::Result<usize> {
    loop {
        let list = hosts.list(&Default::default()).await?;
        let done = list
            .items
            .iter()
            .filter(|h| h.data["status"]["provisioning"]["state"] == "available")
            .count();
        if done >= n {
            return Ok(done);
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "{done} of {n} hosts available after 30 min"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[derive(Debug, Clone, Copy)]
enum Server {
    Infrasim,
    Sushy,
}

impl Server {
    fn command(
        self,
        args: &RedfishBenchArgs,
        setup: &Setup,
        port: u16,
    ) -> anyhow::Result<tokio::process::Command> {
        let (cert, key) = (setup.dir.join("server.crt"), setup.dir.join("server.key"));
        let mut cmd = match self {
            Server::Infrasim => {
                let mut c = tokio::process::Command::new(std::env::current_exe()?);
                c.args([
                    "vcsim",
                    "--listen",
                    &format!("127.0.0.1:{port}"),
                    "--password",
                    PASSWORD,
                ]);
                c.arg("--tls-cert").arg(&cert).arg("--tls-key").arg(&key);
                c
            }
            Server::Sushy => {
                let mut c = tokio::process::Command::new(&args.sushy_emulator);
                c.args(["--fake", "-i", "127.0.0.1", "-p", &port.to_string()]);
                c.arg("--ssl-certificate")
                    .arg(&cert)
                    .arg("--ssl-key")
                    .arg(&key);
                c
            }
        };
        cmd.stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true);
        Ok(cmd)
    }
}

/// Starts `server`, runs both loads against it, and stops it: (GET, Reset).
async fn measure(
    args: &RedfishBenchArgs,
    setup: &Setup,
    server: Server,
) -> anyhow::Result<(Load, Load)> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let mut child = server
        .command(args, setup, port)?
        .spawn()
        .with_context(|| format!("starting {server:?}"))?;
    let pid = child.id().context("the server has no pid")?;
    let system = wait_for_system(&setup.connector, addr, &mut child).await?;
    let window = Duration::from_secs(args.seconds);
    let get = load(
        &setup.connector,
        addr,
        pid,
        args.clients,
        window,
        |c| {
            Box::pin(async move {
                let path = c.target.clone();
                c.send(http::Method::GET, &path, None).await
            })
        },
        &system,
    )
    .await?;
    let reset_target = format!("{system}/Actions/ComputerSystem.Reset");
    let reset = load(
        &setup.connector,
        addr,
        pid,
        args.clients,
        window,
        |c| {
            Box::pin(async move {
                let path = c.target.clone();
                c.send(
                    http::Method::POST,
                    &path,
                    Some(r#"{"ResetType": "ForceRestart"}"#),
                )
                .await
            })
        },
        &reset_target,
    )
    .await?;
    let _ = child.kill().await;
    Ok((get, reset))
}

/// Waits until the server lists a system; that system's path.
async fn wait_for_system(
    connector: &tokio_rustls::TlsConnector,
    addr: SocketAddr,
    child: &mut tokio::process::Child,
) -> anyhow::Result<String> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(status) = child.try_wait()? {
            anyhow::bail!("the server exited while starting: {status}");
        }
        let mut client = Client::new(connector.clone(), addr, String::new());
        if let Ok(body) = client.get_json("/redfish/v1/Systems").await {
            if let Some(first) = body["Members"][0]["@odata.id"].as_str() {
                return Ok(first.trim_end_matches('/').to_string());
            }
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "the server did not list a system in 60 s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

type Work<'a> = futures::future::BoxFuture<'a, anyhow::Result<()>>;

/// `clients` connections doing `work` on `target` for `window`.
async fn load<F>(
    connector: &tokio_rustls::TlsConnector,
    addr: SocketAddr,
    pid: u32,
    clients: usize,
    window: Duration,
    work: F,
    target: &str,
) -> anyhow::Result<Load>
where
    F: for<'a> Fn(&'a mut Client) -> Work<'a> + Sync,
{
    let mut all: Vec<Client> = (0..clients)
        .map(|_| Client::new(connector.clone(), addr, target.to_string()))
        .collect();
    let (cpu0, t0) = (cpu_time(pid)?, Instant::now());
    let deadline = t0 + window;
    let runs = all.iter_mut().map(|c| {
        let work = &work;
        async move {
            let mut n = 0usize;
            while Instant::now() < deadline {
                work(c).await?;
                n += 1;
            }
            anyhow::Ok(n)
        }
    });
    let counts = futures::future::try_join_all(runs).await?;
    let (wall, cpu) = (t0.elapsed(), cpu_time(pid)?.saturating_sub(cpu0));
    Ok(Load {
        requests: counts.iter().sum(),
        wall,
        cpu,
        connections: all.iter().map(|c| c.opened).sum(),
    })
}

/// A keep-alive HTTPS connection, reopened when the server closes it.
struct Client {
    connector: tokio_rustls::TlsConnector,
    addr: SocketAddr,
    send: Option<hyper::client::conn::http1::SendRequest<Full<Bytes>>>,
    authorization: String,
    target: String,
    opened: usize,
}

impl Client {
    fn new(connector: tokio_rustls::TlsConnector, addr: SocketAddr, target: String) -> Client {
        use base64::Engine;
        let token = base64::engine::general_purpose::STANDARD.encode(format!("{USER}:{PASSWORD}"));
        Client {
            connector,
            addr,
            send: None,
            authorization: format!("Basic {token}"),
            target,
            opened: 0,
        }
    }

    async fn connection(
        &mut self,
    ) -> anyhow::Result<&mut hyper::client::conn::http1::SendRequest<Full<Bytes>>> {
        let usable = match self.send.as_mut() {
            Some(s) => s.ready().await.is_ok(),
            None => false,
        };
        if !usable {
            let tcp = TcpStream::connect(self.addr).await?;
            tcp.set_nodelay(true)?;
            let tls = self
                .connector
                .connect(ServerName::try_from("localhost")?.to_owned(), tcp)
                .await?;
            let (send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls)).await?;
            tokio::spawn(conn);
            self.send = Some(send);
            self.opened += 1;
        }
        self.send.as_mut().context("no connection")
    }

    /// One request; its body, or an error for a status other than 2xx.
    async fn request(
        &mut self,
        method: http::Method,
        path: &str,
        body: Option<&str>,
    ) -> anyhow::Result<Bytes> {
        let req = http::Request::builder()
            .method(method)
            .uri(path)
            .header(http::header::HOST, "localhost")
            .header(http::header::AUTHORIZATION, &self.authorization)
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(Full::new(Bytes::from(body.unwrap_or("").to_string())))?;
        let send = self.connection().await?;
        let resp = send.send_request(req).await?;
        let status = resp.status();
        let bytes = resp.into_body().collect().await?.to_bytes();
        anyhow::ensure!(
            status.is_success(),
            "{path}: HTTP {status}: {}",
            String::from_utf8_lossy(&bytes)
        );
        Ok(bytes)
    }

    async fn send(
        &mut self,
        method: http::Method,
        path: &str,
        body: Option<&str>,
    ) -> anyhow::Result<()> {
        self.request(method, path, body).await.map(drop)
    }

    async fn get_json(&mut self, path: &str) -> anyhow::Result<serde_json::Value> {
        let bytes = self.request(http::Method::GET, path, None).await?;
        Ok(serde_json::from_slice(&bytes)?)
    }
}

fn print_table(args: &RedfishBenchArgs, ours: &(Load, Load), theirs: &(Load, Load)) {
    println!(
        "Redfish: infrasim vcsim against sushy-tools' emulator (fake driver), {} connections, {} s per load",
        args.clients, args.seconds
    );
    println!(
        "{:<28} {:>14} {:>14} {:>8} {:>16} {:>16} {:>8}",
        "load",
        "infrasim req/s",
        "sushy req/s",
        "ratio",
        "infrasim CPU/req",
        "sushy CPU/req",
        "ratio"
    );
    for (name, o, t) in [
        ("GET system", ours.0, theirs.0),
        ("Reset (ForceRestart)", ours.1, theirs.1),
    ] {
        let cpu_ratio =
            t.cpu_per_request().as_secs_f64() / o.cpu_per_request().as_secs_f64().max(1e-12);
        println!(
            "{:<28} {:>14.0} {:>14.0} {:>7.1}x {:>16?} {:>16?} {:>7.1}x",
            name,
            o.per_second(),
            t.per_second(),
            o.per_second() / t.per_second().max(1e-9),
            o.cpu_per_request(),
            t.cpu_per_request(),
            cpu_ratio
        );
    }
    println!(
        "requests: infrasim {} + {}, sushy-tools {} + {}; connections opened: infrasim {} + {}, sushy-tools {} + {}",
        ours.0.requests, ours.1.requests, theirs.0.requests, theirs.1.requests,
        ours.0.connections, ours.1.connections, theirs.0.connections, theirs.1.connections
    );
}
