//! A fleet spread over several processes: every workload cluster belongs to one of `count`
//! shards (a hash of its cloud key, the same in every process and every version), and a
//! process hosts the clusters of the shards whose Lease (`coordination.k8s.io`) it holds.
//! Kubernetes is the only coordinator: no process talks to another.
//!
//! Each process keeps a member Lease of its own (`infrasim-member-<identity>`), so every
//! process can count the live ones and take its fair share, `ceil(count / members)` shard
//! Leases (`infrasim-shard-<k>`). One that holds more than its share gives one up per round
//! (its reconcilers stop at once, its clusters go a second later, then the Lease is
//! released), one that holds fewer takes free ones. A process that dies stops renewing: its
//! Leases run out after their duration and the others take its shards over, bringing the
//! clusters back from the shard's home where the processes share a data directory (every
//! object as it was), else making them again from the management objects, on their own
//! endpoints either way. A process that loses a
//! Lease it still thought it held stops ([`ShardError`]), as a controller-runtime manager
//! stops when it loses its leader election: two hosts of one cluster is worse than none.

use crate::informers::Watched;
use crate::leader::{live_holder, Elector};
use chrono::{DateTime, Utc};
use futures::{Stream, StreamExt};
use infrasim_clock::SharedClock;
use infrasim_cloud::Cloud;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, ListParams};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::ResourceExt;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// The name of shard `k`'s Lease.
pub fn shard_lease(k: u32) -> String {
    format!("infrasim-shard-{k}")
}

/// The name of shard `k`'s home: where its clusters are kept when the processes share a data
/// directory (see [`Cloud::take_up_home`]).
pub fn shard_home(k: u32) -> String {
    format!("shard-{k}")
}

const SHARD_LEASE_PREFIX: &str = "infrasim-shard-";
const MEMBER_LEASE_PREFIX: &str = "infrasim-member-";

/// The name of a member's Lease: its identity, spelled as a Lease name may be.
pub fn member_lease(identity: &str) -> String {
    let spelled: String = identity
        .to_ascii_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .take(200)
        .collect();
    format!("{MEMBER_LEASE_PREFIX}{}", spelled.trim_matches('-'))
}

/// Which clusters this process hosts: all of them (no sharding), or those of the shards it
/// holds. Cheap to clone; every clone sees the same holdings.
#[derive(Clone, Default)]
pub struct Shards {
    sharding: Option<Arc<Sharding>>,
}

struct Sharding {
    count: u32,
    held: watch::Sender<BTreeSet<u32>>,
}

impl Shards {
    /// Every cluster is hosted here.
    pub fn everything() -> Self {
        Self::default()
    }

    /// `count` shards (at least one), none held yet.
    pub fn new(count: u32) -> Self {
        Shards {
            sharding: Some(Arc::new(Sharding {
                count: count.max(1),
                held: watch::Sender::new(BTreeSet::new()),
            })),
        }
    }

    /// The number of shards; `None` when the process hosts everything.
    pub fn count(&self) -> Option<u32> {
        self.sharding.as_ref().map(|s| s.count)
    }

    /// The shard of the cluster whose cloud key is `key`, among `count`: FNV-1a, a hash that
    /// every process computes alike (std's hasher is seeded per process).
    pub fn shard_of(count: u32, key: &str) -> u32 {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in key.bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        (h % u64::from(count.max(1))) as u32
    }

    /// Whether the cluster whose cloud key is `key` is hosted here.
    pub fn hosts(&self, key: &str) -> bool {
        match &self.sharding {
            None => true,
            Some(s) => s.held.borrow().contains(&Self::shard_of(s.count, key)),
        }
    }

    /// The shards held now (empty without sharding).
    pub fn held(&self) -> BTreeSet<u32> {
        match &self.sharding {
            None => BTreeSet::new(),
            Some(s) => s.held.borrow().clone(),
        }
    }

    fn change(&self, f: impl FnOnce(&mut BTreeSet<u32>)) {
        if let Some(s) = &self.sharding {
            s.held.send_modify(f);
        }
    }

