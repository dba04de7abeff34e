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
use bytes::Bytes;
use clap::Args;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use infrasim_kube_api::pki::CertificateAuthority;
use rustls::pki_types::{pem::PemObject, ServerName};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::net::TcpStream;

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
    /// Power changes of one VM made while they wait.
    #[arg(long, default_value_t = 10)]
    changes: usize,
    /// The infrasim binary measured (default: this one), to compare two builds' servers with
    /// one load generator.
    #[arg(long)]
    infrasim: Option<PathBuf>,
    /// The loopback port the servers listen on (one at a time).
    #[arg(long, default_value_t = 18989)]
    port: u16,
}

const USER: &str = "administrator@vsphere.local";
const PASSWORD: &str = "bench-password";

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
async fn build_baseline() -> anyhow::Result<PathBuf> {
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
    figures.updates =
        crate::vsphere_updates::measure(pid, waiting, &mut sessions[0], &vm_list, args.changes)
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

/// User + system CPU of every thread of a process, from `/proc/<pid>/stat`.
pub(crate) fn cpu_time(pid: u32) -> anyhow::Result<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // Fields after the command name (which may hold spaces) start at field 3.
    let after = stat
        .rsplit_once(')')
        .context("/proc stat without a command")?
        .1;
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks: u64 = fields.get(11).context("utime")?.parse::<u64>()?
        + fields.get(12).context("stime")?.parse::<u64>()?;
    // The kernel reports in USER_HZ, 100 on every Linux this runs on.
    Ok(Duration::from_millis(ticks * 10))
}

/// Resident memory of a process in bytes.
pub(crate) fn rss(pid: u32) -> anyhow::Result<u64> {
    memory_status(pid, "VmRSS")
}

/// Resident anonymous memory of a process in bytes (heap, stacks; not file-backed pages).
fn anonymous_memory(pid: u32) -> anyhow::Result<u64> {
    memory_status(pid, "RssAnon")
}

/// One `kB` field of `/proc/<pid>/status`, in bytes.
fn memory_status(pid: u32, field: &str) -> anyhow::Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let kb = status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .with_context(|| format!("{field} in /proc/{pid}/status"))?;
    Ok(kb * 1024)
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

/// The managed objects a session needs from the service content.
#[derive(Debug, Clone)]
pub(crate) struct Content {
    pub(crate) search_index: String,
    session_manager: String,
    pub(crate) property_collector: String,
    pub(crate) view_manager: String,
    pub(crate) root_folder: String,
}

impl Content {
    /// RetrieveServiceContent's references.
    pub(crate) async fn read(conn: &mut Conn) -> anyhow::Result<Content> {
        let body = conn.call(RETRIEVE_CONTENT).await?;
        Ok(Content {
            search_index: text_of(&body, "searchIndex")?,
            session_manager: text_of(&body, "sessionManager")?,
            property_collector: text_of(&body, "propertyCollector")?,
            view_manager: text_of(&body, "viewManager")?,
            root_folder: text_of(&body, "rootFolder")?,
        })
    }
}

/// Polls until the server answers RetrieveServiceContent (or exits).
async fn wait_for_service(
    connector: &tokio_rustls::TlsConnector,
    addr: SocketAddr,
    child: &mut tokio::process::Child,
) -> anyhow::Result<Content> {
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        if let Some(status) = child.try_wait()? {
            anyhow::bail!("the server exited while starting: {status}");
        }
        let answer = match Conn::open(connector, addr).await {
            Ok(mut conn) => Content::read(&mut conn).await,
            Err(e) => Err(e),
        };
        match answer {
            Ok(content) => return Ok(content),
            Err(e) if Instant::now() > deadline => {
                return Err(e.context("the server did not answer in 10 minutes"))
            }
            Err(_) => {}
        }
        // Often enough that the poll adds little to a start of a few milliseconds; tokio's
        // timer counts whole milliseconds, so this blocks its worker for the short wait.
        std::thread::sleep(Duration::from_micros(250));
    }
}

const CURRENT_TIME: &str = r#"<CurrentTime xmlns="urn:vim25"><_this type="ServiceInstance">ServiceInstance</_this></CurrentTime>"#;

const RETRIEVE_CONTENT: &str = r#"<RetrieveServiceContent xmlns="urn:vim25"><_this type="ServiceInstance">ServiceInstance</_this></RetrieveServiceContent>"#;

/// One HTTP/1.1 keep-alive connection with a session cookie.
pub(crate) struct Conn {
    send: hyper::client::conn::http1::SendRequest<Full<Bytes>>,
    cookie: Option<String>,
}

