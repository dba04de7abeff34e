//! Authorization: RBAC as kube-apiserver evaluates it (Roles, ClusterRoles with aggregation,
//! RoleBindings, ClusterRoleBindings, the `system:masters` group), request attributes, and
//! impersonation; plus the bootstrap roles every cluster starts with.

use crate::auth::Identity;
use crate::request::{Query, Route};
use crate::state::State;
use crate::status::ApiError;
use crate::values::At;
use serde_json::{json, Value};

/// What a request asks to do, in RBAC's terms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attributes {
    pub verb: String,
    /// Resource requests: API group, resource, subresource, namespace, name.
    pub resource: Option<ResourceAttributes>,
    /// The path, for non-resource requests (`/healthz`, `/apis`).
    pub path: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ResourceAttributes {
    pub group: String,
    pub resource: String,
    pub subresource: String,
    pub namespace: String,
    pub name: String,
}

/// The attributes of a request.
pub(crate) fn attributes(
    method: &http::Method,
    path: &str,
    route: &Route,
    query: &Query,
) -> Attributes {
    let Route::Resource(p) = route else {
        return Attributes {
            verb: method.as_str().to_ascii_lowercase(),
            resource: None,
            path: path.to_string(),
        };
    };
    let watching = p.watch_prefix || query.flag("watch").unwrap_or(false);
    let verb = match (method.as_str(), p.name.is_some()) {
        ("GET" | "HEAD", _) if watching => "watch",
        ("GET" | "HEAD", true) => "get",
        ("GET" | "HEAD", false) => "list",
        ("POST", _) => "create",
        ("PUT", _) => "update",
        ("PATCH", _) => "patch",
        ("DELETE", true) => "delete",
        ("DELETE", false) => "deletecollection",
        (other, _) => {
            return Attributes {
                verb: other.to_ascii_lowercase(),
                resource: None,
                path: path.to_string(),
            }
        }
    };
    // A namespace's own requests are in that namespace, as kube-apiserver's resolver has it.
    let namespace = match (&p.namespace, p.resource.as_str(), &p.name) {
        (Some(ns), _, _) => ns.clone(),
        (None, "namespaces", Some(name)) => name.clone(),
        _ => String::new(),
    };
    Attributes {
        verb: verb.to_string(),
        resource: Some(ResourceAttributes {
            group: p.group.clone(),
            resource: p.resource.clone(),
            subresource: p.subresource.clone().unwrap_or_default(),
            namespace,
            name: p.name.clone().unwrap_or_default(),
        }),
        path: path.to_string(),
    }
}

/// Whether any string of the array at `key` satisfies `want`.
fn any_of(v: &Value, key: &str, want: impl Fn(&str) -> bool) -> bool {
    v.get(key)
        .and_then(Value::as_array)
        .is_some_and(|a| a.iter().filter_map(Value::as_str).any(want))
}

fn rule_allows(rule: &Value, attrs: &Attributes) -> bool {
    if !any_of(rule, "verbs", |v| v == "*" || v == attrs.verb) {
        return false;
    }
    match &attrs.resource {
        Some(r) => {
            if !any_of(rule, "apiGroups", |g| g == "*" || g == r.group) {
                return false;
            }
            let resource_ok = any_of(rule, "resources", |res| {
                res == "*"
                    || (r.subresource.is_empty() && res == r.resource)
                    || (!r.subresource.is_empty()
                        && res.split_once('/').is_some_and(|(a, b)| {
                            (a == r.resource || a == "*") && b == r.subresource
                        }))
            });
            if !resource_ok {
                return false;
            }
            let names = rule.get("resourceNames").and_then(Value::as_array);
            match names {
                Some(n) if !n.is_empty() => {
                    !r.name.is_empty() && n.iter().any(|x| x.as_str() == Some(r.name.as_str()))
                }
                _ => true,
            }
        }
        None => any_of(rule, "nonResourceURLs", |u| {
            u == "*"
                || u == attrs.path
                || (u.ends_with('*') && attrs.path.starts_with(u.trim_end_matches('*')))
        }),
    }
}