    /// The objects of `store` in shards this process takes, each time it takes some:
    /// `key_of` names an object's cluster by its cloud key. Nothing without sharding.
    pub fn taken<K: Watched>(
        &self,
        store: Store<K>,
        key_of: fn(&K) -> Option<String>,
    ) -> impl Stream<Item = ObjectRef<K>> + Send + 'static {
        let count = self.count().unwrap_or(1);
        let changes = self.sharding.as_ref().map(|s| s.held.subscribe());
        let gains = futures::stream::unfold(
            (changes, BTreeSet::new()),
            |(mut changes, before)| async move {
                let rx = changes.as_mut()?;
                rx.changed().await.ok()?;
                let now = rx.borrow_and_update().clone();
                let gained: BTreeSet<u32> = now.difference(&before).copied().collect();
                Some((gained, (changes, now)))
            },
        );
        gains.flat_map(move |gained| {
            let refs: Vec<ObjectRef<K>> = store
                .state()
                .iter()
                .filter(|o| key_of(o).is_some_and(|k| gained.contains(&Self::shard_of(count, &k))))
                .map(|o| ObjectRef::from_obj(&**o))
                .collect();
            futures::stream::iter(refs)
        })
    }
}

/// Why a process stops hosting its shards.
#[derive(Debug, thiserror::Error)]
pub enum ShardError {
    #[error("shard {shard}'s Lease is held by {holder}: another process hosts its clusters now")]
    Lost { shard: u32, holder: String },
    #[error("the shard Leases could not be renewed for {0:?}: {1}")]
    Unreachable(Duration, kube::Error),
}

/// What a round of Leases says: the live members (sorted) and the live holder of each shard.
#[derive(Debug, Default, PartialEq)]
struct View {
    members: Vec<String>,
    holders: BTreeMap<u32, String>,
}

impl View {
    fn read(leases: &[Lease], count: u32, now: DateTime<Utc>) -> Self {
        let mut view = View::default();
        for lease in leases {
            let name = lease.name_any();
            let Some(holder) = live_holder(lease, now) else {
                continue;
            };
            if name.starts_with(MEMBER_LEASE_PREFIX) {
                view.members.push(holder);
            } else if let Some(k) = name
                .strip_prefix(SHARD_LEASE_PREFIX)
                .and_then(|k| k.parse::<u32>().ok())
                .filter(|k| *k < count)
            {
                view.holders.insert(k, holder);
            }
        }
        view.members.sort();
        view.members.dedup();
        view
    }
}

/// What a member does in a round: give up one shard, or try to take these (in order).
#[derive(Debug, PartialEq)]
enum Plan {
    Keep,
    GiveUp(u32),
    Take(Vec<u32>),
}

/// A member's fair share is `ceil(count / members)`: it gives up its highest shard when it
/// holds more, and tries the free ones when it holds fewer, starting where its rank among the
/// members points, so members that start together try different shards first.
fn plan(view: &View, me: &str, held: &BTreeSet<u32>, count: u32) -> Plan {
    let members = view.members.len().max(1) as u32;
    let share = count.div_ceil(members) as usize;
    if held.len() > share {
        return held.last().map_or(Plan::Keep, |k| Plan::GiveUp(*k));
    }
    if held.len() == share {
        return Plan::Keep;
    }
    let rank = view.members.iter().position(|m| m == me).unwrap_or(0) as u32;
    let start = (rank * share as u32) % count.max(1);
    let free: Vec<u32> = (0..count)
        .map(|i| (start + i) % count)
        .filter(|k| !view.holders.contains_key(k) && !held.contains(k))
        .take(share - held.len())
        .collect();
    if free.is_empty() {
        Plan::Keep
    } else {
        Plan::Take(free)
    }
}

/// The clusters among `hosted` (cloud keys) whose shard another live member holds.
fn foreign(view: &View, me: &str, hosted: &[String], count: u32) -> Vec<String> {
    hosted
        .iter()
        .filter(|key| {
            view.holders
                .get(&Shards::shard_of(count, key))
                .is_some_and(|holder| holder != me)
        })
        .cloned()
        .collect()
}

/// The member Leases whose hold ran out before `before`: processes long gone.
fn stale_members(leases: &[Lease], before: DateTime<Utc>) -> Vec<String> {
    leases
        .iter()
        .filter(|l| l.name_any().starts_with(MEMBER_LEASE_PREFIX))
        .filter(|l| {
            crate::leader::holder_until(l, 1)
                .1
                .is_none_or(|until| until < before)
        })
        .map(|l| l.name_any())
        .collect()
}

