//! Requeues on the injected clock.
//!
//! A reconciler that waits for a deadline (a machine's VM boots in 10 s) asks to be woken at
//! that time instead of polling. `kube::runtime`'s own requeue sleeps on tokio's clock, which
//! a test cannot move; this queue sleeps on the injected [`infrasim_clock::Clock`] and feeds
//! the controller through `Controller::reconcile_on`, so a test that advances a `FakeClock`
//! sees the reconcile happen at once. One task serves every object of a controller: the
//! earliest deadline is the only timer armed.

use chrono::{DateTime, Utc};
use futures::Stream;
use infrasim_clock::SharedClock;
use kube::runtime::reflector::ObjectRef;
use kube::Resource;
use std::collections::{BTreeMap, HashMap};
use tokio::sync::mpsc;

/// Schedules reconciles of `K` objects at times on the injected clock. Cheap to clone.
pub struct Wakeups<K: Resource<DynamicType = ()>> {
    requests: mpsc::UnboundedSender<(ObjectRef<K>, DateTime<Utc>)>,
}

impl<K: Resource<DynamicType = ()>> Clone for Wakeups<K> {
    fn clone(&self) -> Self {
        Wakeups {
            requests: self.requests.clone(),
        }
    }
}

impl<K> Wakeups<K>
where
    K: Resource<DynamicType = ()> + 'static,
{
    /// The queue, and the stream of objects due for a reconcile (for `reconcile_on`). The
    /// queue's task ends when every `Wakeups` handle is dropped.
    pub fn new(clock: SharedClock) -> (Self, impl Stream<Item = ObjectRef<K>> + Send + 'static) {
        let (requests, incoming) = mpsc::unbounded_channel();
        let (due_tx, due_rx) = mpsc::unbounded_channel();
        tokio::spawn(run(clock, incoming, due_tx));
        let due = futures::stream::unfold(due_rx, |mut rx| async move {
            rx.recv().await.map(|obj| (obj, rx))
        });
        (Wakeups { requests }, due)
    }

    /// Reconciles `obj` at `at` (at once if that has passed). An earlier request for the
    /// same object is replaced.
    pub fn at(&self, obj: ObjectRef<K>, at: DateTime<Utc>) {
        let _ = self.requests.send((obj, at));
    }
}

async fn run<K: Resource<DynamicType = ()>>(
    clock: SharedClock,
    mut incoming: mpsc::UnboundedReceiver<(ObjectRef<K>, DateTime<Utc>)>,
    due: mpsc::UnboundedSender<ObjectRef<K>>,
) {
    // Deadlines in order, and each object's current deadline (a later request replaces it).
    let mut queue: BTreeMap<(DateTime<Utc>, u64), ObjectRef<K>> = BTreeMap::new();
    let mut current: HashMap<ObjectRef<K>, (DateTime<Utc>, u64)> = HashMap::new();
    let mut seq = 0u64;
    loop {
        let now = clock.now();
        while let Some(entry) = queue.first_entry() {
            if entry.key().0 > now {
                break;
            }
            let obj = entry.remove();
            current.remove(&obj);
            if due.send(obj).is_err() {
                return;
            }
        }
        let sleep = queue
            .first_key_value()
            .map(|((at, _), _)| (*at - now).to_std().unwrap_or_default());
        let next = async {
            match sleep {
                Some(d) => clock.sleep(d).await,
                None => futures::future::pending::<()>().await,
            }
        };
        tokio::select! {
            _ = next => {}
            request = incoming.recv() => match request {
                Some((obj, at)) => {
                    if let Some(old) = current.remove(&obj) {
                        queue.remove(&old);
                    }
                    seq += 1;
                    current.insert(obj.clone(), (at, seq));
                    queue.insert((at, seq), obj);
                }
                None => return,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;
    use infrasim_clock::{Clock, FakeClock};
    use k8s_openapi::api::core::v1::ConfigMap;
    use std::sync::Arc;
    use std::time::Duration;

    #[tokio::test]
    async fn objects_are_due_when_the_clock_passes_their_time() {
        let clock = FakeClock::new("2030-01-01T00:00:00Z".parse().unwrap());
        let (wakeups, due) = Wakeups::<ConfigMap>::new(Arc::new(clock.clone()));
        let mut due = Box::pin(due);
        let start = clock.now();
        let a = ObjectRef::<ConfigMap>::new("a").within("ns");
        let b = ObjectRef::<ConfigMap>::new("b").within("ns");
        wakeups.at(a.clone(), start + chrono::Duration::seconds(10));
        wakeups.at(b.clone(), start + chrono::Duration::seconds(5));
        // A newer request for `a` replaces the older one.
        wakeups.at(a.clone(), start + chrono::Duration::seconds(20));
        let nothing = tokio::time::timeout(Duration::from_millis(50), due.next()).await;
        assert!(nothing.is_err(), "nothing is due before the clock moves");
        clock.advance(Duration::from_secs(6));
        assert_eq!(due.next().await, Some(b));
        clock.advance(Duration::from_secs(6));
        let nothing = tokio::time::timeout(Duration::from_millis(50), due.next()).await;
        assert!(nothing.is_err(), "a's first deadline was replaced");
        clock.advance(Duration::from_secs(10));
        assert_eq!(due.next().await, Some(a));
    }
}
