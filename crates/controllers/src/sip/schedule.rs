//! Which hosts a SIPCluster holds, decided from the hosts' labels alone (a pure function, so
//! every rule is unit-tested): per role, the hosts it already holds that still qualify are kept,
//! failed or no-longer-matching ones are let go, and the shortfall is chosen from free hosts
//! that match the role's selector, spread over its topology key. All or nothing: when a role
//! cannot be filled, nothing changes and the reason is said.

use super::types::{labels, BareMetalHost, NodeSet};
use kube::core::{Selector, SelectorExt};
use kube::ResourceExt;
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::Arc;

/// A host by namespace and name.
pub type HostKey = (String, String);

pub fn key_of(host: &BareMetalHost) -> HostKey {
    (host.namespace().unwrap_or_default(), host.name_any())
}

/// Provisioning states in which a host cannot serve (metal3's, old and new spellings).
const FAILED_STATES: &[&str] = &[
    "deprovisioning",
    "deleting",
    "powering off before delete",
    "registration error",
    "provisioning error",
    "power management error",
];

/// Whether a host can serve: it is online, in no failed state, and says where its network
/// data is (SIP reads the host's address from it).
pub fn healthy(host: &BareMetalHost) -> bool {
    let status = host.status.as_ref();
    let state = status
        .and_then(|s| s.provisioning.as_ref())
        .map(|p| p.state.as_str())
        .unwrap_or("");
    let errored = status.and_then(|s| s.operational_status.as_deref()) == Some("error");
    host.spec.online
        && !errored
        && !FAILED_STATES.contains(&state)
        && host.spec.network_data.is_some()
}

/// The SIPCluster (namespace, name) a host is claimed by, if any.
pub fn claimed_by(host: &BareMetalHost) -> Option<(String, String)> {
    let l = host.labels();
    let name = l.get(labels::CLUSTER_NAME)?;
    let namespace = l
        .get(labels::CLUSTER_NAMESPACE)
        .cloned()
        .unwrap_or_default();
    Some((namespace, name.clone()))
}

/// What a SIPCluster should hold.
#[derive(Debug, Default, PartialEq)]
pub struct Plan {
    /// By role, the hosts held, active ones first.
    pub roles: BTreeMap<String, Vec<HostKey>>,
    /// Hosts this cluster holds and lets go.
    pub release: Vec<HostKey>,
    /// Why roles the cluster already held are short: their failed hosts were let go (a
    /// standby taking an active host's place), but no host could replace them.
    pub short: Vec<String>,
}

impl Plan {
    /// The role of a host the plan holds.
    pub fn role_of(&self, host: &HostKey) -> Option<&str> {
        self.roles
            .iter()
            .find(|(_, hosts)| hosts.contains(host))
            .map(|(role, _)| role.as_str())
    }
}

/// The hosts `cluster` should hold for `nodes`, given every host there is. `active_before`
/// lists the hosts that were active, so they stay active; `excluded` are hosts found unusable
/// since (their network data lacks the address a service needs). A role that cannot be
/// filled claims nothing new: for a cluster that held none of it, the whole plan fails (all
/// or nothing); for one that did, its qualifying hosts stay and the role is reported short.
pub fn plan(
    cluster: &(String, String),
    nodes: &BTreeMap<String, NodeSet>,
    hosts: &[Arc<BareMetalHost>],
    active_before: &HashSet<HostKey>,
    excluded: &HashSet<HostKey>,
) -> Result<Plan, String> {
    // The informer's copies, shared: a plan reads every host and copies none.
    let hosts: Vec<&BareMetalHost> = hosts.iter().map(|h| h.as_ref()).collect();
    let mut out = Plan::default();
    // Hosts taken by a role earlier in this pass.
    let mut taken: HashSet<HostKey> = HashSet::new();
    for (role, set) in nodes {
        let want = Want {
            cluster,
            role,
            set,
            selector: selector_of(role, set)?,
            excluded,
        };
        let (held, release, short) = want.fill(&hosts, &taken, active_before);
        out.release.extend(release);
        if let Some(why) = short {
            if held.is_empty() {
                return Err(why);
            }
            out.short.push(why);
        }
        taken.extend(held.iter().cloned());
        out.roles.insert(role.clone(), held);
    }
    Ok(out)
}

/// One role of one cluster.
struct Want<'a> {
    cluster: &'a (String, String),
    role: &'a str,
    set: &'a NodeSet,
    selector: Selector,
    excluded: &'a HashSet<HostKey>,
}

