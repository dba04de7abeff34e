//! A controller's work queue, measured as client-go measures the queue under every
//! controller-runtime controller, so the work-queue panels of Cluster API's
//! `controller-runtime` dashboard read ours: `workqueue_depth`, `workqueue_adds_total`,
//! `workqueue_queue_duration_seconds`, `workqueue_work_duration_seconds`,
//! `workqueue_unfinished_work_seconds`, `workqueue_longest_running_processor_seconds` and
//! `workqueue_retries_total`, each labelled `name` and `controller` with the controller's
//! name, as controller-runtime labels them.
//!
//! kube-runtime's controller has a queue of its own (its scheduler merges the requests for
//! one object, its runner holds a request for an object under reconcile until that reconcile
//! ends) but measures nothing. [`WorkQueue`] follows the same requests: on their way in (every
//! trigger passes through [`crate::Controller`]) and out (the runner's reconcile), with
//! client-go's rules: a request for an object already waiting merges into it and is not
//! added again; one for an object being reconciled is added when that reconcile ends.
//!
//! Objects are keys of strings, not `ObjectRef<K>`: one queue type for every kind, compiled
//! once.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

/// An object in a queue: its namespace (none when cluster-scoped) and its name.
pub type Key = (Option<String>, String);

/// controller-runtime's labels of a queue's series.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Labels {
    name: String,
    controller: String,
}

/// client-go's buckets for both durations: 10 ns to 1,000 s, by tens.
fn duration_histogram() -> Histogram {
    Histogram::new(exponential_buckets(1e-8, 10.0, 12))
}

type Histograms = Family<Labels, Histogram, fn() -> Histogram>;

/// The families every queue's series are in, and the queues, for the gauges read at the
/// scrape.
#[derive(Debug)]
pub struct QueueFamilies {
    adds: Family<Labels, Counter>,
    retries: Family<Labels, Counter>,
    queued: Histograms,
    worked: Histograms,
    queues: Arc<Mutex<Vec<Arc<WorkQueue>>>>,
}

impl QueueFamilies {
    /// Registers the families in `metrics`, once per process.
    pub fn register(metrics: &infrasim_metrics::Metrics) -> Self {
        let families = QueueFamilies {
            adds: Family::default(),
            retries: Family::default(),
            queued: Family::new_with_constructor(duration_histogram),
            worked: Family::new_with_constructor(duration_histogram),
            queues: Arc::default(),
        };
        metrics.register(
            "workqueue_adds",
            "Total number of adds handled by workqueue",
            families.adds.clone(),
        );
        metrics.register(
            "workqueue_retries",
            "Total number of retries handled by workqueue",
            families.retries.clone(),
        );
        metrics.register(
            "workqueue_queue_duration_seconds",
            "How long in seconds an item stays in workqueue before being requested",
            families.queued.clone(),
        );
        metrics.register(
            "workqueue_work_duration_seconds",
            "How long in seconds processing an item from workqueue takes",
            families.worked.clone(),
        );
        metrics.register_collector(Box::new(Gauges(families.queues.clone())));
        families
    }

    /// Measures `queue` from now on.
    pub fn measure(&self, queue: &Arc<WorkQueue>) {
        let labels = Labels {
            name: queue.name.clone(),
            controller: queue.name.clone(),
        };
        let series = Series {
            adds: self.adds.get_or_create(&labels).clone(),
            retries: self.retries.get_or_create(&labels).clone(),
            queued: self.queued.get_or_create(&labels).clone(),
            worked: self.worked.get_or_create(&labels).clone(),
        };
        if queue.series.set(series).is_ok() {
            let mut queues = self.queues.lock().unwrap_or_else(|p| p.into_inner());
            queues.push(queue.clone());
        }
    }
}

/// One queue's series.
#[derive(Debug)]
struct Series {
    adds: Counter,
    retries: Counter,
    queued: Histogram,
    worked: Histogram,
}

#[derive(Debug, Default)]
struct State {
    /// Waiting objects, since when.
    waiting: HashMap<Key, Instant>,
    /// Objects under reconcile, since when.
    running: HashMap<Key, Instant>,
    /// Objects asked for again while under reconcile.
    dirty: HashSet<Key>,
}

/// One controller's queue.
#[derive(Debug)]
pub struct WorkQueue {
    name: String,
    state: Mutex<State>,
    /// Set once the process measures its controllers (before the controller runs); until
    /// then the queue keeps nothing.
    series: OnceLock<Series>,
}

