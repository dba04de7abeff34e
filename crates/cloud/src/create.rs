//! Creating a cluster, and restoring one a restart found, in steps that cannot leak half of
//! one: what a cluster takes as it is made (its name, its endpoint's port and listener, its
//! store group, its record) is held by a [`Pending`], which gives it all back if creation
//! stops before [`Pending::commit`]: a reserved endpoint goes back to its reservation, a port
//! bound here is freed, the group is dropped and the record forgotten. After the commit
//! nothing can fail. A restored cluster's group and record are never given back: they hold
//! what a restart must not lose.

use crate::homes::Home;
use crate::machines::{Runtime, RuntimeConfig};
use crate::pki::ClusterPki;
use crate::records::{ClusterRecord, EtcdKeeper, Kept, MachineRecord};
use crate::serving::ServingCertificates;
use crate::{
    etcd, sni, workloads, Cloud, CloudError, ClusterFault, ClusterInfo, ClusterShape, Running,
};
use crate::{node_names, MachineBehaviour};
use futures::future::BoxFuture;
use infrasim_etcd_sim::EtcdCluster;
use infrasim_kube_api::kubeconfig::{self, KubeconfigSpec};
use infrasim_kube_api::pki::KeyedCert;
use infrasim_kube_api::{ApiConfig, ApiServer, ServeError};
use infrasim_store::{durability, Group};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio::sync::oneshot;

/// What a cluster being created has taken so far.
pub(crate) struct Pending<'a> {
    cloud: &'a Cloud,
    /// Where the cluster's group and record go.
    home: Arc<Home>,
    name: String,
    listener: Option<TcpListener>,
    /// The listener was the cluster's reservation (it goes back there on failure).
    reserved: bool,
    group: bool,
    recorded: bool,
    committed: bool,
}

impl<'a> Pending<'a> {
    /// Claims `name` in `home`, refused if a cluster of that name exists or is being created.
    pub fn claim(cloud: &'a Cloud, name: &str, home: Arc<Home>) -> Result<Self, CloudError> {
        let taken = cloud.lock_clusters().contains_key(name)
            || !cloud.lock_creating().insert(name.to_string());
        if taken {
            return Err(CloudError::Exists(name.to_string()));
        }
        Ok(Pending {
            cloud,
            home,
            name: name.to_string(),
            listener: None,
            reserved: false,
            group: false,
            recorded: false,
            committed: false,
        })
    }

    /// The cluster's endpoint: its reservation if it has one, else the lowest free port.
    pub async fn endpoint(&mut self) -> Result<SocketAddr, CloudError> {
        let reserved = self.cloud.lock_reserved().remove(&self.name);
        let listener = match reserved {
            Some(l) => {
                self.reserved = true;
                l
            }
            None => self.cloud.bind().await?,
        };
        let addr = listener.local_addr().map_err(ServeError::from);
        self.listener = Some(listener);
        Ok(addr?)
    }

    /// The cluster's store group.
    pub fn group(&mut self) -> Result<Arc<Group>, CloudError> {
        let group = self.home.store.create_group(&group_name(&self.name))?;
        self.group = true;
        Ok(group)
    }

    /// A listener bound for the cluster here (freed on failure).
    pub fn adopt_listener(&mut self, listener: TcpListener) {
        self.listener = Some(listener);
    }

    /// Keeps the cluster's record.
    pub fn keep(&mut self, record: &ClusterRecord) -> Result<(), CloudError> {
        self.recorded = true;
        Ok(self.home.records.put_cluster(record)?)
    }

    /// The endpoint's listener, for the runtime that serves it: taken only once nothing
    /// else can fail.
    fn take_listener(&mut self) -> Result<TcpListener, CloudError> {
        self.listener
            .take()
            .ok_or_else(|| CloudError::Serve(ServeError::Tls("the endpoint was lost".into())))
    }

    /// Registers the running cluster: from here on it is the cloud's to delete.
    pub fn commit(mut self, running: Running) {
        self.cloud.lock_creating().remove(&self.name);
        self.cloud
            .lock_clusters()
            .insert(self.name.clone(), running);
        self.committed = true;
    }
}

impl Drop for Pending<'_> {
    fn drop(&mut self) {
        if self.committed {
            return;
        }
        self.cloud.lock_creating().remove(&self.name);
        if let Some(listener) = self.listener.take() {
            if self.reserved {
                self.cloud
                    .lock_reserved()
                    .insert(self.name.clone(), listener);
            } else if let Ok(addr) = listener.local_addr() {
                self.cloud.free_port(addr.port());
            }
        }
        if self.group {
            let _ = self.home.store.drop_group(&group_name(&self.name));
        }
        if self.recorded {
            self.home.records.delete_cluster(&self.name);
        }
    }
}

