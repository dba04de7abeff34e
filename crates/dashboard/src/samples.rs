//! The charts' figures: every few seconds, while someone is looking, the process's own
//! `/metrics` text is read back and the series the charts draw are kept, the last
//! [`KEEP`] of them. Reading the text a scraper reads, rather than the counters behind it,
//! means the charts can only show what Prometheus would: the same names, the same labels.
//!
//! Nothing is sampled while no page has asked for anything for [`IDLE_AFTER`]: the charts
//! cost nothing to a scale test nobody watches. Sampling slows down as rendering gets
//! dearer (10,000 clusters' request series), to stay a small share of one core.

use infrasim_metrics::{Format, Metrics};
use serde::Serialize;
use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How many samples are kept: 15 minutes at the fastest pace.
pub const KEEP: usize = 180;
/// The fastest pace.
pub const EVERY: Duration = Duration::from_secs(5);
/// Sampling stops when no page has asked for this long.
pub const IDLE_AFTER: Duration = Duration::from_secs(120);

/// Label values to a counter's or gauge's value.
pub type ByLabel = BTreeMap<String, f64>;

/// One reading of the process's metrics.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Sample {
    /// Milliseconds since the Unix epoch.
    pub at: i64,
    /// `infrasim_clusters{phase}` and `infrasim_machines{phase}`.
    pub clusters: ByLabel,
    pub machines: ByLabel,
    /// The plane's requests (`apiserver_request_total`) and the total seconds and count of
    /// their durations, for the mean latency between two samples.
    pub plane: Requests,
    /// The workload clusters' (`inmemory_apiserver_request_*`).
    pub workload: Requests,
    /// `controller_runtime_reconcile_total` and `_errors_total` by controller.
    pub reconciles: ByLabel,
    pub errors: ByLabel,
    /// `workqueue_depth` by queue, where the process has work queues.
    pub queue_depth: ByLabel,
    /// `infrasim_vsphere_vms` by vCenter, then power state.
    pub vms: BTreeMap<String, ByLabel>,
    /// `infrasim_vsphere_injected_faults` by vCenter, then effect (`fault`, `delay`).
    pub faults: BTreeMap<String, ByLabel>,
    /// `infrasim_cluster_available_seconds`: upper bounds to cumulative counts.
    pub time_to_available: Vec<(String, f64)>,
}

#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq)]
pub struct Requests {
    pub total: f64,
    pub seconds: f64,
    pub count: f64,
}

/// One line of the text format: a name, its labels, a value.
#[derive(Debug, PartialEq)]
pub struct Line<'a> {
    pub name: &'a str,
    pub labels: Vec<(&'a str, String)>,
    pub value: f64,
}

impl Line<'_> {
    fn label(&self, name: &str) -> &str {
        self.labels
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.as_str())
            .unwrap_or("")
    }
}

/// Reads one sample line of the text exposition format; `None` for comments, blank lines
/// and what does not parse.
pub fn parse_line(line: &str) -> Option<Line<'_>> {
    if line.starts_with('#') || line.trim().is_empty() {
        return None;
    }
    let (name, rest) = match line.find('{') {
        Some(open) => (&line[..open], &line[open + 1..]),
        None => {
            let (name, rest) = line.split_once(' ')?;
            return Some(Line {
                name,
                labels: Vec::new(),
                value: value(rest)?,
            });
        }
    };
    let (labels, rest) = parse_labels(rest)?;
    Some(Line {
        name,
        labels,
        value: value(rest)?,
    })
}

/// The value after the labels (an optional timestamp after it is ignored).
fn value(rest: &str) -> Option<f64> {
    let text = rest.split_whitespace().next()?;
    match text {
        "+Inf" => Some(f64::INFINITY),
        "-Inf" => Some(f64::NEG_INFINITY),
        _ => text.parse().ok(),
    }
}

