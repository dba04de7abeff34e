//! The registry of resources the API serves: names, scope, short names, categories and the
//! k8s-openapi type each one is decoded into.
//!
//! Names, groups, versions, kinds and scopes come from k8s-openapi's `Resource` constants, so
//! they cannot drift from the Kubernetes types; short names and categories are not in those
//! types and are listed here as kube-apiserver publishes them.

use crate::field_path::FieldPath;
use crate::values::At;
use k8s_openapi::api::admissionregistration::v1 as admissionregistration;
use k8s_openapi::api::{
    apps::v1 as apps, authentication::v1 as authentication, authorization::v1 as authorization,
    autoscaling::v1 as autoscaling_v1, autoscaling::v2 as autoscaling, batch::v1 as batch,
    certificates::v1 as certificates, coordination::v1 as coordination, core::v1 as core,
    discovery::v1 as discovery, events::v1 as events, networking::v1 as networking,
    policy::v1 as policy, rbac::v1 as rbac, scheduling::v1 as scheduling, storage::v1 as storage,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as apiextensions;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1 as apiregistration;
use k8s_openapi::{ListableResource, NamespaceResourceScope, Resource};
use serde::{de::DeserializeOwned, Serialize};
use serde_json::Value;
use std::any::TypeId;
use std::collections::BTreeMap;
use std::sync::LazyLock;
use std::sync::{Arc, RwLock};

/// How a kind's request bodies are validated and pruned.
#[derive(Clone)]
pub enum Normalize {
    /// Decode into the kind's Rust type and back: this validates field types and drops
    /// unknown fields, as kube-apiserver's decoding into Go structs does.
    Typed(fn(&Value) -> Result<Value, String>),
    /// A CustomResourceDefinition version's structural schema: validate, prune, default.
    Schema(Arc<crate::schema::Schema>),
}

impl std::fmt::Debug for Normalize {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Normalize::Typed(_) => f.write_str("Typed"),
            Normalize::Schema(_) => f.write_str("Schema"),
        }
    }
}

/// Why a body was refused.
#[derive(Debug, Clone, PartialEq)]
pub enum NormalizeError {
    /// It does not decode into the kind's type (400).
    Decode(String),
    /// It breaks the schema: (field, message) causes (422).
    Invalid(Vec<(String, String)>),
}

/// A printer column of a custom resource (`additionalPrinterColumns`).
#[derive(Debug, Clone)]
pub struct PrinterColumn {
    pub name: String,
    pub ty: String,
    pub json_path: String,
    pub priority: i64,
    pub description: String,
    /// The OpenAPI format (`int32`, `date-time`, `name`...), passed on to clients.
    pub format: String,
}

