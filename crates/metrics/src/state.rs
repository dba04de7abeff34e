//! Metrics about the state of objects (a Cluster's phase, a MachineDeployment's ready
//! replicas, every condition of every Machine), defined as kube-state-metrics'
//! custom-resource-state configuration defines them: per kind, a metric-name prefix, labels
//! read from paths into the object, and families that are each an *info* (a sample of 1
//! carrying labels), a *gauge* (a number read from the object) or a *state set* (one sample
//! per possible value, 1 for the value the object holds). Cluster API and CAPV publish such
//! configurations for their kinds, and their Grafana dashboards read what kube-state-metrics
//! makes of them; this module evaluates the same definitions the same way, so the
//! dashboards read ours unchanged with no kube-state-metrics running.
//!
//! Evaluation follows kube-state-metrics where a dashboard could tell the difference:
//! labels are sorted by name and carry `customresource_group`, `_version` and `_kind`;
//! missing label paths leave the label out; an info with no label left has no sample; a
//! gauge reads booleans, numbers, `"true"`/`"yes"`/`"false"`/`"no"`/`"unknown"`, RFC 3339
//! times (as Unix seconds), quantities and percentages; a missing value is 0 only where the
//! family says `nilIsZero`.
//!
//! [`StateMetrics`] keeps each object's samples rendered as text, replaced when the object
//! changes: a scrape only concatenates, so its cost does not grow with how the samples
//! were computed. No crate evaluates these definitions.

use crate::Format;
use serde_json::Value;
use std::collections::{BTreeMap, HashSet};
use std::fmt::Write as _;
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// A path into an object: field names, a list index, or `[key=value]` for the element of
/// a list whose `key` is `value` (`["metadata", "ownerReferences", "[kind=Cluster]",
/// "name"]`). The empty path is the object itself.
pub type Path = &'static [&'static str];

/// How a family's samples are read from an object (kube-state-metrics' `each`).
#[derive(Debug, Clone)]
pub struct Each {
    shape: Shape,
    path: Path,
    value_from: Path,
    labels: Vec<(&'static str, Path)>,
    nil_is_zero: bool,
}

#[derive(Debug, Clone)]
enum Shape {
    Info,
    Gauge,
    StateSet {
        label: &'static str,
        states: &'static [&'static str],
    },
}

impl Each {
    /// A sample of 1 per object (or per element, when `path` names a list), labelled from
    /// paths relative to it; none where no label is found.
    pub fn info(path: Path) -> Self {
        Self::new(Shape::Info, path)
    }

    /// The number at `path` (per element when it names a list, read from
    /// [`Each::value_from`] in each).
    pub fn gauge(path: Path) -> Self {
        Self::new(Shape::Gauge, path)
    }

    /// One sample per `states`, labelled `label`, 1 for the string the object holds at
    /// `path` and 0 for the others.
    pub fn state_set(path: Path, label: &'static str, states: &'static [&'static str]) -> Self {
        Self::new(Shape::StateSet { label, states }, path)
    }

    fn new(shape: Shape, path: Path) -> Self {
        Each {
            shape,
            path,
            value_from: &[],
            labels: Vec::new(),
            nil_is_zero: false,
        }
    }

    /// Where in each element (or in the value at the path) the gauge's number or the state
    /// set's string is.
    pub fn value_from(mut self, path: Path) -> Self {
        self.value_from = path;
        self
    }

    /// A label read from `path`, relative to the value at the family's path (or to each
    /// element of a list); an empty `path` is that value itself.
    pub fn label(mut self, name: &'static str, path: Path) -> Self {
        self.labels.push((name, path));
        self
    }

    /// A missing value reads as 0 instead of leaving the sample out.
    pub fn nil_is_zero(mut self) -> Self {
        self.nil_is_zero = true;
        self
    }
}

#[derive(Debug, Clone)]
struct Family {
    name: String,
    help: &'static str,
    each: Each,
}

/// The families of one kind.
#[derive(Debug, Clone)]
pub struct Resource {
    group: &'static str,
    version: &'static str,
    kind: &'static str,
    prefix: &'static str,
    labels: Vec<(&'static str, Path)>,
    families: Vec<Family>,
}

/// Labels as a sorted map, the order kube-state-metrics writes them in.
type Labels = BTreeMap<&'static str, String>;

impl Resource {
    /// The kind `kind` in `group`/`version`, whose families are named `<prefix>_<name>`.
    pub fn new(
        group: &'static str,
        version: &'static str,
        kind: &'static str,
        prefix: &'static str,
    ) -> Self {
        Resource {
            group,
            version,
            kind,
            prefix,
            labels: Vec::new(),
            families: Vec::new(),
        }
    }