impl Conn {
    pub(crate) async fn open(
        connector: &tokio_rustls::TlsConnector,
        addr: SocketAddr,
    ) -> anyhow::Result<Conn> {
        let tcp = TcpStream::connect(addr).await?;
        tcp.set_nodelay(true)?;
        let tls = connector
            .connect(ServerName::try_from("localhost")?.to_owned(), tcp)
            .await?;
        let (send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls)).await?;
        tokio::spawn(conn);
        Ok(Conn { send, cookie: None })
    }

    /// Posts one SOAP body; the answer's XML, or the fault as an error.
    pub(crate) async fn call(&mut self, body: &str) -> anyhow::Result<String> {
        let envelope = format!(
            r#"<?xml version="1.0" encoding="UTF-8"?><soapenv:Envelope xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/" xmlns:xsd="http://www.w3.org/2001/XMLSchema" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"><soapenv:Body>{body}</soapenv:Body></soapenv:Envelope>"#
        );
        let mut req = http::Request::post("/sdk")
            .header(http::header::HOST, "localhost")
            .header(http::header::CONTENT_TYPE, "text/xml; charset=utf-8")
            .header("SOAPAction", "\"urn:vim25/7.0.3.0\"");
        if let Some(c) = &self.cookie {
            req = req.header(http::header::COOKIE, c.as_str());
        }
        self.send.ready().await.context("the connection closed")?;
        let resp = self
            .send
            .send_request(req.body(Full::new(Bytes::from(envelope)))?)
            .await?;
        if let Some(set) = resp.headers().get(http::header::SET_COOKIE) {
            let set = set.to_str()?;
            self.cookie = Some(set.split(';').next().unwrap_or(set).to_string());
        }
        let status = resp.status();
        let text = String::from_utf8(resp.into_body().collect().await?.to_bytes().to_vec())?;
        if !status.is_success() || text.contains("<faultstring>") {
            let fault =
                text_of(&text, "faultstring").unwrap_or_else(|_| text.chars().take(300).collect());
            anyhow::bail!("SOAP fault ({status}): {fault}");
        }
        Ok(text)
    }
}

/// A logged-in client of one server.
pub(crate) struct Session {
    pub(crate) conn: Conn,
    pub(crate) content: Content,
}

impl Session {
    async fn login(
        connector: &tokio_rustls::TlsConnector,
        addr: SocketAddr,
        content: &Content,
    ) -> anyhow::Result<Session> {
        Session::login_as(connector, addr, content, USER, PASSWORD).await
    }

    /// Logs in as `user` (the password is XML-escaped as a client would).
    pub(crate) async fn login_as(
        connector: &tokio_rustls::TlsConnector,
        addr: SocketAddr,
        content: &Content,
        user: &str,
        password: &str,
    ) -> anyhow::Result<Session> {
        let mut conn = Conn::open(connector, addr).await?;
        let escape = |s: &str| {
            s.replace('&', "&amp;")
                .replace('<', "&lt;")
                .replace('>', "&gt;")
        };
        conn.call(&format!(
            r#"<Login xmlns="urn:vim25"><_this type="SessionManager">{}</_this><userName>{}</userName><password>{}</password></Login>"#,
            content.session_manager,
            escape(user),
            escape(password)
        ))
        .await?;
        anyhow::ensure!(conn.cookie.is_some(), "Login set no session cookie");
        Ok(Session {
            conn,
            content: content.clone(),
        })
    }

    /// RetrievePropertiesEx of `paths` of one object.
    pub(crate) async fn retrieve(
        &mut self,
        ty: &str,
        value: &str,
        paths: &[&str],
    ) -> anyhow::Result<String> {
        let paths: String = paths
            .iter()
            .map(|p| format!("<pathSet>{p}</pathSet>"))
            .collect();
        self.conn
            .call(&format!(
                r#"<RetrievePropertiesEx xmlns="urn:vim25"><_this type="PropertyCollector">{}</_this><specSet><propSet><type>{ty}</type>{paths}</propSet><objectSet><obj type="{ty}">{value}</obj></objectSet></specSet><options/></RetrievePropertiesEx>"#,
                self.content.property_collector
            ))
            .await
    }

    async fn retrieve_vm(&mut self, vm: &str) -> anyhow::Result<()> {
        let body = self
            .retrieve(
                "VirtualMachine",
                vm,
                &["name", "runtime.powerState", "config.uuid"],
            )
            .await?;
        anyhow::ensure!(
            body.contains("powerState"),
            "RetrievePropertiesEx answered no powerState"
        );
        Ok(())
    }

    async fn parent_folder(&mut self, vm: &str) -> anyhow::Result<String> {
        let body = self.retrieve("VirtualMachine", vm, &["parent"]).await?;
        text_of(&body, "val")
    }

