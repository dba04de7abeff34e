//! The in-cluster IPAM provider's pools (`ipam.cluster.x-k8s.io/v1alpha2`): an
//! `InClusterIPPool` serves the claims of its namespace, a `GlobalInClusterIPPool` (cluster
//! scoped) those of every namespace. Both have the same spec and status, as upstream's.

// Printer columns repeat `type_ = "string"` and the like inside one `#[kube(...)]`.
#![allow(clippy::duplicated_attributes)]

use super::ipset::{self, IpSet};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// The pool kinds' API group and version.
pub const GROUP: &str = "ipam.cluster.x-k8s.io";

/// The addresses a pool hands out.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "ipam.cluster.x-k8s.io",
    version = "v1alpha2",
    kind = "InClusterIPPool",
    namespaced,
    status = "InClusterIPPoolStatus",
    category = "cluster-api",
    printcolumn(name = "Addresses", type_ = "string", json_path = ".spec.addresses"),
    printcolumn(
        name = "Total",
        type_ = "integer",
        json_path = ".status.ipAddresses.total"
    ),
    printcolumn(
        name = "Free",
        type_ = "integer",
        json_path = ".status.ipAddresses.free"
    ),
    printcolumn(
        name = "Used",
        type_ = "integer",
        json_path = ".status.ipAddresses.used"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct InClusterIPPoolSpec {
    /// Addresses, CIDRs and `from-to` ranges, of one family and one subnet.
    pub addresses: Vec<String>,
    /// The subnet's prefix length.
    #[schemars(range(min = 0, max = 128))]
    pub prefix: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway: Option<String>,
    /// Whether the subnet's network (and IPv4 broadcast) address may be handed out.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub allocate_reserved_ip_addresses: bool,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub excluded_addresses: Vec<String>,
    /// How long a released address is held back before it is handed out again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub address_reuse_grace_period_seconds: Option<i32>,
}

/// A pool for the claims of every namespace.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "ipam.cluster.x-k8s.io",
    version = "v1alpha2",
    kind = "GlobalInClusterIPPool",
    status = "InClusterIPPoolStatus",
    category = "cluster-api",
    printcolumn(name = "Addresses", type_ = "string", json_path = ".spec.addresses"),
    printcolumn(
        name = "Total",
        type_ = "integer",
        json_path = ".status.ipAddresses.total"
    ),
    printcolumn(
        name = "Free",
        type_ = "integer",
        json_path = ".status.ipAddresses.free"
    ),
    printcolumn(
        name = "Used",
        type_ = "integer",
        json_path = ".status.ipAddresses.used"
    )
)]
pub struct GlobalInClusterIPPoolSpec {
    #[serde(flatten)]
    pub spec: InClusterIPPoolSpec,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct InClusterIPPoolStatus {
    #[serde(
        rename = "ipAddresses",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub addresses: Option<AddressCounts>,
}

/// How many addresses a pool has, and how they are used.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AddressCounts {
    pub total: usize,
    pub free: usize,
    pub used: usize,
    /// Addresses handed out that the pool no longer lists.
    pub out_of_range: usize,
}

impl InClusterIPPoolSpec {
    /// The addresses the pool may hand out: what it lists, less the excluded ones, the
    /// subnet's network address (and IPv4 broadcast) unless reserved ones are allowed, and
    /// the gateway.
    pub fn usable(&self) -> Result<IpSet, String> {
        let listed = IpSet::of_entries(&self.addresses)?;
        let mut set = listed.clone();
        set.remove_set(&IpSet::of_entries(&self.excluded_addresses)?);
        if !self.allocate_reserved_ip_addresses {
            if let Some(first) = listed.first() {
                let (network, broadcast) = ipset::subnet(first, self.prefix)?;
                set.remove(network, network);
                if !network.v6 {
                    set.remove(broadcast, broadcast);
                }
            }
        }
        if let Some(gateway) = self.gateway.as_deref().filter(|g| !g.is_empty()) {
            let g = ipset::parse_ip(gateway)?;
            set.remove(g, g);
        }
        Ok(set)
    }