/// One process's part in the fleet: its member Lease and the shard Leases it holds.
pub struct ShardMember {
    client: kube::Client,
    namespace: String,
    identity: String,
    clock: SharedClock,
    cloud: Arc<Cloud>,
    shards: Shards,
    member: Elector,
    /// How long a Lease lasts unrenewed; rounds come three times as often.
    pub lease_duration: Duration,
}

impl ShardMember {
    /// A member holding `shards` (which must be sharded) for `cloud`, its Leases in
    /// `namespace` of the plane `client` reaches. (Given the context's parts rather than the
    /// context, which holds the shards: this module stays below it.)
    pub fn new(
        client: kube::Client,
        clock: SharedClock,
        cloud: Arc<Cloud>,
        shards: Shards,
        namespace: &str,
        identity: &str,
    ) -> Self {
        let member = Elector::new(
            client.clone(),
            namespace,
            &member_lease(identity),
            identity,
            clock.clone(),
        );
        ShardMember {
            client,
            namespace: namespace.to_string(),
            identity: identity.to_string(),
            clock,
            cloud,
            shards,
            lease_duration: member.lease_duration,
            member,
        }
    }

    fn elector(&self, k: u32) -> Elector {
        let mut e = Elector::new(
            self.client.clone(),
            &self.namespace,
            &shard_lease(k),
            &self.identity,
            self.clock.clone(),
        );
        e.lease_duration = self.lease_duration;
        e
    }

    /// Takes part in the fleet until a shard is lost (the process must then stop). The first
    /// round only announces the member, so that processes started together see each other
    /// before they take shares.
    pub async fn run(self) -> ShardError {
        let mut last_ok = self.clock.now();
        let mut first = true;
        loop {
            match self.round(first).await {
                Ok(()) => last_ok = self.clock.now(),
                Err(RoundError::Lost(e)) => return e,
                Err(RoundError::Kube(e)) => {
                    let failing = (self.clock.now() - last_ok).to_std().unwrap_or_default();
                    tracing::warn!(error = %e, "shard leases");
                    if failing > self.lease_duration {
                        return ShardError::Unreachable(failing, e);
                    }
                }
            }
            first = false;
            self.clock.sleep(self.lease_duration / 3).await;
        }
    }

    async fn round(&self, first: bool) -> Result<(), RoundError> {
        let count = self.shards.count().unwrap_or(1);
        self.member.try_acquire().await?;
        let api: Api<Lease> = Api::namespaced(self.client.clone(), &self.namespace);
        let leases = api.list(&ListParams::default()).await?.items;
        let now = self.clock.now();
        let view = View::read(&leases, count, now);
        for stale in stale_members(&leases, now - chrono::Duration::minutes(1)) {
            // A member gone a minute ago is not coming back under that identity.
            api.delete(&stale, &Default::default()).await.ok();
        }
        self.renew_held().await?;
        for key in foreign(&view, &self.identity, &self.cloud.hosted(), count) {
            tracing::info!(cluster = %key, "its shard is hosted elsewhere: it stops here");
            // Kept for the holder, who cannot open the home while it is taken up here.
            match self.cloud.home_of(&key) {
                Some(home) => {
                    self.cloud.set_down_home(&home);
                }
                None => {
                    self.cloud.delete_cluster(&key).await.ok();
                }
            }
        }
        if first {
            return Ok(());
        }
        match plan(&view, &self.identity, &self.shards.held(), count) {
            Plan::Keep => {}
            Plan::GiveUp(k) => self.give_up(k, count).await?,
            Plan::Take(free) => self.take(&free, count).await?,
        }
        Ok(())
    }

    /// Renews every shard Lease held; one another process holds now is lost.
    async fn renew_held(&self) -> Result<(), RoundError> {
        for k in self.shards.held() {
            if let crate::leader::Attempt::Following { holder, .. } =
                self.elector(k).try_acquire().await?
            {
                self.shards.change(|held| {
                    held.remove(&k);
                });
                return Err(RoundError::Lost(ShardError::Lost { shard: k, holder }));
            }
        }
        Ok(())
    }