/// One served resource.
#[derive(Debug)]
pub struct ResourceInfo {
    pub group: String,
    pub version: String,
    pub api_version: String,
    pub kind: String,
    pub list_kind: String,
    /// The plural name used in URLs (`pods`).
    pub plural: String,
    /// The lower-case kind (`pod`).
    pub singular: String,
    pub namespaced: bool,
    pub short_names: Vec<String>,
    pub categories: Vec<String>,
    /// Whether the resource has a `status` subresource (and so a main-resource update keeps
    /// the stored status).
    pub has_status: bool,
    /// The key of the resource inside a store group (`pods`, `deployments.apps`). All versions
    /// of a custom resource share it: one stored object, served in every version.
    pub store_key: String,
    pub normalize: Normalize,
    /// Printer columns of a custom resource; built-in kinds have theirs in `table`.
    pub printer_columns: Option<Vec<PrinterColumn>>,
    /// Whether this is a custom resource (served from a CustomResourceDefinition).
    pub custom: bool,
    /// A resource computed per request, never stored; `None` for stored ones.
    pub computed: Option<Computed>,
    /// Where the `scale` subresource reads and writes replicas, if the resource has one.
    pub scale: Option<ScalePaths>,
    /// The version custom objects are stored in (`None` for built-ins).
    pub storage_version: Option<String>,
    /// A custom kind's conversion webhook (`clientConfig`), when its CRD's conversion
    /// strategy is `Webhook`; without one, versions differ only in `apiVersion`.
    pub conversion: Option<Arc<Value>>,
    /// The warning every request to this version gets, when its CRD marks it deprecated.
    pub deprecation: Option<String>,
    /// The kind's OpenAPI schema: a reference into the generator's definitions for built-in
    /// kinds (from k8s-openapi), the version's `openAPIV3Schema` for custom ones.
    pub schema: SchemaSource,
    /// A built-in kind stored as another one (`events.k8s.io/v1` Events are `core/v1`
    /// Events), and how its objects are converted to and from the stored shape.
    pub stored_as: Option<StoredAs>,
    /// Whether a delete answers with the deleted object rather than a Success Status: the
    /// kinds whose kube-apiserver storage sets `ReturnDeletedObject` (see
    /// [`ResourceInfo::returning_deleted`]). Typed clients decode the answer as the kind
    /// (the Python client's `delete_namespaced_service` returns a `V1Service`), so it must
    /// be the one kube-apiserver gives. Custom resources never do.
    pub returns_deleted: bool,
}

/// How a built-in kind is kept as the objects of another (kube-apiserver stores one internal
/// type and serves it in several groups): where, and the conversions to the stored shape
/// and back, and of field selectors' labels.
#[derive(Debug, Clone, Copy)]
pub struct StoredAs {
    /// The store key of the kind it is stored as.
    pub store_key: &'static str,
    pub to_storage: fn(Value) -> Value,
    pub to_served: fn(Value) -> Value,
    /// A field selector's label as the stored kind's; `None` when not selectable.
    pub field_label: fn(&str) -> Option<String>,
}

/// How `events.k8s.io/v1` Events are stored: as `core/v1` ones (the conversions are
/// [`crate::event_versions`]'s).
const EVENTS_V1: StoredAs = StoredAs {
    store_key: "events",
    to_storage: crate::event_versions::to_core,
    to_served: crate::event_versions::to_events_v1,
    field_label: crate::event_versions::events_v1_field_label,
};

/// How `autoscaling/v1` HorizontalPodAutoscalers are stored: as `autoscaling/v2` ones (the
/// conversions are [`crate::hpa_versions`]'s).
const HPA_V1: StoredAs = StoredAs {
    store_key: "horizontalpodautoscalers.autoscaling",
    to_storage: crate::hpa_versions::to_v2,
    to_served: crate::hpa_versions::to_v1,
    field_label: crate::hpa_versions::field_label,
};

/// A JSONPath of a scale path (`.spec.replicas`) as a JSON pointer (`/spec/replicas`).
fn pointer(path: &str) -> String {
    path.trim_start_matches('.')
        .split('.')
        .fold(String::new(), |acc, seg| format!("{acc}/{seg}"))
}

impl ScalePaths {
    /// The autoscaling/v1 `Scale` of `object`: what `…/scale` serves, and what admission
    /// sees of a write through it.
    pub fn scale_of(&self, object: &Value) -> Value {
        let paths = self;
        let replicas = object
            .at(&pointer(&paths.spec))
            .and_then(Value::as_i64)
            .unwrap_or(0);
        let status_replicas = object
            .at(&pointer(&paths.status))
            .and_then(Value::as_i64)
            .unwrap_or(0);
        let selector = match &paths.selector {
            Some(p) if p == ".spec.selector" => {
                crate::selectors::selector_string(object.at("/spec/selector"))
            }
            Some(p) => object
                .at(&pointer(p))
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            None => String::new(),
        };
        let meta = object
            .get("metadata")
            .cloned()
            .unwrap_or(serde_json::json!({}));
        let mut status = serde_json::json!({"replicas": status_replicas});
        if !selector.is_empty() {
            status["selector"] = serde_json::json!(selector);
        }
        serde_json::json!({
            "kind": "Scale",
            "apiVersion": "autoscaling/v1",
            "metadata": {
                "name": meta.get("name"), "namespace": meta.get("namespace"), "uid": meta.get("uid"),
                "resourceVersion": meta.get("resourceVersion"), "creationTimestamp": meta.get("creationTimestamp"),
            },
            "spec": {"replicas": replicas},
            "status": status,
        })
    }
}

