//! What every controller reports to Prometheus, under the names controller-runtime and
//! Cluster API give them, so Cluster API's `controller-runtime` Grafana dashboard reads ours:
//! `controller_runtime_reconcile_total{controller,result}`, `_reconcile_errors_total`,
//! `_reconcile_time_seconds`, `_active_workers` and `_max_concurrent_reconciles`, and Cluster
//! API's own `capi_reconcile_total` and `capi_reconcile_time_seconds` (which upstream keeps
//! apart from controller-runtime's to leave rate-limited requeues out; the runner here has
//! none, so both say the same).
//!
//! A controller is named as controller-runtime names one by default: its kind in lower case
//! (`cluster`, `machinedeployment`, `vspherevm`).

use infrasim_metrics::Metrics;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use std::sync::Arc;
use std::time::Instant;

/// controller-runtime's (and Cluster API's) reconcile time buckets, in seconds.
pub const RECONCILE_TIME: [f64; 40] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9,
    1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 15.0, 20.0,
    25.0, 30.0, 40.0, 50.0, 60.0,
];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Named {
    controller: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Resulted {
    controller: String,
    result: &'static str,
}

type Histograms = Family<Named, Histogram, fn() -> Histogram>;

fn reconcile_histogram() -> Histogram {
    Histogram::new(RECONCILE_TIME)
}

#[derive(Debug)]
struct Families {
    total: Family<Resulted, Counter>,
    errors: Family<Named, Counter>,
    time: Histograms,
    active: Family<Named, Gauge>,
    max_concurrent: Family<Named, Gauge>,
    capi_total: Family<Resulted, Counter>,
    capi_time: Histograms,
    /// The registry, for the families' own collectors.
    registry: Metrics,
    /// The vSphere simulators' families, for the simulators the controllers start.
    vsphere: infrasim_vsphere_sim::metrics::SimMetrics,
    /// The work queues' families.
    queues: crate::workqueue::QueueFamilies,
}

/// The controllers' families; clones share them.
#[derive(Clone, Debug)]
pub struct ControllerMetrics(Arc<Families>);

/// How a reconcile ended, as controller-runtime's `result` label says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Done until something changes.
    Success,
    /// Done, to be looked at again after a while.
    RequeueAfter,
    /// Failed.
    Error,
}

impl Outcome {
    fn label(self) -> &'static str {
        match self {
            Outcome::Success => "success",
            Outcome::RequeueAfter => "requeue_after",
            Outcome::Error => "error",
        }
    }
}

impl ControllerMetrics {
    /// Registers the families in `metrics`, once per process.
    pub fn register(metrics: &Metrics) -> Self {
        let f = Families {
            total: Family::default(),
            errors: Family::default(),
            time: Family::new_with_constructor(reconcile_histogram),
            active: Family::default(),
            max_concurrent: Family::default(),
            capi_total: Family::default(),
            capi_time: Family::new_with_constructor(reconcile_histogram),
            registry: metrics.clone(),
            vsphere: infrasim_vsphere_sim::metrics::SimMetrics::register(metrics),
            queues: crate::workqueue::QueueFamilies::register(metrics),
        };
        metrics.register(
            "controller_runtime_reconcile",
            "Total number of reconciliations per controller",
            f.total.clone(),
        );
        metrics.register(
            "controller_runtime_reconcile_errors",
            "Total number of reconciliation errors per controller",
            f.errors.clone(),
        );
        metrics.register(
            "controller_runtime_reconcile_time_seconds",
            "Length of time per reconciliation per controller",
            f.time.clone(),
        );
        metrics.register(
            "controller_runtime_active_workers",
            "Number of currently used workers per controller",
            f.active.clone(),
        );
        metrics.register(
            "controller_runtime_max_concurrent_reconciles",
            "Maximum number of concurrent reconciles per controller",
            f.max_concurrent.clone(),
        );
        metrics.register(
            "capi_reconcile",
            "Total number of reconciliations per controller",
            f.capi_total.clone(),
        );
        metrics.register(
            "capi_reconcile_time_seconds",
            "Length of time per reconciliation per controller",
            f.capi_time.clone(),
        );
        ControllerMetrics(Arc::new(f))
    }

    /// Where the families' watches keep the state metrics of their objects.
    pub fn state(&self) -> &infrasim_metrics::state::StateMetrics {
        self.0.registry.state()
    }

    /// The registry the families are in, for the controllers' own collectors.
    pub fn registry(&self) -> &Metrics {
        &self.0.registry
    }