    /// Takes the free shards it can: the Lease, then the shard's home (its clusters back
    /// before its reconcilers start). A home still held elsewhere (its last holder is setting
    /// it down, or is alive though its Lease ran out) gives the Lease back for a later round.
    async fn take(&self, free: &[u32], count: u32) -> Result<(), kube::Error> {
        for &k in free {
            let elector = self.elector(k);
            if elector.try_acquire().await? != crate::leader::Attempt::Leading {
                continue;
            }
            let admits = move |key: &str| Shards::shard_of(count, key) == k;
            match self
                .cloud
                .take_up_home(&shard_home(k), Box::new(admits))
                .await
            {
                Ok(restored) => {
                    tracing::info!(shard = k, identity = %self.identity, restored = ?restored, "shard taken");
                    self.shards.change(|held| {
                        held.insert(k);
                    });
                }
                Err(e) => {
                    tracing::warn!(shard = k, error = %e, "shard not taken: its home cannot be opened yet");
                    elector.release().await?;
                }
            }
        }
        Ok(())
    }

    /// Stops hosting shard `k`: its reconcilers first, its clusters a second later (a
    /// reconcile under way when the shard went has finished by then), then the Lease. Its
    /// home is set down, everything in it kept for the next holder; without one (no shared
    /// data directory) its clusters are deleted here and made again there.
    async fn give_up(&self, k: u32, count: u32) -> Result<(), kube::Error> {
        tracing::info!(shard = k, identity = %self.identity, "shard given up");
        self.shards.change(|held| {
            held.remove(&k);
        });
        self.clock.sleep(Duration::from_secs(1)).await;
        self.cloud.set_down_home(&shard_home(k));
        // What is left of the shard here: endpoints only reserved, or every cluster when
        // the shard has no home.
        for key in self.cloud.hosted() {
            if Shards::shard_of(count, &key) == k {
                self.cloud.delete_cluster(&key).await.ok();
            }
        }
        self.elector(k).release().await
    }
}

enum RoundError {
    Lost(ShardError),
    Kube(kube::Error),
}

