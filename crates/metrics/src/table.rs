//! Counter and histogram families for series counted by the hundred thousand (every workload
//! cluster's requests, labelled with its name, route and user agent), whose label text is
//! encoded once, when a series is first seen, and copied at each scrape.
//!
//! Why not `prometheus-client`'s `Family`: its encoder formats every sample's labels again at
//! every scrape (a histogram's 24 bucket lines format the same 13 labels 24 times), and its
//! histogram keeps its buckets private, so nothing else can encode them. At 10,000 clusters
//! (544,427 series, 158.6 MB) that made one scrape take 1.6 to 4.6 s. Here a scrape writes
//! stored text and integers; `infrasim bench scrape` compares the two on the same series.
//!
//! A table renders whole families (their `# HELP` and `# TYPE` lines and every sample) in
//! either text format; [`crate::Metrics`] appends them after the registry's families.

use crate::Format;
use std::collections::HashMap;
use std::hash::Hash;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// A set of labels a table's series are keyed by.
pub trait LabelSet: Hash + Eq + Clone + std::fmt::Debug + Send + Sync + 'static {
    /// Writes the labels as `name="value",...` (no braces), each value through
    /// [`write_label`].
    fn write(&self, out: &mut String);
}

/// Writes `name="value"` with the value escaped as both text formats escape it, preceded
/// by a comma unless `first`.
pub fn write_label(out: &mut String, name: &str, value: &str, first: bool) {
    if !first {
        out.push(',');
    }
    out.push_str(name);
    out.push_str("=\"");
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Families rendered as text by their owner rather than by the registry's encoder.
pub trait TextFamily: std::fmt::Debug + Send + Sync {
    /// Appends the family (header and samples) in `format`, with no `# EOF`.
    fn encode(&self, format: Format, out: &mut String);

    /// About how many bytes [`TextFamily::encode`] will write, to size the answer once.
    fn size_hint(&self) -> usize;
}

/// One series: its label text and its value.
#[derive(Debug)]
struct Series<V> {
    labels: Box<str>,
    value: V,
}

/// The series of one family, by their labels. Every request hashes its labels here (13
/// strings, twice), so the hasher is foldhash's, seeded per map, rather than SipHash: a
/// tenth of the cost, and a client chooses only one label of its key (its user agent).
#[derive(Debug)]
struct SeriesMap<K, V> {
    series: RwLock<Map<K, V>>,
}

type Map<K, V> = HashMap<K, Series<V>, foldhash::fast::RandomState>;

impl<K: LabelSet, V> SeriesMap<K, V> {
    fn new() -> Self {
        SeriesMap {
            series: RwLock::new(HashMap::default()),
        }
    }

    // A panic while holding the lock leaves the map as usable as before it: every value
    // is an atomic, updated in one step.
    fn read(&self) -> RwLockReadGuard<'_, Map<K, V>> {
        self.series.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, Map<K, V>> {
        self.series.write().unwrap_or_else(|p| p.into_inner())
    }

    /// Calls `f` with the series of `key`, made by `make` if it is new. An existing series
    /// takes only the shared lock, so a scrape does not hold its writers up.
    fn with<R>(&self, key: &K, make: impl FnOnce() -> V, f: impl FnOnce(&V) -> R) -> R {
        if let Some(series) = self.read().get(key) {
            return f(&series.value);
        }
        let mut map = self.write();
        let series = map.entry(key.clone()).or_insert_with(|| {
            let mut labels = String::new();
            key.write(&mut labels);
            Series {
                labels: labels.into_boxed_str(),
                value: make(),
            }
        });
        f(&series.value)
    }

    fn len(&self) -> usize {
        self.read().len()
    }

    fn label_bytes(&self) -> usize {
        self.read().values().map(|s| s.labels.len()).sum()
    }
}

fn write_header(out: &mut String, name: &str, suffix: &str, help: &str, kind: &str) {
    out.push_str("# HELP ");
    out.push_str(name);
    out.push_str(suffix);
    out.push(' ');
    out.push_str(&help.replace('\\', "\\\\").replace('\n', "\\n"));
    out.push_str("\n# TYPE ");
    out.push_str(name);
    out.push_str(suffix);
    out.push(' ');
    out.push_str(kind);
    out.push('\n');
}

/// A counter family (`name_total{...}`), as `prometheus-client`'s `Family<K, Counter>`
/// renders it. Clones share the series.
#[derive(Debug, Clone)]
pub struct CounterTable<K> {
    name: &'static str,
    help: &'static str,
    map: Arc<SeriesMap<K, AtomicU64>>,
}

impl<K: LabelSet> CounterTable<K> {
    /// An empty family named `name` (without `_total`, which its samples carry).
    pub fn new(name: &'static str, help: &'static str) -> Self {
        CounterTable {
            name,
            help,
            map: Arc::new(SeriesMap::new()),
        }
    }

    /// Adds `by` to the series of `labels`.
    pub fn inc_by(&self, labels: &K, by: u64) {
        self.map.with(
            labels,
            || AtomicU64::new(0),
            |v| {
                v.fetch_add(by, Ordering::Relaxed);
            },
        );
    }

    /// Adds one to the series of `labels`.
    pub fn inc(&self, labels: &K) {
        self.inc_by(labels, 1);
    }

    /// The value of the series of `labels`, 0 if it has none.
    pub fn get(&self, labels: &K) -> u64 {
        self.map
            .read()
            .get(labels)
            .map_or(0, |s| s.value.load(Ordering::Relaxed))
    }

    /// How many series the family has.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether the family has no series.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<K: LabelSet> TextFamily for CounterTable<K> {
    fn encode(&self, format: Format, out: &mut String) {
        // OpenMetrics names a counter's family without `_total`, Prometheus' 0.0.4 with it.
        let suffix = match format {
            Format::OpenMetrics => "",
            Format::Classic => "_total",
        };
        write_header(out, self.name, suffix, self.help, "counter");
        let mut number = itoa::Buffer::new();
        for series in self.map.read().values() {
            out.push_str(self.name);
            out.push_str("_total{");
            out.push_str(&series.labels);
            out.push_str("} ");
            out.push_str(number.format(series.value.load(Ordering::Relaxed)));
            out.push('\n');
        }
    }

    fn size_hint(&self) -> usize {
        self.map.label_bytes() + self.map.len() * (self.name.len() + 16) + 256
    }
}

/// A histogram's counts: one per bucket (not cumulative; the last is `+Inf`'s own) and the
/// sum of the observations as `f64` bits.
#[derive(Debug)]
struct Buckets {
    counts: Box<[AtomicU64]>,
    sum: AtomicU64,
}

impl Buckets {
    fn new(bounds: usize) -> Self {
        Buckets {
            counts: (0..=bounds).map(|_| AtomicU64::new(0)).collect(),
            sum: AtomicU64::new(0f64.to_bits()),
        }
    }

    fn observe(&self, bucket: usize, value: f64) {
        if let Some(count) = self.counts.get(bucket) {
            count.fetch_add(1, Ordering::Relaxed);
        }
        // An f64 has no atomic add: swap in the new sum unless another writer got there
        // first, then try again from theirs.
        let _ = self
            .sum
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |bits| {
                Some((f64::from_bits(bits) + value).to_bits())
            });
    }
}