/// Where a resource's OpenAPI schema comes from.
#[derive(Clone)]
pub enum SchemaSource {
    /// k8s-openapi's JsonSchema for the kind: adds the definitions it needs, returns a `$ref`.
    Typed(fn(&mut schemars::SchemaGenerator) -> schemars::Schema),
    /// A CRD version's schema.
    Inline(Value),
}

impl std::fmt::Debug for SchemaSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            SchemaSource::Typed(_) => "Typed",
            SchemaSource::Inline(_) => "Inline",
        })
    }
}

fn schema_of<K: schemars::JsonSchema>(g: &mut schemars::SchemaGenerator) -> schemars::Schema {
    g.subschema_for::<K>()
}

/// The paths behind a `scale` subresource (as a CRD's `subresources.scale` names them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScalePaths {
    pub spec: String,
    pub status: String,
    /// `.spec.selector` (a LabelSelector, for built-ins) or a string field path.
    pub selector: Option<String>,
}

impl ScalePaths {
    /// Sets the object's desired replicas (at `spec`, making the fields on the way); `None`
    /// (a Scale without `spec.replicas`) sets 0, as a Scale's omitted replicas mean.
    pub fn set_spec_replicas(&self, object: &mut Value, replicas: Option<Value>) {
        let segments: Vec<&str> = self.spec.trim_start_matches('.').split('.').collect();
        let Some((last, parents)) = segments.split_last() else {
            return;
        };
        let mut cur = object;
        for seg in parents {
            if !cur.get(*seg).is_some_and(Value::is_object) {
                cur[*seg] = Value::Object(Default::default());
            }
            cur = &mut cur[*seg];
        }
        cur[*last] = replicas.unwrap_or(Value::from(0));
    }

    fn workload() -> Self {
        ScalePaths {
            spec: ".spec.replicas".into(),
            status: ".status.replicas".into(),
            selector: Some(".spec.selector".into()),
        }
    }
}

impl ResourceInfo {
    /// Makes a built-in kind the objects of another kind (see [`StoredAs`]).
    fn stored_as(mut self, how: StoredAs) -> Self {
        self.store_key = how.store_key.to_string();
        self.stored_as = Some(how);
        self
    }

    /// Marks a built-in kind whose deletes answer with the deleted object.
    fn returning_deleted(mut self) -> Self {
        self.returns_deleted = true;
        self
    }

    /// `group/version`, or `version` for the core group.
    pub fn group_version(&self) -> &str {
        &self.api_version
    }

