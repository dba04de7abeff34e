//! What an API server measures of its requests, under the names and labels dashboards
//! already read: the management plane as kube-apiserver (`apiserver_request_total`,
//! `apiserver_request_duration_seconds`, `apiserver_current_inflight_requests`,
//! `apiserver_longrunning_requests`), each workload cluster's server as Cluster API's
//! in-memory provider (`inmemory_apiserver_request_total` and `_duration_seconds`, with the
//! cluster's name, the host, the route, the method and the user agent). Both kinds of server
//! share the process's families, so one scrape of the plane sees every cluster.
//!
//! The labels are bounded: `path` is the route's pattern (`/apis/{group}/{version}/...`),
//! never the request's path, and a user agent is cut at [`MAX_USER_AGENT`] bytes.
//!
//! A watch or a port-forward counts as long-running from its answer until its stream
//! ends; its duration is the time to its answer, as nothing is measured after it.

use crate::request::{Query, ResourcePath, Route};
use http::{HeaderMap, Method};
use infrasim_metrics::buckets::APISERVER_REQUEST_DURATION;
use infrasim_metrics::table::{write_label, CounterTable, HistogramTable, LabelSet};
use infrasim_metrics::Metrics;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::metrics::MetricType;
use std::sync::Arc;
use std::time::Instant;

/// The longest user agent kept as a label value.
pub const MAX_USER_AGENT: usize = 128;

type Histograms<L> = Family<L, Histogram, fn() -> Histogram>;

fn duration_histogram() -> Histogram {
    Histogram::new(APISERVER_REQUEST_DURATION)
}

/// kube-apiserver's labels of a request.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Request {
    verb: &'static str,
    dry_run: String,
    group: String,
    version: String,
    resource: String,
    subresource: String,
    scope: &'static str,
    component: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Answered {
    #[prometheus(flatten)]
    request: Request,
    code: String,
}

/// The in-memory provider's labels beyond kube-apiserver's.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
struct WorkloadExtra {
    method: String,
    host: String,
    path: String,
    cluster_name: String,
    user_agent: String,
}

/// A workload cluster's request: kept in a [`HistogramTable`], which encodes its labels once
/// (tens of thousands of clusters make hundreds of thousands of these series).
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
struct Workload {
    request: Request,
    extra: WorkloadExtra,
}

impl LabelSet for Workload {
    fn write(&self, out: &mut String) {
        let r = &self.request;
        let e = &self.extra;
        let labels = [
            ("verb", r.verb),
            ("dry_run", &r.dry_run),
            ("group", &r.group),
            ("version", &r.version),
            ("resource", &r.resource),
            ("subresource", &r.subresource),
            ("scope", r.scope),
            ("component", r.component),
            ("method", &e.method),
            ("host", &e.host),
            ("path", &e.path),
            ("cluster_name", &e.cluster_name),
            ("user_agent", &e.user_agent),
        ];
        for (i, (name, value)) in labels.into_iter().enumerate() {
            write_label(out, name, value, i == 0);
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq)]
struct WorkloadAnswered {
    labels: Workload,
    code: String,
}

impl LabelSet for WorkloadAnswered {
    fn write(&self, out: &mut String) {
        self.labels.write(out);
        write_label(out, "code", &self.code, false);
    }
}

/// kube-apiserver's labels of a long-running request (no dry run: nothing long-running is one).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Long {
    verb: &'static str,
    group: String,
    version: String,
    resource: String,
    subresource: String,
    scope: &'static str,
    component: &'static str,
}

