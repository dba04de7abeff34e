//! The registry of resources the API serves: names, scope, short names, categories and the
//! k8s-openapi type each one is decoded into.
//!
//! Names, groups, versions, kinds and scopes come from k8s-openapi's `Resource` constants, so
//! they cannot drift from the Kubernetes types; short names and categories are not in those
//! types and are listed here as kube-apiserver publishes them.

use k8s_openapi::api::{
    apps::v1 as apps, batch::v1 as batch, coordination::v1 as coordination, core::v1 as core,
    discovery::v1 as discovery, events::v1 as events, networking::v1 as networking,
    policy::v1 as policy, rbac::v1 as rbac, scheduling::v1 as scheduling, storage::v1 as storage,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as apiextensions;
use k8s_openapi::{ListableResource, NamespaceResourceScope, Resource};
use serde::{de::DeserializeOwned, Serialize};
use serde_json::Value;
use std::any::TypeId;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// Decodes a request body into the kind's Rust type and back: this validates field types and
/// drops unknown fields, as kube-apiserver's decoding into Go structs does.
pub type Normalize = fn(Value) -> Result<Value, String>;

/// One served resource.
#[derive(Debug)]
pub struct ResourceInfo {
    pub group: &'static str,
    pub version: &'static str,
    pub api_version: &'static str,
    pub kind: &'static str,
    pub list_kind: &'static str,
    /// The plural name used in URLs (`pods`).
    pub plural: &'static str,
    /// The lower-case kind (`pod`).
    pub singular: String,
    pub namespaced: bool,
    pub short_names: &'static [&'static str],
    pub categories: &'static [&'static str],
    /// Whether the resource has a `status` subresource (and so a main-resource update keeps
    /// the stored status).
    pub has_status: bool,
    /// The key of the resource inside a store group (`pods`, `deployments.apps`).
    pub store_key: String,
    pub normalize: Normalize,
}

impl ResourceInfo {
    /// `group/version`, or `version` for the core group.
    pub fn group_version(&self) -> &'static str {
        self.api_version
    }

    /// The verbs the resource supports, as discovery lists them.
    pub fn verbs(&self) -> &'static [&'static str] {
        &[
            "create",
            "delete",
            "deletecollection",
            "get",
            "list",
            "patch",
            "update",
            "watch",
        ]
    }
}

fn normalize<K: DeserializeOwned + Serialize>(value: Value) -> Result<Value, String> {
    let typed: K = serde_json::from_value(value).map_err(|e| e.to_string())?;
    serde_json::to_value(typed).map_err(|e| e.to_string())
}

fn info<K>(
    short_names: &'static [&'static str],
    categories: &'static [&'static str],
    has_status: bool,
) -> ResourceInfo
where
    K: Resource + ListableResource + DeserializeOwned + Serialize + 'static,
{
    let store_key = if K::GROUP.is_empty() {
        K::URL_PATH_SEGMENT.to_string()
    } else {
        format!("{}.{}", K::URL_PATH_SEGMENT, K::GROUP)
    };
    ResourceInfo {
        group: K::GROUP,
        version: K::VERSION,
        api_version: K::API_VERSION,
        kind: K::KIND,
        list_kind: K::LIST_KIND,
        plural: K::URL_PATH_SEGMENT,
        singular: K::KIND.to_ascii_lowercase(),
        namespaced: TypeId::of::<K::Scope>() == TypeId::of::<NamespaceResourceScope>(),
        short_names,
        categories,
        has_status,
        store_key,
        normalize: normalize::<K>,
    }
}

const ALL: &[&str] = &["all"];
const NONE: &[&str] = &[];

/// Every resource the server knows, looked up by URL or by store key.
#[derive(Debug)]
pub struct Registry {
    list: Vec<Arc<ResourceInfo>>,
    by_path: HashMap<(String, String, String), Arc<ResourceInfo>>,
}