    /// The verbs the resource supports, as discovery lists them.
    pub fn verbs(&self) -> &'static [&'static str] {
        match self.computed {
            Some(Computed::CreateOnly) => return &["create"],
            Some(Computed::ReadOnly) => return &["get", "list"],
            None => {}
        }
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

    /// An object's bytes as this resource serves them: custom resources are stored in their
    /// storage version and served in any version (conversion `None`: only `apiVersion`
    /// changes). Built-in objects pass through untouched.
    pub fn served_bytes(&self, bytes: &bytes::Bytes) -> bytes::Bytes {
        if !self.custom {
            return bytes.clone();
        }
        let prefix = format!("{{\"apiVersion\":\"{}\"", self.api_version);
        if bytes.starts_with(prefix.as_bytes()) {
            return bytes.clone();
        }
        match serde_json::from_slice::<Value>(bytes) {
            Ok(mut v) => {
                v["apiVersion"] = Value::String(self.api_version.clone());
                serde_json::to_vec(&v)
                    .map(bytes::Bytes::from)
                    .unwrap_or_else(|_| bytes.clone())
            }
            Err(_) => bytes.clone(),
        }
    }

    /// The failures of a custom kind's `x-kubernetes-validations` rules on `new`, replacing
    /// `old` if an update (built-in kinds have none).
    pub fn check_rules(&self, new: &Value, old: Option<&Value>) -> Vec<(String, String)> {
        match &self.normalize {
            Normalize::Typed(_) => Vec::new(),
            Normalize::Schema(schema) => schema.check_rules(new, old),
        }
    }

    /// What a custom kind's schema refuses in `value` (built-in kinds are checked as they
    /// are decoded).
    pub fn validate_schema(&self, value: &Value) -> Vec<(String, String)> {
        match &self.normalize {
            Normalize::Typed(_) => Vec::new(),
            Normalize::Schema(schema) => schema.validate(value),
        }
    }

    /// [`ResourceInfo::normalize_reporting`] as a write takes a body in: built-in kinds
    /// decoded (wrong types refused), custom ones pruned and defaulted, their schema checked
    /// later ([`ResourceInfo::validate_schema`]), after the mutating webhooks.
    pub fn prepare_reporting(
        &self,
        value: Value,
        report_unknown: bool,
    ) -> Result<(Value, Vec<String>), NormalizeError> {
        match &self.normalize {
            Normalize::Schema(schema) => Ok(schema.prepare_reporting(value)),
            Normalize::Typed(_) => self.normalize_reporting(value, report_unknown),
        }
    }

    /// How the kind's lists merge and are owned under server-side apply.
    pub fn lists(&self) -> crate::apply::Lists<'_> {
        match &self.normalize {
            _ if !self.custom => crate::apply::Lists::Builtin,
            Normalize::Schema(schema) => crate::apply::Lists::Custom(Some(schema)),
            Normalize::Typed(_) => crate::apply::Lists::Custom(None),
        }
    }

    /// Validates and prunes a body (types, unknown fields, schema defaults).
    pub fn normalize(&self, value: Value) -> Result<Value, NormalizeError> {
        self.normalize_reporting(value, false)
            .map(|(value, _)| value)
    }

    /// [`ResourceInfo::normalize`], and (when `report_unknown`) the paths of the fields
    /// decoding dropped because the kind does not have them (`spec.containers[0].bogus`).
    pub fn normalize_reporting(
        &self,
        value: Value,
        report_unknown: bool,
    ) -> Result<(Value, Vec<String>), NormalizeError> {
        match &self.normalize {
            Normalize::Typed(f) => {
                // Decoding into the type drops what it does not know without saying what: it
                // reads the input in place, which is then compared with what came out.
                let decoded = f(&value).map_err(NormalizeError::Decode)?;
                let mut unknown = Vec::new();
                if report_unknown {
                    unknown_fields(&value, &decoded, &FieldPath::Root, &mut unknown);
                }
                Ok((decoded, unknown))
            }
            // The schema walk prunes, so it can say what it pruned.
            Normalize::Schema(schema) => schema.normalize_reporting(value).map_err(|e| match e {
                crate::schema::SchemaError::Invalid(causes) => NormalizeError::Invalid(causes),
            }),
        }
    }
}

/// Paths present in `input` but dropped by decoding (`spec.containers[0].bogus`).
fn unknown_fields(input: &Value, decoded: &Value, path: &FieldPath<'_>, out: &mut Vec<String>) {
    match (input, decoded) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in a {
                let path = FieldPath::Key(path, k);
                match b.get(k) {
                    Some(d) => unknown_fields(v, d, &path, out),
                    None if v.is_null() => {}
                    None => out.push(path.to_string()),
                }
            }
        }
        (Value::Array(a), Value::Array(b)) => {
            for (i, (v, d)) in a.iter().zip(b).enumerate() {
                unknown_fields(v, d, &FieldPath::Index(path, i), out);
            }
        }
        _ => {}
    }
}