impl From<&Request> for Long {
    fn from(r: &Request) -> Self {
        Long {
            verb: r.verb,
            group: r.group.clone(),
            version: r.version.clone(),
            resource: r.resource.clone(),
            subresource: r.subresource.clone(),
            scope: r.scope,
            component: r.component,
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct InFlight {
    request_kind: &'static str,
}

/// kube-apiserver's labels of a watch event.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Watched {
    group: String,
    version: String,
    kind: String,
}

#[derive(Debug)]
struct Families {
    watch_events: Family<Watched, Counter>,
    total: Family<Answered, Counter>,
    duration: Histograms<Request>,
    inflight: Family<InFlight, Gauge>,
    longrunning: Family<Long, Gauge>,
    workload_total: CounterTable<WorkloadAnswered>,
    workload_duration: HistogramTable<Workload>,
}

/// Whose requests a server counts.
#[derive(Clone, Debug)]
enum Server {
    Plane,
    Workload(Arc<str>),
}

/// A server's handle on the request families; clones share them.
#[derive(Clone, Debug)]
pub struct RequestMetrics {
    families: Arc<Families>,
    server: Server,
    registry: Metrics,
}

impl RequestMetrics {
    /// Registers the families in `metrics` (once per process) and returns the management
    /// plane's handle; [`RequestMetrics::for_workload`] gives the clusters' theirs.
    pub fn register(metrics: &Metrics) -> Self {
        let families = Families {
            watch_events: Family::default(),
            total: Family::default(),
            duration: Family::new_with_constructor(duration_histogram),
            inflight: Family::default(),
            longrunning: Family::default(),
            workload_total: CounterTable::new(
                "inmemory_apiserver_request",
                "Number of HTTP requests",
            ),
            workload_duration: HistogramTable::new(
                "inmemory_apiserver_request_duration_seconds",
                "Request latency in seconds",
                &APISERVER_REQUEST_DURATION,
            ),
        };
        metrics.register(
            "apiserver_request",
            "Counter of apiserver requests broken out for each verb, dry run value, group, version, resource, scope, component, and HTTP response code",
            families.total.clone(),
        );
        metrics.register(
            "apiserver_request_duration_seconds",
            "Response latency distribution in seconds for each verb, dry run value, group, version, resource, subresource, scope and component",
            families.duration.clone(),
        );
        metrics.register(
            "apiserver_current_inflight_requests",
            "Maximal number of currently used inflight request limit of this apiserver per request kind",
            families.inflight.clone(),
        );
        metrics.register(
            "apiserver_longrunning_requests",
            "Gauge of all active long-running apiserver requests broken out by verb, group, version, resource, scope and component",
            families.longrunning.clone(),
        );
        metrics.register(
            "apiserver_watch_events",
            "Number of events sent in watch clients",
            families.watch_events.clone(),
        );
        metrics.register_table(Arc::new(families.workload_total.clone()));
        metrics.register_table(Arc::new(families.workload_duration.clone()));
        // Both kinds of request, present from the start as kube-apiserver's are.
        for kind in ["readOnly", "mutating"] {
            let _ = families
                .inflight
                .get_or_create(&InFlight { request_kind: kind });
        }
        RequestMetrics {
            families: Arc::new(families),
            server: Server::Plane,
            registry: metrics.clone(),
        }
    }

    /// The handle of the workload cluster `cluster`'s server.
    pub fn for_workload(&self, cluster: &str) -> Self {
        RequestMetrics {
            families: self.families.clone(),
            server: Server::Workload(cluster.into()),
            registry: self.registry.clone(),
        }
    }

    /// The counter of the events a watch of `kind` sends, for the management plane's watches
    /// (a workload cluster's server counts none: the in-memory provider has no such family).
    pub(crate) fn watch_events(&self, group: &str, version: &str, kind: &str) -> Option<Counter> {
        match self.server {
            Server::Plane => Some(
                self.families
                    .watch_events
                    .get_or_create(&Watched {
                        group: group.to_string(),
                        version: version.to_string(),
                        kind: kind.to_string(),
                    })
                    .clone(),
            ),
            Server::Workload(_) => None,
        }
    }

    /// The registry the families are in, for others to register theirs beside them.
    pub fn registry(&self) -> &Metrics {
        &self.registry
    }

    /// The whole registry in `format` when this is the management plane's handle (its
    /// `/metrics` is the process's); `None` for a workload cluster's server.
    pub(crate) fn render(&self, format: infrasim_metrics::Format) -> Option<String> {
        match self.server {
            Server::Plane => Some(self.registry.render(format)),
            Server::Workload(_) => None,
        }
    }

    /// The objects' state metrics when this is the management plane's handle; `None` for
    /// a workload cluster's server.
    pub(crate) fn state(&self) -> Option<&infrasim_metrics::state::StateMetrics> {
        match self.server {
            Server::Plane => Some(self.registry.state()),
            Server::Workload(_) => None,
        }
    }

    /// Starts measuring a request (authenticated and routed); the returned value records it
    /// when its answer is known.
    pub(crate) fn start(
        &self,
        method: &Method,
        uri: &http::Uri,
        headers: &HeaderMap,
        route: &Route,
        query: &Query,
    ) -> Observation {
        let request = labels(method, route, query, headers);
        let kind = match request.verb {
            "WATCH" | "CONNECT" => Kind::LongRunning,
            "GET" | "LIST" => Kind::InFlight("readOnly"),
            _ => Kind::InFlight("mutating"),
        };
        if let Kind::InFlight(k) = kind {
            self.families
                .inflight
                .get_or_create(&InFlight { request_kind: k })
                .inc();
        }
        let workload = match &self.server {
            Server::Plane => None,
            Server::Workload(cluster) => Some(WorkloadExtra {
                method: method.as_str().to_string(),
                host: host(uri, headers),
                path: pattern(route),
                cluster_name: cluster.to_string(),
                user_agent: user_agent(headers),
            }),
        };
        Observation {
            metrics: self.clone(),
            request,
            workload,
            kind,
            started: Instant::now(),
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum Kind {
    InFlight(&'static str),
    LongRunning,
}

/// One request being measured.
#[derive(Debug)]
pub(crate) struct Observation {
    metrics: RequestMetrics,
    request: Request,
    workload: Option<WorkloadExtra>,
    kind: Kind,
    started: Instant,
}

/// Keeps a long-running request counted while its answer streams; dropped with the stream.
#[derive(Debug)]
pub(crate) struct LongRunning {
    gauge: Gauge,
}

impl Drop for LongRunning {
    fn drop(&mut self) {
        self.gauge.dec();
    }
}

impl Observation {
    /// Records the answer's `status`; for a long-running request, what keeps it counted
    /// until its stream ends (see [`crate::http::Body`]'s wrapping in the handler).
    pub(crate) fn finish(self, status: u16) -> Option<LongRunning> {
        let seconds = self.started.elapsed().as_secs_f64();
        let f = &self.metrics.families;
        let code = status.to_string();
        match self.workload {
            None => {
                f.total
                    .get_or_create(&Answered {
                        request: self.request.clone(),
                        code,
                    })
                    .inc();
                f.duration.get_or_create(&self.request).observe(seconds);
            }
            Some(extra) => {
                let labels = Workload {
                    request: self.request.clone(),
                    extra,
                };
                f.workload_duration.observe(&labels, seconds);
                let answered = WorkloadAnswered { labels, code };
                f.workload_total.inc(&answered);
            }
        }
        match self.kind {
            Kind::InFlight(k) => {
                f.inflight
                    .get_or_create(&InFlight { request_kind: k })
                    .dec();
                None
            }
            // Only a stream that was opened stays open; a refused one is over.
            Kind::LongRunning if (200..300).contains(&status) || status == 101 => {
                let gauge = f
                    .longrunning
                    .get_or_create(&Long::from(&self.request))
                    .clone();
                gauge.inc();
                Some(LongRunning { gauge })
            }
            Kind::LongRunning => None,
        }
    }
}

/// Registers `apiserver_storage_objects`: how many objects `group` holds per resource
/// (`pods`, `clusters.cluster.x-k8s.io`), counted at each scrape.
pub fn register_storage(metrics: &Metrics, group: Arc<infrasim_store::Group>) {
    metrics.register_collector(Box::new(StorageObjects(group)));
}

struct StorageObjects(Arc<infrasim_store::Group>);

impl std::fmt::Debug for StorageObjects {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StorageObjects")
    }
}

impl Collector for StorageObjects {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let mut counts = self.0.object_counts();
        counts.sort();
        let mut family = encoder.encode_descriptor(
            "apiserver_storage_objects",
            "Number of stored objects at the time of last check split by kind",
            None,
            MetricType::Gauge,
        )?;
        for (resource, count) in counts {
            let gauge = ConstGauge::new(count as i64);
            gauge.encode(family.encode_family(&[("resource", &*resource)])?)?;
        }
        Ok(())
    }
}

/// kube-apiserver's labels of a request (its `MonitorRequest`): the verb as it reports it
/// (`LIST` for a collection read, `WATCH`, `APPLY` for a server-side apply patch, the
/// method otherwise), the dry-run values, the resource's coordinates and the scope.
fn labels(method: &Method, route: &Route, query: &Query, headers: &HeaderMap) -> Request {
    let dry_run = query.get("dryRun").unwrap_or("").to_string();
    let plain = |verb| Request {
        verb,
        dry_run: dry_run.clone(),
        group: String::new(),
        version: String::new(),
        resource: String::new(),
        subresource: String::new(),
        scope: "",
        component: "apiserver",
    };
    let Route::Resource(p) = route else {
        return plain(method_verb(method));
    };
    let watching = p.watch_prefix || query.flag("watch").unwrap_or(false);
    let verb = resource_verb(method, p, watching, headers);
    let scope = if p.name.is_some() || verb == "POST" {
        "resource"
    } else if p.namespace.is_some() {
        "namespace"
    } else {
        "cluster"
    };
    Request {
        verb,
        dry_run,
        group: p.group.clone(),
        version: p.version.clone(),
        resource: p.resource.clone(),
        subresource: p.subresource.clone().unwrap_or_default(),
        scope,
        component: "apiserver",
    }
}

fn resource_verb(
    method: &Method,
    p: &ResourcePath,
    watching: bool,
    headers: &HeaderMap,
) -> &'static str {
    let connect = matches!(
        p.subresource.as_deref(),
        Some("portforward" | "exec" | "attach")
    );
    match method.as_str() {
        _ if connect => "CONNECT",
        "GET" | "HEAD" if watching => "WATCH",
        "GET" | "HEAD" if p.name.is_none() => "LIST",
        "DELETE" if p.name.is_none() => "DELETECOLLECTION",
        "PATCH" => {
            let apply = headers
                .get(http::header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .is_some_and(|c| c.starts_with("application/apply-patch"));
            if apply {
                "APPLY"
            } else {
                "PATCH"
            }
        }
        _ => method_verb(method),
    }
}

fn method_verb(method: &Method) -> &'static str {
    match method.as_str() {
        "GET" | "HEAD" => "GET",
        "POST" => "POST",
        "PUT" => "PUT",
        "PATCH" => "PATCH",
        "DELETE" => "DELETE",
        "OPTIONS" => "OPTIONS",
        // kube-apiserver reports a method it does not know as `other`.
        _ => "other",
    }
}

/// The route's pattern, as the in-memory provider's `path` label (its router's path).
fn pattern(route: &Route) -> String {
    let fixed = match route {
        Route::Health => "/healthz",
        Route::Version => "/version",
        Route::Metrics => "/metrics",
        Route::StateMetrics => "/metrics/state",
        Route::CoreGroup => "/api",
        Route::Groups => "/apis",
        Route::Group(_) => "/apis/{group}",
        Route::GroupVersion { group, .. } if group.is_empty() => "/api/v1",
        Route::GroupVersion { .. } => "/apis/{group}/{version}",
        Route::OpenApi(_) => "/openapi",
        Route::Unknown => "other",
        Route::Resource(p) => return resource_pattern(p),
    };
    fixed.to_string()
}

fn resource_pattern(p: &ResourcePath) -> String {
    let mut path = String::from(if p.group.is_empty() {
        "/api/v1"
    } else {
        "/apis/{group}/{version}"
    });
    if p.watch_prefix {
        path.push_str("/watch");
    }
    if p.namespace.is_some() {
        path.push_str("/namespaces/{namespace}");
    }
    path.push_str("/{resource}");
    if p.name.is_some() {
        path.push_str("/{name}");
    }
    if p.subresource.is_some() {
        path.push_str("/{subresource}");
    }
    path
}

fn host(uri: &http::Uri, headers: &HeaderMap) -> String {
    uri.authority()
        .map(|a| a.to_string())
        .or_else(|| {
            headers
                .get(http::header::HOST)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        })
        .unwrap_or_default()
}

fn user_agent(headers: &HeaderMap) -> String {
    let agent = headers
        .get(http::header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let mut end = agent.len().min(MAX_USER_AGENT);
    while !agent.is_char_boundary(end) {
        end -= 1;
    }
    agent[..end].to_string()
}

/// The size of the pieces `/metrics/state` is sent in: large enough that a piece costs
/// little more than its bytes, small enough that the pieces waiting to be sent are a few MB.
const STATE_METRICS_PIECE: usize = 1 << 20;

/// `/metrics/state` answered from `state` in `format`, sent as it is rendered: every object,
/// or those of the shard the query names (`shard` and `total_shards`); the reason when the
/// query names no shard that is one (a 400). The plane and `--metrics-bind-address` both
/// answer with it.
pub fn state_metrics_response(
    state: &infrasim_metrics::state::StateMetrics,
    format: infrasim_metrics::Format,
    query: Option<&str>,
) -> Result<http::Response<crate::http::Body>, String> {
    let shard = infrasim_metrics::state::Shard::from_query(query)?;
    let pieces = state.snapshot_of(shard).chunks(format, STATE_METRICS_PIECE);
    Ok(crate::http::streamed(format.content_type(), pieces))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::route;
    use infrasim_metrics::Format;

    fn observe(m: &RequestMetrics, method: &str, uri: &str, content_type: &str, status: u16) {
        let uri: http::Uri = uri.parse().unwrap();
        let mut headers = HeaderMap::new();
        headers.insert(http::header::CONTENT_TYPE, content_type.parse().unwrap());
        headers.insert(http::header::USER_AGENT, "kubectl/v1.33.0".parse().unwrap());
        let method: Method = method.parse().unwrap();
        let query = Query::parse(uri.query());
        let o = m.start(&method, &uri, &headers, &route(uri.path()), &query);
        drop(o.finish(status));
    }

    #[test]
    fn the_plane_counts_as_kube_apiserver_and_a_cluster_as_the_in_memory_provider() {
        let metrics = Metrics::new();
        let plane = RequestMetrics::register(&metrics);
        observe(&plane, "GET", "/api/v1/namespaces/a/pods", "", 200);
        observe(
            &plane,
            "PATCH",
            "/apis/apps/v1/namespaces/a/deployments/d?dryRun=All",
            "application/apply-patch+yaml",
            201,
        );
        observe(
            &plane,
            "POST",
            "/api/v1/namespaces",
            "application/json",
            403,
        );
        let cluster = plane.for_workload("c1");
        observe(
            &cluster,
            "GET",
            "https://127.0.0.1:20000/api/v1/nodes/n1/status",
            "",
            404,
        );
        let text = metrics.render(Format::Classic);
        for line in [
            r#"apiserver_request_total{verb="LIST",dry_run="",group="",version="v1",resource="pods",subresource="",scope="namespace",component="apiserver",code="200"} 1"#,
            r#"apiserver_request_total{verb="APPLY",dry_run="All",group="apps",version="v1",resource="deployments",subresource="",scope="resource",component="apiserver",code="201"} 1"#,
            r#"apiserver_request_total{verb="POST",dry_run="",group="",version="v1",resource="namespaces",subresource="",scope="resource",component="apiserver",code="403"} 1"#,
            r#"inmemory_apiserver_request_total{verb="GET",dry_run="",group="",version="v1",resource="nodes",subresource="status",scope="resource",component="apiserver",method="GET",host="127.0.0.1:20000",path="/api/v1/{resource}/{name}/{subresource}",cluster_name="c1",user_agent="kubectl/v1.33.0",code="404"} 1"#,
            r#"apiserver_current_inflight_requests{request_kind="mutating"} 0"#,
        ] {
            assert!(text.contains(line), "{line} missing from\n{text}");
        }
        assert!(text.contains(r#"apiserver_request_duration_seconds_bucket{le="0.005",verb="LIST",dry_run="",group="",version="v1",resource="pods",subresource="",scope="namespace",component="apiserver"} 1"#), "{text}");
    }

    #[test]
    fn a_watch_is_long_running_until_its_stream_is_dropped() {
        let metrics = Metrics::new();
        let plane = RequestMetrics::register(&metrics);
        let uri: http::Uri = "/api/v1/configmaps?watch=true".parse().unwrap();
        let query = Query::parse(uri.query());
        let o = plane.start(
            &Method::GET,
            &uri,
            &HeaderMap::new(),
            &route(uri.path()),
            &query,
        );
        let open = o.finish(200);
        let gauge = r#"apiserver_longrunning_requests{verb="WATCH",group="",version="v1",resource="configmaps",subresource="",scope="cluster",component="apiserver"}"#;
        assert!(metrics
            .render(Format::Classic)
            .contains(&format!("{gauge} 1")));
        drop(open);
        assert!(metrics
            .render(Format::Classic)
            .contains(&format!("{gauge} 0")));
    }

    #[test]
    fn a_long_user_agent_is_cut_on_a_character_boundary() {
        let mut headers = HeaderMap::new();
        let long = "é".repeat(100);
        headers.insert(http::header::USER_AGENT, long.parse().unwrap());
        let cut = user_agent(&headers);
        assert!(cut.len() <= MAX_USER_AGENT && long.starts_with(&cut));
    }
}