impl Registry {
    /// The built-in kinds.
    pub fn builtin() -> Self {
        let list = vec![
            info::<core::Namespace>(&["ns"], NONE, true),
            info::<core::Node>(&["no"], NONE, true),
            info::<core::Pod>(&["po"], ALL, true),
            info::<core::Service>(&["svc"], ALL, true),
            info::<core::Endpoints>(&["ep"], NONE, false),
            info::<core::ConfigMap>(&["cm"], NONE, false),
            info::<core::Secret>(NONE, NONE, false),
            info::<core::ServiceAccount>(&["sa"], NONE, false),
            info::<core::Event>(&["ev"], NONE, false),
            info::<core::PersistentVolume>(&["pv"], NONE, true),
            info::<core::PersistentVolumeClaim>(&["pvc"], NONE, true),
            info::<core::LimitRange>(&["limits"], NONE, false),
            info::<core::ResourceQuota>(&["quota"], NONE, true),
            info::<core::PodTemplate>(NONE, NONE, false),
            info::<core::ReplicationController>(&["rc"], ALL, true),
            info::<apps::Deployment>(&["deploy"], ALL, true),
            info::<apps::DaemonSet>(&["ds"], ALL, true),
            info::<apps::StatefulSet>(&["sts"], ALL, true),
            info::<apps::ReplicaSet>(&["rs"], ALL, true),
            info::<apps::ControllerRevision>(NONE, NONE, false),
            info::<batch::Job>(NONE, ALL, true),
            info::<batch::CronJob>(&["cj"], ALL, true),
            info::<rbac::Role>(NONE, NONE, false),
            info::<rbac::RoleBinding>(NONE, NONE, false),
            info::<rbac::ClusterRole>(NONE, NONE, false),
            info::<rbac::ClusterRoleBinding>(NONE, NONE, false),
            info::<coordination::Lease>(NONE, NONE, false),
            info::<policy::PodDisruptionBudget>(&["pdb"], NONE, true),
            info::<storage::StorageClass>(&["sc"], NONE, false),
            info::<storage::CSIDriver>(NONE, NONE, false),
            info::<storage::CSINode>(NONE, NONE, false),
            info::<storage::VolumeAttachment>(NONE, NONE, true),
            info::<discovery::EndpointSlice>(NONE, NONE, false),
            info::<events::Event>(&["ev"], NONE, false),
            info::<networking::Ingress>(&["ing"], NONE, true),
            info::<networking::IngressClass>(NONE, NONE, false),
            info::<networking::NetworkPolicy>(&["netpol"], NONE, false),
            info::<scheduling::PriorityClass>(&["pc"], NONE, false),
            info::<apiextensions::CustomResourceDefinition>(
                &["crd", "crds"],
                &["api-extensions"],
                true,
            ),
        ];
        let list: Vec<Arc<ResourceInfo>> = list.into_iter().map(Arc::new).collect();
        let by_path = list
            .iter()
            .map(|r| {
                (
                    (
                        r.group.to_string(),
                        r.version.to_string(),
                        r.plural.to_string(),
                    ),
                    r.clone(),
                )
            })
            .collect();
        Registry { list, by_path }
    }

    /// The resource served at `/apis/{group}/{version}/{plural}` (group `""` for `/api`).
    pub fn find(&self, group: &str, version: &str, plural: &str) -> Option<&Arc<ResourceInfo>> {
        self.by_path
            .get(&(group.to_string(), version.to_string(), plural.to_string()))
    }

    /// The resource of a kind.
    pub fn by_kind(&self, api_version: &str, kind: &str) -> Option<&Arc<ResourceInfo>> {
        self.list
            .iter()
            .find(|r| r.api_version == api_version && r.kind == kind)
    }

    /// All resources, in registration order.
    pub fn all(&self) -> &[Arc<ResourceInfo>] {
        &self.list
    }

    /// The served groups and their versions, core group (`""`) first, in registration order.
    pub fn groups(&self) -> Vec<(&'static str, Vec<&'static str>)> {
        let mut order: Vec<&'static str> = Vec::new();
        let mut versions: BTreeMap<&'static str, Vec<&'static str>> = BTreeMap::new();
        for r in &self.list {
            if !order.contains(&r.group) {
                order.push(r.group);
            }
            let v = versions.entry(r.group).or_default();
            if !v.contains(&r.version) {
                v.push(r.version);
            }
        }
        order
            .into_iter()
            .map(|g| (g, versions.remove(g).unwrap_or_default()))
            .collect()
    }

    /// The resources of one group/version.
    pub fn in_group_version<'a>(
        &'a self,
        group: &'a str,
        version: &'a str,
    ) -> impl Iterator<Item = &'a Arc<ResourceInfo>> + 'a {
        self.list
            .iter()
            .filter(move |r| r.group == group && r.version == version)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_kinds_carry_their_real_names_and_scope() {
        let reg = Registry::builtin();
        let pods = reg.find("", "v1", "pods").unwrap();
        assert_eq!(pods.kind, "Pod");
        assert_eq!(pods.list_kind, "PodList");
        assert!(pods.namespaced);
        assert_eq!(pods.store_key, "pods");
        let deploy = reg.find("apps", "v1", "deployments").unwrap();
        assert_eq!(deploy.api_version, "apps/v1");
        assert_eq!(deploy.store_key, "deployments.apps");
        let ns = reg.find("", "v1", "namespaces").unwrap();
        assert!(!ns.namespaced);
        let crd = reg
            .find("apiextensions.k8s.io", "v1", "customresourcedefinitions")
            .unwrap();
        assert!(!crd.namespaced);
        assert_eq!(reg.groups()[0].0, "");
    }

    #[test]
    fn normalize_drops_unknown_fields_and_rejects_wrong_types() {
        let reg = Registry::builtin();
        let cm = reg.find("", "v1", "configmaps").unwrap();
        let v = (cm.normalize)(serde_json::json!({
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"},
            "data": {"k": "v"}, "bogus": 1
        }))
        .unwrap();
        assert!(v.get("bogus").is_none());
        assert_eq!(v["data"]["k"], "v");
        let err = (cm.normalize)(serde_json::json!({
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "data": {"k": 5}
        }));
        assert!(err.is_err());
    }
}