/// Reads `k="v",...}` (values with `\\`, `\"` and `\n` escapes); the labels and what
/// follows the closing brace.
fn parse_labels(mut rest: &str) -> Option<(Vec<(&str, String)>, &str)> {
    let mut labels = Vec::new();
    loop {
        rest = rest.trim_start_matches(',');
        if let Some(after) = rest.strip_prefix('}') {
            return Some((labels, after));
        }
        let (key, after) = rest.split_once("=\"")?;
        let mut value = String::new();
        let mut chars = after.char_indices();
        let end = loop {
            match chars.next()? {
                (i, '"') => break i,
                (_, '\\') => match chars.next()?.1 {
                    'n' => value.push('\n'),
                    other => value.push(other),
                },
                (_, c) => value.push(c),
            }
        };
        labels.push((key, value));
        rest = &after[end + 1..];
    }
}

/// The sample a metrics text holds.
pub fn sample(text: &str, at: i64) -> Sample {
    let mut s = Sample {
        at,
        ..Default::default()
    };
    for line in text.lines().filter_map(parse_line) {
        let add = |map: &mut ByLabel, label: &str| {
            *map.entry(line.label(label).to_string()).or_insert(0.0) += line.value
        };
        match line.name {
            "infrasim_clusters" => add(&mut s.clusters, "phase"),
            "infrasim_machines" => add(&mut s.machines, "phase"),
            "apiserver_request_total" => s.plane.total += line.value,
            "apiserver_request_duration_seconds_sum" => s.plane.seconds += line.value,
            "apiserver_request_duration_seconds_count" => s.plane.count += line.value,
            "inmemory_apiserver_request_total" => s.workload.total += line.value,
            "inmemory_apiserver_request_duration_seconds_sum" => s.workload.seconds += line.value,
            "inmemory_apiserver_request_duration_seconds_count" => s.workload.count += line.value,
            "controller_runtime_reconcile_total" => add(&mut s.reconciles, "controller"),
            "controller_runtime_reconcile_errors_total" => add(&mut s.errors, "controller"),
            "workqueue_depth" => add(&mut s.queue_depth, "name"),
            "infrasim_vsphere_vms" => {
                let vcenter = s.vms.entry(line.label("vcenter").to_string()).or_default();
                add(vcenter, "power_state");
            }
            "infrasim_vsphere_injected_faults" => {
                let vcenter = s
                    .faults
                    .entry(line.label("vcenter").to_string())
                    .or_default();
                add(vcenter, "effect");
            }
            "infrasim_cluster_available_seconds_bucket" => s
                .time_to_available
                .push((line.label("le").to_string(), line.value)),
            _ => {}
        }
    }
    s
}

/// The samples kept, and when a page last asked for anything.
#[derive(Debug)]
pub struct Sampler {
    metrics: Metrics,
    kept: Mutex<VecDeque<Sample>>,
    started: Instant,
    /// Milliseconds after `started` of the last request from a page.
    last_looked: AtomicU64,
}

impl Sampler {
    pub fn new(metrics: Metrics) -> Arc<Self> {
        Arc::new(Sampler {
            metrics,
            kept: Mutex::default(),
            started: Instant::now(),
            last_looked: AtomicU64::new(0),
        })
    }

    /// Says someone is looking; sampling goes on (or resumes) for [`IDLE_AFTER`].
    pub fn looked(&self) {
        let ms = self.started.elapsed().as_millis() as u64;
        self.last_looked.store(ms.max(1), Ordering::Relaxed);
    }

    /// Whether nobody has looked for [`IDLE_AFTER`].
    pub fn idle(&self) -> bool {
        let last = self.last_looked.load(Ordering::Relaxed);
        let now = self.started.elapsed().as_millis() as u64;
        last == 0 || now.saturating_sub(last) > IDLE_AFTER.as_millis() as u64
    }

    /// The samples kept, oldest first.
    pub fn series(&self) -> Vec<Sample> {
        let kept = self.kept.lock().unwrap_or_else(|p| p.into_inner());
        kept.iter().cloned().collect()
    }