pub(crate) fn group_name(cluster: &str) -> String {
    format!("cluster/{cluster}")
}

/// The API server's serving certificate and the admin's client certificate.
struct Certificates {
    serving: KeyedCert,
    admin: KeyedCert,
    /// The serving certificate's names, for the certificates re-issued from it.
    dns: Vec<String>,
    ips: Vec<IpAddr>,
}

impl Certificates {
    /// The serving certificate carries the SANs kubeadm gives an API server.
    fn new(pki: &ClusterPki, shape: &ClusterShape, advertise: IpAddr) -> Result<Self, CloudError> {
        let dns: Vec<String> = [
            "localhost".to_string(),
            sni::server_name(&shape.name),
            "kubernetes".into(),
            "kubernetes.default".into(),
            "kubernetes.default.svc".into(),
            "kubernetes.default.svc.cluster.local".into(),
        ]
        .into_iter()
        .chain(
            node_names(shape)
                .into_iter()
                .filter(|(_, cp)| *cp)
                .map(|(n, _)| n),
        )
        .collect();
        let ips = vec![advertise, IpAddr::V4(Ipv4Addr::new(10, 96, 0, 1))];
        Ok(Certificates {
            serving: pki.ca.serving_cert("kube-apiserver", &dns, &ips)?,
            admin: pki
                .ca
                .client_cert("kubernetes-admin", &["system:masters"])?,
            dns,
            ips,
        })
    }
}

/// A cluster's parts, before it runs: what creating a cluster and restoring one share.
struct Parts {
    shape: ClusterShape,
    pki: ClusterPki,
    certs: Certificates,
    endpoint: SocketAddr,
    group: Arc<Group>,
    etcd: EtcdCluster,
    record: ClusterRecord,
}