    /// What upstream's validating webhook says of the spec (nothing when it is valid).
    pub fn problems(&self) -> Vec<Problem> {
        let mut out = Vec::new();
        let mut problem = |field: &'static str, value: Value, detail: &str| {
            out.push(Problem {
                field,
                value,
                detail: detail.to_string(),
            })
        };
        if self.addresses.is_empty() {
            problem(
                "spec.addresses",
                json!(self.addresses),
                "addresses is required",
            );
        }
        let mut listed = IpSet::default();
        for a in &self.addresses {
            match IpSet::of_entry(a) {
                Ok(s) => listed.add_set(&s),
                Err(_) => problem("spec.addresses", json!(a), NOT_AN_ADDRESS),
            }
        }
        if listed.mixed() {
            let why = "provided addresses are of mixed IP families";
            problem("spec.addresses", json!(self.addresses), why);
        }
        if let Some(first) = listed.first().filter(|_| !listed.mixed()) {
            match ipset::subnet(first, self.prefix) {
                Err(_) => problem(
                    "spec.prefix",
                    json!(self.prefix),
                    "provided prefix is not valid",
                ),
                Ok((from, to)) => {
                    for a in &self.addresses {
                        let mut outside = IpSet::of_entry(a).unwrap_or_default();
                        outside.remove(from, to);
                        if !outside.is_empty() {
                            let why = "provided address belongs to a different subnet than others";
                            problem("spec.addresses", json!(a), why);
                        }
                    }
                }
            }
        }
        if let Some(g) = self.gateway.as_deref().filter(|g| !g.is_empty()) {
            match ipset::parse_ip(g) {
                Err(e) => problem("spec.gateway", json!(g), &e),
                Ok(g_addr) if listed.first().is_some_and(|f| f.v6 != g_addr.v6) => {
                    let why = "provided gateway and addresses are of mixed IP families";
                    problem("spec.gateway", json!(g), why);
                }
                Ok(_) => {}
            }
        }
        let mut excluded = IpSet::default();
        for a in &self.excluded_addresses {
            match IpSet::of_entry(a) {
                Ok(s) => excluded.add_set(&s),
                Err(_) => problem("spec.excludedAddresses", json!(a), NOT_AN_ADDRESS),
            }
        }
        let family = |s: &IpSet| s.first().map(|a| a.v6);
        let all_excluded = json!(self.excluded_addresses);
        if excluded.mixed() {
            let why = "provided addresses are of mixed IP families";
            problem("spec.excludedAddresses", all_excluded, why);
        } else if family(&excluded).is_some() && family(&excluded) != family(&listed) {
            let why = "addresses and excluded addresses are of mixed IP families";
            problem("spec.excludedAddresses", all_excluded, why);
        }
        out
    }
}

const NOT_AN_ADDRESS: &str = "provided address is not a valid IP, range, nor CIDR";

/// One thing wrong with a pool's spec, as upstream's webhook words it.
#[derive(Debug, Clone, PartialEq)]
pub struct Problem {
    pub field: &'static str,
    /// The value at fault.
    pub value: Value,
    pub detail: String,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: Invalid value: {}: {}",
            self.field, self.value, self.detail
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(addresses: &[&str], prefix: u32, gateway: Option<&str>) -> InClusterIPPoolSpec {
        InClusterIPPoolSpec {
            addresses: addresses.iter().map(|s| s.to_string()).collect(),
            prefix,
            gateway: gateway.map(str::to_string),
            ..Default::default()
        }
    }

    #[test]
    fn a_pool_hands_out_neither_its_gateway_nor_the_subnets_ends() {
        let p = pool(&["10.0.0.0/29"], 29, Some("10.0.0.1"));
        let usable = p.usable().unwrap();
        // 8 addresses, less network .0, broadcast .7 and the gateway .1.
        assert_eq!(usable.count(), 5);
        assert_eq!(
            usable.first().map(|a| a.ip().to_string()),
            Some("10.0.0.2".into())
        );
        let reserved = InClusterIPPoolSpec {
            allocate_reserved_ip_addresses: true,
            ..p
        };
        assert_eq!(reserved.usable().unwrap().count(), 7);
    }

    #[test]
    fn upstreams_webhook_rules_are_checked() {
        assert!(pool(&["10.0.0.10-10.0.0.20"], 24, Some("10.0.0.1"))
            .problems()
            .is_empty());
        let fields = |p: InClusterIPPoolSpec| {
            p.problems()
                .into_iter()
                .map(|p| p.field)
                .collect::<Vec<_>>()
        };
        assert_eq!(fields(pool(&[], 24, None)), ["spec.addresses"]);
        assert_eq!(
            fields(pool(&["10.0.0.1", "10.0.1.1"], 24, None)),
            ["spec.addresses"]
        );
        assert_eq!(
            fields(pool(&["10.0.0.1", "fd00::1"], 24, None)),
            ["spec.addresses"]
        );
        assert_eq!(fields(pool(&["10.0.0.1"], 40, None)), ["spec.prefix"]);
        assert_eq!(
            fields(pool(&["10.0.0.1"], 24, Some("fd00::1"))),
            ["spec.gateway"]
        );
        assert_eq!(
            fields(pool(&["10.0.0.1"], 24, Some("gw"))),
            ["spec.gateway"]
        );
    }
}