    /// Takes a sample now; how long rendering the metrics took.
    pub fn take(&self) -> Duration {
        let started = Instant::now();
        // OpenMetrics as the registry encodes it: the classic text is derived from it in a
        // second pass, which the charts' series (the same lines) do not need.
        let text = self.metrics.render(Format::OpenMetrics);
        let took = started.elapsed();
        let at = chrono::Utc::now().timestamp_millis();
        let mut kept = self.kept.lock().unwrap_or_else(|p| p.into_inner());
        if kept.len() == KEEP {
            kept.pop_front();
        }
        kept.push_back(sample(&text, at));
        took
    }

    /// Samples until the process ends, while someone looks; `sampled` is told after each.
    pub async fn run(self: Arc<Self>, sampled: tokio::sync::watch::Sender<u64>) {
        let mut count = 0u64;
        loop {
            let pause = if self.idle() {
                Duration::from_secs(1)
            } else {
                let took = self.take();
                count += 1;
                sampled.send_replace(count);
                tracing::debug!(took_ms = took.as_millis() as u64, "sampled the metrics");
                // Rendering at most a tenth of the time.
                EVERY.max(took * 10)
            };
            tokio::time::sleep(pause).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_read_names_labels_escapes_and_values() {
        let line = parse_line(r#"a_total{x="1",msg="say \"hi\"\\n",y="",} 3.5 1700"#);
        let line = line.expect("a line");
        assert_eq!(line.name, "a_total");
        assert_eq!(
            line.labels,
            [
                ("x", "1".into()),
                ("msg", "say \"hi\"\\n".into()),
                ("y", String::new())
            ]
        );
        assert_eq!(line.value, 3.5);
        assert_eq!(parse_line("plain 2").map(|l| l.value), Some(2.0));
        assert_eq!(
            parse_line(r#"b_bucket{le="+Inf"} +Inf"#).map(|l| l.value),
            Some(f64::INFINITY)
        );
        assert_eq!(parse_line("# HELP a_total x"), None);
        assert_eq!(parse_line(r#"broken{x="1" 2"#), None);
    }

    #[test]
    fn a_sample_adds_the_series_the_charts_draw() {
        let text = r#"
# TYPE apiserver_request_total counter
apiserver_request_total{verb="GET",code="200"} 10
apiserver_request_total{verb="LIST",code="200"} 5
apiserver_request_duration_seconds_sum{verb="GET"} 0.5
apiserver_request_duration_seconds_count{verb="GET"} 15
inmemory_apiserver_request_total{cluster_name="a"} 7
controller_runtime_reconcile_total{controller="cluster",result="success"} 4
controller_runtime_reconcile_total{controller="cluster",result="error"} 1
controller_runtime_reconcile_errors_total{controller="cluster"} 1
infrasim_clusters{phase="Provisioned"} 3
infrasim_vsphere_vms{vcenter="ns/vc",power_state="poweredOn"} 4
infrasim_vsphere_injected_faults{vcenter="ns/vc",effect="fault"} 2
infrasim_cluster_available_seconds_bucket{le="1.0"} 2
infrasim_cluster_available_seconds_bucket{le="+Inf"} 3
"#;
        let s = sample(text, 42);
        assert_eq!(
            s.plane,
            Requests {
                total: 15.0,
                seconds: 0.5,
                count: 15.0
            }
        );
        assert_eq!(s.workload.total, 7.0);
        assert_eq!(s.reconciles.get("cluster"), Some(&5.0));
        assert_eq!(s.errors.get("cluster"), Some(&1.0));
        assert_eq!(s.clusters.get("Provisioned"), Some(&3.0));
        assert_eq!(s.vms["ns/vc"].get("poweredOn"), Some(&4.0));
        assert_eq!(s.faults["ns/vc"].get("fault"), Some(&2.0));
        assert_eq!(
            s.time_to_available,
            [("1.0".to_string(), 2.0), ("+Inf".to_string(), 3.0)]
        );
    }

    #[test]
    fn the_sampler_keeps_the_newest_and_idles_until_someone_looks() {
        let sampler = Sampler::new(Metrics::new());
        assert!(sampler.idle());
        sampler.looked();
        assert!(!sampler.idle());
        for _ in 0..KEEP + 3 {
            sampler.take();
        }
        assert_eq!(sampler.series().len(), KEEP);
    }
}