impl WorkQueue {
    /// An empty queue for the controller `name`.
    pub fn new(name: &str) -> Arc<Self> {
        Arc::new(WorkQueue {
            name: name.to_string(),
            state: Mutex::default(),
            series: OnceLock::new(),
        })
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// An object is asked for.
    pub fn add(&self, key: Key, now: Instant) {
        // Nothing is kept for a queue nobody measures (a process without metrics).
        let Some(s) = self.series.get() else {
            return;
        };
        let mut state = self.state();
        if state.running.contains_key(&key) {
            state.dirty.insert(key);
            return;
        }
        if state.waiting.contains_key(&key) {
            return;
        }
        state.waiting.insert(key, now);
        drop(state);
        s.adds.inc();
    }

    /// A reconcile of the object starts.
    pub fn start(&self, key: Key, now: Instant) {
        let Some(s) = self.series.get() else {
            return;
        };
        let mut state = self.state();
        let since = state.waiting.remove(&key);
        state.running.insert(key, now);
        drop(state);
        if let Some(since) = since {
            s.queued.observe(now.duration_since(since).as_secs_f64());
        }
    }

    /// The object's reconcile ended; asked for meanwhile, it waits again.
    pub fn done(&self, key: Key, now: Instant) {
        let Some(s) = self.series.get() else {
            return;
        };
        let mut state = self.state();
        let started = state.running.remove(&key);
        let again = state.dirty.remove(&key);
        drop(state);
        if let Some(started) = started {
            s.worked.observe(now.duration_since(started).as_secs_f64());
        }
        if again {
            self.add(key, now);
        }
    }

    /// The object will not be reconciled (kube-runtime found no cached object for it).
    pub fn forget(&self, key: &Key) {
        let mut state = self.state();
        state.waiting.remove(key);
        state.dirty.remove(key);
    }

    /// A failed reconcile is retried after a backoff.
    pub fn retry(&self) {
        if let Some(s) = self.series.get() {
            s.retries.inc();
        }
    }

    /// Objects waiting.
    pub fn depth(&self) -> usize {
        self.state().waiting.len()
    }

    /// The seconds every reconcile under way has taken so far, and the longest of them.
    pub fn unfinished(&self, now: Instant) -> (f64, f64) {
        let state = self.state();
        state
            .running
            .values()
            .fold((0.0, 0.0), |(sum, longest), since| {
                let s = now.duration_since(*since).as_secs_f64();
                (sum + s, f64::max(longest, s))
            })
    }
}

/// The gauges read at the scrape: depth, unfinished work, longest running processor.
#[derive(Debug)]
struct Gauges(Arc<Mutex<Vec<Arc<WorkQueue>>>>);

/// One queue as read at a scrape.
struct Reading {
    labels: Labels,
    depth: usize,
    /// Seconds of the reconciles under way, together and the longest.
    unfinished: (f64, f64),
}

type Gauge = (&'static str, &'static str, fn(&Reading) -> f64);

/// The gauges' names, help texts (client-go's) and values.
const GAUGES: [Gauge; 3] = [
    ("workqueue_depth", "Current depth of workqueue", |r| r.depth as f64),
    (
        "workqueue_unfinished_work_seconds",
        "How many seconds of work has been done that is in progress and hasn't been observed by work_duration. Large values indicate stuck threads. One can deduce the number of stuck threads by observing the rate at which this increases.",
        |r| r.unfinished.0,
    ),
    (
        "workqueue_longest_running_processor_seconds",
        "How many seconds has the longest running processor for workqueue been running.",
        |r| r.unfinished.1,
    ),
];

impl Collector for Gauges {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let queues: Vec<Arc<WorkQueue>> = self.0.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let now = Instant::now();
        let readings: Vec<Reading> = queues
            .iter()
            .map(|q| Reading {
                labels: Labels {
                    name: q.name.clone(),
                    controller: q.name.clone(),
                },
                depth: q.depth(),
                unfinished: q.unfinished(now),
            })
            .collect();
        for (name, help, value) in GAUGES {
            let metric_type = ConstGauge::new(0.0f64).metric_type();
            let mut family = encoder.encode_descriptor(name, help, None, metric_type)?;
            for reading in &readings {
                ConstGauge::new(value(reading)).encode(family.encode_family(&reading.labels)?)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn key(name: &str) -> Key {
        (Some("ns".into()), name.into())
    }

    #[test]
    fn requests_merge_while_waiting_and_wait_again_after_a_reconcile_they_came_during() {
        let metrics = infrasim_metrics::Metrics::new();
        let families = QueueFamilies::register(&metrics);
        let queue = WorkQueue::new("machine");
        families.measure(&queue);
        let t0 = Instant::now();
        queue.add(key("a"), t0);
        queue.add(key("a"), t0);
        queue.add(key("b"), t0);
        assert_eq!(queue.depth(), 2, "two objects, three requests");
        queue.start(key("a"), t0 + Duration::from_millis(5));
        assert_eq!(queue.depth(), 1);
        queue.add(key("a"), t0 + Duration::from_millis(6));
        assert_eq!(queue.depth(), 1, "under reconcile: held until it ends");
        let (unfinished, longest) = queue.unfinished(t0 + Duration::from_secs(2));
        assert!((1.99..2.0).contains(&unfinished) && unfinished == longest);
        queue.done(key("a"), t0 + Duration::from_millis(10));
        assert_eq!(
            queue.depth(),
            2,
            "asked for during its reconcile: waiting again"
        );
        queue.forget(&key("b"));
        queue.retry();
        assert_eq!(queue.depth(), 1);

        let text = metrics.render(infrasim_metrics::Format::Classic);
        let labels = r#"{name="machine",controller="machine"}"#;
        for expected in [
            format!("workqueue_adds_total{labels} 3"),
            format!("workqueue_retries_total{labels} 1"),
            format!("workqueue_depth{labels} 1"),
            format!("workqueue_queue_duration_seconds_count{labels} 1"),
            format!("workqueue_work_duration_seconds_count{labels} 1"),
            format!("workqueue_longest_running_processor_seconds{labels} 0"),
        ] {
            assert!(
                text.lines().any(|l| l.starts_with(&expected)),
                "{expected} in\n{text}"
            );
        }
    }
}