fn typed<K: DeserializeOwned + Serialize>(value: &Value) -> Result<Value, String> {
    let typed = K::deserialize(value).map_err(|e| e.to_string())?;
    serde_json::to_value(typed).map_err(|e| e.to_string())
}

fn info<K>(short_names: &[&str], categories: &[&str], has_status: bool) -> ResourceInfo
where
    K: Resource + ListableResource + DeserializeOwned + Serialize + schemars::JsonSchema + 'static,
{
    let store_key = if K::GROUP.is_empty() {
        K::URL_PATH_SEGMENT.to_string()
    } else {
        format!("{}.{}", K::URL_PATH_SEGMENT, K::GROUP)
    };
    ResourceInfo {
        group: K::GROUP.into(),
        version: K::VERSION.into(),
        api_version: K::API_VERSION.into(),
        kind: K::KIND.into(),
        list_kind: K::LIST_KIND.into(),
        plural: K::URL_PATH_SEGMENT.into(),
        singular: K::KIND.to_ascii_lowercase(),
        namespaced: TypeId::of::<K::Scope>() == TypeId::of::<NamespaceResourceScope>(),
        short_names: short_names.iter().map(|s| s.to_string()).collect(),
        categories: categories.iter().map(|s| s.to_string()).collect(),
        has_status,
        store_key,
        normalize: Normalize::Typed(typed::<K>),
        printer_columns: None,
        custom: false,
        computed: None,
        scale: matches!(
            K::KIND,
            "Deployment" | "ReplicaSet" | "StatefulSet" | "ReplicationController"
        )
        .then(ScalePaths::workload),
        schema: SchemaSource::Typed(schema_of::<K>),
        storage_version: None,
        conversion: None,
        deprecation: None,
        stored_as: None,
        returns_deleted: false,
    }
}

/// How a kind that is computed rather than stored is served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Computed {
    /// Answered on create (SelfSubjectAccessReview, TokenReview and the like).
    CreateOnly,
    /// Read with get and list (ComponentStatus, `metrics.k8s.io`'s kinds).
    ReadOnly,
}

/// A kind that is computed, not stored: create-only reviews, or read-only statuses.
fn computed<K>(how: Computed) -> ResourceInfo
where
    K: Resource + DeserializeOwned + Serialize + schemars::JsonSchema + 'static,
{
    ResourceInfo {
        group: K::GROUP.into(),
        version: K::VERSION.into(),
        api_version: K::API_VERSION.into(),
        kind: K::KIND.into(),
        list_kind: format!("{}List", K::KIND),
        plural: K::URL_PATH_SEGMENT.into(),
        singular: K::KIND.to_ascii_lowercase(),
        namespaced: TypeId::of::<K::Scope>() == TypeId::of::<NamespaceResourceScope>(),
        short_names: Vec::new(),
        categories: Vec::new(),
        has_status: false,
        store_key: String::new(),
        normalize: Normalize::Typed(typed::<K>),
        printer_columns: None,
        custom: false,
        computed: Some(how),
        scale: None,
        schema: SchemaSource::Typed(schema_of::<K>),
        storage_version: None,
        conversion: None,
        deprecation: None,
        stored_as: None,
        returns_deleted: false,
    }
}

const ALL: &[&str] = &["all"];
const NONE: &[&str] = &[];

/// Every resource the server knows: the built-in kinds, and custom resources registered and
/// removed at run time as CustomResourceDefinitions come and go.
#[derive(Debug)]
pub struct Registry {
    /// Shared by every server of the process: each simulated workload cluster has a
    /// registry, and its own copy of the built-in kinds' names, schemas and printers was about
    /// 65 KB a cluster.
    builtin: Arc<[Arc<ResourceInfo>]>,
    // Read on every request, written when a CRD changes: an RwLock keeps readers parallel.
    custom: RwLock<Vec<Arc<ResourceInfo>>>,
}