/// A histogram family (`name_sum`, `name_count`, `name_bucket{le=...}`), as
/// `prometheus-client`'s `Family<K, Histogram>` renders it: `le` first in each bucket's
/// labels. The count is the sum of the buckets, so the two always agree. Clones share the
/// series.
#[derive(Debug, Clone)]
pub struct HistogramTable<K> {
    name: &'static str,
    help: &'static str,
    bounds: &'static [f64],
    /// `le="0.005",` per bound and `le="+Inf"` last, made once.
    le: Arc<[Box<str>]>,
    map: Arc<SeriesMap<K, Buckets>>,
}

impl<K: LabelSet> HistogramTable<K> {
    /// An empty family named `name` with the buckets' upper bounds `bounds` (ascending;
    /// `+Inf` is added).
    pub fn new(name: &'static str, help: &'static str, bounds: &'static [f64]) -> Self {
        let mut le: Vec<Box<str>> = bounds
            .iter()
            .map(|b| format!("le=\"{}\"", dtoa::Buffer::new().format(*b)).into())
            .collect();
        le.push("le=\"+Inf\"".into());
        HistogramTable {
            name,
            help,
            bounds,
            le: le.into(),
            map: Arc::new(SeriesMap::new()),
        }
    }

    /// Counts `value` in the series of `labels`.
    pub fn observe(&self, labels: &K, value: f64) {
        // The first bucket whose upper bound is at least the value, as Prometheus' `le`.
        let bucket = self.bounds.partition_point(|b| *b < value);
        let bounds = self.bounds.len();
        self.map.with(
            labels,
            || Buckets::new(bounds),
            |b| b.observe(bucket, value),
        );
    }

    /// The number of observations and their sum in the series of `labels`.
    pub fn get(&self, labels: &K) -> (u64, f64) {
        self.map.read().get(labels).map_or((0, 0.0), |s| {
            let count = s
                .value
                .counts
                .iter()
                .map(|c| c.load(Ordering::Relaxed))
                .sum();
            (count, f64::from_bits(s.value.sum.load(Ordering::Relaxed)))
        })
    }

    /// How many series the family has.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether the family has no series.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn write_series(&self, series: &Series<Buckets>, out: &mut String) {
        let mut number = itoa::Buffer::new();
        let labelled = |out: &mut String, suffix: &str| {
            out.push_str(self.name);
            out.push_str(suffix);
            out.push('{');
            out.push_str(&series.labels);
            out.push_str("} ");
        };
        let mut cumulative = 0u64;
        let counts: Vec<u64> = series
            .value
            .counts
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .collect();
        let total: u64 = counts.iter().sum();
        let sum = f64::from_bits(series.value.sum.load(Ordering::Relaxed));
        labelled(out, "_sum");
        out.push_str(dtoa::Buffer::new().format(sum));
        out.push('\n');
        labelled(out, "_count");
        out.push_str(number.format(total));
        out.push('\n');
        for (count, le) in counts.iter().zip(self.le.iter()) {
            cumulative += count;
            out.push_str(self.name);
            out.push_str("_bucket{");
            out.push_str(le);
            if !series.labels.is_empty() {
                out.push(',');
                out.push_str(&series.labels);
            }
            out.push_str("} ");
            out.push_str(number.format(cumulative));
            out.push('\n');
        }
    }
}

