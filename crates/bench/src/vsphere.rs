//! `infrasim bench vsphere`: `infrasim vcsim` against govmomi's own simulator (a small Go
//! main of ours over Debian's `simulator` and `vapi/simulator` packages, in
//! tests/govmomi/src/vcsim-baseline), side by side in one run, for several model sizes.
//!
//! Each server runs as its own child process, one at a time, so the figures are the server's
//! CPU time read from `/proc/<pid>/stat` (user + system, every thread) and not wall time: the
//! client load generator runs in this process and its cost is not counted. Measured per
//! server and model size:
//! - startup: from spawn until the first SOAP answer (RetrieveServiceContent);
//! - memory: resident set after startup and after the workload;
//! - server CPU per RetrievePropertiesEx of three properties of one VM;
//! - server CPU to list every VM's name and power state through a container view (paged
//!   with ContinueRetrievePropertiesEx as the server chooses);
//! - server CPU per clone as a client sees it: CloneVM_Task, then the wait for its task as
//!   pyvmomi's `WaitForTask` and govc do (a filter on the task's `info.state`,
//!   WaitForUpdatesEx until it ends, the filter destroyed);
//! - with clients waiting in WaitForUpdatesEx, the server CPU per VM power change and the
//!   updates' delivery latency (see `vsphere_updates`).

use anyhow::Context;
use clap::Args;
use infrasim_kube_api::pki::CertificateAuthority;
use rustls::pki_types::pem::PemObject;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Debug, Args)]
pub struct VsphereBenchArgs {
    /// VMs per standalone host and per resource pool, one model per value (the default model
    /// has two such places, so 2, 250 and 5000 give 4, 500 and 10,000 VMs).
    #[arg(long, value_delimiter = ',', default_values_t = [2usize, 250, 5000])]
    vms: Vec<usize>,
    /// Seconds each measured load runs.
    #[arg(long, default_value_t = 3)]
    seconds: u64,
    /// Concurrent client connections (each logged in with its own session).
    #[arg(long, default_value_t = 4)]
    connections: usize,
    /// The baseline server binary; built from tests/govmomi with Debian's govmomi when not
    /// given (needs `go` and golang-github-vmware-govmomi-dev).
    #[arg(long)]
    baseline: Option<PathBuf>,
    /// Clients waiting in WaitForUpdatesEx during the power-change load (half on every VM,
    /// half on one VM each).
    #[arg(long, default_value_t = 50)]
    waiters: usize,
    /// Power changes of one VM made while they wait (at least; they go on for --seconds).
    #[arg(long, default_value_t = 10)]
    changes: usize,
    /// The infrasim binary measured (default: this one), to compare two builds' servers with
    /// one load generator.
    #[arg(long)]
    infrasim: Option<PathBuf>,
    /// Run infrasim's server kept in a data directory (`vcsim --data-dir`: every change on
    /// disk before it is answered), and time its restart on that directory after the loads.
    #[arg(long, default_value_t = false, action = clap::ArgAction::Set)]
    kept: bool,
    /// The loopback port the servers listen on (one at a time).
    #[arg(long, default_value_t = 18989)]
    port: u16,
}

use crate::process::{anonymous_memory, cpu_time, rss};
use crate::vim::{wait_for_service, Session, CURRENT_TIME, PASSWORD};

/// The two servers compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Server {
    Infrasim,
    Govmomi,
}

impl Server {
    fn command(
        self,
        args: &VsphereBenchArgs,
        setup: &Setup,
        vms: usize,
    ) -> anyhow::Result<tokio::process::Command> {
        let listen = format!("127.0.0.1:{}", args.port);
        let (cert, key) = (setup.dir.join("server.crt"), setup.dir.join("server.key"));
        let mut cmd = match self {
            Server::Infrasim => {
                let binary = match &args.infrasim {
                    Some(path) => path.clone(),
                    None => std::env::current_exe()?,
                };
                let mut c = tokio::process::Command::new(binary);
                c.args(["vcsim", "--listen", &listen, "--password", PASSWORD]);
                c.args(["--vms", &vms.to_string()]);
                c.arg("--tls-cert").arg(&cert).arg("--tls-key").arg(&key);
                if args.kept {
                    c.arg("--data-dir").arg(kept_dir(setup, vms));
                }
                c
            }
            Server::Govmomi => {
                let mut c = tokio::process::Command::new(&setup.baseline);
                c.args(["-listen", &listen, "-password", PASSWORD]);
                c.args(["-vms", &vms.to_string()]);
                c.arg("-tls-cert").arg(&cert).arg("-tls-key").arg(&key);
                c
            }
        };
        cmd.stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true);
        Ok(cmd)
    }
}

