//! The simulation's own families, which no upstream component has: what a scale test watches
//! as thousands of clusters come up.
//!
//! - `infrasim_clusters{phase}` and `infrasim_machines{phase}`: Cluster API's clusters and
//!   machines by phase, counted from the informers' caches at the scrape (the state metrics
//!   say the same per object; these stay one series per phase at 10,000 clusters);
//! - `infrasim_cluster_available_seconds`: from a Cluster's creation to its `Available`
//!   condition turning True, for every cluster this process saw turn Available (not those
//!   already Available when it started: their wait was another process's).

use crate::capi::core::{Cluster, Machine};
use crate::capi::state_metrics::{CLUSTER_PHASES, MACHINE_PHASES};
use infrasim_controller_runtime::conditions;
use infrasim_controller_runtime::informers::Informers;
use infrasim_metrics::Metrics;
use kube::runtime::reflector::Store;
use kube::runtime::watcher::Event;
use kube::ResourceExt;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::histogram::Histogram;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

/// Seconds from creation to Available: an in-memory cluster takes seconds, one whose
/// machines boot on a schedule minutes, one stuck behind a fault an hour.
pub const AVAILABLE_BUCKETS: [f64; 14] = [
    1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1200.0, 1800.0, 3600.0, 7200.0,
];

/// Registers the families in `metrics` over the caches of `informers`.
pub fn register(metrics: &Metrics, informers: &Informers) {
    let clusters = informers.of::<Cluster>();
    metrics.register_collector(Box::new(Phases {
        clusters: clusters.store(),
        machines: informers.of::<Machine>().store(),
    }));
    let available = Histogram::new(AVAILABLE_BUCKETS);
    metrics.register(
        "infrasim_cluster_available_seconds",
        "Seconds from a Cluster's creation to its Available condition turning True",
        available.clone(),
    );
    // Whether each cluster was Available when last seen, by uid.
    let seen: Mutex<HashMap<String, bool>> = Mutex::default();
    clusters.observe(Arc::new(move |event| {
        let mut seen = seen.lock().unwrap_or_else(|p| p.into_inner());
        match event {
            Event::Apply(c) | Event::InitApply(c) => {
                let uid = c.uid().unwrap_or_default();
                let now = available_after(c);
                let before = seen.insert(uid, now.is_some());
                // Seen not Available before, Available now: it turned so while we watched.
                if let (Some(false), Some(seconds)) = (before, now) {
                    available.observe(seconds);
                }
            }
            Event::Delete(c) => {
                seen.remove(&c.uid().unwrap_or_default());
            }
            Event::Init | Event::InitDone => {}
        }
    }));
}

/// Seconds from `cluster`'s creation to its Available condition's turning True, if it is
/// True.
fn available_after(cluster: &Cluster) -> Option<f64> {
    let status = cluster.status.as_ref()?;
    let available = conditions::find(status.conditions.as_deref()?, "Available")?;
    if available.status != "True" {
        return None;
    }
    let since = chrono::DateTime::parse_from_rfc3339(&available.last_transition_time).ok()?;
    let created = cluster.creation_timestamp()?.0;
    let took = since.timestamp_millis() - created.as_millisecond();
    Some(took.max(0) as f64 / 1000.0)
}

/// Counts the caches by phase at each scrape.
struct Phases {
    clusters: Store<Cluster>,
    machines: Store<Machine>,
}

impl std::fmt::Debug for Phases {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Phases")
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Phase {
    phase: String,
}

/// Counts by phase, every one of `phases` from 0, so each has a series from the start, as a
/// dashboard's stacked chart expects; an object without a phase yet counts as `Unknown`.
fn by_phase<'a>(
    phases: &[&str],
    of: impl Iterator<Item = Option<&'a str>>,
) -> BTreeMap<String, i64> {
    let mut counts: BTreeMap<String, i64> = phases.iter().map(|p| (p.to_string(), 0)).collect();
    for phase in of {
        *counts
            .entry(phase.unwrap_or("Unknown").to_string())
            .or_insert(0) += 1;
    }
    counts
}

fn encode_phases(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    counts: BTreeMap<String, i64>,
) -> Result<(), std::fmt::Error> {
    let mut family =
        encoder.encode_descriptor(name, help, None, ConstGauge::new(0i64).metric_type())?;
    for (phase, n) in counts {
        ConstGauge::new(n).encode(family.encode_family(&Phase { phase })?)?;
    }
    Ok(())
}

impl Collector for Phases {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let clusters = self.clusters.state();
        let phases = clusters
            .iter()
            .map(|c| c.status.as_ref().and_then(|s| s.phase.as_deref()));
        encode_phases(
            &mut encoder,
            "infrasim_clusters",
            "Cluster API clusters by phase.",
            by_phase(CLUSTER_PHASES, phases),
        )?;
        let machines = self.machines.state();
        let phases = machines
            .iter()
            .map(|m| m.status.as_ref().and_then(|s| s.phase.as_deref()));
        encode_phases(
            &mut encoder,
            "infrasim_machines",
            "Cluster API machines by phase.",
            by_phase(MACHINE_PHASES, phases),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_phase_has_a_count_and_a_missing_one_is_unknown() {
        let counts = by_phase(
            CLUSTER_PHASES,
            [Some("Provisioned"), None, Some("Provisioned")].into_iter(),
        );
        assert_eq!(counts["Provisioned"], 2);
        assert_eq!(counts["Unknown"], 1);
        assert_eq!(counts["Pending"], 0);
        assert_eq!(counts.len(), CLUSTER_PHASES.len());
    }

    #[test]
    fn a_cluster_is_available_after_its_condition_turned_true() {
        let cluster: Cluster = serde_json::from_value(serde_json::json!({
            "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
            "metadata": {"name": "c", "creationTimestamp": "2030-01-01T00:00:00Z"},
            "spec": {},
            "status": {"conditions": [{"type": "Available", "status": "True",
                                       "lastTransitionTime": "2030-01-01T00:00:42Z",
                                       "reason": "Available"}]}
        }))
        .expect("a Cluster");
        assert_eq!(available_after(&cluster), Some(42.0));
        let mut pending = cluster.clone();
        if let Some(s) = pending.status.as_mut() {
            s.conditions = None;
        }
        assert_eq!(available_after(&pending), None);
    }
}
