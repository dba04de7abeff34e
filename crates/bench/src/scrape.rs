//! `infrasim bench scrape`: what one scrape of N workload clusters' request families costs,
//! infrasim's tables ([`infrasim_metrics::table`]) against `prometheus-client`'s `Family` (the
//! crate's own encoder, which these families used before) holding the same series: the time
//! to record a request, the time to render every series in each text format, and the size.
//!
//! The series are the shape a workload cluster's API server makes
//! (`inmemory_apiserver_request_total` and `_duration_seconds` with Cluster API in-memory
//! provider's 13 labels, kube-apiserver's buckets), a few routes per cluster as kubelets
//! renewing leases and reporting status make them.

use clap::Args;
use infrasim_metrics::buckets::APISERVER_REQUEST_DURATION;
use infrasim_metrics::table::{write_label, CounterTable, HistogramTable, LabelSet};
use infrasim_metrics::{Format, Metrics};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Debug, Args)]
pub struct ScrapeBenchArgs {
    /// Workload clusters whose requests are counted.
    #[arg(long, default_value_t = 10_000)]
    clusters: usize,
    /// Routes each cluster has answered (a histogram and a counter series each).
    #[arg(long, default_value_t = 2)]
    routes: usize,
    /// Renders per format (the best and the worst are printed).
    #[arg(long, default_value_t = 5)]
    renders: usize,
}

/// The in-memory provider's labels of a request and its answer.
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
    method: &'static str,
    host: String,
    path: &'static str,
    cluster_name: String,
    user_agent: String,
    code: String,
}

impl LabelSet for Request {
    fn write(&self, out: &mut String) {
        let labels = [
            ("verb", self.verb),
            ("dry_run", &self.dry_run),
            ("group", &self.group),
            ("version", &self.version),
            ("resource", &self.resource),
            ("subresource", &self.subresource),
            ("scope", self.scope),
            ("component", self.component),
            ("method", self.method),
            ("host", &self.host),
            ("path", self.path),
            ("cluster_name", &self.cluster_name),
            ("user_agent", &self.user_agent),
            ("code", &self.code),
        ];
        for (i, (name, value)) in labels.into_iter().enumerate() {
            write_label(out, name, value, i == 0);
        }
    }
}

/// The `route`th request shape of cluster `cluster`.
fn request(cluster: usize, route: usize) -> Request {
    let resources = [("leases", "coordination.k8s.io", "v1"), ("nodes", "", "v1")];
    let (resource, group, version) = resources[route % resources.len()];
    let put = route.is_multiple_of(2);
    Request {
        verb: if put { "PUT" } else { "PATCH" },
        dry_run: String::new(),
        group: group.to_string(),
        version: version.to_string(),
        resource: resource.to_string(),
        subresource: if put { "" } else { "status" }.to_string(),
        scope: "resource",
        component: "apiserver",
        method: if put { "PUT" } else { "PATCH" },
        host: format!("127.0.0.1:{}", 20000 + cluster),
        path: "/apis/{group}/{version}/namespaces/{namespace}/{resource}/{name}",
        cluster_name: format!("cluster-{cluster:05}-{route}"),
        user_agent: "kubelet/v1.33.0 (linux/amd64) kubernetes/infrasim".to_string(),
        code: "200".to_string(),
    }
}

/// One side of the comparison: a registry holding the request families and a way to
/// count a request in them.
struct Side {
    metrics: Metrics,
    record: Record,
}

type Record = Box<dyn Fn(&Request, f64)>;

fn prometheus_client_side() -> Side {
    let metrics = Metrics::new();
    let total = Family::<Request, Counter>::default();
    let duration: Family<Request, Histogram> =
        Family::new_with_constructor(|| Histogram::new(APISERVER_REQUEST_DURATION));
    metrics.register(
        "inmemory_apiserver_request",
        "Number of HTTP requests",
        total.clone(),
    );
    metrics.register(
        "inmemory_apiserver_request_duration_seconds",
        "Request latency in seconds",
        duration.clone(),
    );
    Side {
        metrics,
        record: Box::new(move |r, seconds| {
            total.get_or_create(r).inc();
            duration.get_or_create(r).observe(seconds);
        }),
    }
}