impl From<kube::Error> for RoundError {
    fn from(e: kube::Error) -> Self {
        RoundError::Kube(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn lease(name: &str, holder: &str, renewed: &str) -> Lease {
        serde_json::from_value(json!({
            "metadata": {"name": name},
            "spec": {"holderIdentity": holder, "leaseDurationSeconds": 15, "renewTime": renewed},
        }))
        .unwrap()
    }

    fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    fn held(ks: &[u32]) -> BTreeSet<u32> {
        ks.iter().copied().collect()
    }

    #[test]
    fn a_cluster_keeps_its_shard_whatever_process_asks() {
        // FNV-1a of the key, fixed: another process, or another build, agrees.
        assert_eq!(Shards::shard_of(1, "c1.default"), 0);
        let spread: BTreeSet<u32> = (0..64)
            .map(|i| Shards::shard_of(4, &format!("c{i}.default")))
            .collect();
        assert_eq!(
            spread,
            held(&[0, 1, 2, 3]),
            "64 clusters fall in every one of 4 shards"
        );
        assert_eq!(
            Shards::shard_of(4, "c7.default"),
            Shards::shard_of(4, "c7.default")
        );
    }

    #[test]
    fn a_process_hosts_what_its_shards_hold_and_everything_unsharded() {
        assert!(Shards::everything().hosts("any.ns"));
        let shards = Shards::new(2);
        let key = "c1.default";
        assert!(!shards.hosts(key), "no shard held yet");
        shards.change(|h| {
            h.insert(Shards::shard_of(2, key));
        });
        assert!(shards.hosts(key));
        let other = (0..100)
            .map(|i| format!("c{i}.default"))
            .find(|k| !shards.hosts(k));
        assert!(other.is_some(), "the other shard's clusters stay elsewhere");
    }

    #[test]
    fn only_live_leases_count() {
        let now = at("2026-12-01T00:00:10Z");
        let leases = [
            lease("infrasim-member-a", "a", "2026-12-01T00:00:05Z"),
            lease("infrasim-member-b", "b", "2026-11-30T23:00:00Z"),
            lease("infrasim-shard-0", "a", "2026-12-01T00:00:05Z"),
            lease("infrasim-shard-1", "b", "2026-11-30T23:00:00Z"),
            lease("infrasim-shard-7", "a", "2026-12-01T00:00:05Z"),
            lease("infrasim-controller", "a", "2026-12-01T00:00:05Z"),
        ];
        let view = View::read(&leases, 2, now);
        assert_eq!(view.members, ["a"], "b stopped renewing an hour ago");
        assert_eq!(view.holders, BTreeMap::from([(0, "a".to_string())]));
    }

    #[test]
    fn members_gone_a_while_are_stale() {
        let leases = [
            lease("infrasim-member-a", "a", "2026-12-01T00:00:05Z"),
            lease("infrasim-member-b", "b", "2026-11-30T23:00:00Z"),
            lease("infrasim-shard-1", "b", "2026-11-30T23:00:00Z"),
        ];
        let before = at("2026-12-01T00:00:00Z");
        assert_eq!(stale_members(&leases, before), ["infrasim-member-b"]);
    }

    #[test]
    fn members_take_a_fair_share_and_give_back_the_excess() {
        let two = View {
            members: vec!["a".into(), "b".into()],
            holders: BTreeMap::new(),
        };
        // Started together: each tries a different half first.
        assert_eq!(plan(&two, "a", &held(&[]), 4), Plan::Take(vec![0, 1]));
        assert_eq!(plan(&two, "b", &held(&[]), 4), Plan::Take(vec![2, 3]));
        // a took all four while alone; with b there it gives one back per round.
        let a_all = View {
            holders: (0..4).map(|k| (k, "a".to_string())).collect(),
            ..two
        };
        assert_eq!(plan(&a_all, "a", &held(&[0, 1, 2, 3]), 4), Plan::GiveUp(3));
        assert_eq!(
            plan(&a_all, "b", &held(&[]), 4),
            Plan::Keep,
            "nothing is free"
        );
        // b died: its shards' Leases ran out, and a alone takes them all.
        let alone = View {
            members: vec!["a".into()],
            holders: [(0, "a".to_string()), (1, "a".to_string())].into(),
        };
        assert_eq!(plan(&alone, "a", &held(&[0, 1]), 4), Plan::Take(vec![2, 3]));
        assert_eq!(plan(&alone, "a", &held(&[0, 1, 2, 3]), 4), Plan::Keep);
    }

    #[test]
    fn clusters_of_a_shard_held_elsewhere_are_foreign() {
        let hosted: Vec<String> = (0..20).map(|i| format!("c{i}.ns")).collect();
        let view = View {
            members: vec!["a".into(), "b".into()],
            holders: [(0, "a".to_string()), (1, "b".to_string())].into(),
        };
        let theirs = foreign(&view, "a", &hosted, 2);
        assert!(!theirs.is_empty());
        assert!(theirs.iter().all(|k| Shards::shard_of(2, k) == 1));
        let nobodys = View {
            holders: [(0, "a".to_string())].into(),
            ..view
        };
        assert!(
            foreign(&nobodys, "a", &hosted, 2).is_empty(),
            "a shard nobody holds keeps its clusters until someone takes it"
        );
    }

    #[test]
    fn a_member_lease_name_is_a_valid_name() {
        assert_eq!(
            member_lease("Host_1.example_5f0c"),
            "infrasim-member-host-1-example-5f0c"
        );
    }

    #[tokio::test]
    async fn taking_a_shard_names_its_objects() {
        use k8s_openapi::api::core::v1::ConfigMap;
        use kube::runtime::watcher::Event;
        let (informer, mut feed) = crate::informers::testing::informer::<ConfigMap>();
        let cm = |name: &str| -> ConfigMap {
            serde_json::from_value(json!({"metadata": {"name": name, "namespace": "ns"}})).unwrap()
        };
        feed(Event::Init);
        for i in 0..8 {
            feed(Event::InitApply(cm(&format!("c{i}"))));
        }
        feed(Event::InitDone);
        let shards = Shards::new(2);
        let key_of = |o: &ConfigMap| Some(format!("{}.ns", o.name_any()));
        let mut taken = Box::pin(shards.taken(informer.store(), key_of));
        shards.change(|h| {
            h.insert(1);
        });
        let mut names = Vec::new();
        while let Ok(Some(r)) = tokio::time::timeout(Duration::from_millis(50), taken.next()).await
        {
            names.push(r.name);
        }
        let want: Vec<String> = (0..8)
            .map(|i| format!("c{i}"))
            .filter(|n| Shards::shard_of(2, &format!("{n}.ns")) == 1)
            .collect();
        names.sort();
        assert!(!want.is_empty());
        assert_eq!(names, want);
    }
}
