//! Discovery: `/version`, `/api`, `/apis`, group and group/version documents, in the legacy
//! form and the aggregated (`apidiscovery.k8s.io/v2`) form kubectl asks for first.

use crate::http::{json_typed, json_value, Format, HandlerResult};
use crate::resources::ResourceInfo;
use crate::state::State;
use crate::status::ApiError;
use http::Response;
use serde_json::{json, Value};

pub(crate) fn version(state: &State) -> Value {
    let v = state.config.kubernetes_version.trim_start_matches('v');
    let mut parts = v.split('.');
    let major = parts.next().unwrap_or("1");
    let minor = parts.next().unwrap_or("0");
    json!({
        "major": major,
        "minor": minor,
        "gitVersion": format!("v{v}"),
        "gitCommit": "infrasim",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": concat!("infrasim ", env!("CARGO_PKG_VERSION")),
        "compiler": "rustc",
        "platform": format!("{}/{}", std::env::consts::OS, if cfg!(target_arch = "x86_64") { "amd64" } else { std::env::consts::ARCH }),
    })
}

fn resource_entry(r: &ResourceInfo) -> Value {
    let mut v = json!({
        "name": r.plural,
        "singularName": r.singular,
        "namespaced": r.namespaced,
        "kind": r.kind,
        "verbs": r.verbs(),
    });
    if !r.short_names.is_empty() {
        v["shortNames"] = json!(r.short_names);
    }
    if !r.categories.is_empty() {
        v["categories"] = json!(r.categories);
    }
    v
}

fn status_entry(r: &ResourceInfo) -> Value {
    json!({
        "name": format!("{}/status", r.plural),
        "singularName": "",
        "namespaced": r.namespaced,
        "kind": r.kind,
        "verbs": ["get", "patch", "update"],
    })
}

/// A subresource served beyond `status` and `scale`: (name, group, version, kind, verbs).
type Subresource = (
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    &'static [&'static str],
);

/// Exec and attach are listed because they are served: they answer that no process runs.
const POD_SUBRESOURCES: [Subresource; 7] = [
    ("attach", "", "v1", "PodAttachOptions", &["create", "get"]),
    ("binding", "", "v1", "Binding", &["create"]),
    (
        "ephemeralcontainers",
        "",
        "v1",
        "Pod",
        &["get", "patch", "update"],
    ),
    ("eviction", "policy", "v1", "Eviction", &["create"]),
    ("exec", "", "v1", "PodExecOptions", &["create", "get"]),
    ("log", "", "v1", "Pod", &["get"]),
    (
        "portforward",
        "",
        "v1",
        "PodPortForwardOptions",
        &["create", "get"],
    ),
];

const SERVICE_ACCOUNT_SUBRESOURCES: [Subresource; 1] = [(
    "token",
    "authentication.k8s.io",
    "v1",
    "TokenRequest",
    &["create"],
)];

const CSR_SUBRESOURCES: [Subresource; 1] = [(
    "approval",
    "certificates.k8s.io",
    "v1",
    "CertificateSigningRequest",
    &["get", "patch", "update"],
)];

const NAMESPACE_SUBRESOURCES: [Subresource; 1] = [("finalize", "", "v1", "Namespace", &["update"])];

/// The subresources a built-in kind serves beyond `status` and `scale`.
fn extra_subresources(r: &ResourceInfo) -> &'static [Subresource] {
    match (r.custom, r.group.as_str(), r.kind.as_str()) {
        (false, "", "Pod") => &POD_SUBRESOURCES,
        (false, "", "Namespace") => &NAMESPACE_SUBRESOURCES,
        (false, "", "ServiceAccount") => &SERVICE_ACCOUNT_SUBRESOURCES,
        (false, "certificates.k8s.io", "CertificateSigningRequest") => &CSR_SUBRESOURCES,
        _ => &[],
    }
}

fn aggregated_resource(r: &ResourceInfo) -> Value {
    let mut v = json!({
        "resource": r.plural,
        "responseKind": {"group": r.group, "version": r.version, "kind": r.kind},
        "scope": if r.namespaced { "Namespaced" } else { "Cluster" },
        "singularResource": r.singular,
        "verbs": r.verbs(),
    });
    if !r.short_names.is_empty() {
        v["shortNames"] = json!(r.short_names);
    }
    if !r.categories.is_empty() {
        v["categories"] = json!(r.categories);
    }
    let mut subresources = Vec::new();
    if r.has_status {
        subresources.push(json!({
            "subresource": "status",
            "responseKind": {"group": r.group, "version": r.version, "kind": r.kind},
            "verbs": ["get", "patch", "update"],
        }));
    }
    if r.scale.is_some() {
        subresources.push(json!({
            "subresource": "scale",
            "responseKind": {"group": "autoscaling", "version": "v1", "kind": "Scale"},
            "verbs": ["get", "patch", "update"],
        }));
    }
    for (name, group, version, kind, verbs) in extra_subresources(r) {
        subresources.push(json!({
            "subresource": name,
            "responseKind": {"group": group, "version": version, "kind": kind},
            "verbs": verbs,
        }));
    }
    if !subresources.is_empty() {
        v["subresources"] = Value::Array(subresources);
    }
    v
}

