//! The simulators this process runs, one per `VCenterSimulator` (by `namespace/name`). The
//! VCenterSimulator reconciler starts and stops them; the EnvVar reconciler (and later the VM
//! reconcilers) reach their inventories through here. They live as long as the process:
//! unlike upstream's controller, any number run at once.

use futures::Stream;
use infrasim_vsphere_sim::{Changes, Instance, Simulator};
use kube::runtime::reflector::ObjectRef;
use kube::Resource;
use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use tokio::sync::mpsc;

/// What a running simulator's status reports.
#[derive(Debug, Clone, PartialEq)]
pub struct Serving {
    pub addr: SocketAddr,
    pub username: String,
    pub password: String,
    /// SHA-256 of its certificate, colon-separated upper-case hex.
    pub thumbprint: String,
}

/// The running simulators, by `namespace/name` of their VCenterSimulator.
#[derive(Default)]
pub struct Simulators {
    running: Mutex<HashMap<String, Running>>,
}

/// One running simulator.
struct Running {
    instance: Instance,
    /// The fault injection rules (as text) last put in force on it, so a reconcile that
    /// finds them unchanged leaves them be: a rule for a number of calls counts down, and
    /// putting it in force again would start it over. A new simulator has none.
    faults: String,
}

impl std::fmt::Debug for Simulators {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Simulators")
            .field("running", &self.lock().len())
            .finish()
    }
}

/// `host:port` of a server URL (`https://host:port/sdk`, or `host:port` as a
/// VCenterSimulator's status has it).
pub fn authority(server: &str) -> &str {
    server
        .trim_start_matches("https://")
        .split('/')
        .next()
        .unwrap_or_default()
}

/// The registry key of a VCenterSimulator.
pub fn key(namespace: &str, name: &str) -> String {
    format!("{namespace}/{name}")
}

impl Simulators {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Running>> {
        // A panic elsewhere while holding the lock leaves the map itself intact.
        self.running.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Keeps `instance` as the simulator of `key`.
    pub fn insert(&self, key: &str, instance: Instance) {
        let running = Running {
            instance,
            faults: String::new(),
        };
        if let Some(old) = self.lock().insert(key.to_string(), running) {
            // Replaced (never expected): the old one stops serving as it is dropped.
            drop(old);
        }
    }

    /// Records `rules` (their text; empty for none) as those of the simulator of `key`;
    /// `true` if it runs and they differ from the last recorded, so they are to be put in
    /// force.
    pub fn faults_changed(&self, key: &str, rules: &str) -> bool {
        match self.lock().get_mut(key) {
            Some(running) if running.faults != rules => {
                running.faults = rules.to_string();
                true
            }
            _ => false,
        }
    }

    /// The simulator of `key`, if it runs here.
    pub fn simulator(&self, key: &str) -> Option<Simulator> {
        self.lock().get(key).map(|r| r.instance.simulator().clone())
    }

    /// The simulator serving at `server` (`https://host:port`, as a VSphereVM's
    /// `spec.server` or `VSPHERE_SERVER` names it), if it runs here.
    pub fn serving_at(&self, server: &str) -> Option<Simulator> {
        let addr: SocketAddr = authority(server).parse().ok()?;
        self.lock()
            .values()
            .find(|r| r.instance.addr() == addr)
            .map(|r| r.instance.simulator().clone())
    }

    /// Where and how the simulator of `key` serves, if it runs here.
    pub fn serving(&self, key: &str) -> Option<Serving> {
        self.lock().get(key).map(|r| {
            let i = &r.instance;
            let config = i.simulator().config();
            Serving {
                addr: i.addr(),
                username: config.username.clone(),
                password: config.password.clone(),
                thumbprint: i.cert().thumbprint_sha256.clone(),
            }
        })
    }

    /// Stops the simulator of `key`; `true` if one ran. Its port is closed and its
    /// connections end before this returns.
    pub async fn stop(&self, key: &str) -> bool {
        let instance = self.lock().remove(key).map(|r| r.instance);
        match instance {
            Some(instance) => {
                if let Err(e) = instance.stop().await {
                    tracing::warn!(simulator = key, error = %e, "simulator stopped with an error");
                }
                true
            }
            None => false,
        }
    }

    /// How many run.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Objects of kind `K` waiting for something in a simulator of this process (a VM powered
/// on, a guest's address, an inventory path): each is reconciled once its simulator changes,
/// through the controller's `reconcile_on` stream, instead of being looked at on a timer.
/// One small task per waiting object, never two: a reconcile that finds it still waiting
/// while it already waits adds nothing.
pub struct ChangeWaits<K: Resource<DynamicType = ()>> {
    waiting: Arc<Mutex<HashSet<ObjectRef<K>>>>,
    wake: mpsc::UnboundedSender<ObjectRef<K>>,
}

impl<K> ChangeWaits<K>
where
    K: Resource<DynamicType = ()> + Send + Sync + 'static,
{
    /// The waits, and the stream of objects to reconcile (for `reconcile_on`).
    pub fn new() -> (Self, impl Stream<Item = ObjectRef<K>> + Send + 'static) {
        let (wake, woken) = mpsc::unbounded_channel();
        let stream = futures::stream::unfold(woken, |mut rx| async move {
            rx.recv().await.map(|obj| (obj, rx))
        });
        let waits = ChangeWaits {
            waiting: Arc::default(),
            wake,
        };
        (waits, stream)
    }

    /// Reconciles `obj` at the simulator's next change after `changes` was taken (take it
    /// before reading what is waited for), or once the simulator is gone.
    pub fn wake_on_change(&self, obj: ObjectRef<K>, mut changes: Changes) {
        let first = lock(&self.waiting).insert(obj.clone());
        if !first {
            // Its wait began earlier, so it also hears any change since this `changes`.
            return;
        }
        let waiting = self.waiting.clone();
        let wake = self.wake.clone();
        tokio::spawn(async move {
            changes.next().await;
            lock(&waiting).remove(&obj);
            let _ = wake.send(obj);
        });
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A panic elsewhere while holding the lock leaves the set itself intact.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;
    use infrasim_vsphere_sim::SimConfig;
    use k8s_openapi::api::core::v1::ConfigMap;
    use std::time::Duration;

    #[tokio::test]
    async fn a_waiting_object_is_woken_once_by_its_simulators_change() {
        let sim = Simulator::new(SimConfig::default(), infrasim_clock::SystemClock::shared());
        let (waits, woken) = ChangeWaits::<ConfigMap>::new();
        let mut woken = Box::pin(woken);
        let a = ObjectRef::<ConfigMap>::new("a").within("ns");
        waits.wake_on_change(a.clone(), sim.changes());
        // Asked again while it waits: still one wait, one wakeup.
        waits.wake_on_change(a.clone(), sim.changes());
        let early = tokio::time::timeout(Duration::from_millis(50), woken.next()).await;
        assert!(early.is_err(), "woken before anything changed");
        let vm = sim
            .create_template(&infrasim_vsphere_sim::TemplateSpec::new("t", "DC0"))
            .unwrap();
        assert!(sim.vm(&vm).is_some());
        assert_eq!(woken.next().await, Some(a.clone()));
        let again = tokio::time::timeout(Duration::from_millis(50), woken.next()).await;
        assert!(again.is_err(), "woken twice: {again:?}");
        // Waiting again after the wakeup is a new wait.
        waits.wake_on_change(a.clone(), sim.changes());
        drop(sim);
        assert_eq!(
            woken.next().await,
            Some(a),
            "a simulator gone wakes its waiters"
        );
    }
}
