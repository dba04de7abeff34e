//! What every controller is handed: the Kubernetes client of the management plane, the
//! simulated cloud it makes real, the injected clock and an event recorder.

use infrasim_clock::SharedClock;
use infrasim_cloud::Cloud;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::{Client, Resource, ResourceExt};
use std::sync::Arc;

/// Shared by the controllers of one process.
#[derive(Clone)]
pub struct Context {
    pub client: Client,
    pub cloud: Arc<Cloud>,
    pub clock: SharedClock,
    recorder: Recorder,
}

impl Context {
    pub fn new(client: Client, cloud: Arc<Cloud>, clock: SharedClock) -> Self {
        let recorder = Recorder::new(
            client.clone(),
            Reporter {
                controller: "infrasim".into(),
                instance: None,
            },
        );
        Context {
            client,
            cloud,
            clock,
            recorder,
        }
    }

    pub fn now(&self) -> chrono::DateTime<chrono::Utc> {
        self.clock.now()
    }

    /// Records an Event about `obj` (`kubectl describe` shows it). A failure to record is
    /// logged, never fatal: events are a courtesy, not state.
    pub async fn event<K>(&self, obj: &K, warning: bool, reason: &str, note: String)
    where
        K: Resource<DynamicType = ()>,
    {
        let event = Event {
            type_: if warning {
                EventType::Warning
            } else {
                EventType::Normal
            },
            reason: reason.to_string(),
            note: Some(note),
            action: reason.to_string(),
            secondary: None,
        };
        if let Err(e) = self.recorder.publish(&event, &obj.object_ref(&())).await {
            tracing::debug!(object = %obj.name_any(), error = %e, "event not recorded");
        }
    }
}