impl Registry {
    /// A registry of the built-in kinds (see [`builtin_kinds`]) and no custom resources yet.
    pub fn builtin() -> Self {
        Registry {
            builtin: BUILTIN.clone(),
            custom: RwLock::new(Vec::new()),
        }
    }

    /// The built-in kinds and `metrics.k8s.io`'s NodeMetrics and PodMetrics, for a server
    /// that simulates a cluster's nodes (see [`crate::resource_metrics`]).
    pub fn with_resource_metrics(self) -> Self {
        Registry {
            builtin: BUILTIN_WITH_RESOURCE_METRICS.clone(),
            ..self
        }
    }
}

/// The built-in kinds, built once per process.
static BUILTIN: LazyLock<Arc<[Arc<ResourceInfo>]>> =
    LazyLock::new(|| builtin_kinds().into_iter().map(Arc::new).collect());

/// The built-in kinds and the resource metrics' kinds, built once per process.
static BUILTIN_WITH_RESOURCE_METRICS: LazyLock<Arc<[Arc<ResourceInfo>]>> = LazyLock::new(|| {
    use crate::resource_metrics::types::{NodeMetrics, PodMetrics};
    BUILTIN
        .iter()
        .cloned()
        .chain([
            Arc::new(computed::<NodeMetrics>(Computed::ReadOnly)),
            Arc::new(computed::<PodMetrics>(Computed::ReadOnly)),
        ])
        .collect()
});