    /// Where the simulators the controllers start report their calls, sessions, tasks and
    /// VMs.
    pub fn vsphere(&self) -> &infrasim_vsphere_sim::metrics::SimMetrics {
        &self.0.vsphere
    }

    /// Where the controllers' work queues are measured.
    pub fn queues(&self) -> &crate::workqueue::QueueFamilies {
        &self.0.queues
    }

    /// A controller starts with `workers` at most at once: its series exist from then on,
    /// at zero, as controller-runtime's do.
    pub(crate) fn started(&self, controller: &str, workers: i64) {
        let f = &self.0;
        let named = Named {
            controller: controller.to_string(),
        };
        f.max_concurrent.get_or_create(&named).set(workers);
        let _ = f.active.get_or_create(&named);
        let _ = f.errors.get_or_create(&named);
        for result in ["success", "error", "requeue", "requeue_after"] {
            let resulted = Resulted {
                controller: controller.to_string(),
                result,
            };
            let _ = f.total.get_or_create(&resulted);
            let _ = f.capi_total.get_or_create(&resulted);
        }
    }

    /// A reconcile of `controller` begins; it is counted when the returned value is told
    /// how it ended, and as active until then.
    pub(crate) fn begin(&self, controller: &str) -> Reconciling {
        let named = Named {
            controller: controller.to_string(),
        };
        self.0.active.get_or_create(&named).inc();
        Reconciling {
            metrics: self.clone(),
            named,
            started: Instant::now(),
        }
    }
}

/// One reconcile under way (see [`ControllerMetrics::begin`]); dropped without an end (its
/// future cancelled) it is no longer active and counts as nothing.
#[derive(Debug)]
pub(crate) struct Reconciling {
    metrics: ControllerMetrics,
    named: Named,
    started: Instant,
}

impl Reconciling {
    pub(crate) fn end(self, outcome: Outcome) {
        let f = &self.metrics.0;
        let seconds = self.started.elapsed().as_secs_f64();
        let resulted = Resulted {
            controller: self.named.controller.clone(),
            result: outcome.label(),
        };
        f.total.get_or_create(&resulted).inc();
        f.capi_total.get_or_create(&resulted).inc();
        if outcome == Outcome::Error {
            f.errors.get_or_create(&self.named).inc();
        }
        f.time.get_or_create(&self.named).observe(seconds);
        f.capi_time.get_or_create(&self.named).observe(seconds);
    }
}

impl Drop for Reconciling {
    fn drop(&mut self) {
        self.metrics.0.active.get_or_create(&self.named).dec();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use infrasim_metrics::Format;

    #[test]
    fn a_reconcile_is_active_until_it_ends_and_then_counted_by_result() {
        let metrics = Metrics::new();
        let controllers = ControllerMetrics::register(&metrics);
        controllers.started("cluster", 64);
        let running = controllers.begin("cluster");
        let text = metrics.render(Format::Classic);
        assert!(
            text.contains("controller_runtime_active_workers{controller=\"cluster\"} 1"),
            "{text}"
        );
        assert!(text
            .contains("controller_runtime_max_concurrent_reconciles{controller=\"cluster\"} 64"));
        assert!(text.contains(
            "controller_runtime_reconcile_total{controller=\"cluster\",result=\"error\"} 0"
        ));
        running.end(Outcome::Error);
        controllers.begin("cluster").end(Outcome::RequeueAfter);
        let text = metrics.render(Format::Classic);
        for line in [
            "controller_runtime_active_workers{controller=\"cluster\"} 0",
            "controller_runtime_reconcile_total{controller=\"cluster\",result=\"error\"} 1",
            "controller_runtime_reconcile_total{controller=\"cluster\",result=\"requeue_after\"} 1",
            "capi_reconcile_total{controller=\"cluster\",result=\"requeue_after\"} 1",
            "controller_runtime_reconcile_errors_total{controller=\"cluster\"} 1",
            "controller_runtime_reconcile_time_seconds_count{controller=\"cluster\"} 2",
            "capi_reconcile_time_seconds_bucket{le=\"60.0\",controller=\"cluster\"} 2",
        ] {
            assert!(text.contains(line), "{line} missing from\n{text}");
        }
    }

    #[test]
    fn a_cancelled_reconcile_is_no_longer_active_and_not_counted() {
        let metrics = Metrics::new();
        let controllers = ControllerMetrics::register(&metrics);
        drop(controllers.begin("machine"));
        let text = metrics.render(Format::Classic);
        assert!(text.contains("controller_runtime_active_workers{controller=\"machine\"} 0"));
        assert!(!text.contains("controller_runtime_reconcile_total{controller=\"machine\""));
    }
}
