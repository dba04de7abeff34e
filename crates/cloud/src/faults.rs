//! The faults put on workload clusters on demand, kept per cluster and per source (the Fault
//! object that asked for them), apart from the running clusters: a cluster created or
//! brought back from its record while a fault names it starts with the fault in force.
//!
//! Each source says everything it wants on a cluster at once ([`ClusterFault`]); what a
//! cluster gets is all its sources together ([`ClusterFault::combine`]), so two Faults on one
//! cluster add up and deleting one leaves the other's in force.

use crate::EtcdAlarm;
use chrono::{DateTime, Utc};
use infrasim_etcd_sim::pb::etcdserverpb::AlarmType;
use infrasim_kube_api::faults::{RequestFault, StorageAlarm};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// What one source puts on one cluster. The default is no fault at all.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ClusterFault {
    /// Latency and errors on its API server's requests.
    pub requests: Option<RequestFault>,
    /// The nodes whose kubelets are stopped.
    pub stopped_kubelets: BTreeSet<String>,
    /// The etcd members (by name: a control-plane machine's) whose etcd is down.
    pub etcd_members_down: BTreeSet<String>,
    /// The nodes whose Node objects are deleted (their kubelets silent with them, so
    /// nothing registers them again until the fault ends).
    pub deleted_nodes: BTreeSet<String>,
    /// The alarms raised in its etcd.
    pub etcd_alarms: BTreeSet<EtcdAlarm>,
    /// Its endpoint refuses connections.
    pub endpoint_down: bool,
    /// How the machines that start booting while the fault is in force boot.
    pub boot: Option<BootFault>,
    /// The control-plane nodes whose API server's serving certificate is re-issued to expire
    /// at a time (`""`: every control-plane node's).
    pub expiring_certificates: BTreeMap<String, DateTime<Utc>>,
}

/// How a machine boots under a fault: its VM is made, but its operating system does not come
/// up, or comes up late, so its Node registers late or never (as a machine stuck in
/// `Provisioned` in Cluster API).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum BootFault {
    /// Its Node registers this much later than it would.
    Late(Duration),
    /// Its Node never registers.
    Never,
}

impl ClusterFault {
    pub fn is_empty(&self) -> bool {
        self == &ClusterFault::default()
    }

    /// The nodes whose kubelets do nothing: those stopped, and those whose Node is deleted.
    pub fn silent_kubelets(&self) -> BTreeSet<String> {
        self.stopped_kubelets
            .union(&self.deleted_nodes)
            .cloned()
            .collect()
    }

    /// What the cluster's API server does to its requests: the requests' fault, and the
    /// worst alarm raised in its etcd as its storage meets it (an alarm on any member is
    /// the cluster's: etcd refuses writes while any member reports NOSPACE), or its etcd's
    /// lost quorum (`quorum` false).
    pub fn server_fault(&self, quorum: bool) -> Option<RequestFault> {
        let lost = (!quorum).then_some(StorageAlarm::NoQuorum);
        let storage = (self.etcd_alarms.iter())
            .filter_map(|a| match a.alarm {
                AlarmType::Nospace => Some(StorageAlarm::NoSpace),
                AlarmType::Corrupt => Some(StorageAlarm::Corrupt),
                AlarmType::None => None,
            })
            .chain(lost)
            .max();
        if self.requests.is_none() && storage.is_none() {
            return None;
        }
        Some(RequestFault {
            storage,
            ..self.requests.clone().unwrap_or_default()
        })
    }

    /// All of `faults` together: their latencies added, the largest error fraction (with
    /// its code), every stopped kubelet and alarm, the endpoint down if any holds it, and
    /// the worst boot (never over late, the latest of the lates), and each certificate's
    /// soonest expiry.
    pub fn combine<'a>(faults: impl IntoIterator<Item = &'a ClusterFault>) -> ClusterFault {
        let mut all = ClusterFault::default();
        let mut latency = Duration::ZERO;
        let mut errors: Option<&RequestFault> = None;
        let mut any_requests = false;
        for f in faults {
            if let Some(r) = &f.requests {
                any_requests = true;
                latency += r.latency;
                let worse = errors.is_none_or(|e| r.error_fraction > e.error_fraction);
                if r.error_fraction > 0.0 && worse {
                    errors = Some(r);
                }
            }
            all.stopped_kubelets
                .extend(f.stopped_kubelets.iter().cloned());
            all.deleted_nodes.extend(f.deleted_nodes.iter().cloned());
            all.etcd_members_down
                .extend(f.etcd_members_down.iter().cloned());
            all.etcd_alarms.extend(f.etcd_alarms.iter().cloned());
            all.endpoint_down |= f.endpoint_down;
            all.boot = all.boot.max(f.boot);
            for (node, until) in &f.expiring_certificates {
                let soonest = all
                    .expiring_certificates
                    .entry(node.clone())
                    .or_insert(*until);
                *soonest = (*soonest).min(*until);
            }
        }
        if any_requests {
            all.requests = Some(RequestFault {
                latency,
                ..errors.cloned().unwrap_or_default()
            });
        }
        all
    }
}

/// The faults of every cluster, by cluster name and source.
#[derive(Debug, Default)]
pub(crate) struct FaultBook {
    clusters: HashMap<String, BTreeMap<String, ClusterFault>>,
}

impl FaultBook {
    /// Records what `source` puts on `cluster` (an empty fault clears it), and answers what
    /// the cluster had before and has now, all sources together.
    pub fn set(
        &mut self,
        cluster: &str,
        source: &str,
        fault: ClusterFault,
    ) -> (ClusterFault, ClusterFault) {
        let before = self.of(cluster);
        let sources = self.clusters.entry(cluster.to_string()).or_default();
        match fault.is_empty() {
            true => sources.remove(source),
            false => sources.insert(source.to_string(), fault),
        };
        if sources.is_empty() {
            self.clusters.remove(cluster);
        }
        (before, self.of(cluster))
    }