impl Want<'_> {
    fn fits(&self, h: &BareMetalHost) -> bool {
        healthy(h) && !self.excluded.contains(&key_of(h)) && self.selector.matches(h.labels())
    }

    fn domain(&self, h: &BareMetalHost) -> Option<String> {
        let key = self.set.topology_key.as_ref()?;
        h.labels().get(key).cloned()
    }

    /// The hosts held (kept ones first, previously active first among them), those let go,
    /// and why the role is short, if it is (then nothing new is held).
    fn fill(
        &self,
        hosts: &[&BareMetalHost],
        taken: &HashSet<HostKey>,
        active_before: &HashSet<HostKey>,
    ) -> (Vec<HostKey>, Vec<HostKey>, Option<String>) {
        let count = self.set.count;
        let target = usize::try_from(count.active.max(0) + count.standby.max(0)).unwrap_or(0);
        let mut mine: Vec<&BareMetalHost> = hosts
            .iter()
            .copied()
            .filter(|h| claimed_by(h).as_ref() == Some(self.cluster))
            .filter(|h| h.labels().get(labels::NODE_TYPE).map(String::as_str) == Some(self.role))
            .collect();
        mine.sort_by_cached_key(|h| (!active_before.contains(&key_of(h)), key_of(h)));
        let mut used = BTreeSet::new();
        let (mut held, mut release) = (Vec::new(), Vec::new());
        for h in mine {
            // A host let go leaves its domain free: fitness is asked before the domain is taken.
            if self.fits(h) && held.len() < target && self.domain(h).is_none_or(|d| used.insert(d))
            {
                held.push(key_of(h));
            } else {
                release.push(key_of(h));
            }
        }
        let mut free: Vec<&BareMetalHost> = hosts
            .iter()
            .copied()
            .filter(|h| claimed_by(h).is_none() && !taken.contains(&key_of(h)) && self.fits(h))
            .collect();
        free.sort_by_cached_key(|h| key_of(h));
        let mut new = Vec::new();
        for h in free {
            if held.len() + new.len() >= target {
                break;
            }
            if self.domain(h).is_none_or(|d| used.insert(d)) {
                new.push(key_of(h));
            }
        }
        if held.len() + new.len() < target {
            let spread = self
                .set
                .topology_key
                .as_ref()
                .map(|k| format!(", no two sharing a value of {k}"))
                .unwrap_or_default();
            let why = format!(
                "Unable to complete a schedule with a target of {target} {} nodes: {} hosts qualify (free or this cluster's, healthy, matching {}{spread})",
                self.role,
                held.len() + new.len(),
                describe(self.set)
            );
            return (held, release, Some(why));
        }
        held.extend(new);
        (held, release, None)
    }
}

fn selector_of(role: &str, set: &NodeSet) -> Result<Selector, String> {
    match &set.label_selector {
        None => Ok(Selector::default()),
        Some(s) => Selector::try_from(s.clone())
            .map_err(|e| format!("spec.nodes.{role}.labelSelector: {e}")),
    }
}

