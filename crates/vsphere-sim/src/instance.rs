//! Running simulators: any number in one process, each with its own inventory, sessions,
//! port, certificate and credentials. An [`Instance`] is one of them serving HTTPS; stopping
//! it closes its port and its connections, and its state goes with the last reference, while
//! the others go on untouched. The vcsim controller runs one per `VCenterSimulator`.
//!
//! ```no_run
//! # async fn demo() -> Result<(), infrasim_vsphere_sim::server::ServerError> {
//! use infrasim_vsphere_sim::{Instance, SimConfig};
//! let clock = infrasim_clock::SystemClock::shared();
//! let a = Instance::start(SimConfig::default(), "127.0.0.1:0".parse().unwrap(), clock.clone()).await?;
//! let b = Instance::start(SimConfig::default(), "127.0.0.1:0".parse().unwrap(), clock).await?;
//! println!("GOVC_URL={} GOVC_TLS_CA_CERTS=<{} bytes>", a.url(), a.cert_pem().len());
//! a.stop().await?; // b still answers
//! # drop(b); Ok(()) }
//! ```

use crate::config::SimConfig;
use crate::persist::Keeper;
use crate::server::{self, ServerCert, ServerError};
use crate::simulator::Simulator;
use futures::future::BoxFuture;
use infrasim_clock::SharedClock;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// In a kept simulator's records: the certificate it serves.
const CERTIFICATE: &str = "certificate";

#[derive(serde::Serialize, serde::Deserialize)]
struct KeptCert {
    cert: String,
    key: String,
}

/// One simulator serving HTTPS.
pub struct Instance {
    sim: Simulator,
    addr: SocketAddr,
    cert: ServerCert,
    stop: Option<oneshot::Sender<()>>,
    serving: Option<JoinHandle<Result<(), ServerError>>>,
}