/// The built-in kinds. Those marked `returning_deleted` are the ones whose storage in
/// kube-apiserver (`pkg/registry/<group>/<resource>/storage/storage.go`) sets
/// `ReturnDeletedObject: true`; the rest answer a delete with a Success Status.
fn builtin_kinds() -> Vec<ResourceInfo> {
    vec![
        info::<core::Namespace>(&["ns"], NONE, true).returning_deleted(),
        info::<core::Node>(&["no"], NONE, true),
        info::<core::Pod>(&["po"], ALL, true).returning_deleted(),
        info::<core::Service>(&["svc"], ALL, true).returning_deleted(),
        info::<core::Endpoints>(&["ep"], NONE, false),
        info::<core::ConfigMap>(&["cm"], NONE, false),
        info::<core::Secret>(NONE, NONE, false),
        info::<core::ServiceAccount>(&["sa"], NONE, false).returning_deleted(),
        info::<core::Event>(&["ev"], NONE, false),
        info::<core::PersistentVolume>(&["pv"], NONE, true).returning_deleted(),
        info::<core::PersistentVolumeClaim>(&["pvc"], NONE, true).returning_deleted(),
        info::<core::LimitRange>(&["limits"], NONE, false),
        info::<core::ResourceQuota>(&["quota"], NONE, true).returning_deleted(),
        info::<core::PodTemplate>(NONE, NONE, false).returning_deleted(),
        info::<core::ReplicationController>(&["rc"], ALL, true),
        info::<apps::Deployment>(&["deploy"], ALL, true),
        info::<apps::DaemonSet>(&["ds"], ALL, true),
        info::<apps::StatefulSet>(&["sts"], ALL, true),
        info::<apps::ReplicaSet>(&["rs"], ALL, true),
        info::<apps::ControllerRevision>(NONE, NONE, false),
        info::<autoscaling::HorizontalPodAutoscaler>(&["hpa"], ALL, true),
        info::<autoscaling_v1::HorizontalPodAutoscaler>(&["hpa"], ALL, true).stored_as(HPA_V1),
        info::<batch::Job>(NONE, ALL, true),
        info::<batch::CronJob>(&["cj"], ALL, true),
        info::<rbac::Role>(NONE, NONE, false),
        info::<rbac::RoleBinding>(NONE, NONE, false),
        info::<rbac::ClusterRole>(NONE, NONE, false),
        info::<rbac::ClusterRoleBinding>(NONE, NONE, false),
        info::<coordination::Lease>(NONE, NONE, false),
        info::<certificates::CertificateSigningRequest>(&["csr"], NONE, true),
        info::<policy::PodDisruptionBudget>(&["pdb"], NONE, true),
        info::<storage::StorageClass>(&["sc"], NONE, false).returning_deleted(),
        info::<storage::CSIDriver>(NONE, NONE, false).returning_deleted(),
        info::<storage::CSINode>(NONE, NONE, false).returning_deleted(),
        info::<storage::VolumeAttachment>(NONE, NONE, true).returning_deleted(),
        info::<discovery::EndpointSlice>(NONE, NONE, false),
        info::<events::Event>(&["ev"], NONE, false).stored_as(EVENTS_V1),
        info::<networking::Ingress>(&["ing"], NONE, true),
        info::<networking::IngressClass>(NONE, NONE, false),
        info::<networking::NetworkPolicy>(&["netpol"], NONE, false),
        info::<scheduling::PriorityClass>(&["pc"], NONE, false),
        info::<admissionregistration::MutatingWebhookConfiguration>(
            NONE,
            &["api-extensions"],
            false,
        ),
        info::<admissionregistration::ValidatingWebhookConfiguration>(
            NONE,
            &["api-extensions"],
            false,
        ),
        info::<admissionregistration::ValidatingAdmissionPolicy>(NONE, &["api-extensions"], true),
        info::<admissionregistration::ValidatingAdmissionPolicyBinding>(
            NONE,
            &["api-extensions"],
            false,
        ),
        info::<apiregistration::APIService>(NONE, &["api-extensions"], true),
        info::<apiextensions::CustomResourceDefinition>(
            &["crd", "crds"],
            &["api-extensions"],
            true,
        ),
        computed::<authorization::SelfSubjectAccessReview>(Computed::CreateOnly),
        computed::<authorization::SubjectAccessReview>(Computed::CreateOnly),
        computed::<authorization::LocalSubjectAccessReview>(Computed::CreateOnly),
        computed::<authentication::SelfSubjectReview>(Computed::CreateOnly),
        computed::<authentication::TokenReview>(Computed::CreateOnly),
        ResourceInfo {
            short_names: vec!["cs".into()],
            deprecation: Some("v1 ComponentStatus is deprecated in v1.19+".into()),
            ..computed::<core::ComponentStatus>(Computed::ReadOnly)
        },
    ]
}

