//! What the cloud keeps of its clusters so that a restart brings them back as they were: one
//! record per cluster (its shape, PKI, endpoint port and number, how far its addons came), per
//! machine (its role, number, timing and the steps it has done) and per etcd membership (the
//! member IDs, leader and term). The records live in the cloud's own store group, beside the
//! clusters' groups, so they are as durable as the store is, committed with the clusters'
//! objects in the order they were written: a step recorded done has its objects on disk.
//!
//! With the in-memory backend the records cost a few writes per machine and nothing else.

use crate::bootstrap::{Machine, MachineBehaviour, Provisioning};
use crate::pki::{CertAndKey, ClusterPki, SuppliedPki};
use crate::{ClusterShape, WorkloadConfig};
use base64::Engine;
use infrasim_etcd_sim::pb::mvccpb::KeyValue;
use infrasim_etcd_sim::{Keeper, KeysChange, KeysImage, Lease, Member, MembershipImage};
use infrasim_store::{DeleteOptions, Group, ObjectKey, ReadAt, Store, StoreError};
use serde::{de::DeserializeOwned, Deserialize, Serialize};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

/// The cloud's own group in its store.
pub(crate) const GROUP: &str = "cloud";
const CLUSTERS: &str = "clusters";
const MACHINES: &str = "machines";
const ETCD: &str = "etcdmemberships";
/// One record per key of a cluster's etcd (the cluster's namespace, the key in hex).
const ETCD_KEYS: &str = "etcdkeys";
/// Per cluster: its etcd's revision and leases.
const ETCD_STATES: &str = "etcdstates";