fn aggregated(state: &State, core: bool, version: &str) -> Response<crate::http::Body> {
    let items: Vec<Value> = state
        .registry
        .groups()
        .into_iter()
        .filter(|(g, _)| g.is_empty() == core)
        .map(|(group, versions)| {
            let versions: Vec<Value> = versions
                .iter()
                .map(|v| {
                    json!({
                        "version": v,
                        "resources": state.registry.in_group_version(&group, v).iter().map(|r| aggregated_resource(r)).collect::<Vec<_>>(),
                        "freshness": "Current",
                    })
                })
                .collect();
            json!({"metadata": {"name": group, "creationTimestamp": null}, "versions": versions})
        })
        .collect();
    let body = json!({
        "kind": "APIGroupDiscoveryList",
        "apiVersion": format!("apidiscovery.k8s.io/{version}"),
        "metadata": {},
        "items": items,
    });
    json_typed(
        200,
        serde_json::to_vec(&body).unwrap_or_default(),
        &format!("application/json;g=apidiscovery.k8s.io;v={version};as=APIGroupDiscoveryList"),
    )
}

pub(crate) fn core_group(state: &State, format: Format) -> Response<crate::http::Body> {
    if let Format::AggregatedDiscovery(v) = format {
        return aggregated(state, true, v);
    }
    json_value(
        200,
        &json!({
            "kind": "APIVersions",
            "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": ""}],
        }),
    )
}

fn group_document(group: &str, versions: &[String]) -> Value {
    let vs: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{group}/{v}"), "version": v}))
        .collect();
    json!({
        "name": group,
        "versions": vs,
        "preferredVersion": vs.first().cloned().unwrap_or(Value::Null),
    })
}

pub(crate) fn groups(state: &State, format: Format) -> Response<crate::http::Body> {
    if let Format::AggregatedDiscovery(v) = format {
        return aggregated(state, false, v);
    }
    let groups: Vec<Value> = state
        .registry
        .groups()
        .into_iter()
        .filter(|(g, _)| !g.is_empty())
        .map(|(g, versions)| group_document(&g, &versions))
        .collect();
    json_value(
        200,
        &json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}),
    )
}

pub(crate) fn group(state: &State, group: &str) -> HandlerResult {
    let versions = state
        .registry
        .groups()
        .into_iter()
        .find(|(g, _)| *g == group && !g.is_empty())
        .map(|(_, v)| v)
        .ok_or_else(|| ApiError::not_found("the server could not find the requested resource"))?;
    let mut doc = group_document(group, &versions);
    doc["kind"] = json!("APIGroup");
    doc["apiVersion"] = json!("v1");
    Ok(json_value(200, &doc))
}

pub(crate) fn group_version(state: &State, group: &str, version: &str) -> HandlerResult {
    let mut resources = Vec::new();
    for r in state.registry.in_group_version(group, version) {
        resources.push(resource_entry(&r));
        if r.has_status {
            resources.push(status_entry(&r));
        }
        if r.scale.is_some() {
            resources.push(json!({"name": format!("{}/scale", r.plural), "singularName": "", "namespaced": r.namespaced,
                                  "group": "autoscaling", "version": "v1", "kind": "Scale", "verbs": ["get", "patch", "update"]}));
        }
        for (name, group, version, kind, verbs) in extra_subresources(&r) {
            let mut entry = json!({"name": format!("{}/{name}", r.plural), "singularName": "", "namespaced": true,
                                   "kind": kind, "verbs": verbs});
            // Only a subresource of another group version names it.
            if !group.is_empty() && (*group != r.group || *version != r.version) {
                entry["group"] = json!(group);
                entry["version"] = json!(version);
            }
            resources.push(entry);
        }
    }
    if resources.is_empty() {
        return Err(ApiError::not_found(
            "the server could not find the requested resource",
        ));
    }
    let group_version = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    Ok(json_value(
        200,
        &json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": resources}),
    ))
}