/// Where infrasim's server is kept with `--kept`, per model size.
fn kept_dir(setup: &Setup, vms: usize) -> PathBuf {
    setup.dir.join(format!("kept-{vms}"))
}

/// What one server measured at one model size.
#[derive(Debug, Default, Clone)]
struct Figures {
    vms: usize,
    startup: Duration,
    rss_start: u64,
    /// The part of `rss_start` that is the process's own (anonymous) memory: the heap and
    /// stacks, not the executable's pages, which the page cache shares between processes.
    anon_start: u64,
    /// After the retrieve and list loads, before any clone.
    rss_loaded: u64,
    anon_loaded: u64,
    rss_end: u64,
    /// A call that does nothing: what every call pays for TLS, HTTP and the SOAP envelope.
    current_time: Duration,
    current_times: usize,
    retrieve: Duration,
    list: Duration,
    clone: Duration,
    retrieves: usize,
    lists: usize,
    clones: usize,
    updates: crate::vsphere_updates::UpdateFigures,
    /// With `--kept`: killed after the loads and started again on its directory, the time
    /// to its first answer and its memory then.
    restart: Option<(Duration, u64)>,
}

/// What both servers share: the baseline binary, and one serving certificate of a CA the
/// client trusts, so both do the same TLS work (ECDSA P-256).
struct Setup {
    baseline: PathBuf,
    dir: PathBuf,
    connector: tokio_rustls::TlsConnector,
}

