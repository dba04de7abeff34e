//! Turning a request line into what it asks for: which endpoint, which resource path, which
//! query options. Pure functions, so the fuzz target can drive them directly.

use percent_encoding::percent_decode_str;
use std::collections::HashMap;

/// The endpoint a path names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// `/healthz`, `/livez`, `/readyz` and their sub-checks.
    Health,
    /// `/version`.
    Version,
    /// `/metrics`: Prometheus text.
    Metrics,
    /// `/metrics/state`: the objects' state metrics (kube-state-metrics' kind).
    StateMetrics,
    /// `/api`.
    CoreGroup,
    /// `/apis`.
    Groups,
    /// `/apis/{group}`.
    Group(String),
    /// `/api/v1` or `/apis/{group}/{version}`.
    GroupVersion { group: String, version: String },
    /// A resource collection, object or subresource.
    Resource(ResourcePath),
    /// `/openapi/...`.
    OpenApi(String),
    /// Anything else.
    Unknown,
}

/// A path under a group/version that names resources.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ResourcePath {
    pub group: String,
    pub version: String,
    pub namespace: Option<String>,
    pub resource: String,
    pub name: Option<String>,
    pub subresource: Option<String>,
    /// The deprecated `/watch/` path prefix was used.
    pub watch_prefix: bool,
}

/// A path segment that may not appear in a name (`.`, `..`, or containing `/` or `%`).
fn valid_segment(s: &str) -> bool {
    !s.is_empty() && s != "." && s != ".."
}

fn decode(seg: &str) -> Option<String> {
    let s = percent_decode_str(seg).decode_utf8().ok()?.into_owned();
    if s.contains('/') || !valid_segment(&s) {
        return None;
    }
    Some(s)
}

/// Parses a request path.
pub fn route(path: &str) -> Route {
    let trimmed = path.trim_end_matches('/');
    let segs: Vec<&str> = trimmed.split('/').skip(1).collect();
    let segs: Vec<String> = match segs.iter().map(|s| decode(s)).collect::<Option<Vec<_>>>() {
        Some(s) => s,
        None if trimmed.is_empty() => Vec::new(),
        None => return Route::Unknown,
    };
    let s: Vec<&str> = segs.iter().map(String::as_str).collect();
    match s.as_slice() {
        ["healthz" | "livez" | "readyz", ..] => Route::Health,
        ["version"] => Route::Version,
        ["metrics"] => Route::Metrics,
        ["metrics", "state"] => Route::StateMetrics,
        ["openapi", rest @ ..] => Route::OpenApi(rest.join("/")),
        ["api"] => Route::CoreGroup,
        ["apis"] => Route::Groups,
        ["apis", group] => Route::Group(group.to_string()),
        ["api", version] => Route::GroupVersion {
            group: String::new(),
            version: version.to_string(),
        },
        ["apis", group, version] => Route::GroupVersion {
            group: group.to_string(),
            version: version.to_string(),
        },
        ["api", version, rest @ ..] => resource_path("", version, rest),
        ["apis", group, version, rest @ ..] => resource_path(group, version, rest),
        _ => Route::Unknown,
    }
}

fn resource_path(group: &str, version: &str, rest: &[&str]) -> Route {
    let mut path = ResourcePath {
        group: group.to_string(),
        version: version.to_string(),
        ..Default::default()
    };
    let mut rest = rest;
    if let ["watch", tail @ ..] = rest {
        path.watch_prefix = true;
        rest = tail;
    }
    // `namespaces/{ns}/{resource}/...` names namespaced resources, except the namespace
    // subresources `status` and `finalize`, which belong to the namespace itself.
    if let ["namespaces", ns, resource, tail @ ..] = rest {
        if !(tail.is_empty() && (*resource == "status" || *resource == "finalize")) {
            path.namespace = Some(ns.to_string());
            rest = &rest[2..];
            let _ = (resource, tail);
        }
    }
    match rest {
        [resource] => path.resource = resource.to_string(),
        [resource, name] => {
            path.resource = resource.to_string();
            path.name = Some(name.to_string());
        }
        [resource, name, sub] => {
            path.resource = resource.to_string();
            path.name = Some(name.to_string());
            path.subresource = Some(sub.to_string());
        }
        _ => return Route::Unknown,
    }
    Route::Resource(path)
}