fn table_side() -> Side {
    let metrics = Metrics::new();
    let total = CounterTable::new("inmemory_apiserver_request", "Number of HTTP requests");
    let duration = HistogramTable::new(
        "inmemory_apiserver_request_duration_seconds",
        "Request latency in seconds",
        &APISERVER_REQUEST_DURATION,
    );
    metrics.register_table(Arc::new(total.clone()));
    metrics.register_table(Arc::new(duration.clone()));
    Side {
        metrics,
        record: Box::new(move |r, seconds| {
            total.inc(r);
            duration.observe(r, seconds);
        }),
    }
}

/// What one side measured.
struct Measured {
    record: Duration,
    records: usize,
    renders: Vec<(Format, Duration, Duration, usize, usize)>,
    /// The last render's samples, sorted, to check both sides wrote the same.
    samples: Vec<String>,
}

fn measure(side: &Side, args: &ScrapeBenchArgs) -> Measured {
    let requests: Vec<Request> = (0..args.clusters)
        .flat_map(|c| (0..args.routes).map(move |r| request(c, r)))
        .collect();
    // Every series made, then three more rounds over existing ones: the steady state of a
    // fleet whose kubelets keep renewing.
    let started = Instant::now();
    for round in 0..4 {
        for r in &requests {
            (side.record)(r, 0.001 * (round + 1) as f64);
        }
    }
    let record = started.elapsed();
    let mut samples = Vec::new();
    let renders = [Format::OpenMetrics, Format::Classic]
        .into_iter()
        .map(|format| {
            let mut times = Vec::new();
            let mut text = String::new();
            for _ in 0..args.renders.max(1) {
                let started = Instant::now();
                text = side.metrics.render(format);
                times.push(started.elapsed());
            }
            let series = text.lines().filter(|l| !l.starts_with('#')).count();
            if format == Format::Classic {
                samples = text
                    .lines()
                    .filter(|l| !l.starts_with('#'))
                    .map(str::to_string)
                    .collect();
                samples.sort_unstable();
            }
            let best = times.iter().min().copied().unwrap_or_default();
            let worst = times.iter().max().copied().unwrap_or_default();
            (format, best, worst, series, text.len())
        })
        .collect();
    Measured {
        record,
        records: requests.len() * 4,
        renders,
        samples,
    }
}

pub async fn run(args: ScrapeBenchArgs) -> anyhow::Result<()> {
    // The baseline first, dropped before ours is built, so neither renders beside the
    // other's memory.
    let mut baseline = measure(&prometheus_client_side(), &args);
    let ours = measure(&table_side(), &args);
    // The process's own families (CPU, memory) differ between two renders; the request
    // families must not.
    let requests_only = |s: &Vec<String>| -> Vec<String> {
        s.iter()
            .filter(|l| l.starts_with("inmemory_"))
            .cloned()
            .collect()
    };
    let same = requests_only(&baseline.samples) == requests_only(&ours.samples);
    baseline.samples.clear();
    println!(
        "infrasim bench scrape: {} clusters x {} routes (a counter and a histogram series each)",
        args.clusters, args.routes
    );
    println!();
    println!("| families | format | series (lines) | size | render, best-worst of {} | a request recorded |", args.renders.max(1));
    println!("|---|---|---|---|---|---|");
    for (name, m) in [
        ("prometheus-client `Family`", &baseline),
        ("infrasim tables", &ours),
    ] {
        for (format, best, worst, series, bytes) in &m.renders {
            println!(
                "| {name} | {} | {series} | {:.1} MB | {:.0}-{:.0} ms | {:.0} ns |",
                match format {
                    Format::OpenMetrics => "OpenMetrics",
                    Format::Classic => "text 0.0.4",
                },
                *bytes as f64 / 1e6,
                best.as_secs_f64() * 1e3,
                worst.as_secs_f64() * 1e3,
                m.record.as_secs_f64() * 1e9 / m.records.max(1) as f64,
            );
        }
    }
    println!();
    println!(
        "the two wrote the same request samples (sorted, text 0.0.4): {}",
        if same { "yes" } else { "NO" }
    );
    anyhow::ensure!(same, "the tables' samples differ from prometheus-client's");
    Ok(())
}