impl Registry {
    fn custom(&self) -> std::sync::RwLockReadGuard<'_, Vec<Arc<ResourceInfo>>> {
        self.custom.read().unwrap_or_else(|p| p.into_inner())
    }

    /// The resource served at `/apis/{group}/{version}/{plural}` (group `""` for `/api`).
    pub fn find(&self, group: &str, version: &str, plural: &str) -> Option<Arc<ResourceInfo>> {
        let hit =
            |r: &&Arc<ResourceInfo>| r.group == group && r.version == version && r.plural == plural;
        self.builtin
            .iter()
            .find(hit)
            .cloned()
            .or_else(|| self.custom().iter().find(hit).cloned())
    }

    /// The resource stored under `store_key` (`pods`, `deployments.apps`), in `api_version`
    /// if it is served in it, else in its version of the highest priority; never a kind
    /// stored as another (`events.k8s.io` Events are `events`, written as `v1` Events).
    pub fn stored_at(
        &self,
        store_key: &str,
        api_version: Option<&str>,
    ) -> Option<Arc<ResourceInfo>> {
        // On every in-process write: the registry is filtered where it stands, not copied.
        let stored_here = |r: &&Arc<ResourceInfo>| {
            r.store_key == store_key && r.stored_as.is_none() && r.computed.is_none()
        };
        let mut served: Vec<Arc<ResourceInfo>> =
            self.builtin.iter().filter(stored_here).cloned().collect();
        served.extend(self.custom().iter().filter(stored_here).cloned());
        if let Some(wanted) = api_version {
            if let Some(hit) = served.iter().find(|r| r.api_version == wanted) {
                return Some(hit.clone());
            }
        }
        served.sort_by(|a, b| crate::version::priority_order(&a.version, &b.version));
        served.into_iter().next()
    }

    /// All resources: built-in first, then custom ones in registration order.
    pub fn all(&self) -> Vec<Arc<ResourceInfo>> {
        let mut all = self.builtin.to_vec();
        all.extend(self.custom().iter().cloned());
        all
    }

    /// Replaces the custom resources registered under `crd_name` (all versions of one CRD).
    pub fn set_custom(&self, crd_name: &str, versions: Vec<ResourceInfo>) {
        let mut custom = self.custom.write().unwrap_or_else(|p| p.into_inner());
        custom.retain(|r| format!("{}.{}", r.plural, r.group) != crd_name);
        custom.extend(versions.into_iter().map(Arc::new));
    }

    /// Removes the custom resources of a CRD.
    pub fn remove_custom(&self, crd_name: &str) {
        self.set_custom(crd_name, Vec::new());
    }

    /// The served groups, core group (`""`) first and the rest in registration order, each
    /// with its versions by priority (see [`crate::version`]).
    pub fn groups(&self) -> Vec<(String, Vec<String>)> {
        let mut order: Vec<String> = Vec::new();
        let mut versions: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for r in self.all() {
            if !order.contains(&r.group) {
                order.push(r.group.clone());
            }
            let v = versions.entry(r.group.clone()).or_default();
            if !v.contains(&r.version) {
                v.push(r.version.clone());
            }
        }
        order
            .into_iter()
            .map(|g| {
                let mut v = versions.remove(&g).unwrap_or_default();
                // Discovery lists a group's versions by priority; the first is preferred.
                v.sort_by(|a, b| crate::version::priority_order(a, b));
                (g, v)
            })
            .collect()
    }

    /// The resources of one group/version.
    pub fn in_group_version(&self, group: &str, version: &str) -> Vec<Arc<ResourceInfo>> {
        self.all()
            .into_iter()
            .filter(|r| r.group == group && r.version == version)
            .collect()
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

    /// The kinds whose kube-apiserver storage sets `ReturnDeletedObject: true`, and only
    /// those, answer a delete with the object.
    #[test]
    fn the_kinds_returning_deleted_objects_are_kube_apiservers() {
        let reg = Registry::builtin();
        let mut returning: Vec<&str> = reg
            .builtin
            .iter()
            .filter(|r| r.returns_deleted)
            .map(|r| r.kind.as_str())
            .collect();
        returning.sort_unstable();
        assert_eq!(
            returning,
            [
                "CSIDriver",
                "CSINode",
                "Namespace",
                "PersistentVolume",
                "PersistentVolumeClaim",
                "Pod",
                "PodTemplate",
                "ResourceQuota",
                "Service",
                "ServiceAccount",
                "StorageClass",
                "VolumeAttachment",
            ]
        );
    }

    #[test]
    fn normalize_drops_unknown_fields_and_rejects_wrong_types() {
        let reg = Registry::builtin();
        let cm = reg.find("", "v1", "configmaps").unwrap();
        let v = cm
            .normalize(serde_json::json!({
                "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"},
                "data": {"k": "v"}, "bogus": 1
            }))
            .unwrap();
        assert!(v.get("bogus").is_none());
        assert_eq!(v["data"]["k"], "v");
        let err = cm.normalize(serde_json::json!({
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "data": {"k": 5}
        }));
        assert!(err.is_err());
    }
}