impl Cloud {
    /// Creates, bootstraps and serves a cluster. With a zero `startup` it is up at once;
    /// otherwise it comes up phase by phase on the cloud's clock, and its endpoint opens with
    /// the API server phase. Answers once what was made is durable.
    // Boxed: callers in other crates link this state machine instead of compiling it
    // again (docs/contributing.md: "A public async function another crate awaits").
    #[inline(never)]
    pub fn create_cluster<'a>(
        &'a self,
        shape: ClusterShape,
    ) -> BoxFuture<'a, Result<ClusterInfo, CloudError>> {
        Box::pin(self.create_cluster_inner(shape))
    }

    async fn create_cluster_inner(&self, shape: ClusterShape) -> Result<ClusterInfo, CloudError> {
        crate::durably(self.create(shape)).await
    }

    async fn create(&self, shape: ClusterShape) -> Result<ClusterInfo, CloudError> {
        // Everything that can fail without side effects first: the PKI and certificates.
        let pki = ClusterPki::new(&shape.pki)?;
        let certs = Certificates::new(&pki, &shape, self.config.advertise)?;
        let home = self.home_for(&shape.name)?;
        let mut pending = Pending::claim(self, &shape.name, home)?;
        let endpoint = pending.endpoint().await?;
        let group = pending.group()?;
        // Never reused: a cluster's node addresses must not repeat another's, even one
        // deleted before it was created.
        let index = self.next_index.fetch_add(1, Ordering::Relaxed);
        let record = ClusterRecord::new(&shape, &pki, endpoint.port(), index);
        pending.keep(&record)?;
        let parts = Parts {
            etcd: EtcdCluster::new(self.clock.clone()),
            shape,
            pki,
            certs,
            endpoint,
            group,
            record,
        };
        let (runtime, info, running) = self.assemble(&mut pending, parts, Vec::new())?;
        pending.commit(running);
        // Control planes first (the first initializes the cluster), then workers.
        let behaviour = MachineBehaviour::uniform(runtime.shape.startup, runtime.shape.jitter);
        for (name, control_plane) in node_names(&runtime.shape) {
            runtime.add_machine(&name, control_plane, behaviour).await?;
        }
        Ok(info)
    }

    /// Brings back every cluster `home`'s records keep, oldest first; drops the groups of
    /// clusters that were never recorded (a crash while one was being created). Answers how
    /// many came back.
    pub(crate) async fn restore_home(&self, home: &Arc<Home>) -> Result<usize, CloudError> {
        let kept = home.records.read();
        for name in home.store.group_names() {
            let Some(cluster) = name.strip_prefix("cluster/") else {
                continue;
            };
            if !kept.iter().any(|k| k.cluster.name == cluster) {
                tracing::warn!(cluster, "dropping a cluster's objects that no record accounts for (its creation never finished)");
                let _ = home.store.drop_group(&name);
            }
        }
        let count = kept.len();
        for k in kept {
            let cluster = k.cluster.name.clone();
            let index = k.cluster.index;
            self.restore(k, home)
                .await
                .map_err(|e| CloudError::Restore {
                    cluster,
                    source: Box::new(e),
                })?;
            self.next_index.fetch_max(index + 1, Ordering::Relaxed);
        }
        Ok(count)
    }

    async fn restore(&self, mut kept: Kept, home: &Arc<Home>) -> Result<(), CloudError> {
        let shape = kept.cluster.shape();
        let pki = ClusterPki::new(&shape.pki)?;
        let certs = Certificates::new(&pki, &shape, self.config.advertise)?;
        let mut pending = Pending::claim(self, &shape.name, home.clone())?;
        let listener = match self.bind_port(kept.cluster.port).await {
            Ok(listener) => listener,
            // A shard's home taken over from a process on another range or machine: the
            // cluster answers on a port of this one, and the record says so from now on
            // (Cluster API's objects follow: see the in-memory provider's endpoint move).
            Err(CloudError::PortTaken(_)) if home.name.is_some() => self.bind().await?,
            Err(e) => return Err(e),
        };
        let endpoint = listener.local_addr().map_err(ServeError::from)?;
        pending.adopt_listener(listener);
        if endpoint.port() != kept.cluster.port {
            // Kept straight, not through `pending`: a restored cluster's record is never
            // given back, even if what follows fails.
            kept.cluster.port = endpoint.port();
            home.records.put_cluster(&kept.cluster)?;
        }
        let group = home.store.group_or_create(&group_name(&shape.name));
        let etcd = match kept.etcd {
            Some(image) => EtcdCluster::restore(self.clock.clone(), image.into(), kept.keys),
            None => EtcdCluster::new(self.clock.clone()),
        };
        let parts = Parts {
            shape,
            pki,
            certs,
            endpoint,
            group,
            etcd,
            record: kept.cluster,
        };
        let (runtime, _, running) = self.assemble(&mut pending, parts, kept.machines)?;
        pending.commit(running);
        crate::durably(async {
            runtime.resume().await;
            Ok(())
        })
        .await
    }

    /// The cluster's API server, etcd and runtime over its parts, and its workload
    /// controllers started; a restored cluster's runtime has its `machines`. The endpoint's
    /// listener is taken from `pending` only once nothing else can fail, so a failure before
    /// leaves it to `pending` to give back.
    fn assemble(
        &self,
        pending: &mut Pending<'_>,
        parts: Parts,
        machines: Vec<MachineRecord>,
    ) -> Result<(Arc<Runtime>, ClusterInfo, Running), CloudError> {
        let faults = self.faults(&parts.shape.name);
        let (server, tls, serving) = self.api_server(pending, &parts, &faults)?;
        let listener = pending.take_listener()?;
        // Nothing fails from here on.
        let Parts {
            shape,
            pki,
            certs,
            endpoint,
            group,
            etcd,
            record,
        } = parts;
        server.set_port_forwarder(crate::portforward::forwarder(crate::portforward::Targets {
            group: group.clone(),
            etcd: etcd.clone(),
            etcd_ca: pki.etcd_ca.clone(),
            server: server.downgrade(),
            serving: serving.clone(),
        }));
        let config = RuntimeConfig {
            shape: shape.clone(),
            router: self.router.clone(),
            cluster_index: record.index,
            group: group.clone(),
            clock: self.clock.clone(),
            server,
            tls,
            listener,
            endpoint,
            ca_pem: pki.ca.cert_pem.clone(),
            etcd,
            serving,
            records: pending.home.records.clone(),
            record,
            faults: crate::faults::InForce::new(self.faults.clone(), &shape.name),
        };
        let runtime = if machines.is_empty() {
            Runtime::new(config)
        } else {
            Runtime::restored(config, machines)
        };
        if faults.endpoint_down {
            runtime.set_endpoint_down(true);
        }
        for alarm in &faults.etcd_alarms {
            runtime
                .etcd
                .set_alarm(alarm.member.as_deref(), alarm.alarm, true);
        }
        let nodes = shape.control_planes + shape.workers;
        let info = self.cluster_info(&shape.name, nodes, endpoint, &pki, &certs.admin);
        let (kubelets, stop_workloads) = self.start_workloads(&runtime, &shape, &pki, &faults);
        let running = Running {
            info: info.clone(),
            pki,
            admin: certs.admin,
            runtime: runtime.clone(),
            home: pending.home.clone(),
            kubelets,
            _stop_workloads: stop_workloads,
        };
        Ok((runtime, info, running))
    }

    /// The cluster's API server over its parts, with the cluster's `faults` applied to it and
    /// its etcd, etcd as its sidecar, its TLS configuration and its serving certificates.
    fn api_server(
        &self,
        pending: &Pending<'_>,
        parts: &Parts,
        faults: &ClusterFault,
    ) -> Result<
        (
            ApiServer,
            Arc<rustls::ServerConfig>,
            Arc<ServingCertificates>,
        ),
        CloudError,
    > {
        let Parts {
            shape,
            pki,
            certs,
            group,
            etcd,
            ..
        } = parts;
        let server = ApiServer::new(
            group.clone(),
            pki.ca.clone(),
            self.clock.clone(),
            ApiConfig {
                kubernetes_version: shape.kubernetes_version.clone(),
                metrics: (self.config.metrics.as_ref()).map(|m| m.for_workload(&shape.name)),
                resource_metrics: true,
                ..ApiConfig::default()
            },
        );
        server.set_service_account_key(&pki.service_account)?;
        for member in &faults.etcd_members_down {
            etcd.set_member_down(member, true);
        }
        server.faults().set(faults.server_fault(etcd.has_quorum()));
        etcd.keep_with(Arc::new(EtcdKeeper {
            records: pending.home.records.clone(),
            cluster: shape.name.clone(),
        }));
        server.set_sidecar(etcd::sidecar(etcd, &pki.etcd_ca.cert_pem))?;
        let tls = server.tls_config(&certs.serving)?;
        let serving = Arc::new(ServingCertificates::new(
            pki.ca.clone(),
            certs.dns.clone(),
            certs.ips.clone(),
            &certs.serving,
            tls.clone(),
        )?);
        serving.set_expiring(faults.expiring_certificates.clone());
        Ok((server, tls, serving))
    }

    /// kube-controller-manager, kube-scheduler and the kubelets, for this cluster: the
    /// kubelets' switch (silent ones as `faults` says) and the sender that stops them when
    /// dropped. Their writes are nobody's request: they go on without waiting for each sync.
    fn start_workloads(
        &self,
        runtime: &Runtime,
        shape: &ClusterShape,
        pki: &ClusterPki,
        faults: &ClusterFault,
    ) -> (workloads::KubeletSwitch, oneshot::Sender<()>) {
        let (stop_workloads, workloads_stopped) = oneshot::channel::<()>();
        let kubelets = workloads::KubeletSwitch::default();
        kubelets.set(faults.silent_kubelets());
        tokio::spawn(durability::detached(workloads::run(
            crate::components::controller_manager(&runtime.server),
            self.clock.clone(),
            shape.workloads.clone(),
            pki.ca.clone(),
            kubelets.clone(),
            workloads_stopped,
        )));
        (kubelets, stop_workloads)
    }

    /// How users reach a cluster: its endpoint and admin kubeconfigs.
    pub(crate) fn cluster_info(
        &self,
        name: &str,
        nodes: usize,
        endpoint: SocketAddr,
        pki: &ClusterPki,
        admin: &KeyedCert,
    ) -> ClusterInfo {
        let render = |server: &str, tls_server_name: Option<&str>| {
            kubeconfig::render(&KubeconfigSpec {
                cluster_name: name,
                user_name: &format!("{name}-admin"),
                server,
                ca_pem: &pki.ca.cert_pem,
                client_cert_pem: &admin.cert_pem,
                client_key_pem: &admin.key_pem,
                tls_server_name,
            })
        };
        let shared = *self.shared.lock().unwrap_or_else(|p| p.into_inner());
        let sni_name = sni::server_name(name);
        ClusterInfo {
            name: name.to_string(),
            endpoint,
            kubeconfig: render(&format!("https://{endpoint}"), None),
            shared_kubeconfig: shared
                .map(|addr| render(&format!("https://{addr}"), Some(&sni_name))),
            nodes,
        }
    }
}