    /// What is in force on `cluster`, all sources together.
    pub fn of(&self, cluster: &str) -> ClusterFault {
        self.clusters
            .get(cluster)
            .map(|sources| ClusterFault::combine(sources.values()))
            .unwrap_or_default()
    }
}

/// What is in force on one cluster, read when a part of it comes up after a fault met the
/// cluster: an etcd member that joins, a node that registers. A fault names them before they
/// exist (a Fault made while the machine boots), and a real one would meet them as they start.
#[derive(Debug, Clone)]
pub(crate) struct InForce {
    book: Arc<Mutex<FaultBook>>,
    cluster: String,
}

impl InForce {
    pub fn new(book: Arc<Mutex<FaultBook>>, cluster: &str) -> Self {
        InForce {
            book,
            cluster: cluster.to_string(),
        }
    }

    /// The cluster's faults now, all sources together.
    pub fn now(&self) -> ClusterFault {
        open(&self.book).of(&self.cluster)
    }
}

/// The book, to read or write. A panic while it was open left it as whole as any write
/// does (each is one map operation).
pub(crate) fn open(book: &Mutex<FaultBook>) -> MutexGuard<'_, FaultBook> {
    book.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn requests(latency_ms: u64, fraction: f64, code: u16) -> ClusterFault {
        ClusterFault {
            requests: Some(RequestFault {
                latency: Duration::from_millis(latency_ms),
                error_fraction: fraction,
                error_code: code,
                ..RequestFault::default()
            }),
            ..ClusterFault::default()
        }
    }

    #[test]
    fn sources_add_up_and_clearing_one_leaves_the_others() {
        let mut book = FaultBook::default();
        book.set("c", "ns/slow", requests(200, 0.0, 500));
        let (_, now) = book.set("c", "ns/errors", requests(50, 0.5, 429));
        let r = now.requests.expect("requests in force");
        assert_eq!(r.latency, Duration::from_millis(250));
        assert_eq!((r.error_fraction, r.error_code), (0.5, 429));
        let (before, now) = book.set("c", "ns/errors", ClusterFault::default());
        assert_eq!(before.requests.map(|r| r.error_code), Some(429));
        let r = now.requests.expect("the slow source is still in force");
        assert_eq!(
            (r.latency, r.error_fraction),
            (Duration::from_millis(200), 0.0)
        );
        book.set("c", "ns/slow", ClusterFault::default());
        assert!(book.of("c").is_empty());
        assert_eq!(book.of("c").server_fault(true), None);
        let lost = book.of("c").server_fault(false).and_then(|f| f.storage);
        assert_eq!(lost, Some(StorageAlarm::NoQuorum));
        assert!(
            book.clusters.is_empty(),
            "nothing kept for a cluster without faults"
        );
    }

    #[test]
    fn kubelets_alarms_and_endpoints_are_unions() {
        let mut book = FaultBook::default();
        let alarm = EtcdAlarm {
            member: None,
            alarm: AlarmType::Nospace,
        };
        book.set(
            "c",
            "a",
            ClusterFault {
                stopped_kubelets: BTreeSet::from(["n1".to_string()]),
                etcd_alarms: BTreeSet::from([alarm.clone()]),
                ..ClusterFault::default()
            },
        );
        let (_, now) = book.set(
            "c",
            "b",
            ClusterFault {
                stopped_kubelets: BTreeSet::from(["n2".to_string()]),
                endpoint_down: true,
                ..ClusterFault::default()
            },
        );
        assert_eq!(now.stopped_kubelets.len(), 2);
        assert_eq!(now.etcd_alarms, BTreeSet::from([alarm]));
        assert!(now.endpoint_down);
        assert!(now.requests.is_none());
        let server = now
            .server_fault(true)
            .expect("the alarm reaches the API server");
        assert_eq!(server.storage, Some(StorageAlarm::NoSpace));
        assert_eq!(server.error_fraction, 0.0);
        assert!(book.of("other").is_empty());
    }

    #[test]
    fn never_booting_outweighs_booting_late_and_the_latest_late_wins() {
        let boot = |b| ClusterFault {
            boot: Some(b),
            ..ClusterFault::default()
        };
        let late = |s| boot(BootFault::Late(Duration::from_secs(s)));
        let worst = |fs: &[ClusterFault]| ClusterFault::combine(fs).boot;
        assert_eq!(
            worst(&[late(5), late(30)]),
            Some(BootFault::Late(Duration::from_secs(30)))
        );
        assert_eq!(
            worst(&[late(30), boot(BootFault::Never)]),
            Some(BootFault::Never)
        );
        assert_eq!(worst(&[]), None);
    }

    #[test]
    fn the_soonest_expiry_of_a_certificate_wins() {
        let at = |s| DateTime::from_timestamp(s, 0).expect("a time");
        let expiring = |node: &str, s| ClusterFault {
            expiring_certificates: BTreeMap::from([(node.to_string(), at(s))]),
            ..ClusterFault::default()
        };
        let all = ClusterFault::combine(&[
            expiring("cp-1", 2_000),
            expiring("cp-1", 1_000),
            expiring("", 3_000),
        ]);
        assert_eq!(
            all.expiring_certificates,
            BTreeMap::from([("cp-1".to_string(), at(1_000)), (String::new(), at(3_000))])
        );
    }
}