    /// A label every family of the kind carries, read from `path` in the object.
    pub fn label(mut self, name: &'static str, path: Path) -> Self {
        self.labels.push((name, path));
        self
    }

    /// A family `<prefix>_<name>`.
    pub fn family(mut self, name: &str, help: &'static str, each: Each) -> Self {
        self.families.push(Family {
            name: format!("{}_{name}", self.prefix),
            help,
            each,
        });
        self
    }

    /// The API group, version and kind whose objects these families describe.
    pub fn gvk(&self) -> (&'static str, &'static str, &'static str) {
        (self.group, self.version, self.kind)
    }

    /// The names of the families, in the order [`Resource::samples`] keeps them.
    pub fn family_names(&self) -> impl Iterator<Item = &str> {
        self.families.iter().map(|f| f.name.as_str())
    }

    /// `object`'s samples, kept as the text a scrape copies.
    pub fn samples(&self, object: &Value) -> Samples {
        let mut base = Labels::new();
        base.insert("customresource_group", self.group.to_string());
        base.insert("customresource_kind", self.kind.to_string());
        base.insert("customresource_version", self.version.to_string());
        add_path_labels(object, &self.labels, &mut base);
        let mut shared = String::new();
        write_labels(&mut shared, &base);
        let families = self
            .families
            .iter()
            .map(|family| {
                let mut values = values_of(&family.each, get(object, family.each.path));
                values.sort_by(|a, b| a.0.cmp(&b.0));
                let mut text = String::new();
                for (labels, value) in values {
                    write_rest(&mut text, labels, &base, value);
                }
                text
            })
            .collect();
        let uid = get(object, &["metadata", "uid"]).and_then(Value::as_str);
        Samples {
            uid_hash: fnv1a64(uid.unwrap_or_default().as_bytes()),
            base: shared,
            families,
        }
    }

