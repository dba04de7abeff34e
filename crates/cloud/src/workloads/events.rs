//! Events, as the controllers, the scheduler and the kubelets record them (`Scheduled`,
//! `Pulled`, `Created`, `Started`, `SuccessfulCreate`, `ScalingReplicaSet`, ...), so `kubectl
//! describe` and `kubectl get events` tell what happened; and their expiry after the event TTL,
//! as kube-apiserver lets them lapse (one hour by default).

use super::{Cluster, Obj};
use chrono::{DateTime, Utc};
use infrasim_kube_api::values::At;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicU64, Ordering};

/// Who records an event: the component and, for kubelets, the node.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Source<'a> {
    pub component: &'a str,
    pub host: Option<&'a str>,
}

pub(crate) const SCHEDULER: Source<'static> = Source {
    component: "default-scheduler",
    host: None,
};
pub(crate) const REPLICASETS: Source<'static> = Source {
    component: "replicaset-controller",
    host: None,
};
pub(crate) const DEPLOYMENTS: Source<'static> = Source {
    component: "deployment-controller",
    host: None,
};
pub(crate) const DAEMONSETS: Source<'static> = Source {
    component: "daemonset-controller",
    host: None,
};
pub(crate) const JOBS: Source<'static> = Source {
    component: "job-controller",
    host: None,
};
pub(crate) const STATEFULSETS: Source<'static> = Source {
    component: "statefulset-controller",
    host: None,
};

/// Event names end in a hex timestamp, as kube's recorders name them; a process-wide sequence
/// keeps them unique and in order when the clock has not moved, so lists (and `kubectl
/// describe`, among equal timestamps) show events in the order they happened.
fn next_suffix(now: DateTime<Utc>) -> u64 {
    static LAST: AtomicU64 = AtomicU64::new(0);
    let nanos = now.timestamp_nanos_opt().unwrap_or(0).max(0) as u64;
    let mut current = LAST.load(Ordering::Relaxed);
    loop {
        let next = nanos.max(current + 1);
        match LAST.compare_exchange_weak(current, next, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => return next,
            Err(seen) => current = seen,
        }
    }
}

impl Cluster {
    /// Records a `Normal` (or, with `warning`, a `Warning`) event about `about`.
    pub(crate) fn event(
        &self,
        about: &Obj,
        source: Source<'_>,
        warning: bool,
        reason: &str,
        message: &str,
    ) {
        let now = infrasim_store::format_time(self.now());
        let mut source_value = json!({"component": source.component});
        if let Some(host) = source.host {
            source_value["host"] = json!(host);
        }
        let namespace = match about.namespace() {
            "" => "default",
            ns => ns,
        };
        let event = json!({
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": format!("{}.{:x}", about.name(), next_suffix(self.now())), "namespace": namespace},
            "involvedObject": {
                "apiVersion": about.str("/apiVersion"), "kind": about.str("/kind"),
                "namespace": about.namespace(), "name": about.name(), "uid": about.uid(),
                "resourceVersion": about.str("/metadata/resourceVersion"),
            },
            "reason": reason,
            "message": message,
            "source": source_value,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
            "type": if warning { "Warning" } else { "Normal" },
            "eventTime": Value::Null,
            "reportingComponent": source.component,
            "reportingInstance": source.host.unwrap_or(""),
        });
        self.create("events", event);
    }
}

/// Deletes the events last seen before `before`.
pub(super) fn expire(c: &Cluster, before: DateTime<Utc>) {
    // An event last seen at or after its creation cannot have lapsed if it was created after
    // the cut-off: only older ones are decoded (the sweep runs every minute in every cluster).
    for e in c.created_before("events", before) {
        let last = e
            .value
            .get("lastTimestamp")
            .and_then(Value::as_str)
            .or_else(|| {
                e.value
                    .at("/metadata/creationTimestamp")
                    .and_then(Value::as_str)
            })
            .and_then(|t| t.parse::<DateTime<Utc>>().ok());
        if last.is_some_and(|t| t < before) {
            c.delete("events", e.namespace(), e.name());
        }
    }
}