/// Query parameters, last value wins (as Go's `url.Values.Get` reads the first; kube clients
/// never repeat them).
#[derive(Debug, Clone, Default)]
pub struct Query(HashMap<String, String>);

impl Query {
    /// The query of a request made in-process (no URL to parse).
    pub fn from_pairs<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> Self {
        Query(
            pairs
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        )
    }

    pub fn parse(query: Option<&str>) -> Self {
        Query(
            form_urlencoded::parse(query.unwrap_or("").as_bytes())
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect(),
        )
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).map(String::as_str)
    }

    /// A boolean parameter (`true`/`1`, as Go's strconv.ParseBool accepts).
    pub fn flag(&self, key: &str) -> Result<bool, String> {
        match self.get(key) {
            None | Some("") => Ok(false),
            Some("1" | "t" | "T" | "true" | "TRUE" | "True") => Ok(true),
            Some("0" | "f" | "F" | "false" | "FALSE" | "False") => Ok(false),
            Some(other) => Err(format!("{key}: invalid boolean {other:?}")),
        }
    }

    /// A non-negative integer parameter.
    pub fn number(&self, key: &str) -> Result<Option<i64>, String> {
        match self.get(key) {
            None | Some("") => Ok(None),
            Some(v) => v
                .parse::<i64>()
                .map(Some)
                .map_err(|_| format!("{key}: invalid value {v:?}: must be an integer")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn res(path: &str) -> ResourcePath {
        match route(path) {
            Route::Resource(p) => p,
            other => panic!("{path}: {other:?}"),
        }
    }

    #[test]
    fn paths_map_to_resources() {
        let p = res("/api/v1/namespaces/default/pods/web");
        assert_eq!(
            (
                p.namespace.as_deref(),
                p.resource.as_str(),
                p.name.as_deref()
            ),
            (Some("default"), "pods", Some("web"))
        );
        let p = res("/api/v1/namespaces/default");
        assert_eq!(
            (p.namespace, p.resource.as_str(), p.name.as_deref()),
            (None, "namespaces", Some("default"))
        );
        let p = res("/api/v1/namespaces/kube-system/status");
        assert_eq!(
            (p.resource.as_str(), p.subresource.as_deref()),
            ("namespaces", Some("status"))
        );
        let p = res("/api/v1/namespaces/ns1/status/x");
        assert_eq!(
            (p.namespace.as_deref(), p.resource.as_str()),
            (Some("ns1"), "status")
        );
        let p = res("/apis/apps/v1/namespaces/a/deployments/d/scale");
        assert_eq!(
            (p.group.as_str(), p.subresource.as_deref()),
            ("apps", Some("scale"))
        );
        let p = res("/api/v1/watch/namespaces/a/pods");
        assert!(p.watch_prefix);
        assert_eq!(p.namespace.as_deref(), Some("a"));
        let p = res("/api/v1/pods");
        assert_eq!((p.namespace, p.name), (None, None));
        assert_eq!(
            route("/apis/apps/v1"),
            Route::GroupVersion {
                group: "apps".into(),
                version: "v1".into()
            }
        );
        assert_eq!(route("/readyz/ping"), Route::Health);
        assert_eq!(route("/api/v1/namespaces/a/pods/b/c/d"), Route::Unknown);
        assert_eq!(route("/api/v1/namespaces/%2e%2e/pods"), Route::Unknown);
        assert_eq!(route("/nonsense"), Route::Unknown);
    }
}