    /// `object`'s samples as full text lines, one string per family in the families' order.
    pub fn lines(&self, object: &Value) -> Vec<String> {
        let samples = self.samples(object);
        self.families
            .iter()
            .enumerate()
            .map(|(i, family)| {
                let mut text = String::new();
                samples.write_family(&mut text, &family.name, i);
                text
            })
            .collect()
    }
}

/// One object's samples as a scrape writes them, kept small: the labels every sample of the
/// object has (kind, name, namespace, uid: most of a line) once, and per family the rest of
/// each line. A line is written with the shared labels first, then its own (each set sorted
/// by name); the order of labels means nothing to a scraper.
#[derive(Debug, Clone, Default)]
pub struct Samples {
    /// The object's uid hashed as kube-state-metrics hashes it to pick its shard.
    uid_hash: u64,
    base: String,
    /// Per family, lines of the form `own labels} value` (or `} value`), or `{all labels} value`
    /// for a sample whose own label overrides a shared one with another value.
    families: Vec<String>,
}

impl Samples {
    fn write_family(&self, out: &mut String, name: &str, family: usize) {
        let Some(text) = self.families.get(family) else {
            return;
        };
        for line in text.split_inclusive('\n') {
            out.push_str(name);
            if !line.starts_with('{') {
                out.push('{');
                out.push_str(&self.base);
                if !line.starts_with('}') && !self.base.is_empty() {
                    out.push(',');
                }
            }
            out.push_str(line);
        }
    }
}

/// A sample's line after its family's name: its own labels (those the object's shared ones
/// do not already say) and its value; a sample whose own label says otherwise than a shared
/// one of the same name is written whole, as kube-state-metrics lets the sample's win.
fn write_rest(out: &mut String, mut labels: Labels, base: &Labels, value: f64) {
    let overrides = labels
        .iter()
        .any(|(name, v)| base.get(name).is_some_and(|b| b != v));
    if overrides {
        for (name, v) in base {
            labels.entry(name).or_insert_with(|| v.clone());
        }
        out.push('{');
    } else {
        labels.retain(|name, _| !base.contains_key(name));
    }
    write_labels(out, &labels);
    // Writing into a String cannot fail.
    let _ = writeln!(out, "}} {value}");
}

/// The labelled values a family's `each` reads from `value` (what its path found).
fn values_of(each: &Each, value: Option<&Value>) -> Vec<(Labels, f64)> {
    match (value, &each.shape) {
        (Some(Value::Array(items)), _) => items
            .iter()
            .flat_map(|item| value_of(each, Some(item)))
            .collect(),
        _ => value_of(each, value),
    }
}

/// The labelled values of one value (the path's, or one element of its list).
fn value_of(each: &Each, value: Option<&Value>) -> Vec<(Labels, f64)> {
    let mut labels = Labels::new();
    if let Some(v) = value {
        add_path_labels(v, &each.labels, &mut labels);
    }
    match &each.shape {
        // kube-state-metrics makes no info sample of a missing value or of one without labels.
        Shape::Info => match value {
            Some(_) if !labels.is_empty() => vec![(labels, 1.0)],
            _ => Vec::new(),
        },
        Shape::Gauge => {
            let number = match value.and_then(|v| get(v, each.value_from)) {
                None if each.nil_is_zero => Some(0.0),
                None => None,
                Some(v) => to_f64(v),
            };
            number.map(|n| (labels, n)).into_iter().collect()
        }
        Shape::StateSet { label, states } => {
            let Some(Value::String(held)) = value.and_then(|v| get(v, each.value_from)) else {
                return Vec::new();
            };
            states
                .iter()
                .map(|state| {
                    let mut labels = labels.clone();
                    labels.insert(label, state.to_string());
                    (labels, if held == state { 1.0 } else { 0.0 })
                })
                .collect()
        }
    }
}

fn add_path_labels(value: &Value, paths: &[(&'static str, Path)], labels: &mut Labels) {
    for (name, path) in paths {
        let text = match get(value, path) {
            None => continue,
            Some(Value::String(s)) => s.clone(),
            Some(other) => other.to_string(),
        };
        labels.insert(name, text);
    }
}

/// The value at `path` in `value`; JSON's null counts as missing.
fn get(value: &Value, path: Path) -> Option<&Value> {
    let mut at = value;
    for part in path {
        at = match (part.strip_prefix('[').and_then(|p| p.strip_suffix(']')), at) {
            (Some(lookup), Value::Array(items)) => {
                let (key, wanted) = lookup.split_once('=')?;
                items.iter().find(|item| matches(item.get(key), wanted))?
            }
            (None, Value::Object(fields)) => fields.get(*part)?,
            (None, Value::Array(items)) => {
                let i: i64 = part.parse().ok()?;
                let len = i64::try_from(items.len()).ok()?;
                items.get(usize::try_from(if i < 0 { i + len } else { i }).ok()?)?
            }
            _ => return None,
        };
    }
    (!at.is_null()).then_some(at)
}

/// Whether a list element's field is the `[key=value]` lookup's value: as text, as a
/// number, or as a boolean.
fn matches(field: Option<&Value>, wanted: &str) -> bool {
    match field {
        Some(Value::String(s)) => s == wanted,
        Some(Value::Number(n)) => wanted.parse::<f64>().ok() == n.as_f64(),
        Some(Value::Bool(b)) => wanted.parse::<bool>().ok() == Some(*b),
        _ => false,
    }
}

/// A gauge's number, read as kube-state-metrics reads one.
fn to_f64(value: &Value) -> Option<f64> {
    match value {
        Value::Bool(b) => Some(if *b { 1.0 } else { 0.0 }),
        Value::Number(n) => n.as_f64(),
        Value::String(s) => match s.to_ascii_lowercase().as_str() {
            "true" | "yes" => Some(1.0),
            "false" | "no" | "unknown" => Some(0.0),
            _ => chrono::DateTime::parse_from_rfc3339(s)
                .map(|t| t.timestamp() as f64)
                .ok()
                .or_else(|| quantity(s))
                .or_else(|| percent(s))
                .or_else(|| s.parse().ok()),
        },
        _ => None,
    }
}

/// A Kubernetes quantity (`25m`, `5Gi`, `1e3`) as a number.
fn quantity(text: &str) -> Option<f64> {
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-'))
        .unwrap_or(text.len());
    let (number, suffix) = text.split_at(split);
    let number: f64 = number.parse().ok()?;
    let scale = match suffix {
        "" => 1.0,
        "n" => 1e-9,
        "u" => 1e-6,
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        "Ki" => 1024.0,
        "Mi" => 1024f64.powi(2),
        "Gi" => 1024f64.powi(3),
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        "Ei" => 1024f64.powi(6),
        exponent => {
            let digits = exponent.strip_prefix(['e', 'E'])?;
            10f64.powi(digits.parse().ok()?)
        }
    };
    Some(number * scale)
}

/// `25%` as 0.25.
fn percent(text: &str) -> Option<f64> {
    let number: f64 = text.strip_suffix('%')?.parse().ok()?;
    Some(number / 100.0)
}

fn write_labels(out: &mut String, labels: &Labels) {
    for (i, (label, v)) in labels.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(label);
        out.push_str("=\"");
        escape_into(out, v);
        out.push('"');
    }
}

/// A label value as the text formats write one: `\`, `"` and newlines escaped.
fn escape_into(out: &mut String, value: &str) {
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

/// A kind's definitions and the samples of each of its objects, by namespace and name.
#[derive(Debug)]
struct Slot {
    resource: Arc<Resource>,
    /// Shared, so a scrape can take them all at once and render them after letting go of
    /// the table (see [`StateMetrics::snapshot`]).
    objects: BTreeMap<String, Arc<Samples>>,
}

/// Which kind of a [`StateMetrics`] an object belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KindId(usize);

/// The samples of every object of the kinds added, kept current by whoever watches them
/// and rendered at each scrape. Clones share them.
#[derive(Debug, Clone, Default)]
pub struct StateMetrics {
    slots: Arc<RwLock<Vec<Slot>>>,
}

impl StateMetrics {
    fn read(&self) -> RwLockReadGuard<'_, Vec<Slot>> {
        // A panic while holding the lock leaves the table as consistent as any write does.
        self.slots.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, Vec<Slot>> {
        self.slots.write().unwrap_or_else(|p| p.into_inner())
    }

    /// Adds a kind's families; its objects are then given by [`StateMetrics::set`].
    pub fn add(&self, resource: Resource) -> KindId {
        let mut slots = self.write();
        slots.push(Slot {
            resource: Arc::new(resource),
            objects: BTreeMap::new(),
        });
        KindId(slots.len() - 1)
    }

    /// The definitions of `kind`.
    pub fn resource(&self, kind: KindId) -> Option<Arc<Resource>> {
        self.read().get(kind.0).map(|s| s.resource.clone())
    }

    /// `object`, known as `key`, is as given (created or changed).
    pub fn set(&self, kind: KindId, key: &str, object: &Value) {
        let Some(resource) = self.resource(kind) else {
            return;
        };
        // Evaluated outside the lock: a scrape waits for a map insert, not for this.
        let samples = resource.samples(object);
        if let Some(slot) = self.write().get_mut(kind.0) {
            slot.objects.insert(key.to_string(), Arc::new(samples));
        }
    }

    /// The object known as `key` is gone.
    pub fn remove(&self, kind: KindId, key: &str) {
        if let Some(slot) = self.write().get_mut(kind.0) {
            slot.objects.remove(key);
        }
    }

    /// Only the objects named in `keys` exist (after a watch listed them all again).
    pub fn retain(&self, kind: KindId, keys: &HashSet<String>) {
        if let Some(slot) = self.write().get_mut(kind.0) {
            slot.objects.retain(|key, _| keys.contains(key));
        }
    }

    /// How many objects have samples, over every kind.
    pub fn objects(&self) -> usize {
        self.read().iter().map(|s| s.objects.len()).sum()
    }

    /// Every family of every kind, in `format`, as one text (tests and measurements; a
    /// scrape is answered from [`Snapshot::chunks`]).
    pub fn render(&self, format: Format) -> String {
        self.snapshot().chunks(format, 1 << 20).collect()
    }

    /// Every object's samples as they are now. The table is held only while their handles
    /// are copied (milliseconds at 190,000 objects), so rendering them, which takes seconds
    /// at 10,000 clusters, never keeps an informer from recording a change.
    pub fn snapshot(&self) -> Snapshot {
        self.snapshot_of(None)
    }

    /// As [`StateMetrics::snapshot`], of the objects of one shard only when `shard` says
    /// which.
    pub fn snapshot_of(&self, shard: Option<Shard>) -> Snapshot {
        let kinds = self
            .read()
            .iter()
            .map(|slot| {
                let objects = slot.objects.values();
                let kept = objects.filter(|o| shard.is_none_or(|s| s.keeps(o.uid_hash)));
                (slot.resource.clone(), kept.cloned().collect())
            })
            .collect();
        Snapshot { kinds }
    }
}

/// One of `total` shards of the objects, as kube-state-metrics' `--shard` and
/// `--total-shards` divide them: an object belongs to the shard that jump consistent hashing
/// (Lamping and Veach) picks for the FNV-1a hash of its uid. Scraped as several targets, the
/// text of 10,000 clusters (1.8 GB) comes in parts a scraper reads at once, and each object
/// is in the shard kube-state-metrics would put it in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    index: u32,
    total: u32,
}

impl Shard {
    /// Shard `index` of `total`; `None` unless `index < total`.
    pub fn new(index: u32, total: u32) -> Option<Shard> {
        (index < total).then_some(Shard { index, total })
    }

    /// The shard a scrape's query asks for (`shard=1&total_shards=4`, the names of
    /// kube-state-metrics' flags): `None` when it names none, an error when it names a shard
    /// that is not one.
    pub fn from_query(query: Option<&str>) -> Result<Option<Shard>, String> {
        let (mut index, mut total) = (None, None);
        for pair in query.unwrap_or_default().split('&') {
            match pair.split_once('=') {
                Some(("shard", v)) => index = Some(v),
                Some(("total_shards", v)) => total = Some(v),
                _ => {}
            }
        }
        let number = |name: &str, v: &str| {
            v.parse::<u32>()
                .map_err(|_| format!("{name} must be a whole number, not {v:?}"))
        };
        match (index, total) {
            (None, None) => Ok(None),
            (Some(i), Some(n)) => Shard::new(number("shard", i)?, number("total_shards", n)?)
                .map(Some)
                .ok_or_else(|| format!("shard {i} is not one of {n} (0 to {n} less one)")),
            _ => Err("shard and total_shards go together".to_string()),
        }
    }

    fn keeps(self, uid_hash: u64) -> bool {
        jump_hash(uid_hash, self.total) == self.index
    }
}

/// 64-bit FNV-1a, what Go's `hash/fnv` `New64a` computes (kube-state-metrics hashes uids
/// with it).
fn fnv1a64(bytes: &[u8]) -> u64 {
    use std::hash::Hasher;
    let mut hasher = fnv::FnvHasher::default();
    hasher.write(bytes);
    hasher.finish()
}

/// The bucket of `key` among `buckets` by jump consistent hashing (Lamping and Veach, 2014),
/// as kube-state-metrics assigns objects to shards. Written here: the algorithm is these few
/// lines, and no well-kept crate offers it.
fn jump_hash(mut key: u64, buckets: u32) -> u32 {
    let (mut bucket, mut next) = (-1i64, 0i64);
    while next < i64::from(buckets) {
        bucket = next;
        key = key.wrapping_mul(2_862_933_555_777_941_757).wrapping_add(1);
        next = ((bucket + 1) as f64 * ((1u64 << 31) as f64 / ((key >> 33) + 1) as f64)) as i64;
    }
    u32::try_from(bucket).unwrap_or(0)
}

/// Every object's samples at one moment, per kind in the order the kinds were added and
/// per object in the order of their keys.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    kinds: Vec<(Arc<Resource>, Vec<Arc<Samples>>)>,
}

impl Snapshot {
    /// The text of every family in `format`, in pieces of a little over `size` bytes each,
    /// in order: their concatenation is the whole answer. A scrape sends each piece as it is
    /// made, so it never holds the whole text (1.8 GB at 10,000 clusters).
    pub fn chunks(self, format: Format, size: usize) -> Chunks {
        Chunks {
            snapshot: self,
            format,
            size: size.max(1),
            kind: 0,
            family: 0,
            object: None,
            ended: false,
        }
    }
}

/// The pieces of a [`Snapshot`]'s text; see [`Snapshot::chunks`].
#[derive(Debug)]
pub struct Chunks {
    snapshot: Snapshot,
    format: Format,
    size: usize,
    /// Where the text stands: a kind, one of its families, and the next object whose samples
    /// of that family are written (`None`: the family's header is next).
    kind: usize,
    family: usize,
    object: Option<usize>,
    ended: bool,
}

impl Chunks {
    /// Writes the next part (a family's header or one object's samples of it) into `out`;
    /// false when everything is written.
    fn write_next(&mut self, out: &mut String) -> bool {
        let Some((resource, objects)) = self.snapshot.kinds.get(self.kind) else {
            return false;
        };
        let Some(family) = resource.families.get(self.family) else {
            (self.kind, self.family, self.object) = (self.kind + 1, 0, None);
            return true;
        };
        match self.object {
            None => {
                write_header(out, family);
                self.object = Some(0);
            }
            Some(i) => match objects.get(i) {
                Some(samples) => {
                    samples.write_family(out, &family.name, self.family);
                    self.object = Some(i + 1);
                }
                None => (self.family, self.object) = (self.family + 1, None),
            },
        }
        true
    }
}

impl Iterator for Chunks {
    type Item = String;