impl Setup {
    async fn new(args: &VsphereBenchArgs) -> anyhow::Result<Setup> {
        let baseline = match &args.baseline {
            Some(p) => p.clone(),
            None => build_baseline().await?,
        };
        let dir =
            std::env::temp_dir().join(format!("infrasim-bench-vsphere-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        let connector = serving_tls(&dir, "infrasim bench vsphere")?;
        Ok(Setup {
            baseline,
            dir,
            connector,
        })
    }
}

/// A CA named `ca_name`, a serving certificate of it for `localhost`/127.0.0.1 written to
/// `dir` (`server.crt`, `server.key`) for the servers a benchmark starts, and a client that
/// trusts that CA (HTTP/1.1), so every server compared does the same TLS work.
pub(crate) fn serving_tls(dir: &Path, ca_name: &str) -> anyhow::Result<tokio_rustls::TlsConnector> {
    let ca = CertificateAuthority::generate(ca_name)?;
    let serving = ca.serving_cert("localhost", &["localhost".into()], &[[127, 0, 0, 1].into()])?;
    std::fs::write(dir.join("server.crt"), &serving.cert_pem)?;
    infrasim_kube_api::pki::write_private(&dir.join("server.key"), &serving.key_pem)?;
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls::pki_types::CertificateDer::pem_slice_iter(ca.cert_pem.as_bytes()) {
        roots.add(cert?)?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(tokio_rustls::TlsConnector::from(Arc::new(config)))
}

impl Drop for Setup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

pub async fn run(args: VsphereBenchArgs) -> anyhow::Result<()> {
    if cfg!(debug_assertions) {
        // The simulator is this binary: a debug build measures unoptimized code.
        eprintln!("warning: a debug build; run `cargo run --release -p infrasim -- bench vsphere` for figures that mean something");
    }
    let setup = Setup::new(&args).await?;
    for &vms in &args.vms {
        let ours = measure(&args, Server::Infrasim, &setup, vms).await?;
        let theirs = measure(&args, Server::Govmomi, &setup, vms).await?;
        print_table(&ours, &theirs);
    }
    Ok(())
}

/// Builds tests/govmomi/src/vcsim-baseline against Debian's govmomi into the target dir.
pub(crate) async fn build_baseline() -> anyhow::Result<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let gopath = root.join("tests/govmomi");
    let out = root.join("target/vcsim-baseline");
    let status = tokio::process::Command::new("go")
        .args(["build", "-o"])
        .arg(&out)
        .arg("vcsim-baseline")
        .current_dir(&gopath)
        .env("GOPATH", format!("{}:/usr/share/gocode", gopath.display()))
        .env("GO111MODULE", "off")
        .env("GOFLAGS", "")
        .status()
        .await
        .context("running go (install golang-go and golang-github-vmware-govmomi-dev, or pass --baseline)")?;
    anyhow::ensure!(status.success(), "building the govmomi baseline failed");
    Ok(out)
}

/// Starts `server` with `vms` per place, runs every load against it, and stops it.
async fn measure(
    args: &VsphereBenchArgs,
    server: Server,
    setup: &Setup,
    vms: usize,
) -> anyhow::Result<Figures> {
    eprintln!("{server:?}: {vms} VMs per place ...");
    if server == Server::Infrasim && args.kept {
        // A directory left by an earlier run would be restored rather than made.
        let _ = std::fs::remove_dir_all(kept_dir(setup, vms));
    }
    let addr: SocketAddr = ([127, 0, 0, 1], args.port).into();
    // Another server on the port would answer in the child's place and be measured as it.
    std::net::TcpListener::bind(addr)
        .with_context(|| format!("port {} is taken (choose another with --port)", args.port))?;
    let started = Instant::now();
    let mut child = server.command(args, setup, vms)?.spawn()?;
    let pid = child.id().context("the server exited at once")?;
    let connector = setup.connector.clone();
    let content = wait_for_service(&connector, addr, &mut child).await?;
    let mut figures = Figures {
        startup: started.elapsed(),
        rss_start: rss(pid)?,
        anon_start: anonymous_memory(pid)?,
        ..Figures::default()
    };
    eprintln!("  started; logging in");
    let mut sessions = Vec::new();
    for _ in 0..args.connections.max(1) {
        sessions.push(
            Session::login(&connector, addr, &content)
                .await
                .context("logging in")?,
        );
    }
    let vm_list = sessions[0].list_vms().await.context("listing VMs")?;
    figures.vms = vm_list.len();
    let first = vm_list.first().context("the model has no VM")?.clone();
    let window = Duration::from_secs(args.seconds);

    eprintln!("  CurrentTime");
    let (n, cpu) = load(pid, &mut sessions, window, |s, _| {
        Box::pin(async move { s.conn.call(CURRENT_TIME).await.map(drop) })
    })
    .await?;
    (figures.current_times, figures.current_time) = (n, per(cpu, n));

    eprintln!("  RetrievePropertiesEx");
    let (n, cpu) = load(pid, &mut sessions, window, |s, _| {
        let vm = first.clone();
        Box::pin(async move { s.retrieve_vm(&vm).await })
    })
    .await?;
    (figures.retrieves, figures.retrieve) = (n, per(cpu, n));

    eprintln!("  listing");
    let (n, cpu) = load(pid, &mut sessions, window, |s, _| {
        Box::pin(async move { s.list_vms().await.map(drop) })
    })
    .await?;
    (figures.lists, figures.list) = (n, per(cpu, n));

    figures.rss_loaded = rss(pid)?;
    figures.anon_loaded = anonymous_memory(pid)?;

    eprintln!(
        "  power changes, {} clients waiting for updates",
        args.waiters
    );
    let mut waiting = Vec::new();
    for _ in 0..args.waiters {
        waiting.push(Session::login(&connector, addr, &content).await?);
    }
    figures.updates = crate::vsphere_updates::measure(
        pid,
        waiting,
        &mut sessions[0],
        &vm_list,
        (args.changes, window),
    )
    .await
    .context("the waiters' load")?;

    eprintln!("  cloning");
    let folder = sessions[0].parent_folder(&first).await?;
    let (n, cpu) = load(pid, &mut sessions, window, |s, i| {
        let (vm, folder) = (first.clone(), folder.clone());
        Box::pin(async move { s.clone_vm(&vm, &folder, &format!("bench-clone-{i}")).await })
    })
    .await?;
    (figures.clones, figures.clone) = (n, per(cpu, n));

    figures.rss_end = rss(pid)?;
    child.kill().await.ok();
    if server == Server::Infrasim && args.kept {
        eprintln!("  killed; starting again on its data directory");
        let started = Instant::now();
        let mut child = server.command(args, setup, vms)?.spawn()?;
        let pid = child.id().context("the server exited at once")?;
        wait_for_service(&connector, addr, &mut child).await?;
        figures.restart = Some((started.elapsed(), rss(pid)?));
        child.kill().await.ok();
    }
    Ok(figures)
}

fn per(cpu: Duration, n: usize) -> Duration {
    cpu.checked_div(n.max(1) as u32).unwrap_or_default()
}

/// One unit of client work on a session: the session and a sequence number unique in the run.
type Work<'a> = futures::future::BoxFuture<'a, anyhow::Result<()>>;

/// Runs `work` on every session concurrently for `window`; the operations done and the
/// server CPU they took.
async fn load<F>(
    pid: u32,
    sessions: &mut [Session],
    window: Duration,
    work: F,
) -> anyhow::Result<(usize, Duration)>
where
    F: for<'a> Fn(&'a mut Session, usize) -> Work<'a> + Sync,
{
    let before = cpu_time(pid)?;
    let deadline = Instant::now() + window;
    let count = std::sync::atomic::AtomicUsize::new(0);
    let runs = sessions.iter_mut().map(|s| {
        let (work, count) = (&work, &count);
        async move {
            while Instant::now() < deadline {
                let i = count.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                work(s, i).await?;
            }
            anyhow::Ok(())
        }
    });
    futures::future::try_join_all(runs).await?;
    let cpu = cpu_time(pid)?.saturating_sub(before);
    Ok((count.into_inner(), cpu))
}

fn print_table(ours: &Figures, theirs: &Figures) {
    println!(
        "\n{} VMs (infrasim) / {} VMs (govmomi)",
        ours.vms, theirs.vms
    );
    println!(
        "{:<44} {:>14} {:>14} {:>10}",
        "measure", "infrasim", "govmomi", "govmomi/us"
    );
    let row = |what: &str, unit: &str, scale: f64, of: &dyn Fn(&Figures) -> f64| {
        let (a, b) = (of(ours), of(theirs));
        let ratio = b / a.max(f64::EPSILON);
        let (a, b) = (
            format!("{:.2} {unit}", a * scale),
            format!("{:.2} {unit}", b * scale),
        );
        println!("{what:<44} {a:>14} {b:>14} {ratio:>9.1}x");
    };
    let mib = 1.0 / (1024.0 * 1024.0);
    row("startup, spawn to first answer", "ms", 1e3, &|f| {
        f.startup.as_secs_f64()
    });
    row("memory after startup", "MiB", mib, &|f| f.rss_start as f64);
    row("  of which anonymous (heap, stacks)", "MiB", mib, &|f| {
        f.anon_start as f64
    });
    row(
        "memory after the retrieve and list loads",
        "MiB",
        mib,
        &|f| f.rss_loaded as f64,
    );
    row("  of which anonymous (heap, stacks)", "MiB", mib, &|f| {
        f.anon_loaded as f64
    });
    row("memory per clone", "KiB", 1.0 / 1024.0, &|f| {
        f.rss_end.saturating_sub(f.rss_loaded) as f64 / f.clones.max(1) as f64
    });
    row(
        "server CPU per CurrentTime (a call's fixed cost)",
        "us",
        1e6,
        &|f| f.current_time.as_secs_f64(),
    );
    row("server CPU per RetrievePropertiesEx", "us", 1e6, &|f| {
        f.retrieve.as_secs_f64()
    });
    row("server CPU to list every VM (view)", "ms", 1e3, &|f| {
        f.list.as_secs_f64()
    });
    row("server CPU per clone (task awaited)", "us", 1e6, &|f| {
        f.clone.as_secs_f64()
    });
    row("server CPU per VM power change, waiters", "ms", 1e3, &|f| {
        f.updates.cpu_per_change.as_secs_f64()
    });
    row("  update delivery latency p50", "ms", 1e3, &|f| {
        f.updates.p50.as_secs_f64()
    });
    row("  update delivery latency p99", "ms", 1e3, &|f| {
        f.updates.p99.as_secs_f64()
    });
    if let Some((took, memory)) = ours.restart {
        println!(
            "infrasim kept (--data-dir): restart after SIGKILL, first answer {:.1} ms, memory {:.2} MiB (govmomi's simulator keeps nothing)",
            took.as_secs_f64() * 1e3,
            memory as f64 * mib
        );
    }
    println!(
        "power changes: infrasim {}, govmomi {}; updates to waiters not selecting the VM: infrasim {}, govmomi {}",
        ours.updates.changes, theirs.updates.changes, ours.updates.spurious, theirs.updates.spurious
    );
    println!(
        "operations: infrasim {}/{}/{}/{}, govmomi {}/{}/{}/{} (current time/retrieve/list/clone)",
        ours.current_times,
        ours.retrieves,
        ours.lists,
        ours.clones,
        theirs.current_times,
        theirs.retrieves,
        theirs.lists,
        theirs.clones
    );
}
