//! What every controller is handed: the Kubernetes client of the management plane, the
//! simulated cloud it makes real, the injected clock and an event recorder.

use futures::future::BoxFuture;
use infrasim_clock::SharedClock;
use infrasim_cloud::Cloud;
use k8s_openapi::api::core::v1::{Event, ObjectReference};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::{Client, Resource};
use serde_json::json;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Shared by the controllers of one process.
#[derive(Clone)]
pub struct Context {
    pub client: Client,
    pub cloud: Arc<Cloud>,
    pub clock: SharedClock,
    /// Where the controllers report their reconciles; `None` reports nothing.
    pub metrics: Option<crate::prometheus::ControllerMetrics>,
    /// Which workload clusters this process hosts (all of them unless the fleet is sharded
    /// over several processes, see [`crate::shards`]).
    pub shards: crate::shards::Shards,
    /// Cluster API's `--watch-filter`: only objects labelled
    /// `cluster.x-k8s.io/watch-filter` with this value are reconciled (every object when
    /// `None`).
    pub watch_filter: Option<String>,
    recorder: Arc<Recorder>,
}

/// The label Cluster API's `--watch-filter` selects objects by.
pub const WATCH_FILTER_LABEL: &str = "cluster.x-k8s.io/watch-filter";

impl Context {
    pub fn new(client: Client, cloud: Arc<Cloud>, clock: SharedClock) -> Self {
        Context {
            recorder: Arc::new(Recorder::default()),
            client,
            cloud,
            clock,
            metrics: None,
            shards: crate::shards::Shards::everything(),
            watch_filter: None,
        }
    }

    /// The same, hosting only the clusters of the shards `shards` holds.
    pub fn with_shards(mut self, shards: crate::shards::Shards) -> Self {
        self.shards = shards;
        self
    }

    /// The same, reconciling only objects Cluster API's watch filter label gives `value`
    /// (an empty value filters nothing, as in Cluster API).
    pub fn with_watch_filter(mut self, value: Option<String>) -> Self {
        self.watch_filter = value.filter(|v| !v.is_empty());
        self
    }

    /// Whether an object with `labels` is this process's to reconcile under its watch
    /// filter, as Cluster API's `ResourceHasFilterLabel` predicate decides.
    pub fn watches(&self, labels: &std::collections::BTreeMap<String, String>) -> bool {
        match &self.watch_filter {
            None => true,
            Some(value) => labels.get(WATCH_FILTER_LABEL) == Some(value),
        }
    }

    /// The same, reporting the controllers' reconciles in `metrics`.
    pub fn with_metrics(mut self, metrics: crate::prometheus::ControllerMetrics) -> Self {
        self.metrics = Some(metrics);
        self
    }

    pub fn now(&self) -> chrono::DateTime<chrono::Utc> {
        self.clock.now()
    }

    /// Records an Event about `obj` (`kubectl describe` shows it). A failure to record is
    /// logged, never fatal: events are a courtesy, not state.
    ///
    /// Only naming the object is generic: the write is one function for every kind,
    /// compiled once in this crate rather than for each of the 20 kinds that record events.
    pub fn event<K>(
        &self,
        obj: &K,
        warning: bool,
        reason: &str,
        note: String,
    ) -> BoxFuture<'static, ()>
    where
        K: Resource<DynamicType = ()>,
    {
        let involved = obj.object_ref(&());
        let (ctx, reason) = (self.clone(), reason.to_owned());
        Box::pin(async move {
            let recorded = ctx.recorder.record(&ctx, &involved, warning, &reason, note);
            if let Err(e) = recorded.await {
                tracing::debug!(object = ?involved.name, error = %e, "event not recorded");
            }
        })
    }
}

/// Writes `core/v1` Events, as client-go's recorder in Cluster API's controllers does (so
/// `kubectl describe` finds them by the involved object), and counts repeats of the same
/// event in one Event rather than writing another.
#[derive(Default)]
struct Recorder {
    /// The Event that records each (object, reason, message) and its count; bounded.
    seen: Mutex<HashMap<EventKey, (String, i32)>>,
}

/// (object uid, reason, message).
type EventKey = (String, String, String);

const SEEN_LIMIT: usize = 4096;

impl Recorder {
    async fn record(
        &self,
        ctx: &Context,
        obj: &ObjectReference,
        warning: bool,
        reason: &str,
        message: String,
    ) -> Result<(), kube::Error> {
        let ns = obj.namespace.clone().unwrap_or_else(|| "default".into());
        let api: Api<Event> = Api::namespaced(ctx.client.clone(), &ns);
        let now = crate::conditions::timestamp(ctx.now());
        let key = (
            obj.uid.clone().unwrap_or_default(),
            reason.to_string(),
            message.clone(),
        );
        let repeat = self
            .seen
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&key)
            .cloned();
        if let Some((name, count)) = repeat {
            let patch = json!({"count": count + 1, "lastTimestamp": now});
            if api
                .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .is_ok()
            {
                self.remember(key, name, count + 1);
                return Ok(());
            }
        }
        let name = format!(
            "{}.{:x}",
            obj.name.as_deref().unwrap_or_default(),
            rand::random::<u64>()
        );
        let event: Event = serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": ns},
            "involvedObject": obj,
            "reason": reason, "message": message,
            "type": if warning { "Warning" } else { "Normal" },
            "source": {"component": "infrasim"},
            "reportingComponent": "infrasim", "reportingInstance": "infrasim",
            "firstTimestamp": now, "lastTimestamp": now, "count": 1,
        }))
        .map_err(kube::Error::SerdeError)?;
        api.create(&PostParams::default(), &event).await?;
        self.remember(key, name, 1);
        Ok(())
    }

    fn remember(&self, key: EventKey, name: String, count: i32) {
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        if seen.len() >= SEEN_LIMIT {
            seen.clear();
        }
        seen.insert(key, (name, count));
    }
}