    fn next(&mut self) -> Option<String> {
        if self.ended {
            return None;
        }
        let mut out = String::with_capacity(self.size + 4096);
        while out.len() < self.size {
            if !self.write_next(&mut out) {
                if self.format == Format::OpenMetrics {
                    out.push_str("# EOF\n");
                }
                self.ended = true;
                break;
            }
        }
        // A table with no kinds in classic text is no text at all: no empty piece.
        (!out.is_empty()).then_some(out)
    }
}

fn write_header(out: &mut String, family: &Family) {
    out.push_str("# HELP ");
    out.push_str(&family.name);
    out.push(' ');
    out.push_str(&family.help.replace('\\', "\\\\").replace('\n', "\\n"));
    out.push_str("\n# TYPE ");
    out.push_str(&family.name);
    out.push_str(" gauge\n");
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const STATUS: &[&str] = &["True", "False", "Unknown"];

    fn cluster() -> Resource {
        Resource::new("cluster.x-k8s.io", "v1beta2", "Cluster", "capi_cluster")
            .label("name", &["metadata", "name"])
            .label("namespace", &["metadata", "namespace"])
            .family(
                "info",
                "Information about a cluster.",
                Each::info(&[])
                    .label("topology_version", &["spec", "topology", "version"])
                    .label(
                        "control_plane_endpoint_port",
                        &["spec", "controlPlaneEndpoint", "port"],
                    ),
            )
            .family(
                "spec_paused",
                "Whether the cluster is paused.",
                Each::gauge(&["spec", "paused"]).nil_is_zero(),
            )
            .family(
                "created",
                "Unix creation timestamp.",
                Each::gauge(&["metadata", "creationTimestamp"]),
            )
            .family(
                "status_phase",
                "The clusters current phase.",
                Each::state_set(&["status", "phase"], "phase", &["Pending", "Provisioned"]),
            )
            .family(
                "status_condition",
                "The condition of a cluster.",
                Each::state_set(&["status", "conditions"], "status", STATUS)
                    .value_from(&["status"])
                    .label("type", &["type"]),
            )
            .family(
                "status_condition_last_transition_time",
                "The condition's last transition time of a cluster.",
                Each::gauge(&["status", "conditions"])
                    .value_from(&["lastTransitionTime"])
                    .label("type", &["type"])
                    .label("status", &["status"]),
            )
            .family(
                "annotation_paused",
                "Whether the cluster is paused.",
                Each::info(&["metadata", "annotations", "cluster.x-k8s.io/paused"])
                    .label("paused_value", &[]),
            )
    }

    fn object() -> Value {
        json!({
            "metadata": {"name": "c1", "namespace": "ns", "creationTimestamp": "2026-11-30T01:00:00Z"},
            "spec": {"controlPlaneEndpoint": {"host": "127.0.0.1", "port": 20001}},
            "status": {"phase": "Provisioned", "conditions": [
                {"type": "Ready", "status": "False", "lastTransitionTime": "2026-11-30T01:00:10Z"},
                {"type": "Available", "status": "True", "lastTransitionTime": "2026-11-30T01:00:05Z"}
            ]}
        })
    }

    const BASE: &str = "customresource_group=\"cluster.x-k8s.io\",customresource_kind=\"Cluster\",customresource_version=\"v1beta2\"";

    #[test]
    fn families_read_the_object_as_kube_state_metrics_does() {
        let s = cluster().lines(&object());
        assert_eq!(
            s[0],
            format!("capi_cluster_info{{{BASE},name=\"c1\",namespace=\"ns\",control_plane_endpoint_port=\"20001\"}} 1\n")
        );
        // Missing and nilIsZero: 0.
        assert!(s[1].ends_with("} 0\n"), "{}", s[1]);
        assert!(s[2].ends_with("} 1796000400\n"), "{}", s[2]);
        assert_eq!(
            s[3],
            format!(
                "capi_cluster_status_phase{{{BASE},name=\"c1\",namespace=\"ns\",phase=\"Pending\"}} 0\n\
                 capi_cluster_status_phase{{{BASE},name=\"c1\",namespace=\"ns\",phase=\"Provisioned\"}} 1\n"
            )
        );
        // Per condition and state, sorted by their own labels as kube-state-metrics sorts
        // them: by status, then type.
        let lines: Vec<&str> = s[4].lines().collect();
        let ends: Vec<&str> = lines
            .iter()
            .map(|l| l.rsplit_once(",status=").map_or("", |(_, e)| e))
            .collect();
        assert_eq!(
            ends,
            [
                "\"False\",type=\"Available\"} 0",
                "\"False\",type=\"Ready\"} 1",
                "\"True\",type=\"Available\"} 1",
                "\"True\",type=\"Ready\"} 0",
                "\"Unknown\",type=\"Available\"} 0",
                "\"Unknown\",type=\"Ready\"} 0",
            ],
            "{}",
            s[4]
        );
        assert!(s[5].contains("status=\"True\",type=\"Available\"} 1796000405\n"));
        // No annotation, no sample.
        assert_eq!(s[6], "");
    }

    #[test]
    fn a_paused_annotation_is_its_own_label() {
        let mut o = object();
        o["metadata"]["annotations"] = json!({"cluster.x-k8s.io/paused": "yes \"now\""});
        let s = cluster().lines(&o);
        assert!(
            s[6].contains("paused_value=\"yes \\\"now\\\"\"} 1\n"),
            "{}",
            s[6]
        );
    }

    #[test]
    fn a_sample_label_that_says_otherwise_than_a_shared_one_wins() {
        let r = Resource::new("g", "v1", "K", "k")
            .label("name", &["metadata", "name"])
            .family(
                "same",
                "",
                Each::info(&[]).label("name", &["metadata", "name"]),
            )
            .family(
                "other",
                "",
                Each::info(&[]).label("name", &["spec", "alias"]),
            );
        let o = json!({"metadata": {"name": "n"}, "spec": {"alias": "a"}});
        let s = r.lines(&o);
        let base =
            "customresource_group=\"g\",customresource_kind=\"K\",customresource_version=\"v1\"";
        // Said twice alike: once.
        assert_eq!(s[0], format!("k_same{{{base},name=\"n\"}} 1\n"));
        assert_eq!(s[1], format!("k_other{{{base},name=\"a\"}} 1\n"));
    }

    #[test]
    fn gauges_read_quantities_percentages_booleans_and_times() {
        assert_eq!(to_f64(&json!("25%")), Some(0.25));
        assert_eq!(to_f64(&json!("250m")), Some(0.25));
        assert_eq!(to_f64(&json!("2Gi")), Some(2.0 * 1024.0 * 1024.0 * 1024.0));
        assert_eq!(to_f64(&json!("1e3")), Some(1000.0));
        assert_eq!(to_f64(&json!(true)), Some(1.0));
        assert_eq!(to_f64(&json!("Unknown")), Some(0.0));
        assert_eq!(to_f64(&json!("1970-01-01T00:01:00Z")), Some(60.0));
        assert_eq!(to_f64(&json!("a lot")), None);
        assert_eq!(to_f64(&json!({})), None);
    }

    #[test]
    fn a_list_lookup_finds_the_element_by_a_field() {
        let o = json!({"metadata": {"ownerReferences": [
            {"kind": "MachineSet", "name": "ms"}, {"kind": "Cluster", "name": "c1"}]}});
        let path: Path = &["metadata", "ownerReferences", "[kind=Cluster]", "name"];
        assert_eq!(get(&o, path), Some(&json!("c1")));
        assert_eq!(
            get(&o, &["metadata", "ownerReferences", "-1", "kind"]),
            Some(&json!("Cluster"))
        );
        assert_eq!(
            get(&o, &["metadata", "ownerReferences", "[kind=Machine]"]),
            None
        );
    }

    #[test]
    fn the_table_renders_each_family_once_with_every_object_under_it() {
        let table = StateMetrics::default();
        let kind = table.add(cluster());
        table.set(kind, "ns/c1", &object());
        let mut second = object();
        second["metadata"]["name"] = json!("c2");
        table.set(kind, "ns/c2", &second);
        let text = table.render(Format::Classic);
        assert_eq!(text.matches("# TYPE capi_cluster_info gauge\n").count(), 1);
        assert_eq!(text.matches("capi_cluster_info{").count(), 2);
        assert!(!text.contains("# EOF"));
        table.retain(kind, &HashSet::from(["ns/c2".to_string()]));
        let open = table.render(Format::OpenMetrics);
        assert_eq!(open.matches("capi_cluster_info{").count(), 1);
        assert!(open.contains("name=\"c2\""));
        assert!(open.ends_with("# EOF\n"));
        assert_eq!(table.objects(), 1);
        table.remove(kind, "ns/c2");
        assert!(!table.render(Format::Classic).contains("capi_cluster_info{"));
    }

    #[test]
    fn a_snapshot_renders_in_pieces_as_it_was_taken() {
        let table = StateMetrics::default();
        let kind = table.add(cluster());
        table.set(kind, "ns/c1", &object());
        let snapshot = table.snapshot();
        let whole = table.render(Format::OpenMetrics);
        // Changes after the snapshot are not in it.
        let mut second = object();
        second["metadata"]["name"] = json!("c2");
        table.set(kind, "ns/c2", &second);
        table.remove(kind, "ns/c1");
        let pieces: Vec<String> = snapshot.chunks(Format::OpenMetrics, 100).collect();
        assert!(pieces.len() > 5, "{}", pieces.len());
        // Each piece but the last is at least the size asked for, cut between lines.
        for piece in &pieces[..pieces.len() - 1] {
            assert!(piece.len() >= 100 && piece.ends_with('\n'), "{piece:?}");
        }
        assert_eq!(pieces.concat(), whole);
        assert!(whole.contains("name=\"c1\"") && !whole.contains("name=\"c2\""));
        assert_eq!(pieces.concat().matches("# EOF").count(), 1);
        // Nothing at all: no piece in the classic format, the end marker in OpenMetrics.
        let empty = StateMetrics::default().snapshot();
        assert_eq!(empty.clone().chunks(Format::Classic, 10).count(), 0);
        assert_eq!(
            empty.chunks(Format::OpenMetrics, 10).collect::<Vec<_>>(),
            ["# EOF\n"]
        );
    }

    #[test]
    fn uids_hash_and_jump_as_kube_state_metrics_shards_them() {
        // FNV-1a's published vectors.
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
        // Jump hashing: the published implementations' vectors (the Go package
        // kube-state-metrics uses among them)...
        for (key, buckets, bucket) in [
            (1, 1, 0),
            (42, 57, 43),
            (0xDEAD_10CC, 1, 0),
            (0xDEAD_10CC, 666, 361),
            (256, 1024, 520),
        ] {
            assert_eq!(jump_hash(key, buckets), bucket, "{key} in {buckets}");
        }
        // ...a key stays in its bucket or moves to the new one as buckets are added, and
        // the buckets fill evenly.
        let mut counts = [0usize; 5];
        for key in (0..10_000u64).map(|k| fnv1a64(&k.to_le_bytes())) {
            assert_eq!(jump_hash(key, 1), 0);
            for n in 1..5 {
                let (before, after) = (jump_hash(key, n), jump_hash(key, n + 1));
                assert!(
                    after == before || after == n,
                    "{key}: {before} then {after}"
                );
            }
            counts[jump_hash(key, 5) as usize] += 1;
        }
        assert!(
            counts.iter().all(|&c| (1_700..2_300).contains(&c)),
            "{counts:?}"
        );
    }

    #[test]
    fn shards_split_the_objects_between_them() {
        let table = StateMetrics::default();
        let kind = table.add(cluster());
        for i in 0..40 {
            let mut o = object();
            o["metadata"]["name"] = json!(format!("c{i}"));
            o["metadata"]["uid"] = json!(format!("00000000-0000-0000-0000-{i:012}"));
            table.set(kind, &format!("ns/c{i}"), &o);
        }
        let lines = |shard| {
            let text: String = table
                .snapshot_of(shard)
                .chunks(Format::Classic, 1 << 20)
                .collect();
            text.lines()
                .filter(|l| l.starts_with("capi_cluster_info{"))
                .map(str::to_string)
                .collect::<Vec<_>>()
        };
        let all = lines(None);
        assert_eq!(all.len(), 40);
        let mut parts: Vec<String> = Vec::new();
        for i in 0..3 {
            let part = lines(Shard::new(i, 3));
            assert!(
                !part.is_empty() && part.len() < 40,
                "shard {i}: {}",
                part.len()
            );
            parts.extend(part);
        }
        parts.sort();
        let mut all = all;
        all.sort();
        assert_eq!(parts, all, "every object in exactly one shard");
        assert_eq!(Shard::new(3, 3), None);
        assert_eq!(
            Shard::from_query(Some("total_shards=3&shard=2")),
            Ok(Shard::new(2, 3))
        );
        assert_eq!(Shard::from_query(Some("x=1")), Ok(None));
        assert_eq!(Shard::from_query(None), Ok(None));
        for bad in [
            "shard=1",
            "shard=3&total_shards=3",
            "shard=a&total_shards=2",
        ] {
            assert!(Shard::from_query(Some(bad)).is_err(), "{bad}");
        }
    }
}
