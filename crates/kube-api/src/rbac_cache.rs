//! The RBAC objects (roles, cluster roles and their bindings) decoded for the authorizer, and
//! kept until one of them changes.

use crate::selectors::LabelSelector;
use crate::values::At;
use infrasim_store::{Group, ReadAt};
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

const RBAC_RESOURCES: [&str; 4] = [
    "clusterroles.rbac.authorization.k8s.io",
    "clusterrolebindings.rbac.authorization.k8s.io",
    "roles.rbac.authorization.k8s.io",
    "rolebindings.rbac.authorization.k8s.io",
];

/// The RBAC objects, decoded, in the order of [`RBAC_RESOURCES`].
#[derive(Debug, Default)]
pub(crate) struct RbacObjects {
    pub lists: [Vec<Value>; 4],
    /// Each ClusterRole's rules with those it aggregates, resolved once per change rather
    /// than per request.
    cluster_rules: HashMap<String, Vec<Value>>,
}

impl RbacObjects {
    fn new(lists: [Vec<Value>; 4]) -> Self {
        let cluster_rules = lists[0]
            .iter()
            .filter_map(|r| r.at("/metadata/name").and_then(Value::as_str))
            .map(|name| (name.to_string(), cluster_role_rules(&lists[0], name)))
            .collect();
        RbacObjects {
            lists,
            cluster_rules,
        }
    }

    /// The rules of ClusterRole `name`, aggregated ones included (none if there is no such role).
    pub fn cluster_role_rules(&self, name: &str) -> &[Value] {
        self.cluster_rules
            .get(name)
            .map(Vec::as_slice)
            .unwrap_or_default()
    }
}

/// What identifies the content of one resource's snapshot without decoding it: how many
/// objects, and the largest and the sum of their resourceVersions (any write changes one).
type Fingerprint = [(usize, u64, u64); 4];

/// The decoded RBAC objects, kept until one of them changes: every non-admin request reads
/// them, and decoding a few hundred roles per request would dominate its cost.
#[derive(Debug, Default)]
pub(crate) struct RbacCache {
    cached: std::sync::Mutex<Option<(Fingerprint, Arc<RbacObjects>)>>,
}

impl RbacCache {
    /// The RBAC objects of `group` as they are now, decoded once per change.
    pub fn objects(&self, group: &Group) -> Arc<RbacObjects> {
        let snapshots: Vec<_> = RBAC_RESOURCES
            .iter()
            .map(|r| group.snapshot(r, ReadAt::Latest).ok())
            .collect();
        let mut fingerprint: Fingerprint = [(0, 0, 0); 4];
        for (fp, snapshot) in fingerprint.iter_mut().zip(&snapshots) {
            if let Some(s) = snapshot {
                *fp = s.objects.values().fold((0, 0, 0), |(n, max, sum), o| {
                    let rv = o.meta.resource_version;
                    (n + 1, max.max(rv), sum.wrapping_add(rv))
                });
            }
        }
        let mut cache = self.cached.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((fp, objects)) = cache.as_ref() {
            if *fp == fingerprint {
                return objects.clone();
            }
        }
        let mut lists: [Vec<Value>; 4] = Default::default();
        for (list, snapshot) in lists.iter_mut().zip(&snapshots) {
            if let Some(s) = snapshot {
                *list = s
                    .objects
                    .values()
                    .filter_map(|o| o.to_value().ok())
                    .collect();
            }
        }
        let objects = Arc::new(RbacObjects::new(lists));
        *cache = Some((fingerprint, objects.clone()));
        objects
    }
}

/// The rules of a ClusterRole, aggregated ones included.
fn cluster_role_rules(roles: &[Value], name: &str) -> Vec<Value> {
    let Some(role) = roles
        .iter()
        .find(|r| r.at("/metadata/name").and_then(Value::as_str) == Some(name))
    else {
        return Vec::new();
    };
    let mut rules: Vec<Value> = role
        .get("rules")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if let Some(selectors) = role
        .at("/aggregationRule/clusterRoleSelectors")
        .and_then(Value::as_array)
    {
        for sel in selectors {
            let expr: Vec<String> = sel
                .get("matchLabels")
                .and_then(Value::as_object)
                .map(|m| {
                    m.iter()
                        .filter_map(|(k, v)| v.as_str().map(|v| format!("{k}={v}")))
                        .collect()
                })
                .unwrap_or_default();
            let Ok(selector) = LabelSelector::parse(&expr.join(",")) else {
                continue;
            };
            for other in roles {
                let labels: BTreeMap<String, String> = other
                    .at("/metadata/labels")
                    .and_then(Value::as_object)
                    .map(|m| {
                        m.iter()
                            .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_string())))
                            .collect()
                    })
                    .unwrap_or_default();
                if !selector.is_empty()
                    && selector.matches(&labels)
                    && other.get("aggregationRule").is_none()
                {
                    rules.extend(
                        other
                            .get("rules")
                            .and_then(Value::as_array)
                            .cloned()
                            .unwrap_or_default(),
                    );
                }
            }
        }
    }
    rules
}
