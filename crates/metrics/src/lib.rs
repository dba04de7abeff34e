//! The process's one Prometheus registry. Every crate that measures something (the API
//! servers' requests, later the controllers and the vSphere simulators) registers its
//! families here once, and the management plane's `/metrics` renders them all in one scrape,
//! so 10,000 workload clusters cost one scrape, not 10,000.
//!
//! The families are `prometheus-client`'s (the Prometheus project's Rust client), which
//! encodes OpenMetrics; [`classic`] derives Prometheus' older text format from that for the
//! scrapers and tools (`promtool check metrics`) that ask for it.

pub mod buckets;
pub mod classic;
pub mod process;
pub mod state;
pub mod table;

pub use prometheus_client;

use prometheus_client::collector::Collector;
use prometheus_client::registry::{Metric, Registry};
use std::sync::{Arc, Mutex, MutexGuard};

/// A handle on the registry; clones share it.
#[derive(Clone, Debug)]
pub struct Metrics {
    registry: Arc<Mutex<Registry>>,
    /// Families that render themselves, after the registry's (see [`table`]).
    tables: Arc<Mutex<Vec<Arc<dyn table::TextFamily>>>>,
    state: state::StateMetrics,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

/// A text format a scrape can be answered in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// OpenMetrics 1.0 text.
    OpenMetrics,
    /// Prometheus' text format 0.0.4, what a scrape gets unless it asks for OpenMetrics.
    Classic,
}

impl Format {
    /// The format an `Accept` header asks for: OpenMetrics only when it names it, as
    /// Prometheus' own client libraries decide.
    pub fn negotiate(accept: Option<&str>) -> Format {
        match accept {
            Some(a) if a.contains("application/openmetrics-text") => Format::OpenMetrics,
            _ => Format::Classic,
        }
    }

    /// The `Content-Type` of an answer in this format.
    pub fn content_type(self) -> &'static str {
        match self {
            Format::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
            Format::Classic => "text/plain; version=0.0.4; charset=utf-8",
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while registering leaves the registry as usable as before it.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Metrics {
    /// A registry with the process's own metrics (CPU, memory, file descriptors, start time)
    /// in it.
    pub fn new() -> Self {
        let mut registry = Registry::default();
        registry.register_collector(Box::new(process::Process));
        Metrics {
            registry: Arc::new(Mutex::new(registry)),
            tables: Arc::default(),
            state: state::StateMetrics::default(),
        }
    }

    /// Registers a family under `name` (a counter's without its `_total`, which the
    /// encoding adds), once per process.
    pub fn register(&self, name: &str, help: &str, metric: impl Metric) {
        lock(&self.registry).register(name, help, metric);
    }

    /// Registers something that computes its samples at each scrape.
    pub fn register_collector(&self, collector: Box<dyn Collector>) {
        lock(&self.registry).register_collector(collector);
    }

    /// Registers a family that renders itself (a [`table::CounterTable`] or
    /// [`table::HistogramTable`]), once per process.
    pub fn register_table(&self, family: Arc<dyn table::TextFamily>) {
        lock(&self.tables).push(family);
    }

    /// The objects' state metrics (kube-state-metrics' kind), served apart from the
    /// registry's families: at 10,000 clusters they are most of the text, and a scraper
    /// reads them at its own interval.
    pub fn state(&self) -> &state::StateMetrics {
        &self.state
    }

    /// Every family, in `format`.
    pub fn render(&self, format: Format) -> String {
        let mut text = String::new();
        // Writing into a String cannot fail, and an encoder error would be a bug in a
        // collector: an empty answer is the honest result of either.
        if prometheus_client::encoding::text::encode(&mut text, &lock(&self.registry)).is_err() {
            text.clear();
        }
        let tables = lock(&self.tables).clone();
        let more: usize = tables.iter().map(|t| t.size_hint()).sum();
        let mut out = match format {
            Format::OpenMetrics => {
                // The tables' families go before the end marker.
                let end = text.strip_suffix("# EOF\n").map_or(text.len(), str::len);
                text.truncate(end);
                text
            }
            Format::Classic => classic::from_openmetrics(&text),
        };
        out.reserve(more + 8);
        for family in &tables {
            family.encode(format, &mut out);
        }
        if format == Format::OpenMetrics {
            out.push_str("# EOF\n");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::metrics::counter::Counter;

    #[test]
    fn a_registered_counter_is_rendered_in_both_formats() {
        let metrics = Metrics::new();
        let requests = Counter::<u64>::default();
        metrics.register("things_done", "Things done", requests.clone());
        requests.inc_by(3);
        let open = metrics.render(Format::OpenMetrics);
        assert!(
            open.contains("# TYPE things_done counter\nthings_done_total 3\n"),
            "{open}"
        );
        assert!(open.ends_with("# EOF\n"));
        let classic = metrics.render(Format::Classic);
        assert!(
            classic.contains("# TYPE things_done_total counter\nthings_done_total 3\n"),
            "{classic}"
        );
        assert!(!classic.contains("# EOF"));
        assert!(classic.contains("process_start_time_seconds "), "{classic}");
    }

    #[test]
    fn a_table_is_rendered_after_the_registry_and_before_the_end() {
        #[derive(Clone, Debug, Hash, PartialEq, Eq)]
        struct Cluster(&'static str);
        impl table::LabelSet for Cluster {
            fn write(&self, out: &mut String) {
                table::write_label(out, "cluster_name", self.0, true);
            }
        }
        let metrics = Metrics::new();
        let requests = table::CounterTable::new("cluster_requests", "Requests per cluster");
        metrics.register_table(Arc::new(requests.clone()));
        requests.inc(&Cluster("c1"));
        let open = metrics.render(Format::OpenMetrics);
        let sample = open.find("cluster_requests_total{cluster_name=\"c1\"} 1\n");
        assert!(
            sample.is_some_and(|at| at
                > open
                    .find("process_start_time_seconds")
                    .unwrap_or(usize::MAX)),
            "{open}"
        );
        assert!(open.ends_with("} 1\n# EOF\n"), "{open}");
        assert_eq!(open.matches("# EOF").count(), 1);
        let classic = metrics.render(Format::Classic);
        assert!(classic.contains("# TYPE cluster_requests_total counter\ncluster_requests_total{cluster_name=\"c1\"} 1\n"), "{classic}");
    }

    #[test]
    fn only_an_accept_naming_openmetrics_gets_it() {
        let om = "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5";
        assert_eq!(Format::negotiate(Some(om)), Format::OpenMetrics);
        assert_eq!(Format::negotiate(Some("text/plain")), Format::Classic);
        assert_eq!(Format::negotiate(None), Format::Classic);
    }
}