impl std::fmt::Debug for Instance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Instance")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl Instance {
    /// A new simulator of `config` (its own generated inventory) serving on `listen` (port 0
    /// for any free one) with a certificate of its own for its address.
    // Boxed: callers in other crates link this state machine instead of compiling it
    // again (docs/contributing.md: "A public async function another crate awaits").
    #[inline(never)]
    pub fn start(
        config: SimConfig,
        listen: SocketAddr,
        clock: SharedClock,
    ) -> BoxFuture<'static, Result<Instance, ServerError>> {
        Box::pin(Self::start_inner(config, listen, clock))
    }

    async fn start_inner(
        config: SimConfig,
        listen: SocketAddr,
        clock: SharedClock,
    ) -> Result<Instance, ServerError> {
        Instance::start_with_cert(config, listen, clock, None).await
    }

    /// As [`Instance::start`], serving `cert` when given (see [`ServerCert::from_pem`]).
    // Boxed: callers in other crates link this state machine instead of compiling it
    // again (docs/contributing.md: "A public async function another crate awaits").
    #[inline(never)]
    pub fn start_with_cert(
        config: SimConfig,
        listen: SocketAddr,
        clock: SharedClock,
        cert: Option<ServerCert>,
    ) -> BoxFuture<'static, Result<Instance, ServerError>> {
        Box::pin(Self::start_with_cert_inner(config, listen, clock, cert))
    }

    async fn start_with_cert_inner(
        config: SimConfig,
        listen: SocketAddr,
        clock: SharedClock,
        cert: Option<ServerCert>,
    ) -> Result<Instance, ServerError> {
        Instance::serve(Simulator::new(config, clock), listen, cert).await
    }

    /// As [`Instance::start_with_cert`], for a simulator `keeper` keeps (see
    /// [`crate::persist`]): the one it holds when it holds one, else a new one of `config`.
    /// Without `cert`, the certificate it holds (the same thumbprint after a restart), else
    /// a new one it keeps from now on.
    // Boxed: callers in other crates link this state machine instead of compiling it
    // again (docs/contributing.md: "A public async function another crate awaits").
    #[inline(never)]
    pub fn start_kept(
        config: SimConfig,
        listen: SocketAddr,
        clock: SharedClock,
        cert: Option<ServerCert>,
        keeper: Keeper,
    ) -> BoxFuture<'static, Result<Instance, ServerError>> {
        Box::pin(async move {
            let cert = match (cert, keeper.record::<KeptCert>(CERTIFICATE)) {
                (Some(cert), _) => Some(cert),
                (None, Some(kept)) => Some(ServerCert::from_pem(&kept.cert, &kept.key)?),
                (None, None) => None,
            };
            // A first start writes the whole inventory: in one scope, so its writes share
            // their syncs (one by one, each would wait for a sync of its own).
            let (sim, durable) = infrasim_store::durability::scope(async {
                Simulator::kept(config, clock, keeper.clone())
            })
            .await;
            durable
                .wait()
                .await
                .map_err(|e| ServerError::Io(std::io::Error::other(e.to_string())))?;
            let sim = sim?;
            let instance = Instance::serve(sim, listen, cert).await?;
            let cert = instance.cert();
            keeper.put_record(
                CERTIFICATE,
                &KeptCert {
                    cert: cert.cert_pem.clone(),
                    key: cert.key_pem().to_string(),
                },
            );
            Ok(instance)
        })
    }

    /// Serves `sim` on `listen`, with `cert` or a new certificate for its address.
    async fn serve(
        sim: Simulator,
        listen: SocketAddr,
        cert: Option<ServerCert>,
    ) -> Result<Instance, ServerError> {
        let listener = tokio::net::TcpListener::bind(listen).await?;
        let addr = listener.local_addr()?;
        let mut ips: Vec<IpAddr> = vec![
            IpAddr::V4(Ipv4Addr::LOCALHOST),
            IpAddr::V6(Ipv6Addr::LOCALHOST),
        ];
        if !addr.ip().is_unspecified() && !ips.contains(&addr.ip()) {
            ips.push(addr.ip());
        }
        let cert = match cert {
            Some(cert) => cert,
            None => ServerCert::self_signed(&["localhost"], &ips)?,
        };
        // Listening on every address, it is reached on loopback.
        let addr = if addr.ip().is_unspecified() {
            SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), addr.port())
        } else {
            addr
        };
        let (stop, stopped) = oneshot::channel::<()>();
        let serving = tokio::spawn({
            let (sim, cert) = (sim.clone(), cert.clone());
            async move {
                server::serve(sim, listener, &cert, async {
                    let _ = stopped.await;
                })
                .await
            }
        });
        Ok(Instance {
            sim,
            addr,
            cert,
            stop: Some(stop),
            serving: Some(serving),
        })
    }

    /// Where it is reached (loopback when it listens on every address).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `https://user:password@host:port/sdk`, credentials percent-encoded (what `GOVC_URL`
    /// and govmomi's `soap.ParseURL` take).
    pub fn url(&self) -> String {
        let config = self.sim.config();
        format!(
            "https://{}:{}@{}/sdk",
            userinfo(&config.username),
            userinfo(&config.password),
            self.addr
        )
    }

    /// Its serving certificate (PEM) and thumbprints.
    pub fn cert(&self) -> &ServerCert {
        &self.cert
    }

    /// Its serving certificate, PEM.
    pub fn cert_pem(&self) -> &str {
        &self.cert.cert_pem
    }

    /// The simulator itself (inventory, fault injection, REST state).
    pub fn simulator(&self) -> &Simulator {
        &self.sim
    }

    /// Stops serving: the port is closed and every connection ends before this returns.
    // Boxed: callers in other crates link this state machine instead of compiling it
    // again (docs/contributing.md: "A public async function another crate awaits").
    #[inline(never)]
    pub fn stop(self) -> BoxFuture<'static, Result<(), ServerError>> {
        Box::pin(self.stop_inner())
    }

    async fn stop_inner(mut self) -> Result<(), ServerError> {
        self.shut().await
    }

    async fn shut(&mut self) -> Result<(), ServerError> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        match self.serving.take() {
            Some(serving) => serving
                .await
                .map_err(|e| ServerError::Io(std::io::Error::other(e)))?,
            None => Ok(()),
        }
    }
}

impl Drop for Instance {
    /// Dropped without `stop`, it still stops serving (the server task is told to end).
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// Percent-encodes what a URL's userinfo may not hold.
fn userinfo(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}