/// A cluster as it was created, and how far its addons have come.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ClusterRecord {
    pub name: String,
    pub control_planes: usize,
    pub workers: usize,
    pub kubernetes_version: String,
    pub startup_ms: u64,
    pub jitter: f64,
    pub pod_startup_ms: u64,
    pub lease_renewal_ms: u64,
    pub event_ttl_ms: u64,
    pub cluster_name: Option<String>,
    pub pki: PkiRecord,
    pub port: u16,
    /// The cluster's number in the cloud (which fixes its node addresses).
    pub index: u32,
    /// The number the cluster's next machine gets.
    pub next_machine: usize,
    pub addons_done: usize,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct PkiRecord {
    pub ca: PemPair,
    pub etcd_ca: PemPair,
    pub front_proxy_ca: PemPair,
    pub service_account_key: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct PemPair {
    pub cert: String,
    pub key: String,
}

impl PkiRecord {
    pub fn new(pki: &ClusterPki) -> Self {
        let pair = |ca: &infrasim_kube_api::pki::CertificateAuthority| PemPair {
            cert: ca.cert_pem.clone(),
            key: ca.key_pem().to_string(),
        };
        PkiRecord {
            ca: pair(&pki.ca),
            etcd_ca: pair(&pki.etcd_ca),
            front_proxy_ca: pair(&pki.front_proxy_ca),
            service_account_key: pki.service_account.private_pem.clone(),
        }
    }

    /// The same authorities and key, as a creation would be given them.
    pub fn supplied(&self) -> SuppliedPki {
        let pair = |p: &PemPair| {
            Some(CertAndKey {
                cert_pem: p.cert.clone(),
                key_pem: p.key.clone(),
            })
        };
        SuppliedPki {
            ca: pair(&self.ca),
            etcd_ca: pair(&self.etcd_ca),
            front_proxy_ca: pair(&self.front_proxy_ca),
            service_account_key: Some(self.service_account_key.clone()),
        }
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl ClusterRecord {
    pub fn new(shape: &ClusterShape, pki: &ClusterPki, port: u16, index: u32) -> Self {
        ClusterRecord {
            name: shape.name.clone(),
            control_planes: shape.control_planes,
            workers: shape.workers,
            kubernetes_version: shape.kubernetes_version.clone(),
            startup_ms: millis(shape.startup),
            jitter: shape.jitter,
            pod_startup_ms: millis(shape.workloads.pod_startup),
            lease_renewal_ms: millis(shape.workloads.lease_renewal),
            event_ttl_ms: millis(shape.workloads.event_ttl),
            cluster_name: shape.cluster_name.clone(),
            pki: PkiRecord::new(pki),
            port,
            index,
            next_machine: 0,
            addons_done: 0,
        }
    }

    /// The shape the cluster was created with (its PKI supplied from the record).
    pub fn shape(&self) -> ClusterShape {
        ClusterShape {
            name: self.name.clone(),
            control_planes: self.control_planes,
            workers: self.workers,
            kubernetes_version: self.kubernetes_version.clone(),
            startup: Duration::from_millis(self.startup_ms),
            jitter: self.jitter,
            workloads: WorkloadConfig {
                pod_startup: Duration::from_millis(self.pod_startup_ms),
                lease_renewal: Duration::from_millis(self.lease_renewal_ms),
                event_ttl: Duration::from_millis(self.event_ttl_ms),
            },
            pki: self.pki.supplied(),
            cluster_name: self.cluster_name.clone(),
        }
    }
}

/// A machine and the steps it has done.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct MachineRecord {
    pub name: String,
    pub control_plane: bool,
    pub index: usize,
    /// Each step's `(startup ms, jitter)`.
    pub behaviour: [(u64, f64); 4],
    pub kubernetes_version: Option<String>,
    pub provider_id: Option<String>,
    /// The steps done, one bit each.
    pub done: u8,
    /// The cloud times its steps (added with [`crate::Cloud::add_machine`]); otherwise a
    /// controller does, step by step.
    pub self_timed: bool,
}

impl MachineRecord {
    pub fn new(machine: &Machine, done: u8, self_timed: bool) -> Self {
        let b = |p: Provisioning| (millis(p.startup), p.jitter);
        let m = &machine.behaviour;
        MachineRecord {
            name: machine.name.clone(),
            control_plane: machine.control_plane,
            index: machine.index,
            behaviour: [b(m.vm), b(m.node), b(m.etcd), b(m.api_server)],
            kubernetes_version: machine.kubernetes_version.clone(),
            provider_id: machine.provider_id.clone(),
            done,
            self_timed,
        }
    }

    pub fn machine(&self) -> Machine {
        let p = |(ms, jitter): (u64, f64)| Provisioning {
            startup: Duration::from_millis(ms),
            jitter,
        };
        let [vm, node, etcd, api_server] = self.behaviour;
        Machine {
            name: self.name.clone(),
            control_plane: self.control_plane,
            index: self.index,
            behaviour: MachineBehaviour {
                vm: p(vm),
                node: p(node),
                etcd: p(etcd),
                api_server: p(api_server),
            },
            kubernetes_version: self.kubernetes_version.clone(),
            provider_id: self.provider_id.clone(),
        }
    }
}

/// An etcd membership, as JSON can hold it.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct MembershipRecord {
    pub cluster_id: u64,
    pub members: Vec<MemberRecord>,
    pub leader: Option<u64>,
    pub term: u64,
    pub index: u64,
    pub alarms: Vec<(u64, i32)>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct MemberRecord {
    pub id: u64,
    pub name: String,
    pub peer_urls: Vec<String>,
    pub client_urls: Vec<String>,
    pub is_learner: bool,
}

impl From<MembershipImage> for MembershipRecord {
    fn from(image: MembershipImage) -> Self {
        MembershipRecord {
            cluster_id: image.cluster_id,
            members: image
                .members
                .into_iter()
                .map(|m| MemberRecord {
                    id: m.id,
                    name: m.name,
                    peer_urls: m.peer_urls,
                    client_urls: m.client_urls,
                    is_learner: m.is_learner,
                })
                .collect(),
            leader: image.leader,
            term: image.term,
            index: image.index,
            alarms: image.alarms,
        }
    }
}

impl From<MembershipRecord> for MembershipImage {
    fn from(r: MembershipRecord) -> Self {
        MembershipImage {
            cluster_id: r.cluster_id,
            members: r
                .members
                .into_iter()
                .map(|m| Member {
                    id: m.id,
                    name: m.name,
                    peer_urls: m.peer_urls,
                    client_urls: m.client_urls,
                    is_learner: m.is_learner,
                })
                .collect(),
            leader: r.leader,
            term: r.term,
            index: r.index,
            alarms: r.alarms,
        }
    }
}

/// A key of a cluster's etcd.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct KeyRecord {
    /// base64, as etcd's JSON gateway spells bytes.
    pub key: String,
    pub value: String,
    pub create_revision: i64,
    pub mod_revision: i64,
    pub version: i64,
    pub lease: i64,
}

/// A cluster's etcd revision and leases.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct KeysStateRecord {
    pub revision: i64,
    pub leases: Vec<LeaseRecord>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct LeaseRecord {
    pub id: i64,
    pub ttl: i64,
    pub expires_at: chrono::DateTime<chrono::Utc>,
    pub keys: Vec<String>,
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn unb64(text: &str) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD
        .decode(text)
        .unwrap_or_default()
}

/// A key's record name: the key in hex (any bytes make a name).
fn key_name(key: &[u8]) -> String {
    key.iter().map(|b| format!("{b:02x}")).collect()
}

impl KeyRecord {
    fn new(kv: &KeyValue) -> Self {
        KeyRecord {
            key: b64(&kv.key),
            value: b64(&kv.value),
            create_revision: kv.create_revision,
            mod_revision: kv.mod_revision,
            version: kv.version,
            lease: kv.lease,
        }
    }

    fn key_value(&self) -> KeyValue {
        KeyValue {
            key: unb64(&self.key),
            value: unb64(&self.value),
            create_revision: self.create_revision,
            mod_revision: self.mod_revision,
            version: self.version,
            lease: self.lease,
        }
    }
}

impl KeysStateRecord {
    fn new(change: &KeysChange) -> Self {
        KeysStateRecord {
            revision: change.revision,
            leases: change
                .leases
                .iter()
                .map(|(id, l)| LeaseRecord {
                    id: *id,
                    ttl: l.granted_ttl,
                    expires_at: l.expires_at,
                    keys: l.keys.iter().map(|k| b64(k)).collect(),
                })
                .collect(),
        }
    }

    fn image(&self, keys: Vec<KeyRecord>) -> KeysImage {
        KeysImage {
            revision: self.revision,
            keys: keys.iter().map(KeyRecord::key_value).collect(),
            leases: self
                .leases
                .iter()
                .map(|l| {
                    let lease = Lease {
                        granted_ttl: l.ttl,
                        expires_at: l.expires_at,
                        keys: l.keys.iter().map(|k| unb64(k)).collect(),
                    };
                    (l.id, lease)
                })
                .collect(),
        }
    }
}

/// Everything kept of one cluster.
pub(crate) struct Kept {
    pub cluster: ClusterRecord,
    pub machines: Vec<MachineRecord>,
    pub etcd: Option<MembershipRecord>,
    pub keys: Option<KeysImage>,
}

/// Keeps one cluster's etcd: its membership and its keys.
pub(crate) struct EtcdKeeper {
    pub records: Records,
    pub cluster: String,
}

impl Keeper for EtcdKeeper {
    fn membership(&self, image: MembershipImage) {
        if let Err(e) = self.records.put_membership(&self.cluster, image) {
            tracing::error!(cluster = %self.cluster, error = %e, "keeping the etcd membership");
        }
    }

    fn keys(&self, change: KeysChange) {
        if let Err(e) = self.records.put_keys(&self.cluster, &change) {
            tracing::error!(cluster = %self.cluster, error = %e, "keeping the etcd keys");
        }
    }
}

/// The cloud's records, in its store's `cloud` group.
#[derive(Clone)]
pub(crate) struct Records {
    group: Arc<Group>,
}

impl Records {
    /// The records `store` holds (none in a new store).
    pub fn open(store: &Store) -> Self {
        Records {
            group: store.group_or_create(GROUP),
        }
    }

    /// Every cluster kept, in the order they were created.
    pub fn read(&self) -> Vec<Kept> {
        let mut clusters: Vec<ClusterRecord> = self.all(CLUSTERS);
        clusters.sort_by_key(|c| c.index);
        let mut machines: HashMap<String, Vec<MachineRecord>> = HashMap::new();
        for (cluster, m) in self.all_keyed::<MachineRecord>(MACHINES) {
            machines.entry(cluster).or_default().push(m);
        }
        let mut etcd: HashMap<String, MembershipRecord> =
            self.all_keyed(ETCD).into_iter().collect();
        let mut states: HashMap<String, KeysStateRecord> =
            self.all_keyed(ETCD_STATES).into_iter().collect();
        let mut keys: HashMap<String, Vec<KeyRecord>> = HashMap::new();
        for (cluster, k) in self.all_keyed::<KeyRecord>(ETCD_KEYS) {
            keys.entry(cluster).or_default().push(k);
        }
        clusters
            .into_iter()
            .map(|cluster| {
                let mut own = machines.remove(&cluster.name).unwrap_or_default();
                own.sort_by_key(|m| m.index);
                let kept_keys = keys.remove(&cluster.name).unwrap_or_default();
                Kept {
                    etcd: etcd.remove(&cluster.name),
                    keys: states
                        .remove(&cluster.name)
                        .map(|state| state.image(kept_keys)),
                    machines: own,
                    cluster,
                }
            })
            .collect()
    }

    fn all<T: DeserializeOwned>(&self, resource: &str) -> Vec<T> {
        self.all_keyed(resource)
            .into_iter()
            .map(|(_, t)| t)
            .collect()
    }

    /// `(namespace or name, record)` of every record of `resource`.
    fn all_keyed<T: DeserializeOwned>(&self, resource: &str) -> Vec<(String, T)> {
        let Ok(snapshot) = self.group.snapshot(resource, ReadAt::Latest) else {
            return Vec::new();
        };
        snapshot
            .objects
            .iter()
            .filter_map(|(key, o)| {
                let value = o.to_value().ok()?;
                let record = serde_json::from_value(value.get("record")?.clone());
                match record {
                    Ok(r) => Some((owner(key), r)),
                    Err(e) => {
                        tracing::error!(resource, key = %key.name, error = %e, "a cloud record cannot be read; its cluster is not restored");
                        None
                    }
                }
            })
            .collect()
    }

    pub fn put_cluster(&self, record: &ClusterRecord) -> Result<(), StoreError> {
        self.put(CLUSTERS, "", &record.name, record)
    }

    pub fn put_machine(&self, cluster: &str, record: &MachineRecord) -> Result<(), StoreError> {
        self.put(MACHINES, cluster, &record.name, record)
    }

    pub fn delete_machine(&self, cluster: &str, machine: &str) {
        self.delete(MACHINES, cluster, machine);
    }

    pub fn put_membership(&self, cluster: &str, image: MembershipImage) -> Result<(), StoreError> {
        self.put(ETCD, "", cluster, &MembershipRecord::from(image))
    }

    /// Keeps what changed in a cluster's etcd keys: the keys written and deleted, then the
    /// revision and leases.
    pub fn put_keys(&self, cluster: &str, change: &KeysChange) -> Result<(), StoreError> {
        if change.whole {
            for name in self.names_in(ETCD_KEYS, cluster) {
                self.delete(ETCD_KEYS, cluster, &name);
            }
        }
        for kv in &change.puts {
            self.put(ETCD_KEYS, cluster, &key_name(&kv.key), &KeyRecord::new(kv))?;
        }
        for key in &change.deletes {
            self.delete(ETCD_KEYS, cluster, &key_name(key));
        }
        self.put(ETCD_STATES, "", cluster, &KeysStateRecord::new(change))
    }

    /// The names of `resource`'s records in `namespace`, found by key (none decoded).
    fn names_in(&self, resource: &str, namespace: &str) -> Vec<Arc<str>> {
        let Ok(snapshot) = self.group.snapshot(resource, ReadAt::Latest) else {
            return Vec::new();
        };
        snapshot
            .objects
            .range(ObjectKey::new(namespace, "")..)
            .take_while(|(k, _)| &*k.namespace == namespace)
            .map(|(k, _)| k.name.clone())
            .collect()
    }

    /// Forgets a cluster and its machines.
    pub fn delete_cluster(&self, cluster: &str) {
        // The machines' and keys' records are the cluster's namespace.
        for resource in [MACHINES, ETCD_KEYS] {
            for name in self.names_in(resource, cluster) {
                self.delete(resource, cluster, &name);
            }
        }
        self.delete(ETCD_STATES, "", cluster);
        self.delete(ETCD, "", cluster);
        self.delete(CLUSTERS, "", cluster);
    }

    /// Writes `record` as the object `namespace/name` of `resource`, replacing what is there.
    fn put<T: Serialize>(
        &self,
        resource: &str,
        namespace: &str,
        name: &str,
        record: &T,
    ) -> Result<(), StoreError> {
        let record =
            serde_json::to_value(record).map_err(|e| StoreError::Backend(e.to_string()))?;
        let object = |record: Value| {
            json!({"apiVersion": "infrasim.dev/v1", "kind": "CloudRecord",
                   "metadata": {"name": name, "namespace": namespace}, "record": record})
        };
        let key = ObjectKey::new(namespace, name);
        self.group.put(resource, &key, object(record)).map(drop)
    }

    fn delete(&self, resource: &str, namespace: &str, name: &str) {
        let _ = self.group.delete(
            resource,
            &ObjectKey::new(namespace, name),
            &DeleteOptions::default(),
        );
    }
}

/// The cluster a keyed record belongs to: its namespace (machines) or its name.
fn owner(key: &ObjectKey) -> String {
    if key.namespace.is_empty() {
        key.name.to_string()
    } else {
        key.namespace.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use infrasim_store::StoreConfig;

    fn record(name: &str, index: u32) -> ClusterRecord {
        let pki = ClusterPki::new(&SuppliedPki::default()).expect("a PKI");
        let shape = ClusterShape {
            name: name.into(),
            startup: Duration::from_millis(250),
            jitter: 0.5,
            ..ClusterShape::default()
        };
        ClusterRecord::new(&shape, &pki, 20_000 + index as u16, index)
    }

    #[test]
    fn clusters_read_back_in_creation_order_with_their_machines_and_membership() {
        let records = Records::open(&Store::in_memory(StoreConfig::default()));
        records.put_cluster(&record("b", 1)).unwrap();
        records.put_cluster(&record("a", 0)).unwrap();
        let machine = |name: &str, index| Machine {
            index,
            provider_id: Some(format!("in-memory://{name}")),
            ..Machine::new(name, index == 0)
        };
        records
            .put_machine("a", &MachineRecord::new(&machine("a-1", 1), 0b11, false))
            .unwrap();
        records
            .put_machine("a", &MachineRecord::new(&machine("a-0", 0), 0b1111, true))
            .unwrap();
        records
            .put_machine("b", &MachineRecord::new(&machine("b-0", 0), 1, true))
            .unwrap();
        let image = MembershipImage {
            cluster_id: 7,
            leader: Some(3),
            term: 2,
            ..MembershipImage::default()
        };
        records.put_membership("a", image.clone()).unwrap();

        let kept = records.read();
        let names: Vec<&str> = kept.iter().map(|k| k.cluster.name.as_str()).collect();
        assert_eq!(names, ["a", "b"]);
        let a = &kept[0];
        assert_eq!(a.cluster.shape().startup, Duration::from_millis(250));
        assert!(a.cluster.shape().pki.ca.is_some(), "the PKI is kept");
        let machines: Vec<(&str, u8, bool)> = a
            .machines
            .iter()
            .map(|m| (m.name.as_str(), m.done, m.self_timed))
            .collect();
        assert_eq!(machines, [("a-0", 0b1111, true), ("a-1", 0b11, false)]);
        assert_eq!(a.machines[1].machine(), machine("a-1", 1));
        assert_eq!(
            a.etcd.clone().map(MembershipImage::from),
            Some(image),
            "the membership as it was"
        );
        assert!(kept[1].etcd.is_none());

        records.delete_cluster("a");
        let kept = records.read();
        assert_eq!(kept.len(), 1);
        assert_eq!(kept[0].machines.len(), 1, "b's machine stays");
        let left: Vec<(String, MachineRecord)> = records.all_keyed(MACHINES);
        assert_eq!(left.len(), 1, "a's machines are forgotten with it");
    }
}