    /// Every VM's reference, through a container view over the root folder, with its name and
    /// power state retrieved; the view is destroyed after.
    async fn list_vms(&mut self) -> anyhow::Result<Vec<String>> {
        let c = self.content.clone();
        let view = text_of(
            &self
                .conn
                .call(&format!(
                    r#"<CreateContainerView xmlns="urn:vim25"><_this type="ViewManager">{}</_this><container type="Folder">{}</container><type>VirtualMachine</type><recursive>true</recursive></CreateContainerView>"#,
                    c.view_manager, c.root_folder
                ))
                .await?,
            "returnval",
        )?;
        let mut body = self.conn.call(&format!(
            r#"<RetrievePropertiesEx xmlns="urn:vim25"><_this type="PropertyCollector">{}</_this><specSet><propSet><type>VirtualMachine</type><pathSet>name</pathSet><pathSet>runtime.powerState</pathSet></propSet><objectSet><obj type="ContainerView">{view}</obj><skip>true</skip><selectSet xsi:type="TraversalSpec"><name>view</name><type>ContainerView</type><path>view</path><skip>false</skip></selectSet></objectSet></specSet><options/></RetrievePropertiesEx>"#,
            c.property_collector
        )).await?;
        let mut vms = Vec::new();
        loop {
            vms.extend(texts_of(&body, "obj"));
            let Ok(token) = text_of(&body, "token") else {
                break;
            };
            body = self.conn.call(&format!(
                r#"<ContinueRetrievePropertiesEx xmlns="urn:vim25"><_this type="PropertyCollector">{}</_this><token>{token}</token></ContinueRetrievePropertiesEx>"#,
                c.property_collector
            )).await?;
        }
        self.conn
            .call(&format!(r#"<DestroyView xmlns="urn:vim25"><_this type="ContainerView">{view}</_this></DestroyView>"#))
            .await?;
        Ok(vms)
    }

    /// Clones `vm` into `folder` as `name` and waits for the task as pyvmomi's `WaitForTask`
    /// does: a filter on its `info.state`, WaitForUpdatesEx until it ends, the filter
    /// destroyed.
    async fn clone_vm(&mut self, vm: &str, folder: &str, name: &str) -> anyhow::Result<()> {
        let task = text_of(
            &self
                .conn
                .call(&format!(
                    r#"<CloneVM_Task xmlns="urn:vim25"><_this type="VirtualMachine">{vm}</_this><folder type="Folder">{folder}</folder><name>{name}</name><spec><location/><template>false</template><powerOn>false</powerOn></spec></CloneVM_Task>"#
                ))
                .await?,
            "returnval",
        )?;
        let pc = self.content.property_collector.clone();
        let filter = text_of(
            &self
                .conn
                .call(&format!(
                    r#"<CreateFilter xmlns="urn:vim25"><_this type="PropertyCollector">{pc}</_this><spec><propSet><type>Task</type><pathSet>info.state</pathSet><pathSet>info.error</pathSet></propSet><objectSet><obj type="Task">{task}</obj></objectSet></spec><partialUpdates>false</partialUpdates></CreateFilter>"#
                ))
                .await?,
            "returnval",
        )?;
        let mut version = String::new();
        let outcome = loop {
            let body = self
                .conn
                .call(&format!(
                    r#"<WaitForUpdatesEx xmlns="urn:vim25"><_this type="PropertyCollector">{pc}</_this><version>{version}</version><options><maxWaitSeconds>60</maxWaitSeconds></options></WaitForUpdatesEx>"#
                ))
                .await?;
            if let Ok(v) = text_of(&body, "version") {
                version = v;
            }
            if body.contains(">success<") {
                break Ok(());
            }
            if body.contains(">error<") {
                break Err(anyhow::anyhow!("clone {name} failed"));
            }
        };
        self.conn
            .call(&format!(
                r#"<DestroyPropertyFilter xmlns="urn:vim25"><_this type="PropertyFilter">{filter}</_this></DestroyPropertyFilter>"#
            ))
            .await?;
        outcome
    }
}

/// The text of the first element named `tag` (any attributes) in `xml`.
pub(crate) fn text_of(xml: &str, tag: &str) -> anyhow::Result<String> {
    texts_of(xml, tag)
        .into_iter()
        .next()
        .with_context(|| format!("no <{tag}> in the answer"))
}

/// The texts of every element named `tag` (without a namespace prefix) in `xml`. A scan, not
/// a parser: the answers are the servers' own well-formed SOAP, and the bench only needs leaf
/// texts such as references and tokens.
fn texts_of(xml: &str, tag: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = xml;
    let open = format!("<{tag}");
    while let Some(i) = rest.find(&open) {
        rest = &rest[i + open.len()..];
        // `<tag>` or `<tag attr…>`, not `<tagOther…>`.
        if !rest.starts_with('>') && !rest.starts_with(' ') {
            continue;
        }
        let Some(start) = rest.find('>') else { break };
        let Some(end) = rest[start..].find('<') else {
            break;
        };
        out.push(rest[start + 1..start + end].to_string());
        rest = &rest[start + end..];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn texts_are_read_by_exact_tag() {
        let xml = r#"<returnval><obj type="VirtualMachine">vm-1</obj><objSet>x</objSet><obj type="VirtualMachine">vm-2</obj><token>7</token></returnval>"#;
        assert_eq!(texts_of(xml, "obj"), ["vm-1", "vm-2"]);
        assert_eq!(text_of(xml, "token").unwrap(), "7");
        assert!(text_of(xml, "missing").is_err());
    }

    #[test]
    fn cpu_time_of_this_process_is_read() {
        let pid = std::process::id();
        assert!(cpu_time(pid).is_ok());
        assert!(rss(pid).unwrap() > 0);
    }

    #[test]
    fn anonymous_memory_is_part_of_the_resident_memory() {
        let pid = std::process::id();
        let anon = anonymous_memory(pid).unwrap();
        assert!(anon > 0 && anon <= rss(pid).unwrap());
        assert!(memory_status(pid, "NoSuchField").is_err());
    }
}