/// Whether one of `binding`'s subjects is `who`.
fn subjects_include(binding: &Value, who: &Identity, namespace: &str) -> bool {
    binding
        .get("subjects")
        .and_then(Value::as_array)
        .is_some_and(|s| s.iter().any(|s| subject_matches(s, who, namespace)))
}

fn subject_matches(subject: &Value, who: &Identity, binding_namespace: &str) -> bool {
    let s = |k: &str| subject.get(k).and_then(Value::as_str).unwrap_or("");
    match s("kind") {
        "User" => s("name") == who.user,
        "Group" => who.groups.iter().any(|g| g == s("name")),
        "ServiceAccount" => {
            let ns = if s("namespace").is_empty() {
                binding_namespace
            } else {
                s("namespace")
            };
            who.user == format!("system:serviceaccount:{ns}:{}", s("name"))
        }
        _ => false,
    }
}

/// Whether `who` may do `attrs`, and why (the binding that allowed it).
pub(crate) fn allowed(state: &State, who: &Identity, attrs: &Attributes) -> (bool, String) {
    if who.groups.iter().any(|g| g == "system:masters") {
        return (true, "member of system:masters".into());
    }
    let rbac = state.rbac.objects(&state.group);
    let [_, cluster_role_bindings, roles, role_bindings] = &rbac.lists;
    for binding in cluster_role_bindings {
        if !subjects_include(binding, who, "") {
            continue;
        }
        let role = binding
            .at("/roleRef/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        if rbac
            .cluster_role_rules(role)
            .iter()
            .any(|r| rule_allows(r, attrs))
        {
            let name = binding
                .at("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or("");
            return (
                true,
                format!("RBAC: allowed by ClusterRoleBinding \"{name}\" of ClusterRole \"{role}\""),
            );
        }
    }
    let namespace = attrs
        .resource
        .as_ref()
        .map(|r| r.namespace.as_str())
        .unwrap_or("");
    if !namespace.is_empty() {
        for binding in role_bindings {
            if binding.at("/metadata/namespace").and_then(Value::as_str) != Some(namespace) {
                continue;
            }
            if !subjects_include(binding, who, namespace) {
                continue;
            }
            let kind = binding
                .at("/roleRef/kind")
                .and_then(Value::as_str)
                .unwrap_or("");
            let role = binding
                .at("/roleRef/name")
                .and_then(Value::as_str)
                .unwrap_or("");
            let own_rules;
            let rules: &[Value] = if kind == "ClusterRole" {
                rbac.cluster_role_rules(role)
            } else {
                own_rules = roles.iter().find(|r| {
                    r.at("/metadata/name").and_then(Value::as_str) == Some(role)
                        && r.at("/metadata/namespace").and_then(Value::as_str) == Some(namespace)
                });
                own_rules
                    .and_then(|r| r.get("rules").and_then(Value::as_array))
                    .map(Vec::as_slice)
                    .unwrap_or_default()
            };
            if rules.iter().any(|r| rule_allows(r, attrs)) {
                let name = binding
                    .at("/metadata/name")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                return (
                    true,
                    format!(
                        "RBAC: allowed by RoleBinding \"{name}/{namespace}\" of {kind} \"{role}\""
                    ),
                );
            }
        }
    }
    (false, String::new())
}

/// Refuses what RBAC does not allow, with kube-apiserver's message.
pub(crate) fn authorize(state: &State, who: &Identity, attrs: &Attributes) -> Result<(), ApiError> {
    if allowed(state, who, attrs).0 {
        return Ok(());
    }
    Err(forbidden(who, attrs))
}

fn forbidden(who: &Identity, attrs: &Attributes) -> ApiError {
    match &attrs.resource {
        Some(r) => {
            let resource = if r.subresource.is_empty() {
                r.resource.clone()
            } else {
                format!("{}/{}", r.resource, r.subresource)
            };
            let qualified = if r.group.is_empty() {
                r.resource.clone()
            } else {
                format!("{}.{}", r.resource, r.group)
            };
            let subject = if r.name.is_empty() {
                qualified.clone()
            } else {
                format!("{qualified} \"{}\"", r.name)
            };
            let scope = if r.namespace.is_empty() {
                "at the cluster scope".to_string()
            } else {
                format!("in the namespace \"{}\"", r.namespace)
            };
            ApiError::forbidden(format!(
                "{subject} is forbidden: User \"{}\" cannot {} resource \"{resource}\" in API group \"{}\" {scope}",
                who.user, attrs.verb, r.group
            ))
            .with_details(json!({"name": r.name, "group": r.group, "kind": r.resource}))
        }
        None => ApiError::forbidden(format!(
            "forbidden: User \"{}\" cannot {} path \"{}\"",
            who.user, attrs.verb, attrs.path
        )),
    }
}

/// Applies `Impersonate-User` / `Impersonate-Group` headers, if the requester may.
pub(crate) fn impersonate(
    state: &State,
    who: Identity,
    headers: &http::HeaderMap,
) -> Result<Identity, ApiError> {
    let Some(user) = headers
        .get("impersonate-user")
        .and_then(|v| v.to_str().ok())
    else {
        if headers.contains_key("impersonate-group") {
            return Err(ApiError::internal(
                "requested impersonation of groups without impersonating a user",
            ));
        }
        return Ok(who);
    };
    let groups: Vec<String> = headers
        .get_all("impersonate-group")
        .iter()
        .filter_map(|v| v.to_str().ok().map(str::to_string))
        .collect();
    let check = |resource: &str, name: &str, namespace: &str| {
        let attrs = Attributes {
            verb: "impersonate".into(),
            resource: Some(ResourceAttributes {
                group: String::new(),
                resource: resource.into(),
                namespace: namespace.into(),
                name: name.into(),
                ..Default::default()
            }),
            path: String::new(),
        };
        authorize(state, &who, &attrs)
    };
    match user
        .strip_prefix("system:serviceaccount:")
        .and_then(|r| r.split_once(':'))
    {
        Some((ns, sa)) => check("serviceaccounts", sa, ns)?,
        None => check("users", user, "")?,
    }
    for g in &groups {
        check("groups", g, "")?;
    }
    let mut all_groups = groups;
    if let Some((ns, _)) = user
        .strip_prefix("system:serviceaccount:")
        .and_then(|r| r.split_once(':'))
    {
        all_groups.push("system:serviceaccounts".into());
        all_groups.push(format!("system:serviceaccounts:{ns}"));
    }
    if !all_groups.iter().any(|g| g == "system:authenticated") {
        all_groups.push("system:authenticated".into());
    }
    Ok(Identity {
        user: user.to_string(),
        groups: all_groups,
    })
}

fn rule(groups: &[&str], resources: &[&str], verbs: &[&str]) -> Value {
    json!({"apiGroups": groups, "resources": resources, "verbs": verbs})
}

const READ: &[&str] = &["get", "list", "watch"];
const WRITE: &[&str] = &["create", "delete", "deletecollection", "patch", "update"];

/// The cluster roles kube-apiserver bootstraps that clients rely on: the aggregated
/// user-facing roles (`admin`, `edit`, `view` and what aggregates into them) and the
/// `system:` roles for discovery, self-review, monitoring and public information.
pub(crate) fn bootstrap_roles() -> Vec<Value> {
    let agg = |to: &[&str]| {
        to.iter()
            .map(|t| {
                (
                    format!("rbac.authorization.k8s.io/aggregate-to-{t}"),
                    json!("true"),
                )
            })
            .collect::<serde_json::Map<String, Value>>()
    };
    vec![
        json!({"metadata": {"name": "cluster-admin"}, "rules": [
            rule(&["*"], &["*"], &["*"]), {"nonResourceURLs": ["*"], "verbs": ["*"]}]}),
        json!({"metadata": {"name": "admin"}, "aggregationRule": {"clusterRoleSelectors": [
            {"matchLabels": {"rbac.authorization.k8s.io/aggregate-to-admin": "true"}}]}, "rules": []}),
        json!({"metadata": {"name": "edit", "labels": agg(&["admin"])}, "aggregationRule": {"clusterRoleSelectors": [
            {"matchLabels": {"rbac.authorization.k8s.io/aggregate-to-edit": "true"}}]}, "rules": []}),
        json!({"metadata": {"name": "view", "labels": agg(&["admin", "edit"])}, "aggregationRule": {"clusterRoleSelectors": [
            {"matchLabels": {"rbac.authorization.k8s.io/aggregate-to-view": "true"}}]}, "rules": []}),
        json!({"metadata": {"name": "system:aggregate-to-view", "labels": agg(&["view", "edit", "admin"])}, "rules": [
            rule(&[""], WORKLOADS_CORE, READ), rule(&["apps"], WORKLOADS_APPS, READ),
            rule(&["batch"], &["jobs", "cronjobs", "jobs/status", "cronjobs/status"], READ),
            rule(&["autoscaling"], &["horizontalpodautoscalers", "horizontalpodautoscalers/status"], READ),
            rule(&["policy"], &["poddisruptionbudgets", "poddisruptionbudgets/status"], READ),
            rule(&["networking.k8s.io"], &["ingresses", "ingresses/status", "networkpolicies"], READ),
            rule(&["discovery.k8s.io"], &["endpointslices"], READ),
            rule(&["coordination.k8s.io"], &["leases"], READ)]}),
        json!({"metadata": {"name": "system:aggregate-to-edit", "labels": agg(&["edit", "admin"])}, "rules": [
            rule(&[""], &["pods", "pods/attach", "pods/exec", "pods/portforward", "pods/proxy", "pods/eviction",
                          "services", "services/proxy", "endpoints", "configmaps", "secrets", "persistentvolumeclaims",
                          "replicationcontrollers", "replicationcontrollers/scale", "serviceaccounts",
                          "serviceaccounts/token", "events"], WRITE),
            rule(&[""], &["secrets"], READ),
            rule(&["apps"], WORKLOADS_APPS, WRITE),
            rule(&["batch"], &["jobs", "cronjobs"], WRITE),
            rule(&["autoscaling"], &["horizontalpodautoscalers"], WRITE),
            rule(&["policy"], &["poddisruptionbudgets"], WRITE),
            rule(&["networking.k8s.io"], &["ingresses", "networkpolicies"], WRITE),
            rule(&["coordination.k8s.io"], &["leases"], WRITE)]}),
        json!({"metadata": {"name": "system:aggregate-to-admin", "labels": agg(&["admin"])}, "rules": [
            rule(&["rbac.authorization.k8s.io"], &["roles", "rolebindings"], &["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]),
            rule(&["authorization.k8s.io"], &["localsubjectaccessreviews"], &["create"])]}),
        json!({"metadata": {"name": "system:discovery"}, "rules": [
            {"nonResourceURLs": ["/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez", "/readyz",
                                 "/openapi", "/openapi/*", "/version", "/version/"], "verbs": ["get"]}]}),
        json!({"metadata": {"name": "system:basic-user"}, "rules": [
            rule(&["authorization.k8s.io"], &["selfsubjectaccessreviews", "selfsubjectrulesreviews"], &["create"]),
            rule(&["authentication.k8s.io"], &["selfsubjectreviews"], &["create"])]}),
        // kube-apiserver's, and `/metrics/state`: this plane serves the objects' state
        // metrics that a kube-state-metrics beside kube-apiserver would.
        json!({"metadata": {"name": "system:monitoring"}, "rules": [
            {"nonResourceURLs": ["/healthz", "/healthz/*", "/livez", "/livez/*", "/metrics", "/metrics/slis",
                                 "/metrics/state", "/readyz", "/readyz/*"], "verbs": ["get"]}]}),
        // kube-controller-manager's certificate signer (`csrsigning`), which signs as its
        // service account for the kubernetes.io signers.
        json!({"metadata": {"name": "system:controller:certificate-controller"}, "rules": [
            rule(&["certificates.k8s.io"], &["certificatesigningrequests"], &["delete", "get", "list", "watch"]),
            rule(&["certificates.k8s.io"], &["certificatesigningrequests/approval", "certificatesigningrequests/status"], &["update"]),
            {"apiGroups": ["certificates.k8s.io"], "resources": ["signers"], "verbs": ["approve"],
             "resourceNames": ["kubernetes.io/kube-apiserver-client-kubelet", "kubernetes.io/legacy-unknown"]},
            {"apiGroups": ["certificates.k8s.io"], "resources": ["signers"], "verbs": ["sign"],
             "resourceNames": ["kubernetes.io/kube-apiserver-client", "kubernetes.io/kube-apiserver-client-kubelet",
                               "kubernetes.io/kubelet-serving", "kubernetes.io/legacy-unknown"]},
            rule(&["authorization.k8s.io"], &["subjectaccessreviews"], &["create"])]}),
        // kube-controller-manager's HorizontalPodAutoscaler controller, which writes as its
        // service account: its HPAs, its targets' scale, its pods' resource metrics.
        json!({"metadata": {"name": "system:controller:horizontal-pod-autoscaler"}, "rules": [
            rule(&["autoscaling"], &["horizontalpodautoscalers"], &["get", "list", "watch"]),
            rule(&["autoscaling"], &["horizontalpodautoscalers/status"], &["update"]),
            rule(&["*"], &["*/scale"], &["get", "update"]),
            rule(&[""], &["pods"], &["list"]),
            rule(&["metrics.k8s.io"], &["pods"], &["list"]),
            rule(&["", "events.k8s.io"], &["events"], &["create", "patch", "update"])]}),
        // What metrics-server's manifest adds to view, edit and admin: `kubectl top`.
        json!({"metadata": {"name": "system:aggregated-metrics-reader", "labels": agg(&["view", "edit", "admin"])}, "rules": [
            rule(&["metrics.k8s.io"], &["pods", "nodes"], READ)]}),
        json!({"metadata": {"name": "system:public-info-viewer"}, "rules": [
            {"nonResourceURLs": ["/healthz", "/livez", "/readyz", "/version", "/version/"], "verbs": ["get"]}]}),
    ]
}

/// The bindings of the bootstrapped roles: (binding, role, subject), the subject a group or
/// `system:serviceaccount:<namespace>:<name>`.
pub(crate) const BOOTSTRAP_BINDINGS: &[(&str, &str, &str)] = &[
    (
        "system:controller:horizontal-pod-autoscaler",
        "system:controller:horizontal-pod-autoscaler",
        "system:serviceaccount:kube-system:horizontal-pod-autoscaler",
    ),
    (
        "system:controller:certificate-controller",
        "system:controller:certificate-controller",
        "system:serviceaccount:kube-system:certificate-controller",
    ),
    ("cluster-admin", "cluster-admin", "system:masters"),
    (
        "system:discovery",
        "system:discovery",
        "system:authenticated",
    ),
    (
        "system:basic-user",
        "system:basic-user",
        "system:authenticated",
    ),
    (
        "system:monitoring",
        "system:monitoring",
        "system:monitoring",
    ),
    (
        "system:public-info-viewer",
        "system:public-info-viewer",
        "system:authenticated",
    ),
];

/// The core resources the aggregated `view` role reads.
const WORKLOADS_CORE: &[&str] = &[
    "pods",
    "pods/log",
    "pods/status",
    "services",
    "services/status",
    "endpoints",
    "configmaps",
    "persistentvolumeclaims",
    "persistentvolumeclaims/status",
    "replicationcontrollers",
    "replicationcontrollers/scale",
    "events",
    "serviceaccounts",
    "limitranges",
    "resourcequotas",
    "resourcequotas/status",
    "namespaces",
    "namespaces/status",
    "bindings",
];

/// The `apps` resources the aggregated roles read and write.
const WORKLOADS_APPS: &[&str] = &[
    "deployments",
    "deployments/scale",
    "deployments/status",
    "daemonsets",
    "daemonsets/status",
    "statefulsets",
    "statefulsets/scale",
    "statefulsets/status",
    "replicasets",
    "replicasets/scale",
    "replicasets/status",
    "controllerrevisions",
];