fn describe(set: &NodeSet) -> String {
    match set
        .label_selector
        .as_ref()
        .and_then(|s| Selector::try_from(s.clone()).ok())
    {
        Some(s) if !s.to_string().is_empty() => format!("the selector {s}"),
        _ => "any labels".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sip::types::{BareMetalHostSpec, NodeCount, SecretReference};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

    fn host(name: &str, rack: &str, flavor: &str) -> BareMetalHost {
        let mut h = BareMetalHost::new(
            name,
            BareMetalHostSpec {
                online: true,
                network_data: Some(SecretReference {
                    name: format!("{name}-networkdata"),
                    namespace: None,
                }),
                ..Default::default()
            },
        );
        h.metadata.namespace = Some("metal".into());
        h.labels_mut().insert("rack".into(), rack.into());
        h.labels_mut().insert("flavor".into(), flavor.into());
        h
    }

    fn claim(h: &mut BareMetalHost, cluster: &str, role: &str) {
        let l = h.labels_mut();
        l.insert(labels::CLUSTER_NAMESPACE.into(), "tenants".into());
        l.insert(labels::CLUSTER_NAME.into(), cluster.into());
        l.insert(labels::NODE_TYPE.into(), role.into());
    }

    fn set(flavor: &str, spread: Option<&str>, active: i32, standby: i32) -> NodeSet {
        NodeSet {
            label_selector: Some(LabelSelector {
                match_labels: Some([("flavor".to_string(), flavor.to_string())].into()),
                ..Default::default()
            }),
            topology_key: spread.map(str::to_string),
            count: NodeCount { active, standby },
        }
    }

    /// Ten hosts over three racks: r1 holds 0-3, r2 4-6, r3 7-9; the first six are for control
    /// planes, the rest workers.
    fn fleet() -> Vec<Arc<BareMetalHost>> {
        (0..10)
            .map(|i| {
                let rack = match i {
                    0..=3 => "r1",
                    4..=6 => "r2",
                    _ => "r3",
                };
                Arc::new(host(
                    &format!("h{i}"),
                    rack,
                    if i < 6 { "cp" } else { "worker" },
                ))
            })
            .collect()
    }

    fn names(keys: &[HostKey]) -> Vec<&str> {
        keys.iter().map(|(_, n)| n.as_str()).collect()
    }

    fn cluster() -> (String, String) {
        ("tenants".into(), "c1".into())
    }

    #[test]
    fn a_role_is_spread_over_its_topology_key_and_roles_do_not_share_hosts() {
        let nodes = BTreeMap::from([
            ("ControlPlane".to_string(), set("cp", Some("rack"), 2, 0)),
            ("Worker".to_string(), set("worker", None, 4, 0)),
        ]);
        let p = plan(
            &cluster(),
            &nodes,
            &fleet(),
            &HashSet::new(),
            &HashSet::new(),
        )
        .unwrap();
        assert_eq!(
            names(&p.roles["ControlPlane"]),
            ["h0", "h4"],
            "one per rack"
        );
        assert_eq!(names(&p.roles["Worker"]), ["h6", "h7", "h8", "h9"]);
        assert!(p.release.is_empty());
    }

    #[test]
    fn an_impossible_request_says_why_and_claims_nothing() {
        // Three control-plane hosts, one per rack, but cp hosts sit in two racks only.
        let nodes = BTreeMap::from([("ControlPlane".to_string(), set("cp", Some("rack"), 3, 0))]);
        let err = plan(
            &cluster(),
            &nodes,
            &fleet(),
            &HashSet::new(),
            &HashSet::new(),
        )
        .unwrap_err();
        assert!(
            err.contains("target of 3 ControlPlane nodes: 2 hosts qualify"),
            "{err}"
        );
        assert!(err.contains("flavor=cp") && err.contains("rack"), "{err}");
    }

    #[test]
    fn held_hosts_are_kept_failed_ones_replaced_and_extras_released() {
        let mut hosts = fleet();
        claim(Arc::make_mut(&mut hosts[0]), "c1", "ControlPlane");
        claim(Arc::make_mut(&mut hosts[4]), "c1", "ControlPlane");
        claim(Arc::make_mut(&mut hosts[1]), "other", "ControlPlane");
        Arc::make_mut(&mut hosts[0]).spec.online = false;
        let active: HashSet<HostKey> = [key_of(&hosts[0])].into();
        let nodes = BTreeMap::from([("ControlPlane".to_string(), set("cp", Some("rack"), 1, 1))]);
        let p = plan(&cluster(), &nodes, &hosts, &active, &HashSet::new()).unwrap();
        // h4 (standby) stays; h0 (offline) goes; the rack it freed is refilled from a free
        // host, not another cluster's h1.
        assert_eq!(names(&p.roles["ControlPlane"]), ["h4", "h2"]);
        assert_eq!(names(&p.release), ["h0"]);

        let nodes = BTreeMap::from([("ControlPlane".to_string(), set("cp", Some("rack"), 1, 0))]);
        Arc::make_mut(&mut hosts[0]).spec.online = true;
        let p = plan(&cluster(), &nodes, &hosts, &active, &HashSet::new()).unwrap();
        assert_eq!(
            names(&p.roles["ControlPlane"]),
            ["h0"],
            "the active one is kept"
        );
        assert_eq!(names(&p.release), ["h4"]);
    }

    #[test]
    fn a_standby_takes_a_failed_hosts_place_and_a_role_with_no_spare_is_short() {
        let mut hosts = fleet();
        for i in [6, 7, 8] {
            claim(Arc::make_mut(&mut hosts[i]), "c1", "Worker");
        }
        let active: HashSet<HostKey> = [key_of(&hosts[6]), key_of(&hosts[7])].into();
        Arc::make_mut(&mut hosts[6]).spec.online = false;
        let nodes = BTreeMap::from([("Worker".to_string(), set("worker", None, 2, 1))]);
        let p = plan(&cluster(), &nodes, &hosts, &active, &HashSet::new()).unwrap();
        // h7 stays active, h8 (standby) moves up, and h9 (free) is the new standby.
        assert_eq!(names(&p.roles["Worker"]), ["h7", "h8", "h9"]);
        assert_eq!(names(&p.release), ["h6"]);
        assert!(p.short.is_empty());

        // With h9 gone too, nothing replaces h6: the healthy two stay, the role is short.
        Arc::make_mut(&mut hosts[9]).spec.online = false;
        let p = plan(&cluster(), &nodes, &hosts, &active, &HashSet::new()).unwrap();
        assert_eq!(names(&p.roles["Worker"]), ["h7", "h8"]);
        assert_eq!(names(&p.release), ["h6"]);
        assert!(
            p.short[0].contains("target of 3 Worker nodes: 2 hosts qualify"),
            "{:?}",
            p.short
        );
    }

    #[test]
    fn hosts_without_network_data_or_excluded_are_passed_over() {
        let mut hosts = fleet();
        Arc::make_mut(&mut hosts[6]).spec.network_data = None;
        let excluded: HashSet<HostKey> = [key_of(&hosts[7])].into();
        let nodes = BTreeMap::from([("Worker".to_string(), set("worker", None, 2, 0))]);
        let p = plan(&cluster(), &nodes, &hosts, &HashSet::new(), &excluded).unwrap();
        assert_eq!(names(&p.roles["Worker"]), ["h8", "h9"]);
    }
}