impl<K: LabelSet> TextFamily for HistogramTable<K> {
    fn encode(&self, _format: Format, out: &mut String) {
        // A histogram reads the same in both formats.
        write_header(out, self.name, "", self.help, "histogram");
        for series in self.map.read().values() {
            self.write_series(series, out);
        }
    }

    fn size_hint(&self) -> usize {
        let lines = self.le.len() + 2;
        let per_line = self.name.len() + 32;
        self.map.label_bytes() * lines + self.map.len() * lines * per_line + 256
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Debug, Hash, PartialEq, Eq)]
    struct Route {
        path: String,
        code: u16,
    }

    impl LabelSet for Route {
        fn write(&self, out: &mut String) {
            write_label(out, "path", &self.path, true);
            write_label(out, "code", &self.code.to_string(), false);
        }
    }

    fn route(path: &str, code: u16) -> Route {
        Route {
            path: path.to_string(),
            code,
        }
    }

    #[test]
    fn a_counter_renders_its_family_name_as_each_format_wants() {
        let table = CounterTable::new("requests", "Requests answered.");
        table.inc(&route("/a", 200));
        table.inc_by(&route("/a", 200), 2);
        table.inc(&route("/b", 404));
        assert_eq!(table.get(&route("/a", 200)), 3);
        assert_eq!(table.len(), 2);
        let mut open = String::new();
        table.encode(Format::OpenMetrics, &mut open);
        assert!(open.starts_with("# HELP requests Requests answered.\n# TYPE requests counter\n"));
        assert!(
            open.contains("requests_total{path=\"/a\",code=\"200\"} 3\n"),
            "{open}"
        );
        assert!(
            open.contains("requests_total{path=\"/b\",code=\"404\"} 1\n"),
            "{open}"
        );
        let mut classic = String::new();
        table.encode(Format::Classic, &mut classic);
        assert!(classic.starts_with(
            "# HELP requests_total Requests answered.\n# TYPE requests_total counter\n"
        ));
    }

    #[test]
    fn label_values_are_escaped() {
        let table = CounterTable::new("odd", "Odd labels.");
        table.inc(&route("a\"b\\c\nd", 200));
        let mut text = String::new();
        table.encode(Format::Classic, &mut text);
        assert!(
            text.contains(r#"odd_total{path="a\"b\\c\nd",code="200"} 1"#),
            "{text}"
        );
    }

    #[test]
    fn a_histogram_counts_each_value_in_the_first_bucket_that_holds_it() {
        static BOUNDS: [f64; 3] = [0.25, 1.0, 5.0];
        let table = HistogramTable::new("latency_seconds", "Latency.", &BOUNDS);
        let key = route("/a", 200);
        // On a bound counts in that bucket (`le`), beyond the last in +Inf only.
        for value in [0.125, 0.25, 0.5, 7.0] {
            table.observe(&key, value);
        }
        assert_eq!(table.get(&key), (4, 7.875));
        let mut text = String::new();
        table.encode(Format::OpenMetrics, &mut text);
        let expected = "# HELP latency_seconds Latency.\n# TYPE latency_seconds histogram\n\
            latency_seconds_sum{path=\"/a\",code=\"200\"} 7.875\n\
            latency_seconds_count{path=\"/a\",code=\"200\"} 4\n\
            latency_seconds_bucket{le=\"0.25\",path=\"/a\",code=\"200\"} 2\n\
            latency_seconds_bucket{le=\"1.0\",path=\"/a\",code=\"200\"} 3\n\
            latency_seconds_bucket{le=\"5.0\",path=\"/a\",code=\"200\"} 3\n\
            latency_seconds_bucket{le=\"+Inf\",path=\"/a\",code=\"200\"} 4\n";
        assert_eq!(text, expected);
    }

    #[test]
    fn the_size_hint_covers_what_is_written() {
        let counters = CounterTable::new("requests", "Requests.");
        let histograms = HistogramTable::new(
            "latency_seconds",
            "Latency.",
            &crate::buckets::APISERVER_REQUEST_DURATION,
        );
        for i in 0..50 {
            let key = route(&format!("/path/{i}"), 200);
            counters.inc(&key);
            histograms.observe(&key, 0.3);
        }
        for family in [&counters as &dyn TextFamily, &histograms] {
            let mut text = String::new();
            family.encode(Format::Classic, &mut text);
            assert!(
                family.size_hint() >= text.len(),
                "{} < {}",
                family.size_hint(),
                text.len()
            );
        }
    }
}
